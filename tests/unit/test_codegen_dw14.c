/* test_codegen_dw14.c - the tuned form of a 14 x 14 depthwise
 * convolution, reading its input in place (the padding masked).  A
 * vectorized copy into an argument's rows that narrow chunks would end in
 * scalars (an extent no 4 lanes divide) runs whole 16-lane vectors and
 * masks its last store to the lanes inside (KT_CG_LANES_MASKED,
 * ir/codegen_lanes.c): the bias + ReLU out of the padded tile, one masked
 * store a row where it took 8 + 4 + 1 + 1 lanes; with narrower vectors
 * (no one-instruction masked stores) the chunks stay as they were.  The
 * kernel rows' window loop (ir/codegen_window.c) is unrolled over any
 * tile of rows (by gcc, or expanded whole, ir/codegen_kernel.c), its masked reads weighed without their checks
 * (ir/codegen_size.c), and tiles of up to 14 rows stay within the
 * search's code-size bound.  Every form is checked against the
 * interpreter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ktt.h"

/* The tuned form of the 14 x 14 depthwise convolution of 576 channels
 * (its stored best on the Zen 5, over 16 channels here): a register
 * tile of rows x 14 columns in T, its bias + ReLU fused after it, each
 * row a vectorized loop of 14 into O. */
#define DW14_TILE                                                              \
    "{\"v\":1,\"steps\":[[\"CHR\",1,1],[\"CI\",0],[\"SP\",3,4,[1,14]],"        \
    "[\"SP\",3,3,[1,%d]],[\"SP\",3,1,[8,1]],"                                  \
    "[\"RE\",3,[0,1,4,5,8,2,6,9,3,7,10]],[\"FU\",3,0,2],[\"SP\",2,7,[1]],"     \
    "[\"SP\",2,6,[3]],[\"SP\",2,4,[1,1,14]],[\"SP\",2,3,[1,1,%d]],"            \
    "[\"SP\",2,1,[8,1,1]],"                                                    \
    "[\"RE\",2,[0,1,5,6,10,2,7,11,14,15,17,3,8,12,16,18,4,9,13]],"             \
    "[\"CA\",2,3,6],[\"CI\",1],[\"AN\",2,18,\"vectorize\"],"                   \
    "[\"AN\",2,17,\"unroll\"],[\"PR\",2,0,64],[\"AN\",3,0,\"parallel\"],"      \
    "[\"AN\",3,9,\"vectorize\"]]}"

/* The tuned form of the 14 x 14 depthwise convolution with tiles of
 * rows rows, replayed on dag; caller frees. */
static struct kt_state *
dw14_state(struct kt_dag *dag, int rows)
{
    struct kt_state *st;
    char json[1024];

    snprintf(json, sizeof(json), DW14_TILE, rows, rows);
    st = ktt_replay_json(dag, json);
    assert_non_null(st);
    return st;
}

/* The C of the 14 x 14 depthwise convolution's tuned form with rows of
 * tile rows, generated for vector_bytes and checked against the
 * interpreter; caller frees. */
static char *
dw14_c(int rows, int vector_bytes)
{
    struct kt_dag *dag = ktt_depthwise3x3(14, 1);
    struct kt_state *st = dw14_state(dag, rows);
    char *c;

    ktt_vector_bytes = vector_bytes;
    c = ktt_checked_c(dag, st, 5);
    ktt_vector_bytes = 0;
    assert_non_null(c);
    kt_state_free(st);
    kt_dag_free(dag);
    return c;
}

/* With 16-lane vectors each 14-wide output row is one store masked to
 * its 14 lanes, its reads of T's padded rows whole vectors; no scalar
 * store into O is left.  The r loop is unrolled for tiles of 2, 7 and 14
 * rows. */
static void
test_dw14_masked_rows_window_unrolled(void **state)
{
    static const int rows[] = {2, 7, 14};
    unsigned i;
    (void)state;

    for (i = 0; i < KT_ARRAY_LEN(rows); i++) {
        char *c = dw14_c(rows[i], 64);
        assert_int_equal(ktt_count(c, "kt_stm16(&t_O["), 1);
        assert_int_equal(ktt_count(c, ", 0x3fffu);"), 1);
        assert_int_equal(ktt_count(c, "kt_st8(&t_O["), 0);
        assert_int_equal(ktt_count(c, "kt_st4(&t_O["), 0);
        assert_null(strstr(c, "        t_O["));
        /* r, over the tile's rows: unrolled by gcc, or expanded whole
         * with the input rows it shares read once (ir/codegen_pin.c);
         * s stays a loop */
        if (ktt_count(c, "kt_v16 g") == 0)
            assert_int_equal(ktt_count(c, "#pragma GCC unroll 3\n"), 1);
        else
            assert_int_equal(ktt_count(c, "#pragma GCC unroll 3\n"), 0);
        free(c);
    }
}

/* Tiles of 2, 7 and 14 rows reading the input in place weigh within the
 * search's code-size bound: each guarded contiguous read is a vector load
 * and its masked edge (2 x its checks), where weighed at every lane (16 x
 * its checks) the tiles of 7 and 14 rows went over it and the search never
 * measured them. */
static void
test_dw14_rows_within_code_bound(void **state)
{
    static const int rows[] = {2, 7, 14};
    unsigned i;
    (void)state;

    for (i = 0; i < KT_ARRAY_LEN(rows); i++) {
        struct kt_dag *dag = ktt_depthwise3x3(14, 1);
        struct kt_state *st = dw14_state(dag, rows[i]);
        int64_t bound, total;

        total = ktt_code_weight(st, 64, &bound);
        if (total < 0 || total > bound)
            fail_msg("%d rows weigh %lld against the bound %lld", rows[i],
                     (long long)total, (long long)bound);
        kt_state_free(st);
        kt_dag_free(dag);
    }
}

/* With 8-lane vectors (AVX2: a masked store is no single instruction)
 * the rows keep their chunks of 8, 4 and single lanes. */
static void
test_dw14_masked_needs_wide_vectors(void **state)
{
    char *c = dw14_c(2, 32);
    (void)state;

    assert_int_equal(ktt_count(c, "kt_stm"), 0);
    assert_true(ktt_count(c, "kt_st8(&t_O[") >= 1);
    assert_true(ktt_count(c, "kt_st4(&t_O[") >= 1);
    free(c);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dw14_masked_rows_window_unrolled),
        cmocka_unit_test(test_dw14_masked_needs_wide_vectors),
        cmocka_unit_test(test_dw14_rows_within_code_bound),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
