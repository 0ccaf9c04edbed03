/* engine_results.c - a measured batch on the loop thread: the tracker's
 * results become the storage's trials, the batch is committed in one
 * transaction (kept and retried while the database refuses it), and only
 * then applied: task scheduler, best program, search feedback, training
 * records and the task-table log (docs/design.md section 1, steps 4-5). */
#include "daemon/engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The batch's trials, pointing into res (borrowed for the tracker's
 * callback) and the round's candidates. */
static void
build_trials(struct kt_job *job, struct kt_round *r,
             const struct kt_result *res, int n)
{
    const struct kt_task *task = &job->tasks.v[r->task];
    const struct kt_task_state *ts = &job->ts[r->task];
    double now = kt_wall_now();
    struct kt_kv *kv;
    int i, k, nkv = 0;

    r->nres = n < r->ncand ? n : r->ncand;
    for (i = 0; i < r->nres; i++)
        nkv += res[i].nkvs + 1 + KT_CONFIRM_NOTES; /* + seed_of/transfer_of */
    r->trials = kt_xcalloc((size_t)(r->nres ? r->nres : 1), sizeof(*r->trials));
    r->kvs = kt_xcalloc((size_t)(nkv ? nkv : 1), sizeof(*r->kvs));
    r->confirmed = kt_xcalloc((size_t)(r->nres ? r->nres : 1), 1);
    nkv = 0;
    for (i = 0; i < r->nres; i++) {
        struct kt_trial *tr = &r->trials[i];
        tr->job_id = job->job_id;
        tr->task_name = task->name;
        tr->target = job->target;
        tr->workload = task->dag->key;
        tr->workload_hash = task->dag->hash;
        tr->config = r->c[i].config;
        tr->sched_hash = r->c[i].hash;
        tr->trial_no = ts->next_trial_no + i;
        tr->result = res[i];
        if (res[i].err_no != 0) {
            tr->result.err_text = res[i].err_text ? res[i].err_text : "";
            tr->result.cost = 0;
        }
        if (tr->result.worker == NULL)
            tr->result.worker = "";
        tr->started = r->submitted > 0 ? now - r->measured_s : now;
        tr->finished = now;
        /* the tracker's notes, then the engine's (engine_confirm.c) */
        kv = &r->kvs[nkv];
        for (k = 0; k < res[i].nkvs; k++)
            kv[k] = res[i].kvs[k];
        tr->result.kvs = kv;
        nkv += res[i].nkvs;
        if (r->c[i].seed_of[0] != '\0') {
            r->kvs[nkv].k = r->c[i].transfer  ? "transfer_of"
                            : r->c[i].revisit ? "revisit_of"
                                              : "seed_of";
            r->kvs[nkv++].v = r->c[i].seed_of;
            tr->result.nkvs++;
        }
        nkv += KT_CONFIRM_NOTES; /* free slots for engine_confirm.c */
    }
}

/* The batch waits for a retry: copy what the tracker only lent. */
static void
own_trials(struct kt_round *r)
{
    int i, k;

    if (r->owned)
        return;
    for (i = 0; i < r->nres; i++) {
        struct kt_result *res = &r->trials[i].result;
        struct kt_kv *kv = (struct kt_kv *)res->kvs;
        res->err_text = res->err_text ? kt_xstrdup(res->err_text) : NULL;
        res->worker = kt_xstrdup(res->worker);
        for (k = 0; k < res->nkvs; k++) {
            kv[k].k = kt_xstrdup(kv[k].k);
            kv[k].v = kt_xstrdup(kv[k].v);
        }
    }
    r->owned = 1;
}

void
kt__task_queue_feedback(struct kt_task_state *ts, struct kt_step *steps,
                        int nsteps, double cost)
{
    struct kt_feedback *f;

    if (ts->npending == ts->cappending) {
        ts->cappending = ts->cappending ? ts->cappending * 2 : 64;
        ts->pending = kt_xrealloc(ts->pending, sizeof(*ts->pending) *
                                                   (size_t)ts->cappending);
    }
    f = &ts->pending[ts->npending++];
    f->steps = steps;
    f->nsteps = nsteps;
    f->cost = cost;
    f->other = 0;
    f->from = NULL;
}

void
kt__task_queue_other(struct kt_task_state *ts, const struct kt_feedback *f)
{
    size_t size = sizeof(*f->steps) * (size_t)(f->nsteps ? f->nsteps : 1);
    struct kt_step *steps = kt_xmalloc(size);

    memcpy(steps, f->steps, size);
    kt__task_queue_feedback(ts, steps, f->nsteps, f->cost);
    ts->pending[ts->npending - 1].other = 1;
    ts->pending[ts->npending - 1].from = f->from;
}

/* The search learns of the result at its next run (see kt_feedback). */
static void
queue_feedback(struct kt_task_state *ts, struct kt_cand *c, double cost)
{
    kt__task_queue_feedback(ts, c->steps, c->nsteps, cost);
    c->steps = NULL; /* the feedback owns them now */
    c->nsteps = 0;
}

/* A task's new best program is offered to every other task of the job as
 * another workload's schedule (kt_search_seed_other, cost per FLOP): it
 * seeds their searches where its steps decode, e.g. layers of one shape
 * that differ only in a folded constant, or tiles that divide another
 * layer's extents. */
static void
share_best(struct kt_job *job, int task, const struct kt_feedback *best)
{
    struct kt_feedback other = *best;
    double flops = kt__job_dag(job, task)->flops;
    int t;

    if (!(flops > 0))
        return;
    other.cost = best->cost / flops;
    other.from = kt__job_dag(job, task);
    for (t = 0; t < job->tasks.n; t++)
        if (t != task)
            kt__task_queue_other(&job->ts[t], &other);
}

/* The batch is in the database: now its results may be used. */
static void
apply_round(struct kt_job *job, struct kt_round *r)
{
    struct kt_task_state *ts = &job->ts[r->task];
    double round_best = KT_SCHED_NO_COST;
    double best = kt_task_sched_best_cost(job->sched, r->task);
    int i, new_best = -1;

    for (i = 0; i < r->nres; i++) {
        const struct kt_trial *res = &r->trials[i];
        struct kt_cand *c = &r->c[i];
        double cost = res->result.cost;
        job->trials++;
        if (res->result.err_no) {
            ts->errors++;
            job->errors++;
        } else {
            if (cost < round_best)
                round_best = cost;
            if (cost < best) {
                best = cost;
                free(ts->best_config);
                ts->best_config = kt_xstrdup(c->config);
                free(ts->best_source);
                ts->best_source = kt_xstrdup(c->source);
                memcpy(ts->best_hash, c->hash, sizeof(ts->best_hash));
                ts->best_unbuilt = 0;
                new_best = ts->npending;
            }
        }
        queue_feedback(ts, c, kt__trial_learning_cost(res));
        if (c->rows != NULL) {
            kt__job_add_record(job, c->rows, c->nrows, r->task,
                               kt__trial_learning_cost(res));
            c->rows = NULL; /* the record owns them now */
        }
    }
    if (new_best >= 0 && kt__job_uses_model(job))
        share_best(job, r->task, &ts->pending[new_best]);
    kt__revisit_collect(job, r, best);
    ts->next_trial_no += r->nres;
    job->rounds++;
    kt_task_sched_update(job->sched, r->task, round_best, r->nres);
    kt__job_log_round(job, r, kt_task_sched_next(job->sched));
    kt__job_start_training(job);
}

static void
retry_timer_cb(uv_timer_t *t)
{
    struct kt_round *r = t->data;

    kt__job_commit_round(r->job, r);
}

void
kt__job_commit_round(struct kt_job *job, struct kt_round *r)
{
    char err[512];
    int rc = kt_storage_write_batch(job->e->o.db, r->trials, (size_t)r->nres,
                                    NULL, err, sizeof(err));

    if (rc != KT_OK) {
        /* Nothing of the batch was stored; keep it and try again. */
        own_trials(r);
        uint64_t delay = 200u << (r->retries < 6 ? r->retries : 6);
        r->retries++;
        log_warnx("engine: job %s: storing %d trials failed (%s); retry %d in "
                  "%llu ms",
                  job->name, r->nres, err, r->retries,
                  (unsigned long long)delay);
        snprintf(job->error, sizeof(job->error), "storage: %.480s", err);
        if (r->retry == NULL) {
            r->retry = kt_xcalloc(1, sizeof(*r->retry));
            uv_timer_init(job->e->o.loop, r->retry);
            r->retry->data = r;
        }
        uv_timer_start(r->retry, retry_timer_cb, delay, 0);
        return;
    }
    job->error[0] = '\0';
    apply_round(job, r);
    job->measuring = NULL;
    kt__job_round_free(r);
    kt__job_maybe_end(job);
    kt__job_kick(job);
}

void
kt__job_round_abandon(struct kt_job *job, struct kt_round *r, int n)
{
    log_warnx("engine: job %s: %d results of an abandoned batch not stored",
              job->name, n);
    job->measuring = NULL;
    kt__job_round_free(r);
    kt__job_maybe_end(job);
}

void
kt__job_measure_done(void *arg, const struct kt_result *res, int n)
{
    struct kt_round *r = arg;
    struct kt_job *job = r->job;

    r->measured_s = kt_now() - r->submitted;
    job->device_busy_s += r->measured_s;
    if (job->abandoned) {
        kt__job_round_abandon(job, r, n);
        return;
    }
    build_trials(job, r, res, n);
    /* A new best waits for its re-timing: the results outlive this call. */
    own_trials(r);
    if (kt__job_confirm_next(job, r))
        return;
    kt__job_commit_round(job, r);
}
