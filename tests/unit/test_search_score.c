/* test_search_score.c - scoring a population (scheduler/search_evo.c):
 * a member whose unrolled reductions make its program weigh more than
 * the code-size bound is scored in its rolled form, so the evolution's
 * mutants that grow a register tile are not lost for its unroll. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "scheduler/search_int.h"
#include "tests/support/ktt.h"

#define NMEMBERS 512

static int
unrolls_a_reduction(const struct kt_search *s, const struct sk_genome *g)
{
    int i;

    for (i = 0; i < s->sk[g->sketch].base->nstages; i++)
        if (g->red_unroll[i] != 0)
            return 1;
    return 0;
}

/* The weight of g's program (ktt_code_weight); *bound gets the scorer's
 * code-size bound; 0 when g does not build. */
static int64_t
code_weight(const struct kt_search *s, const struct sk_genome *g,
            int64_t *bound)
{
    char err[256];
    struct kt_state *st = sk_build(s, g, err, sizeof(err));
    int64_t w;

    if (st == NULL)
        return 0;
    w = ktt_code_weight(st, 64, bound);
    kt_state_free(st);
    return w;
}

/* The CLIP attention scores (8 x 77 x 77 x 64, B transposed): mutants of
 * random samples, scored.  Those whose program unrolled is over the bound
 * come back valid with every reduction unroll 0, their genome rolled; a
 * second scoring of the unrolled genome (a cache hit) rolls it the same
 * way; the rolled programs compute what the reference does. */
static void
test_search_score_rolls_too_large(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_search *s;
    struct sk_score_ctx c;
    struct sk_member *m = kt_xcalloc(NMEMBERS, sizeof(*m));
    struct sk_member *orig = kt_xcalloc(NMEMBERS, sizeof(*orig));
    struct sk_member *again = kt_xcalloc(NMEMBERS, sizeof(*again));
    struct kt_state *rolled[8];
    struct kt_rng r;
    char err[512];
    int64_t bound = 0, weight;
    int i, k, nrolled = 0, skipped = 0;
    (void)state;
    assert_int_equal(kt_op_batch_matmul(&d, 8, 77, 77, 64, 1), KT_OK);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s: %s", d.name, err);
    s = ktt_avx512_search(dag);
    kt_rng_seed(&r, 5);
    for (i = 0; i < NMEMBERS; i++) {
        sk_sample(s, &r, &m[i].g);
        for (k = 0; k < 3; k++)
            sk_mutate(s, &r, &m[i].g);
    }
    memcpy(orig, m, sizeof(*m) * NMEMBERS);
    memset(&c, 0, sizeof(c));
    c.s = s;
    assert_int_equal(sk_score(&c, m, NMEMBERS, err, sizeof(err)), KT_OK);
    for (i = 0; i < NMEMBERS; i++) {
        if (!m[i].rolled) {
            assert_memory_equal(&m[i].g, &orig[i].g, sizeof(m[i].g));
            continue;
        }
        if (!unrolls_a_reduction(s, &orig[i].g))
            fail_msg("member %d rolled, but unrolled nothing", i);
        if (unrolls_a_reduction(s, &m[i].g))
            fail_msg("member %d rolled keeps a reduction unroll", i);
        weight = code_weight(s, &orig[i].g, &bound);
        if (weight <= bound)
            fail_msg("member %d rolled, but was within the bound", i);
        if (m[i].valid) {
            weight = code_weight(s, &m[i].g, &bound);
            if (weight <= 0 || weight > bound)
                fail_msg("member %d rolled weighs %lld against %lld", i,
                         (long long)weight, (long long)bound);
            if (nrolled < 8)
                rolled[nrolled] = sk_build(s, &m[i].g, err, sizeof(err));
            nrolled++;
        }
    }
    if (nrolled < 4)
        fail_msg("%d of %d members scored rolled; want 4 or more", nrolled,
                 NMEMBERS);
    memcpy(again, orig, sizeof(*m) * NMEMBERS);
    assert_int_equal(sk_score(&c, again, NMEMBERS, err, sizeof(err)), KT_OK);
    for (i = 0; i < NMEMBERS; i++) {
        assert_int_equal(again[i].rolled, m[i].rolled);
        assert_int_equal(again[i].valid, m[i].valid);
        assert_true(again[i].hash == m[i].hash);
        assert_memory_equal(&again[i].g, &m[i].g, sizeof(m[i].g));
    }
    k = nrolled < 8 ? nrolled : 8;
    for (i = 0; i < k; i++)
        assert_non_null(rolled[i]);
    assert_int_equal(ktt_check_many(dag, rolled, k, 7, &skipped), 0);
    assert_int_equal(skipped, 0);
    for (i = 0; i < k; i++)
        kt_state_free(rolled[i]);
    sk_score_ctx_free(&c);
    free(m);
    free(orig);
    free(again);
    kt_search_free(s);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_score_rolls_too_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
