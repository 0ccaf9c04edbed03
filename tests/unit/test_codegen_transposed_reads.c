/* test_codegen_transposed_reads.c - a nest whose store reads one buffer
 * across its rows: the form the search found for MobileNet-V2's 3x3
 * stride-2 stem, its register tile computed with the output channels
 * along the lanes (T[y, x, k]) and stored back to NCHW with the pixels
 * along them (O[k, y, x] = max(T[y, x, k] + B[k], 0)).  That read is
 * W x W blocks loaded along k and transposed in registers, not W scalar
 * loads per vector (ir/codegen_transpose.c); the channels past the last
 * whole block and the pixels past the last whole vector are emitted as
 * before.  Every form is compiled and checked against the interpreter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "tests/support/ktt.h"

/* The stem's schedule over a conv of 3 -> k channels, side x side ->
 * out x out (stride 2, pad 1, bias + relu): each parallel step a pair of
 * output rows; T[2, out, k] per step, its register tile 2 rows x 4
 * columns x all k channels, the window inside; the epilogue's loops k, y,
 * x with x vectorized. */
#define STEM                                                                   \
    "{\"v\":1,\"steps\":[[\"CHR\",1,1],[\"CI\",0],[\"SP\",3,3,[%d]],"          \
    "[\"SP\",3,2,[2]],[\"SP\",3,1,[%d]],[\"RE\",3,[0,1,3,5,2,4,6]],"           \
    "[\"FU\",3,0,3],[\"SP\",2,6,[3]],[\"SP\",2,5,[1]],[\"SP\",2,4,[3]],"       \
    "[\"SP\",2,3,[%d,1,4]],[\"SP\",2,2,[1,1,2]],[\"SP\",2,1,[1,1,%d]],"        \
    "[\"RE\",2,[0,1,5,9,2,6,10,13,15,17,3,7,11,14,16,18,8,12,4]],"             \
    "[\"AN\",2,15,\"unroll\"],[\"CA\",2,3,1],[\"CA\",1,2,8],[\"LR\",1],"       \
    "[\"AN\",1,3,\"vectorize\"],[\"AN\",2,18,\"vectorize\"],"                  \
    "[\"AN\",2,17,\"unroll\"],[\"AN\",2,16,\"unroll\"],"                       \
    "[\"AN\",3,0,\"parallel\"],[\"AN\",3,4,\"vectorize\"]]}"

/* The checked C of the stem's schedule for vector_bytes-wide vectors
 * over a conv of 3 -> k channels at side x side; caller frees. */
static char *
stem_c(int64_t side, int64_t k, int vector_bytes)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_state *st;
    int64_t out = side / 2;
    char json[1536], err[256], *c;

    assert_int_equal(ktt_conv_def(&d, 3, side, k, 3, 2, 1, 1, 1,
                                  KT_EPI_BIAS | KT_EPI_RELU),
                     KT_OK);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("kt_op_build: %s", err);
    snprintf(json, sizeof(json), STEM, (int)out, (int)k, (int)(out / 4),
             (int)k);
    st = ktt_replay_json(dag, json);
    assert_non_null(st);
    c = ktt_checked_c_at(dag, st, vector_bytes, 17);
    assert_non_null(c);
    kt_state_free(st);
    kt_dag_free(dag);
    return c;
}

/* 32 channels, 16 x 16 outputs: two blocks of 16 channels by one vector
 * of 16 pixels per row, each 16 loads and 4 rounds of 16 shuffles, then
 * 16 stores; no vector of T built lane by lane. */
static void
test_transposed_reads_whole_blocks(void **state)
{
    char *c = stem_c(32, 32, 64);
    (void)state;

    assert_int_equal(ktt_count(c, "kt_v16 x0_"), 16);
    assert_int_equal(ktt_count(c, "kt_v16 x4_"), 16);
    assert_null(strstr(c, "kt_v16 x5_"));
    assert_int_equal(ktt_count(c, "kt_st16(&t_O["), 16);
    assert_null(strstr(c, "(kt_v16){t_T["));
    /* the k-th row of the block stored with B[k] */
    assert_non_null(strstr(c, "(x4_15 + kt_bc16(t_B["));
    free(c);
}

/* 40 channels, 20 x 20 outputs: the 8 channels past the two whole blocks
 * are emitted as before (the vector of 16 pixels built from T's elements)
 * and the 4 pixels past each row's whole vector as its tail, for each of
 * the block's 16 channels. */
static void
test_transposed_reads_edges(void **state)
{
    char *c = stem_c(40, 40, 64);
    (void)state;

    assert_int_equal(ktt_count(c, "kt_v16 x4_"), 16);
    /* the block's 16 channels' tails, and the one of the loop over the
     * last 8 channels */
    assert_int_equal(ktt_count(c, "kt_st4(&t_O["), 17);
    assert_int_equal(ktt_count(c, "(kt_v16){t_T["), 1);
    free(c);
}

/* 8-lane vectors (AVX2): blocks of 8 x 8, 3 rounds of shuffles, four
 * blocks of channels by two vectors of pixels per row. */
static void
test_transposed_reads_8_lanes(void **state)
{
    char *c = stem_c(32, 32, 32);
    (void)state;

    assert_int_equal(ktt_count(c, "kt_v8 x0_"), 8);
    assert_int_equal(ktt_count(c, "kt_v8 x3_"), 8);
    assert_null(strstr(c, "kt_v8 x4_"));
    assert_int_equal(ktt_count(c, "kt_st8(&t_O["), 8);
    assert_null(strstr(c, "(kt_v8){t_T["));
    free(c);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transposed_reads_whole_blocks),
        cmocka_unit_test(test_transposed_reads_edges),
        cmocka_unit_test(test_transposed_reads_8_lanes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
