/* test_codegen_window.c - window loops (ir/codegen_window.c): a reduction
 * loop at or above a micro-kernel's kernel loop whose iterations read
 * vectors the kernel's expanded body reads at other positions is unrolled
 * by pragma (a depthwise conv's r loop over a tile of output rows); loops
 * whose iterations read new vectors are not (its s loop, one element
 * apart under whole vectors; a GEMM's k loops), nor are loops over a
 * vector the body's copies share already (a dense conv's input row, read
 * once for all the output channels of its tile).  Every schedule is compiled and
 * checked against the interpreter.  The cost model's features count
 * window loops as unrolled. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel/costmodel.h"
#include "tests/support/ktt.h"

static struct kt_dag *
built(const struct kt_op_def *d)
{
    struct kt_dag *dag = NULL;
    char err[512];

    if (kt_op_build(d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    return dag;
}

/* A depthwise 3x3 conv of 8 channels over 16 x 16 (stride 1 or 2, pad 1):
 * O[n,g,f,y,x] += I_pad[n,g,c,y*S+r,x*S+s] * W[g,f,c,r,s] is stage 1
 * (its padding stage 0); axes n g f y x c r s. */
static struct kt_dag *
depthwise(int stride)
{
    struct kt_conv2d_params p = {1,      8, 16, 16, 8, 3, 3, stride,
                                 stride, 1, 1,  1,  1, 8, 0};
    struct kt_op_def d;

    assert_int_equal(kt_op_conv2d(&d, &p), KT_OK);
    return built(&d);
}

/* The 64^3 matmul O[i,j] += A[i,k] * B[k,j] (stage 0). */
static struct kt_dag *
matmul(void)
{
    struct kt_op_def d;

    assert_int_equal(kt_op_matmul(&d, 64, 64, 64), KT_OK);
    return built(&d);
}

/* 4 output rows (unrolled) x a whole row (vectorized) under the r and s
 * loops: n g f y0 x0 c r s y1 x1. */
#define DW_ROWS                                                                \
    "{\"v\":1,\"steps\":[[\"SP\",1,3,[4]],[\"SP\",1,5,[%d]],"                  \
    "[\"RE\",1,[0,1,2,3,5,7,8,9,4,6]],[\"AN\",1,8,\"unroll\"],"                \
    "[\"AN\",1,9,\"vectorize\"]]}"

/* A 4 x 32 tile over k split 8 x 8 (both loops above the tile): i0 j0 k0
 * k1 i1 j1. */
#define GEMM_SPLIT_K                                                           \
    "{\"v\":1,\"steps\":[[\"SP\",0,0,[4]],[\"SP\",0,2,[32]],"                  \
    "[\"SP\",0,4,[8]],[\"RE\",0,[0,2,4,5,1,3]],[\"AN\",0,4,\"unroll\"],"       \
    "[\"AN\",0,5,\"vectorize\"]]}"

static struct kt_state *
replay(const struct kt_dag *dag, const char *json)
{
    struct kt_state *st = ktt_replay_json(dag, json);

    assert_non_null(st);
    return st;
}

/* The candidate's C (checked against the interpreter); caller frees. */
static char *
candidate_c(const struct kt_dag *dag, struct kt_state *st)
{
    char *c = ktt_checked_c(dag, st, 7);

    assert_non_null(c);
    return c;
}

/* How many loops of the given extent follow an unroll pragma in c. */
static int
unrolled_loops(const char *c, long extent)
{
    const char *p = c;
    char want[32];
    int n = 0;

    snprintf(want, sizeof(want), " < %ld; ", extent);
    while ((p = strstr(p, "#pragma GCC unroll")) != NULL) {
        const char *line = strchr(p, '\n'), *end;
        if (line == NULL)
            break;
        end = strchr(line + 1, '\n');
        if (end != NULL && strstr(line, "for (long ") != NULL &&
            strstr(line, want) != NULL && strstr(line, want) < end)
            n++;
        p = line;
    }
    return n;
}

/* Strides 1 and 2: r is a window (input row y*S + r: row 1 of output row
 * 0 is row 0 of output row 1 at stride 1, row 2 at stride 2), s is not
 * (columns one element apart, read as whole-row vectors). */
static void
test_codegen_window_depthwise_rows(void **state)
{
    static const int strides[] = {1, 2};
    unsigned i;
    (void)state;

    for (i = 0; i < KT_ARRAY_LEN(strides); i++) {
        struct kt_dag *dag = depthwise(strides[i]);
        struct kt_state *st;
        char json[512], *c;
        snprintf(json, sizeof(json), DW_ROWS, 16 / strides[i]);
        st = replay(dag, json);
        c = candidate_c(dag, st);
        /* r: one pragma on a 3-iteration loop; s stays a plain loop */
        assert_int_equal(unrolled_loops(c, 3), 1);
        assert_true(strstr(c, "#pragma GCC unroll 3\n") != NULL);
        free(c);
        kt_state_free(st);
        kt_dag_free(dag);
    }
}

/* With the rows not unrolled (one output row per kernel body), nothing
 * repeats: no window. */
static void
test_codegen_window_needs_expanded_rows(void **state)
{
    struct kt_dag *dag = depthwise(1);
    struct kt_state *st =
        replay(dag,
               "{\"v\":1,\"steps\":[[\"SP\",1,4,[16]],"
               "[\"RE\",1,[0,1,2,3,4,6,7,8,5]],[\"AN\",1,8,\"vectorize\"]]}");
    char *c = candidate_c(dag, st);
    (void)state;

    assert_int_equal(unrolled_loops(c, 3), 0);
    free(c);
    kt_state_free(st);
    kt_dag_free(dag);
}

/* A dense conv's tile of 4 output channels x 2 rows x 16 columns reads
 * each input row once for the 4 channels: its r loop is no window.
 * Axes n f y x c r s; loops n f0 y0 x0 c r s f1 y1 x1. */
static void
test_codegen_window_shared_load_is_none(void **state)
{
    struct kt_conv2d_params p = {1, 8, 16, 16, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0};
    struct kt_op_def d;
    struct kt_dag *dag;
    struct kt_state *st;
    char *c;
    (void)state;

    assert_int_equal(kt_op_conv2d(&d, &p), KT_OK);
    dag = built(&d);
    st = replay(dag, "{\"v\":1,\"steps\":[[\"SP\",1,1,[4]],"
                     "[\"SP\",1,3,[2]],[\"SP\",1,5,[16]],"
                     "[\"RE\",1,[0,1,3,5,7,8,9,2,4,6]],"
                     "[\"AN\",1,7,\"unroll\"],[\"AN\",1,8,\"unroll\"],"
                     "[\"AN\",1,9,\"vectorize\"]]}");
    c = candidate_c(dag, st);
    assert_int_equal(unrolled_loops(c, 3), 0);
    free(c);
    kt_state_free(st);
    kt_dag_free(dag);
}

/* A GEMM's k loops read new elements of A and B in every iteration. */
static void
test_codegen_window_gemm_k_is_none(void **state)
{
    struct kt_dag *dag = matmul();
    struct kt_state *st = replay(dag, GEMM_SPLIT_K);
    char *c = candidate_c(dag, st);
    (void)state;

    assert_int_equal(unrolled_loops(c, 8), 0);
    free(c);
    kt_state_free(st);
    kt_dag_free(dag);
}

/* The cost model sees the window loop as unrolled: the conv's update
 * store has two unrolled loops (the 4 rows and r), 12 iterations. */
static void
test_codegen_window_in_features(void **state)
{
    struct kt_dag *dag = depthwise(1);
    struct kt_state *st;
    struct kt_looptree *lt = NULL;
    float *rows = NULL;
    char json[512], err[512];
    int n = 0, i, found = 0;
    (void)state;

    snprintf(json, sizeof(json), DW_ROWS, 16);
    st = replay(dag, json);
    assert_int_equal(kt_lower(st, &lt, err, sizeof(err)), KT_OK);
    assert_int_equal(kt_features_extract(lt, &rows, &n, err, sizeof(err)), 0);
    for (i = 0; i < n; i++) {
        const float *r = rows + (size_t)i * KT_FEATURE_LEN;
        if (r[KT_F_STORE_REDUCE] == 0)
            continue;
        assert_float_equal(r[KT_F_UNROLL_NUM + KT_FA_NUM], kt_feature_scale(2),
                           1e-4);
        assert_float_equal(r[KT_F_UNROLL_NUM + KT_FA_PROD],
                           kt_feature_scale(12), 1e-4);
        found++;
    }
    assert_int_equal(found, 1);
    free(rows);
    kt_looptree_free(lt);
    kt_state_free(st);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codegen_window_depthwise_rows),
        cmocka_unit_test(test_codegen_window_needs_expanded_rows),
        cmocka_unit_test(test_codegen_window_shared_load_is_none),
        cmocka_unit_test(test_codegen_window_gemm_k_is_none),
        cmocka_unit_test(test_codegen_window_in_features),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
