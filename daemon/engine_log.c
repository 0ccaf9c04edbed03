/* engine_log.c - a job's round written to its task-table log (and echoed
 * to stderr by `kerntune tune`). */
#include "daemon/engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
kt__job_log_round(struct kt_job *job, struct kt_round *r, int next_id)
{
    struct kt_tasklog_task *rows = kt_xcalloc((size_t)job->tasks.n,
                                              sizeof(*rows));
    struct kt_tasklog_cand *marks = kt_xcalloc((size_t)(r->nres ? r->nres : 1),
                                               sizeof(*marks));
    struct kt_tasklog_round lr;
    struct kt_tasklog_measure m;
    char err[512];
    int i;

    for (i = 0; i < job->tasks.n; i++) {
        struct kt_job_task_info ti;
        kt_job_task(job, i, &ti);
        rows[i].id = i;
        rows[i].name = ti.name;
        rows[i].weight = ti.weight;
        rows[i].latency_ms = ti.latency_ms;
        rows[i].gflops = ti.gflops;
        rows[i].trials = ti.trials;
        rows[i].errors = ti.errors;
    }
    for (i = 0; i < r->nres; i++) {
        int e = r->trials[i].result.err_no;
        int build_fail = e == KT_MERR_INSTANTIATION ||
                         e == KT_MERR_COMPILE_HOST ||
                         e == KT_MERR_COMPILE_DEVICE ||
                         e == KT_MERR_BUILD_TIMEOUT;
        marks[i].build = e == KT_MERR_BUILD_TIMEOUT ? KT_MARK_TIMEOUT
                         : build_fail               ? KT_MARK_ERROR
                                                    : KT_MARK_OK;
        marks[i].run = build_fail                 ? KT_MARK_NONE
                       : e == KT_MERR_RUN_TIMEOUT ? KT_MARK_TIMEOUT
                       : e                        ? KT_MARK_ERROR
                                                  : KT_MARK_OK;
    }
    memset(&lr, 0, sizeof(lr));
    lr.job = job->name;
    lr.round = job->rounds;
    lr.wall_time = kt_wall_now();
    lr.table.ntasks = job->tasks.n;
    lr.table.tasks = rows;
    lr.table.total_latency_ms = kt_task_sched_total_latency_ms(job->sched);
    lr.table.trials = job->trials;
    lr.table.used_s = kt_now() - job->started;
    lr.table.next_id = next_id;
    lr.table.budget = job->budget;
    {
        struct kt_progress p;
        kt_progress_compute(&p, job->trials, job->budget, job->resumed_trials,
                            lr.table.used_s);
        lr.table.eta_s = p.eta_s;
    }
    lr.search = &r->stats;
    memset(&m, 0, sizeof(m));
    m.ncand = r->nres;
    m.cand = marks;
    m.batch = r->nres;
    m.time_s = r->measured_s;
    lr.measure = &m;
    lr.train = job->last_train.records ? &job->last_train : NULL;
    if (job->e->log_dir != NULL &&
        kt_tasklog_write(job->e->log_dir, &lr, 0, err, sizeof(err)) != KT_OK)
        log_warnx("engine: job %s: task-table log: %s", job->name, err);
    if (job->e->o.echo_log) {
        struct kt_buf b;
        kt_buf_init(&b);
        kt_tasklog_format_round(&b, &lr, 0);
        fputs(b.p, stderr);
        kt_buf_free(&b);
    }
    free(rows);
    free(marks);
}
