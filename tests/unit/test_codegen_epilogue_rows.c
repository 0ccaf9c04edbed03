/* test_codegen_epilogue_rows.c - the vector chunks of a depthwise
 * convolution's bias + ReLU, copied out of its register tile's padded
 * rows into the output's rows (KT_CG_LANES_MASKED, ir/codegen_lanes.c).
 * A 56-wide row, which 8 lanes divide and 16 do not, runs as 3 x 16 lanes
 * and a 16-lane store masked to its last 8 (it ran 7 x 8 lanes, 1.4x
 * slower on the Zen 5); a 28-wide row keeps 16 + 8 + 4 lanes (a masked
 * 16 there ran 0.93x); with 8-lane vectors both keep their narrow chunks.
 * Every form is checked against the interpreter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ktt.h"

/* The tuned form of MobileNet-V2's 56 x 56 depthwise convolution (its
 * stored best on the Zen 5): a 4 x side register tile in T, its bias +
 * ReLU after it, each row a vectorized loop of side into O. */
#define DW_ROWS_TILE                                                           \
    "{\"v\":1,\"steps\":[[\"CHR\",1,1],[\"CI\",0],[\"SP\",3,4,[1,%d]],"        \
    "[\"SP\",3,3,[1,4]],[\"SP\",3,1,[1,1]],"                                   \
    "[\"RE\",3,[0,1,4,5,8,2,6,9,3,7,10]],[\"FU\",3,0,2],[\"SP\",2,7,[1]],"     \
    "[\"SP\",2,6,[3]],[\"SP\",2,4,[1,%d]],[\"SP\",2,3,[1,4]],"                 \
    "[\"SP\",2,1,[1,1]],"                                                      \
    "[\"RE\",2,[0,1,4,5,8,11,12,14,2,6,9,13,15,3,7,10]],[\"CA\",2,3,6],"       \
    "[\"CI\",1],[\"AN\",2,15,\"vectorize\"],[\"AN\",2,14,\"unroll\"],"         \
    "[\"PR\",2,0,64],[\"AN\",3,0,\"parallel\"],[\"AN\",3,9,\"vectorize\"]]}"

/* The C of that form for side x side images, generated for vector_bytes
 * and checked against the interpreter; caller frees. */
static char *
dw_rows_c(int side, int vector_bytes)
{
    struct kt_dag *dag = ktt_depthwise3x3(side, 1);
    struct kt_state *st;
    char json[1024], *c;

    snprintf(json, sizeof(json), DW_ROWS_TILE, side, side);
    st = ktt_replay_json(dag, json);
    assert_non_null(st);
    c = ktt_checked_c_at(dag, st, vector_bytes, 7);
    assert_non_null(c);
    kt_state_free(st);
    kt_dag_free(dag);
    return c;
}

static void
test_dw56_rows_whole_vectors_masked_tail(void **state)
{
    char *c = dw_rows_c(56, 64);
    (void)state;

    assert_int_equal(ktt_count(c, "kt_st16(&t_O["), 1);
    assert_int_equal(ktt_count(c, "x2_l10 < 48; x2_l10 += 16"), 1);
    assert_int_equal(ktt_count(c, "kt_stm16(&t_O["), 1);
    assert_int_equal(ktt_count(c, ", 0xffu);"), 1);
    assert_int_equal(ktt_count(c, "kt_st8(&t_O["), 0);
    assert_int_equal(ktt_count(c, "kt_ld8(&t_T["), 0);
    free(c);
}

static void
test_dw28_rows_keep_narrow_tail(void **state)
{
    char *c = dw_rows_c(28, 64);
    (void)state;

    assert_int_equal(ktt_count(c, "kt_stm16(&t_O["), 0);
    assert_int_equal(ktt_count(c, "kt_st16(&t_O["), 1);
    assert_int_equal(ktt_count(c, "kt_st8(&t_O["), 1);
    assert_int_equal(ktt_count(c, "kt_st4(&t_O["), 1);
    free(c);
}

static void
test_dw56_rows_narrow_vectors_unmasked(void **state)
{
    char *c = dw_rows_c(56, 32);
    (void)state;

    assert_int_equal(ktt_count(c, "kt_stm"), 0);
    assert_true(ktt_count(c, "kt_st8(&t_O[") >= 1);
    free(c);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dw56_rows_whole_vectors_masked_tail),
        cmocka_unit_test(test_dw28_rows_keep_narrow_tail),
        cmocka_unit_test(test_dw56_rows_narrow_vectors_unmasked),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
