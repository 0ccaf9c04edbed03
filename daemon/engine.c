/* engine.c - rounds of a job on the loop thread: training, ending, search
 * and submit (see engine.h; measured batches are committed and applied in
 * engine_results.c, jobs start in engine_start.c). */
#include "daemon/engine_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* ---- small helpers ---------------------------------------------------- */

const char *
kt_job_state_name(enum kt_job_state s)
{
    static const char *const names[] = {"starting", "running", "paused",
                                        "stopping", "done",    "failed"};
    return (unsigned)s < KT_ARRAY_LEN(names) ? names[s] : "?";
}

const struct kt_dag *
kt__job_dag(const struct kt_job *job, int task)
{
    return job->tasks.v[task].dag;
}

const struct kt_model_conf *
kt__job_conf(const struct kt_job *job)
{
    return job->conf;
}

struct kt_xgb_model *
kt__job_model(const struct kt_job *job)
{
    return job->model;
}

int
kt__job_vector_bytes(const struct kt_job *job)
{
    return job->cg.vector_bytes;
}

int
kt__job_search_threads(const struct kt_job *job)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);

    if (!job->quiet_measure || cores < 2)
        return 1;
    return cores > 64 ? 64 : (int)cores;
}

static void
record_release(struct kt_record *r)
{
    if (--r->refs > 0)
        return;
    free(r->rows);
    free(r);
}

static int
train_window(const struct kt_job *job)
{
    return (int)job->conf->tuning.train_window;
}

/* Keeps the window of the records (kt_train_keep); a record a training
 * still reads is freed when that training is done. */
static void
compact_records(struct kt_job *job)
{
    int64_t *task = kt_xmalloc(sizeof(*task) * (size_t)job->nrecs);
    double *cost = kt_xmalloc(sizeof(*cost) * (size_t)job->nrecs);
    unsigned char *keep = kt_xmalloc((size_t)job->nrecs);
    int i, n = 0, window = train_window(job);

    for (i = 0; i < job->nrecs; i++) {
        task[i] = job->recs[i]->task;
        cost[i] = job->recs[i]->cost;
    }
    kt_train_keep(task, cost, job->nrecs, window, KT_ENGINE_TRAIN_PER_TASK,
                  keep);
    for (i = 0; i < job->nrecs; i++) {
        if (keep[i]) {
            job->recs[n++] = job->recs[i];
            continue;
        }
        record_release(job->recs[i]);
        job->released_recs++;
    }
    job->nrecs = n;
    /* compacted again after a quarter window of new records */
    job->recs_limit = n + (window / 4 > 0 ? window / 4 : 1);
    free(task);
    free(cost);
    free(keep);
}

void
kt__job_add_record(struct kt_job *job, float *rows, int nrows, int task,
                   double cost)
{
    struct kt_record *r = kt_xmalloc(sizeof(*r));

    /* Kept while in the window: the extractor's buffer grows by doubling
     * from 8 rows, most programs have 2 to 4. */
    if (nrows > 0)
        rows = kt_xrealloc(rows,
                           (size_t)nrows * KT_FEATURE_LEN * sizeof(float));
    r->rows = rows;
    r->nrows = nrows;
    r->task = task;
    r->cost = cost;
    r->refs = 1;
    if (job->nrecs == job->caprecs) {
        job->caprecs = job->caprecs ? job->caprecs * 2 : 1024;
        job->recs = kt_xrealloc(job->recs,
                                sizeof(*job->recs) * (size_t)job->caprecs);
    }
    job->recs[job->nrecs++] = r;
    if (job->recs_limit == 0)
        job->recs_limit = train_window(job) + train_window(job) / 4;
    if (job->nrecs >= job->recs_limit)
        compact_records(job);
}

static void
free_cand(struct kt_cand *c)
{
    free(c->steps);
    free(c->config);
    free(c->source);
    free(c->preset_text);
    free(c->rows);
}

static void
free_cands(struct kt_cand *c, int n)
{
    int i;

    for (i = 0; i < n; i++)
        free_cand(&c[i]);
    free(c);
}

void
kt__feedback_free(struct kt_feedback *f, int n)
{
    int i;

    for (i = 0; i < n; i++)
        free(f[i].steps);
    free(f);
}

/* The result strings of a round's trials, when the round owns them. */
static void
free_trial_strings(struct kt_round *r)
{
    int i, k;

    if (!r->owned)
        return;
    for (i = 0; i < r->nres; i++) {
        struct kt_trial *t = &r->trials[i];
        free((char *)t->result.err_text);
        free((char *)t->result.worker);
        for (k = 0; k < t->result.nkvs; k++) {
            free((char *)t->result.kvs[k].k);
            free((char *)t->result.kvs[k].v);
        }
    }
}

static void
retry_closed(uv_handle_t *h)
{
    free(h);
}

void
kt__job_round_free(struct kt_round *r)
{
    if (r == NULL)
        return;
    free_cands(r->c, r->ncand);
    free_trial_strings(r);
    free(r->trials);
    free(r->kvs);
    free(r->confirmed);
    kt__feedback_free(r->feedback, r->nfeedback);
    kt__revisit_free(r->revisit, r->nrevisit);
    free(r->revisit);
    free(r->best_config);
    free(r->best_source);
    if (r->retry != NULL)
        uv_close((uv_handle_t *)r->retry, retry_closed);
    free(r);
}

int
kt__job_uses_model(const struct kt_job *job)
{
    return job->conf->tuning.policy == KT_POLICY_SKETCH_XGB;
}

/* ---- ending ------------------------------------------------------------- */

void
kt__job_release_tuning(struct kt_job *job)
{
    int i;

    for (i = 0; job->ts != NULL && i < job->tasks.n; i++) {
        struct kt_task_state *ts = &job->ts[i];
        free(ts->measured);
        ts->measured = NULL;
        ts->nmeasured = 0;
        kt__engine_search_free(ts->search);
        ts->search = NULL;
        kt__feedback_free(ts->pending, ts->npending);
        ts->pending = NULL;
        ts->npending = ts->cappending = 0;
        kt__revisit_free(ts->revisit, ts->nrevisit);
        ts->nrevisit = 0;
        free(ts->best_source);
        ts->best_source = NULL;
    }
    for (i = 0; i < job->nrecs; i++)
        record_release(job->recs[i]);
    free(job->recs);
    job->released_recs += job->nrecs;
    job->recs = NULL;
    job->nrecs = job->caprecs = job->recs_limit = 0;
    kt_xgb_free(job->model);
    job->model = NULL;
    job->model_ready = 0;
}

static int
idle(const struct kt_job *job)
{
    return job->searching == NULL && job->measuring == NULL &&
           job->training == NULL && job->warming == NULL;
}

void
kt__job_maybe_end(struct kt_job *job)
{
    char err[256];

    if (job->ended || !idle(job))
        return;
    if (job->state != KT_JOB_DONE && job->state != KT_JOB_FAILED &&
        job->state != KT_JOB_STOPPING)
        return;
    kt__job_round_free(job->ready);
    job->ready = NULL;
    job->ended = 1;
    kt__job_release_tuning(job);
    if (job->state == KT_JOB_DONE &&
        kt_storage_job_set_state(job->e->o.db, job->job_id, "done", err,
                                 sizeof(err)))
        log_warnx("engine: job %s: %s", job->name, err);
    if (job->end_cb != NULL)
        job->end_cb(job->end_arg, job);
}

void
kt__job_fail(struct kt_job *job, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(job->error, sizeof(job->error), fmt, ap);
    va_end(ap);
    log_err("engine: job %s failed: %s", job->name, job->error);
    job->state = KT_JOB_FAILED;
    kt__job_maybe_end(job);
}

int
kt__job_queue_work(struct kt_job *job, uv_work_t *w, uv_work_cb work,
                   uv_after_work_cb after, char *err, size_t errlen)
{
    int rc = uv_queue_work(job->e->o.loop, w, work, after);

    if (rc != 0)
        snprintf(err, errlen, "cannot queue work on the thread pool: %s",
                 uv_strerror(rc));
    return rc;
}

/* ---- training ----------------------------------------------------------- */

static void
train_done(uv_work_t *w, int status)
{
    struct kt_train_job *t = (struct kt_train_job *)w;
    struct kt_job *job = t->job;
    int i;

    job->training = NULL;
    if (status == 0 && t->rc == KT_OK) {
        job->model_ready = 1;
        job->trainings++;
        job->last_train.time_s = t->time_s;
        job->last_train.records = t->nrecs;
        log_debug("engine: job %s: trained on %d records in %.2f s", job->name,
                  t->nrecs, t->time_s);
    } else if (status == 0) {
        log_warnx("engine: job %s: cost model training failed: %s", job->name,
                  t->err);
    }
    for (i = 0; i < t->nrecs; i++)
        record_release(t->recs[i]);
    free(t->recs);
    free(t);
    /* Rounds applied while this one trained: train on them too (unless
     * no round will use the model any more). */
    if (job->train_again &&
        (job->state == KT_JOB_RUNNING || job->state == KT_JOB_PAUSED))
        kt__job_start_training(job);
    job->train_again = 0;
    kt__job_maybe_end(job);
    kt__job_kick(job);
}

void
kt__job_start_training(struct kt_job *job)
{
    struct kt_train_job *t;
    char err[128];
    int i;

    /* After the last round no search uses a model: a training then only
     * kept the job from ending (behind other jobs' work in the pool). */
    if (!kt__job_uses_model(job) || job->nrecs == 0 ||
        job->trials >= job->budget)
        return;
    if (job->training != NULL) {
        job->train_again = 1;
        return;
    }
    t = kt_xcalloc(1, sizeof(*t));
    t->job = job;
    t->nrecs = job->nrecs;
    t->recs = kt_xmalloc(sizeof(*t->recs) * (size_t)job->nrecs);
    memcpy(t->recs, job->recs, sizeof(*t->recs) * (size_t)job->nrecs);
    if (kt__job_queue_work(job, &t->work, kt__engine_train_work, train_done,
                           err, sizeof(err)) != 0) {
        free(t->recs);
        free(t);
        kt__job_fail(job, "cost-model training: %s", err);
        return;
    }
    /* the snapshot's references, released in train_done */
    for (i = 0; i < t->nrecs; i++)
        t->recs[i]->refs++;
    job->training = t;
    job->train_again = 0;
}

/* ---- rounds ------------------------------------------------------------- */

static void
submit(struct kt_job *job, struct kt_round *r)
{
    struct kt_candidate *c;
    char err[512];
    int64_t left;
    int i, rc;

    job->ready = NULL;
    if (r->speculative) {
        /* The round was searched for the task the scheduler would pick if
         * the previous batch brought no gain; use it only if it still does. */
        int t = kt_task_sched_next(job->sched);
        if (t != r->task) {
            job->spec_misses++;
            kt__job_round_free(r);
            kt__job_kick(job);
            return;
        }
        job->spec_hits++;
    }
    /* A round searched ahead may ask for more than the budget has left. */
    left = job->budget - job->trials;
    if (left <= 0) {
        kt__job_round_free(r);
        kt__job_kick(job);
        return;
    }
    while (r->ncand > left)
        free_cand(&r->c[--r->ncand]);
    if (r->ncand == 0) {
        /* Nothing new in this task's space: the scheduler retires it.
         * Before any program of it ran without error, no sampled schedule
         * was within the search's bounds (code size, above all) or every
         * one failed: the task ends without a kernel, which the user must
         * see. */
        int none = kt_task_sched_best_cost(job->sched, r->task) >=
                   KT_SCHED_NO_COST;
        kt_task_sched_update(job->sched, r->task, KT_SCHED_NO_COST, 0);
        if (none)
            log_warnx("engine: job %s: task %d (%s): search space exhausted "
                      "before any program of it ran without error (none "
                      "sampled within the search's bounds, e.g. code size, "
                      "or every one failed): the task has no kernel",
                      job->name, r->task, job->tasks.v[r->task].name);
        else
            log_info("engine: job %s: task %d (%s): search space exhausted",
                     job->name, r->task, job->tasks.v[r->task].name);
        kt__job_round_free(r);
        kt__job_kick(job);
        return;
    }
    c = kt_xcalloc((size_t)r->ncand, sizeof(*c));
    for (i = 0; i < r->ncand; i++) {
        c[i].source = r->c[i].source;
        c[i].cc = job->cc;
        c[i].preset_err_no = r->c[i].preset_err;
        c[i].preset_err_text = r->c[i].preset_text;
    }
    r->submitted = kt_now();
    job->mo.stop_above_s = 0;
    if (job->conf->measure.stop_ratio > 0 &&
        kt_task_sched_best_cost(job->sched, r->task) < KT_SCHED_NO_COST)
        job->mo.stop_above_s = job->conf->measure.stop_ratio *
                               kt_task_sched_best_cost(job->sched, r->task);
    job->measuring = r;
    if (job->e->o.submit != NULL)
        rc = job->e->o.submit(job->e->o.submit_arg, job->conf->target.key, c,
                              r->ncand, &job->mo, kt__job_measure_done, r, err,
                              sizeof(err));
    else
        rc = kt_tracker_submit(job->e->o.tracker, job->conf->target.key, c,
                               r->ncand, &job->mo, kt__job_measure_done, r, err,
                               sizeof(err));
    free(c);
    if (rc != KT_OK) {
        job->measuring = NULL;
        kt__job_round_free(r);
        kt__job_fail(job, "submitting a batch: %s", err);
        return;
    }
    kt__job_kick(job);
}

/* A best loaded from the database, rebuilt as C by the round's search
 * work: the task's next confirmations time it beside (engine_confirm.c),
 * unless the task has moved on to another best meanwhile.  One that no
 * longer builds (the code generator changed since it was stored) is not
 * tried again by every round. */
static void
take_best_source(struct kt_job *job, struct kt_round *r)
{
    struct kt_task_state *ts = &job->ts[r->task];

    if (r->best_config == NULL || ts->best_source != NULL ||
        ts->best_config == NULL || strcmp(ts->best_config, r->best_config) != 0)
        return;
    if (r->best_source == NULL) {
        ts->best_unbuilt = 1;
        log_warnx("engine: job %s: task %d (%s): the stored best, schedule "
                  "%s, no longer builds (%s): would-be bests are confirmed "
                  "alone until a new best",
                  job->name, r->task, job->tasks.v[r->task].name, ts->best_hash,
                  r->best_err);
        return;
    }
    ts->best_source = r->best_source;
    r->best_source = NULL;
}

static void
search_done(uv_work_t *w, int status)
{
    struct kt_round *r = (struct kt_round *)w;
    struct kt_job *job = r->job;

    job->searching = NULL;
    if (status == 0 && r->rc == KT_OK)
        take_best_source(job, r);
    if (status == 0 && r->measured != NULL) {
        /* The search remembers the resumed measured set from now on. */
        struct kt_task_state *ts = &job->ts[r->task];
        free(ts->measured);
        ts->measured = NULL;
        ts->nmeasured = 0;
        r->measured = NULL;
    }
    if (status == 0 && r->feature_errors > 0) {
        /* The programs still run; only the cost model misses their rows. */
        job->feature_errors += r->feature_errors;
        log_warnx("engine: job %s: task %d: features of %d candidates failed "
                  "(first: %s); they are measured but not trained on",
                  job->name, r->task, r->feature_errors, r->feature_err);
    }
    if (status != 0 || r->dropped || job->state == KT_JOB_STOPPING ||
        job->state == KT_JOB_FAILED) {
        kt__job_round_free(r);
        kt__job_maybe_end(job);
        return;
    }
    if (r->rc != KT_OK) {
        char msg[800];
        snprintf(msg, sizeof(msg), "search for task %d (%s): %.500s", r->task,
                 job->tasks.v[r->task].name, r->err);
        kt__job_round_free(r);
        kt__job_fail(job, "%s", msg);
        return;
    }
    job->ready = r;
    kt__job_kick(job);
}

static void
start_search(struct kt_job *job, int task, int speculative)
{
    struct kt_task_state *ts = &job->ts[task];
    struct kt_round *r;
    char err[256];

    if (ts->search == NULL) {
        ts->search = kt__engine_search_new(job, task, err, sizeof(err));
        if (ts->search == NULL) {
            kt__job_fail(job, "task %d (%s): %s", task, job->tasks.v[task].name,
                         err);
            return;
        }
    }
    r = kt_xcalloc(1, sizeof(*r));
    r->job = job;
    r->task = task;
    r->speculative = speculative;
    r->want = (int)kt_task_sched_round_trials(job->sched, task);
    if (job->budget - job->trials < r->want && !speculative)
        r->want = (int)(job->budget - job->trials);
    if (r->want < 1)
        r->want = 1;
    r->search = ts->search;
    r->model = kt__job_uses_model(job) && job->model_ready ? job->model : NULL;
    /* Borrowed: the loop never changes it; freed once a search took it. */
    r->measured = ts->measured;
    r->nmeasured = ts->nmeasured;
    r->cg = job->cg;
    r->feedback = ts->pending;
    r->nfeedback = ts->npending;
    ts->pending = NULL;
    ts->npending = ts->cappending = 0;
    kt__revisit_take(job, r);
    if (ts->best_source == NULL && ts->best_config != NULL && !ts->best_unbuilt)
        r->best_config = kt_xstrdup(ts->best_config);
    if (kt__job_queue_work(job, &r->work, kt__engine_search_work, search_done,
                           err, sizeof(err)) != 0) {
        kt__job_round_free(r);
        kt__job_fail(job, "search for task %d: %s", task, err);
        return;
    }
    job->searching = r;
}

/* Decides what to do next; called after every event. */
void
kt__job_kick(struct kt_job *job)
{
    int t;

    if (job->ended)
        return;
    if (job->state == KT_JOB_STOPPING || job->state == KT_JOB_FAILED ||
        job->state == KT_JOB_DONE) {
        kt__job_maybe_end(job);
        return;
    }
    if (job->state != KT_JOB_RUNNING)
        return;
    /* a quiet batch waits for the training to end (kt_engine_opts) */
    if (job->ready != NULL && job->measuring == NULL &&
        !(job->quiet_measure && job->training != NULL)) {
        submit(job, job->ready);
        return;
    }
    if (job->searching != NULL || job->ready != NULL)
        return;
    if (job->trials >= job->budget) {
        if (job->measuring == NULL) {
            job->state = KT_JOB_DONE;
            kt__job_maybe_end(job);
        }
        return;
    }
    /* After a restart the first model (trained on the stored records) is
     * waited for, as Ansor trains on a loaded log before searching: a
     * random-model round would ignore the seeds decoded from them. */
    if (job->training != NULL && !job->model_ready)
        return;
    /* A quiet job times the FMA peak alone before it searches
     * (engine_peak.c). */
    if (job->quiet_measure && !job->peak_probed && job->measuring == NULL &&
        job->training == NULL)
        kt__job_probe_peak(job);
    if (job->quiet_measure && job->probe != NULL)
        return;
    if (job->measuring == NULL) {
        t = kt_task_sched_next(job->sched);
        if (t < 0) {
            log_info("engine: job %s: finished (%s)", job->name,
                     kt_sched_stop_name(kt_task_sched_stopped(job->sched)));
            job->state = KT_JOB_DONE;
            kt__job_maybe_end(job);
            return;
        }
        start_search(job, t, 0);
        return;
    }
    /* A batch is at the workers: search ahead for the task the scheduler
     * would pick if that batch brought no gain. */
    if (!job->quiet_measure) {
        struct kt_task_sched *what_if = kt_task_sched_clone(job->sched);
        int cur = job->measuring->task;
        kt_task_sched_update(what_if, cur, KT_SCHED_NO_COST,
                             job->measuring->ncand);
        t = kt_task_sched_next(what_if);
        kt_task_sched_free(what_if);
        if (t >= 0 && job->trials + job->measuring->ncand < job->budget)
            start_search(job, t, 1);
    }
}
