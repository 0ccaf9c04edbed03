/* kerntuned_int.h - private structures shared by the daemon's files:
 * kerntuned_jobs.c (model-dir reconciliation, signals, timers),
 * kerntuned_ctl.c (control-socket commands), kerntuned_open.c (start-up)
 * and kerntuned_main.c.  Not part
 * of the daemon API; loop thread only. */
#ifndef KT_DAEMON_KERNTUNED_INT_H
#define KT_DAEMON_KERNTUNED_INT_H

#include <cJSON.h>
#include <uv.h>

#include "config/config.h"
#include "daemon/daemon.h"
#include "daemon/engine.h"
#include "measure/measure.h"
#include "storage/storage.h"

#define KT_DAEMON_MAX_JOBS 256
#define KT_DAEMON_STOP_GRACE_MS 120000

struct djob {
    char *file;
    char hash[17]; /* of the file's text: a change restarts */
    struct kt_job *job;
    int present; /* seen in the latest scan */
    int restart; /* start again from the file once ended */
};

struct daemon {
    struct kt_daemon_conf *conf;
    uv_loop_t loop;
    uv_signal_t sighup, sigterm, sigint;
    uv_timer_t status_timer, watchdog_timer, grace_timer;
    struct kt_storage *db;
    struct kt_tracker *tracker;
    struct kt_engine *engine;
    struct kt_ctl *ctl;
    struct djob jobs[KT_DAEMON_MAX_JOBS];
    int njobs;
    int stopping;
    int closed; /* every handle has been closed */
    double started;
};

/* Every *.json file of dir (not starting with '.'), as "dir/name", sorted;
 * the caller frees each name and the array.  KT_ENOENT etc. with a message
 * naming dir when it cannot be read. */
int kt__daemon_list_models(const char *dir, char ***names, int *n, char *err,
                           size_t errlen);
/* Reads the model dir and reconciles the job list with it. */
void kt__daemon_scan_models(struct daemon *d);
int kt__daemon_running_jobs(const struct daemon *d);
/* Trials measured this run over every job. */
int64_t kt__daemon_total_trials(const struct daemon *d);
void kt__daemon_on_signal(uv_signal_t *s, int signum);
void kt__daemon_status_tick(uv_timer_t *t);
void kt__daemon_watchdog_tick(uv_timer_t *t);
/* What `kerntuned -t` checks beyond the syntax: the token file is readable
 * and not empty, the model dir can be listed, the local worker program can
 * be found. */
int kt__daemon_check_files(const struct kt_daemon_conf *conf, char *err,
                           size_t errlen);
/* Opens the database, the tracker (and its local workers), the engine and
 * the control socket of d->conf on d->loop; *token (malloc'd) is the
 * tracker's token, freed by the caller.  What was opened before a failure
 * stays in d for the caller to close. */
int kt__daemon_open(struct daemon *d, char **token, char *err, size_t errlen);
/* The control socket's request handler (kt_ctl_handler_fn). */
void kt__daemon_ctl_handle(void *arg, const cJSON *req, cJSON *resp);

#endif /* KT_DAEMON_KERNTUNED_INT_H */
