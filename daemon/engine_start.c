/* engine_start.c - starting a job (resume from the database, warm start of
 * the cost model), pausing, stopping, freeing and its figures. */
#include "daemon/engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    if (status == 0 && wj->skipped > 0) {
        job->warm_skipped += wj->skipped;
        log_warnx("engine: job %s: warm start: %d stored trials could not be "
                  "rebuilt and are not trained on (first: %s)",
                  job->name, wj->skipped, wj->skip_err);
    }
    if (status == 0) {
        for (i = 0; i < wj->nout; i++)
            kt__job_add_record(job, wj->out[i].rows, wj->out[i].nrows,
                               wj->out[i].task, wj->out[i].cost);
        if (wj->nout > 0)
            log_info("engine: job %s: warm start from %d stored trials, %d "
                     "of them tuned for a sibling target (%.2f s)",
                     job->name, wj->nout, wj->nsibling, wj->time_s);
        /* the search decodes them into genomes that seed its GA */
        for (i = 0; i < wj->nseeds; i++) {
            int t;
            if (wj->seed_task[i] >= 0 && !wj->seeds[i].other) {
                kt__task_queue_feedback(&job->ts[wj->seed_task[i]],
                                        wj->seeds[i].steps, wj->seeds[i].nsteps,
                                        wj->seeds[i].cost);
                continue;
            }
            if (wj->seed_task[i] >= 0) /* a sibling target's record */
                kt__task_queue_other(&job->ts[wj->seed_task[i]], &wj->seeds[i]);
            for (t = 0; t < job->tasks.n && wj->seed_task[i] < 0; t++)
                kt__task_queue_other(&job->ts[t], &wj->seeds[i]);
            free(wj->seeds[i].steps);
        }
        wj->nseeds = 0;
    } else {
        for (i = 0; i < wj->nout; i++)
            free(wj->out[i].rows);
    }
    kt__feedback_free(wj->seeds, wj->nseeds);
    free(wj->seed_task);
    free(wj->out);
    free(wj);
    if (job->state == KT_JOB_STARTING)
        job->state = KT_JOB_RUNNING;
    kt__job_start_training(job);
    kt__job_maybe_end(job);
    kt__job_kick(job);
}

struct warm_collect {
    struct kt_job *job;
    struct kt_warm_job *wj;
    int cap;
    int sibling; /* the rows being read are of a sibling target */
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
        wc->wj->in = kt_xrealloc(wc->wj->in,
                                 sizeof(*wc->wj->in) * (size_t)wc->cap);
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
    wc->wj->in[k].sibling = wc->sibling;
    wc->wj->nsibling += wc->sibling;
    wc->wj->in[k].config = kt_xstrdup(row->config);
    wc->wj->in[k].cost = row->err_no == 0 ? row->cost : 0;
    return 0;
}

static int
resume(struct kt_job *job, char *err, size_t errlen)
{
    struct kt_resume *res = NULL;
    int i, rc;

    rc = kt_storage_resume(job->e->o.db, job->target, job->job_id, &res, err,
                           errlen);
    if (rc != KT_OK)
        return rc;
    for (i = 0; i < job->tasks.n; i++) {
        const struct kt_resume_entry *en = kt_resume_find(res, job->tasks.v[i]
                                                                   .dag->hash);
        struct kt_task_state *ts = &job->ts[i];
        ts->next_trial_no = 0;
        if (en == NULL)
            continue;
        ts->next_trial_no = en->job_max_trial_no + 1;
        job->trials += en->job_trials;
        if (en->best_cost > 0 && en->best_config != NULL) {
            ts->best_config = kt_xstrdup(en->best_config);
            memcpy(ts->best_hash, en->best_sched_hash, sizeof(ts->best_hash));
        }
        rc = kt_storage_measured(job->e->o.db, job->target,
                                 job->tasks.v[i].dag->hash, &ts->measured,
                                 &ts->nmeasured, err, errlen);
        if (rc != KT_OK)
            break;
        if (en->job_trials > 0 || en->best_cost > 0) {
            int64_t per = kt_task_sched_per_round(job->sched);
            int64_t rounds = en->job_trials > 0
                                 ? (en->job_trials + per - 1) / per
                                 : 0;
            kt_task_sched_restore(job->sched, i, rounds, rounds, NULL,
                                  en->best_cost > 0 ? en->best_cost
                                                    : KT_SCHED_NO_COST,
                                  en->job_trials);
        }
    }
    kt_resume_free(res);
    return rc;
}

/* The compiler line identifies the target together with the worker key. */
static void
job_init_target(struct kt_job *job, const struct kt_model_conf *conf)
{
    struct kt_buf b;
    int i;

    kt_buf_init(&b);
    kt_buf_puts(&b, conf->target.cc);
    for (i = 0; i < conf->target.cflags.n; i++)
        kt_buf_printf(&b, " %s", conf->target.cflags.v[i]);
    if (conf->target.sysroot != NULL)
        kt_buf_printf(&b, " --sysroot=%s", conf->target.sysroot);
    job->cc = kt_buf_take(&b);
    kt_buf_printf(&b, "%s:%s:%s", conf->target.kind, conf->target.key, job->cc);
    job->target = kt_buf_take(&b);

    kt_codegen_default_opts(&job->cg);
    if (conf->target.vector_bytes > 0)
        job->cg.vector_bytes = (int)conf->target.vector_bytes;
    kt_measure_default_opts(&job->mo);
    job->mo.number = (int)conf->measure.number;
    job->mo.repeat = (int)conf->measure.repeat;
    job->mo.min_repeat_ms = (int)conf->measure.min_repeat_ms;
    job->mo.settle = conf->measure.settle;
    job->mo.placement_wait_s = conf->measure.placement_wait_s;
    job->mo.stop_ratio = conf->measure.stop_ratio;
    job->mo.cooldown_ms = (int)conf->measure.cooldown_ms;
    job->mo.flush_cache = conf->measure.flush_cache;
    job->mo.build_timeout_ms = (int)(conf->measure.build_timeout_s * 1000);
    job->mo.run_timeout_ms = (int)(conf->measure.run_timeout_s * 1000);
    job->mo.tolerance = conf->measure.tolerance;
    job->mo.threads = (int)conf->target.threads;
    job->mo.seed = (uint64_t)conf->tuning.seed;
    /* threads 0: every core */
    job->quiet_measure = job->e->o.local_key != NULL &&
                         strcmp(job->e->o.local_key, conf->target.key) == 0 &&
                         (conf->target.threads <= 0 ||
                          conf->target.threads >= sysconf(_SC_NPROCESSORS_ONLN));
}

/* The tasks of the model and the task scheduler over them. */
static int
job_init_tasks(struct kt_job *job, int64_t trials, char *err, size_t errlen)
{
    const struct kt_model_conf *conf = job->conf;
    struct kt_task_sched_opts so;
    double *w, *f;
    const char **tags;
    int i, rc;

    rc = kt_tasks_extract(conf, &job->tasks, err, errlen);
    if (rc != KT_OK)
        return rc;
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
    rc = kt_task_sched_new(&job->sched, job->tasks.n, w, f, tags, &so, err,
                           errlen);
    free(w);
    free(f);
    free(tags);
    return rc;
}

/* The shapes of the task's inputs and outputs as a JSON object
 * ({"A": [32, 32], ...}): the tasks table's shapes column. */
static void
dag_shapes_json(const struct kt_dag *dag, struct kt_buf *b)
{
    int i, d, n = 0;

    kt_buf_putc(b, '{');
    for (i = 0; i < dag->ntensors; i++) {
        const struct kt_tensor *t = &dag->tensors[i];
        if (t->kind == KT_TENSOR_INTERMEDIATE)
            continue;
        kt_buf_printf(b, "%s\"%s\": [", n++ ? ", " : "", t->name);
        for (d = 0; d < t->ndim; d++)
            kt_buf_printf(b, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        kt_buf_putc(b, ']');
    }
    kt_buf_putc(b, '}');
}

/* The job and its tasks in the database, then what they already did. */
static int
job_register(struct kt_job *job, char *err, size_t errlen)
{
    struct kt_storage *db = job->e->o.db;
    int i, rc;

    rc = kt_storage_job_open(db, job->name,
                             job->conf->path ? job->conf->path : job->name,
                             job->target, &job->job_id, err, errlen);
    for (i = 0; i < job->tasks.n && rc == KT_OK; i++) {
        struct kt_task_info ti;
        struct kt_buf text, shapes;
        const struct kt_task *t = &job->tasks.v[i];
        kt_buf_init(&text);
        kt_buf_init(&shapes);
        kt_dag_print(t->dag, &text);
        dag_shapes_json(t->dag, &shapes);
        memset(&ti, 0, sizeof(ti));
        ti.job_id = job->job_id;
        ti.task_name = t->name;
        ti.target = job->target;
        ti.workload = t->dag->key;
        ti.workload_hash = t->dag->hash;
        ti.compute = text.p;
        ti.shapes = shapes.p;
        ti.weight = t->weight;
        ti.flops = t->flops;
        rc = kt_storage_task_put(db, &ti, err, errlen);
        kt_buf_free(&text);
        kt_buf_free(&shapes);
    }
    if (rc == KT_OK)
        rc = resume(job, err, errlen);
    job->resumed_trials = job->trials;
    if (rc == KT_OK)
        rc = kt_storage_job_set_state(db, job->job_id, "running", err, errlen);
    return rc;
}

/* The stored trials of the target's siblings (the same target under other
 * optimiser flags, e.g. before the model's -O level changed): they train the
 * cost model and seed the search, but are neither this target's best nor
 * its measured set, so their programs may be measured again here. */
static int
collect_siblings(struct warm_collect *wc, char *err, size_t errlen)
{
    struct kt_job *job = wc->job;
    struct kt_buf targets;
    char *line, *save = NULL;
    int rc;

    kt_buf_init(&targets);
    rc = kt_storage_targets(job->e->o.db, &targets, err, errlen);
    for (line = rc == KT_OK && targets.p ? strtok_r(targets.p, "\n", &save)
                                         : NULL;
         line != NULL && rc == KT_OK; line = strtok_r(NULL, "\n", &save)) {
        if (strcmp(line, job->target) == 0 ||
            !kt_target_siblings(line, job->target))
            continue;
        wc->sibling = 1;
        rc = kt_storage_history(job->e->o.db, line, NULL, 0, collect_history,
                                wc, err, errlen);
        wc->sibling = 0;
    }
    kt_buf_free(&targets);
    return rc;
}

/* Warm start: the features of every stored trial of the target (and of its
 * siblings), computed on the pool. */
static int
job_start_warm(struct kt_job *job, char *err, size_t errlen)
{
    struct kt_warm_job *wj = kt_xcalloc(1, sizeof(*wj));
    struct warm_collect wc;
    int i, rc = KT_OK;

    wj->job = job;
    memset(&wc, 0, sizeof(wc));
    wc.job = job;
    wc.wj = wj;
    if (kt__job_uses_model(job))
        rc = kt_storage_history(job->e->o.db, job->target, NULL, 0,
                                collect_history, &wc, err, errlen);
    if (rc == KT_OK && kt__job_uses_model(job))
        rc = collect_siblings(&wc, err, errlen);
    if (rc == KT_OK && kt__job_queue_work(job, &wj->work, kt__engine_warm_work,
                                          warm_done, err, errlen) != 0)
        rc = KT_EIO;
    if (rc != KT_OK) {
        for (i = 0; i < wj->nrows_in; i++) {
            free(wj->in[i].config);
            free(wj->in[i].workload);
        }
        free(wj->in);
        free(wj);
        return rc;
    }
    job->warming = wj;
    return KT_OK;
}

/* The workers of the job's key run its kernels only if they match the
 * compiler's target triple (measure.h kt_tracker_set_key_abi). */
static void
job_match_workers(struct kt_job *job)
{
    const struct kt_model_conf *conf = job->conf;
    char abi[64];

    if (job->e->o.tracker == NULL)
        return;
    if (kt_abi_of_compiler(conf->target.cc, abi, sizeof(abi)) != 0) {
        log_warnx("engine: job %s: the target triple of \"%s\" is unknown "
                  "(not runnable here, no triple in its name): workers of "
                  "key %s are not checked",
                  job->name, conf->target.cc, conf->target.key);
        return;
    }
    kt_tracker_set_key_abi(job->e->o.tracker, conf->target.key, abi);
}

int
kt_job_start(struct kt_engine *e, struct kt_model_conf *conf, int64_t trials,
             kt_job_end_cb cb, void *arg, struct kt_job **out, char *err,
             size_t errlen)
{
    struct kt_job *job = kt_xcalloc(1, sizeof(*job));
    int rc;

    *out = NULL;
    job->e = e;
    job->conf = conf;
    job->end_cb = cb;
    job->end_arg = arg;
    job->started = kt_now();
    job->state = KT_JOB_STARTING;
    job->name = kt_xstrdup(conf->name);
    job_init_target(job, conf);
    rc = job_init_tasks(job, trials, err, errlen);
    if (rc == KT_OK)
        rc = job_register(job, err, errlen);
    if (rc != KT_OK)
        goto fail;
    if (kt__job_uses_model(job)) {
        struct kt_xgb_params p;
        kt_xgb_params_default(&p);
        job->model = kt_xgb_new(&p);
    }
    job_match_workers(job);
    rc = job_start_warm(job, err, errlen);
    if (rc != KT_OK)
        goto fail;
    if (!job->quiet_measure)
        kt__job_probe_peak(job); /* a quiet one's waits for its pool work */
    e->njobs++;
    log_info("engine: job %s: %d tasks, %.3f GFLOP per inference, budget %lld "
             "trials (%lld done), target %s",
             job->name, job->tasks.n, kt_tasks_total_flops(&job->tasks) / 1e9,
             (long long)job->budget, (long long)job->trials, job->target);
    *out = job;
    return KT_OK;
fail:
    job->conf = NULL; /* the caller keeps the config on failure */
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
        kt__job_kick(job);
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
    kt__job_maybe_end(job);
}

void
kt_job_abandon(struct kt_job *job)
{
    job->abandoned = 1;
    if (job->measuring != NULL && job->measuring->trials != NULL) {
        /* Results are in but the database keeps refusing them (its retry
         * timer is running): give them up too. */
        log_warnx("engine: job %s: %d measured results dropped: the database "
                  "did not take them (%s)",
                  job->name, job->measuring->nres, job->error);
        kt__job_round_free(job->measuring);
        job->measuring = NULL;
    }
    kt_job_stop(job);
}

int
kt_job_active(const struct kt_job *job)
{
    return !job->ended;
}

void
kt_job_free(struct kt_job *job)
{
    int i;

    if (job == NULL)
        return;
    kt__job_probe_detach(job);
    kt__job_round_free(job->ready);
    kt__job_release_tuning(job);
    for (i = 0; job->ts != NULL && i < job->tasks.n; i++)
        free(job->ts[i].best_config);
    free(job->ts);
    kt_task_sched_free(job->sched);
    kt_tasks_free(&job->tasks);
    kt_model_conf_free(job->conf);
    if (job->e != NULL && job->ended)
        job->e->njobs--;
    free(job->name);
    free(job->target);
    free(job->cc);
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
    memset(s, 0, sizeof(*s));
    s->ntasks = job->tasks.n;
    s->trials = job->trials;
    s->budget = job->budget;
    s->resumed = job->resumed_trials;
    s->errors = job->errors;
    s->rounds = job->rounds;
    s->total_latency_ms = kt_task_sched_total_latency_ms(job->sched);
    s->elapsed_s = kt_now() - job->started;
    s->device_busy_s = job->device_busy_s;
    s->speculation_hits = job->spec_hits;
    s->speculation_misses = job->spec_misses;
    s->feature_errors = job->feature_errors;
    s->warm_skipped = job->warm_skipped;
    s->trainings = job->trainings;
    s->trained_records = job->last_train.records;
    s->records = job->nrecs + job->released_recs;
    s->confirmed = job->confirmed;
    s->unconfirmed = job->unconfirmed;
    s->peak_gflops = job->peak_flops / 1e9;
    s->roof_gflops = job->sched != NULL ? kt_task_sched_roof(job->sched) / 1e9
                                        : 0;
}

void
kt_job_task(const struct kt_job *job, int i, struct kt_job_task_info *out)
{
    const struct kt_task_state *ts = &job->ts[i];

    out->name = job->tasks.v[i].name;
    out->weight = job->tasks.v[i].weight;
    out->flops = job->tasks.v[i].flops;
    out->latency_ms = kt_task_sched_latency_ms(job->sched, i);
    out->gflops = kt_task_sched_gflops(job->sched, i);
    out->best_cost = out->latency_ms > 0 ? out->latency_ms / 1e3 : 0;
    out->best_config = ts->best_config;
    out->trials = kt_task_sched_trials(job->sched, i);
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
