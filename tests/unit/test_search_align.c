/* test_search_align.c - the align gene (scheduler/search_align.c): the
 * root stages of a Winograd convolution (input transform, product, output
 * transform, and its bias + relu) split among the threads along the tile
 * rows, one outer length in all; the aligned programs compute the
 * reference's result, decode back to aligned genomes, and without the
 * gene the stages split along different axes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/search_int.h"
#include "tests/support/ktt.h"

#define SAMPLES 64
#define TILE_ROWS 2 /* the tile-row axis of every stage of the pipeline */

/* PP-OCRv4 det's 80x80 layer as Winograd F(4, 3) along the rows. */
static struct kt_dag *
wino_dag(int epilogue)
{
    struct kt_conv2d_params p = {1, 96, 80, 80, 24, 3, 3,       1,
                                 1, 1,  1,  1,  1,  1, epilogue};
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    char err[512];

    assert_int_equal(kt_op_conv2d_winograd(&d, &p, 4), KT_OK);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    return dag;
}

/* (the default options: 2 cores, 64-byte vectors) */
static struct kt_search *
new_search(const struct kt_dag *dag, uint64_t seed)
{
    struct kt_search *s = ktt_sketch_search(dag, SAMPLES, seed, -1);

    assert_non_null(s);
    assert_int_equal(s->o.cores, 2);
    return s;
}

/* The axis and outer length the parallel loop of root stage ss splits
 * first: its first part longer than 1 (*len 0 when it has none). */
static int
split_axis(const struct kt_sstage *ss, int64_t *len)
{
    const struct kt_iter *it = &ss->iters[0];
    int q;

    *len = 0;
    if (ss->niters == 0 || it->ann != KT_ANN_PARALLEL)
        return -1;
    for (q = 0; q < it->nparts; q++) {
        int a = it->parts[q].axis;
        int64_t e = ss->part_extent[a][it->parts[q].part];
        if (e > 1) {
            *len = e;
            return a;
        }
    }
    return -1;
}

/* How the parallel root stages of st split: 1 when there are two or more
 * and all split TILE_ROWS by one length, 0 when they differ. */
static int
all_split_rows(const struct kt_state *st, int *nparallel)
{
    int64_t len0 = 0, len;
    int i, same = 1;

    *nparallel = 0;
    for (i = 0; i < st->nstages; i++) {
        const struct kt_sstage *ss = &st->stages[i];
        int a;
        if (ss->inlined || ss->attach_stage >= 0 || ss->naxes < 5)
            continue;
        a = split_axis(ss, &len);
        if (a < 0)
            continue;
        (*nparallel)++;
        if (a != TILE_ROWS || (len0 != 0 && len != len0))
            same = 0;
        len0 = len;
    }
    return same;
}

/* Samples with the gene on and off, built from the same tiles. */
static void
check_alignment(int epilogue)
{
    struct kt_dag *dag = wino_dag(epilogue);
    struct kt_search *s = new_search(dag, 11);
    struct kt_state *keep[4];
    int i, on_built = 0, on_aligned = 0, off_built = 0, off_aligned = 0;
    int nkeep = 0, skipped = 0, np, np_on = 0;

    for (i = 0; i < SAMPLES; i++) {
        struct sk_genome g;
        struct kt_state *on, *off;
        sk_sample(s, &s->rng, &g);
        g.align = 1;
        on = sk_build(s, &g, NULL, 0);
        g.align = 0;
        off = sk_build(s, &g, NULL, 0);
        if (on != NULL) {
            int ok = all_split_rows(on, &np_on);
            on_built++;
            on_aligned += ok && np_on >= 2;
            if (!ok)
                fail_msg("aligned sample %d: its parallel stages split "
                         "different axes",
                         i);
        }
        if (off != NULL) {
            off_built++;
            off_aligned += all_split_rows(off, &np) && np >= 2;
        }
        if (on != NULL && nkeep < 4 && np_on >= 2)
            keep[nkeep++] = on;
        else
            kt_state_free(on);
        kt_state_free(off);
    }
    /* (64 of 64 built and aligned with the gene, 0 of 64 without it) */
    if (on_built < SAMPLES / 2 || on_aligned < on_built * 3 / 4)
        fail_msg("%d of %d samples built with the gene, %d aligned", on_built,
                 SAMPLES, on_aligned);
    /* without it, the stages mostly split along other axes */
    if (off_aligned * 4 > off_built)
        fail_msg("%d of %d samples aligned without the gene", off_aligned,
                 off_built);
    assert_int_equal(ktt_check_many(dag, keep, nkeep, 5, &skipped), 0);
    assert_int_equal(skipped, 0);
    /* an aligned program's steps decode to the gene set */
    for (i = 0; i < nkeep; i++) {
        struct sk_member m;
        char hex[17];
        uint64_t h = 0;
        kt_steps_hash(keep[i]->steps, keep[i]->nsteps, hex);
        kt_hash_parse(hex, &h);
        assert_int_equal(sk_decode(s, keep[i]->steps, keep[i]->nsteps, h, &m),
                         1);
        assert_int_equal(m.g.align, 1);
        kt_state_free(keep[i]);
    }
    kt_search_free(s);
    kt_dag_free(dag);
}

static void
test_align_winograd(void **state)
{
    (void)state;
    check_alignment(0);
}

/* The bias + relu epilogue: the output transform is fused into it and
 * its loops are the ones that split. */
static void
test_align_winograd_epilogue(void **state)
{
    (void)state;
    check_alignment(KT_EPI_BIAS | KT_EPI_RELU);
}

/* A single product has no pipeline: the gene changes nothing. */
static void
test_align_single_stage(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_search *s;
    char err[512];
    int i;
    (void)state;

    assert_int_equal(kt_op_matmul(&d, 256, 256, 256), KT_OK);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    s = new_search(dag, 3);
    for (i = 0; i < 16; i++) {
        struct sk_genome g;
        struct sk_aligned al;
        sk_sample(s, &s->rng, &g);
        g.align = 1;
        assert_int_equal(sk_align(s, &g, &al), 0);
        assert_memory_equal(al.tiles, g.tiles, sizeof(al.tiles));
    }
    kt_search_free(s);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_align_winograd),
        cmocka_unit_test(test_align_winograd_epilogue),
        cmocka_unit_test(test_align_single_stage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
