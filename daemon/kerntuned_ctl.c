/* kerntuned_ctl.c - the daemon's control-socket commands (`kerntune
 * status|jobs|tasks|best|pause|resume|rpc-status`; docs/daemon.md). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "daemon/kerntuned_int.h"

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
        if (d->jobs[i].job != NULL &&
            strcmp(kt_job_name(d->jobs[i].job), j->valuestring) == 0)
            return &d->jobs[i];
    kt_ctl_fail(resp, "no job \"%s\"", j->valuestring);
    return NULL;
}

/* What the daemon's allocations hold (heap_bytes) against what the
 * allocator keeps (heap_free_bytes): RSS that grows with the first is data,
 * with the second fragmentation. */
static void
add_heap(cJSON *resp)
{
#ifdef __GLIBC__
    struct mallinfo2 mi = mallinfo2();
    cJSON_AddNumberToObject(resp, "heap_bytes",
                            (double)(mi.uordblks + mi.hblkhd));
    cJSON_AddNumberToObject(resp, "heap_free_bytes", (double)mi.fordblks);
#else
    (void)resp;
#endif
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
        cJSON_AddNumberToObject(o, "latency_ms", ti.latency_ms);
        cJSON_AddNumberToObject(o, "gflops", ti.gflops);
        cJSON_AddNumberToObject(o, "trials", (double)ti.trials);
        cJSON_AddNumberToObject(o, "errors", (double)ti.errors);
        if (best && ti.best_config != NULL)
            cJSON_AddStringToObject(o, "config", ti.best_config);
        cJSON_AddItemToArray(arr, o);
    }
    cJSON_AddNumberToObject(resp, "total_latency_ms", s.total_latency_ms);
    cJSON_AddNumberToObject(resp, "trials", (double)s.trials);
    cJSON_AddNumberToObject(resp, "used_s", s.elapsed_s);
    kt_ctl_add_progress(resp, s.trials, s.budget, s.resumed, s.elapsed_s);
}

void
kt__daemon_ctl_handle(void *arg, const cJSON *req, cJSON *resp)
{
    struct daemon *d = arg;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(req, "cmd");
    const char *cmd = cJSON_IsString(c) ? c->valuestring : "";
    struct djob *dj;
    int i;

    if (strcmp(cmd, "status") == 0) {
        int64_t trials = kt__daemon_total_trials(d);
        cJSON_AddNumberToObject(resp, "pid", getpid());
        cJSON_AddNumberToObject(resp, "uptime_s", kt_now() - d->started);
        cJSON_AddNumberToObject(resp, "jobs", kt__daemon_running_jobs(d));
        cJSON_AddNumberToObject(resp, "trials", (double)trials);
        cJSON_AddNumberToObject(resp, "workers",
                                d->tracker
                                    ? kt_tracker_nworkers(d->tracker, NULL)
                                    : 0);
        cJSON_AddStringToObject(resp, "database", d->conf->database);
        cJSON_AddStringToObject(resp, "model_dir", d->conf->model_dir);
        cJSON_AddStringToObject(resp, "listen", d->conf->listen);
        cJSON_AddStringToObject(resp, "state",
                                d->stopping ? "stopping" : "running");
        add_heap(resp);
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
            cJSON_AddStringToObject(o, "state",
                                    kt_job_state_name(
                                        kt_job_state(d->jobs[i].job)));
            cJSON_AddNumberToObject(o, "tasks", s.ntasks);
            cJSON_AddNumberToObject(o, "trials", (double)s.trials);
            kt_ctl_add_progress(o, s.trials, s.budget, s.resumed, s.elapsed_s);
            cJSON_AddNumberToObject(o, "errors", (double)s.errors);
            cJSON_AddNumberToObject(o, "feature_errors",
                                    (double)s.feature_errors);
            cJSON_AddNumberToObject(o, "warm_skipped", (double)s.warm_skipped);
            cJSON_AddNumberToObject(o, "confirmed", (double)s.confirmed);
            cJSON_AddNumberToObject(o, "unconfirmed", (double)s.unconfirmed);
            cJSON_AddNumberToObject(o, "total_latency_ms", s.total_latency_ms);
            cJSON_AddNumberToObject(o, "peak_gflops", s.peak_gflops);
            cJSON_AddNumberToObject(o, "used_s", s.elapsed_s);
            cJSON_AddStringToObject(o, "key",
                                    kt_job_conf(d->jobs[i].job)->target.key);
            cJSON_AddStringToObject(o, "file", d->jobs[i].file);
            if (kt_job_error(d->jobs[i].job)[0])
                cJSON_AddStringToObject(o, "error",
                                        kt_job_error(d->jobs[i].job));
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
        cJSON_AddStringToObject(resp, "state",
                                kt_job_state_name(kt_job_state(dj->job)));
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
            cJSON_AddNumberToObject(o, "workers",
                                    d->tracker
                                        ? kt_tracker_nworkers(d->tracker, key)
                                        : 0);
            cJSON_AddItemToArray(q, o);
        }
    } else {
        kt_ctl_fail(resp, "unknown command \"%s\"", cmd);
    }
}
