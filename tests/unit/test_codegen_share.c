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
    char *c = ktt_checked_c(dag, st, 5);
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dw_kernel_rows_expanded_whole),
        cmocka_unit_test(test_dw_kernel_rows_within_code_bound),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
