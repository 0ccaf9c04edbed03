/* test_engine.c - the tuning engine against a fake tracker: a real SQLite
 * file, real searches, real cost-model training on the libuv pool (one
 * thread, so the order of pool work is known); only the workers are
 * replaced by a submit function that answers with made-up costs.
 *
 * Includes the engine's and the search's private headers to reach the
 * state the defects were about (a task's search lock, the training
 * snapshot). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/engine_int.h"
#include "scheduler/search_int.h"

/* One task, two rounds of 8: a look-ahead search of the same task runs
 * while the first batch is measured (a population of 128 keeps each
 * round's search short). */
static const char one_task_conf[] =
    "{\"name\": \"engine-test\", \"target\": {\"threads\": 1},"
    " \"tuning\": {\"trials\": 16, \"measures_per_round\": 8, \"seed\": 3,"
    " \"population\": 128},"
    " \"tasks\": [{\"name\": \"gemm16\", \"compute\": [\"O[i,j] += A[i,k] * "
    "B[k,j]\"],"
    "  \"shapes\": {\"A\": [16, 16], \"B\": [16, 16]}, \"weight\": 1}]}";

/* ---- the fake tracker ---------------------------------------------------- */

struct fake {
    uv_loop_t *loop;
    uv_timer_t timer;
    int hold;        /* keep a batch until fake_release */
    int fail_submit; /* refuse every batch */
    int liar;        /* candidate 0 of each batch claims 1 ns (worker "liar") */
    int retime_fails;       /* re-timings end in RUNTIME_DEVICE */
    int contended;          /* candidate 1 of each batch reports a load spike */
    int contention_retimes; /* its re-timings (one candidate, no avoid) */
    int apart_submits;      /* the first rounds' results come timed with the
                        * CPUs apart (twice as slow), the rest close */
    int nsubmits;           /* rounds' batches */
    int nretimes;           /* re-timings of a new best (avoid_worker set) */
    int retiming;           /* the batch in flight is one */
    int avoided_liar;       /* re-timings that avoid the worker "liar" */
    int nbeside;            /* ... with the best in the batch */
    double beside_at;       /* set: a re-timing times the best at this */
    double beside_ratio;    /* ... and the trial at this times it; unset,
                             * the best times twice the trial */
    int beside_spikes;      /* that many such batches time the best
                             * contended, 10x slower */
    double retime_factor;   /* set: a re-timing costs this times each
                             * program's first timing, the best's too */
    uint64_t batch[64];     /* the sources of the batch in flight */
    uint64_t first[256];    /* ... and of every first timing */
    double first_cost[256];
    int nfirst;
    int n; /* the batch in flight, 0 = none */
    int preset[64];
    kt_measure_done_cb cb;
    void *cb_arg;
    void (*on_submit)(struct fake *f);
    void *test;
    char cc[4096]; /* the compiler line of the last batch */
};

/* The first timing of candidate i of the batch in flight. */
static double
first_cost(const struct fake *f, int i)
{
    int k;

    for (k = 0; k < f->nfirst; k++)
        if (f->first[k] == f->batch[i])
            return f->first_cost[k];
    fail_msg("candidate %d was not timed before", i);
    return 0;
}

static void
fake_deliver(uv_timer_t *t)
{
    struct fake *f = t->data;
    struct kt_result res[64];
    kt_measure_done_cb cb = f->cb;
    int i, k, n = f->n;

    memset(res, 0, sizeof(res));
    for (i = 0; i < n; i++) {
        struct kt_result *r = &res[i];
        r->worker = f->retiming ? "fake-1" : "fake-0";
        r->err_text = "";
        if (f->retiming && f->beside_at > 0 && n == 2) {
            static const struct kt_kv spike[] = {{"occupancy", "0.1"},
                                                 {"contended", "1"}};
            int spiked = i == 1 && f->beside_spikes > 0;
            r->ncosts = 3;
            for (k = 0; k < 3; k++)
                r->costs[k] = f->beside_at * (i == 0 ? f->beside_ratio : 1) *
                              (spiked ? 10 : 1);
            r->cost = r->costs[1];
            if (spiked) {
                r->kvs = spike;
                r->nkvs = 2;
                f->beside_spikes--;
            }
        } else if (f->retiming && f->retime_factor > 0) {
            r->ncosts = 1;
            r->cost = r->costs[0] = f->retime_factor * first_cost(f, i);
        } else if (f->retiming && f->retime_fails) {
            r->err_no = KT_MERR_RUNTIME_DEVICE;
            r->err_text = "kernel process died of SIGSEGV";
        } else if (f->liar && !f->retiming && i == 0 && f->preset[i] == 0) {
            /* ... settled after two repeats (measure.settle) */
            static const struct kt_kv notes[] = {{"settled", "1"}};
            r->worker = "liar";
            r->ncosts = 2;
            for (k = 0; k < 2; k++)
                r->costs[k] = 1e-9;
            r->cost = 1e-9;
            r->nkvs = 1;
            r->kvs = notes;
        } else if (f->contended && !f->retiming && i == 1 && n > 1 &&
                   f->preset[i] == 0) {
            /* 20 times slower, a 20th of its CPU: load, not the kernel */
            static const struct kt_kv notes[] = {{"occupancy", "0.05"},
                                                 {"contended", "1"},
                                                 {"cpu_cost", "5e-05"}};
            r->ncosts = 3;
            for (k = 0; k < 3; k++)
                r->costs[k] = 1e-3;
            r->cost = 1e-3;
            r->nkvs = 3;
            r->kvs = notes;
        } else if (f->preset[i] != 0) {
            r->err_no = f->preset[i];
            r->err_text = "preset";
        } else if (i % 4 == 3) {
            static const struct kt_kv notes[] = {{"signal", "11"}};
            r->err_no = KT_MERR_RUNTIME_DEVICE;
            r->err_text = "killed by signal 11";
            r->nkvs = 1;
            r->kvs = notes;
        } else {
            /* the tracker's placement notes (measure/hold.c) */
            static const struct kt_kv apart[] = {{"xcpu_ns", "300"},
                                                 {"contended", "1"},
                                                 {"xcpu_quiet_ns", "60"}};
            static const struct kt_kv close[] = {{"xcpu_ns", "60"}};
            int is_apart = f->nsubmits <= f->apart_submits;
            r->ncosts = 3;
            for (k = 0; k < 3; k++)
                r->costs[k] = 1e-4 * (1 + (f->nsubmits * 7 + i) % 5) *
                              (is_apart ? 2 : 1);
            r->cost = r->costs[1];
            if (f->apart_submits > 0 && !f->retiming) {
                r->kvs = is_apart ? apart : close;
                r->nkvs = is_apart ? 3 : 1;
            }
        }
    }
    if (f->retiming && n == 2 && f->beside_at == 0 && f->retime_factor == 0 &&
        res[1].err_no == 0)
        res[1].cost = 2 * res[0].cost;
    for (i = 0; i < n && !f->retiming; i++)
        if (res[i].err_no == 0 && f->nfirst < 256) {
            f->first[f->nfirst] = f->batch[i];
            f->first_cost[f->nfirst++] = res[i].cost;
        }
    f->n = 0;
    f->cb = NULL;
    cb(f->cb_arg, res, n);
}

static int
fake_submit(void *arg, const char *key, const struct kt_candidate *c, int n,
            const struct kt_measure_opts *o, kt_measure_done_cb cb,
            void *cb_arg, char *err, size_t errlen)
{
    struct fake *f = arg;
    int i;

    assert_non_null(key);
    assert_int_equal(f->n, 0); /* one batch at a time */
    assert_true(n > 0 && n <= 64);
    if (f->fail_submit)
        return kt_seterr(err, errlen, KT_EIO, "fake tracker refuses batches");
    f->retiming = c[0].avoid_worker != NULL;
    if (f->retiming) {
        /* the trial, and the best it would beat when the run has its C */
        assert_true(n == 1 || n == 2);
        if (n == 2) {
            assert_string_equal(c[1].avoid_worker, c[0].avoid_worker);
            f->nbeside++;
        }
        /* a re-timing gets every repeat */
        assert_true(o->settle == 0 && o->stop_above_s == 0 &&
                    o->stop_ratio == 0);
        f->nretimes++;
        f->avoided_liar += strcmp(c[0].avoid_worker, "liar") == 0;
    } else if (f->contended && n == 1) {
        f->contention_retimes++;
    } else {
        f->nsubmits++;
    }
    f->n = n;
    f->cb = cb;
    f->cb_arg = cb_arg;
    snprintf(f->cc, sizeof(f->cc), "%s", c[0].cc);
    for (i = 0; i < n; i++) {
        f->batch[i] = c[i].source != NULL
                          ? kt_hash64(c[i].source, strlen(c[i].source))
                          : 0;
        f->preset[i] = c[i].preset_err_no;
        if (c[i].preset_err_no == 0)
            assert_non_null(strstr(c[i].source, "kt_kernel"));
    }
    if (f->on_submit != NULL && !f->retiming)
        f->on_submit(f);
    if (!f->hold)
        uv_timer_start(&f->timer, fake_deliver, 0, 0);
    return KT_OK;
}

static void
fake_release(struct fake *f)
{
    f->hold = 0;
    if (f->n > 0)
        uv_timer_start(&f->timer, fake_deliver, 0, 0);
}

/* ---- a job on a fresh database ------------------------------------------ */

struct run {
    char dir[64];
    char db_path[128];
    uv_loop_t loop;
    struct kt_storage *db;
    struct kt_engine *engine;
    struct kt_job *job;
    struct fake fake;
    int ended;
};

static void
run_ended(void *arg, struct kt_job *job)
{
    struct run *r = arg;

    (void)job;
    r->ended = 1;
    uv_close((uv_handle_t *)&r->fake.timer, NULL);
}

static void
run_open(struct run *r)
{
    struct kt_storage_opts so;
    struct kt_engine_opts eo;
    char err[512];

    memset(r, 0, sizeof(*r));
    snprintf(r->dir, sizeof(r->dir), "/tmp/kt_engine_XXXXXX");
    assert_non_null(mkdtemp(r->dir));
    snprintf(r->db_path, sizeof(r->db_path), "%s/tune.db", r->dir);
    assert_int_equal(uv_loop_init(&r->loop), 0);
    memset(&so, 0, sizeof(so));
    so.busy_timeout_ms = 50;
    assert_int_equal(kt_storage_open(&r->db, r->db_path, &so, err, sizeof(err)),
                     KT_OK);
    r->fake.loop = &r->loop;
    uv_timer_init(&r->loop, &r->fake.timer);
    r->fake.timer.data = &r->fake;
    r->fake.test = r;
    memset(&eo, 0, sizeof(eo));
    eo.loop = &r->loop;
    eo.db = r->db;
    eo.submit = fake_submit;
    eo.log_dir = r->dir;
    eo.submit_arg = &r->fake;
    assert_int_equal(kt_engine_new(&r->engine, &eo), KT_OK);
}

static void
run_start(struct run *r, const char *conf_text, int64_t trials)
{
    struct kt_model_conf *conf = NULL;
    char err[1024];

    if (kt_model_conf_parse("engine-test.json", conf_text, &conf, err,
                            sizeof(err)) != KT_OK)
        fail_msg("config: %s", err);
    if (kt_job_start(r->engine, conf, trials, run_ended, r, &r->job, err,
                     sizeof(err)) != KT_OK)
        fail_msg("kt_job_start: %s", err);
}

/* Frees the job (the loop has run dry) and opens a new one on the same
 * database. */
static void
run_finish_job(struct run *r)
{
    assert_true(r->ended);
    kt_job_free(r->job);
    r->job = NULL;
    r->ended = 0;
    uv_timer_init(&r->loop, &r->fake.timer);
}

static void
run_close(struct run *r)
{
    char cmd[128];

    if (r->job != NULL)
        kt_job_free(r->job);
    else
        uv_close((uv_handle_t *)&r->fake.timer, NULL);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    kt_engine_free(r->engine);
    assert_int_equal(uv_loop_close(&r->loop), 0);
    kt_storage_close(r->db);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", r->dir);
    assert_int_equal(system(cmd), 0);
}

static long long
count_rows(struct run *r, const char *sql)
{
    sqlite3_stmt *st;
    long long n = -1;

    assert_int_equal(sqlite3_prepare_v2(kt_storage_db(r->db), sql, -1, &st,
                                        NULL),
                     SQLITE_OK);
    if (sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}

/* ---- tests ---------------------------------------------------------------- */

/* The whole path: every trial stored once with its error, figures match. */
static void
test_engine_runs_budget_and_stores_every_trial(void **state)
{
    struct run r;
    struct kt_job_stats s;
    struct kt_job_task_info ti;

    (void)state;
    run_open(&r);
    run_start(&r, one_task_conf, 0);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_true(r.ended);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    kt_job_get_stats(r.job, &s);
    assert_int_equal(s.trials, 16);
    assert_int_equal(s.rounds, 2);
    /* after round 1 only: no training after the last round */
    assert_int_equal(s.trainings, 1);
    assert_int_equal(r.fake.nsubmits, 2);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs"), 16);
    assert_int_equal(count_rows(&r,
                                "SELECT count(DISTINCT sched_hash) FROM logs"),
                     16);
    assert_int_equal(count_rows(&r,
                                "SELECT count(*) FROM logs WHERE err_no = 4"),
                     s.errors);
    assert_true(s.errors >= 4);
    kt_job_task(r.job, 0, &ti);
    assert_true(ti.best_cost > 0 && ti.best_cost <= 5e-4);
    assert_non_null(ti.best_config);
    assert_true(s.total_latency_ms > 0);
    {
        /* the task-table log shows every GA generation of both rounds */
        char cmd[256];
        snprintf(cmd, sizeof(cmd),
                 "test $(cat %s/*.log 2>/dev/null | grep -c "
                 "'^GA Iter: [0-9]') -ge 2",
                 r.dir);
        assert_int_equal(system(cmd), 0);
    }
    /* tasks.shapes holds the task's input and output shapes */
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM tasks WHERE shapes = "
                                    "'{\"A\": [16, 16], \"B\": [16, 16], "
                                    "\"O\": [16, 16]}'"),
                     1);
    run_close(&r);
}

/* Results timed with the CPUs apart that could beat the task's best at
 * the slowdown apart are measured again once a round is timed close:
 * each a trial of the budget naming the first in revisit_of, with its
 * schedule, timed close. */
static void
test_engine_revisits_programs_timed_apart(void **state)
{
    struct run r;
    long long revisits;

    (void)state;
    run_open(&r);
    r.fake.apart_submits = 3;
    run_start(&r, one_task_conf, 56);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_true(r.ended);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs"), 56);
    revisits = count_rows(&r,
                          "SELECT count(*) FROM kvs WHERE k = 'revisit_of'");
    assert_true(revisits >= 2);
    /* each names a trial of the same schedule timed apart ... */
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM kvs k"
                                    " JOIN logs l ON l.id = k.log_id"
                                    " JOIN logs o ON o.trial_no = CAST(k.v AS "
                                    "INTEGER)"
                                    " AND o.sched_hash = l.sched_hash"
                                    " JOIN kvs q ON q.log_id = o.id"
                                    " AND q.k = 'xcpu_quiet_ns'"
                                    " WHERE k.k = 'revisit_of'"),
                     revisits);
    /* ... in the first three rounds; it was timed close, after them */
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM kvs k"
                                    " JOIN kvs q ON q.log_id = k.log_id"
                                    " AND q.k = 'xcpu_quiet_ns'"
                                    " WHERE k.k = 'revisit_of'"),
                     0);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM kvs k"
                                    " JOIN logs l ON l.id = k.log_id"
                                    " WHERE k.k = 'revisit_of'"
                                    " AND l.trial_no < 24"),
                     0);
    run_close(&r);
}

/* --- memory is bounded by the training window, not by the trials ---
 * A window of 4 over 32 trials: the job's training records stay within
 * the window's bound at every submit (the fake tracker looks at them),
 * every record is still counted, and the search keeps no genome of a
 * candidate whose result is in. */
struct window_watch {
    struct run *run;
    int max_recs, max_pending, max_trained;
};

static struct window_watch window_watch;

static void
watch_window(struct fake *f)
{
    struct run *r = f->test;
    struct kt_search *s = r->job->ts[0].search;

    if (r->job->nrecs > window_watch.max_recs)
        window_watch.max_recs = r->job->nrecs;
    if (r->job->last_train.records > window_watch.max_trained)
        window_watch.max_trained = (int)r->job->last_train.records;
    /* one batch is out (this one): the previous ones were recorded by
     * the search work that built it */
    if (s != NULL && s->nprop > window_watch.max_pending)
        window_watch.max_pending = s->nprop;
}

static const char windowed_conf[] =
    "{\"name\": \"engine-window\", \"target\": {\"threads\": 1},"
    " \"tuning\": {\"trials\": 32, \"measures_per_round\": 8, \"seed\": 3,"
    " \"population\": 64, \"train_window\": 4},"
    " \"tasks\": [{\"name\": \"gemm16\", \"compute\": [\"O[i,j] += A[i,k] * "
    "B[k,j]\"],"
    "  \"shapes\": {\"A\": [16, 16], \"B\": [16, 16]}, \"weight\": 1}]}";

static void
test_engine_training_window_bounds_records(void **state)
{
    struct run r;
    struct kt_job_stats s;
    const int window = 4;
    /* window + at most window fastest programs + a quarter window of
     * arrivals before the next compaction (at least 1) */
    const int bound = 2 * window + 1;

    (void)state;
    run_open(&r);
    memset(&window_watch, 0, sizeof(window_watch));
    r.fake.on_submit = watch_window;
    run_start(&r, windowed_conf, 32);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_true(r.ended);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    kt_job_get_stats(r.job, &s);
    assert_int_equal(s.trials, 32);
    assert_int_equal(r.fake.nsubmits, 4);
    assert_true(window_watch.max_recs > 0);
    if (window_watch.max_recs > bound)
        fail_msg("%d training records held (window %d, bound %d)",
                 window_watch.max_recs, window, bound);
    assert_true(window_watch.max_trained > 0 &&
                window_watch.max_trained <= bound);
    /* every measured program was a record once */
    assert_int_equal(s.records, s.trials - s.feature_errors);
    /* the genomes of at most the two batches not yet recorded */
    assert_true(window_watch.max_pending <= 16);
    run_close(&r);
}

/* The search keeps the genomes of measured programs only while they can
 * seed a round (the fastest use_measured_ratio x population of them, plus
 * what arrived since the last pruning), and forgets each pending genome
 * once its result is in: after 96 results it holds neither all 96 nor
 * any pending one, and the fastest three still seed the next round. */
static void
test_search_keeps_only_the_seeds_it_uses(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_search_opts o;
    struct kt_search *s = NULL;
    struct kt_search_batch b;
    struct kt_search_stats st;
    uint64_t fastest[3] = {0, 0, 0};
    double fastest_cost[3] = {1, 1, 1};
    char err[512];
    int round, i, k, j, recorded = 0, keep;

    (void)state;
    assert_int_equal(kt_op_matmul(&d, 64, 64, 64), KT_OK);
    assert_int_equal(kt_op_build(&d, &dag, err, sizeof(err)), KT_OK);
    kt_search_opts_default(&o);
    o.policy = KT_POLICY_SKETCH_RANDOM;
    o.population = 16;
    if (kt_search_new(&s, dag, &o, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    keep = (int)(o.use_measured_ratio * o.population);
    assert_int_equal(keep, 3);
    for (round = 0; round < 12; round++) {
        assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 8, &b, NULL,
                                              err, sizeof(err)),
                         KT_OK);
        assert_int_equal(b.n, 8);
        for (i = 0; i < b.n; i++) {
            uint64_t h = 0;
            double cost = 1e-3 * (1 + (recorded * 37) % 101);
            assert_int_equal(kt_search_record(s, b.v[i].steps, b.v[i].nsteps,
                                              cost),
                             1);
            kt_hash_parse(b.v[i].hash, &h);
            for (k = 0; k < 3 && cost >= fastest_cost[k]; k++)
                ;
            for (j = 2; j > k; j--) {
                fastest[j] = fastest[j - 1];
                fastest_cost[j] = fastest_cost[j - 1];
            }
            if (k < 3) {
                fastest[k] = h;
                fastest_cost[k] = cost;
            }
            recorded++;
        }
        kt_search_batch_free(&b);
        assert_int_equal(s->nprop, 0);
        assert_true(s->nmeas <= 2 * keep + 64);
    }
    assert_true(s->nmeas < recorded);
    for (k = 0; k < 3; k++) {
        for (i = 0; i < s->nmeas && s->meas[i].hash != fastest[k]; i++)
            ;
        if (i == s->nmeas)
            fail_msg("the %d-th fastest measured program was dropped", k + 1);
    }
    assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 8, &b, &st, err,
                                          sizeof(err)),
                     KT_OK);
    assert_int_equal(st.measured_seeds, keep);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* A refused batch fails the job with the tracker's message. */
static void
test_engine_submit_failure_fails_job(void **state)
{
    struct run r;

    (void)state;
    run_open(&r);
    r.fake.fail_submit = 1;
    run_start(&r, one_task_conf, 0);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_true(r.ended);
    assert_int_equal(kt_job_state(r.job), KT_JOB_FAILED);
    assert_non_null(
        strstr(kt_job_error(r.job), "fake tracker refuses batches"));
    run_close(&r);
}

/* --- the loop thread never waits on a search lock ---
 * A helper thread holds the task's search lock (as a long look-ahead
 * search of the same task does) while the first batch's results arrive.
 * The loop must apply the round anyway; only then is the lock released.
 * If the loop blocked on the lock, the helper gives up after a generous
 * deadline and the test fails (no timing is asserted otherwise). */
struct lock_holder {
    pthread_t th;
    pthread_mutex_t m;
    pthread_cond_t cv;
    struct kt_search *search;
    int locked, release, timed_out;
    uv_prepare_t check;
    struct run *run;
};

static struct lock_holder holder;

static void *
hold_lock(void *arg)
{
    struct lock_holder *h = arg;
    struct timespec dl;

    pthread_mutex_lock(&h->search->lock);
    pthread_mutex_lock(&h->m);
    h->locked = 1;
    pthread_cond_broadcast(&h->cv);
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 30;
    while (!h->release && !h->timed_out)
        if (pthread_cond_timedwait(&h->cv, &h->m, &dl) != 0)
            h->timed_out = 1;
    pthread_mutex_unlock(&h->m);
    pthread_mutex_unlock(&h->search->lock);
    return NULL;
}

static void
release_after_apply(uv_prepare_t *c)
{
    struct lock_holder *h = c->data;
    struct kt_job_stats s;

    kt_job_get_stats(h->run->job, &s);
    if (s.rounds < 1)
        return;
    pthread_mutex_lock(&h->m);
    h->release = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->m);
    uv_prepare_stop(c);
}

static void
lock_on_first_submit(struct fake *f)
{
    struct run *r = f->test;

    if (f->nsubmits != 1)
        return;
    holder.search = r->job->ts[0].search;
    assert_non_null(holder.search);
    assert_int_equal(pthread_create(&holder.th, NULL, hold_lock, &holder), 0);
    pthread_mutex_lock(&holder.m);
    while (!holder.locked)
        pthread_cond_wait(&holder.cv, &holder.m);
    pthread_mutex_unlock(&holder.m);
}

static void
test_engine_loop_never_waits_on_search_lock(void **state)
{
    struct run r;
    struct kt_job_stats s;

    (void)state;
    memset(&holder, 0, sizeof(holder));
    pthread_mutex_init(&holder.m, NULL);
    pthread_cond_init(&holder.cv, NULL);
    run_open(&r);
    holder.run = &r;
    r.fake.on_submit = lock_on_first_submit;
    uv_prepare_init(&r.loop, &holder.check);
    holder.check.data = &holder;
    uv_prepare_start(&holder.check, release_after_apply);
    uv_unref((uv_handle_t *)&holder.check);
    run_start(&r, one_task_conf, 0);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    pthread_join(holder.th, NULL);
    uv_close((uv_handle_t *)&holder.check, NULL);
    assert_false(holder.timed_out);
    assert_true(r.ended);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    kt_job_get_stats(r.job, &s);
    assert_int_equal(s.trials, 16);
    assert_int_equal(s.speculation_hits, 1);
    pthread_mutex_destroy(&holder.m);
    pthread_cond_destroy(&holder.cv);
    run_close(&r);
}

/* --- rounds applied while the model trains are trained on ---
 * The pool has one thread; a blocker work item keeps it busy, so the
 * training queued by round 1 is still pending when round 2 is applied.
 * When that training finishes, a new one on both rounds must start at
 * once (not only when round 3 arrives). */
struct blocker {
    uv_work_t work;
    pthread_mutex_t m;
    pthread_cond_t cv;
    int go, queued;
    int retrain_queued; /* a training was pending when the first ended */
    int64_t rounds_at_first;
    struct run *run;
};

static struct blocker blk;

static void
block_work(uv_work_t *w)
{
    struct blocker *b = w->data;

    pthread_mutex_lock(&b->m);
    while (!b->go)
        pthread_cond_wait(&b->cv, &b->m);
    pthread_mutex_unlock(&b->m);
}

static void
block_done(uv_work_t *w, int status)
{
    (void)w;
    (void)status;
}

static void
hold_first_batch(struct fake *f)
{
    if (f->nsubmits == 1)
        f->hold = 1;
}

static void
watch_training(uv_prepare_t *c)
{
    struct blocker *b = c->data;
    struct kt_job *job = b->run->job;
    struct kt_job_stats s;

    if (job == NULL)
        return;
    kt_job_get_stats(job, &s);
    if (!b->queued && b->run->fake.n > 0 && job->ready != NULL) {
        /* Batch 1 at the fake, round 2 searched: occupy the pool, then
         * let batch 1 arrive (its training queues behind the blocker). */
        b->work.data = b;
        assert_int_equal(uv_queue_work(&b->run->loop, &b->work, block_work,
                                       block_done),
                         0);
        b->queued = 1;
        fake_release(&b->run->fake);
    } else if (b->queued && !b->go && s.rounds >= 2) {
        assert_non_null(job->training); /* round 1's, still queued */
        pthread_mutex_lock(&b->m);
        b->go = 1;
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->m);
    } else if (b->go && s.trainings >= 1) {
        b->rounds_at_first = s.rounds;
        b->retrain_queued = job->training != NULL;
        uv_prepare_stop(c);
    }
}

static void
test_engine_train_again_trains_late_rounds(void **state)
{
    struct run r;
    struct kt_job_stats s;
    uv_prepare_t check;

    (void)state;
    memset(&blk, 0, sizeof(blk));
    pthread_mutex_init(&blk.m, NULL);
    pthread_cond_init(&blk.cv, NULL);
    run_open(&r);
    blk.run = &r;
    r.fake.on_submit = hold_first_batch;
    uv_prepare_init(&r.loop, &check);
    check.data = &blk;
    /* referenced: the loop has nothing else to do while batch 1 is held */
    uv_prepare_start(&check, watch_training);
    run_start(&r, one_task_conf, 24);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&check, NULL);
    assert_true(r.ended);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    assert_int_equal(blk.rounds_at_first, 2);
    assert_true(blk.retrain_queued);
    kt_job_get_stats(r.job, &s);
    assert_int_equal(s.rounds, 3);
    assert_int_equal(s.records, 24 - s.feature_errors);
    pthread_mutex_destroy(&blk.m);
    pthread_cond_destroy(&blk.cv);
    run_close(&r);
}

/* --- a stored trial the warm start cannot rebuild is logged and counted --- */
static void
test_engine_warm_start_counts_skipped_trials(void **state)
{
    struct run r;
    struct kt_job_stats s;
    char *msg = NULL;

    (void)state;
    run_open(&r);
    run_start(&r, one_task_conf, 8);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    kt_job_get_stats(r.job, &s);
    assert_int_equal(s.trials, 8);
    assert_int_equal(s.warm_skipped, 0);
    run_finish_job(&r);
    assert_int_equal(sqlite3_exec(kt_storage_db(r.db),
                                  "UPDATE logs SET config = '[[\"XX\"]]' WHERE "
                                  "id = "
                                  "(SELECT min(id) FROM logs)",
                                  NULL, NULL, &msg),
                     SQLITE_OK);
    run_start(&r, one_task_conf, 16);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    kt_job_get_stats(r.job, &s);
    assert_int_equal(s.warm_skipped, 1);
    assert_int_equal(s.trials, 16); /* 8 resumed + 8 new */
    /* the resumed measured set kept the search off stored schedules */
    assert_int_equal(count_rows(&r,
                                "SELECT count(DISTINCT sched_hash) FROM logs"),
                     16);
    run_close(&r);
}

/* --- another workload's stored programs seed the search --- */

/* A job on a 32x16x32 GEMM after one on the 16^3 GEMM, in the same
 * database: the warm start offers the first job's programs to the second
 * job's search, and its first round holds mutants of them (seed_of). */
static void
test_engine_other_workload_seeds(void **state)
{
    static const char other_conf[] =
        "{\"name\": \"engine-other\", \"target\": {\"threads\": 1},"
        " \"tuning\": {\"trials\": 8, \"measures_per_round\": 8, \"seed\": "
        "5, \"population\": 128}, \"tasks\": [{\"name\": \"gemm32\", "
        "\"compute\": [\"O[i,j] += "
        "A[i,k] * B[k,j]\"], \"shapes\": {\"A\": [32, 16], \"B\": [16, 32]}}]}";
    struct run r;
    struct kt_job_stats s;

    (void)state;
    run_open(&r);
    run_start(&r, one_task_conf, 16);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    kt_job_get_stats(r.job, &s);
    assert_int_equal(s.trials, 16);
    run_finish_job(&r);
    run_start(&r, other_conf, 8);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    assert_int_equal(count_rows(&r, "SELECT count(DISTINCT workload_hash) "
                                    "FROM logs"),
                     2);
    assert_true(count_rows(&r, "SELECT count(*) FROM logs l JOIN kvs k ON "
                               "k.log_id = l.id AND k.k = 'seed_of' WHERE "
                               "l.id > 16 AND k.v IN (SELECT sched_hash FROM "
                               "logs WHERE id <= 16 AND err_no = 0)") >= 1);
    run_close(&r);
}

/* --- records of a sibling target (other optimiser flags) --- */

/* The same model tuned with a --param added to the default compiler line,
 * then with the default line: the sibling's records train the model and
 * seed the search (the new run's first round holds mutants of them), but
 * they are not the default target's trials: it measures its own whole
 * budget, and resuming it finds only its own. */
static void
test_engine_sibling_target_seeds(void **state)
{
    static const char param_conf[] =
        "{\"name\": \"engine-test\", \"target\": {\"threads\": 1, "
        "\"cflags\": [\"-O3\", \"--param=max-completely-peel-times=4\", "
        "\"-march=native\", \"-fopenmp\"]},"
        " \"tuning\": {\"trials\": 16, \"measures_per_round\": 8, \"seed\": 3,"
        " \"population\": 128},"
        " \"tasks\": [{\"name\": \"gemm16\", \"compute\": [\"O[i,j] += A[i,k] "
        "* "
        "B[k,j]\"],"
        "  \"shapes\": {\"A\": [16, 16], \"B\": [16, 16]}, \"weight\": 1}]}";
    static const char sibling[] = "cpu:local:gcc -O3 "
                                  "--param=max-completely-peel-times=4 "
                                  "-march=native -fopenmp";
    struct run r;
    struct kt_job_stats s;
    char sql[512];

    (void)state;
    run_open(&r);
    run_start(&r, param_conf, 16);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    run_finish_job(&r);
    run_start(&r, one_task_conf, 8);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    kt_job_get_stats(r.job, &s);
    assert_int_equal(s.resumed, 0);
    assert_int_equal(s.trials, 8);
    assert_true(s.records >= 16); /* the sibling's 16 were trained on */
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM logs WHERE target = '%s'",
             sibling);
    assert_int_equal(count_rows(&r, sql), 16);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs WHERE target "
                                    "= 'cpu:local:gcc -O3 -march=native "
                                    "-fopenmp'"),
                     8);
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM logs l JOIN kvs k ON k.log_id = l.id AND "
             "k.k = 'seed_of' WHERE l.target != '%s' AND k.v IN (SELECT "
             "sched_hash FROM logs WHERE target = '%s' AND err_no = 0)",
             sibling, sibling);
    assert_true(count_rows(&r, sql) >= 1);
    run_finish_job(&r);
    run_start(&r, one_task_conf, 8); /* already done: its own 8 */
    uv_run(&r.loop, UV_RUN_DEFAULT);
    kt_job_get_stats(r.job, &s);
    assert_int_equal(s.resumed, 8);
    assert_int_equal(s.trials, 8);
    run_close(&r);
}

/* --- a long compiler line reaches the workers and the database whole --- */
static void
test_engine_long_compiler_line_not_truncated(void **state)
{
    struct run r;
    struct kt_buf conf, flags;
    char sql[256];
    int i;

    (void)state;
    kt_buf_init(&flags);
    for (i = 0; i < 80; i++)
        kt_buf_printf(&flags, "%s\"-DKT_A_RATHER_LONG_DEFINE_%02d=1\"",
                      i ? ", " : "", i);
    kt_buf_init(&conf);
    kt_buf_printf(&conf,
                  "{\"name\": \"long-cc\", \"target\": {\"threads\": 1, "
                  "\"cflags\": [%s]}, \"tuning\": {\"trials\": 8, "
                  "\"measures_per_round\": 8, \"population\": 128}, "
                  "\"tasks\": [{\"name\": \"mm\", "
                  "\"compute\": [\"O[i,j] += A[i,k] * B[k,j]\"], \"shapes\": "
                  "{\"A\": [8, 8], \"B\": [8, 8]}}]}",
                  flags.p);
    run_open(&r);
    run_start(&r, conf.p, 0);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    assert_true(strlen(r.fake.cc) > 2400);
    assert_non_null(strstr(r.fake.cc, "-DKT_A_RATHER_LONG_DEFINE_79=1"));
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM jobs WHERE length(target) > %d "
             "AND target LIKE '%%_DEFINE_79=1'",
             (int)strlen(r.fake.cc));
    assert_int_equal(count_rows(&r, sql), 1);
    kt_buf_free(&flags);
    kt_buf_free(&conf);
    run_close(&r);
}

/* --- the state a candidate carries is the replay of its steps --- */
static void
test_candidate_state_matches_replay(void **state)
{
    struct kt_model_conf *conf = NULL;
    struct kt_tasks tasks;
    struct kt_search_opts o;
    struct kt_search *s = NULL;
    struct kt_search_batch b;
    struct kt_search_stats sst;
    struct kt_codegen_opts cg;
    char err[512];
    int i;

    (void)state;
    assert_int_equal(kt_model_conf_parse("t.json", one_task_conf, &conf, err,
                                         sizeof(err)),
                     KT_OK);
    assert_int_equal(kt_tasks_extract(conf, &tasks, err, sizeof(err)), KT_OK);
    kt_search_opts_default(&o);
    o.population = 64;
    assert_int_equal(kt_search_new(&s, tasks.v[0].dag, &o, err, sizeof(err)),
                     KT_OK);
    assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 16, &b, &sst, err,
                                          sizeof(err)),
                     KT_OK);
    assert_true(b.n > 0);
    /* one record per GA generation: the initial population, then each pass */
    assert_int_equal(sst.ngenerations, sst.iters + 1);
    assert_int_equal(sst.iters, 2); /* random model: Ansor's 2 iterations */
    assert_int_equal(sst.gen[0].mutations_ok + sst.gen[0].mutations_fail, 0);
    assert_int_equal(sst.gen[1].mutations_ok + sst.gen[2].mutations_ok,
                     sst.mutations_ok);
    assert_true(sst.gen[2].pop > 0);
    assert_true(sst.gen[2].max_score >= sst.gen[2].min_score);
    kt_codegen_default_opts(&cg);
    for (i = 0; i < b.n; i++) {
        struct kt_state *st = NULL;
        struct kt_buf x, y;
        assert_non_null(b.v[i].state);
        assert_int_equal(kt_state_replay(tasks.v[0].dag, b.v[i].steps,
                                         b.v[i].nsteps, &st, err, sizeof(err)),
                         KT_OK);
        kt_buf_init(&x);
        kt_buf_init(&y);
        assert_int_equal(kt_codegen_module(b.v[i].state, tasks.v[0].dag, &cg,
                                           &x, err, sizeof(err)),
                         KT_OK);
        assert_int_equal(kt_codegen_module(st, tasks.v[0].dag, &cg, &y, err,
                                           sizeof(err)),
                         KT_OK);
        assert_string_equal(x.p, y.p);
        kt_buf_free(&x);
        kt_buf_free(&y);
        kt_state_free(st);
    }
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_tasks_free(&tasks);
    kt_model_conf_free(conf);
}

/* --- a batch the database refuses is kept (copied) and stored later --- */
struct db_locker {
    sqlite3 *other;
    int locked, released;
    struct run *run;
};

static struct db_locker locker;

static void
lock_db_on_first_submit(struct fake *f)
{
    struct run *r = f->test;

    if (f->nsubmits != 1)
        return;
    assert_int_equal(sqlite3_open(r->db_path, &locker.other), SQLITE_OK);
    assert_int_equal(sqlite3_exec(locker.other, "BEGIN IMMEDIATE", NULL, NULL,
                                  NULL),
                     SQLITE_OK);
    locker.locked = 1;
}

static void
release_after_refusal(uv_prepare_t *p)
{
    struct kt_job *job = locker.run->job;

    if (!locker.locked || job == NULL || job->measuring == NULL ||
        job->measuring->retry == NULL)
        return;
    /* the engine copied the results and waits for its retry timer */
    assert_non_null(strstr(kt_job_error(job), "storage"));
    assert_int_equal(sqlite3_exec(locker.other, "COMMIT", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(locker.other);
    locker.released = 1;
    uv_prepare_stop(p);
}

static void
test_engine_refused_batch_is_stored_on_retry(void **state)
{
    struct run r;
    struct kt_job_stats s;
    uv_prepare_t prep;

    (void)state;
    memset(&locker, 0, sizeof(locker));
    run_open(&r);
    locker.run = &r;
    r.fake.on_submit = lock_db_on_first_submit;
    uv_prepare_init(&r.loop, &prep);
    uv_prepare_start(&prep, release_after_refusal);
    uv_unref((uv_handle_t *)&prep);
    run_start(&r, one_task_conf, 0);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&prep, NULL);
    assert_true(locker.released);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    assert_string_equal(kt_job_error(r.job), "");
    kt_job_get_stats(r.job, &s);
    assert_int_equal(s.trials, 16);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs"), 16);
    /* what the tracker lent survived the wait: texts, costs, key/values */
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs WHERE err_no = "
                                    "4 AND "
                                    "err_text = 'killed by signal 11'"),
                     s.errors);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM kvs WHERE k = "
                                    "'signal'"),
                     s.errors);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM kvs WHERE k = "
                                    "'timed_also'"),
                     s.confirmed);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs WHERE err_no = "
                                    "0 AND "
                                    "cost <= 0"),
                     0);
    run_close(&r);
}

/* --- a program whose features fail is measured, logged and counted --- */
static void
test_engine_counts_feature_failures(void **state)
{
    struct run r;
    struct kt_job_stats s;
    struct kt_buf conf;
    int i;

    (void)state;
    /* 70 loads in one store: more accesses than the features describe */
    kt_buf_init(&conf);
    kt_buf_puts(&conf, "{\"name\": \"many-loads\", \"tuning\": {\"trials\": 8, "
                       "\"measures_per_round\": 8, \"population\": 128}, "
                       "\"tasks\": [{\"name\": \"sum70\", \"compute\": "
                       "[\"O[i,j] = A[i,j]");
    for (i = 1; i < 70; i++)
        kt_buf_puts(&conf, " + A[i,j]");
    kt_buf_puts(&conf, "\"], \"shapes\": {\"A\": [64, 64]}}]}");
    run_open(&r);
    run_start(&r, conf.p, 0);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    kt_job_get_stats(r.job, &s);
    assert_true(s.trials >= 1);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs"), s.trials);
    /* measured and stored all the same; only the training rows are missing */
    assert_true(s.feature_errors >= 1);
    assert_int_equal(s.records, s.trials - s.feature_errors);
    kt_buf_free(&conf);
    run_close(&r);
}

/* --- a new best is timed again before it counts --- */

/* A worker that claims 1 ns for a program never makes it the best: the
 * program is timed again on another worker and the slower timing stands,
 * with its three costs and without the first timing's "settled" note. */
static void
test_engine_new_best_is_timed_again(void **state)
{
    struct run r;
    struct kt_job_stats s;
    struct kt_job_task_info ti;

    (void)state;
    run_open(&r);
    r.fake.liar = 1;
    run_start(&r, one_task_conf, 0);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    kt_job_get_stats(r.job, &s);
    kt_job_task(r.job, 0, &ti);
    assert_true(ti.best_cost >= 1e-4);
    assert_true(r.fake.nretimes >= 1);
    assert_int_equal(s.confirmed, r.fake.nretimes);
    assert_int_equal(s.unconfirmed, 0);
    assert_true(r.fake.avoided_liar >= 1);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs WHERE err_no = "
                                    "0 AND cost < 1e-6"),
                     0);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM kvs WHERE k = "
                                    "'timed_also' AND v LIKE '1e-09 s on "
                                    "liar'"),
                     r.fake.avoided_liar);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM kvs WHERE k = "
                                    "'settled'"),
                     0);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs WHERE err_no = "
                                    "0 AND json_array_length(costs) != 3"),
                     0);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs"), 16);
    run_close(&r);
}

/* A result the worker marked contended (a load spike) whose cost at its
 * CPU time would beat the best is timed once more and keeps the faster
 * timing; it is neither buried by the spike nor made best unconfirmed. */
static void
test_engine_contended_result_is_timed_again(void **state)
{
    struct run r;
    struct kt_job_stats s;
    int again;

    (void)state;
    run_open(&r);
    r.fake.contended = 1;
    run_start(&r, one_task_conf, 0);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    kt_job_get_stats(r.job, &s);
    assert_true(r.fake.contention_retimes >= 1);
    again = count_rows(&r, "SELECT count(*) FROM kvs WHERE k = "
                           "'timed_contended' AND v LIKE '0.001 s on fake-0'");
    assert_int_equal(again, r.fake.contention_retimes);
    /* the re-timing's cost and notes stand, not the spike's */
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs WHERE cost >= "
                                    "1e-3"),
                     0);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM kvs WHERE k = "
                                    "'contended' AND v = '0'"),
                     again);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs"), 16);
    run_close(&r);
}

/* The best, timed beside a would-be best in its confirmation batch,
 * decides by the ratio of the two: run with the fake timing that batch at
 * best_at for the best and best_at x ratio for the trial. */
static void
run_beside(struct run *r, double best_at, double ratio)
{
    run_open(r);
    r->fake.beside_at = best_at;
    r->fake.beside_ratio = ratio;
    run_start(r, one_task_conf, 0);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    assert_int_equal(kt_job_state(r->job), KT_JOB_DONE);
    /* the first best is timed alone; the later ones beside it */
    assert_true(r->fake.nbeside >= 1);
    assert_int_equal(count_rows(r, "SELECT count(*) FROM kvs WHERE k = "
                                   "'timed_beside'"),
                     r->fake.nbeside);
}

#define BEST_ROW                                                               \
    "(SELECT id FROM logs WHERE err_no = 0 ORDER BY cost, id LIMIT 1)"

/* 1 when the stored best became the best beside another, else 0. */
static long long
best_timed_beside(struct run *r)
{
    return count_rows(r, "SELECT count(*) FROM kvs WHERE k = 'timed_beside' "
                         "AND log_id = " BEST_ROW);
}

/* Every program that became the task's best was timed again first, the
 * ones whose first timing only tied a confirmed cost of their round
 * included: a trial stored below every trial of the rounds before
 * (rounds of 8) and the lowest of its own round (the first of equals). A
 * trial below the rounds before but above its round's best was never the
 * best: its round's results come in together. */
static void
test_engine_no_best_on_an_unconfirmed_tie(void **state)
{
    struct run r;

    (void)state;
    run_open(&r);
    /* round 1's successful trials 4, 0, 5, 1, 6 and 2 time 2, 3, 3, 4, 4
     * and 5 (x 1e-4) first; trial 4, timed again at 2.5x, costs 5, and
     * the others, 2.5x as slow beside it, cost 7.5 to 10; trial 2's first
     * 5 ties trial 4's cost, and trial 2 comes first */
    r.fake.retime_factor = 2.5;
    run_start(&r, one_task_conf, 0);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    assert_true(r.fake.nretimes >= 2);
    assert_int_equal(
        count_rows(&r, "SELECT count(*) FROM logs l WHERE l.err_no = 0 AND "
                       "NOT EXISTS (SELECT 1 FROM logs e WHERE e.err_no = 0 "
                       "AND e.id != l.id AND ((e.trial_no / 8 < l.trial_no / "
                       "8 AND e.cost <= l.cost) OR (e.trial_no / 8 = "
                       "l.trial_no / 8 AND (e.cost < l.cost OR (e.cost = "
                       "l.cost AND e.trial_no < l.trial_no))))) AND NOT "
                       "EXISTS (SELECT 1 FROM kvs k WHERE k.log_id = l.id AND "
                       "k.k = 'timed_also')"),
        0);
    run_close(&r);
}

/* A trial 3x slower than the best side by side stays behind it, though
 * both of its own timings (the batch ran in a fast spell) beat the best's
 * stored cost: it costs 3x that. */
static void
test_engine_loser_beside_the_best_stays_behind(void **state)
{
    struct run r;

    (void)state;
    run_beside(&r, 1e-5, 3);
    assert_int_equal(best_timed_beside(&r), 0);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs l JOIN kvs k "
                                    "ON k.log_id = l.id AND k.k = "
                                    "'timed_beside' WHERE abs(l.cost - 3 * "
                                    "(SELECT min(cost) FROM logs WHERE "
                                    "err_no = 0)) > 1e-12"),
                     0);
    run_close(&r);
}

/* A trial 2x faster than the best side by side becomes the best at its
 * first timing, though its confirmation ran in a slow spell (5 ms, 10x
 * any first timing). */
static void
test_engine_winner_beside_the_best_is_not_buried(void **state)
{
    struct run r;

    (void)state;
    run_beside(&r, 1e-2, 0.5);
    assert_int_equal(best_timed_beside(&r), 1);
    assert_int_equal(count_rows(&r,
                                "SELECT count(*) FROM logs WHERE id = " BEST_ROW
                                " AND cost < 1e-3"),
                     1);
    run_close(&r);
}

/* A load spike that slows the best beside a trial would flatter the
 * trial (here 3x slower than the best, but 3.3x faster than the best
 * timed contended): that confirmation is timed once more, and the clean
 * one decides. */
static void
test_engine_contended_best_beside_is_timed_again(void **state)
{
    struct run r;

    (void)state;
    run_open(&r);
    r.fake.beside_at = 1e-5;
    r.fake.beside_ratio = 3;
    r.fake.beside_spikes = 1;
    run_start(&r, one_task_conf, 0);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    assert_int_equal(r.fake.beside_spikes, 0);
    /* one batch more than the notes: the spiked one was not taken */
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM kvs WHERE k = "
                                    "'timed_beside'"),
                     r.fake.nbeside - 1);
    assert_int_equal(best_timed_beside(&r), 0);
    run_close(&r);
}

/* A job resuming a database rebuilds the stored best's C: its very first
 * confirmation already times that best beside the would-be best. */
static void
test_engine_resumed_best_is_timed_beside(void **state)
{
    struct run r;
    int first_job_beside;

    (void)state;
    run_beside(&r, 1e-5, 3);
    first_job_beside = r.fake.nbeside;
    run_finish_job(&r);
    run_start(&r, one_task_conf, 32);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    assert_true(r.fake.nbeside > first_job_beside);
    /* every confirmation of the second job, its first included */
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM kvs a JOIN logs l "
                                    "ON l.id = a.log_id WHERE a.k = "
                                    "'timed_also' AND l.trial_no >= 16 AND "
                                    "NOT EXISTS (SELECT 1 FROM kvs b WHERE "
                                    "b.log_id = a.log_id AND b.k = "
                                    "'timed_beside')"),
                     0);
    /* beside the first job's best, which stays the best */
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM kvs a JOIN logs l "
                                    "ON l.id = a.log_id WHERE a.k = "
                                    "'timed_beside' AND l.trial_no >= 16 AND "
                                    "a.v LIKE '%of schedule ' || (SELECT "
                                    "sched_hash FROM logs WHERE id = " BEST_ROW
                                    ") || ' %' AND (SELECT trial_no FROM "
                                    "logs WHERE id = " BEST_ROW ") < 16"),
                     r.fake.nbeside - first_job_beside);
    run_close(&r);
}

/* The number of lines of the engine's log (stderr) holding needle while
 * the loop runs the job. */
static int
run_counting_log(struct run *r, const char *needle)
{
    char path[96], line[1024];
    int fd, saved, n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/stderr", r->dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    fflush(stderr);
    saved = dup(2);
    assert_int_equal(dup2(fd, 2), 2);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    fflush(stderr);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    close(fd);
    f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* A stored best that no longer builds (here: its schedule was damaged in
 * the database) is reported once, not rebuilt by every round, and the
 * job goes on. */
static void
test_engine_unbuilt_best_is_tried_once(void **state)
{
    struct run r;

    (void)state;
    run_open(&r);
    run_start(&r, one_task_conf, 0);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    run_finish_job(&r);
    /* far below any later timing: it stays the best for the whole job */
    assert_int_equal(sqlite3_exec(kt_storage_db(r.db),
                                  "UPDATE logs SET config = '[{\"bad\": 1}]', "
                                  "cost = 1e-7 WHERE id = " BEST_ROW,
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    run_start(&r, one_task_conf, 48); /* four rounds of 8 */
    assert_int_equal(run_counting_log(&r, "no longer builds"), 1);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs"), 48);
    run_close(&r);
}

/* A new best whose re-timing fails is stored as UNKNOWN_ERROR with both
 * sides named, and never becomes the best. */
static void
test_engine_unconfirmed_best_is_an_error(void **state)
{
    struct run r;
    struct kt_job_stats s;
    struct kt_job_task_info ti;

    (void)state;
    run_open(&r);
    r.fake.retime_fails = 1;
    run_start(&r, one_task_conf, 0);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    kt_job_get_stats(r.job, &s);
    kt_job_task(r.job, 0, &ti);
    assert_true(s.unconfirmed >= 1);
    assert_int_equal(s.confirmed, 0);
    assert_int_equal(ti.best_cost, 0);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs WHERE err_no = "
                                    "8 AND err_text LIKE '%not confirmed: "
                                    "timing it again on fake-1 failed%'"),
                     s.unconfirmed);
    assert_int_equal(count_rows(&r, "SELECT count(*) FROM logs"), 16);
    run_close(&r);
}

/* --- local workers, kernels on every CPU: no pool work while measuring --- */

struct quiet_watch {
    struct run *run;
    uv_timer_t release;
    int held;            /* batches held for a while */
    int busy_at_submit;  /* a search or training in flight at a submit */
    int busy_while_held; /* ... or while a batch was at the fake */
};

static struct quiet_watch qw;

static int
pool_busy(const struct kt_job *job)
{
    return job->searching != NULL || job->training != NULL ||
           job->ready != NULL;
}

static void
quiet_release(uv_timer_t *t)
{
    struct quiet_watch *w = t->data;

    w->busy_while_held += pool_busy(w->run->job);
    fake_release(&w->run->fake);
}

/* Each batch stays at the fake for 100 ms, long enough for a look-ahead
 * search to be started and found. */
static void
quiet_on_submit(struct fake *f)
{
    struct run *r = f->test;

    qw.busy_at_submit += r->job->searching != NULL || r->job->training != NULL;
    f->hold = 1;
    qw.held++;
    uv_timer_start(&qw.release, quiet_release, 100, 0);
}

static void
test_engine_quiet_measure_with_local_workers(void **state)
{
    char conf[1024];
    struct run r;
    struct kt_job_stats s;

    (void)state;
    /* one_task_conf on every CPU of this host */
    snprintf(conf, sizeof(conf),
             "{\"name\": \"engine-test\", \"target\": {\"threads\": %ld},"
             " \"tuning\": {\"trials\": 24, \"measures_per_round\": 8, "
             "\"seed\": 3, \"population\": 128},"
             " \"tasks\": [{\"name\": \"gemm16\", \"compute\": "
             "[\"O[i,j] += A[i,k] * B[k,j]\"],"
             "  \"shapes\": {\"A\": [16, 16], \"B\": [16, 16]}, "
             "\"weight\": 1}]}",
             sysconf(_SC_NPROCESSORS_ONLN));
    memset(&qw, 0, sizeof(qw));
    run_open(&r);
    r.engine->o.local_key = "local";
    qw.run = &r;
    uv_timer_init(&r.loop, &qw.release);
    qw.release.data = &qw;
    r.fake.on_submit = quiet_on_submit;
    run_start(&r, conf, 0);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&qw.release, NULL);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    kt_job_get_stats(r.job, &s);
    assert_int_equal(s.trials, 24);
    assert_int_equal(qw.held, 3);
    assert_int_equal(qw.busy_at_submit, 0);
    assert_int_equal(qw.busy_while_held, 0);
    assert_int_equal(s.speculation_hits + s.speculation_misses, 0);
    run_close(&r);
    /* Local workers of another key: the job's kernels run elsewhere. */
    run_open(&r);
    r.engine->o.local_key = "board";
    run_start(&r, conf, 0);
    assert_int_equal(r.job->quiet_measure, 0);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_int_equal(kt_job_state(r.job), KT_JOB_DONE);
    run_close(&r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_runs_budget_and_stores_every_trial),
        cmocka_unit_test(test_engine_submit_failure_fails_job),
        cmocka_unit_test(test_engine_training_window_bounds_records),
        cmocka_unit_test(test_search_keeps_only_the_seeds_it_uses),
        cmocka_unit_test(test_engine_loop_never_waits_on_search_lock),
        cmocka_unit_test(test_engine_train_again_trains_late_rounds),
        cmocka_unit_test(test_engine_warm_start_counts_skipped_trials),
        cmocka_unit_test(test_engine_other_workload_seeds),
        cmocka_unit_test(test_engine_sibling_target_seeds),
        cmocka_unit_test(test_engine_long_compiler_line_not_truncated),
        cmocka_unit_test(test_candidate_state_matches_replay),
        cmocka_unit_test(test_engine_refused_batch_is_stored_on_retry),
        cmocka_unit_test(test_engine_counts_feature_failures),
        cmocka_unit_test(test_engine_new_best_is_timed_again),
        cmocka_unit_test(test_engine_contended_result_is_timed_again),
        cmocka_unit_test(test_engine_revisits_programs_timed_apart),
        cmocka_unit_test(test_engine_loser_beside_the_best_stays_behind),
        cmocka_unit_test(test_engine_winner_beside_the_best_is_not_buried),
        cmocka_unit_test(test_engine_no_best_on_an_unconfirmed_tie),
        cmocka_unit_test(test_engine_resumed_best_is_timed_beside),
        cmocka_unit_test(test_engine_contended_best_beside_is_timed_again),
        cmocka_unit_test(test_engine_unbuilt_best_is_tried_once),
        cmocka_unit_test(test_engine_unconfirmed_best_is_an_error),
        cmocka_unit_test(test_engine_quiet_measure_with_local_workers),
    };

    /* One pool thread: pool work runs in the order it is queued. */
    setenv("UV_THREADPOOL_SIZE", "1", 1);
    kt_log_init(LOG_WARNING);
    if (getenv("KT_TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("KT_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
