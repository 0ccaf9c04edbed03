/* test_search_seen.c - the hashes a search never proposes again are kept
 * in bounded memory (struct sk_seen: the newest exactly, older ones in a
 * Bloom filter): every hash added is found again after any number of
 * others, the memory stays under its bound, false positives stay rare;
 * and a search whose own proposals have aged into the filter (more than
 * SK_SEEN_EXACT measured hashes passed in after them) still never proposes
 * one of them again; nor does it measure one program twice under two
 * schedules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "scheduler/search_int.h"
#include "tests/support/ktt.h"

/* Distinct, well spread, never 0. */
static uint64_t
nth_hash(uint64_t i)
{
    return kt_hash_mix(i * 2 + 1) | 1;
}

static void
test_seen_bounded_no_false_negative(void **state)
{
    const uint64_t n = 8 * SK_SEEN_EXACT + 123, probes = 100000;
    const size_t bound = SK_SEEN_BLOOM_BITS / 8 + 4 * SK_SEEN_EXACT * 8;
    struct sk_seen s;
    uint64_t i, fp = 0;
    size_t most = 0;

    (void)state;
    sk_seen_init(&s);
    for (i = 0; i < n; i++) {
        sk_seen_add(&s, nth_hash(i));
        if (sk_seen_bytes(&s) > most)
            most = sk_seen_bytes(&s);
    }
    assert_true(most <= bound);
    assert_true(s.nold >= n - SK_SEEN_EXACT);
    for (i = 0; i < n; i++)
        if (!sk_seen_has(&s, nth_hash(i)))
            fail_msg("hash %llu of %llu lost", (unsigned long long)i,
                     (unsigned long long)n);
    /* hashes never added: with 262,000 in a 2^23-bit filter, about 1 in
     * 10^6 is a false positive; 1 in 1000 leaves room for any layout */
    for (i = n; i < n + probes; i++)
        fp += (uint64_t)sk_seen_has(&s, nth_hash(i));
    assert_true(fp < probes / 1000);
    /* adding a hash held already does not grow anything */
    most = sk_seen_bytes(&s);
    i = s.nold;
    sk_seen_add(&s, nth_hash(0));
    assert_int_equal(s.nold, i);
    assert_int_equal(sk_seen_bytes(&s), most);
    sk_seen_free(&s);
}

static struct kt_search *
new_search(const struct kt_dag *dag)
{
    struct kt_search *s = ktt_sketch_search(dag, 128, 3, -1);

    assert_non_null(s);
    return s;
}

/* A twin search (same seed) proposes a batch; the search under test gets
 * those hashes as measured, then more than SK_SEEN_EXACT others, in the
 * same call as its first round: the twin's batch is what this round would
 * pick first, and none of it may come back. */
static void
test_seen_search_never_reproposes_aged(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_search *twin, *s;
    struct kt_search_batch b;
    struct kt_u64set first;
    uint64_t *measured;
    char err[512];
    int i, n, nfirst;

    (void)state;
    kt_op_matmul(&d, 64, 64, 64);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    twin = new_search(dag);
    s = new_search(dag);
    assert_int_equal(kt_search_next_batch(twin, NULL, NULL, 0, 48, &b, NULL,
                                          err, sizeof(err)),
                     KT_OK);
    assert_true(b.n >= 16);
    nfirst = b.n;
    n = nfirst + 2 * SK_SEEN_EXACT;
    measured = malloc(sizeof(*measured) * (size_t)n);
    kt_u64set_init(&first);
    for (i = 0; i < nfirst; i++) {
        assert_int_equal(kt_hash_parse(b.v[i].hash, &measured[i]), KT_OK);
        kt_u64set_add(&first, measured[i]);
    }
    kt_search_batch_free(&b);
    for (i = nfirst; i < n; i++)
        measured[i] = nth_hash((uint64_t)i + 1000000);
    assert_int_equal(kt_search_next_batch(s, NULL, measured, (size_t)n, 48, &b,
                                          NULL, err, sizeof(err)),
                     KT_OK);
    free(measured);
    /* the twin's hashes are only in the filter now */
    assert_non_null(s->proposed.bloom);
    assert_true(b.n >= 16);
    for (i = 0; i < b.n; i++) {
        uint64_t h = 0;
        assert_int_equal(kt_hash_parse(b.v[i].hash, &h), KT_OK);
        if (kt_u64set_has(&first, h))
            fail_msg("%s proposed again (one of the %d measured first)",
                     b.v[i].hash, nfirst);
    }
    kt_search_batch_free(&b);
    kt_u64set_free(&first);
    kt_search_free(twin);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* Different schedules that lower to one program (a cache-write tile the
 * lowering drops, a split of extent 1) are measured once: a search's
 * batches hold distinct programs, and a search told of stored records
 * (kt_search_record) proposes none of their programs again. */
static void
test_seen_search_one_program_once(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_search *s, *restarted;
    struct kt_search_batch b;
    struct kt_search_stats st;
    struct kt_u64set programs, stored;
    char err[512];
    int round, i, skipped = 0;

    (void)state;
    kt_op_softmax(&d, 64, 128);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    s = new_search(dag);
    restarted = new_search(dag);
    kt_u64set_init(&programs);
    kt_u64set_init(&stored);
    for (round = 0; round < 6; round++) {
        assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 32, &b, &st,
                                              err, sizeof(err)),
                         KT_OK);
        skipped += st.skipped_same_program;
        for (i = 0; i < b.n; i++) {
            uint64_t p = kt_looptree_hash(b.v[i].lt);
            if (!kt_u64set_add(&programs, p))
                fail_msg("round %d: %s lowers to a program proposed before",
                         round, b.v[i].hash);
            /* the first rounds are stored records for the second search */
            if (round < 3) {
                kt_u64set_add(&stored, p);
                kt_search_record(restarted, b.v[i].steps, b.v[i].nsteps, 1e-3);
            }
            kt_search_record(s, b.v[i].steps, b.v[i].nsteps, 1e-3);
        }
        kt_search_batch_free(&b);
    }
    assert_true(skipped > 0); /* this space has such schedules */
    for (round = 0; round < 3; round++) {
        assert_int_equal(kt_search_next_batch(restarted, NULL, NULL, 0, 32, &b,
                                              NULL, err, sizeof(err)),
                         KT_OK);
        for (i = 0; i < b.n; i++)
            if (kt_u64set_has(&stored, kt_looptree_hash(b.v[i].lt)))
                fail_msg("%s lowers to a stored record's program", b.v[i].hash);
        kt_search_batch_free(&b);
    }
    kt_u64set_free(&programs);
    kt_u64set_free(&stored);
    kt_search_free(s);
    kt_search_free(restarted);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seen_bounded_no_false_negative),
        cmocka_unit_test(test_seen_search_never_reproposes_aged),
        cmocka_unit_test(test_seen_search_one_program_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
