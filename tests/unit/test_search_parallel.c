/* test_search_parallel.c - the parallel-degree bound of the search: on 2
 * cores, no proposed candidate runs its main loop nest on one thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ir/ir.h"
#include "scheduler/scheduler.h"
#include "tests/support/ktt.h"

/* The largest parallel loop around the store that runs most often (its
 * loop extents multiplied); *runs gets that product. */
static int64_t
hot_parallel(const struct kt_node *n, int64_t outer, int64_t par, int64_t *runs)
{
    int64_t best = 0;
    int i;

    if (n->kind == KT_N_STORE) {
        if (outer > *runs) {
            *runs = outer;
            return par;
        }
        return -1;
    }
    if (n->kind == KT_N_LOOP) {
        outer *= n->extent;
        if (n->ann == KT_ANN_PARALLEL && n->extent > par)
            par = n->extent;
    }
    best = -1;
    for (i = 0; i < n->nkids; i++) {
        int64_t p = hot_parallel(n->kids[i], outer, par, runs);
        if (p >= 0)
            best = p; /* a later, heavier store replaces it */
    }
    return best;
}

/* A 1x1 conv tiled like a GEMM can get every outer tile of length 1: its
 * consumer then fuses loops of extent 1 for the parallel loop, which
 * vanishes, and the whole kernel runs on one thread (the best 200-trial
 * kernel of the suite's conv1x1 was such a program: 0.55x the libraries
 * on 2 threads). */
static void
test_search_parallel_degree(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_search_opts o;
    struct kt_search *s = NULL;
    struct kt_search_batch b;
    char err[512];
    int round, i, checked = 0;
    (void)state;

    assert_int_equal(ktt_conv_def(&d, 64, 14, 64, 1, 1, 0, 1, 1,
                                  KT_EPI_BIAS | KT_EPI_RELU),
                     KT_OK);
    assert_int_equal(kt_op_build(&d, &dag, err, sizeof(err)), KT_OK);
    kt_search_opts_default(&o);
    o.policy = KT_POLICY_RANDOM;
    o.population = 256;
    o.cores = 2;
    o.seed = 3;
    assert_int_equal(kt_search_new(&s, dag, &o, err, sizeof(err)), KT_OK);
    for (round = 0; round < 4; round++) {
        assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 64, &b, NULL,
                                              err, sizeof(err)),
                         KT_OK);
        for (i = 0; i < b.n; i++) {
            int64_t runs = 0;
            assert_non_null(b.v[i].lt);
            if (hot_parallel(b.v[i].lt->root, 1, 1, &runs) < 2)
                fail_msg("candidate %d runs on one thread: %s", i, b.v[i].hash);
            checked++;
        }
        kt_search_batch_free(&b);
    }
    assert_true(checked >= 128);
    kt_search_free(s);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_parallel_degree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
