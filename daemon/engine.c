/* engine.c - jobs and rounds on the loop thread (see engine.h). */
#include "daemon/engine_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kt_engine {
    struct kt_engine_opts o;
    char *log_dir;
    int njobs;
};

struct kt_job {
    struct kt_engine *e;
    struct kt_model_conf *conf;
    char name[96];
    char target[512];
    char cc[1024];
    int64_t job_id;
    int64_t budget;
    enum kt_job_state state;
    char error[512];
    struct kt_tasks tasks;
    struct kt_task_state *ts;
    struct kt_task_sched *sched;
    struct kt_xgb_model *model;
    int model_ready;
    struct kt_codegen_opts cg;
    struct kt_measure_opts mo;
    /* training records, append-only; each record is immutable */
    struct kt_record **recs;
    int nrecs, caprecs;
    /* in flight */
    struct kt_round *searching, *ready, *measuring;
    struct kt_train_job *training;
    int train_again;
    struct kt_warm_job *warming;
    /* figures */
    double started;
    int64_t trials, errors, rounds;
    double device_busy_s;
    int64_t spec_hits, spec_misses;
    struct kt_tasklog_train last_train;
    kt_job_end_cb end_cb;
    void *end_arg;
    int ended;
};

static void kick(struct kt_job *job);

/* ---- small helpers ---------------------------------------------------- */

const char *
kt_job_state_name(enum kt_job_state s)
{
    static const char *const names[] = {"starting", "running", "paused",
                                        "stopping", "done", "failed"};
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

static uint64_t
hex_hash(const char *hex)
{
    return strtoull(hex, NULL, 16);
}

static void
measured_insert(struct kt_task_state *ts, uint64_t h)
{
    size_t lo = 0, hi = ts->nmeasured;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ts->measured[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < ts->nmeasured && ts->measured[lo] == h)
        return;
    if (ts->nmeasured == ts->capmeasured) {
        ts->capmeasured = ts->capmeasured ? ts->capmeasured * 2 : 256;
        ts->measured = kt_xrealloc(ts->measured, ts->capmeasured * sizeof(uint64_t));
    }
    memmove(&ts->measured[lo + 1], &ts->measured[lo],
            (ts->nmeasured - lo) * sizeof(uint64_t));
    ts->measured[lo] = h;
    ts->nmeasured++;
}

static void
add_record(struct kt_job *job, float *rows, int nrows, int task, double cost)
{
    struct kt_record *r = kt_xmalloc(sizeof(*r));

    r->rows = rows;
    r->nrows = nrows;
    r->task = task;
    r->cost = cost;
    if (job->nrecs == job->caprecs) {
        job->caprecs = job->caprecs ? job->caprecs * 2 : 1024;
        job->recs = kt_xrealloc(job->recs, sizeof(*job->recs) * (size_t)job->caprecs);
    }
    job->recs[job->nrecs++] = r;
}

static void
free_cands(struct kt_cand *c, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        free(c[i].config);
        free(c[i].source);
        free(c[i].preset_text);
        free(c[i].rows);
    }
    free(c);
}

static void
free_results(struct kt_result *r, int n)
{
    int i, k;

    for (i = 0; i < n; i++) {
        free(r[i].err_text);
        free(r[i].worker);
        for (k = 0; k < r[i].nkvs; k++) {
            free(r[i].kv_keys[k]);
            free(r[i].kv_vals[k]);
        }
        free(r[i].kv_keys);
        free(r[i].kv_vals);
    }
    free(r);
}

static void
retry_closed(uv_handle_t *h)
{
    free(h);
}

static void
round_free(struct kt_round *r)
{
    if (r == NULL)
        return;
    free_cands(r->c, r->ncand);
    free_results(r->res, r->nres);
    free(r->measured);
    if (r->retry != NULL)
        uv_close((uv_handle_t *)r->retry, retry_closed);
    free(r);
}

static int
uses_model(const struct kt_job *job)
{
    return job->conf->tuning.policy == KT_POLICY_SKETCH_XGB;
}

/* ---- ending ------------------------------------------------------------- */

static int
idle(const struct kt_job *job)
{
    return job->searching == NULL && job->measuring == NULL &&
           job->training == NULL && job->warming == NULL;
}

static void
maybe_end(struct kt_job *job)
{
    char err[256];

    if (job->ended || !idle(job))
        return;
    if (job->state != KT_JOB_DONE && job->state != KT_JOB_FAILED &&
        job->state != KT_JOB_STOPPING)
        return;
    round_free(job->ready);
    job->ready = NULL;
    job->ended = 1;
    if (job->state == KT_JOB_DONE &&
        kt_storage_job_set_state(job->e->o.db, job->job_id, "done", err, sizeof(err)))
        log_warnx("engine: job %s: %s", job->name, err);
    if (job->end_cb != NULL)
        job->end_cb(job->end_arg, job);
}

static void
fail_job(struct kt_job *job, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
fail_job(struct kt_job *job, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(job->error, sizeof(job->error), fmt, ap);
    va_end(ap);
    log_err("engine: job %s failed: %s", job->name, job->error);
    job->state = KT_JOB_FAILED;
    maybe_end(job);
}

/* ---- training ----------------------------------------------------------- */

static void
train_done(uv_work_t *w, int status)
{
    struct kt_train_job *t = (struct kt_train_job *)w;
    struct kt_job *job = t->job;

    job->training = NULL;
    if (status == 0 && t->rc == KT_OK) {
        job->model_ready = 1;
        job->last_train.time_s = t->time_s;
        job->last_train.records = t->nrecs;
        log_debug("engine: job %s: trained on %d records in %.2f s", job->name,
                  t->nrecs, t->time_s);
    } else if (status == 0) {
        log_warnx("engine: job %s: cost model training failed: %s", job->name, t->err);
    }
    free(t->recs);
    free(t);
    if (job->train_again && job->state != KT_JOB_STOPPING) {
        job->train_again = 0;
        kick(job);
    }
    maybe_end(job);
    kick(job);
}

static void
start_training(struct kt_job *job)
{
    struct kt_train_job *t;

    if (!uses_model(job) || job->nrecs == 0)
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
    job->training = t;
    job->train_again = 0;
    uv_queue_work(job->e->o.loop, &t->work, kt__engine_train_work, train_done);
}

/* ---- task-table log ---------------------------------------------------- */

static void
log_round(struct kt_job *job, struct kt_round *r, int next_id)
{
    struct kt_tasklog_task *rows = kt_xcalloc((size_t)job->tasks.n, sizeof(*rows));
    struct kt_tasklog_cand *marks = kt_xcalloc((size_t)(r->nres ? r->nres : 1), sizeof(*marks));
    struct kt_tasklog_round lr;
    struct kt_tasklog_measure m;
    char err[512];
    int i;

    for (i = 0; i < job->tasks.n; i++) {
        struct kt_task_state *ts = &job->ts[i];
        rows[i].id = i;
        rows[i].name = job->tasks.v[i].name;
        rows[i].weight = job->tasks.v[i].weight;
        rows[i].latency_ms = ts->best_cost > 0 ? ts->best_cost * 1e3 : -1;
        rows[i].gflops = ts->best_cost > 0 ? job->tasks.v[i].flops / ts->best_cost / 1e9 : -1;
        rows[i].trials = ts->trials;
        rows[i].errors = ts->errors;
    }
    for (i = 0; i < r->nres; i++) {
        int e = r->res[i].err_no;
        int build_fail = e == KT_MERR_INSTANTIATION || e == KT_MERR_COMPILE_HOST ||
                         e == KT_MERR_COMPILE_DEVICE || e == KT_MERR_BUILD_TIMEOUT;
        marks[i].build = e == KT_MERR_BUILD_TIMEOUT ? KT_MARK_TIMEOUT
                         : build_fail ? KT_MARK_ERROR : KT_MARK_OK;
        marks[i].run = build_fail ? KT_MARK_NONE
                       : e == KT_MERR_RUN_TIMEOUT ? KT_MARK_TIMEOUT
                       : e ? KT_MARK_ERROR : KT_MARK_OK;
    }
    memset(&lr, 0, sizeof(lr));
    lr.job = job->name;
    lr.round = job->rounds;
    lr.wall_time = kt_wall_now();
    lr.table.ntasks = job->tasks.n;
    lr.table.tasks = rows;
    lr.table.total_latency_ms = kt_task_sched_total_latency_ms(job->sched);
    for (i = 0; i < job->tasks.n; i++)
        if (job->ts[i].best_cost <= 0)
            lr.table.total_latency_ms = -1;
    lr.table.trials = job->trials;
    lr.table.used_s = kt_now() - job->started;
    lr.table.next_id = next_id;
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

/* ---- results ------------------------------------------------------------ */

static int
commit_round(struct kt_job *job, struct kt_round *r, char *err, size_t errlen)
{
    struct kt_task *task = &job->tasks.v[r->task];
    struct kt_task_state *ts = &job->ts[r->task];
    struct kt_trial *t = kt_xcalloc((size_t)r->nres, sizeof(*t));
    struct kt_kv *kvs = NULL;
    int i, k, nkv = 0, rc;
    double now = kt_wall_now();

    for (i = 0; i < r->nres; i++)
        nkv += r->res[i].nkvs;
    kvs = kt_xcalloc((size_t)(nkv ? nkv : 1), sizeof(*kvs));
    nkv = 0;
    for (i = 0; i < r->nres; i++) {
        const struct kt_result *res = &r->res[i];
        struct kt_trial *tr = &t[i];
        tr->job_id = job->job_id;
        tr->task_name = task->name;
        tr->target = job->target;
        tr->workload = task->dag->key;
        tr->workload_hash = task->dag->hash;
        tr->config = r->c[i].config;
        tr->sched_hash = r->c[i].hash;
        tr->err_no = res->err_no;
        tr->err_text = res->err_no ? res->err_text : NULL;
        tr->trial_no = ts->next_trial_no + i;
        tr->cost = res->err_no ? 0 : res->cost;
        tr->costs = res->costs;
        tr->ncosts = res->ncosts;
        tr->worker = res->worker;
        tr->build_s = res->build_s;
        tr->run_s = res->run_s;
        tr->started = r->submitted > 0 ? now - r->measured_s : now;
        tr->finished = now;
        tr->kvs = &kvs[nkv];
        for (k = 0; k < res->nkvs; k++) {
            kvs[nkv].k = res->kv_keys[k];
            kvs[nkv].v = res->kv_vals[k];
            nkv++;
        }
        tr->nkvs = res->nkvs;
    }
    rc = kt_storage_write_batch(job->e->o.db, t, (size_t)r->nres, NULL, err, errlen);
    free(kvs);
    free(t);
    return rc;
}

/* The batch is in the database: now its results may be used. */
static void
apply_round(struct kt_job *job, struct kt_round *r)
{
    struct kt_task_state *ts = &job->ts[r->task];
    double round_best = KT_SCHED_NO_COST;
    int i;

    for (i = 0; i < r->nres; i++) {
        const struct kt_result *res = &r->res[i];
        struct kt_cand *c = &r->c[i];
        double cost = res->err_no == 0 ? res->cost : 0;
        measured_insert(ts, hex_hash(c->hash));
        ts->trials++;
        job->trials++;
        if (res->err_no) {
            ts->errors++;
            job->errors++;
        } else {
            if (cost < round_best)
                round_best = cost;
            if (ts->best_cost <= 0 || cost < ts->best_cost) {
                ts->best_cost = cost;
                free(ts->best_config);
                ts->best_config = kt_xstrdup(c->config);
            }
        }
        if (ts->search != NULL)
            kt__engine_search_record(ts->search, c->config, cost);
        if (c->rows != NULL) {
            add_record(job, c->rows, c->nrows, r->task, cost);
            c->rows = NULL;   /* the record owns them now */
        }
    }
    ts->next_trial_no += r->nres;
    job->rounds++;
    kt_task_sched_update(job->sched, r->task, round_best, r->nres);
    log_round(job, r, kt_task_sched_next(job->sched));
    start_training(job);
}

static void try_commit(struct kt_job *job, struct kt_round *r);

static void
retry_timer_cb(uv_timer_t *t)
{
    struct kt_round *r = t->data;

    try_commit(r->job, r);
}

static void
try_commit(struct kt_job *job, struct kt_round *r)
{
    char err[512];
    int rc = commit_round(job, r, err, sizeof(err));

    if (rc != KT_OK) {
        /* Nothing of the batch was stored; keep it and try again. */
        uint64_t delay = 200u << (r->retries < 6 ? r->retries : 6);
        r->retries++;
        log_warnx("engine: job %s: storing %d trials failed (%s); retry %d in "
                  "%llu ms", job->name, r->nres, err, r->retries,
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
    round_free(r);
    maybe_end(job);
    kick(job);
}

static void
measure_done(void *arg, const struct kt_measure_result *res, int n)
{
    struct kt_round *r = arg;
    struct kt_job *job = r->job;
    int i, k;

    r->measured_s = kt_now() - r->submitted;
    job->device_busy_s += r->measured_s;
    r->res = kt_xcalloc((size_t)(n ? n : 1), sizeof(*r->res));
    r->nres = n < r->ncand ? n : r->ncand;
    for (i = 0; i < r->nres; i++) {
        struct kt_result *d = &r->res[i];
        d->err_no = res[i].err_no;
        d->err_text = kt_xstrdup(res[i].err_text ? res[i].err_text : "");
        d->ncosts = res[i].ncosts;
        memcpy(d->costs, res[i].costs, sizeof(double) * (size_t)res[i].ncosts);
        d->cost = res[i].cost;
        d->cv = res[i].cv;
        d->build_s = res[i].build_s;
        d->run_s = res[i].run_s;
        d->worker = kt_xstrdup(res[i].worker ? res[i].worker : "");
        d->nkvs = res[i].nkvs;
        d->kv_keys = kt_xcalloc((size_t)(d->nkvs ? d->nkvs : 1), sizeof(char *));
        d->kv_vals = kt_xcalloc((size_t)(d->nkvs ? d->nkvs : 1), sizeof(char *));
        for (k = 0; k < d->nkvs; k++) {
            d->kv_keys[k] = kt_xstrdup(res[i].kv_keys[k]);
            d->kv_vals[k] = kt_xstrdup(res[i].kv_vals[k]);
        }
    }
    try_commit(job, r);
}

/* ---- rounds ------------------------------------------------------------- */

static void
submit(struct kt_job *job, struct kt_round *r)
{
    struct kt_candidate *c;
    char err[512];
    int i, rc;

    job->ready = NULL;
    if (r->speculative) {
        /* The round was searched for the task the scheduler would pick if
         * the previous batch brought no gain; use it only if it still does. */
        int t = kt_task_sched_next(job->sched);
        if (t != r->task) {
            job->spec_misses++;
            round_free(r);
            kick(job);
            return;
        }
        job->spec_hits++;
    }
    if (r->ncand == 0) {
        /* Nothing new in this task's space: the scheduler retires it. */
        kt_task_sched_update(job->sched, r->task, KT_SCHED_NO_COST, 0);
        log_info("engine: job %s: task %d (%s): search space exhausted",
                 job->name, r->task, job->tasks.v[r->task].name);
        round_free(r);
        kick(job);
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
    job->measuring = r;
    rc = kt_tracker_submit(job->e->o.tracker, job->conf->target.key, c, r->ncand,
                           &job->mo, measure_done, r, err, sizeof(err));
    free(c);
    if (rc != KT_OK) {
        job->measuring = NULL;
        round_free(r);
        fail_job(job, "submitting a batch: %s", err);
        return;
    }
    kick(job);
}

static void
search_done(uv_work_t *w, int status)
{
    struct kt_round *r = (struct kt_round *)w;
    struct kt_job *job = r->job;

    job->searching = NULL;
    if (status != 0 || r->dropped || job->state == KT_JOB_STOPPING ||
        job->state == KT_JOB_FAILED) {
        round_free(r);
        maybe_end(job);
        return;
    }
    if (r->rc != KT_OK) {
        char msg[800];
        snprintf(msg, sizeof(msg), "search for task %d (%s): %.500s", r->task,
                 job->tasks.v[r->task].name, r->err);
        round_free(r);
        fail_job(job, "%s", msg);
        return;
    }
    job->ready = r;
    kick(job);
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
            fail_job(job, "task %d (%s): %s", task, job->tasks.v[task].name, err);
            return;
        }
    }
    r = kt_xcalloc(1, sizeof(*r));
    r->job = job;
    r->task = task;
    r->speculative = speculative;
    r->want = (int)kt_task_sched_per_round(job->sched);
    if (job->budget - job->trials < r->want && !speculative)
        r->want = (int)(job->budget - job->trials);
    if (r->want < 1)
        r->want = 1;
    r->search = ts->search;
    r->model = uses_model(job) && job->model_ready ? job->model : NULL;
    r->nmeasured = ts->nmeasured;
    r->measured = kt_xmalloc(sizeof(uint64_t) * (ts->nmeasured ? ts->nmeasured : 1));
    memcpy(r->measured, ts->measured, sizeof(uint64_t) * ts->nmeasured);
    r->cg = job->cg;
    job->searching = r;
    uv_queue_work(job->e->o.loop, &r->work, kt__engine_search_work, search_done);
}

/* Decides what to do next; called after every event. */
static void
kick(struct kt_job *job)
{
    int t;

    if (job->ended)
        return;
    if (job->state == KT_JOB_STOPPING || job->state == KT_JOB_FAILED ||
        job->state == KT_JOB_DONE) {
        maybe_end(job);
        return;
    }
    if (job->state != KT_JOB_RUNNING)
        return;
    if (job->ready != NULL && job->measuring == NULL) {
        submit(job, job->ready);
        return;
    }
    if (job->searching != NULL || job->ready != NULL)
        return;
    if (job->trials >= job->budget) {
        if (job->measuring == NULL) {
            job->state = KT_JOB_DONE;
            maybe_end(job);
        }
        return;
    }
    if (job->measuring == NULL) {
        t = kt_task_sched_next(job->sched);
        if (t < 0) {
            log_info("engine: job %s: finished (%s)", job->name,
                     kt_sched_stop_name(kt_task_sched_stopped(job->sched)));
            job->state = KT_JOB_DONE;
            maybe_end(job);
            return;
        }
        start_search(job, t, 0);
        return;
    }
    /* A batch is at the workers: search ahead for the task the scheduler
     * would pick if that batch brought no gain. */
    {
        struct kt_task_sched *what_if = kt_task_sched_clone(job->sched);
        int cur = job->measuring->task;
        double best = job->ts[cur].best_cost > 0 ? job->ts[cur].best_cost : KT_SCHED_NO_COST;
        kt_task_sched_update(what_if, cur, best, job->measuring->ncand);
        t = kt_task_sched_next(what_if);
        kt_task_sched_free(what_if);
        if (t >= 0 && job->trials + job->measuring->ncand < job->budget)
            start_search(job, t, 1);
    }
}

/* ---- job start ---------------------------------------------------------- */

static void
warm_done(uv_work_t *w, int status)
{
    struct kt_warm_job *wj = (struct kt_warm_job *)w;
    struct kt_job *job = wj->job;
    int i;

    job->warming = NULL;
    for (i = 0; i < wj->nrows_in; i++) {
        free(wj->in[i].config);
        free(wj->in[i].workload);
    }
    free(wj->in);
    if (status == 0) {
        for (i = 0; i < wj->nout; i++)
            add_record(job, wj->out[i].rows, wj->out[i].nrows, wj->out[i].task,
                       wj->out[i].cost);
        if (wj->nout > 0)
            log_info("engine: job %s: warm start from %d stored trials (%.2f s)",
                     job->name, wj->nout, wj->time_s);
    } else {
        for (i = 0; i < wj->nout; i++)
            free(wj->out[i].rows);
    }
    free(wj->out);
    free(wj);
    if (job->state == KT_JOB_STARTING)
        job->state = KT_JOB_RUNNING;
    start_training(job);
    maybe_end(job);
    kick(job);
}

struct warm_collect {
    struct kt_job *job;
    struct kt_warm_job *wj;
    int cap;
};

static int
collect_history(void *arg, const struct kt_history_row *row)
{
    struct warm_collect *wc = arg;
    struct kt_job *job = wc->job;
    int i, k;

    if (row->config == NULL || row->workload == NULL)
        return 0;
    for (i = 0; i < job->tasks.n; i++)
        if (strcmp(job->tasks.v[i].dag->hash, row->workload_hash) == 0)
            break;
    if (wc->wj->nrows_in == wc->cap) {
        wc->cap = wc->cap ? wc->cap * 2 : 256;
        wc->wj->in = kt_xrealloc(wc->wj->in, sizeof(*wc->wj->in) * (size_t)wc->cap);
    }
    k = wc->wj->nrows_in++;
    wc->wj->in[k].workload = NULL;
    if (i == job->tasks.n) {
        /* Another job's workload: rebuilt from its key on the pool; its
         * labels are normalised within its own group. */
        wc->wj->in[k].workload = kt_xstrdup(row->workload);
        i = job->tasks.n + (int)(kt_hash64(row->workload_hash, 16) % 1000000);
    }
    wc->wj->in[k].task = i;
    wc->wj->in[k].config = kt_xstrdup(row->config);
    wc->wj->in[k].cost = row->err_no == 0 ? row->cost : 0;
    return 0;
}

static int
resume(struct kt_job *job, char *err, size_t errlen)
{
    struct kt_resume *res = NULL;
    int i, rc;

    rc = kt_storage_resume(job->e->o.db, job->target, job->job_id, &res, err, errlen);
    if (rc != KT_OK)
        return rc;
    for (i = 0; i < job->tasks.n; i++) {
        const struct kt_resume_entry *en = kt_resume_find(res, job->tasks.v[i].dag->hash);
        struct kt_task_state *ts = &job->ts[i];
        ts->next_trial_no = 0;
        if (en == NULL)
            continue;
        ts->next_trial_no = en->job_max_trial_no + 1;
        ts->trials = en->job_trials;
        job->trials += en->job_trials;
        if (en->best_cost > 0 && en->best_config != NULL) {
            ts->best_cost = en->best_cost;
            ts->best_config = kt_xstrdup(en->best_config);
        }
        rc = kt_storage_measured(job->e->o.db, job->target, job->tasks.v[i].dag->hash,
                                 &ts->measured, &ts->nmeasured, err, errlen);
        if (rc != KT_OK)
            break;
        ts->capmeasured = ts->nmeasured;
        if (en->job_trials > 0 || en->best_cost > 0) {
            int64_t per = kt_task_sched_per_round(job->sched);
            int64_t rounds = en->job_trials > 0 ? (en->job_trials + per - 1) / per : 0;
            kt_task_sched_restore(job->sched, i, rounds, rounds,
                                  NULL, en->best_cost > 0 ? en->best_cost : KT_SCHED_NO_COST,
                                  en->job_trials);
        }
    }
    kt_resume_free(res);
    return rc;
}

int
kt_job_start(struct kt_engine *e, struct kt_model_conf *conf, int64_t trials,
             kt_job_end_cb cb, void *arg, struct kt_job **out, char *err,
             size_t errlen)
{
    struct kt_job *job = kt_xcalloc(1, sizeof(*job));
    struct kt_task_sched_opts so;
    double *w = NULL, *f = NULL;
    const char **tags = NULL;
    struct warm_collect wc;
    struct kt_buf b;
    int i, rc;

    *out = NULL;
    job->e = e;
    job->conf = conf;
    job->end_cb = cb;
    job->end_arg = arg;
    job->started = kt_now();
    job->state = KT_JOB_STARTING;
    snprintf(job->name, sizeof(job->name), "%s", conf->name);

    /* The compiler line identifies the target together with the worker key. */
    kt_buf_init(&b);
    kt_buf_puts(&b, conf->target.cc);
    for (i = 0; i < conf->target.cflags.n; i++)
        kt_buf_printf(&b, " %s", conf->target.cflags.v[i]);
    if (conf->target.sysroot != NULL)
        kt_buf_printf(&b, " --sysroot=%s", conf->target.sysroot);
    snprintf(job->cc, sizeof(job->cc), "%s", b.p);
    snprintf(job->target, sizeof(job->target), "%s:%s:%s", conf->target.kind,
             conf->target.key, b.p);
    kt_buf_free(&b);

    kt_codegen_default_opts(&job->cg);
    if (conf->target.vector_bytes > 0)
        job->cg.vector_bytes = (int)conf->target.vector_bytes;
    kt_measure_default_opts(&job->mo);
    job->mo.number = (int)conf->measure.number;
    job->mo.repeat = (int)conf->measure.repeat;
    job->mo.min_repeat_ms = (int)conf->measure.min_repeat_ms;
    job->mo.cooldown_ms = (int)conf->measure.cooldown_ms;
    job->mo.flush_cache = conf->measure.flush_cache;
    job->mo.build_timeout_ms = (int)(conf->measure.build_timeout_s * 1000);
    job->mo.run_timeout_ms = (int)(conf->measure.run_timeout_s * 1000);
    job->mo.tolerance = conf->measure.tolerance;
    job->mo.threads = (int)conf->target.threads;
    job->mo.seed = (uint64_t)conf->tuning.seed;

    rc = kt_tasks_extract(conf, &job->tasks, err, errlen);
    if (rc != KT_OK)
        goto fail;
    job->ts = kt_xcalloc((size_t)job->tasks.n, sizeof(*job->ts));
    w = kt_xcalloc((size_t)job->tasks.n, sizeof(double));
    f = kt_xcalloc((size_t)job->tasks.n, sizeof(double));
    tags = kt_xcalloc((size_t)job->tasks.n, sizeof(char *));
    for (i = 0; i < job->tasks.n; i++) {
        w[i] = job->tasks.v[i].weight;
        f[i] = job->tasks.v[i].flops;
        tags[i] = job->tasks.v[i].tag;
    }
    kt_task_sched_opts_from_conf(&so, &conf->tuning);
    job->budget = trials > 0 ? trials : conf->tuning.trials;
    so.trials = job->budget;
    rc = kt_task_sched_new(&job->sched, job->tasks.n, w, f, tags, &so, err, errlen);
    free(w);
    free(f);
    free(tags);
    if (rc != KT_OK)
        goto fail;

    rc = kt_storage_job_open(e->o.db, job->name, conf->path ? conf->path : job->name,
                             job->target, &job->job_id, err, errlen);
    for (i = 0; i < job->tasks.n && rc == KT_OK; i++) {
        struct kt_task_info ti;
        struct kt_buf text;
        const struct kt_task *t = &job->tasks.v[i];
        kt_buf_init(&text);
        kt_dag_print(t->dag, &text);
        memset(&ti, 0, sizeof(ti));
        ti.job_id = job->job_id;
        ti.task_name = t->name;
        ti.target = job->target;
        ti.workload = t->dag->key;
        ti.workload_hash = t->dag->hash;
        ti.compute = text.p;
        ti.shapes = NULL;
        ti.weight = t->weight;
        ti.flops = t->flops;
        rc = kt_storage_task_put(e->o.db, &ti, err, errlen);
        kt_buf_free(&text);
    }
    if (rc == KT_OK)
        rc = resume(job, err, errlen);
    if (rc == KT_OK)
        rc = kt_storage_job_set_state(e->o.db, job->job_id, "running", err, errlen);
    if (rc != KT_OK)
        goto fail;

    if (uses_model(job)) {
        struct kt_xgb_params p;
        kt_xgb_params_default(&p);
        job->model = kt_xgb_new(&p);
    }
    /* Warm start: the features of every stored trial of our workloads. */
    job->warming = kt_xcalloc(1, sizeof(*job->warming));
    job->warming->job = job;
    memset(&wc, 0, sizeof(wc));
    wc.job = job;
    wc.wj = job->warming;
    if (uses_model(job))
        rc = kt_storage_history(e->o.db, job->target, NULL, 0, collect_history, &wc,
                                err, errlen);
    if (rc != KT_OK) {
        free(job->warming->in);
        free(job->warming);
        job->warming = NULL;
        goto fail;
    }
    e->njobs++;
    log_info("engine: job %s: %d tasks, %.3f GFLOP per inference, budget %lld "
             "trials (%lld done), target %s", job->name, job->tasks.n,
             kt_tasks_total_flops(&job->tasks) / 1e9, (long long)job->budget,
             (long long)job->trials, job->target);
    uv_queue_work(e->o.loop, &job->warming->work, kt__engine_warm_work, warm_done);
    *out = job;
    return KT_OK;
fail:
    job->conf = NULL;   /* the caller keeps the config on failure */
    kt_job_free(job);
    return rc;
}

void
kt_job_pause(struct kt_job *job)
{
    if (job->state == KT_JOB_RUNNING || job->state == KT_JOB_STARTING)
        job->state = KT_JOB_PAUSED;
}

void
kt_job_resume(struct kt_job *job)
{
    if (job->state == KT_JOB_PAUSED) {
        job->state = KT_JOB_RUNNING;
        kick(job);
    }
}

void
kt_job_stop(struct kt_job *job)
{
    if (job->ended)
        return;
    if (job->state != KT_JOB_DONE && job->state != KT_JOB_FAILED)
        job->state = KT_JOB_STOPPING;
    if (job->searching != NULL) {
        job->searching->dropped = 1;
        if (uv_cancel((uv_req_t *)&job->searching->work) == 0)
            log_debug("engine: job %s: queued search cancelled", job->name);
    }
    if (job->training != NULL)
        uv_cancel((uv_req_t *)&job->training->work);
    maybe_end(job);
}

void
kt_job_free(struct kt_job *job)
{
    int i;

    if (job == NULL)
        return;
    round_free(job->ready);
    for (i = 0; i < job->tasks.n; i++) {
        free(job->ts ? job->ts[i].measured : NULL);
        if (job->ts != NULL) {
            free(job->ts[i].best_config);
            kt__engine_search_free(job->ts[i].search);
        }
    }
    free(job->ts);
    for (i = 0; i < job->nrecs; i++) {
        free(job->recs[i]->rows);
        free(job->recs[i]);
    }
    free(job->recs);
    kt_task_sched_free(job->sched);
    kt_xgb_free(job->model);
    kt_tasks_free(&job->tasks);
    kt_model_conf_free(job->conf);
    if (job->e != NULL && job->ended)
        job->e->njobs--;
    free(job);
}

const char *
kt_job_name(const struct kt_job *job)
{
    return job->name;
}

enum kt_job_state
kt_job_state(const struct kt_job *job)
{
    return job->state;
}

const char *
kt_job_error(const struct kt_job *job)
{
    return job->error;
}

const struct kt_model_conf *
kt_job_conf(const struct kt_job *job)
{
    return job->conf;
}

void
kt_job_get_stats(const struct kt_job *job, struct kt_job_stats *s)
{
    int i;

    memset(s, 0, sizeof(*s));
    s->ntasks = job->tasks.n;
    s->trials = job->trials;
    s->budget = job->budget;
    s->errors = job->errors;
    s->rounds = job->rounds;
    s->total_latency_ms = 0;
    for (i = 0; i < job->tasks.n; i++) {
        if (job->ts[i].best_cost <= 0) {
            s->total_latency_ms = -1;
            break;
        }
        s->total_latency_ms += job->tasks.v[i].weight * job->ts[i].best_cost * 1e3;
    }
    s->elapsed_s = kt_now() - job->started;
    s->device_busy_s = job->device_busy_s;
    s->speculation_hits = job->spec_hits;
    s->speculation_misses = job->spec_misses;
}

void
kt_job_task(const struct kt_job *job, int i, struct kt_job_task_info *out)
{
    const struct kt_task_state *ts = &job->ts[i];

    out->name = job->tasks.v[i].name;
    out->weight = job->tasks.v[i].weight;
    out->flops = job->tasks.v[i].flops;
    out->best_cost = ts->best_cost;
    out->best_config = ts->best_config;
    out->trials = ts->trials;
    out->errors = ts->errors;
}

int
kt_engine_new(struct kt_engine **out, const struct kt_engine_opts *o)
{
    struct kt_engine *e = kt_xcalloc(1, sizeof(*e));

    e->o = *o;
    e->log_dir = o->log_dir ? kt_xstrdup(o->log_dir) : NULL;
    e->o.log_dir = e->log_dir;
    *out = e;
    return KT_OK;
}

void
kt_engine_free(struct kt_engine *e)
{
    if (e == NULL)
        return;
    free(e->log_dir);
    free(e);
}
