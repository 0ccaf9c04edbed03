/* test_codegen.c - the schedule-to-C sweep: for every operator of the
 * library, seeded random valid schedules are lowered, compiled with gcc and
 * checked against the DAG interpreter (relative L2 error < 1e-4).
 *
 * KT_SWEEP=N sets the schedules per operator (default 6; 200 under
 * KT_TEST_LEVEL=long, as `make test-long` runs it); KT_TEST_FILTER=PATTERN
 * runs only the tests whose names match (cmocka's wildcards, e.g.
 * `*conv2d*`). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ktt.h"

static int
sweep_count(void)
{
    const char *s = getenv("KT_SWEEP");
    const char *lvl = getenv("KT_TEST_LEVEL");

    if (s != NULL)
        return atoi(s);
    if (lvl != NULL && strcmp(lvl, "long") == 0)
        return 200;
    return 6;
}

/* Candidates per compiled module.  gcc's time grows faster than linearly
 * with the size of one build unit: the 200 conv candidates of the long
 * sweep in one 2.3 MB module ran gcc for more than 40 minutes. */
#define SWEEP_MODULE_CANDS 16

/* Builds n valid random schedules for dag, compiles them into shared
 * objects of SWEEP_MODULE_CANDS candidates and compares every candidate
 * with the interpreter. */
static void
sweep(const struct kt_dag *dag, uint64_t seed, int n)
{
    struct kt_state **cands = calloc((size_t)n * 3, sizeof(*cands));
    struct kt_rng r;
    char err[4096];
    int i, ncand = 0, valid = 0, skipped = 0, lo, failed = 0;

    kt_rng_seed(&r, seed);
    /* Keep drawing until n schedules lower; invalid ones must be rare. */
    while (valid < n && ncand < 3 * n) {
        struct kt_looptree *lt = NULL;
        cands[ncand] = ktt_random_schedule(dag, &r);
        if (kt_lower(cands[ncand], &lt, err, sizeof(err)) == KT_OK)
            valid++;
        kt_looptree_free(lt);
        ncand++;
    }
    assert_int_equal(valid, n);
    for (lo = 0; lo < ncand; lo += SWEEP_MODULE_CANDS) {
        int len = ncand - lo < SWEEP_MODULE_CANDS ? ncand - lo
                                                  : SWEEP_MODULE_CANDS;
        int sk = 0;
        if (ktt_check_many(dag, cands + lo, len, seed, &sk) != 0)
            failed++;
        skipped += sk;
    }
    assert_int_equal(failed, 0);
    assert_int_equal(ncand - skipped, valid);
    for (i = 0; i < ncand; i++)
        kt_state_free(cands[i]);
    free(cands);
}

static void
sweep_def(const struct kt_op_def *d, uint64_t seed)
{
    struct kt_dag *dag = NULL;
    char err[512];

    if (kt_op_build(d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s: %s", d->name, err);
    sweep(dag, seed, sweep_count());
    kt_dag_free(dag);
}

static void
test_codegen_dense(void **state)
{
    struct kt_op_def d;
    (void)state;
    assert_int_equal(kt_op_dense(&d, 16, 1000, 64, KT_EPI_BIAS | KT_EPI_RELU),
                     KT_OK);
    sweep_def(&d, 1);
    assert_int_equal(kt_op_dense(&d, 7, 14, 56, 0), KT_OK);
    sweep_def(&d, 2);
    /* 61 outputs padded to 64: weights read through their padded copy
     * (packed, or rewritten once), the bias epilogue drops the padding */
    assert_int_equal(kt_op_dense(&d, 7, 61, 24, KT_EPI_BIAS), KT_OK);
    assert_non_null(strstr(d.text, "pad j:64"));
    sweep_def(&d, 9);
}

static void
test_codegen_matmul(void **state)
{
    struct kt_op_def d;
    (void)state;
    assert_int_equal(kt_op_matmul(&d, 56, 64, 96), KT_OK);
    sweep_def(&d, 3);
}

/* B a weight: schedules may rewrite its layout (the pack routine builds
 * it once), here with its 61 columns padded to 64 */
static void
test_codegen_matmul_const_b(void **state)
{
    struct kt_op_def d;
    (void)state;
    assert_int_equal(kt_op_matmul_const_b(&d, 40, 61, 24), KT_OK);
    assert_non_null(strstr(d.text, "pad j:64"));
    sweep_def(&d, 50);
}

static void
test_codegen_batch_matmul(void **state)
{
    struct kt_op_def d;
    (void)state;
    assert_int_equal(kt_op_batch_matmul(&d, 3, 14, 32, 7, 0), KT_OK);
    sweep_def(&d, 4);
    assert_int_equal(kt_op_batch_matmul(&d, 2, 16, 14, 24, 1), KT_OK);
    sweep_def(&d, 5);
    /* extents of whole vectors: packs of B[b, j, k] into [k][j] are
     * copied by blocks transposed in registers */
    assert_int_equal(kt_op_batch_matmul(&d, 2, 16, 32, 32, 1), KT_OK);
    sweep_def(&d, 6);
    /* padded to 56 x 64 (P), then copied into the 53 x 61 output by a
     * stage that iterates the padding and drops it */
    assert_int_equal(kt_op_batch_matmul(&d, 2, 53, 61, 8, 1), KT_OK);
    assert_non_null(strstr(d.text, "pad i:56, j:64"));
    sweep_def(&d, 7);
    assert_int_equal(kt_op_matmul(&d, 53, 61, 24), KT_OK);
    sweep_def(&d, 8);
}

static void
conv(int64_t C, int64_t H, int64_t K, int64_t R, int64_t S_, int64_t P,
     int64_t D, int64_t G, int epi, uint64_t seed)
{
    struct kt_op_def d;
    assert_int_equal(ktt_conv_def(&d, C, H, K, R, S_, P, D, G, epi), KT_OK);
    sweep_def(&d, seed);
}

static void
test_codegen_conv2d(void **state)
{
    (void)state;
    conv(8, 14, 16, 3, 1, 1, 1, 1, 0, 10); /* 3x3 pad 1 */
    conv(3, 28, 8, 7, 2, 3, 1, 1, 0, 11);  /* 7x7 s2 pad 3 */
    conv(4, 7, 8, 1, 1, 0, 1, 1, 0, 12);   /* 1x1 pad 0 */
    conv(4, 14, 4, 3, 1, 2, 2, 1, 0, 13);  /* dilation 2 */
}

static void
test_codegen_conv2d_groups(void **state)
{
    (void)state;
    conv(8, 14, 8, 3, 1, 1, 1, 8, 0, 14);  /* depthwise */
    conv(8, 14, 16, 3, 2, 1, 1, 2, 0, 15); /* groups 2, s2 */
    conv(8, 14, 16, 1, 1, 0, 1, 2, KT_EPI_BIAS | KT_EPI_RELU,
         18); /* pointwise: pixels as one axis */
}

static void
test_codegen_conv2d_fused(void **state)
{
    (void)state;
    conv(8, 14, 16, 3, 1, 1, 1, 1, KT_EPI_BIAS | KT_EPI_RELU, 16);
    conv(8, 56, 8, 3, 1, 1, 1, 8, KT_EPI_BIAS | KT_EPI_RELU, 17); /* 56x56 dw */
}

/* Winograd F(4,3) and F(2,3) along the rows (ir/winograd.c). */
static void
test_codegen_conv2d_winograd(void **state)
{
    struct kt_conv2d_params p = {1, 8, 16, 14, 16,
                                 3, 3, 1,  1,  1,
                                 1, 1, 1,  1,  KT_EPI_BIAS | KT_EPI_RELU};
    struct kt_op_def d;

    (void)state;
    assert_int_equal(kt_op_conv2d_winograd(&d, &p, 4), KT_OK);
    sweep_def(&d, 19);
    p.H = 6;
    p.stride_w = 2;
    p.epilogue = 0;
    assert_int_equal(kt_op_conv2d_winograd(&d, &p, 2), KT_OK);
    sweep_def(&d, 20);
}

/* Transposed convolutions (docs/compute.md): 2 x 2 at stride 2, the
 * output's two column phases interleaved (vectors along x store at a
 * stride of 2), with a bias + relu epilogue; 3 x 3 at stride 2, padded,
 * with an output padding. */
static void
test_codegen_conv2d_transpose(void **state)
{
    const struct kt_conv_t_params k2 = {1, 8, 6, 16, 12, 2, 2,
                                        2, 2, 0, 0,  12, 32};
    const struct kt_conv_t_params k3 = {1, 4, 5, 7, 6,  3, 3,
                                        2, 2, 1, 1, 10, 14};
    const struct kt_shape bias = {"B", 1, {12}};
    struct kt_op_def d;
    int64_t ch, cw;

    (void)state;
    assert_int_equal(kt_op_conv2d_transpose(&d, &k2, &ch, &cw), KT_OK);
    assert_int_equal(kt_op_epilogue(&d,
                                    "O[n,f,y,a,x,b]=max(Y[n,f,y,a,x,b]+B[f],0)",
                                    &bias, 1),
                     KT_OK);
    sweep_def(&d, 21);
    assert_int_equal(kt_op_conv2d_transpose(&d, &k3, &ch, &cw), KT_OK);
    sweep_def(&d, 22);
}

static void
test_codegen_pool(void **state)
{
    struct kt_op_def d;
    (void)state;
    assert_int_equal(kt_op_pool2d(&d, 1, 1, 8, 14, 14, 3, 2, 1), KT_OK);
    sweep_def(&d, 20);
    assert_int_equal(kt_op_pool2d(&d, 0, 1, 8, 14, 14, 2, 2, 0), KT_OK);
    sweep_def(&d, 21);
    assert_int_equal(kt_op_global_avg_pool(&d, 1, 16, 7, 7), KT_OK);
    sweep_def(&d, 22);
}

static void
test_codegen_elementwise(void **state)
{
    static const char *const kinds[] = {"add", "mul", "relu", "hardswish",
                                        "sigmoid"};
    struct kt_op_def d;
    unsigned i;
    (void)state;
    for (i = 0; i < KT_ARRAY_LEN(kinds); i++) {
        assert_int_equal(kt_op_elementwise(&d, kinds[i], 1, 8, 14, 14), KT_OK);
        sweep_def(&d, 30 + i);
    }
}

/* Expressions with the prelude's vector tanh, log and sqrt (ir/module.c):
 * a GELU in its tanh form over inputs scaled past tanh's clamp, log and
 * sqrt over inputs kept positive, rows of 200 (no 16-lane vector divides
 * them). */
static void
test_codegen_transcendental(void **state)
{
    static const char *const defs[] = {
        "O[i,j] = 0.5 * X[i,j] * (1 + tanh(0.797884561 * (X[i,j] * 12 + "
        "0.044715 * X[i,j] * X[i,j] * X[i,j])))",
        "O[i,j] = log(abs(X[i,j]) + 0.25)",
        "O[i,j] = sqrt(X[i,j] + 1.5) * X[i,j]",
    };
    struct kt_shape sh[1] = {{"X", 2, {8, 200}}};
    unsigned i;
    (void)state;
    for (i = 0; i < KT_ARRAY_LEN(defs); i++) {
        struct kt_dag *dag = NULL;
        char err[512];
        if (kt_dag_parse(defs[i], sh, 1, &dag, err, sizeof(err)) != KT_OK)
            fail_msg("%s: %s", defs[i], err);
        sweep(dag, 50 + i, sweep_count());
        kt_dag_free(dag);
    }
}

static void
test_codegen_softmax(void **state)
{
    struct kt_op_def d;
    (void)state;
    assert_int_equal(kt_op_softmax(&d, 7, 1000), KT_OK);
    sweep_def(&d, 40);
    /* rows no 4-lane vector divides: lane accumulators and a tail */
    assert_int_equal(kt_op_softmax(&d, 5, 197), KT_OK);
    sweep_def(&d, 41);
}

/* Checks the candidates of dag against the interpreter and that their
 * code generated for 16-lane vectors (whatever the host's) contains
 * 'needle'. */
static void
check_contains(const struct kt_dag *dag, struct kt_state **cands, int n,
               const char *needle)
{
    int *gen = calloc((size_t)n, sizeof(*gen)), skipped = 0;
    char *src;

    ktt_vector_bytes = 64;
    src = ktt_module_many(dag, cands, n, gen, &skipped);
    ktt_vector_bytes = 0;
    assert_non_null(src);
    assert_int_equal(skipped, 0);
    assert_non_null(strstr(src, needle));
    free(src);
    free(gen);
    assert_int_equal(ktt_check_many(dag, cands, n, 7, &skipped), 0);
    assert_int_equal(skipped, 0);
}

/* Vectorized reads with a small constant stride become contiguous loads
 * and shuffles; the tight shapes put the last lane on the source's last
 * element, so a load past the span would be caught by the comparison
 * (and by ASan/valgrind runs). */
static void
test_codegen_strided_shuffle(void **state)
{
    static const int64_t strides[] = {2, 3, 4};
    static const int64_t widths[] = {4, 8, 16, 32};
    unsigned si, wi;
    (void)state;
    for (si = 0; si < KT_ARRAY_LEN(strides); si++) {
        for (wi = 0; wi < KT_ARRAY_LEN(widths); wi++) {
            int64_t s = strides[si], w = widths[wi];
            struct kt_shape sh[2] = {{"A", 2, {3, s * (w - 1) + 1}},
                                     {"O", 2, {3, w}}};
            struct kt_step vec = {KT_STEP_ANNOTATE, 0, 1, 0, {KT_ANN_VECTORIZE}};
            struct kt_state *st[1];
            struct kt_dag *dag = NULL;
            char text[96], err[512];
            snprintf(text, sizeof(text), "O[i,j] = A[i,%lld*j] * 2.0",
                     (long long)s);
            if (kt_dag_parse(text, sh, 2, &dag, err, sizeof(err)) != KT_OK)
                fail_msg("%s: %s", text, err);
            if (kt_state_replay(dag, &vec, 1, &st[0], err, sizeof(err)) != KT_OK)
                fail_msg("%s: %s", text, err);
            check_contains(dag, st, 1, "__builtin_shufflevector(");
            kt_state_free(st[0]);
            kt_dag_free(dag);
        }
    }
}

/* A vectorized read of an inlined padding (max pooling 3x3, pad 1, the
 * window's reads of stride 1 and 2 along x): the contiguous one checks
 * the bounds of its first and last lanes and reads a vector when both are
 * inside, masked only at the edges; the strided one, its columns checked,
 * is masked loads merged by a shuffle alone (no check before it), at 16
 * lanes and, with 16-lane targets, at 8 (16 x 16 -> 8 x 8); the results
 * must still match. */
static void
test_codegen_guarded_vector_read(void **state)
{
    static const struct {
        int stride, side;
        const char *needle;
    } cases[] = {
        {1, 32, ") ? kt_ld16("},
        {2, 32, ", __builtin_shufflevector(kt_ldm16("},
        {2, 16, ", __builtin_shufflevector(kt_ldm8("},
    };
    unsigned i;
    (void)state;

    for (i = 0; i < KT_ARRAY_LEN(cases); i++) {
        struct kt_step steps[] = {
            {KT_STEP_COMPUTE_INLINE, 0, 0, 0, {0}},
            {KT_STEP_REORDER, 1, 0, 6, {0, 1, 2, 4, 5, 3}},
            {KT_STEP_ANNOTATE, 1, 5, 0, {KT_ANN_VECTORIZE}},
        };
        struct kt_op_def d;
        struct kt_dag *dag = NULL;
        struct kt_state *st[1];
        char err[512];
        assert_int_equal(kt_op_pool2d(&d, 1, 1, 4, cases[i].side, cases[i].side,
                                      3, cases[i].stride, 1),
                         KT_OK);
        if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK ||
            kt_state_replay(dag, steps, 3, &st[0], err, sizeof(err)) != KT_OK)
            fail_msg("%s", err);
        check_contains(dag, st, 1, cases[i].needle);
        kt_state_free(st[0]);
        kt_dag_free(dag);
    }
}

/* A vectorized reduction into one element inside a micro-kernel keeps
 * vector lane accumulators (split for ILP when unrolled) and reduces across
 * lanes once after the loop. */
static void
test_codegen_lane_accumulators(void **state)
{
    static const char *const defs[] = {
        "O[i] += A[i,k] * B[k]",
        "O[i] max= A[i,k] - B[k]",
        "O[i] min= A[i,k] * B[k]",
    };
    static const char *const scheds[] = {
        "{\"v\":1,\"steps\":[[\"SP\",0,1,[4,16]],[\"AN\",0,3,\"vectorize\"],"
        "[\"AN\",0,2,\"unroll\"]]}",
        "{\"v\":1,\"steps\":[[\"SP\",0,1,[64]],[\"AN\",0,2,\"vectorize\"]]}",
        "{\"v\":1,\"steps\":[[\"SP\",0,0,[2]],[\"SP\",0,2,[32]],"
        "[\"RE\",0,[0,2,1,3]],[\"AN\",0,0,\"parallel\"],"
        "[\"AN\",0,2,\"unroll\"],[\"AN\",0,3,\"vectorize\"]]}",
    };
    unsigned di, si;
    (void)state;
    for (di = 0; di < KT_ARRAY_LEN(defs); di++) {
        for (si = 0; si < KT_ARRAY_LEN(scheds); si++) {
            struct kt_shape sh[2] = {{"A", 2, {8, 256}}, {"B", 1, {256}}};
            struct kt_state *st[1];
            struct kt_dag *dag = NULL;
            struct kt_step *steps = NULL;
            char err[512];
            int n = 0;
            if (kt_dag_parse(defs[di], sh, 2, &dag, err, sizeof(err)) != KT_OK ||
                kt_steps_from_json(scheds[si], &steps, &n, err, sizeof(err)) !=
                    KT_OK ||
                kt_state_replay(dag, steps, n, &st[0], err, sizeof(err)) !=
                    KT_OK)
                fail_msg("%s / %s: %s", defs[di], scheds[si], err);
            check_contains(dag, st, 1, "] = kt_h");
            kt_state_free(st[0]);
            free(steps);
            kt_dag_free(dag);
        }
    }
}

/* The chunks of a vectorized loop: widths dividing the extent where one
 * of at least 8 lanes (or the target's widest) does, else the widest
 * vectors that fit and a narrow tail. */
static void
test_codegen_vector_chunks(void **state)
{
    (void)state;
    assert_int_equal(kt_vector_chunks(64, 1024), 64);
    assert_int_equal(kt_vector_chunks(64, 40), 5); /* 8 lanes divide */
    assert_int_equal(kt_vector_chunk_lanes(64, 40, 32), 8);
    assert_int_equal(kt_vector_chunks(64, 197), 14); /* 12 x 16 + 4 + 1 */
    assert_int_equal(kt_vector_chunk_lanes(64, 197, 176), 16);
    assert_int_equal(kt_vector_chunk_lanes(64, 197, 192), 4);
    assert_int_equal(kt_vector_chunk_lanes(64, 197, 196), 1);
    assert_int_equal(kt_vector_chunks(64, 20), 2); /* 16 + 4 */
    assert_int_equal(kt_vector_chunks(32, 20), 3); /* 8 + 8 + 4 */
    assert_int_equal(kt_vector_chunks(16, 7), 4);  /* 4 + 1 + 1 + 1 */
    assert_int_equal(kt_vector_chunks(16, 12), 3); /* the widest divides */
    assert_int_equal(kt_vector_chunks(0, 5), 5);   /* no vectors */
}

/* The DAG of text over shapes sh with the schedule json replayed. */
static struct kt_state *
replayed(const char *text, const struct kt_shape *sh, int nsh, const char *json,
         struct kt_dag **dag)
{
    struct kt_step *steps = NULL;
    struct kt_state *st = NULL;
    char err[512];
    int n = 0;

    *dag = NULL;
    if (kt_dag_parse(text, sh, nsh, dag, err, sizeof(err)) != KT_OK ||
        kt_steps_from_json(json, &steps, &n, err, sizeof(err)) != KT_OK ||
        kt_state_replay(*dag, steps, n, &st, err, sizeof(err)) != KT_OK)
        fail_msg("%s / %s: %s", text, json, err);
    free(steps);
    return st;
}

/* The DAG of text with its innermost loop of stage 0 vectorized holds
 * needle and matches the interpreter. */
static void
check_vectorized(const char *text, const struct kt_shape *sh, int nsh,
                 const char *needle)
{
    struct kt_step vec = {KT_STEP_ANNOTATE, 0, 1, 0, {KT_ANN_VECTORIZE}};
    struct kt_state *st[1];
    struct kt_dag *dag = NULL;
    char err[512];

    if (kt_dag_parse(text, sh, nsh, &dag, err, sizeof(err)) != KT_OK ||
        kt_state_replay(dag, &vec, 1, &st[0], err, sizeof(err)) != KT_OK)
        fail_msg("%s: %s", text, err);
    check_contains(dag, st, 1, needle);
    kt_state_free(st[0]);
    kt_dag_free(dag);
}

/* Wide vectors and a narrow tail where no wide width divides the
 * extent: in a micro-kernel's register tile (j of 20 is 16 + 4 lanes on
 * AVX-512, 8 + 8 + 4 on AVX2), in a plain vectorized loop (37: a loop of
 * wide vectors, then 4 lanes and a scalar) and in a lane reduction, with
 * results that match. */
static void
test_codegen_vector_tail(void **state)
{
    struct kt_shape mm[2] = {{"A", 2, {3, 5}}, {"B", 2, {5, 20}}};
    struct kt_shape ew[2] = {{"A", 2, {3, 37}}, {"O", 2, {3, 37}}};
    struct kt_shape rows[1] = {{"A", 2, {2, 4100}}};
    const char *kernel = "{\"v\":1,\"steps\":[[\"RE\",0,[2,0,1]],"
                         "[\"AN\",0,1,\"unroll\"],[\"AN\",0,2,\"vectorize\"]]}";
    struct kt_state *st[1];
    struct kt_dag *dag;
    int gen[1], skipped = 0;
    char *src;

    (void)state;
    st[0] = replayed("O[i,j] += A[i,k] * B[k,j]", mm, 2, kernel, &dag);
    src = ktt_module_many(dag, st, 1, gen, &skipped);
    assert_non_null(src);
    assert_true(strstr(src, "kt_ld16(") != NULL ||
                strstr(src, "kt_ld8(") != NULL);
    free(src);
    check_contains(dag, st, 1, "kt_v4 r");
    kt_state_free(st[0]);
    kt_dag_free(dag);

    check_vectorized("O[i,j] = A[i,j] * 2.0", ew, 2, "kt_ld4(&t_A[");
    /* a row sum too long to expand (4100 = 256 x 16 + 4): lane
     * accumulators over 4096, the tail of 4 reduced into the element
     * after them */
    check_vectorized("O[i] += A[i,k] * 2.0", rows, 1, "kt_hsum16(acc0_0)");
}

/* A register tile of 4 rows by 100 columns (a 1x1 convolution over 10 x 10
 * pixels: 7 vectors, the last a narrow one, of B feed 4 FMAs each) loads
 * each vector once into a pinned register (ir/codegen_pin.c); a tile of 3
 * rows by 20 columns, 2 shared vectors, leaves them to the compiler.  Both
 * match the interpreter. */
static void
test_codegen_pinned_operands(void **state)
{
    struct kt_shape wide[2] = {{"A", 2, {4, 5}}, {"B", 2, {5, 100}}};
    struct kt_shape narrow[2] = {{"A", 2, {3, 5}}, {"B", 2, {5, 20}}};
    const char *kernel = "{\"v\":1,\"steps\":[[\"RE\",0,[2,0,1]],"
                         "[\"AN\",0,1,\"unroll\"],[\"AN\",0,2,\"vectorize\"]]}";
    struct kt_state *st[1];
    struct kt_dag *dag;
    int gen[1], skipped = 0;
    char *src;

    (void)state;
    st[0] = replayed("O[i,j] += A[i,k] * B[k,j]", wide, 2, kernel, &dag);
    check_contains(dag, st, 1, " x6 = kt_ld4(&t_B[");
    check_contains(dag, st, 1, "[k0_l2 + 5]) * x0);");
    kt_state_free(st[0]);
    kt_dag_free(dag);

    st[0] = replayed("O[i,j] += A[i,k] * B[k,j]", narrow, 2, kernel, &dag);
    ktt_vector_bytes = 64;
    src = ktt_module_many(dag, st, 1, gen, &skipped);
    ktt_vector_bytes = 0;
    assert_non_null(src);
    assert_null(strstr(src, "); KT_PIN"));
    free(src);
    kt_state_free(st[0]);
    kt_dag_free(dag);
}

/* An attention batch matmul (B read transposed) with the register tile
 * over all m columns and B packed per batch as [k][m]. */
static void
check_packed_bmm(int64_t m, int64_t k, const char *needle)
{
    char json[640];
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_state *st[1];
    struct kt_step *steps = NULL;
    char err[512];
    int n = 0;

    snprintf(json, sizeof(json),
             "{\"v\":1,\"steps\":[[\"CHR\",0,1],[\"CHR\",1,0],"
             "[\"SP\",2,3,[%lld]],[\"SP\",2,2,[1,1,%lld]],"
             "[\"SP\",2,1,[1,%lld,1]],[\"SP\",2,0,[1,1,1]],"
             "[\"RE\",2,[0,4,8,1,5,9,12,2,6,10,13,3,7,11]],[\"FU\",2,0,6],"
             "[\"CI\",1],[\"CA\",0,2,2],[\"AN\",0,2,\"vectorize\"],"
             "[\"AN\",2,0,\"parallel\"],[\"AN\",2,8,\"vectorize\"]]}",
             (long long)k, (long long)m, (long long)m);
    assert_int_equal(kt_op_batch_matmul(&d, 2, m, m, k, 1), KT_OK);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK ||
        kt_steps_from_json(json, &steps, &n, err, sizeof(err)) != KT_OK ||
        kt_state_replay(dag, steps, n, &st[0], err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    check_contains(dag, st, 1, needle);
    kt_state_free(st[0]);
    free(steps);
    kt_dag_free(dag);
}

/* A local tile whose rows vectors do not fill is laid out with rows
 * padded to whole vectors (B packed as [8][20]: rows of 32 floats with
 * 16-lane vectors, the code check_contains reads), and a transposing
 * pack of an extent no vector divides copies 16 x 16 blocks and its last
 * rows one by one (B[21][16] into [16][21]); the results match. */
static void
test_codegen_padded_tile_rows(void **state)
{
    (void)state;
    check_packed_bmm(20, 8, "float t_B_pack[256]");
    check_packed_bmm(21, 16, "kt_v16 x4_15 = __builtin_shufflevector");
}

/* A vector divided by a value the same in every lane (softmax's row sum)
 * is multiplied by its reciprocal: no vector divide is left. */
static void
test_codegen_invariant_divisor(void **state)
{
    struct kt_shape sh[2] = {{"A", 2, {3, 64}}, {"B", 1, {3}}};
    struct kt_step vec = {KT_STEP_ANNOTATE, 0, 1, 0, {KT_ANN_VECTORIZE}};
    struct kt_state *st[1];
    struct kt_dag *dag = NULL;
    char err[512], *src;
    int gen = 0, skipped = 0;
    (void)state;

    if (kt_dag_parse("O[i,j] = (A[i,j] + 1.0) / B[i]", sh, 2, &dag, err,
                     sizeof(err)) != KT_OK ||
        kt_state_replay(dag, &vec, 1, &st[0], err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    check_contains(dag, st, 1, "* kt_bc16(1.0f / t_B[");
    src = ktt_module_many(dag, st, 1, &gen, &skipped);
    assert_non_null(src);
    assert_null(strstr(strstr(src, "cand_0("), ") / kt_bc16("));
    free(src);
    kt_state_free(st[0]);
    kt_dag_free(dag);
}

/* Softmax computed row by row: exp kept as a stage and computed at the
 * output's row loop together with the row sum, its other reader (the row
 * max computed inside it), so exp runs once per element and one parallel
 * loop holds the row in a local buffer.  compute_at accepts the second
 * reader only at the same loop of the same target. */
static void
test_codegen_row_fusion(void **state)
{
    static const char *const sched =
        "{\"v\":1,\"steps\":[[\"SP\",0,1,[16]],[\"SP\",2,1,[16]],"
        "[\"CA\",2,3,0],[\"CA\",1,3,0],[\"CA\",0,1,0],"
        "[\"AN\",3,0,\"parallel\"],[\"AN\",3,1,\"vectorize\"],"
        "[\"AN\",1,1,\"vectorize\"],[\"AN\",2,2,\"vectorize\"],"
        "[\"AN\",0,2,\"vectorize\"]]}";
    static const char *const unsplit =
        "{\"v\":1,\"steps\":[[\"CA\",2,3,0],[\"CA\",1,3,0],[\"CA\",0,1,0],"
        "[\"AN\",3,0,\"parallel\"],[\"AN\",3,1,\"vectorize\"],"
        "[\"AN\",1,1,\"vectorize\"],[\"AN\",2,1,\"vectorize\"],"
        "[\"AN\",0,1,\"vectorize\"]]}";
    struct kt_step alone = {KT_STEP_COMPUTE_AT, 1, 0, 2, {3, 0}};
    struct kt_step elsewhere[] = {{KT_STEP_COMPUTE_AT, 2, 0, 2, {3, 0}},
                                  {KT_STEP_COMPUTE_AT, 1, 0, 2, {3, 1}}};
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_step *steps = NULL;
    struct kt_state *st[1], *bad = NULL;
    char err[512];
    int n = 0;
    (void)state;

    assert_int_equal(kt_op_softmax(&d, 6, 64), KT_OK);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK ||
        kt_steps_from_json(sched, &steps, &n, err, sizeof(err)) != KT_OK ||
        kt_state_replay(dag, steps, n, &st[0], err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    check_contains(dag, st, 1, "float t_E[64]");
    kt_state_free(st[0]);
    /* unsplit, the row max and sum are vector loops of 4 chunks outside any
     * micro-kernel: 4 lane accumulators each, across lanes once */
    free(steps);
    if (kt_steps_from_json(unsplit, &steps, &n, err, sizeof(err)) != KT_OK ||
        kt_state_replay(dag, steps, n, &st[0], err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    check_contains(dag, st, 1, "t_S[0] = kt_add(t_S[0], kt_hsum16(acc0_0));");
    /* E is also read by S: not while S is at the root or at another loop */
    assert_int_equal(kt_state_replay(dag, &alone, 1, &bad, err, sizeof(err)),
                     KT_ESCHEDULE);
    assert_int_equal(kt_state_replay(dag, elsewhere, 2, &bad, err, sizeof(err)),
                     KT_ESCHEDULE);
    kt_state_free(st[0]);
    free(steps);
    kt_dag_free(dag);
}

/* Loop variables are named after the op's axes (a conv's r, s, x, y) and
 * must not collide with the generator's temporaries: this schedule of the
 * suite's conv1x1, tuned by the daemon, declared a transposing copy's
 * register x0_1 inside the loop of variable x0_1 (gcc: "conversion of
 * scalar 'long int' to vector").  (The definition with y and x apart, as
 * pointwise convolutions then had.) */
static void
test_codegen_loop_names_apart(void **state)
{
    static const char sched[] =
        "{\"v\":1,\"steps\":[[\"CHR\",0,0],[\"CHR\",1,1],[\"SP\",3,3,[1,28]],"
        "[\"SP\",3,2,[1,28]],[\"SP\",3,1,[1,64]],"
        "[\"RE\",3,[0,1,4,7,2,5,8,3,6,9]],[\"FU\",3,0,7],[\"SP\",2,4,[256]],"
        "[\"SP\",2,3,[1,28,1]],[\"SP\",2,2,[1,1,28]],[\"SP\",2,1,[1,4,16]],"
        "[\"RE\",2,[0,1,5,9,2,6,10,13,15,16,3,7,11,14,8,12,4]],"
        "[\"CA\",2,3,0],[\"CA\",1,2,3],[\"CA\",0,2,3],"
        "[\"AN\",0,3,\"vectorize\"],[\"AN\",2,16,\"vectorize\"],"
        "[\"AN\",2,14,\"unroll\"],[\"PR\",2,0,512],[\"AN\",3,0,\"parallel\"],"
        "[\"AN\",3,3,\"vectorize\"]]}";
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_step *steps = NULL;
    struct kt_state *st[1];
    char err[512];
    int n = 0;
    (void)state;

    assert_int_equal(ktt_conv_grid_def(&d, 256, 56, 64, 1, 1, 0, 1, 1,
                                       KT_EPI_BIAS | KT_EPI_RELU),
                     KT_OK);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK ||
        kt_steps_from_json(sched, &steps, &n, err, sizeof(err)) != KT_OK ||
        kt_state_replay(dag, steps, n, &st[0], err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    check_contains(dag, st, 1, "= __builtin_shufflevector(x0_1, ");
    kt_state_free(st[0]);
    free(steps);
    kt_dag_free(dag);
}

/* Across-lane reductions go by halves: softmax's row max and sum were
 * chains of 15 dependent scalar operations. */
static void
test_codegen_prelude_reductions(void **state)
{
    struct kt_buf b;
    (void)state;

    kt_buf_init(&b);
    kt_codegen_prelude(&b);
    assert_non_null(strstr(b.p, "kt_hsum##H(kt_lo##W(a) + kt_hi##W(a))"));
    assert_null(strstr(b.p, "for (int l = 0; l < W; l++) s += a[l]"));
    kt_buf_free(&b);
}

/* The accumulator tile of a micro-kernel under a perfect nest of
 * reduction loops (a conv's c, r, s) is held in registers across the whole
 * nest: set before the outermost reduction loop, not around the innermost
 * one. */
static void
test_codegen_register_nest(void **state)
{
    struct kt_shape sh[2] = {{"A", 3, {3, 3, 16}}, {"B", 3, {4, 3, 3}}};
    const char *json = "{\"v\":1,\"steps\":[[\"RE\",0,[2,3,0,1]],"
                       "[\"AN\",0,2,\"unroll\"],[\"AN\",0,3,\"vectorize\"]]}";
    struct kt_state *st[1];
    struct kt_dag *dag;
    int gen[1], skipped = 0;
    char *src;
    const char *body, *reg, *outer;

    (void)state;
    st[0] = replayed("O[i,j] += B[i,k,l] * A[k,l,j]", sh, 2, json, &dag);
    src = ktt_module_many(dag, st, 1, gen, &skipped);
    assert_non_null(src);
    body = strstr(src, "cand_0(");
    assert_non_null(body);
    reg = strstr(body, "r0 = kt_"); /* loaded, or zero: the init folded */
    outer = strstr(body, "for (long k");
    assert_non_null(reg);
    assert_non_null(outer);
    assert_true(reg < outer);
    free(src);
    check_contains(dag, st, 1, "r3 += ");
    kt_state_free(st[0]);
    kt_dag_free(dag);
}

/* A 3x3 conv 64 -> 64 56x56 whose T (stage 2) computes its output
 * channels as 16-lane vectors at root (W packed, a layout rewrite); the
 * closing "]}" is the caller's. */
#define ROOT_CHANNEL_STEPS                                                     \
    "{\"v\":1,\"steps\":[[\"CHR\",1,1],[\"SP\",2,6,[1]],[\"SP\",2,5,[1]],"     \
    "[\"SP\",2,4,[2]],[\"SP\",2,3,[2,7,1]],[\"SP\",2,2,[1,4,14]],"             \
    "[\"SP\",2,1,[4,1,16]],[\"RE\",2,[0,1,5,9,2,6,10,13,15,17,3,7,11,14,16,"   \
    "18,8,12,4]],[\"FU\",2,0,7],[\"CA\",1,2,1],[\"LR\",1],[\"FU\",0,0,2],"     \
    "[\"AN\",0,0,\"parallel\"],[\"AN\",0,2,\"vectorize\"],"                    \
    "[\"AN\",1,3,\"vectorize\"],[\"AN\",2,0,\"parallel\"],"                    \
    "[\"AN\",2,12,\"vectorize\"],[\"AN\",2,10,\"unroll\"],[\"PR\",2,0,512]"

static int64_t
block_size_of(const struct kt_op_def *d, const char *json, char **src)
{
    struct kt_codegen_opts o;
    struct kt_dag *dag = NULL;
    struct kt_state *st = NULL;
    struct kt_looptree *lt = NULL;
    struct kt_step *steps = NULL;
    struct kt_buf b;
    char err[512];
    int64_t size;
    int n = 0;

    if (kt_op_build(d, &dag, err, sizeof(err)) != KT_OK ||
        kt_steps_from_json(json, &steps, &n, err, sizeof(err)) != KT_OK ||
        kt_state_replay(dag, steps, n, &st, err, sizeof(err)) != KT_OK ||
        kt_lower(st, &lt, err, sizeof(err)) != KT_OK)
        fail_msg("%s: %s", d->name, err);
    kt_codegen_default_opts(&o);
    o.vector_bytes = 64;
    kt_buf_init(&b);
    assert_int_equal(kt_codegen_function(lt, &o, "k", &b, err, sizeof(err)),
                     KT_OK);
    size = kt_codegen_block_size(lt, &o, NULL);
    *src = kt_buf_take(&b);
    kt_looptree_free(lt);
    kt_state_free(st);
    free(steps);
    kt_dag_free(dag);
    return size;
}

/* The loop directly around the first reduction store under n, or NULL. */
static const struct kt_node *
reduction_loop(const struct kt_node *n, const struct kt_node *loop)
{
    int i;

    if (n->kind == KT_N_STORE && n->op != KT_ASSIGN)
        return loop;
    for (i = 0; i < n->nkids; i++) {
        const struct kt_node *l = reduction_loop(n->kids[i],
                                                 n->kind == KT_N_LOOP ? n
                                                                      : loop);
        if (l != NULL)
            return l;
    }
    return NULL;
}

/* Whether the reference's innermost loop around the reduction of d's
 * first reduction stage is a reduction loop. */
static int
reference_reduces_innermost(const struct kt_op_def *d)
{
    struct kt_dag *dag = NULL;
    struct kt_looptree *lt = NULL;
    const struct kt_node *l;
    char err[512];
    int r;

    if (kt_op_build(d, &dag, err, sizeof(err)) != KT_OK ||
        kt_lower_reference(dag, &lt, err, sizeof(err)) != KT_OK)
        fail_msg("%s: %s", d->name, err);
    l = reduction_loop(lt->root, NULL);
    assert_non_null(l);
    r = l->reduce;
    kt_looptree_free(lt);
    kt_dag_free(dag);
    return r;
}

/* The reference of a GEMM runs i k j (B[k, j] read along j, not down a
 * column: i j k took 5 s of CPU on 1024^3, past the run deadline under
 * load); where the reduction axis is the contiguous one (dense with
 * weights [out, in], Q K^T) it stays innermost.  The sweeps above check
 * every reference against the interpreter. */
static void
test_codegen_reference_order(void **state)
{
    struct kt_op_def d;
    (void)state;
    assert_int_equal(kt_op_matmul(&d, 64, 48, 32), KT_OK);
    assert_false(reference_reduces_innermost(&d));
    assert_int_equal(kt_op_batch_matmul(&d, 2, 16, 16, 32, 0), KT_OK);
    assert_false(reference_reduces_innermost(&d));
    assert_int_equal(kt_op_batch_matmul(&d, 2, 16, 16, 32, 1), KT_OK);
    assert_true(reference_reduces_innermost(&d));
    assert_int_equal(kt_op_dense(&d, 4, 64, 32, KT_EPI_BIAS), KT_OK);
    assert_true(reference_reduces_innermost(&d));
}

/* Unroll pragmas are clamped to the block budget: a stem conv schedule whose
 * auto-unroll (512) unrolled a 56-statement scalar block 7 times (it took
 * gcc past the build deadline on a loaded machine) keeps that loop rolled;
 * a micro-kernel of lane-by-lane gathers is reported too heavy to build. */
static void
test_codegen_block_size(void **state)
{
    struct kt_conv2d_params p = {1, 3, 224, 224, 64,
                                 7, 7, 2,   2,   3,
                                 3, 1, 1,   1,   KT_EPI_BIAS | KT_EPI_RELU};
    struct kt_op_def d;
    char *src;
    int64_t size;
    (void)state;

    assert_int_equal(kt_op_conv2d(&d, &p), KT_OK);
    size = block_size_of(
        &d,
        "{\"v\":1,\"steps\":[[\"FU\",2,0,2],[\"SP\",1,6,[7]],[\"SP\",1,5,[7]],"
        "[\"SP\",1,4,[3]],[\"SP\",1,3,[2,28,2]],[\"SP\",1,2,[4,7,4]],"
        "[\"SP\",1,1,[2,1,1]],[\"RE\",1,[0,1,5,9,2,6,10,13,15,17,3,7,11,14,16,"
        "18,4,8,12]],"
        "[\"FU\",1,0,2],[\"FU\",0,0,3],[\"AN\",0,0,\"parallel\"],"
        "[\"AN\",0,1,\"vectorize\"],[\"AN\",1,0,\"parallel\"],"
        "[\"AN\",1,17,\"vectorize\"],[\"AN\",1,16,\"unroll\"],[\"PR\",1,0,512],"
        "[\"AN\",2,0,\"parallel\"],[\"AN\",2,2,\"vectorize\"]]}",
        &src);
    assert_null(strstr(src, "#pragma GCC unroll 7"));
    assert_true(size > 0 && size <= 2 * 256);
    free(src);

    assert_int_equal(kt_op_dense(&d, 1, 1024, 2048, 0), KT_OK);
    size =
        block_size_of(&d,
                      "{\"v\":1,\"steps\":[[\"SP\",0,2,[64]],[\"SP\",0,1,[16]],"
                      "[\"RE\",0,[0,1,3,4,2]],[\"AN\",0,3,\"unroll\"],[\"AN\","
                      "0,4,\"vectorize\"]]}",
                      &src);
    assert_true(size > 4 * 256);
    free(src);

    /* A conv 64 -> 64 56x56 whose output channels are vectorized into the
     * output T: 14 reductions scattered lane by lane per FMA (gcc took
     * 8.5 s of CPU on it, 60 s of wall time at load 25) weigh their lanes. */
    p.C = p.K = 64;
    p.H = p.W = 56;
    p.R = p.S = 3;
    p.stride_h = p.stride_w = p.pad_h = p.pad_w = 1;
    p.epilogue = 0;
    assert_int_equal(kt_op_conv2d(&d, &p), KT_OK);
    size = block_size_of(&d, ROOT_CHANNEL_STEPS "]}", &src);
    assert_true(size > 2 * 256);
    free(src);
}

/* The same schedule with a bias + relu consumer: T is then a root
 * intermediate, laid out with the vectorized channels last, so its
 * accumulators are whole vectors (the consumer gathers each element once)
 * and the candidate is far below the code-size bound.  Before, T kept the
 * tensor's order, every FMA scattered 16 lanes, and the search dropped
 * most channel-vector candidates computed at root.  (test_pack checks
 * such kernels against the interpreter.) */
static void
test_codegen_root_channel_layout(void **state)
{
    struct kt_conv2d_params p = {1, 64, 56, 56, 64,
                                 3, 3,  1,  1,  1,
                                 1, 1,  1,  1,  KT_EPI_BIAS | KT_EPI_RELU};
    struct kt_op_def d;
    char *src;
    (void)state;

    assert_int_equal(kt_op_conv2d(&d, &p), KT_OK);
    assert_true(block_size_of(&d,
                              ROOT_CHANNEL_STEPS
                              ",[\"FU\",3,0,2],[\"AN\",3,0,\"parallel\"],"
                              "[\"AN\",3,2,\"vectorize\"]]}",
                              &src) <= 2 * 256);
    assert_non_null(strstr(src, "kt_ld16(&t_T["));
    assert_null(strstr(src, "[l_]")); /* nothing lane by lane */
    free(src);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codegen_dense),
        cmocka_unit_test(test_codegen_matmul),
        cmocka_unit_test(test_codegen_matmul_const_b),
        cmocka_unit_test(test_codegen_batch_matmul),
        cmocka_unit_test(test_codegen_conv2d),
        cmocka_unit_test(test_codegen_conv2d_groups),
        cmocka_unit_test(test_codegen_conv2d_fused),
        cmocka_unit_test(test_codegen_conv2d_winograd),
        cmocka_unit_test(test_codegen_conv2d_transpose),
        cmocka_unit_test(test_codegen_pool),
        cmocka_unit_test(test_codegen_elementwise),
        cmocka_unit_test(test_codegen_transcendental),
        cmocka_unit_test(test_codegen_softmax),
        cmocka_unit_test(test_codegen_strided_shuffle),
        cmocka_unit_test(test_codegen_guarded_vector_read),
        cmocka_unit_test(test_codegen_lane_accumulators),
        cmocka_unit_test(test_codegen_vector_chunks),
        cmocka_unit_test(test_codegen_vector_tail),
        cmocka_unit_test(test_codegen_padded_tile_rows),
        cmocka_unit_test(test_codegen_invariant_divisor),
        cmocka_unit_test(test_codegen_row_fusion),
        cmocka_unit_test(test_codegen_prelude_reductions),
        cmocka_unit_test(test_codegen_register_nest),
        cmocka_unit_test(test_codegen_pinned_operands),
        cmocka_unit_test(test_codegen_block_size),
        cmocka_unit_test(test_codegen_root_channel_layout),
        cmocka_unit_test(test_codegen_reference_order),
        cmocka_unit_test(test_codegen_loop_names_apart),
    };
    if (getenv("KT_TEST_FILTER") != NULL)
        cmocka_set_test_filter(getenv("KT_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
