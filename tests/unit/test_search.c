/* test_search.c - the search policy: for every operator of the library a
 * round of candidates that all replay and lower, a compiled sample checked
 * against the DAG interpreter, reproducibility for a seed (also with two
 * scoring threads), deduplication within a batch and against a measured
 * set kept in a real SQLite file that is closed and reopened, the random
 * policies, measured seeds, the XGBoost-scored path, and a round in which
 * no program scores (an empty GA population). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "costmodel/costmodel.h"
#include "scheduler/scheduler.h"
#include "storage/storage.h"
#include "tests/support/ktt.h"

static struct kt_dag *
build(const struct kt_op_def *d)
{
    struct kt_dag *dag = NULL;
    char err[512];

    if (kt_op_build(d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s: %s", d->name, err);
    return dag;
}

static struct kt_search *
new_search(const struct kt_dag *dag, int policy, int pop, uint64_t seed,
           int threads)
{
    struct kt_search_opts o;
    struct kt_search *s = NULL;
    char err[512];

    kt_search_opts_default(&o);
    o.policy = policy;
    o.population = pop;
    o.seed = seed;
    o.nthreads = threads;
    if (kt_search_new(&s, dag, &o, err, sizeof(err)) != KT_OK)
        fail_msg("%s: %s", dag->key, err);
    return s;
}

/* The candidate carries what the trial path needs, built once by the
 * search: its loop tree is the one its steps lower to, its features are
 * that tree's, and the module from the carried tree is the module from
 * the steps. */
static void
check_carried(const struct kt_dag *dag, const struct kt_search_cand *c,
              const struct kt_state *st, const struct kt_looptree *lt,
              int module)
{
    struct kt_buf want, got;
    struct kt_looptree *ref = NULL;
    struct kt_codegen_opts cg;
    float *rows = NULL;
    int nrows = 0;
    char err[512];

    assert_non_null(c->lt);
    kt_buf_init(&want);
    kt_buf_init(&got);
    kt_looptree_print(lt, &want);
    kt_looptree_print(c->lt, &got);
    assert_string_equal(got.p, want.p);
    assert_int_equal(kt_features_extract(lt, &rows, &nrows, err, sizeof(err)),
                     KT_OK);
    assert_non_null(c->rows);
    assert_int_equal(c->nrows, nrows);
    assert_memory_equal(c->rows, rows,
                        sizeof(float) * KT_FEATURE_LEN * (size_t)nrows);
    free(rows);
    if (module) {
        kt_codegen_default_opts(&cg);
        kt_buf_reset(&want);
        kt_buf_reset(&got);
        assert_int_equal(kt_codegen_module(st, dag, &cg, &want, err,
                                           sizeof(err)),
                         KT_OK);
        assert_int_equal(kt_lower_reference(dag, &ref, err, sizeof(err)),
                         KT_OK);
        assert_int_equal(kt_codegen_module_lowered(ref, c->lt, dag, &cg, &got,
                                                   err, sizeof(err)),
                         KT_OK);
        assert_string_equal(got.p, want.p);
        kt_looptree_free(ref);
    }
    kt_buf_free(&want);
    kt_buf_free(&got);
}

/* Every candidate replays, lowers, has the hash of its steps, carries its
 * tree and features, and no two are equal. */
static void
check_batch(const struct kt_dag *dag, const struct kt_search_batch *b)
{
    int i, j;

    for (i = 0; i < b->n; i++) {
        struct kt_state *st = NULL;
        struct kt_looptree *lt = NULL;
        char err[512], hash[17];
        if (kt_state_replay(dag, b->v[i].steps, b->v[i].nsteps, &st, err,
                            sizeof(err)) != KT_OK)
            fail_msg("%s: candidate %d does not replay: %s", dag->key, i, err);
        if (kt_lower(st, &lt, err, sizeof(err)) != KT_OK)
            fail_msg("%s: candidate %d does not lower: %s", dag->key, i, err);
        kt_steps_hash(b->v[i].steps, b->v[i].nsteps, hash);
        assert_string_equal(hash, b->v[i].hash);
        check_carried(dag, &b->v[i], st, lt, i < 2);
        for (j = 0; j < i; j++)
            assert_string_not_equal(b->v[i].hash, b->v[j].hash);
        kt_looptree_free(lt);
        kt_state_free(st);
    }
}

/* Compiles ncomp candidates in one module and checks them against the
 * interpreter. */
static void
check_compiled(const struct kt_dag *dag, const struct kt_search_batch *b,
               int ncomp)
{
    struct kt_state *cands[16];
    int skipped = 0, i, n = b->n < ncomp ? b->n : ncomp;
    char err[4096];

    assert_true(n <= 16);
    for (i = 0; i < n; i++)
        assert_int_equal(kt_state_replay(dag, b->v[i].steps, b->v[i].nsteps,
                                         &cands[i], err, sizeof(err)),
                         KT_OK);
    assert_int_equal(ktt_check_many(dag, cands, n, 5, &skipped), 0);
    assert_int_equal(skipped, 0);
    for (i = 0; i < n; i++)
        kt_state_free(cands[i]);
}

static void
round_def(const struct kt_op_def *d, uint64_t seed, int ncomp)
{
    struct kt_dag *dag = build(d);
    struct kt_search *s = new_search(dag, KT_POLICY_SKETCH_RANDOM, 256, seed,
                                     1);
    struct kt_search_batch b, b2;
    struct kt_search_stats st;
    char err[512];
    int i, j;

    assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 24, &b, &st, err,
                                          sizeof(err)),
                     KT_OK);
    assert_true(st.sketches >= 1);
    assert_true(b.n >= 1);
    check_batch(dag, &b);
    if (b.n < 24) {
        assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 24, &b2, NULL,
                                              err, sizeof(err)),
                         KT_OK);
        assert_int_equal(b2.n, 0);
        kt_search_batch_free(&b2);
    } else {
        /* a second round never repeats the first */
        assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 24, &b2, NULL,
                                              err, sizeof(err)),
                         KT_OK);
        check_batch(dag, &b2);
        for (i = 0; i < b2.n; i++)
            for (j = 0; j < b.n; j++)
                assert_string_not_equal(b2.v[i].hash, b.v[j].hash);
        kt_search_batch_free(&b2);
    }
    if (ncomp > 0)
        check_compiled(dag, &b, ncomp);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

static void
conv(int64_t C, int64_t H, int64_t K, int64_t R, int64_t S_, int64_t P,
     int64_t D, int64_t G, int epi, uint64_t seed)
{
    struct kt_op_def d;
    assert_int_equal(ktt_conv_def(&d, C, H, K, R, S_, P, D, G, epi), KT_OK);
    round_def(&d, seed, 3);
}

static void
test_search_dense_matmul(void **state)
{
    struct kt_op_def d;
    (void)state;
    assert_int_equal(kt_op_dense(&d, 16, 1000, 64, KT_EPI_BIAS | KT_EPI_RELU),
                     KT_OK);
    round_def(&d, 1, 4);
    assert_int_equal(kt_op_dense(&d, 7, 14, 56, 0), KT_OK);
    round_def(&d, 2, 4);
    assert_int_equal(kt_op_matmul(&d, 56, 64, 96), KT_OK);
    round_def(&d, 3, 4);
    assert_int_equal(kt_op_batch_matmul(&d, 3, 14, 32, 7, 0), KT_OK);
    round_def(&d, 4, 3);
    assert_int_equal(kt_op_batch_matmul(&d, 2, 16, 14, 24, 1), KT_OK);
    round_def(&d, 5, 3);
}

static void
test_search_conv2d(void **state)
{
    (void)state;
    conv(8, 14, 16, 3, 1, 1, 1, 1, 0, 10); /* 3x3 pad 1 */
    conv(3, 28, 8, 7, 2, 3, 1, 1, 0, 11);  /* 7x7 s2 pad 3 */
    conv(4, 7, 8, 1, 1, 0, 1, 1, 0, 12);   /* 1x1 pad 0 */
    conv(4, 14, 4, 3, 1, 2, 2, 1, 0, 13);  /* dilation 2 */
    conv(8, 14, 8, 3, 1, 1, 1, 8, 0, 14);  /* depthwise */
    conv(8, 14, 16, 3, 2, 1, 1, 2, 0, 15); /* groups 2, s2 */
    conv(8, 14, 16, 3, 1, 1, 1, 1, KT_EPI_BIAS | KT_EPI_RELU, 16); /* fused */
    conv(8, 56, 8, 3, 1, 1, 1, 8, KT_EPI_BIAS | KT_EPI_RELU, 17); /* 56x56 dw */
}

static void
test_search_pool_elementwise_softmax(void **state)
{
    static const char *const kinds[] = {"add", "mul", "relu", "hardswish",
                                        "sigmoid"};
    struct kt_op_def d;
    unsigned i;
    (void)state;
    assert_int_equal(kt_op_pool2d(&d, 1, 1, 8, 14, 14, 3, 2, 1), KT_OK);
    round_def(&d, 20, 3);
    assert_int_equal(kt_op_pool2d(&d, 0, 1, 8, 14, 14, 2, 2, 0), KT_OK);
    round_def(&d, 21, 3);
    assert_int_equal(kt_op_global_avg_pool(&d, 1, 16, 7, 7), KT_OK);
    round_def(&d, 22, 3);
    for (i = 0; i < KT_ARRAY_LEN(kinds); i++) {
        assert_int_equal(kt_op_elementwise(&d, kinds[i], 1, 8, 14, 14), KT_OK);
        round_def(&d, 30 + i, i < 2 ? 2 : 0);
    }
    assert_int_equal(kt_op_softmax(&d, 7, 1000), KT_OK);
    round_def(&d, 40, 4);
}

/* The same seed gives the same candidates, with 1 or 2 scoring threads. */
static void
test_search_reproducible(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag;
    struct kt_search_batch b[3];
    char err[512];
    int k, i;
    (void)state;

    assert_int_equal(kt_op_matmul(&d, 64, 64, 64), KT_OK);
    dag = build(&d);
    for (k = 0; k < 3; k++) {
        struct kt_search *s = new_search(dag, KT_POLICY_SKETCH_RANDOM, 512,
                                         k == 2 ? 99 : 42, k == 1 ? 2 : 1);
        assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 32, &b[k], NULL,
                                              err, sizeof(err)),
                         KT_OK);
        assert_int_equal(b[k].n, 32);
        kt_search_free(s);
    }
    for (i = 0; i < 32; i++)
        assert_string_equal(b[0].v[i].hash, b[1].v[i].hash);
    /* another seed gives another batch */
    for (i = 0, k = 0; i < 32; i++)
        k += strcmp(b[0].v[i].hash, b[2].v[i].hash) != 0;
    assert_true(k > 0);
    for (k = 0; k < 3; k++)
        kt_search_batch_free(&b[k]);
    kt_dag_free(dag);
}

/* Measured schedules stored in a real SQLite file, closed and reopened,
 * are never proposed again by a new search with the same seed. */
static void
test_search_dedup_restart(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag;
    struct kt_storage *db = NULL;
    struct kt_search *s;
    struct kt_search_batch b1, b2;
    struct kt_trial t[32];
    char dir[] = "/tmp/kt_search_XXXXXX", path[256], err[512];
    char *configs[32];
    uint64_t *hashes = NULL;
    size_t nh = 0;
    int i, j;
    (void)state;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/kt.db", dir);
    assert_int_equal(kt_op_dense(&d, 16, 64, 32, KT_EPI_RELU), KT_OK);
    dag = build(&d);
    s = new_search(dag, KT_POLICY_SKETCH_RANDOM, 256, 5, 1);
    assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 32, &b1, NULL, err,
                                          sizeof(err)),
                     KT_OK);
    assert_int_equal(b1.n, 32);
    kt_search_free(s);

    assert_int_equal(kt_storage_open(&db, path, NULL, err, sizeof(err)), KT_OK);
    memset(t, 0, sizeof(t));
    for (i = 0; i < 32; i++) {
        struct kt_buf j1;
        kt_buf_init(&j1);
        kt_steps_to_json(b1.v[i].steps, b1.v[i].nsteps, &j1);
        configs[i] = kt_buf_take(&j1);
        t[i].task_name = d.name;
        t[i].target = "llvm";
        t[i].workload = dag->key;
        t[i].workload_hash = dag->hash;
        t[i].config = configs[i];
        t[i].sched_hash = b1.v[i].hash;
        t[i].result.err_no = i % 5 == 4 ? KT_MERR_RUNTIME_DEVICE
                                        : KT_MERR_NO_ERROR;
        t[i].result.cost = t[i].result.err_no ? 0 : 1e-5 * (i + 1);
        t[i].trial_no = i;
    }
    assert_int_equal(kt_storage_write_batch(db, t, 32, NULL, err, sizeof(err)),
                     KT_OK);
    kt_storage_close(db);
    for (i = 0; i < 32; i++)
        free(configs[i]);

    db = NULL;
    assert_int_equal(kt_storage_open(&db, path, NULL, err, sizeof(err)), KT_OK);
    assert_int_equal(kt_storage_measured(db, "llvm", dag->hash, &hashes, &nh,
                                         err, sizeof(err)),
                     KT_OK);
    assert_int_equal(nh, 32);
    kt_storage_close(db);

    /* Same seed: without the measured set it would propose b1 again. */
    s = new_search(dag, KT_POLICY_SKETCH_RANDOM, 256, 5, 1);
    assert_int_equal(kt_search_next_batch(s, NULL, hashes, nh, 32, &b2, NULL,
                                          err, sizeof(err)),
                     KT_OK);
    assert_true(b2.n > 0);
    check_batch(dag, &b2);
    for (i = 0; i < b2.n; i++) {
        assert_int_equal(kt_measured_contains(hashes, nh, b2.v[i].hash), 0);
        for (j = 0; j < b1.n; j++)
            assert_string_not_equal(b2.v[i].hash, b1.v[j].hash);
    }
    kt_search_batch_free(&b2);
    kt_search_free(s);
    /* Control: the same seed without the set repeats the first batch. */
    s = new_search(dag, KT_POLICY_SKETCH_RANDOM, 256, 5, 1);
    assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 32, &b2, NULL, err,
                                          sizeof(err)),
                     KT_OK);
    for (i = 0, j = 0; i < b2.n; i++)
        j += kt_measured_contains(hashes, nh, b2.v[i].hash);
    assert_true(j > 0);
    kt_search_batch_free(&b2);
    kt_search_free(s);

    free(hashes);
    kt_search_batch_free(&b1);
    kt_dag_free(dag);
    unlink(path);
    {
        char p2[300];
        snprintf(p2, sizeof(p2), "%s-wal", path);
        unlink(p2);
        snprintf(p2, sizeof(p2), "%s-shm", path);
        unlink(p2);
    }
    rmdir(dir);
}

/* "random" samples without evolution; policy names parse. */
static void
test_search_random_policy(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag;
    struct kt_search *s;
    struct kt_search_batch b;
    struct kt_search_stats st;
    char err[512];
    (void)state;

    assert_string_equal(kt_policy_name(KT_POLICY_SKETCH_RANDOM),
                        "sketch.random");
    assert_string_equal(kt_policy_name(KT_POLICY_RANDOM), "random");

    assert_int_equal(kt_op_matmul(&d, 32, 48, 64), KT_OK);
    dag = build(&d);
    s = new_search(dag, KT_POLICY_RANDOM, 128, 3, 1);
    assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 40, &b, &st, err,
                                          sizeof(err)),
                     KT_OK);
    assert_int_equal(b.n, 40);
    assert_int_equal(st.iters, 0);
    assert_int_equal(st.picked_random, 40);
    check_batch(dag, &b);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* Register-tile floats of the tiled stage of st whose innermost iterator
 * is a vectorized spatial one and whose other innermost-level spatial
 * iterators are unrolled (0 if none), and that vector loop's extent. */
static int64_t
register_tile(const struct kt_state *st, int64_t *vec_extent)
{
    int i, j;

    for (i = 0; i < st->nstages; i++) {
        const struct kt_sstage *ss = &st->stages[i];
        const struct kt_iter *last = &ss->iters[ss->niters - 1];
        int64_t p = 1;
        if (ss->inlined || ss->niters == 0 || ss->naxes == ss->nspatial ||
            last->ann != KT_ANN_VECTORIZE || last->reduce)
            continue;
        for (j = 0; j < ss->niters; j++) {
            const struct kt_iter *it = &ss->iters[j];
            if (!it->reduce && it->nparts == 1 && it->extent > 1 &&
                it->parts[0].part == ss->nparts[it->parts[0].axis] - 1) {
                if (j < ss->niters - 1 && it->ann != KT_ANN_UNROLL)
                    p = 0;
                p *= it->extent;
            }
        }
        *vec_extent = last->extent;
        return p;
    }
    return 0;
}

/* Steps of the reduction run around the register tile of the stage of st
 * that register_tile() finds: the reduction iterators from the innermost
 * out, through spatial iterators of extent 1 (the micro-kernel keeps its
 * accumulators across them), 0 if none. */
static int64_t
panel_steps(const struct kt_state *st)
{
    int i, j;

    for (i = 0; i < st->nstages; i++) {
        const struct kt_sstage *ss = &st->stages[i];
        int64_t p = 1;
        int seen = 0;
        if (ss->inlined || ss->niters == 0 || ss->naxes == ss->nspatial ||
            ss->iters[ss->niters - 1].ann != KT_ANN_VECTORIZE ||
            ss->iters[ss->niters - 1].reduce)
            continue;
        for (j = ss->niters - 1; j >= 0; j--) {
            const struct kt_iter *it = &ss->iters[j];
            if (it->reduce) {
                p *= it->extent;
                seen = 1;
            } else if (seen && it->extent > 1) {
                break;
            }
        }
        return p;
    }
    return 0;
}

/* InitRegisterBlock: most initial samples of a GEMM hold at least 8
 * 16-lane accumulator vectors in an unrolled register tile over a
 * reduction run of at least 64 steps (Ansor's uniform tile sampling:
 * about one in twenty), some fill the register file (AVX-512: 32 vector
 * registers) with the operands: accumulators + one row of B + one
 * broadcast of A, an 8 x 32 or 4 x 64 tile; none takes more (8 x 64: 32
 * accumulators, the compiler spills 5 of them). */
static void
test_search_register_blocked(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag;
    struct kt_search *s;
    struct kt_search_batch b;
    char err[512];
    int i, kernels = 0, full_file = 0, long_panel = 0, spilling = 0;
    (void)state;

    assert_int_equal(kt_op_matmul(&d, 1024, 1024, 1024), KT_OK);
    dag = build(&d);
    s = new_search(dag, KT_POLICY_RANDOM, 128, 5, 1);
    assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 64, &b, NULL, err,
                                          sizeof(err)),
                     KT_OK);
    assert_int_equal(b.n, 64);
    check_batch(dag, &b);
    for (i = 0; i < b.n; i++) {
        int64_t vext = 0, reg = register_tile(b.v[i].state, &vext);
        int64_t steps = panel_steps(b.v[i].state), regs;
        if (reg <= 0 || vext % 16 != 0 || reg / 16 < 8)
            continue;
        regs = reg / 16 + vext / 16 + 1;
        spilling += regs > 32;
        if (regs > 32)
            continue;
        kernels += steps >= 64;
        full_file += regs >= 19;
        long_panel += steps > 64;
    }
    if (kernels < b.n / 2 || full_file == 0 || long_panel == 0 || spilling > 0)
        fail_msg("of %d samples: %d micro-kernels over >= 64 steps, %d "
                 "filling the register file, %d over > 64 steps, %d spilling",
                 b.n, kernels, full_file, long_panel, spilling);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* The stage of st whose innermost iterator is vectorized and has a
 * reduction (the tiled conv), or NULL. */
static const struct kt_sstage *
vectorized_reduction(const struct kt_state *st)
{
    int i;

    for (i = 0; i < st->nstages; i++) {
        const struct kt_sstage *ss = &st->stages[i];
        if (!ss->inlined && ss->niters > 0 && ss->naxes > ss->nspatial &&
            ss->iters[ss->niters - 1].ann == KT_ANN_VECTORIZE)
            return ss;
    }
    return NULL;
}

/* Samples a batch of s, checks it, and compiles up to 4 of its programs
 * for which picked() holds against the interpreter; fails with what when
 * none does. */
static void
check_picked_samples(const struct kt_dag *dag, struct kt_search *s,
                     int (*picked)(const struct kt_state *), const char *what)
{
    struct kt_search_batch b;
    struct kt_state *cands[4];
    char err[512];
    int i, n = 0, skipped = 0;

    assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 32, &b, NULL, err,
                                          sizeof(err)),
                     KT_OK);
    check_batch(dag, &b);
    for (i = 0; i < b.n && n < 4; i++)
        if (picked(b.v[i].state))
            assert_int_equal(kt_state_replay(dag, b.v[i].steps, b.v[i].nsteps,
                                             &cands[n++], err, sizeof(err)),
                             KT_OK);
    if (n == 0)
        fail_msg("no sample %s", what);
    assert_int_equal(ktt_check_many(dag, cands, n, 5, &skipped), 0);
    assert_int_equal(skipped, 0);
    for (i = 0; i < n; i++)
        kt_state_free(cands[i]);
    kt_search_batch_free(&b);
}

/* An untiled stage whose innermost loop is a reduction (softmax's row sum,
 * with exp inlined into it) is vectorized into lane accumulators; the
 * programs compile and match the interpreter.  Before, only tiled
 * (rfactor) reductions were, and the row sum called expf per element. */
static int
untiled_lane_reduction(const struct kt_state *st)
{
    int i, a;

    for (i = 0; i < st->nstages; i++) {
        const struct kt_sstage *ss = &st->stages[i];
        int untiled = 1;
        if (ss->inlined || ss->niters == 0 ||
            !ss->iters[ss->niters - 1].reduce ||
            ss->iters[ss->niters - 1].ann != KT_ANN_VECTORIZE)
            continue;
        for (a = 0; a < ss->naxes; a++)
            untiled &= ss->nparts[a] == 1;
        if (untiled)
            return 1;
    }
    return 0;
}

static void
test_search_lane_reduction_softmax(void **state)
{
    /* 197 (a ViT's rows): 12 16-lane vectors, one of 4 and a scalar; its
     * row reductions stayed scalar while whole 4-lane vectors had to
     * divide them (0.92x oneDNN on the Zen 4, docs/performance.md) */
    static const int64_t cols[] = {128, 197};
    struct kt_op_def d;
    struct kt_dag *dag;
    struct kt_search *s;
    size_t i;
    (void)state;

    for (i = 0; i < KT_ARRAY_LEN(cols); i++) {
        assert_int_equal(kt_op_softmax(&d, 24, cols[i]), KT_OK);
        dag = build(&d);
        s = new_search(dag, KT_POLICY_RANDOM, 128, 5, 1);
        check_picked_samples(dag, s, untiled_lane_reduction,
                             "vectorizes an untiled reduction");
        kt_search_free(s);
        kt_dag_free(dag);
    }
}

/* Softmax's exp, read by the row sum and by the output, is also kept as a
 * stage (a second set of sketches) and can then be computed at the
 * output's row loop with the row sum: exp once per element, one parallel
 * loop over rows.  Picks programs where a kept stage is attached to a
 * stage that another of its readers is attached to at the same loop. */
static int
row_fused(const struct kt_state *st)
{
    int i, r;

    for (i = 0; i < st->nstages; i++) {
        const struct kt_sstage *ss = &st->stages[i];
        if (ss->inlined || ss->attach_stage < 0 || ss->naxes != ss->nspatial)
            continue;
        for (r = 0; r < st->nstages; r++)
            if (r != i && r != ss->attach_stage && !st->stages[r].inlined &&
                kt_expr_reads(st->stages[r].body, ss->out) &&
                st->stages[r].attach_stage == ss->attach_stage &&
                st->stages[r].attach_iter == ss->attach_iter)
                return 1;
    }
    return 0;
}

static void
test_search_softmax_row_fusion(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag;
    struct kt_search *s;
    int i, kept = 0;
    (void)state;

    assert_int_equal(kt_op_softmax(&d, 64, 128), KT_OK);
    dag = build(&d);
    s = new_search(dag, KT_POLICY_RANDOM, 128, 3, 1);
    for (i = 0; i < kt_search_nsketches(s); i++)
        kept += strstr(kt_search_sketch_desc(s, i), "E kept") != NULL;
    assert_true(kept > 0 && kept < kt_search_nsketches(s));
    check_picked_samples(dag, s, row_fused, "computes a row buffer at its row");
    kt_search_free(s);
    kt_dag_free(dag);
}

/* ChannelVector: a conv whose output width cannot fill 16-lane vectors
 * (28 wide, read with stride 2) gets sketches whose register tile
 * vectorizes the output channels (f, axis 1) over a weight pack instead
 * of the plain ones; their candidates hold the 16-lane accumulators in
 * registers across the reduction, compile and match the interpreter.  A
 * GEMM gets none. */
static void
test_search_channel_vector(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag;
    struct kt_search *s;
    struct kt_search_batch b;
    struct kt_state *cands[4];
    char err[512];
    int i, n = 0, nvec = 0, skipped = 0;
    (void)state;

    assert_int_equal(ktt_conv_def(&d, 16, 56, 32, 3, 2, 1, 1, 1,
                                  KT_EPI_BIAS | KT_EPI_RELU),
                     KT_OK);
    dag = build(&d);
    s = new_search(dag, KT_POLICY_RANDOM, 128, 7, 1);
    for (i = 0; i < kt_search_nsketches(s); i++)
        nvec += strstr(kt_search_sketch_desc(s, i), "vector f") != NULL;
    assert_true(nvec > 0);
    assert_int_equal(nvec, kt_search_nsketches(s));
    assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 64, &b, NULL, err,
                                          sizeof(err)),
                     KT_OK);
    check_batch(dag, &b);
    for (i = 0; i < b.n && n < 4; i++) {
        const struct kt_sstage *ss = vectorized_reduction(b.v[i].state);
        const struct kt_iter *last;
        struct kt_codegen_opts o;
        struct kt_buf c;
        if (ss == NULL)
            continue;
        last = &ss->iters[ss->niters - 1];
        if (last->parts[0].axis != 1 || last->extent % 16 != 0)
            continue;
        kt_codegen_default_opts(&o);
        kt_buf_init(&c);
        assert_int_equal(kt_codegen_function(b.v[i].lt, &o, "k", &c, err,
                                             sizeof(err)),
                         KT_OK);
        /* the accumulators are registers, not updated lane by lane */
        if (strstr(c.p, "+= v_[l_]") != NULL)
            fail_msg("accumulators updated lane by lane:\n%s", c.p);
        kt_buf_free(&c);
        assert_int_equal(kt_state_replay(dag, b.v[i].steps, b.v[i].nsteps,
                                         &cands[n], err, sizeof(err)),
                         KT_OK);
        n++;
    }
    if (n == 0)
        fail_msg("no channel-vectorized register tile in 64 samples");
    assert_int_equal(ktt_check_many(dag, cands, n, 5, &skipped), 0);
    assert_int_equal(skipped, 0);
    for (i = 0; i < n; i++)
        kt_state_free(cands[i]);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);

    assert_int_equal(kt_op_matmul(&d, 1024, 1024, 1024), KT_OK);
    dag = build(&d);
    s = new_search(dag, KT_POLICY_RANDOM, 128, 7, 1);
    for (i = 0; i < kt_search_nsketches(s); i++)
        assert_null(strstr(kt_search_sketch_desc(s, i), "vector"));
    kt_search_free(s);
    kt_dag_free(dag);
}

/* Sketches of s that vectorize the output channels ("vector f"). */
static int
channel_vector_sketches(const struct kt_dag *dag, int vector_bytes, int *n)
{
    struct kt_search_opts o;
    struct kt_search *s = NULL;
    char err[512];
    int i, nvec = 0;

    kt_search_opts_default(&o);
    o.policy = KT_POLICY_RANDOM;
    o.population = 16;
    o.vector_bytes = vector_bytes;
    if (kt_search_new(&s, dag, &o, err, sizeof(err)) != KT_OK)
        fail_msg("%s: %s", dag->key, err);
    *n = kt_search_nsketches(s);
    for (i = 0; i < *n; i++)
        nvec += strstr(kt_search_sketch_desc(s, i), "vector f") != NULL;
    kt_search_free(s);
    return nvec;
}

/* ResNet-50's conv1x1 (256 -> 64 channels, 56 x 56) defined over y and x:
 * with 16-lane vectors every tiling vectorizes the output channels.  Its
 * plain tilings (56 wide: 8-lane vectors) took 132 of 200 trials of one
 * tuning run, whose best ran 0.87x the channel-vector kernel of an earlier
 * run on 1 thread.  With 8-lane vectors (AVX2) the width fills them and
 * both kinds stay.  (kt_op_conv2d now indexes a pointwise conv's pixels as
 * one axis, 3136 wide; the rule still serves convolutions whose rows are
 * 56 wide.) */
static void
test_search_channel_vector_replaces_plain(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag;
    int n, nvec;
    (void)state;

    assert_int_equal(ktt_conv_grid_def(&d, 256, 56, 64, 1, 1, 0, 1, 1,
                                       KT_EPI_BIAS | KT_EPI_RELU),
                     KT_OK);
    dag = build(&d);
    nvec = channel_vector_sketches(dag, 64, &n);
    if (nvec == 0 || nvec != n)
        fail_msg("AVX-512: %d of %d sketches vectorize the channels", nvec, n);
    nvec = channel_vector_sketches(dag, 32, &n);
    if (nvec == 0 || nvec == n)
        fail_msg("AVX2: %d of %d sketches vectorize the channels", nvec, n);
    kt_dag_free(dag);
}

/* Number of sketches of dag whose description contains what. */
static int
sketches_with(const struct kt_dag *dag, const char *what)
{
    struct kt_search *s = new_search(dag, KT_POLICY_RANDOM, 16, 1, 1);
    int i, n = 0;

    for (i = 0; i < kt_search_nsketches(s); i++)
        n += strstr(kt_search_sketch_desc(s, i), what) != NULL;
    kt_search_free(s);
    return n;
}

/* SpatialVector: global average pooling of a 3 x 3 map (a reduction of 9
 * points, too short for rfactor) is also tiled, and its samples vectorize
 * the channels under the reduction loops; they compile and match the
 * interpreter.  Untiled, no loop of it is vectorized. */
static int
spatial_vector_under_reduction(const struct kt_state *st)
{
    const struct kt_sstage *ss = vectorized_reduction(st);

    return ss != NULL && !ss->iters[ss->niters - 1].reduce;
}

/* The 256-channel global average pooling of a map of side x side. */
static struct kt_dag *
global_pool(int64_t side)
{
    struct kt_op_def d;

    assert_int_equal(kt_op_global_avg_pool(&d, 1, 256, side, side), KT_OK);
    return build(&d);
}

/* check_picked_samples on a random search of dag, which it frees. */
static void
check_samples_and_free(struct kt_dag *dag,
                       int (*picked)(const struct kt_state *), const char *what)
{
    struct kt_search *s = new_search(dag, KT_POLICY_RANDOM, 128, 9, 1);

    check_picked_samples(dag, s, picked, what);
    kt_search_free(s);
    kt_dag_free(dag);
}

static void
test_search_spatial_vector_pool(void **state)
{
    struct kt_dag *dag = global_pool(3);
    (void)state;

    assert_int_equal(sketches_with(dag, "SSRSRS"), 1);
    check_samples_and_free(dag, spatial_vector_under_reduction,
                           "vectorizes the channels");
}

/* Rfactor: global average pooling of a 7 x 7 map reduces each channel's
 * 49 contiguous points, padded to 64 (ir/ops_reduce.c), so its samples
 * keep lane accumulators along them (4 vectors, the last one a masked
 * read of 1 point) instead of gathering the channels 49 floats apart;
 * they compile and match the interpreter. */
static int
lanes_along_reduction(const struct kt_state *st)
{
    const struct kt_sstage *ss = vectorized_reduction(st);

    return ss != NULL && ss->iters[ss->niters - 1].reduce;
}

static void
test_search_global_pool_lane_reduction(void **state)
{
    struct kt_dag *dag = global_pool(7);
    (void)state;

    assert_non_null(strstr(dag->key, "pad a2:64"));
    if (sketches_with(dag, "SSRSR") == sketches_with(dag, "SSRSRS"))
        fail_msg("no rfactor sketch (SSRSR) for the 7 x 7 global pooling");
    check_samples_and_free(dag, lanes_along_reduction,
                           "keeps lane accumulators along the 49 points");
}

/* The extent of st's vectorized innermost reduction loop (its lane run),
 * 0 when it has none. */
static int64_t
lane_run(const struct kt_state *st)
{
    const struct kt_sstage *ss = vectorized_reduction(st);

    return ss != NULL && ss->iters[ss->niters - 1].reduce
               ? ss->iters[ss->niters - 1].extent
               : 0;
}

/* check_samples_and_free on a batch-1 dense layer 96 x k (a GEMV). */
static void
check_gemv_samples(int64_t k, int (*picked)(const struct kt_state *),
                   const char *what)
{
    struct kt_op_def d;

    assert_int_equal(kt_op_dense(&d, 1, 96, k, 0), KT_OK);
    check_samples_and_free(build(&d), picked, what);
}

/* Rfactor of a GEMV: its lane accumulators may run along more than 64
 * floats of k (up to 16 vectors, folded into 4 accumulators per row by
 * the code generator), the form that ran 9-14% faster on dense_b1
 * (docs/search.md); such samples compile and match the interpreter. */
static int
long_lane_run(const struct kt_state *st)
{
    return lane_run(st) > 64;
}

static void
test_search_gemv_long_lane_run(void **state)
{
    (void)state;
    check_gemv_samples(768, long_lane_run,
                       "runs its lane accumulators along > 64 of k");
}

/* A reduction of 300 (no 16-lane vector divides it, 75 4-lane ones do)
 * may run whole in the lane run: the whole-extent bound (up to a
 * register file of lanes) is not shadowed by the 16-vector one. */
static int
whole_lane_run_of_300(const struct kt_state *st)
{
    return lane_run(st) == 300;
}

static void
test_search_gemv_whole_odd_lane_run(void **state)
{
    (void)state;
    check_gemv_samples(300, whole_lane_run_of_300,
                       "runs its lane accumulators along all 300 of k");
}

/* Whether only the register tile (unrolled or vectorized iterators) is
 * inside iterator j of ss. */
static int
tile_inside(const struct kt_sstage *ss, int j)
{
    int k;

    for (k = j + 1; k < ss->niters; k++)
        if (ss->iters[k].extent > 1 && ss->iters[k].ann != KT_ANN_UNROLL &&
            ss->iters[k].ann != KT_ANN_VECTORIZE)
            return 0;
    return 1;
}

/* Whether st has a register tile run over the whole reduction of its
 * tiled stage in the innermost part of the reduction: that iterator
 * covers all of it and only the register tile is inside it.  (A run over
 * all of k in its outer part, every spatial level between it and the
 * tile 1, was possible before.) */
static int
whole_reduction_run(const struct kt_state *st)
{
    int i, j, a;

    for (i = 0; i < st->nstages; i++) {
        const struct kt_sstage *ss = &st->stages[i];
        int64_t total = 1;
        if (ss->inlined || ss->naxes == ss->nspatial || ss->niters < 2 ||
            ss->iters[ss->niters - 1].reduce)
            continue;
        for (a = ss->nspatial; a < ss->naxes; a++)
            total *= ss->axes[a].extent;
        for (j = 0; j < ss->niters - 1; j++)
            if (ss->iters[j].reduce && ss->iters[j].extent == total &&
                ss->iters[j].nparts == 1 &&
                ss->iters[j].parts[0].part ==
                    ss->nparts[ss->iters[j].parts[0].axis] - 1 &&
                tile_inside(ss, j))
                return 1;
    }
    return 0;
}

/* Samples of a batch of 128 from a random search of dag with max_reduce_run
 * run (checked) that run the whole reduction around their tile. */
static int
whole_runs(const struct kt_dag *dag, int run, struct kt_search **out)
{
    struct kt_search_opts o;
    struct kt_search_batch b;
    char err[512];
    int i, n = 0;

    kt_search_opts_default(&o);
    o.policy = KT_POLICY_RANDOM;
    o.population = 256;
    o.seed = 9;
    o.max_reduce_run = run;
    if (kt_search_new(out, dag, &o, err, sizeof(err)) != KT_OK)
        fail_msg("%s: %s", dag->key, err);
    assert_int_equal(kt_search_next_batch(*out, NULL, NULL, 0, 128, &b, NULL,
                                          err, sizeof(err)),
                     KT_OK);
    check_batch(dag, &b);
    for (i = 0; i < b.n; i++)
        n += whole_reduction_run(b.v[i].state);
    kt_search_batch_free(&b);
    return n;
}

/* The innermost reduction part of a tiled matmul may run its whole k of
 * 1024 (max_reduce_run), above max_innermost_reduce (512): at least 1 in
 * 8 samples do (InitWholeReduction draws 1 in 4 so; without it 11 of 128
 * did), and they compute what the interpreter does.  No k-blocking:
 * GEMM 1024^3's 8 x 32 tile over all of k, B packed per 32 columns,
 * matched oneDNN on 1 and 2 threads where k-blocks of 256 ran at 0.96x. */
static void
test_search_whole_reduction_run(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag;
    struct kt_search *s;
    int n;
    (void)state;

    assert_int_equal(kt_op_matmul(&d, 32, 64, 1024), KT_OK);
    dag = build(&d);
    n = whole_runs(dag, 1024, &s);
    if (n < 128 / 8)
        fail_msg("%d of 128 samples run the whole k of 1024 around their tile",
                 n);
    check_picked_samples(dag, s, whole_reduction_run,
                         "runs the whole k around its tile");
    kt_search_free(s);
    /* bounded at 512, no sample runs all 1024 steps in its inner part */
    assert_int_equal(whole_runs(dag, 512, &s), 0);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* AddCacheWrite only for a reduction longer than one register-tile run:
 * the attention batch matmul (head size 64) gets the plain tilings alone,
 * GEMM 1024^3 (k 1024 > max_innermost_reduce 512) keeps its four. */
static void
test_search_cache_write_long_reductions(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag;
    (void)state;

    assert_int_equal(kt_op_batch_matmul(&d, 12, 128, 128, 64, 1), KT_OK);
    dag = build(&d);
    assert_int_equal(sketches_with(dag, "cache_write"), 0);
    assert_int_equal(sketches_with(dag, "O: SRSRS"), 1);
    kt_dag_free(dag);

    assert_int_equal(kt_op_matmul(&d, 1024, 1024, 1024), KT_OK);
    dag = build(&d);
    assert_int_equal(sketches_with(dag, "cache_write"), 4);
    kt_dag_free(dag);
}

/* The dense 32x64x128 (+bias) search most tests here start from, with its
 * first batch of n. */
static struct kt_search *
dense_first_batch(struct kt_dag **dag, int pop, uint64_t seed, int threads,
                  struct kt_xgb_model *model, int n, struct kt_search_batch *b,
                  struct kt_search_stats *st)
{
    struct kt_op_def d;
    struct kt_search *s;
    char err[512];

    assert_int_equal(kt_op_dense(&d, 32, 64, 128, KT_EPI_BIAS), KT_OK);
    *dag = build(&d);
    s = new_search(*dag, KT_POLICY_SKETCH_XGB, pop, seed, threads);
    if (kt_search_next_batch(s, model, NULL, 0, n, b, st, err, sizeof(err)) !=
        KT_OK)
        fail_msg("first batch: %s", err);
    assert_int_equal(b->n, n);
    return s;
}

/* A batch the evolved picks cannot fill (a population of 8 for 32
 * candidates) is topped up by extra sampling; those candidates' genomes
 * are remembered too, so every one of them can seed later rounds. */
static void
test_search_extra_picks_are_remembered(void **state)
{
    struct kt_dag *dag;
    struct kt_search *s;
    struct kt_search_batch b;
    struct kt_search_stats st;
    int i;
    (void)state;

    s = dense_first_batch(&dag, 8, 5, 1, NULL, 32, &b, &st);
    for (i = 0; i < b.n; i++)
        assert_int_equal(kt_search_record(s, b.v[i].steps, b.v[i].nsteps,
                                          1e-3 * (i + 1)),
                         1);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* Measured results seed the next population; a trained model is used for
 * 4 generations; bad options are refused. */
static void
test_search_model_and_seeds(void **state)
{
    struct kt_dag *dag;
    struct kt_search *s;
    struct kt_search_batch b;
    struct kt_search_stats st;
    struct kt_xgb_model *model = kt_xgb_new(NULL);
    struct kt_train_set set;
    struct kt_search_opts o;
    char err[512];
    int i;
    (void)state;

    s = dense_first_batch(&dag, 256, 11, 2, model, 48, &b, &st);
    assert_int_equal(st.iters, 2); /* untrained model: random, 2 iters */
    assert_int_equal(st.measured_seeds, 0);
    kt_train_set_init(&set);
    for (i = 0; i < b.n; i++) {
        struct kt_state *stt = NULL;
        struct kt_looptree *lt = NULL;
        float *rows = NULL;
        int nrows = 0;
        double sec = 0;
        assert_int_equal(kt_state_replay(dag, b.v[i].steps, b.v[i].nsteps, &stt,
                                         err, sizeof(err)),
                         KT_OK);
        assert_int_equal(kt_lower(stt, &lt, err, sizeof(err)), KT_OK);
        assert_int_equal(kt_features_extract(lt, &rows, &nrows, err,
                                             sizeof(err)),
                         KT_OK);
        sec = ktt_synthetic_cost(rows, nrows);
        assert_true(sec > 0);
        kt_train_set_add(&set, rows, nrows, 0, sec);
        assert_int_equal(kt_search_record(s, b.v[i].steps, b.v[i].nsteps,
                                          i % 7 == 3 ? 0 : sec),
                         1);
        free(rows);
        kt_looptree_free(lt);
        kt_state_free(stt);
    }
    /* a schedule that is not one of ours only marks its hash */
    assert_int_equal(kt_search_record(s, b.v[0].steps, 1, 1e-3), 0);
    kt_train_set_label(&set, 0);
    assert_int_equal(kt_xgb_train(model, &set, NULL, err, sizeof(err)), KT_OK);
    kt_train_set_free(&set);
    kt_search_batch_free(&b);

    assert_int_equal(kt_search_next_batch(s, model, NULL, 0, 16, &b, &st, err,
                                          sizeof(err)),
                     KT_OK);
    assert_int_equal(b.n, 16);
    assert_int_equal(st.iters, 4);
    assert_int_equal(st.measured_seeds, 48 - 7); /* failed ones are not seeds */
    assert_true(isfinite(st.best_score));
    check_batch(dag, &b);
    kt_search_batch_free(&b);
    kt_search_free(s);

    kt_search_opts_default(&o);
    o.mutation_prob = 1.5;
    assert_int_equal(kt_search_new(&s, dag, &o, err, sizeof(err)), KT_EINVAL);
    assert_non_null(strstr(err, "mutation_prob 1.5"));
    kt_xgb_free(model);
    kt_dag_free(dag);
}

/* A trained model and a workload whose programs all fail feature
 * extraction (70 loads in one store: more than the features describe):
 * no initial sample scores, the GA has nothing to breed from and the round
 * ends with what the fallback sampling finds instead of dividing by zero
 * (kt_rng_below(0) was a SIGFPE in the search thread). */
static void
test_search_empty_population(void **state)
{
    struct kt_shape shape = {"A", 2, {64, 64}};
    struct kt_dag *dag = NULL;
    struct kt_search *s;
    struct kt_search_batch b;
    struct kt_search_stats st;
    struct kt_xgb_model *model = kt_xgb_new(NULL);
    struct kt_train_set set;
    struct kt_buf text;
    float rows[KT_FEATURE_LEN];
    char err[512];
    int i, j;
    (void)state;

    kt_buf_init(&text);
    kt_buf_puts(&text, "O[i,j] = A[i,j]");
    for (i = 1; i < 70; i++)
        kt_buf_puts(&text, " + A[i,j]");
    assert_int_equal(kt_dag_parse(text.p, &shape, 1, &dag, err, sizeof(err)),
                     KT_OK);
    kt_train_set_init(&set);
    for (i = 0; i < 64; i++) {
        for (j = 0; j < KT_FEATURE_LEN; j++)
            rows[j] = (float)((i * 7 + j * 3) % 11);
        kt_train_set_add(&set, rows, 1, 0, 1e-3 * (1 + i % 5));
    }
    kt_train_set_label(&set, 0);
    assert_int_equal(kt_xgb_train(model, &set, NULL, err, sizeof(err)), KT_OK);
    kt_train_set_free(&set);
    s = new_search(dag, KT_POLICY_SKETCH_XGB, 64, 3, 1);
    assert_int_equal(kt_search_next_batch(s, model, NULL, 0, 8, &b, &st, err,
                                          sizeof(err)),
                     KT_OK);
    assert_int_equal(st.sampled, 0);
    assert_int_equal(st.iters, 0);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_xgb_free(model);
    kt_buf_free(&text);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_dense_matmul),
        cmocka_unit_test(test_search_conv2d),
        cmocka_unit_test(test_search_pool_elementwise_softmax),
        cmocka_unit_test(test_search_reproducible),
        cmocka_unit_test(test_search_dedup_restart),
        cmocka_unit_test(test_search_random_policy),
        cmocka_unit_test(test_search_register_blocked),
        cmocka_unit_test(test_search_channel_vector),
        cmocka_unit_test(test_search_channel_vector_replaces_plain),
        cmocka_unit_test(test_search_spatial_vector_pool),
        cmocka_unit_test(test_search_global_pool_lane_reduction),
        cmocka_unit_test(test_search_gemv_long_lane_run),
        cmocka_unit_test(test_search_gemv_whole_odd_lane_run),
        cmocka_unit_test(test_search_cache_write_long_reductions),
        cmocka_unit_test(test_search_whole_reduction_run),
        cmocka_unit_test(test_search_lane_reduction_softmax),
        cmocka_unit_test(test_search_softmax_row_fusion),
        cmocka_unit_test(test_search_model_and_seeds),
        cmocka_unit_test(test_search_empty_population),
        cmocka_unit_test(test_search_extra_picks_are_remembered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
