/* kerntuned_jobs.c - the daemon's jobs: every *.json in the model dir is
 * one; SIGHUP re-reads the dir (new files start, changed ones restart,
 * removed ones stop); SIGTERM and SIGINT stop every job after the batch in
 * flight is committed.  Also the status and watchdog timers. */
#include <dirent.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/kerntuned_int.h"

static void start_job(struct daemon *d, struct djob *dj);

/* The hash of a file's text: a changed config restarts its job. */
static int
read_file_hash(const char *path, char out[17])
{
    FILE *f = fopen(path, "rb");
    struct kt_buf b;
    char buf[65536];
    size_t n;

    if (f == NULL)
        return -1;
    kt_buf_init(&b);
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        kt_buf_put(&b, buf, n);
    fclose(f);
    kt_hash_hex(kt_hash64(b.p, b.len), out);
    kt_buf_free(&b);
    return 0;
}

/* Runs once, from whichever event finishes the stop (the last job ending,
 * the grace timer, or a stop with nothing running). */
static void
close_everything(struct daemon *d)
{
    if (d->closed)
        return;
    d->closed = 1;
    uv_close((uv_handle_t *)&d->sighup, NULL);
    uv_close((uv_handle_t *)&d->sigterm, NULL);
    uv_close((uv_handle_t *)&d->sigint, NULL);
    uv_close((uv_handle_t *)&d->status_timer, NULL);
    uv_close((uv_handle_t *)&d->watchdog_timer, NULL);
    uv_close((uv_handle_t *)&d->grace_timer, NULL);
    kt_ctl_close(d->ctl);
    d->ctl = NULL;
    kt_tracker_close(d->tracker);
    d->tracker = NULL;
}

int64_t
kt__daemon_total_trials(const struct daemon *d)
{
    int64_t trials = 0;
    int i;

    for (i = 0; i < d->njobs; i++) {
        struct kt_job_stats s;
        if (d->jobs[i].job == NULL)
            continue;
        kt_job_get_stats(d->jobs[i].job, &s);
        trials += s.trials;
    }
    return trials;
}

int
kt__daemon_running_jobs(const struct daemon *d)
{
    int i, n = 0;

    for (i = 0; i < d->njobs; i++)
        n += d->jobs[i].job != NULL;
    return n;
}

/* Jobs whose end callback has not run yet. */
static int
live_jobs(const struct daemon *d)
{
    int i, n = 0;

    for (i = 0; i < d->njobs; i++)
        n += d->jobs[i].job != NULL && kt_job_active(d->jobs[i].job);
    return n;
}

/* glibc keeps what the pool threads and xgboost's threads free in their
 * arenas (a training's histograms, a search's population) at the arena's
 * high-water mark.  Called when a job ends (its searches, records and
 * model are freed) and on every status tick, so that the daemon's RSS
 * follows what it holds rather than the peak of each thread. */
static void
return_free_memory(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

static void
job_ended(void *arg, struct kt_job *job)
{
    struct daemon *d = arg;
    int i;

    for (i = 0; i < d->njobs; i++) {
        struct djob *dj = &d->jobs[i];
        if (dj->job != job)
            continue;
        log_info("kerntuned: job %s (%s) ended: %s%s%s", kt_job_name(job),
                 dj->file, kt_job_state_name(kt_job_state(job)),
                 kt_job_error(job)[0] ? ": " : "", kt_job_error(job));
        /* Finished jobs stay listed until the file changes or goes. */
        if (dj->restart && !d->stopping) {
            kt_job_free(job);
            dj->job = NULL;
            dj->restart = 0;
            start_job(d, dj);
        }
        break;
    }
    return_free_memory();
    if (d->stopping && live_jobs(d) == 0)
        close_everything(d);
}

static void
start_job(struct daemon *d, struct djob *dj)
{
    struct kt_model_conf *conf = NULL;
    char err[1024];

    if (kt_model_conf_load(dj->file, &conf, err, sizeof(err)) != KT_OK) {
        /* The error names file, line and key; other jobs keep running. */
        log_err("kerntuned: %s", err);
        return;
    }
    if (kt_job_start(d->engine, conf, 0, job_ended, d, &dj->job, err,
                     sizeof(err)) != KT_OK) {
        log_err("kerntuned: %s: %s", dj->file, err);
        kt_model_conf_free(conf);
        dj->job = NULL;
        return;
    }
    log_info("kerntuned: job %s started from %s", kt_job_name(dj->job),
             dj->file);
}

static int
by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int
kt__daemon_list_models(const char *dir_path, char ***names, int *n, char *err,
                       size_t errlen)
{
    DIR *dir = opendir(dir_path);
    struct dirent *e;
    char **v = NULL;
    int nv = 0, cap = 0;

    *names = NULL;
    *n = 0;
    if (dir == NULL)
        return kt_seterr(err, errlen, -errno, "model dir %s: %s", dir_path,
                         strerror(errno));
    while ((e = readdir(dir)) != NULL) {
        size_t len = strlen(e->d_name);
        struct kt_buf path;
        if (e->d_name[0] == '.' || len < 6 ||
            strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        if (nv == cap) {
            cap = cap ? cap * 2 : 64;
            v = kt_xrealloc(v, sizeof(*v) * (size_t)cap);
        }
        kt_buf_init(&path);
        kt_buf_printf(&path, "%s/%s", dir_path, e->d_name);
        v[nv++] = kt_buf_take(&path);
    }
    closedir(dir);
    if (nv > 0)
        qsort(v, (size_t)nv, sizeof(v[0]), by_name);
    *names = v;
    *n = nv;
    return KT_OK;
}

/* The job of a listed file, new (started) or known (restarted when its
 * text changed, started again when it had failed). */
static void
reconcile_file(struct daemon *d, char *name)
{
    char hash[17];
    struct djob *dj = NULL;
    int i;

    if (read_file_hash(name, hash) != 0) {
        log_err("kerntuned: %s: %s", name, strerror(errno));
        free(name);
        return;
    }
    for (i = 0; i < d->njobs; i++)
        if (strcmp(d->jobs[i].file, name) == 0)
            dj = &d->jobs[i];
    if (dj == NULL) {
        if (d->njobs == KT_DAEMON_MAX_JOBS) {
            log_err("kerntuned: more than %d model files; ignoring %s",
                    KT_DAEMON_MAX_JOBS, name);
            free(name);
            return;
        }
        dj = &d->jobs[d->njobs++];
        memset(dj, 0, sizeof(*dj));
        dj->file = name;
        memcpy(dj->hash, hash, sizeof(hash));
        dj->present = 1;
        start_job(d, dj);
        return;
    }
    free(name);
    dj->present = 1;
    if (strcmp(dj->hash, hash) != 0) {
        memcpy(dj->hash, hash, sizeof(hash));
        log_info("kerntuned: %s changed: reloading", dj->file);
        if (dj->job == NULL) {
            start_job(d, dj);
        } else {
            enum kt_job_state s = kt_job_state(dj->job);
            if (s == KT_JOB_DONE || s == KT_JOB_FAILED) {
                kt_job_free(dj->job);
                dj->job = NULL;
                start_job(d, dj);
            } else {
                dj->restart = 1;
                kt_job_stop(dj->job);
            }
        }
    } else if (dj->job == NULL) {
        start_job(d, dj); /* a config that failed before may be fixed */
    }
}

void
kt__daemon_scan_models(struct daemon *d)
{
    char **names, err[512];
    int n, i, k;

    if (kt__daemon_list_models(d->conf->model_dir, &names, &n, err,
                               sizeof(err)) != KT_OK) {
        log_err("kerntuned: %s", err);
        return;
    }
    for (i = 0; i < d->njobs; i++)
        d->jobs[i].present = 0;
    for (k = 0; k < n; k++)
        reconcile_file(d, names[k]); /* takes the name */
    free(names);
    for (i = 0; i < d->njobs; i++) {
        struct djob *dj = &d->jobs[i];
        if (!dj->present && dj->job != NULL) {
            log_info("kerntuned: %s removed: stopping job %s", dj->file,
                     kt_job_name(dj->job));
            dj->restart = 0;
            kt_job_stop(dj->job);
        }
    }
}

/* ---- signals, timers ---------------------------------------------------- */

static void
grace_expired(uv_timer_t *t)
{
    struct daemon *d = t->data;

    int i;

    log_warnx("kerntuned: jobs did not stop within %d s; abandoning the "
              "batches "
              "in flight (they are not stored and will be measured again)",
              KT_DAEMON_STOP_GRACE_MS / 1000);
    for (i = 0; i < d->njobs; i++)
        if (d->jobs[i].job != NULL && kt_job_active(d->jobs[i].job))
            kt_job_abandon(d->jobs[i].job);
    close_everything(d);
}

static void
begin_stop(struct daemon *d, const char *why)
{
    int i;

    if (d->stopping)
        return;
    d->stopping = 1;
    kt_notify_stopping();
    log_info("kerntuned: %s: stopping", why);
    uv_timer_start(&d->grace_timer, grace_expired, KT_DAEMON_STOP_GRACE_MS, 0);
    for (i = 0; i < d->njobs; i++) {
        if (d->jobs[i].job == NULL)
            continue;
        d->jobs[i].restart = 0;
        kt_job_stop(d->jobs[i].job); /* may end it (and close) at once */
    }
    if (live_jobs(d) == 0)
        close_everything(d);
}

void
kt__daemon_on_signal(uv_signal_t *s, int signum)
{
    struct daemon *d = s->data;

    if (signum == SIGHUP) {
        if (d->stopping)
            return;
        kt_notify_reloading();
        log_info("kerntuned: SIGHUP: re-reading %s", d->conf->model_dir);
        kt__daemon_scan_models(d);
        kt_notify_ready();
        return;
    }
    begin_stop(d, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

/* systemd's STATUS= line: the workers, then every job's trials / budget,
 * percent and ETA ("2 jobs, 3 workers: resnet50 2999/20000 trials (15.0%),
 * ETA 1h02m; tiny 64/64 trials (100.0%), done"). */
void
kt__daemon_status_tick(uv_timer_t *t)
{
    struct daemon *d = t->data;
    struct kt_buf b;
    int i, n = 0;

    kt_buf_init(&b);
    kt_buf_printf(&b, "%d jobs, %d workers%s", kt__daemon_running_jobs(d),
                  d->tracker ? kt_tracker_nworkers(d->tracker, NULL) : 0,
                  d->stopping ? ", stopping" : "");
    for (i = 0; i < d->njobs; i++) {
        struct kt_job_stats s;
        struct kt_progress p;
        if (d->jobs[i].job == NULL)
            continue;
        kt_job_get_stats(d->jobs[i].job, &s);
        kt_progress_compute(&p, s.trials, s.budget, s.resumed, s.elapsed_s);
        kt_buf_printf(&b, "%s %s ", n++ ? ";" : ":",
                      kt_job_name(d->jobs[i].job));
        kt_progress_format(&b, &p);
    }
    kt_notify_status("%s", b.p);
    kt_buf_free(&b);
    return_free_memory();
}

void
kt__daemon_watchdog_tick(uv_timer_t *t)
{
    (void)t;
    kt_notify_watchdog();
}
