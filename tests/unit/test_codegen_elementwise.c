/* test_codegen_elementwise.c - an elementwise task on its own (a GELU
 * that no matrix product took as its epilogue): a row of 3072 floats
 * vectorized stays a loop of vectors, whatever its expression reads more
 * than once, where it was expanded into 192 statements whose repeated
 * reads were pinned and weighed 960 against the code-size bound of 512
 * (ir/codegen.c, KT_CG_MAX_EXPANDED_CHUNKS), so that the search's samples
 * of such a task held only the scalar loop; tanh is vector code of its
 * own (ir/module.c) instead of a tanhf call per lane.  Every form is
 * checked against the interpreter. */
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

/* GELU, tanh form, over rows x 3072: X read five times per element. */
#define GELU_TANH                                                              \
    "O[i,j] = 0.5 * X[i,j] * (1 + tanh(0.797884561 * (X[i,j] + 0.044715 * "    \
    "X[i,j] * X[i,j] * X[i,j])))"
#define ROWS_PARALLEL_COLS_VECTORIZED                                          \
    "{\"v\":1,\"steps\":[[\"AN\",0,0,\"parallel\"],"                           \
    "[\"AN\",0,1,\"vectorize\"]]}"

static struct kt_dag *
gelu_dag(int64_t rows)
{
    struct kt_shape sh[1] = {{"X", 2, {rows, 3072}}};
    struct kt_dag *dag = NULL;
    char err[512];

    if (kt_dag_parse(GELU_TANH, sh, 1, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    return dag;
}

/* The row of 192 vectors is a loop stepping 16 lanes, within the code-size
 * bound, its tanh the vector one, and it matches the interpreter. */
static void
test_elementwise_long_row_stays_a_loop(void **state)
{
    struct kt_dag *dag = gelu_dag(4);
    struct kt_state *st = ktt_replay_json(dag, ROWS_PARALLEL_COLS_VECTORIZED);
    char *c;
    (void)state;

    assert_non_null(st);
    assert_true(ktt_within_code_bound(st, 64));
    c = ktt_checked_c_at(dag, st, 64, 5);
    assert_non_null(c);
    assert_non_null(strstr(c, " += 16) {"));
    assert_int_equal(ktt_count(c, "kt_vtanh16("), 1);
    assert_int_equal(ktt_count(c, "tanhf("), 0);
    free(c);
    kt_state_free(st);
    kt_dag_free(dag);
}

/* The search's samples of the GELU over 128 rows: vectorized programs
 * within the code-size bound, not only the scalar loop. */
static void
test_elementwise_samples_vectorized(void **state)
{
    struct kt_dag *dag = gelu_dag(128);
    struct kt_search *s = ktt_avx512_search(dag);
    struct kt_rng r;
    int n, vectorized = 0, within = 0;
    (void)state;

    kt_rng_seed(&r, 3);
    for (n = 0; n < 64; n++) {
        struct sk_genome g;
        struct kt_state *st;
        char err[256];
        int i, vec = 0;
        sk_sample(s, &r, &g);
        st = sk_build(s, &g, err, sizeof(err));
        if (st == NULL)
            continue;
        for (i = 0; i < st->nsteps; i++)
            vec |= st->steps[i].kind == KT_STEP_ANNOTATE &&
                   st->steps[i].v[0] == KT_ANN_VECTORIZE;
        vectorized += vec;
        within += vec && ktt_within_code_bound(st, 64);
        kt_state_free(st);
    }
    kt_search_free(s);
    kt_dag_free(dag);
    if (vectorized == 0 || within != vectorized)
        fail_msg("%d of 64 samples vectorized, %d of those within the "
                 "code-size bound",
                 vectorized, within);
}

/* The parallel loop and the vectorized one of every sample of dag whose
 * parallel gene takes in all its loops (255, InitParallel's, or at
 * least rank): expect_run lanes split off the last axis (the run inside
 * the parallel loop), and the first program matches the interpreter. */
static void
check_split_run(struct kt_dag *dag, int rank, int64_t expect_run)
{
    struct kt_search *s = ktt_avx512_search(dag);
    struct kt_rng r;
    int n, checked = 0;

    s->o.cores = 2;
    kt_rng_seed(&r, 5);
    for (n = 0; n < 28; n++) {
        struct sk_genome g;
        struct kt_state *st;
        const struct kt_sstage *ss;
        char err[256];
        int i, par = -1, vec = -1;
        sk_sample(s, &r, &g);
        g.par[0] = n < 4 ? 255 : (uint8_t)(rank + n % 4);
        st = sk_build(s, &g, err, sizeof(err));
        if (st == NULL)
            fail_msg("sample %d: %s", n, err);
        ss = &st->stages[st->nstages - 1];
        for (i = 0; i < ss->niters; i++) {
            if (ss->iters[i].ann == KT_ANN_PARALLEL)
                par = i;
            if (ss->iters[i].ann == KT_ANN_VECTORIZE)
                vec = i;
        }
        if (par < 0 || vec != ss->niters - 1 || par >= vec ||
            ss->iters[vec].extent != expect_run)
            fail_msg("sample %d (parallel gene %d): parallel loop %d, "
                     "vectorized loop %d of %d, run %lld (want %lld)",
                     n, g.par[0], par, vec, ss->niters,
                     (long long)ss->iters[ss->niters - 1].extent,
                     (long long)expect_run);
        if (!checked) {
            char *c = ktt_checked_c_at(dag, st, 64, 11);
            assert_non_null(c);
            assert_non_null(strstr(c, "#pragma omp parallel for"));
            assert_true(ktt_count(c, "kt_vtanh16(") >= 1);
            free(c);
            checked = 1;
        }
        kt_state_free(st);
    }
    kt_search_free(s);
}

/* An elementwise stage whose parallel loop would take in its last loop
 * (one row of 3072, a vector of 4096) splits a run of vectors off that
 * loop to vectorize, where it ran scalar, tanhf per element: 28.6x on a
 * 4M-element tanh over two threads (docs/performance.md). */
static void
test_elementwise_one_row_vectorized_inside_parallel(void **state)
{
    struct kt_shape flat[1] = {{"X", 1, {4096}}};
    struct kt_dag *dag = gelu_dag(1), *line = NULL;
    char err[512];
    (void)state;

    check_split_run(dag, 2, 64); /* 48 runs of 4 vectors */
    kt_dag_free(dag);
    if (kt_dag_parse("O[i] = tanh(X[i]) * 0.5 + X[i]", flat, 1, &line, err,
                     sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    check_split_run(line, 1, 128); /* 32 runs of 8 vectors */
    kt_dag_free(line);
}

/* A sum of 70 reads over rows of 64 at 8 lanes (AVX2): expanded, the
 * row's 8 vectors weighed 568 against the code-size bound of 512, and
 * with its rows fused into the parallel loop too (the split above) no
 * program of the task was within the bound; the row stays a loop of
 * vectors (ir/codegen.c). */
static void
test_elementwise_heavy_row_stays_a_loop(void **state)
{
    struct kt_shape sh[1] = {{"A", 2, {64, 64}}};
    struct kt_dag *dag = NULL;
    struct kt_state *st;
    char err[512], expr[1024] = "O[i,j] = A[i,j]", *c;
    int i;
    (void)state;

    for (i = 1; i < 70; i++)
        strcat(expr, " + A[i,j]");
    if (kt_dag_parse(expr, sh, 1, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    st = ktt_replay_json(dag, ROWS_PARALLEL_COLS_VECTORIZED);
    assert_non_null(st);
    assert_true(ktt_within_code_bound(st, 32));
    c = ktt_checked_c_at(dag, st, 32, 3);
    assert_non_null(c);
    assert_non_null(strstr(c, " += 8) {"));
    free(c);
    kt_state_free(st);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise_long_row_stays_a_loop),
        cmocka_unit_test(test_elementwise_samples_vectorized),
        cmocka_unit_test(test_elementwise_one_row_vectorized_inside_parallel),
        cmocka_unit_test(test_elementwise_heavy_row_stays_a_loop),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
