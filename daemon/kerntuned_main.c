/* kerntuned_main.c - the tuning daemon.
 *
 *   kerntuned --config /etc/kerntune/kerntuned.json [-t]
 *
 * Every *.json in the model dir is a job.  SIGHUP re-reads the model dir
 * (new files start, changed ones restart, removed ones stop); SIGTERM and
 * SIGINT stop every job after the batch in flight is committed, then exit 0.
 * Under systemd (Type=notify) it reports READY=1, STATUS=, WATCHDOG=1 and
 * STOPPING=1.  A control socket answers `kerntune status|jobs|tasks|best|
 * pause|resume|rpc-status`. */
#include <cJSON.h>
#include <dirent.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "config/config.h"
#include "daemon/daemon.h"
#include "daemon/engine.h"
#include "measure/measure.h"
#include "storage/storage.h"

#define MAX_JOBS 256
#define STOP_GRACE_MS 120000

struct djob {
    char *file;
    char hash[17];             /* of the file's text: a change restarts */
    struct kt_job *job;
    int present;               /* seen in the latest scan */
    int restart;               /* start again from the file once ended */
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
    struct djob jobs[MAX_JOBS];
    int njobs;
    int stopping;
    int closed;                /* every handle has been closed */
    double started;
};

static void start_job(struct daemon *d, struct djob *dj);

static int
read_file_hash(const char *path, char out[17])
{
    FILE *f = fopen(path, "rb");
    char buf[65536];
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t n, i;

    if (f == NULL)
        return -1;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        for (i = 0; i < n; i++) {
            h ^= (unsigned char)buf[i];
            h *= 0x100000001b3ULL;
        }
    fclose(f);
    kt_hash_hex(h, out);
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

static int
running_jobs(const struct daemon *d)
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

static void
job_ended(void *arg, struct kt_job *job)
{
    struct daemon *d = arg;
    int i;

    for (i = 0; i < d->njobs; i++) {
        struct djob *dj = &d->jobs[i];
        if (dj->job != job)
            continue;
        log_info("kerntuned: job %s (%s) ended: %s%s%s", kt_job_name(job), dj->file,
                 kt_job_state_name(kt_job_state(job)), kt_job_error(job)[0] ? ": " : "",
                 kt_job_error(job));
        /* Finished jobs stay listed until the file changes or goes. */
        if (dj->restart && !d->stopping) {
            kt_job_free(job);
            dj->job = NULL;
            dj->restart = 0;
            start_job(d, dj);
        }
        break;
    }
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
    if (kt_job_start(d->engine, conf, 0, job_ended, d, &dj->job, err, sizeof(err)) != KT_OK) {
        log_err("kerntuned: %s: %s", dj->file, err);
        kt_model_conf_free(conf);
        dj->job = NULL;
        return;
    }
    log_info("kerntuned: job %s started from %s", kt_job_name(dj->job), dj->file);
}

static int
by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads the model dir and reconciles the job list with it. */
static void
scan_models(struct daemon *d)
{
    DIR *dir = opendir(d->conf->model_dir);
    struct dirent *e;
    char *names[MAX_JOBS];
    int n = 0, i, k;

    if (dir == NULL) {
        log_err("kerntuned: model dir %s: %s", d->conf->model_dir, strerror(errno));
        return;
    }
    while ((e = readdir(dir)) != NULL && n < MAX_JOBS) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        names[n] = kt_xmalloc(strlen(d->conf->model_dir) + len + 2);
        sprintf(names[n], "%s/%s", d->conf->model_dir, e->d_name);
        n++;
    }
    closedir(dir);
    qsort(names, (size_t)n, sizeof(names[0]), by_name);
    for (i = 0; i < d->njobs; i++)
        d->jobs[i].present = 0;
    for (k = 0; k < n; k++) {
        char hash[17];
        struct djob *dj = NULL;
        if (read_file_hash(names[k], hash) != 0) {
            free(names[k]);
            continue;
        }
        for (i = 0; i < d->njobs; i++)
            if (strcmp(d->jobs[i].file, names[k]) == 0)
                dj = &d->jobs[i];
        if (dj == NULL) {
            if (d->njobs == MAX_JOBS) {
                log_err("kerntuned: more than %d model files; ignoring %s", MAX_JOBS, names[k]);
                free(names[k]);
                continue;
            }
            dj = &d->jobs[d->njobs++];
            memset(dj, 0, sizeof(*dj));
            dj->file = names[k];
            memcpy(dj->hash, hash, sizeof(hash));
            dj->present = 1;
            start_job(d, dj);
            continue;
        }
        free(names[k]);
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
            start_job(d, dj);   /* a config that failed before may be fixed */
        }
    }
    for (i = 0; i < d->njobs; i++) {
        struct djob *dj = &d->jobs[i];
        if (!dj->present && dj->job != NULL) {
            log_info("kerntuned: %s removed: stopping job %s", dj->file, kt_job_name(dj->job));
            dj->restart = 0;
            kt_job_stop(dj->job);
        }
    }
}

/* ---- control socket ---------------------------------------------------- */

static struct djob *
find_job(struct daemon *d, const cJSON *req, cJSON *resp)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(req, "job");
    int i;

    if (!cJSON_IsString(j)) {
        kt_ctl_fail(resp, "missing \"job\"");
        return NULL;
    }
    for (i = 0; i < d->njobs; i++)
        if (d->jobs[i].job != NULL && strcmp(kt_job_name(d->jobs[i].job), j->valuestring) == 0)
            return &d->jobs[i];
    kt_ctl_fail(resp, "no job \"%s\"", j->valuestring);
    return NULL;
}

static void
add_tasks(struct kt_job *job, cJSON *resp, int best)
{
    cJSON *arr = cJSON_AddArrayToObject(resp, best ? "best" : "tasks");
    struct kt_job_stats s;
    int i;

    kt_job_get_stats(job, &s);
    for (i = 0; i < s.ntasks; i++) {
        struct kt_job_task_info ti;
        cJSON *o = cJSON_CreateObject();
        kt_job_task(job, i, &ti);
        cJSON_AddNumberToObject(o, "id", i);
        cJSON_AddStringToObject(o, "name", ti.name);
        cJSON_AddNumberToObject(o, "weight", ti.weight);
        cJSON_AddNumberToObject(o, "latency_ms", ti.best_cost > 0 ? ti.best_cost * 1e3 : -1);
        cJSON_AddNumberToObject(o, "gflops", ti.best_cost > 0 ? ti.flops / ti.best_cost / 1e9 : -1);
        cJSON_AddNumberToObject(o, "trials", (double)ti.trials);
        cJSON_AddNumberToObject(o, "errors", (double)ti.errors);
        if (best && ti.best_config != NULL)
            cJSON_AddStringToObject(o, "config", ti.best_config);
        cJSON_AddItemToArray(arr, o);
    }
    cJSON_AddNumberToObject(resp, "total_latency_ms", s.total_latency_ms);
    cJSON_AddNumberToObject(resp, "trials", (double)s.trials);
    cJSON_AddNumberToObject(resp, "used_s", s.elapsed_s);
}

static void
handle(void *arg, const cJSON *req, cJSON *resp)
{
    struct daemon *d = arg;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(req, "cmd");
    const char *cmd = cJSON_IsString(c) ? c->valuestring : "";
    struct djob *dj;
    int i;

    if (strcmp(cmd, "status") == 0) {
        int64_t trials = 0;
        for (i = 0; i < d->njobs; i++) {
            struct kt_job_stats s;
            if (d->jobs[i].job == NULL)
                continue;
            kt_job_get_stats(d->jobs[i].job, &s);
            trials += s.trials;
        }
        cJSON_AddNumberToObject(resp, "pid", getpid());
        cJSON_AddNumberToObject(resp, "uptime_s", kt_now() - d->started);
        cJSON_AddNumberToObject(resp, "jobs", running_jobs(d));
        cJSON_AddNumberToObject(resp, "trials", (double)trials);
        cJSON_AddNumberToObject(resp, "workers", d->tracker ? kt_tracker_nworkers(d->tracker, NULL) : 0);
        cJSON_AddStringToObject(resp, "database", d->conf->database);
        cJSON_AddStringToObject(resp, "model_dir", d->conf->model_dir);
        cJSON_AddStringToObject(resp, "listen", d->conf->listen);
        cJSON_AddStringToObject(resp, "state", d->stopping ? "stopping" : "running");
    } else if (strcmp(cmd, "jobs") == 0) {
        cJSON *arr = cJSON_AddArrayToObject(resp, "jobs");
        for (i = 0; i < d->njobs; i++) {
            struct kt_job_stats s;
            cJSON *o;
            if (d->jobs[i].job == NULL)
                continue;
            kt_job_get_stats(d->jobs[i].job, &s);
            o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", kt_job_name(d->jobs[i].job));
            cJSON_AddStringToObject(o, "state", kt_job_state_name(kt_job_state(d->jobs[i].job)));
            cJSON_AddNumberToObject(o, "tasks", s.ntasks);
            cJSON_AddNumberToObject(o, "trials", (double)s.trials);
            cJSON_AddNumberToObject(o, "trials_target", (double)s.budget);
            cJSON_AddNumberToObject(o, "errors", (double)s.errors);
            cJSON_AddNumberToObject(o, "total_latency_ms", s.total_latency_ms);
            cJSON_AddNumberToObject(o, "used_s", s.elapsed_s);
            cJSON_AddStringToObject(o, "key", kt_job_conf(d->jobs[i].job)->target.key);
            cJSON_AddStringToObject(o, "file", d->jobs[i].file);
            if (kt_job_error(d->jobs[i].job)[0])
                cJSON_AddStringToObject(o, "error", kt_job_error(d->jobs[i].job));
            cJSON_AddItemToArray(arr, o);
        }
    } else if (strcmp(cmd, "tasks") == 0 || strcmp(cmd, "best") == 0) {
        if ((dj = find_job(d, req, resp)) == NULL)
            return;
        cJSON_AddStringToObject(resp, "job", kt_job_name(dj->job));
        add_tasks(dj->job, resp, strcmp(cmd, "best") == 0);
    } else if (strcmp(cmd, "pause") == 0 || strcmp(cmd, "resume") == 0) {
        if ((dj = find_job(d, req, resp)) == NULL)
            return;
        if (strcmp(cmd, "pause") == 0)
            kt_job_pause(dj->job);
        else
            kt_job_resume(dj->job);
        cJSON_AddStringToObject(resp, "job", kt_job_name(dj->job));
        cJSON_AddStringToObject(resp, "state", kt_job_state_name(kt_job_state(dj->job)));
    } else if (strcmp(cmd, "rpc-status") == 0) {
        cJSON *q = cJSON_AddArrayToObject(resp, "queues");
        cJSON_AddArrayToObject(resp, "workers");
        for (i = 0; i < d->njobs; i++) {
            const char *key;
            cJSON *o;
            int k, seen = 0;
            if (d->jobs[i].job == NULL)
                continue;
            key = kt_job_conf(d->jobs[i].job)->target.key;
            for (k = 0; k < i; k++)
                if (d->jobs[k].job != NULL &&
                    strcmp(kt_job_conf(d->jobs[k].job)->target.key, key) == 0)
                    seen = 1;
            if (seen)
                continue;
            o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "key", key);
            cJSON_AddNumberToObject(o, "workers", d->tracker ? kt_tracker_nworkers(d->tracker, key) : 0);
            cJSON_AddItemToArray(q, o);
        }
    } else {
        kt_ctl_fail(resp, "unknown command \"%s\"", cmd);
    }
}

/* ---- signals, timers ---------------------------------------------------- */

static void
grace_expired(uv_timer_t *t)
{
    struct daemon *d = t->data;

    int i;

    log_warnx("kerntuned: jobs did not stop within %d s; abandoning the batches "
              "in flight (they are not stored and will be measured again)",
              STOP_GRACE_MS / 1000);
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
    uv_timer_start(&d->grace_timer, grace_expired, STOP_GRACE_MS, 0);
    for (i = 0; i < d->njobs; i++) {
        if (d->jobs[i].job == NULL)
            continue;
        d->jobs[i].restart = 0;
        kt_job_stop(d->jobs[i].job);   /* may end it (and close) at once */
    }
    if (live_jobs(d) == 0)
        close_everything(d);
}

static void
on_signal(uv_signal_t *s, int signum)
{
    struct daemon *d = s->data;

    if (signum == SIGHUP) {
        if (d->stopping)
            return;
        kt_notify_reloading();
        log_info("kerntuned: SIGHUP: re-reading %s", d->conf->model_dir);
        scan_models(d);
        kt_notify_ready();
        return;
    }
    begin_stop(d, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

static void
status_tick(uv_timer_t *t)
{
    struct daemon *d = t->data;
    int64_t trials = 0;
    int i;

    for (i = 0; i < d->njobs; i++) {
        struct kt_job_stats s;
        if (d->jobs[i].job == NULL)
            continue;
        kt_job_get_stats(d->jobs[i].job, &s);
        trials += s.trials;
    }
    kt_notify_status("%d jobs, %lld trials this run, %d workers%s", running_jobs(d),
                     (long long)trials, d->tracker ? kt_tracker_nworkers(d->tracker, NULL) : 0,
                     d->stopping ? ", stopping" : "");
}

static void
watchdog_tick(uv_timer_t *t)
{
    (void)t;
    kt_notify_watchdog();
}

/* "KEY=TOKEN_FILE" entries into tokens (their strings are malloc'd and
 * stay for the daemon's lifetime). */
static int
read_key_tokens(const struct kt_strlist *l, struct kt_key_token *tokens,
                char *err, size_t errlen)
{
    char buf[1024];
    int i;

    if (l->n > 32)
        return kt_seterr(err, errlen, KT_ECONFIG, "at most 32 entries");
    for (i = 0; i < l->n; i++) {
        const char *eq = strchr(l->v[i], '=');
        if (eq == NULL || eq == l->v[i] || eq[1] == '\0')
            return kt_seterr(err, errlen, KT_ECONFIG,
                             "entry %d '%s' is not KEY=TOKEN_FILE", i,
                             l->v[i]);
        if (kt_token_read(eq + 1, buf, sizeof(buf), err, errlen) < 0)
            return KT_ECONFIG;
        tokens[i].key = kt_xstrdup(l->v[i]);
        ((char *)tokens[i].key)[eq - l->v[i]] = '\0';
        tokens[i].token = kt_xstrdup(buf);
    }
    return 0;
}

static char *
read_token(const char *path, char *err, size_t errlen)
{
    char buf[1024];

    if (kt_token_read(path, buf, sizeof(buf), err, errlen) < 0)
        return NULL;
    return kt_xstrdup(buf);
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'}, {"test", no_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
    };
    const char *conf_path = "/etc/kerntune/kerntuned.json";
    struct kt_storage_opts so;
    struct kt_tracker_opts to;
    struct kt_engine_opts eo;
    struct daemon d;
    char err[1024], *token = NULL, nthreads[32];
    struct kt_key_token keytoks[32] = {{NULL, NULL}};
    int c, test = 0, i, status = 1;
    uint64_t wd;

    kt_log_init(LOG_INFO);
    signal(SIGPIPE, SIG_IGN);
    while ((c = getopt_long(argc, argv, "c:th", opts, NULL)) != -1) {
        switch (c) {
        case 'c': conf_path = optarg; break;
        case 't': test = 1; break;
        case 'h':
            printf("usage: kerntuned [--config FILE] [-t]\n");
            return 0;
        default:
            fprintf(stderr, "usage: kerntuned [--config FILE] [-t]\n");
            return 2;
        }
    }
    memset(&d, 0, sizeof(d));
    if (kt_daemon_conf_load(conf_path, &d.conf, err, sizeof(err)) != KT_OK) {
        log_err("kerntuned: %s", err);
        return 1;
    }
    kt_log_init(d.conf->log_level);
    if (test) {
        printf("%s: configuration OK\n", conf_path);
        kt_daemon_conf_free(d.conf);
        return 0;
    }
    /* The pool runs searches and training; size it before the first job. */
    snprintf(nthreads, sizeof(nthreads), "%lld", (long long)(d.conf->threads > 0 ? d.conf->threads : 4));
    setenv("UV_THREADPOOL_SIZE", nthreads, 1);
    d.started = kt_now();
    uv_loop_init(&d.loop);
    memset(&so, 0, sizeof(so));
    so.busy_timeout_ms = KT_ENGINE_DB_BUSY_MS;
    if (kt_storage_open(&d.db, d.conf->database, &so, err, sizeof(err)) != KT_OK) {
        log_err("kerntuned: %s", err);
        goto out;
    }
    if (d.conf->token_file != NULL && (token = read_token(d.conf->token_file, err, sizeof(err))) == NULL) {
        log_err("kerntuned: %s", err);
        goto out;
    }
    if (read_key_tokens(&d.conf->key_tokens, keytoks, err, sizeof(err)) < 0) {
        log_err("kerntuned: %s: key_tokens: %s", conf_path, err);
        goto out;
    }
    kt_tracker_default_opts(&to);
    to.host = d.conf->listen_host;
    to.port = d.conf->listen_port;
    to.token = token;
    to.key_tokens = keytoks;
    to.nkey_tokens = d.conf->key_tokens.n;
    to.max_retries = (int)d.conf->max_job_retries;
    to.heartbeat_lost_ms = (int)(d.conf->worker_timeout_s * 1000);
    if (kt_tracker_new(&d.tracker, &d.loop, &to, err, sizeof(err)) != KT_OK) {
        log_err("kerntuned: tracker %s: %s", d.conf->listen, err);
        goto out;
    }
    if (d.conf->local_workers > 0 &&
        kt_tracker_spawn_local(d.tracker, (int)d.conf->local_workers, d.conf->worker_path,
                               d.conf->local_worker_key, "build,run", err, sizeof(err)) != KT_OK) {
        log_err("kerntuned: local workers: %s", err);
        kt_tracker_close(d.tracker);
        d.tracker = NULL;
        goto out;
    }
    memset(&eo, 0, sizeof(eo));
    eo.loop = &d.loop;
    eo.db = d.db;
    eo.tracker = d.tracker;
    eo.log_dir = d.conf->log_dir;
    kt_engine_new(&d.engine, &eo);
    if (kt_ctl_new(&d.ctl, &d.loop, d.conf->control_socket, handle, &d, err, sizeof(err)) != KT_OK) {
        log_err("kerntuned: control socket: %s", err);
        kt_tracker_close(d.tracker);
        d.tracker = NULL;
        goto out;
    }
    uv_signal_init(&d.loop, &d.sighup);
    uv_signal_init(&d.loop, &d.sigterm);
    uv_signal_init(&d.loop, &d.sigint);
    d.sighup.data = d.sigterm.data = d.sigint.data = &d;
    uv_signal_start(&d.sighup, on_signal, SIGHUP);
    uv_signal_start(&d.sigterm, on_signal, SIGTERM);
    uv_signal_start(&d.sigint, on_signal, SIGINT);
    uv_timer_init(&d.loop, &d.status_timer);
    uv_timer_init(&d.loop, &d.watchdog_timer);
    uv_timer_init(&d.loop, &d.grace_timer);
    d.status_timer.data = d.watchdog_timer.data = d.grace_timer.data = &d;
    uv_timer_start(&d.status_timer, status_tick, 1000, 5000);
    wd = kt_notify_watchdog_usec();
    if (wd > 0)
        uv_timer_start(&d.watchdog_timer, watchdog_tick, 0, wd / 2000 ? wd / 2000 : 1);
    scan_models(&d);
    log_info("kerntuned: ready: workers on %s, %d jobs, database %s", d.conf->listen,
             running_jobs(&d), d.conf->database);
    kt_notify_ready();
    uv_run(&d.loop, UV_RUN_DEFAULT);
    status = 0;
out:
    uv_run(&d.loop, UV_RUN_DEFAULT);
    for (i = 0; i < d.njobs; i++) {
        kt_job_free(d.jobs[i].job);
        free(d.jobs[i].file);
    }
    kt_engine_free(d.engine);
    if (uv_loop_close(&d.loop) != 0) {
        log_err("kerntuned: event loop still had handles at exit");
        status = 1;
    }
    kt_storage_close(d.db);
    free(token);
    for (i = 0; i < (int)KT_ARRAY_LEN(keytoks); i++) {
        free((char *)keytoks[i].key);
        free((char *)keytoks[i].token);
    }
    kt_daemon_conf_free(d.conf);
    log_info("kerntuned: exit %d", status);
    return status;
}
