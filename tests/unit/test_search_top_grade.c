/* test_search_top_grade.c - register-blocked samples try long enough to
 * find a top-grade tile where the shape makes one rare: a depthwise 3x3
 * convolution of 576 channels at 14 x 14 (MobileNet-V2) reading its
 * padding in place (its fast tunings end on one: the whole 14 x 14
 * output in the register tile with the window inside).  With 64 tries 76
 * of 2,078 such samples had one, with 256 252 of 2,009
 * (scheduler/search_init.c, SK_TILE_TRIES; docs/search.md).  Some of them
 * compute what the reference does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scheduler/search_int.h"
#include "tests/support/ktt.h"

#define SAMPLES 4000
#define CHECKED 4

static int
inlines_padding(const struct kt_search *s, const struct sk_genome *g)
{
    return s->sk[g->sketch].plan[0].role == SK_INLINED;
}

static void
test_search_depthwise_top_grade_samples(void **state)
{
    struct kt_conv2d_params p = {1, 576, 14, 14,  576,
                                 3, 3,   1,  1,   1,
                                 1, 1,   1,  576, KT_EPI_BIAS | KT_EPI_RELU};
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_search *s;
    struct kt_state *found[CHECKED];
    struct kt_rng r;
    char err[512];
    int i, inlined = 0, top = 0, nfound = 0, skipped = 0;

    (void)state;
    assert_int_equal(kt_op_conv2d(&d, &p), KT_OK);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s: %s", d.name, err);
    s = ktt_sketch_search(dag, 256, 1, -1);
    assert_non_null(s);
    kt_rng_seed(&r, 11);
    for (i = 0; i < SAMPLES; i++) {
        struct sk_genome g;
        sk_sample(s, &r, &g);
        if (!inlines_padding(s, &g) || s->sk[g.sketch].nslots == 0)
            continue;
        inlined++;
        if (sk_grade_tile(s, &g, 0) != SK_TILE_REUSING)
            continue;
        top++;
        if (nfound < CHECKED &&
            (found[nfound] = sk_build(s, &g, NULL, 0)) != NULL)
            nfound++;
    }
    if (inlined < SAMPLES / 4 || top * 100 < 8 * inlined)
        fail_msg("%d of %d samples reading the padding in place have a "
                 "top-grade tile (want 8%% or more)",
                 top, inlined);
    assert_int_equal(nfound, CHECKED);
    assert_int_equal(ktt_check_many(dag, found, nfound, 5, &skipped), 0);
    assert_int_equal(skipped, 0);
    for (i = 0; i < nfound; i++)
        kt_state_free(found[i]);
    kt_search_free(s);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_depthwise_top_grade_samples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
