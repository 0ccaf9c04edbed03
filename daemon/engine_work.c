/* engine_work.c - the engine's thread-pool work: search + code generation
 * of a round, cost-model training, and features of stored trials for the
 * warm start.  Each callback touches only its own struct and read-only job
 * data (DAGs, config); results go back to the loop thread. */
#include "daemon/engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* other workloads' stored schedules offered to each task's search */
#define KT_OTHER_SEEDS 256

/* The features of a stored trial's state (the warm start). */
static int
stored_features(const struct kt_state *st, float **rows, int *nrows, char *err,
                size_t errlen)
{
    struct kt_looptree *lt = NULL;
    int rc;

    *rows = NULL;
    *nrows = 0;
    rc = kt_lower(st, &lt, err, errlen);
    if (rc == KT_OK)
        rc = kt_features_extract(lt, rows, nrows, err, errlen);
    kt_looptree_free(lt);
    return rc;
}

/* The C module of a candidate from the tree the search lowered and the
 * round's reference tree: nothing is replayed or lowered again. */
static int
candidate_source(const struct kt_dag *dag, const struct kt_looptree *ref,
                 const struct kt_looptree *lt, const struct kt_codegen_opts *cg,
                 char **src, char *err, size_t errlen)
{
    struct kt_buf b;
    int rc;

    kt_buf_init(&b);
    rc = kt_codegen_module_lowered(ref, lt, dag, cg, &b, err, errlen);
    if (rc == KT_OK)
        *src = kt_buf_take(&b);
    else
        kt_buf_free(&b);
    return rc;
}

/* The round's revisits (engine_revisit.c) as extra candidates, rebuilt
 * from their stored schedules; one that no longer builds is dropped. */
static void
add_revisits(struct kt_round *r, const struct kt_dag *dag,
             const struct kt_looptree *ref)
{
    int i;

    for (i = 0; i < r->nrevisit; i++) {
        struct kt_cand *c = &r->c[r->ncand];
        struct kt_state *st = NULL;
        struct kt_looptree *lt = NULL;
        char err[512];
        if (kt_steps_from_json(r->revisit[i].config, &c->steps, &c->nsteps, err,
                               sizeof(err)) != KT_OK ||
            kt_state_replay(dag, c->steps, c->nsteps, &st, err, sizeof(err)) !=
                KT_OK ||
            kt_lower(st, &lt, err, sizeof(err)) != KT_OK ||
            candidate_source(dag, ref, lt, &r->cg, &c->source, err,
                             sizeof(err)) != KT_OK) {
            free(c->steps);
            free(c->source);
            memset(c, 0, sizeof(*c));
        } else {
            if (kt_features_extract(lt, &c->rows, &c->nrows, err,
                                    sizeof(err)) != KT_OK)
                c->rows = NULL;
            kt_steps_hash(c->steps, c->nsteps, c->hash);
            c->config = r->revisit[i].config;
            r->revisit[i].config = NULL; /* the candidate owns it now */
            snprintf(c->seed_of, sizeof(c->seed_of), "%lld",
                     (long long)r->revisit[i].trial_no);
            c->revisit = 1;
            r->ncand++;
        }
        kt_looptree_free(lt);
        kt_state_free(st);
    }
}

/* The C of the task's stored best (r->best_config), to be timed beside
 * the task's would-be bests; left NULL when it no longer builds. */
static void
best_source(struct kt_round *r, const struct kt_dag *dag,
            const struct kt_looptree *ref)
{
    struct kt_step *steps = NULL;
    struct kt_state *st = NULL;
    struct kt_looptree *lt = NULL;
    char err[512] = "";
    int n = 0;

    if (kt_steps_from_json(r->best_config, &steps, &n, err, sizeof(err)) ==
            KT_OK &&
        kt_state_replay(dag, steps, n, &st, err, sizeof(err)) == KT_OK &&
        kt_lower(st, &lt, err, sizeof(err)) == KT_OK)
        candidate_source(dag, ref, lt, &r->cg, &r->best_source, err,
                         sizeof(err));
    if (r->best_source == NULL)
        snprintf(r->best_err, sizeof(r->best_err), "%s", err);
    kt_looptree_free(lt);
    kt_state_free(st);
    free(steps);
}

void
kt__engine_search_work(uv_work_t *w)
{
    struct kt_round *r = (struct kt_round *)w;
    const struct kt_dag *dag = kt__job_dag(r->job, r->task);
    struct kt_search_batch batch;
    struct kt_search_stats st;
    struct kt_looptree *ref = NULL;
    char ref_err[512] = "";
    double t0 = kt_now();
    int i, ref_rc = KT_OK;

    memset(&batch, 0, sizeof(batch));
    memset(&st, 0, sizeof(st));
    for (i = 0; i < r->nfeedback; i++) {
        const struct kt_feedback *f = &r->feedback[i];
        if (f->other)
            kt_search_seed_other(r->search, f->steps, f->nsteps,
                                 f->cost * dag->flops, f->from);
        else
            kt_search_record(r->search, f->steps, f->nsteps, f->cost);
    }
    r->rc = kt_search_next_batch(r->search, r->model, r->measured, r->nmeasured,
                                 r->want, &batch, &st, r->err, sizeof(r->err));
    if (r->rc != KT_OK)
        return;
    r->c = kt_xcalloc((size_t)(batch.n + r->nrevisit + 1), sizeof(*r->c));
    r->ncand = batch.n;
    if (batch.n + r->nrevisit > 0 || r->best_config != NULL)
        ref_rc = kt_lower_reference(dag, &ref, ref_err, sizeof(ref_err));
    for (i = 0; i < batch.n; i++) {
        struct kt_search_cand *sc = &batch.v[i];
        struct kt_cand *c = &r->c[i];
        struct kt_buf j;
        char err[512];
        kt_buf_init(&j);
        kt_steps_to_json(sc->steps, sc->nsteps, &j);
        c->config = kt_buf_take(&j);
        memcpy(c->hash, sc->hash, sizeof(c->hash));
        memcpy(c->seed_of, sc->seed_of, sizeof(c->seed_of));
        c->transfer = sc->transfer;
        /* the candidate owns what the search built from here */
        c->steps = sc->steps;
        c->nsteps = sc->nsteps;
        sc->steps = NULL;
        c->rows = sc->rows;
        c->nrows = sc->nrows;
        sc->rows = NULL;
        if (ref_rc != KT_OK ||
            candidate_source(dag, ref, sc->lt, &r->cg, &c->source, err,
                             sizeof(err)) != KT_OK) {
            /* The schedule cannot be instantiated: err_no 1, not built. */
            c->preset_err = KT_MERR_INSTANTIATION;
            c->preset_text = kt_xstrdup(ref_rc != KT_OK ? ref_err : err);
        } else if (c->rows == NULL) {
            if (r->feature_errors++ == 0)
                snprintf(r->feature_err, sizeof(r->feature_err), "%s",
                         sc->feature_err ? sc->feature_err : "no rows");
        }
    }
    if (ref_rc == KT_OK)
        add_revisits(r, dag, ref);
    if (ref_rc == KT_OK && r->best_config != NULL)
        best_source(r, dag, ref);
    else if (r->best_config != NULL)
        snprintf(r->best_err, sizeof(r->best_err), "%s", ref_err);
    kt_looptree_free(ref);
    kt_search_batch_free(&batch);
    r->search_s = kt_now() - t0;
    r->stats.sketches = st.sketches;
    r->stats.init_samples = st.sampled;
    r->stats.init_fail = st.sample_fail;
    r->stats.init_s = st.sample_s;
    for (i = 0; i < st.ngenerations && i < KT_ENGINE_MAX_ITERS; i++) {
        r->iters[i].iter = i;
        r->iters[i].max_score = st.gen[i].max_score;
        r->iters[i].min_score = st.gen[i].min_score;
        r->iters[i].pop = st.gen[i].pop;
        r->iters[i].mut_ok = st.gen[i].mutations_ok;
        r->iters[i].mut_fail = st.gen[i].mutations_fail;
    }
    r->stats.niters = i;
    r->stats.iters = r->iters;
    r->stats.out_states = r->ncand;
    r->stats.time_s = r->search_s;
    r->stats.best_score = st.best_score;
}

void
kt__engine_train_work(uv_work_t *w)
{
    struct kt_train_job *t = (struct kt_train_job *)w;
    struct kt_train_set set;
    struct kt_xgb_train_stats stats;
    double t0 = kt_now();
    int i;

    kt_train_set_init(&set);
    for (i = 0; i < t->nrecs; i++)
        kt_train_set_add(&set, t->recs[i]->rows, t->recs[i]->nrows,
                         t->recs[i]->task, t->recs[i]->cost);
    kt_train_set_label(&set, 0.0f);
    memset(&stats, 0, sizeof(stats));
    t->rc = kt_xgb_train(kt__job_model(t->job), &set, &stats, t->err,
                         sizeof(t->err));
    kt_train_set_free(&set);
    t->time_s = kt_now() - t0;
}

static int
cmp_cost(const void *a, const void *b)
{
    const struct kt_feedback *x = a, *y = b;

    return (x->cost > y->cost) - (x->cost < y->cost);
}

/* Other workloads' schedules seed each task's search where they decode:
 * the fastest (per FLOP) KT_OTHER_SEEDS of them, which bounds the
 * decoding a search does. */
static void
keep_best_others(struct kt_warm_job *wj)
{
    struct kt_feedback *others;
    int i, n = 0, nothers = 0;

    others = kt_xmalloc(sizeof(*others) * (size_t)(wj->nseeds + 1));
    for (i = 0; i < wj->nseeds; i++) {
        if (wj->seed_task[i] < 0) {
            others[nothers++] = wj->seeds[i];
            continue;
        }
        wj->seed_task[n] = wj->seed_task[i];
        wj->seeds[n++] = wj->seeds[i];
    }
    qsort(others, (size_t)nothers, sizeof(*others), cmp_cost);
    for (i = 0; i < nothers; i++) {
        if (i >= KT_OTHER_SEEDS) {
            free(others[i].steps);
            continue;
        }
        wj->seed_task[n] = -1;
        wj->seeds[n++] = others[i];
    }
    wj->nseeds = n;
    free(others);
}

void
kt__engine_warm_work(uv_work_t *w)
{
    struct kt_warm_job *wj = (struct kt_warm_job *)w;
    struct kt_dag *foreign = NULL; /* DAG of the last other workload */
    double t0 = kt_now();
    int i;

    wj->out = kt_xcalloc((size_t)(wj->nrows_in ? wj->nrows_in : 1),
                         sizeof(*wj->out));
    wj->seeds = kt_xcalloc((size_t)(wj->nrows_in ? wj->nrows_in : 1),
                           sizeof(*wj->seeds));
    wj->seed_task = kt_xcalloc((size_t)(wj->nrows_in ? wj->nrows_in : 1),
                               sizeof(*wj->seed_task));
    for (i = 0; i < wj->nrows_in; i++) {
        const struct kt_dag *dag = NULL;
        struct kt_step *steps = NULL;
        struct kt_state *st = NULL;
        struct kt_record *rec = &wj->out[wj->nout];
        char err[256] = "";
        int n, rc;
        if (wj->in[i].workload != NULL) {
            if (foreign == NULL ||
                strcmp(foreign->key, wj->in[i].workload) != 0) {
                kt_dag_free(foreign);
                foreign = NULL;
                kt_dag_from_key(wj->in[i].workload, &foreign, err, sizeof(err));
            }
            dag = foreign;
        } else {
            dag = kt__job_dag(wj->job, wj->in[i].task);
        }
        rc = dag != NULL ? kt_steps_from_json(wj->in[i].config, &steps, &n, err,
                                              sizeof(err))
                         : KT_EPARSE;
        if (rc == KT_OK)
            rc = kt_state_replay(dag, steps, n, &st, err, sizeof(err));
        if (rc == KT_OK)
            rc = stored_features(st, &rec->rows, &rec->nrows, err, sizeof(err));
        kt_state_free(st);
        if (rc == KT_OK && rec->rows != NULL) {
            rec->task = wj->in[i].task;
            rec->cost = wj->in[i].cost;
            wj->nout++;
        } else if (wj->skipped++ == 0) {
            snprintf(wj->skip_err, sizeof(wj->skip_err), "%s", err);
        }
        if (rc == KT_OK && wj->in[i].cost > 0 && dag->flops > 0) {
            struct kt_feedback *f = &wj->seeds[wj->nseeds];
            int foreign_load = wj->in[i].workload != NULL;
            int other = foreign_load || wj->in[i].sibling;
            f->steps = steps;
            f->nsteps = n;
            f->cost = other ? wj->in[i].cost / dag->flops : wj->in[i].cost;
            f->other = other;
            wj->seed_task[wj->nseeds++] = foreign_load ? -1 : wj->in[i].task;
            steps = NULL;
        }
        free(steps);
    }
    kt_dag_free(foreign);
    keep_best_others(wj);
    wj->time_s = kt_now() - t0;
}

void *
kt__engine_search_new(struct kt_job *job, int task, char *err, size_t errlen)
{
    const struct kt_model_conf *conf = kt__job_conf(job);
    struct kt_search_opts o;
    struct kt_search *s = NULL;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);

    kt_search_opts_default(&o);
    o.policy = conf->tuning.policy;
    o.population = (int)conf->tuning.population;
    o.seed = (uint64_t)conf->tuning.seed * 1000003u + (uint64_t)task;
    o.vector_bytes = kt__job_vector_bytes(job);
    o.nthreads = kt__job_search_threads(job);
    o.cores = conf->target.threads > 0 ? (int)conf->target.threads
                                       : (int)(cores > 0 ? cores : 1);
    if (kt_search_new(&s, kt__job_dag(job, task), &o, err, errlen) != KT_OK)
        return NULL;
    return s;
}

void
kt__engine_search_free(void *search)
{
    kt_search_free(search);
}
