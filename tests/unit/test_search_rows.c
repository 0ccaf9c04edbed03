/* test_search_rows.c - how the search counts the vector registers of a
 * register tile whose rows are a local buffer's padded rows
 * (scheduler/search_grade.c, tile_row_vectors): a 14 x 14 depthwise
 * convolution's tile, fused into its bias + ReLU, holds a 14-wide row in
 * one 16-lane vector (kt_vector_chunks_padded), not the 8 + 4 + 1 + 1
 * lanes of a row as it is.  Counted so, its tile of all 14 rows is a full
 * one and 2 rows a loose one; counted the other way round, the searches
 * settled on 2 rows, half as fast as 14 on the Zen 5
 * (docs/performance.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "scheduler/search_int.h"
#include "tests/support/ktt.h"

/* Axes of the depthwise convolution's stages: n g f y x (c r s). */
enum { AXIS_Y = 3, AXIS_X = 4 };

/* Of 4096 samples of the 14 x 14 depthwise convolution whose register
 * tile is fused into the epilogue and holds whole 14-wide rows of one
 * channel: how many tiles of 2 rows (*n2) and of 14 rows (*n14), the
 * first graded loose (*loose2), the second not spilling (*fit14). */
static void
grade_dw14_rows(int *loose2, int *n2, int *fit14, int *n14)
{
    struct kt_dag *dag = ktt_depthwise3x3(14, 1);
    struct kt_search *s = ktt_avx512_search(dag);
    struct kt_rng r;
    int n;

    *loose2 = *n2 = *fit14 = *n14 = 0;
    kt_rng_seed(&r, 17);
    for (n = 0; n < 4096; n++) {
        struct sk_genome g;
        const struct sk_sketch *sk;
        const struct sk_plan *p;
        int nS, l, a, whole = 1;
        sk_sample(s, &r, &g);
        sk = &s->sk[g.sketch];
        if (sk->nslots == 0)
            continue;
        p = &sk->plan[sk->slot_stage[0]];
        nS = sk_nparts(p, 0);
        if (p->partner < 0 || g.tiles[0][AXIS_X][nS - 1] != 14)
            continue;
        for (l = p->level; l < nS - 1; l++)
            whole &= g.tiles[0][AXIS_X][l] == 1;
        for (a = 0; a < AXIS_Y; a++) /* one channel: rows x 14 alone */
            whole &= g.tiles[0][a][nS - 1] == 1;
        if (!whole)
            continue;
        if (g.tiles[0][AXIS_Y][nS - 1] == 2) {
            (*n2)++;
            *loose2 += sk_grade_tile(s, &g, 0) == SK_TILE_LOOSE;
        } else if (g.tiles[0][AXIS_Y][nS - 1] == 14) {
            (*n14)++;
            *fit14 += sk_grade_tile(s, &g, 0) > SK_TILE_SPILLING;
        }
    }
    kt_search_free(s);
    kt_dag_free(dag);
}

/* 14 accumulators (one vector a row) do not spill and 2 are a loose
 * tile, so the samples hold 14 rows far more often than 2: 262 and 21 of
 * these (the rows as they are: 0 and 417, 14 rows counted 56 vectors). */
static void
test_search_rows_padded_row_one_vector(void **state)
{
    int loose2, n2, fit14, n14;
    (void)state;

    grade_dw14_rows(&loose2, &n2, &fit14, &n14);
    if (n14 == 0 || n14 < 4 * n2)
        fail_msg("%d samples of 14 rows, %d of 2", n14, n2);
    if (loose2 != n2 || fit14 != n14)
        fail_msg("2 rows loose in %d of %d samples, 14 rows fit in %d of %d",
                 loose2, n2, fit14, n14);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_rows_padded_row_one_vector),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
