/* engine_peak.c - the target's float FMA peak, timed once per job: a
 * module of register-only FMA chains (kt_codegen_peak_probe) built with
 * the job's compiler line and run on a worker of its key like a
 * candidate, but never stored as a trial.  The task scheduler takes it as
 * the roofline of every task (docs/design.md 2.3); the status and the log
 * show it.  Without it (no worker answered, the probe failed) the
 * scheduler is Ansor's.  A job whose kernels use every CPU of the local
 * workers' host (quiet_measure) times it alone, before its first search,
 * as its batches are: a search beside a 2-thread probe on 2 CPUs made it
 * read 52.5 GFLOPS instead of ~230. */
#include "daemon/engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The probe outlives its job when the job ends first (nothing waits for
 * it): kt_job_free clears job, and the tracker's callback frees it. */
struct kt_peak_probe {
    struct kt_job *job;
};

static void
peak_result(struct kt_job *job, const struct kt_result *res, int n)
{
    const char *threads_kv;
    double fastest;
    int threads, i;

    if (n != 1 || res->err_no != 0 || !(res->cost > 0)) {
        log_warnx("engine: job %s: FMA peak not measured (err_no %d%s%s): "
                  "rounds by the gradient without a roofline",
                  job->name, n == 1 ? res->err_no : -1,
                  n == 1 && res->err_text && *res->err_text ? ": " : "",
                  n == 1 && res->err_text ? res->err_text : "");
        return;
    }
    threads_kv = kt_result_kv(res, "kernel_threads");
    threads = threads_kv != NULL ? atoi(threads_kv) : 0;
    if (threads < 1)
        threads = job->mo.threads > 0 ? job->mo.threads : 1;
    /* The wall time of the fastest repeat: a cost at CPU time (cpu_cost)
     * is optimistic on several threads, whose team idles between calls,
     * and anything that disturbed a repeat only made it slower. */
    fastest = res->cost;
    for (i = 0; i < res->ncosts; i++)
        if (res->costs[i] > 0 && res->costs[i] < fastest)
            fastest = res->costs[i];
    job->peak_flops = threads * kt_peak_probe_flops(&job->cg) / fastest;
    if (job->sched != NULL)
        kt_task_sched_set_peak(job->sched, job->peak_flops);
    log_info("engine: job %s: FMA peak %.1f GFLOPS on %d thread%s (worker %s)",
             job->name, job->peak_flops / 1e9, threads, threads == 1 ? "" : "s",
             res->worker != NULL ? res->worker : "?");
}

static void
peak_done(void *arg, const struct kt_result *res, int n)
{
    struct kt_peak_probe *p = arg;
    struct kt_job *job = p->job;

    free(p);
    if (job == NULL)
        return;
    job->probe = NULL;
    peak_result(job, res, n);
    kt__job_kick(job); /* a quiet job's rounds waited for it */
}

void
kt__job_probe_detach(struct kt_job *job)
{
    if (job->probe != NULL)
        job->probe->job = NULL;
    job->probe = NULL;
}

void
kt__job_probe_peak(struct kt_job *job)
{
    struct kt_measure_opts full_timing = job->mo;
    struct kt_candidate c;
    struct kt_buf src;
    char err[256];

    /* A test engine's submit function measures rounds only. */
    job->peak_probed = 1;
    if (job->e->o.submit != NULL || job->e->o.tracker == NULL)
        return;
    full_timing.stop_above_s = 0;
    full_timing.stop_ratio = 0;
    full_timing.settle = 0;
    kt_buf_init(&src);
    kt_codegen_peak_probe(&job->cg, &src);
    memset(&c, 0, sizeof(c));
    c.source = src.p;
    c.cc = job->cc;
    job->probe = kt_xcalloc(1, sizeof(*job->probe));
    job->probe->job = job;
    if (kt_tracker_submit(job->e->o.tracker, job->conf->target.key, &c, 1,
                          &full_timing, peak_done, job->probe, err,
                          sizeof(err)) != KT_OK) {
        free(job->probe);
        job->probe = NULL;
        log_warnx("engine: job %s: FMA peak not measured: %s", job->name, err);
    }
    kt_buf_free(&src);
}
