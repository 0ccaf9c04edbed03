/* test_features.c - feature extraction on
 * hand-built loop trees (a tiled, vectorized, unrolled, parallel GEMM with
 * a local accumulator, init store and relu epilogue). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "costmodel/costmodel.h"
#include "tests/unit/cm_trees.h"

static const struct tb_gemm gemm512 = {512, 512, 512, 8, 32, 4, 0, 1, 1, 1};

/* Checks that row[i] is the scaled (or one-hot) value of raw. */
#define EXPECT_F(row, i, raw)                                                  \
    assert_float_equal((row)[(i)],                                             \
                       kt_feature_is_onehot(i) ? (float)(raw)                  \
                                               : kt_feature_scale(raw),        \
                       1e-4)

/* The same for offset i of a buffer block b. */
#define EXPECT_B(b, i, raw)                                                    \
    assert_float_equal((b)[(i)],                                               \
                       kt_feature_is_onehot(KT_F_BUF0 + (i))                   \
                           ? (float)(raw)                                      \
                           : kt_feature_scale(raw),                            \
                       1e-4)

/* Block k of the per-buffer features of row r. */
#define BLK(r, k) ((r) + KT_F_BUF0 + (k)*KT_F_BUF_LEN)

static void
test_features_gemm_update_store(void **state)
{
    struct kt_looptree *lt = tb_gemm_tree(&gemm512);
    float *rows = NULL;
    const float *r, *b;
    char err[256] = "";
    int n = -1;
    double outer = 512.0 * 512 * 512;

    (void)state;
    assert_int_equal(kt_features_extract(lt, &rows, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 3);    /* init, update, epilogue */
    r = rows + KT_FEATURE_LEN; /* the update store */

    /* Arithmetic: C += A*B is one mad per iteration of the whole nest. */
    EXPECT_F(r, KT_F_FLOAT_MAD, outer);
    EXPECT_F(r, KT_F_FLOAT_MUL, 0);
    EXPECT_F(r, KT_F_FLOAT_ADDSUB, 0);
    EXPECT_F(r, KT_F_OUTER_PROD, outer);
    EXPECT_F(r, KT_F_NUM_LOOPS, 6);
    EXPECT_F(r, KT_F_REDUCE_PROD, 512);
    EXPECT_F(r, KT_F_STORE_REDUCE, 1);
    EXPECT_F(r, KT_F_INNER_EXTENT, 32);

    /* Vectorize: the 32-wide tile column, innermost spatial. */
    EXPECT_F(r, KT_F_VEC_NUM + KT_FA_NUM, 1);
    EXPECT_F(r, KT_F_VEC_NUM + KT_FA_LEN, 32);
    EXPECT_F(r, KT_F_VEC_NUM + KT_FA_PROD, 32);
    EXPECT_F(r, KT_F_VEC_NUM + KT_FA_POS_INNER_SPATIAL, 1);
    EXPECT_F(r, KT_F_VEC_NUM + KT_FA_POS_NONE, 0);
    /* Unroll: ki (inner reduce) and ii (middle spatial): mixed. */
    EXPECT_F(r, KT_F_UNROLL_NUM + KT_FA_NUM, 2);
    EXPECT_F(r, KT_F_UNROLL_NUM + KT_FA_PROD, 32);
    EXPECT_F(r, KT_F_UNROLL_NUM + KT_FA_LEN, 8);
    EXPECT_F(r, KT_F_UNROLL_NUM + KT_FA_POS_MIXED, 1);
    /* Parallel: io, 64 iterations, outermost spatial. */
    EXPECT_F(r, KT_F_PARALLEL_NUM + KT_FA_NUM, 1);
    EXPECT_F(r, KT_F_PARALLEL_NUM + KT_FA_LEN, 64);
    EXPECT_F(r, KT_F_PARALLEL_NUM + KT_FA_POS_OUTER_SPATIAL, 1);

    /* Buffers sorted by lines: B and C.local tie at outer/16 lines (unit
     * stride, 16 floats per line), B first by buffer order; A has
     * outer/32 lines; bias and D are not touched by this store. */
    b = BLK(r, 0);
    EXPECT_B(b, KT_FB_READ, 1);
    EXPECT_B(b, KT_FB_BYTES, outer * 4);
    EXPECT_B(b, KT_FB_UNIQUE_BYTES, 512.0 * 512 * 4);
    EXPECT_B(b, KT_FB_LINES, outer / 16);
    EXPECT_B(b, KT_FB_UNIQUE_LINES, 512.0 * 512 * 4 / 64);
    EXPECT_B(b, KT_FB_STRIDE, 1);
    /* B does not depend on the ii loop: reused across its 8 iterations,
     * at a distance of one ji sweep (32 iterations) that touches 32
     * floats of C.local, one of A and 32 of B. */
    EXPECT_B(b, KT_FB_REUSE_LOOP, 1);
    EXPECT_B(b, KT_FB_REUSE_CT, 8);
    EXPECT_B(b, KT_FB_REUSE_DIS_ITER, 32);
    EXPECT_B(b, KT_FB_REUSE_DIS_BYTES, (32 + 1 + 32) * 4);
    EXPECT_B(b, KT_FB_BYTES_D_REUSE, outer * 4 / 8);
    EXPECT_B(b, KT_FB_IS_LOCAL, 0);

    b = BLK(r, 1);
    EXPECT_B(b, KT_FB_READWRITE, 1);
    EXPECT_B(b, KT_FB_IS_LOCAL, 1);
    EXPECT_B(b, KT_FB_UNIQUE_BYTES, 8 * 32 * 4);
    EXPECT_B(b, KT_FB_REUSE_LOOP, 1);
    EXPECT_B(b, KT_FB_REUSE_CT, 4); /* ki */
    EXPECT_B(b, KT_FB_REUSE_DIS_ITER, 8 * 32);

    b = BLK(r, 2);
    EXPECT_B(b, KT_FB_READ, 1);
    EXPECT_B(b, KT_FB_LINES, outer / 32);
    EXPECT_B(b, KT_FB_STRIDE, 0);
    EXPECT_B(b, KT_FB_REUSE_CT, 32); /* ji, innermost */
    EXPECT_B(b, KT_FB_REUSE_DIS_ITER, 1);
    EXPECT_B(b, KT_FB_REUSE_DIS_BYTES, 3 * 4);
    b = BLK(r, 3);
    EXPECT_B(b, KT_FB_BYTES, 0);
    EXPECT_B(b, KT_FB_READ, 0);

    /* Allocation of C.local: 1 KiB, allocated once per (io, jo). */
    EXPECT_F(r, KT_F_ALLOC_SIZE, 1024);
    EXPECT_F(r, KT_F_ALLOC_OUTER_PROD, 64 * 16);
    EXPECT_F(r, KT_F_ALLOC_PROD, 1024.0 * 64 * 16);
    EXPECT_F(r, KT_F_ALLOC_INNER_PROD, outer / (64 * 16));
    free(rows);
    tb_free(lt);
}

static void
test_features_gemm_init_and_epilogue(void **state)
{
    struct kt_looptree *lt = tb_gemm_tree(&gemm512);
    float *rows = NULL;
    const float *r, *b;
    char err[256] = "";
    int n = -1;
    double outer = 512.0 * 512;

    (void)state;
    assert_int_equal(kt_features_extract(lt, &rows, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 3);
    r = rows; /* init: C.local = 0 */
    EXPECT_F(r, KT_F_STORE_INIT, 1);
    EXPECT_F(r, KT_F_STORE_REDUCE, 0);
    EXPECT_F(r, KT_F_FLOAT_ADDSUB, 0);
    EXPECT_F(r, KT_F_OUTER_PROD, outer);
    EXPECT_F(r, KT_F_BUF0 + KT_FB_WRITE, 1);
    /* C.local is the (io, jo) tile: reused across jo. */
    EXPECT_F(r, KT_F_BUF0 + KT_FB_REUSE_LOOP, 1);
    EXPECT_F(r, KT_F_BUF0 + KT_FB_REUSE_CT, 16);
    EXPECT_F(r, KT_F_PARALLEL_NUM + KT_FA_LEN, 64);

    r = rows + 2 * KT_FEATURE_LEN; /* D = relu(C.local + bias) */
    EXPECT_F(r, KT_F_FLOAT_ADDSUB, outer);
    EXPECT_F(r, KT_F_FLOAT_CMP, outer);
    EXPECT_F(r, KT_F_FLOAT_MAD, 0);
    EXPECT_F(r, KT_F_STORE_INIT, 0);
    /* A kernel argument is not allocated by the kernel. */
    EXPECT_F(r, KT_F_ALLOC_SIZE, 0);
    /* D, C.local and bias are all unit stride in ji: outer/16 lines
     * each and equal bytes, so buffer order decides: bias, D, C.local. */
    b = BLK(r, 0);
    EXPECT_B(b, KT_FB_READ, 1);
    EXPECT_B(b, KT_FB_LINES, outer / 16);
    EXPECT_B(b, KT_FB_UNIQUE_BYTES, 512 * 4);
    EXPECT_B(b, KT_FB_REUSE_LOOP, 1);
    EXPECT_B(b, KT_FB_REUSE_CT, 8); /* bias is invariant in ii */
    b = BLK(r, 1);
    EXPECT_B(b, KT_FB_WRITE, 1);
    EXPECT_B(b, KT_FB_LINES, outer / 16);
    EXPECT_B(b, KT_FB_UNIQUE_BYTES, outer * 4);
    EXPECT_B(b, KT_FB_REUSE_NONE, 1);
    EXPECT_B(b, KT_FB_BYTES_D_REUSE, outer * 4);
    b = BLK(r, 2);
    EXPECT_B(b, KT_FB_READ, 1);
    EXPECT_B(b, KT_FB_IS_LOCAL, 1);
    free(rows);
    tb_free(lt);
}

/* The fused parallel loop goes through lets: the region and strides must
 * come out as in the unfused tree. */
/* for i in 0..100: { X[i] = A[i]; X[i] += B[2*i] }: X is written twice in
 * the i loop (serial reuse); B has stride 2. */
static void
test_features_serial_reuse_and_stride(void **state)
{
    struct kt_looptree *lt = tb_new(1);
    struct kt_node *l, *s;
    struct kt_expr *e;
    float *rows = NULL;
    const float *r;
    int n = 0, X, A, B;

    (void)state;
    A = tb_buf(lt, "A", KT_BUF_ARG, 1, 100, 0);
    B = tb_buf(lt, "B", KT_BUF_ARG, 1, 200, 0);
    X = tb_buf(lt, "X", KT_BUF_HEAP, 1, 100, 0);
    lt->root = tb_node(NULL, KT_N_SEQ);
    l = tb_loop(lt->root, 0, 100, KT_ANN_NONE, 0);
    e = tb_load(A, 1);
    tb_aff(&e->idx[0], 0, 1, 0, I64(1));
    s = tb_store(l, X, 1, KT_ASSIGN, e);
    tb_aff(&s->idx[0], 0, 1, 0, I64(1));
    e = tb_load(B, 1);
    tb_aff(&e->idx[0], 0, 1, 0, I64(2));
    s = tb_store(l, X, 1, KT_SUM, e);
    tb_aff(&s->idx[0], 0, 1, 0, I64(1));
    assert_int_equal(kt_features_extract(lt, &rows, &n, NULL, 0), 0);
    assert_int_equal(n, 2);
    r = rows + KT_FEATURE_LEN;
    EXPECT_F(r, KT_F_FLOAT_ADDSUB, 100);
    /* B: 100 accesses of stride 2 -> 100 * 8/64 lines; X: 100/16. */
    EXPECT_B(BLK(r, 0), KT_FB_STRIDE, 2);
    EXPECT_B(BLK(r, 0), KT_FB_LINES, 100.0 * 8 / 64);
    EXPECT_B(BLK(r, 0), KT_FB_UNIQUE_BYTES, 199 * 4);
    EXPECT_B(BLK(r, 0), KT_FB_REUSE_NONE, 1);
    EXPECT_B(BLK(r, 1), KT_FB_READWRITE, 1);
    EXPECT_B(BLK(r, 1), KT_FB_REUSE_SERIAL, 1);
    EXPECT_B(BLK(r, 1), KT_FB_REUSE_CT, 1);
    /* A heap intermediate is allocated once per call. */
    EXPECT_F(r, KT_F_ALLOC_SIZE, 400);
    EXPECT_F(r, KT_F_ALLOC_OUTER_PROD, 1);
    EXPECT_F(r, KT_F_ALLOC_INNER_PROD, 100);
    free(rows);
    tb_free(lt);
}

static void
test_features_fused_lets(void **state)
{
    struct tb_gemm g = gemm512;
    struct kt_looptree *lt, *lt2;
    float *rows = NULL, *rows2 = NULL;
    char err[256] = "";
    int n = 0, n2 = 0, i, b;

    (void)state;
    g.fuse = 1;
    lt = tb_gemm_tree(&g);
    lt2 = tb_gemm_tree(&gemm512);
    assert_int_equal(kt_features_extract(lt, &rows, &n, err, sizeof(err)), 0);
    assert_int_equal(kt_features_extract(lt2, &rows2, &n2, err, sizeof(err)),
                     0);
    assert_int_equal(n, 3);
    EXPECT_F(rows + KT_FEATURE_LEN, KT_F_PARALLEL_NUM + KT_FA_LEN, 64 * 16);
    EXPECT_F(rows + KT_FEATURE_LEN, KT_F_NUM_LOOPS, 5);
    /* Same work, same buffers and footprints. */
    for (i = 0; i < n * KT_FEATURE_LEN; i++) {
        int f = i % KT_FEATURE_LEN;
        if (f >= KT_F_BUF0 && f < KT_F_AI_CURVE) {
            b = (f - KT_F_BUF0) % KT_F_BUF_LEN;
            if (b == KT_FB_BYTES || b == KT_FB_UNIQUE_BYTES ||
                b == KT_FB_LINES || b == KT_FB_STRIDE || b <= KT_FB_READWRITE)
                assert_float_equal(rows[i], rows2[i], 1e-4);
        }
        if (f == KT_F_FLOAT_MAD || f == KT_F_OUTER_PROD || f == KT_F_ALLOC_SIZE)
            assert_float_equal(rows[i], rows2[i], 1e-4);
    }
    free(rows);
    free(rows2);
    tb_free(lt);
    tb_free(lt2);
}

static void
test_features_deterministic_and_finite(void **state)
{
    struct tb_gemm g = {256, 384, 128, 4, 16, 8, 1, 1, 0, 1};
    struct kt_looptree *lt = tb_gemm_tree(&g);
    float *r1 = NULL, *r2 = NULL;
    char err[256] = "";
    int n1 = 0, n2 = 0, i;

    (void)state;
    assert_int_equal(kt_features_extract(lt, &r1, &n1, err, sizeof(err)), 0);
    assert_int_equal(kt_features_extract(lt, &r2, &n2, err, sizeof(err)), 0);
    assert_int_equal(n1, n2);
    assert_memory_equal(r1, r2, (size_t)n1 * KT_FEATURE_LEN * sizeof(float));
    for (i = 0; i < n1 * KT_FEATURE_LEN; i++) {
        assert_true(isfinite(r1[i]));
        assert_true(r1[i] >= 0);
    }
    /* Arithmetic-intensity curve is non-decreasing for the update. */
    for (i = 1; i < 10; i++)
        assert_true(r1[KT_FEATURE_LEN + KT_F_AI_CURVE + i] + 1e-5 >=
                    r1[KT_FEATURE_LEN + KT_F_AI_CURVE + i - 1]);
    assert_true(r1[KT_FEATURE_LEN + KT_F_AI_CURVE + 9] > 0);
    free(r1);
    free(r2);
    tb_free(lt);
}

static void
test_features_bad_trees(void **state)
{
    struct kt_looptree *lt = tb_gemm_tree(&gemm512);
    struct kt_node *upd;
    float *rows = (float *)1;
    char err[256] = "";
    int n = 7, save;

    (void)state;
    /* root -> io -> jo -> alloc -> ko -> ki -> ii -> ji -> store */
    upd = lt->root->kids[0]->kids[0]->kids[0]->kids[1];
    upd = upd->kids[0]->kids[0]->kids[0]->kids[0];
    assert_int_equal(upd->kind, KT_N_STORE);
    upd->stage = 3;
    save = upd->expr->a->src;
    upd->expr->a->src = 99;
    assert_int_equal(kt_features_extract(lt, &rows, &n, err, sizeof(err)),
                     KT_EINVAL);
    assert_null(rows);
    assert_int_equal(n, 0);
    assert_non_null(strstr(err, "stage 3"));
    assert_non_null(strstr(err, "buffer 99"));
    upd->expr->a->src = save;

    /* An index variable no loop or let defines. */
    upd->expr->b->idx[1].var[1] = 12;
    assert_int_equal(kt_features_extract(lt, &rows, &n, err, sizeof(err)),
                     KT_EINVAL);
    assert_non_null(strstr(err, "buffer B"));
    assert_non_null(strstr(err, "variable 12"));
    upd->expr->b->idx[1].var[1] = 7;

    /* Rank mismatch. */
    upd->ndim = 1;
    assert_int_equal(kt_features_extract(lt, &rows, &n, err, sizeof(err)),
                     KT_EINVAL);
    assert_non_null(strstr(err, "C.local"));
    upd->ndim = 2;
    assert_int_equal(kt_features_extract(lt, &rows, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 3);
    free(rows);
    tb_free(lt);
}

static void
test_features_empty_tree_and_names(void **state)
{
    struct kt_looptree *lt = tb_new(1);
    float *rows = (float *)1;
    char name[64];
    int n = 5, i, onehot = 0;

    (void)state;
    lt->root = tb_node(NULL, KT_N_SEQ);
    assert_int_equal(kt_features_extract(lt, &rows, &n, NULL, 0), 0);
    assert_int_equal(n, 0);
    assert_null(rows);
    tb_free(lt);

    assert_int_equal(KT_FEATURE_LEN, 173);
    kt_feature_name(KT_F_BUF0 + 2 * KT_F_BUF_LEN + KT_FB_REUSE_DIS_BYTES, name,
                    sizeof(name));
    assert_string_equal(name, "B2.reuse_dis_bytes");
    kt_feature_name(KT_F_PARALLEL_NUM + KT_FA_POS_MIXED, name, sizeof(name));
    assert_string_equal(name, "parallel_type.mixed");
    kt_feature_name(KT_F_REDUCE_PROD, name, sizeof(name));
    assert_string_equal(name, "reduce_prod");
    kt_feature_name(KT_F_VEC_LANE_REDUCE, name, sizeof(name));
    assert_string_equal(name, "vec_lane_reduce");
    kt_feature_name(KT_F_PREPACKED_BYTES, name, sizeof(name));
    assert_string_equal(name, "prepacked_bytes");
    kt_feature_name(KT_F_BUF0 + 4 * KT_F_BUF_LEN + KT_FB_THREAD_BYTES, name,
                    sizeof(name));
    assert_string_equal(name, "B4.thread_bytes");
    kt_feature_name(KT_F_BUF0 + KT_FB_SERIAL_STRIDE, name, sizeof(name));
    assert_string_equal(name, "B0.serial_stride");
    kt_feature_name(KT_F_SERIAL_BODY, name, sizeof(name));
    assert_string_equal(name, "serial_body");
    kt_feature_name(KT_F_SERIAL_BODY + 1, name, sizeof(name));
    assert_string_equal(name, "invalid");
    for (i = 0; i < KT_FEATURE_LEN; i++)
        onehot += kt_feature_is_onehot(i);
    assert_int_equal(onehot, 3 * 8 + 5 * 7 + 4);
    assert_float_equal(kt_feature_scale(7), 3.0f, 1e-6);
}

/* Version 3: the innermost serial loop (the one left in the generated C
 * once unrolled and vectorized loops are straight-line code), the bytes
 * one of two threads touches, and the arithmetic-intensity curve sampled
 * in log(ops), on the GEMM's update C.local += A * B (loops io 64
 * parallel, jo 16, ko 128, ki 4 unroll, ii 8 unroll, ji 32 vectorize). */
static void
test_features_serial_loop_and_threads(void **state)
{
    static const struct tb_gemm fused = {512, 512, 512, 8, 32, 4, 1, 1, 1, 1};
    const struct tb_gemm *g[2] = {&gemm512, &fused};
    double ai1 = 2.0 / 12, ai32 = 64.0 / ((32 + 1 + 32) * 4), t;
    float *rows = NULL;
    const float *r;
    char err[256] = "";
    int n = -1, k;

    (void)state;
    for (k = 0; k < 2; k++) {
        struct kt_looptree *lt = tb_gemm_tree(g[k]);
        assert_int_equal(kt_features_extract(lt, &rows, &n, err, sizeof(err)),
                         0);
        r = rows + KT_FEATURE_LEN;
        /* ko is the innermost serial loop: ki x ii x ji = 4 x 8 x 32
         * iterations of straight-line code per step. */
        EXPECT_F(r, KT_F_SERIAL_BODY, 4 * 8 * 32);
        /* One step of ko moves B by tk rows (4 x 512 floats) and A by tk
         * columns; C.local does not move. */
        EXPECT_B(BLK(r, 0), KT_FB_SERIAL_STRIDE, 4 * 512);
        EXPECT_B(BLK(r, 1), KT_FB_SERIAL_STRIDE, 0);
        EXPECT_B(BLK(r, 2), KT_FB_SERIAL_STRIDE, 4);
        /* The first half of the parallel loop (io, or the fused io x jo
         * whose outer part is io) covers half of A's rows and all of B;
         * C.local is one 8 x 32 tile. */
        EXPECT_B(BLK(r, 0), KT_FB_THREAD_BYTES, 512.0 * 512 * 4);
        EXPECT_B(BLK(r, 1), KT_FB_THREAD_BYTES, 8 * 32 * 4);
        EXPECT_B(BLK(r, 2), KT_FB_THREAD_BYTES, 256.0 * 512 * 4);
        /* The nest runs 2^28 flops from 2 in one iteration: the first
         * sample sits at 2^3.7 flops, between the innermost level (one
         * iteration, 3 floats) and ji's (64 flops on 32 + 1 + 32 floats),
         * 2.7 / 5 of the way in log(ops).  A linear axis put it at 10% of
         * all flops, between the outer loops. */
        t = 2.7 / 5;
        EXPECT_F(r, KT_F_AI_CURVE, ai1 + t * (ai32 - ai1));
        free(rows);
        tb_free(lt);
    }
    /* Without a parallel loop no thread's share is computed. */
    {
        static const struct tb_gemm serial = {512, 512, 512, 8, 32,
                                              4,   0,   1,   1, 0};
        struct kt_looptree *lt = tb_gemm_tree(&serial);
        assert_int_equal(kt_features_extract(lt, &rows, &n, err, sizeof(err)),
                         0);
        EXPECT_B(BLK(rows + KT_FEATURE_LEN, 0), KT_FB_THREAD_BYTES, 0);
        free(rows);
        tb_free(lt);
    }
}

/* The update row of "def" lowered with the schedule "json" (one row per
 * store: init, update). */
static float *
update_row(const char *def, const struct kt_shape *sh, int nsh,
           const char *json, int row)
{
    struct kt_dag *dag = NULL;
    struct kt_state *st = NULL;
    struct kt_looptree *lt = NULL;
    struct kt_step *steps = NULL;
    float *rows = NULL, *r;
    char err[256];
    int n = 0, nrows = 0;

    if (kt_dag_parse(def, sh, nsh, &dag, err, sizeof(err)) != KT_OK ||
        kt_steps_from_json(json, &steps, &n, err, sizeof(err)) != KT_OK ||
        kt_state_replay(dag, steps, n, &st, err, sizeof(err)) != KT_OK ||
        kt_lower(st, &lt, err, sizeof(err)) != KT_OK)
        fail_msg("%s: %s", def, err);
    assert_int_equal(kt_features_extract(lt, &rows, &nrows, err, sizeof(err)),
                     0);
    assert_true(row < nrows);
    r = malloc(KT_FEATURE_LEN * sizeof(float));
    memcpy(r, rows + (size_t)row * KT_FEATURE_LEN,
           KT_FEATURE_LEN * sizeof(float));
    free(rows);
    free(steps);
    kt_looptree_free(lt);
    kt_state_free(st);
    kt_dag_free(dag);
    return r;
}

/* Group 7 sees how the vectorized loop reads: shuffled stride-2 loads,
 * lane-by-lane gathers, and lane accumulators of a vectorized reduction. */
static void
test_features_vector_access(void **state)
{
    struct kt_shape sh[2] = {{"A", 2, {8, 256}}, {"B", 1, {256}}};
    struct kt_shape sh2[2] = {{"A", 2, {8, 256}}, {"O", 2, {8, 128}}};
    float *r;

    (void)state;
    r = update_row("O[i] += A[i,k] * B[k]", sh, 2,
                   "{\"v\":1,\"steps\":[[\"AN\",0,1,\"vectorize\"]]}", 1);
    EXPECT_F(r, KT_F_VEC_LANE_REDUCE, 1);
    EXPECT_F(r, KT_F_VEC_GATHER, 0);
    EXPECT_F(r, KT_F_VEC_SHUFFLE, 0);
    free(r);
    r = update_row("O[i] += A[k,i] * B[k]",
                   (struct kt_shape[]){{"A", 2, {256, 8}}, {"B", 1, {256}}}, 2,
                   "{\"v\":1,\"steps\":[[\"AN\",0,1,\"vectorize\"]]}", 1);
    EXPECT_F(r, KT_F_VEC_LANE_REDUCE, 1);
    EXPECT_F(r, KT_F_VEC_GATHER, 8 * 256);
    free(r);
    r = update_row("O[i,j] = A[i,2*j]", sh2, 2,
                   "{\"v\":1,\"steps\":[[\"AN\",0,1,\"vectorize\"]]}", 0);
    EXPECT_F(r, KT_F_VEC_SHUFFLE, 8 * 128);
    EXPECT_F(r, KT_F_VEC_LANE_REDUCE, 0);
    free(r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_features_gemm_update_store),
        cmocka_unit_test(test_features_gemm_init_and_epilogue),
        cmocka_unit_test(test_features_serial_reuse_and_stride),
        cmocka_unit_test(test_features_fused_lets),
        cmocka_unit_test(test_features_deterministic_and_finite),
        cmocka_unit_test(test_features_bad_trees),
        cmocka_unit_test(test_features_empty_tree_and_names),
        cmocka_unit_test(test_features_vector_access),
        cmocka_unit_test(test_features_serial_loop_and_threads),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
