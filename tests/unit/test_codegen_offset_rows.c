/* test_codegen_offset_rows.c - a vectorized loop reading a local buffer
 * at an offset along its rows (a stride-1 depthwise convolution's column
 * taps, I_pad[r][c + s], over a padded copy 58 wide) takes whole vectors
 * into the rows' padding: 56 output columns are 4 x 16 lanes, not 7 x 8,
 * the lanes past the row reading the copy's padding, its next row or the
 * vector of zeros allocated after its last row (ir/codegen_lanes.c,
 * kt__cg_plan_slack).  Compiled and checked against the interpreter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ktt.h"

/* The form the search found for the suite's dwconv_s1 on an Intel Xeon
 * (a copy of 4 padded input rows per 2 output rows, T in registers
 * across the 3 x 3 window), its output row split [side / rows, rows]. */
#define DW_S1_ROWS                                                             \
    "{\"v\":1,\"steps\":[[\"CHR\",1,1],[\"SP\",3,4,[1,%d]],"                   \
    "[\"SP\",3,3,[%d,%d]],[\"SP\",3,1,[8,1]],"                                 \
    "[\"RE\",3,[0,1,4,5,8,2,6,9,3,7,10]],[\"FU\",3,0,6],[\"SP\",2,7,[1]],"     \
    "[\"SP\",2,6,[3]],[\"SP\",2,4,[1,%d]],[\"SP\",2,3,[%d,%d]],"               \
    "[\"SP\",2,1,[8,1]],"                                                      \
    "[\"RE\",2,[0,1,4,5,8,11,12,14,2,6,9,13,15,3,7,10]],[\"CA\",2,3,2],"       \
    "[\"CI\",1],[\"CA\",0,2,1],[\"AN\",0,4,\"vectorize\"],"                    \
    "[\"AN\",2,15,\"vectorize\"],[\"AN\",2,14,\"unroll\"],"                    \
    "[\"PR\",2,0,512],[\"AN\",3,0,\"parallel\"],[\"AN\",3,5,\"vectorize\"]]}"

static char *
rows_c(struct kt_dag *dag, int side, int rows, int vector_bytes)
{
    struct kt_state *st;
    char json[1024], *c;

    snprintf(json, sizeof(json), DW_S1_ROWS, side, side / rows, rows, side,
             side / rows, rows);
    st = ktt_replay_json(dag, json);
    assert_non_null(st);
    ktt_vector_bytes = vector_bytes;
    c = ktt_checked_c(dag, st, 17);
    ktt_vector_bytes = 0;
    assert_non_null(c);
    kt_state_free(st);
    return c;
}

/* 2 rows of 56 columns: 8 accumulators of 16 lanes (the window's reads at
 * column taps 0-2 run 8 lanes past the row), I_pad's 4 x 64 floats
 * followed by 16 zeros. */
static void
test_offset_rows_whole_vectors(void **state)
{
    struct kt_dag *dag = ktt_depthwise3x3(56, 1);
    char *c = rows_c(dag, 56, 2, 64);
    (void)state;

    assert_non_null(strstr(c, "kt_v16 r7 = "));
    assert_null(strstr(c, "kt_v16 r8 = "));
    assert_null(strstr(c, "kt_v8 r"));
    assert_non_null(strstr(c, "float t_I_pad[272]"));
    assert_non_null(strstr(c, "for (long c = 256; c < 272; c++) t_I_pad[c]"));
    free(c);
    kt_dag_free(dag);
}

/* 8-lane vectors: 56 = 7 x 8 divides, nothing runs past a row, and no
 * buffer gets the slack. */
static void
test_offset_rows_dividing_no_slack(void **state)
{
    struct kt_dag *dag = ktt_depthwise3x3(56, 1);
    char *c = rows_c(dag, 56, 2, 32);
    (void)state;

    assert_non_null(strstr(c, "kt_v8 r13 = "));
    assert_null(strstr(c, "t_I_pad[c] = 0.0f"));
    free(c);
    kt_dag_free(dag);
}

/* 14 columns (rows padded to 16), 7 rows: one vector per row, each tap
 * reading up to 2 lanes into the next row, the last into the slack. */
static void
test_offset_rows_short_rows(void **state)
{
    struct kt_dag *dag = ktt_depthwise3x3(14, 1);
    char *c = rows_c(dag, 14, 7, 64);
    (void)state;

    assert_non_null(strstr(c, "kt_v16 r6 = "));
    assert_null(strstr(c, "kt_v16 r7 = "));
    assert_non_null(strstr(c, "t_I_pad[c] = 0.0f"));
    free(c);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offset_rows_whole_vectors),
        cmocka_unit_test(test_offset_rows_dividing_no_slack),
        cmocka_unit_test(test_offset_rows_short_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
