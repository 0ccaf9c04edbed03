/* test_search_fresh.c - rounds of a few trials (a network's tasks: 200
 * trials over 52 tasks are rounds of 3) keep a share of their picks
 * descending from no seed until the search has proposed SK_FRESH_MIN of
 * them (scheduler/search_policy.c, take_fresh).  Without it the fastest
 * measured program's neighbours fill every round after the first, and the
 * search never leaves the family of its first 3 programs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "scheduler/scheduler.h"
#include "tests/support/ktt.h"

/* scheduler/search_int.h */
#define FRESH_MIN 16

static struct kt_dag *
conv(void)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    char err[512];

    assert_int_equal(ktt_conv_def(&d, 16, 14, 32, 3, 1, 1, 1, 1, 0), KT_OK);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s: %s", d.name, err);
    return dag;
}

/* One round of n: its candidates recorded as measured, the seeded ones
 * (neighbours and mutants of measured programs) faster, so that they keep
 * seeding; returns how many descend from no seed (no seed_of). */
static int
round_of(struct kt_search *s, int n, int round, struct kt_search_stats *st)
{
    struct kt_search_batch b;
    char err[512];
    int i, fresh = 0;

    if (kt_search_next_batch(s, NULL, NULL, 0, n, &b, st, err, sizeof(err)) !=
        KT_OK)
        fail_msg("round %d: %s", round, err);
    assert_true(b.n >= 1);
    for (i = 0; i < b.n; i++) {
        int seeded = b.v[i].seed_of[0] != '\0';
        fresh += !seeded;
        kt_search_record(s, b.v[i].steps, b.v[i].nsteps,
                         (seeded ? 1e-3 : 2e-3) / (round + 1));
    }
    assert_true(st->picked_fresh <= fresh);
    kt_search_batch_free(&b);
    return fresh;
}

/* Rounds of 3: the first is all fresh (no seed yet); each later one takes
 * 1 fresh pick while fewer than FRESH_MIN were proposed, and the rest from
 * the measured programs' families; then the rule lets go. */
static void
test_small_rounds_keep_fresh_picks(void **state)
{
    struct kt_dag *dag = conv();
    struct kt_search *s = ktt_sketch_search(dag, 256, 3, -1);
    struct kt_search_stats st;
    int round, fresh, total, seeded_rounds = 0;
    (void)state;

    assert_non_null(s);
    total = round_of(s, 3, 0, &st);
    assert_int_equal(total, 3);
    for (round = 1; total < FRESH_MIN; round++) {
        fresh = round_of(s, 3, round, &st);
        if (fresh < 1 || st.picked_fresh < 1)
            fail_msg("round %d: %d fresh picks (%d by the rule) after %d",
                     round, fresh, st.picked_fresh, total);
        seeded_rounds += fresh < 3;
        total += fresh;
        assert_true(round < 3 * FRESH_MIN);
    }
    /* the measured programs' families still have their share */
    assert_true(seeded_rounds >= round / 2);
    print_message("fresh: %d picks in %d rounds of 3, %d rounds with seeded "
                  "picks\n",
                  total, round, seeded_rounds);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* A task's first round of 32 (the suite's, a single task's) proposes more
 * than FRESH_MIN programs of no seed: later rounds are as before. */
static void
test_large_rounds_unchanged(void **state)
{
    struct kt_dag *dag = conv();
    struct kt_search *s = ktt_sketch_search(dag, 256, 5, -1);
    struct kt_search_stats st;
    (void)state;

    assert_non_null(s);
    assert_true(round_of(s, 32, 0, &st) > FRESH_MIN);
    round_of(s, 32, 1, &st);
    assert_int_equal(st.picked_fresh, 0);
    kt_search_free(s);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_rounds_keep_fresh_picks),
        cmocka_unit_test(test_large_rounds_unchanged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
