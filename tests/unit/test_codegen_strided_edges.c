/* test_codegen_strided_edges.c - a strided read of padding (a stride-2
 * depthwise convolution's inlined padding) at the target's vector width:
 * its edge vectors are masked loads merged by shuffles instead of a loop
 * over the lanes, and a register tile along a 28-wide output row whose
 * local rows are padded to 32 takes two 16-lane vectors, the lanes past
 * the row reading padding (ir/codegen_lanes.c, ir/codegen_load.c).  Every
 * form is compiled and checked against the interpreter; the tight input
 * (its last row ends the buffer) makes a load past the padding's edge
 * visible to ASan and valgrind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ktt.h"

/* The form the search found for the suite's dwconv_s2 (W packed, the
 * padding inlined, T in a local tile per block of 8 channels, the
 * epilogue after it) over out x out outputs, its register tile rows x
 * cols over output rows x columns (the last y and x splits). */
#define DW_S2_TILE                                                             \
    "{\"v\":1,\"steps\":[[\"CHR\",1,1],[\"CI\",0],[\"SP\",3,4,[%d]],"          \
    "[\"SP\",3,3,[%d]],[\"SP\",3,1,[8]],[\"RE\",3,[0,1,3,4,6,2,5,7]],"         \
    "[\"FU\",3,0,5],[\"SP\",2,7,[1]],[\"SP\",2,6,[1]],"                        \
    "[\"SP\",2,4,[%d,1,%d]],[\"SP\",2,3,[%d,1,%d]],[\"SP\",2,1,[8,1,1]],"      \
    "[\"RE\",2,[0,1,5,6,10,2,7,11,14,15,17,3,8,12,16,18,4,9,13]],"             \
    "[\"CA\",2,3,0],[\"CA\",1,2,7],[\"AN\",1,4,\"vectorize\"],"                \
    "[\"AN\",2,18,\"vectorize\"],[\"AN\",2,17,\"unroll\"],"                    \
    "[\"PR\",2,0,64],[\"AN\",3,0,\"parallel\"],[\"AN\",3,3,\"vectorize\"]]}"

/* The checked C of the tile, generated for 16-lane vectors; caller frees. */
static char *
tile_c(struct kt_dag *dag, int out, int rows, int cols)
{
    struct kt_state *st;
    char json[1024], *c;

    snprintf(json, sizeof(json), DW_S2_TILE, out, out, out / cols, cols,
             out / rows, rows);
    st = ktt_replay_json(dag, json);
    assert_non_null(st);
    c = ktt_checked_c_at(dag, st, 64, 13);
    assert_non_null(c);
    kt_state_free(st);
    return c;
}

/* Whole 28-wide rows: 7 rows x 2 vectors of 16 lanes in registers (not 7
 * x 7 of 4), the input read as two loads and a shuffle, masked at the
 * edges, no lane loop. */
static void
test_strided_edges_whole_rows(void **state)
{
    struct kt_dag *dag = ktt_depthwise3x3(56, 2);
    char *c = tile_c(dag, 28, 7, 28);
    (void)state;

    assert_non_null(strstr(c, "kt_v16 r13 = "));
    assert_null(strstr(c, "kt_v16 r14 = "));
    assert_null(strstr(c, "kt_v4 r"));
    assert_non_null(strstr(c, "__builtin_shufflevector(kt_ldm16(&t_I["));
    assert_null(strstr(c, "gl_"));
    /* each read's columns are checked: its masked loads alone, no check
     * of the whole vector choosing unmasked ones */
    assert_null(strstr(c, "? __builtin_shufflevector("));
    free(c);
    kt_dag_free(dag);
}

/* Stride 1, 7 whole 56-wide rows of 4 vectors read in place: contiguous
 * reads keep their checks (alone, masked loads ran 0.87x-1.0x on
 * stride-1 kernels): each of the 14 masked loads, at the first and the
 * last vector of a row, is the edge form behind a check of the whole
 * vector. */
static void
test_strided_edges_contiguous_keep_checks(void **state)
{
    struct kt_dag *dag = ktt_depthwise3x3(56, 1);
    char *c = tile_c(dag, 56, 7, 56);
    (void)state;

    assert_int_equal(ktt_count(c, "kt_ldm16(&t_I["), 14);
    assert_int_equal(ktt_count(c, " : kt_ldm16(&t_I["), 14);
    free(c);
    kt_dag_free(dag);
}

/* 14 output columns (28 x 28 -> 14 x 14): local rows longer than half a
 * vector are padded to a whole one (ir/codegen_lanes.c), so the tile of
 * 7 rows is 7 vectors of 16 lanes, not 14 scalars each. */
static void
test_strided_edges_half_vector_rows(void **state)
{
    struct kt_dag *dag = ktt_depthwise3x3(28, 2);
    char *c = tile_c(dag, 14, 7, 14);
    (void)state;

    assert_non_null(strstr(c, "kt_v16 r6 = "));
    assert_null(strstr(c, "kt_v16 r7 = "));
    assert_non_null(strstr(c, "__builtin_shufflevector(kt_ldm16(&t_I["));
    assert_null(strstr(c, "gl_"));
    free(c);
    kt_dag_free(dag);
}

/* A width dividing the row (4 lanes): the edges keep the loop over the
 * lanes (with masked loads the 4-lane form of the suite's kernel ran 7%
 * slower), and nothing runs into the padding. */
static void
test_strided_edges_narrow_keeps_loop(void **state)
{
    struct kt_dag *dag = ktt_depthwise3x3(56, 2);
    char *c = tile_c(dag, 28, 14, 4);
    (void)state;

    assert_non_null(strstr(c, "kt_v4 r13 = "));
    assert_null(strstr(c, "kt_ldm4(&t_I["));
    assert_non_null(strstr(c, "gl_"));
    free(c);
    kt_dag_free(dag);
}

/* The whole-row tile stays within the search's code-size bound (each
 * masked read weighs its loads twice, not 16 checked lanes). */
static void
test_strided_edges_size(void **state)
{
    struct kt_dag *dag = ktt_depthwise3x3(56, 2);
    struct kt_state *st;
    char json[1024];
    (void)state;

    snprintf(json, sizeof(json), DW_S2_TILE, 28, 28, 1, 28, 4, 7);
    st = ktt_replay_json(dag, json);
    assert_non_null(st);
    assert_true(ktt_within_code_bound(st, 64));
    kt_state_free(st);
    kt_dag_free(dag);
}

/* Distinct occurrences of "kt_ldm16(&t_I[<address>]" in c. */
static int
distinct_input_loads(const char *c)
{
    char seen[64][160];
    const char *at = c;
    int n = 0, i;

    while ((at = strstr(at, "kt_ldm16(&t_I[")) != NULL) {
        const char *end = strchr(at, ']');
        size_t len = (size_t)(end - at);
        assert_non_null(end);
        assert_true(len < sizeof(seen[0]));
        for (i = 0; i < n; i++)
            if (strlen(seen[i]) == len && memcmp(seen[i], at, len) == 0)
                break;
        if (i == n) {
            assert_true(n < 64);
            memcpy(seen[n], at, len);
            seen[n++][len] = '\0';
        }
        at = end;
    }
    return n;
}

/* The column taps unrolled inside the row loop (the search's whole-window
 * reduction unroll, scheduler/search_build.c) over a 4 x 28 tile of
 * 16-lane vectors: every tap reads the blocks of 32 input columns the
 * row's vectors start at, tap 0 their even lanes, tap 1 the odd ones and
 * tap 2 the even ones moved on by one lane, so each output row reads 6
 * distinct vectors of input per kernel row (the second vector's last
 * block is past the row: all padding), not 12 (2 loads for each of 3
 * taps of 2 vectors), and the input rows two output rows share are read
 * once. */
static void
test_strided_edges_shared_taps(void **state)
{
    static const char json[] =
        "{\"v\":1,\"steps\":[[\"CHR\",1,1],[\"CI\",0],"
        "[\"SP\",3,4,[1,28]],[\"SP\",3,3,[7,4]],[\"SP\",3,1,[2,1]],"
        "[\"RE\",3,[0,1,4,5,8,2,6,9,3,7,10]],[\"FU\",3,0,2],"
        "[\"SP\",2,7,[3]],[\"SP\",2,6,[3]],[\"SP\",2,4,[1,28]],"
        "[\"SP\",2,3,[7,4]],[\"SP\",2,1,[2,1]],"
        "[\"RE\",2,[0,1,4,5,8,11,12,14,2,6,9,13,15,3,7,10]],"
        "[\"CA\",2,3,6],[\"CA\",1,2,7],[\"AN\",1,4,\"vectorize\"],"
        "[\"AN\",2,15,\"vectorize\"],[\"AN\",2,14,\"unroll\"],"
        "[\"AN\",2,12,\"unroll\"],[\"AN\",3,0,\"parallel\"],"
        "[\"AN\",3,9,\"vectorize\"]]}";
    struct kt_dag *dag = ktt_depthwise3x3(56, 2);
    struct kt_state *st = ktt_replay_json(dag, json);
    char *c;
    (void)state;

    assert_non_null(st);
    /* within the search's code-size bound (512): a shared tap weighs its
     * shuffles, not its loads (weighed as unshared reads: 839) */
    assert_true(ktt_within_code_bound(st, 64));
    c = ktt_checked_c_at(dag, st, 64, 17);
    assert_non_null(c);
    assert_non_null(strstr(c, ", 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, "
                              "23, 25, 27, 29, 31)"));
    assert_non_null(strstr(c, ", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, "
                              "13, 14, 15, 16)"));
    assert_null(strstr(c, "12, 14, 17, 19"));
    /* the kernel rows expanded whole (ir/codegen_kernel.c): the 4 output
     * rows read input rows 0..8 at stride 2, 6 distinct vectors each (a
     * loop over the kernel rows made 3 x 4 x 6) */
    assert_int_equal(distinct_input_loads(c), 9 * 6);
    free(c);
    kt_state_free(st);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strided_edges_whole_rows),
        cmocka_unit_test(test_strided_edges_half_vector_rows),
        cmocka_unit_test(test_strided_edges_contiguous_keep_checks),
        cmocka_unit_test(test_strided_edges_narrow_keeps_loop),
        cmocka_unit_test(test_strided_edges_size),
        cmocka_unit_test(test_strided_edges_shared_taps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
