/* test_codegen_share.c - a micro-kernel loop whose iterations read the
 * same guarded vectors is expanded whole, each of those reads made once
 * (ir/codegen_kernel.c, ir/codegen_pin.c).  The tuned form of a stride-1
 * depthwise convolution (a tile of 8 output rows x 16 columns, its kernel
 * rows r a window loop over the tile, the column taps s expanded) reads
 * input rows 0..9 of the tile, 3 taps each: 30 distinct vectors for 72
 * FMAs.  Every form is checked against the interpreter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ktt.h"

/* The search's best for a 112 x 112 depthwise convolution on a Zen 4,
 * its splits scaled to 32 x 32: 8 x 16 tiles, r outside s and the rows. */
#define DW_ROWS_TILE                                                           \
    "{\"v\":1,\"steps\":[[\"CHR\",1,1],[\"CI\",0],[\"SP\",3,4,[2,16]],"        \
    "[\"SP\",3,3,[4,8]],[\"SP\",3,1,[1,1]],"                                   \
    "[\"RE\",3,[0,1,4,5,8,2,6,9,3,7,10]],[\"FU\",3,0,2],[\"SP\",2,7,[3]],"     \
    "[\"SP\",2,6,[1]],[\"SP\",2,4,[2,16]],[\"SP\",2,3,[4,8]],"                 \
    "[\"SP\",2,1,[1,1]],"                                                      \
    "[\"RE\",2,[0,1,4,5,8,11,12,14,2,6,9,13,15,3,7,10]],"                      \
    "[\"AN\",2,12,\"unroll\"],[\"CA\",2,3,6],[\"CA\",1,2,1],"                  \
    "[\"AN\",1,4,\"vectorize\"],[\"AN\",2,15,\"vectorize\"],"                  \
    "[\"AN\",2,14,\"unroll\"],[\"PR\",2,0,64],[\"AN\",3,0,\"parallel\"],"      \
    "[\"AN\",3,9,\"vectorize\"]]}"

static struct kt_state *
rows_state(struct kt_dag *dag)
{
    struct kt_state *st = ktt_replay_json(dag, DW_ROWS_TILE);
    assert_non_null(st);
    return st;
}

/* The kernel rows are expanded whole: no loop over them is left, the
 * input rows read by 2 or 3 output rows (rows 1..8, 3 taps each) are
 * declared once each, and rows 0 and 9 (one output row each) are read in
 * place.  Before, r was a loop whose body read 24 vectors per row of the
 * kernel: 72 reads. */
static void
test_dw_kernel_rows_expanded_whole(void **state)
{
    struct kt_dag *dag = ktt_depthwise3x3(32, 1);
    struct kt_state *st = rows_state(dag);
    char *c = ktt_checked_c_at(dag, st, 64, 5);
    (void)state;

    assert_non_null(c);
    assert_int_equal(ktt_count(c, "kt_v16 g"), 24);
    assert_int_equal(ktt_count(c, "#pragma GCC unroll 3\n"), 0);
    /* the 8 accumulators start at 0 and are stored once each */
    assert_int_equal(ktt_count(c, " += (g"), 72 - 6);
    free(c);
    kt_state_free(st);
    kt_dag_free(dag);
}

/* So expanded, the tile weighs within the search's code-size bound, as a
 * window loop unrolled by gcc did (its reads weighed without their
 * checks, ir/codegen_size.c): the search keeps measuring it. */
static void
test_dw_kernel_rows_within_code_bound(void **state)
{
    struct kt_dag *dag = ktt_depthwise3x3(32, 1);
    struct kt_state *st = rows_state(dag);
    int64_t bound, total;
    (void)state;

    total = ktt_code_weight(st, 64, &bound);
    if (total < 0 || total > bound)
        fail_msg("the tile weighs %lld against the bound %lld",
                 (long long)total, (long long)bound);
    kt_state_free(st);
    kt_dag_free(dag);
}

/* The size pass expands unrolled kernel loops to count their shared
 * reads; the lets under such a loop (a fused loop's y and x) must not
 * keep the constants of its last iteration when the loop is then emitted
 * as a loop: a max pooling's copy out of its local tile read one element
 * for all 49 (found by the `make test-long` sweep). */
static void
test_lets_not_left_constant(void **state)
{
    static const char json[] =
        "{\"v\":1,\"steps\":[[\"CHR\",1,1],[\"CHW\",2],"
        "[\"SP\",3,3,[1,1]],[\"SP\",3,2,[7,1]],[\"SP\",3,1,[2]],"
        "[\"SP\",3,0,[1]],[\"RE\",3,[0,8,7,9,5,4,1,6,3,2]],"
        "[\"FU\",3,0,8],[\"SP\",2,5,[1]],[\"SP\",2,4,[3,1]],"
        "[\"SP\",2,2,[7]],[\"SP\",2,1,[1,1]],[\"SP\",2,0,[1]],"
        "[\"RE\",2,[12,4,7,2,3,0,6,8,11,1,10,5,9]],[\"CA\",1,2,9],"
        "[\"CA\",0,1,3],[\"AN\",0,3,\"vectorize\"],"
        "[\"AN\",1,3,\"vectorize\"],[\"AN\",1,1,\"unroll\"],"
        "[\"AN\",2,12,\"vectorize\"],[\"AN\",2,11,\"unroll\"],"
        "[\"AN\",2,10,\"unroll\"],[\"AN\",3,2,\"vectorize\"],"
        "[\"PR\",3,0,512]]}";
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_state *st;
    char err[256], *c;
    (void)state;

    assert_int_equal(kt_op_pool2d(&d, 1, 1, 8, 14, 14, 3, 2, 1), KT_OK);
    assert_int_equal(kt_op_build(&d, &dag, err, sizeof(err)), KT_OK);
    st = ktt_replay_json(dag, json);
    assert_non_null(st);
    c = ktt_checked_c(dag, st, 7);
    assert_non_null(c);
    free(c);
    kt_state_free(st);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dw_kernel_rows_expanded_whole),
        cmocka_unit_test(test_dw_kernel_rows_within_code_bound),
        cmocka_unit_test(test_lets_not_left_constant),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
