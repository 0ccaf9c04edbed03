/* test_xgb.c - the XGBoost cost model (pairwise and pack-sum objectives)
 * with real XGBoost on small synthetic data: gradients, labels, ranking of
 * held-out programs, the score scale, save/load, errors, concurrent
 * predict and train, the random model. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "costmodel/cm_internal.h"
#include "costmodel/costmodel.h"

static void
test_xgb_packsum_grad_by_hand(void **state)
{
    /* Program 0 has rows 0 and 2, program 1 has row 1. */
    const float pred[3] = {0.2f, 0.4f, 0.3f};
    const int pack[3] = {0, 1, 0};
    const float label[2] = {1.0f, 0.25f};
    const float weight[2] = {1.0f, 0.25f};
    float g[3], h[3];

    (void)state;
    kt_xgb_packsum_grad(pred, pack, 3, label, weight, 2, g, h);
    /* score0 = 0.5: (0.5 - 1) * 1; score1 = 0.4: (0.4 - 0.25) * 0.25. */
    assert_float_equal(g[0], -0.5f, 1e-6);
    assert_float_equal(g[2], -0.5f, 1e-6);
    assert_float_equal(g[1], 0.0375f, 1e-6);
    assert_float_equal(h[0], 1.0f, 1e-6);
    assert_float_equal(h[2], 1.0f, 1e-6);
    assert_float_equal(h[1], 0.25f, 1e-6);
}

/* Pairs only within a task: a program alone in its task gets no gradient;
 * the best of a task is pushed up and the worst down; ordered by a wide
 * margin there is almost nothing left to learn and no pair is wrong. */
static void
test_xgb_pairwise_grad(void **state)
{
    const int64_t task[5] = {7, 7, 9, 7, 7};
    const float label[5] = {1.0f, 0.5f, 1.0f, 0.5f, 0.25f};
    const double even[5] = {0, 0, 0, 0, 0};
    const double ordered[5] = {40, 20, 0, 20, 0};
    const double reversed[5] = {-40, -20, 0, -20, 0};
    struct kt__groups gr;
    struct kt_rng r;
    double g[5], h[5], sum = 0;
    int i;

    (void)state;
    kt__groups_init(&gr, task, 5);
    assert_int_equal(gr.size[0], 4);
    assert_int_equal(gr.size[2], 1);
    kt_rng_seed(&r, 1);
    kt__pairwise_grad(&gr, even, label, 64, &r, g, h);
    assert_true(g[2] == 0 && h[2] == 0);
    assert_true(g[0] < 0 && g[4] > 0);
    for (i = 0; i < 5; i++) {
        sum += g[i];
        assert_true(h[i] >= 0);
    }
    assert_true(fabs(sum) < 1e-9);
    kt__pairwise_grad(&gr, ordered, label, 64, &r, g, h);
    for (i = 0; i < 5; i++)
        assert_true(fabs(g[i]) < 1e-6);
    assert_true(kt__pairwise_error(&gr, ordered, label, 64, 5) == 0);
    assert_true(kt__pairwise_error(&gr, reversed, label, 64, 5) == 1);
    /* the same seed draws the same pairs */
    assert_true(kt__pairwise_error(&gr, even, label, 16, 3) ==
                kt__pairwise_error(&gr, even, label, 16, 3));
    kt__groups_free(&gr);
}

static void
test_xgb_labels_per_task(void **state)
{
    struct kt_train_set s;
    float row[KT_FEATURE_LEN] = {0};

    (void)state;
    kt_train_set_init(&s);
    kt_train_set_add(&s, row, 1, 7, 2.0);
    kt_train_set_add(&s, row, 1, 3, 4.0);
    kt_train_set_add(&s, row, 1, 7, 1.0);
    kt_train_set_add(&s, row, 1, 7, -1); /* failed */
    kt_train_set_add(&s, row, 1, 3, 8.0);
    kt_train_set_label(&s, 0);
    assert_float_equal(s.label[0], 0.5f, 1e-6);
    assert_float_equal(s.label[1], 1.0f, 1e-6);
    assert_float_equal(s.label[2], 1.0f, 1e-6);
    assert_true(s.label[3] < 1e-9f);
    assert_float_equal(s.label[4], 0.5f, 1e-6);
    assert_float_equal(s.weight[0], 0.5f, 1e-6);
    kt_train_set_label(&s, 0.1f);
    assert_float_equal(s.weight[3], 0.1f, 1e-6);
    assert_float_equal(s.weight[1], 1.0f, 1e-6);
    kt_train_set_free(&s);
}

/* Synthetic programs: 1-3 rows of random features; a row's true speed
 * contribution is a known function of features 0, 5 and 10.  Program
 * speed = sum over rows; cost = 1 / speed. */
static double
row_value(const float *x)
{
    return 0.3 * x[0] + (x[5] > 2.0f ? 1.0 : 0.0) + 0.2 * x[10] * x[0] + 0.1;
}

static void
make_programs(struct kt_train_set *s, int n, uint64_t seed, double *truth)
{
    struct kt_rng rng;
    float rows[3 * KT_FEATURE_LEN];
    int i, r, f, nr;
    double v;

    kt_rng_seed(&rng, seed);
    kt_train_set_init(s);
    for (i = 0; i < n; i++) {
        nr = 1 + (int)kt_rng_below(&rng, 3);
        memset(rows, 0, sizeof(rows));
        v = 0;
        for (r = 0; r < nr; r++) {
            for (f = 0; f < 20; f++)
                rows[r * KT_FEATURE_LEN + f] = (float)(4 * kt_rng_unit(&rng));
            v += row_value(rows + r * KT_FEATURE_LEN);
        }
        truth[i] = v;
        kt_train_set_add(s, rows, nr, i % 2, 1.0 / v);
    }
    kt_train_set_label(s, 0);
}

static struct kt_prog_rows *
progs_of(const struct kt_train_set *s, int from, int n)
{
    struct kt_prog_rows *p = calloc((size_t)n, sizeof(*p));
    int i;

    for (i = 0; i < n; i++) {
        p[i].rows = s->rows[from + i];
        p[i].nrows = s->nrows[from + i];
    }
    return p;
}

static double
pairwise_accuracy(const float *score, const double *truth, int n)
{
    int i, j, ok = 0, all = 0;

    for (i = 0; i < n; i++)
        for (j = i + 1; j < n; j++) {
            if (fabs(truth[i] - truth[j]) < 1e-9)
                continue;
            all++;
            ok += (score[i] > score[j]) == (truth[i] > truth[j]);
        }
    return (double)ok / all;
}

#define NTRAIN 600
#define NTEST 200

static void
ranks_held_out(const struct kt_xgb_params *prm, const char *name)
{
    struct kt_train_set train, test;
    double truth_tr[NTRAIN], truth_te[NTEST], mean_label = 0, mean_score = 0;
    struct kt_xgb_train_stats st;
    struct kt_xgb_model *m = kt_xgb_new(prm);
    struct kt_prog_rows *p, *ptr;
    static float scores[NTEST], train_scores[NTRAIN];
    char err[512] = "";
    double acc;
    int i;

    make_programs(&train, NTRAIN, 1, truth_tr);
    make_programs(&test, NTEST, 2, truth_te);
    p = progs_of(&test, 0, NTEST);
    ptr = progs_of(&train, 0, NTRAIN);
    assert_false(kt_xgb_trained(m));
    assert_int_equal(kt_xgb_predict(m, p, NTEST, scores, err, sizeof(err)),
                     KT_EINVAL);
    assert_non_null(strstr(err, "not trained"));
    if (kt_xgb_train(m, &train, &st, err, sizeof(err)) != 0)
        fail_msg("train: %s", err);
    assert_true(st.rounds > 2);
    assert_true(st.nrows >= NTRAIN && st.nrows <= 3 * NTRAIN);
    assert_true(st.best_round > 0 && st.best_round <= st.rounds);
    assert_true(st.best_prmse < 0.2);
    if (kt_xgb_predict(m, p, NTEST, scores, err, sizeof(err)) != 0)
        fail_msg("predict: %s", err);
    acc = pairwise_accuracy(scores, truth_te, NTEST);
    print_message("%s: pairwise accuracy on held-out programs: %.3f "
                  "(%d rounds, best %d, train loss %.4f)\n",
                  name, acc, st.rounds, st.best_round, st.best_prmse);
    assert_true(acc > 0.85);
    /* Scores are on the label scale (the search weighs them): on the
     * training set their mean is the labels' mean. */
    if (kt_xgb_predict(m, ptr, NTRAIN, train_scores, err, sizeof(err)) != 0)
        fail_msg("predict: %s", err);
    for (i = 0; i < NTRAIN; i++) {
        mean_label += train.label[i] / NTRAIN;
        mean_score += train_scores[i] / NTRAIN;
    }
    print_message("%s: mean label %.4f, mean score %.4f\n", name, mean_label,
                  mean_score);
    assert_true(fabs(mean_score - mean_label) < 0.05);
    free(p);
    free(ptr);
    kt_train_set_free(&train);
    kt_train_set_free(&test);
    kt_xgb_free(m);
}

static void
test_xgb_ranks_held_out_programs(void **state)
{
    struct kt_xgb_params prm;

    (void)state;
    kt_xgb_params_default(&prm);
    assert_int_equal(prm.objective, KT_XGB_OBJ_PAIRWISE);
    ranks_held_out(&prm, "pairwise");
    kt_xgb_params_ansor(&prm);
    assert_int_equal(prm.objective, KT_XGB_OBJ_PACKSUM);
    ranks_held_out(&prm, "pack-sum");
}

/* Prediction on two threads gives the scores of one. */
static void
test_xgb_predict_threads(void **state)
{
    struct kt_train_set train;
    double truth[300];
    struct kt_xgb_params prm;
    struct kt_xgb_model *m1, *m2;
    struct kt_prog_rows *p;
    static float s1[300], s2[300];
    char err[256] = "";

    (void)state;
    kt_xgb_params_default(&prm);
    m1 = kt_xgb_new(&prm);
    prm.predict_nthread = 2;
    m2 = kt_xgb_new(&prm);
    make_programs(&train, 300, 6, truth);
    p = progs_of(&train, 0, 300);
    assert_int_equal(kt_xgb_train(m1, &train, NULL, err, sizeof(err)), 0);
    assert_int_equal(kt_xgb_train(m2, &train, NULL, err, sizeof(err)), 0);
    assert_int_equal(kt_xgb_predict(m1, p, 300, s1, err, sizeof(err)), 0);
    assert_int_equal(kt_xgb_predict(m2, p, 300, s2, err, sizeof(err)), 0);
    assert_memory_equal(s1, s2, sizeof(s1));
    free(p);
    kt_train_set_free(&train);
    kt_xgb_free(m1);
    kt_xgb_free(m2);
}

/* retrain_every 2: from scratch, continued (at most warm_rounds new
 * rounds on the grown set, still ranking held-out programs), from scratch
 * again. */
static void
test_xgb_continued_boosting(void **state)
{
    struct kt_train_set half, full, test;
    double truth_h[NTRAIN / 2], truth_f[NTRAIN], truth_te[NTEST];
    struct kt_xgb_train_stats st;
    struct kt_xgb_params prm;
    struct kt_xgb_model *m;
    struct kt_prog_rows *p;
    float scores[NTEST];
    char err[512] = "";
    double acc;

    (void)state;
    kt_xgb_params_default(&prm);
    assert_int_equal(prm.retrain_every, 1);
    prm.retrain_every = 2;
    prm.warm_rounds = 10;
    m = kt_xgb_new(&prm);
    make_programs(&half, NTRAIN / 2, 1, truth_h);
    make_programs(&full, NTRAIN, 1, truth_f);
    make_programs(&test, NTEST, 2, truth_te);
    p = progs_of(&test, 0, NTEST);
    if (kt_xgb_train(m, &half, &st, err, sizeof(err)) != 0)
        fail_msg("train: %s", err);
    assert_int_equal(st.continued, 0);
    assert_true(st.rounds > 10);
    if (kt_xgb_train(m, &full, &st, err, sizeof(err)) != 0)
        fail_msg("continued: %s", err);
    assert_int_equal(st.continued, 1);
    assert_true(st.rounds <= 10);
    if (kt_xgb_predict(m, p, NTEST, scores, err, sizeof(err)) != 0)
        fail_msg("predict: %s", err);
    acc = pairwise_accuracy(scores, truth_te, NTEST);
    print_message("continued: accuracy %.3f after %d more rounds\n", acc,
                  st.rounds);
    assert_true(acc > 0.85);
    if (kt_xgb_train(m, &full, &st, err, sizeof(err)) != 0)
        fail_msg("retrain: %s", err);
    assert_int_equal(st.continued, 0);
    free(p);
    kt_train_set_free(&half);
    kt_train_set_free(&full);
    kt_train_set_free(&test);
    kt_xgb_free(m);
}

static void
test_xgb_save_load_identical(void **state)
{
    struct kt_train_set train;
    double truth[200];
    struct kt_xgb_model *m = kt_xgb_new(NULL), *m2 = kt_xgb_new(NULL);
    struct kt_xgb_model *m3 = kt_xgb_new(NULL);
    struct kt_prog_rows *p;
    float s1[201], s2[201], s3[201];
    char path[] = "/tmp/kt_xgb_test_XXXXXX", err[512] = "";
    void *buf = NULL;
    size_t len = 0;
    int fd;
    FILE *f;

    (void)state;
    make_programs(&train, 200, 3, truth);
    assert_int_equal(kt_xgb_train(m, &train, NULL, err, sizeof(err)), 0);
    p = progs_of(&train, 0, 200);
    p = realloc(p, 201 * sizeof(*p));
    p[200].rows = NULL;
    p[200].nrows = 0; /* extraction failed: -inf */
    fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(kt_xgb_save(m, path, err, sizeof(err)), 0);
    assert_int_equal(kt_xgb_load(m2, path, err, sizeof(err)), 0);
    assert_int_equal(kt_xgb_predict(m, p, 201, s1, err, sizeof(err)), 0);
    assert_int_equal(kt_xgb_predict(m2, p, 201, s2, err, sizeof(err)), 0);
    assert_memory_equal(s1, s2, sizeof(s1));
    assert_true(isinf(s1[200]) && s1[200] < 0);
    assert_int_equal(kt_xgb_save_buf(m, &buf, &len, err, sizeof(err)), 0);
    assert_int_equal(kt_xgb_load_buf(m3, buf, len, err, sizeof(err)), 0);
    assert_int_equal(kt_xgb_predict(m3, p, 201, s3, err, sizeof(err)), 0);
    assert_memory_equal(s1, s3, sizeof(s1));

    /* A corrupt file is refused with XGBoost's reason and the path; the
     * model keeps its booster. */
    f = fopen(path, "wb");
    fputs("not a model", f);
    fclose(f);
    assert_true(kt_xgb_load(m2, path, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, path));
    assert_int_equal(kt_xgb_predict(m2, p, 201, s2, err, sizeof(err)), 0);
    assert_memory_equal(s1, s2, sizeof(s1));
    unlink(path);
    assert_int_equal(kt_xgb_load(m2, path, err, sizeof(err)), KT_ENOENT);
    assert_non_null(strstr(err, path));
    free(buf);
    free(p);
    kt_train_set_free(&train);
    kt_xgb_free(m);
    kt_xgb_free(m2);
    kt_xgb_free(m3);
}

static void
test_xgb_empty_set_refused(void **state)
{
    struct kt_train_set s;
    struct kt_xgb_model *m = kt_xgb_new(NULL);
    char err[256] = "";

    (void)state;
    kt_train_set_init(&s);
    kt_train_set_add(&s, NULL, 0, 1, 1.0);
    kt_train_set_label(&s, 0);
    assert_int_equal(kt_xgb_train(m, &s, NULL, err, sizeof(err)), KT_EINVAL);
    assert_non_null(strstr(err, "no feature rows"));
    kt_train_set_free(&s);
    kt_xgb_free(m);
}

struct trainer {
    struct kt_xgb_model *m;
    const struct kt_train_set *s;
    int rc;
};

static void *
train_thread(void *arg)
{
    struct trainer *t = arg;
    char err[256];

    t->rc = kt_xgb_train(t->m, t->s, NULL, err, sizeof(err));
    return NULL;
}

/* A retrain on another thread while this one predicts: every prediction
 * succeeds and, after the swap, predictions come from the new booster. */
static void
test_xgb_predict_while_training(void **state)
{
    struct kt_train_set a, b;
    double ta[150], tb[150];
    struct kt_xgb_model *m = kt_xgb_new(NULL);
    struct kt_xgb_params pp;
    struct kt_prog_rows *p;
    struct trainer t;
    pthread_t th;
    float s0[150], s1[150];
    char err[256] = "";
    int i;

    (void)state;
    kt_xgb_params_default(&pp);
    make_programs(&a, 150, 4, ta);
    make_programs(&b, 150, 5, tb);
    assert_int_equal(kt_xgb_train(m, &a, NULL, err, sizeof(err)), 0);
    p = progs_of(&a, 0, 150);
    assert_int_equal(kt_xgb_predict(m, p, 150, s0, err, sizeof(err)), 0);
    t.m = m;
    t.s = &b;
    t.rc = 1;
    assert_int_equal(pthread_create(&th, NULL, train_thread, &t), 0);
    for (i = 0; i < 20; i++)
        assert_int_equal(kt_xgb_predict(m, p, 150, s1, err, sizeof(err)), 0);
    pthread_join(th, NULL);
    assert_int_equal(t.rc, 0);
    assert_int_equal(kt_xgb_predict(m, p, 150, s1, err, sizeof(err)), 0);
    assert_memory_not_equal(s0, s1, sizeof(s0));
    free(p);
    kt_train_set_free(&a);
    kt_train_set_free(&b);
    kt_xgb_free(m);
}

static void
test_random_model_deterministic(void **state)
{
    struct kt_random_model *r1 = kt_random_model_new(9);
    struct kt_random_model *r2 = kt_random_model_new(9);
    float row[KT_FEATURE_LEN] = {0};
    struct kt_prog_rows p[4] = {{row, 1}, {row, 1}, {NULL, 0}, {row, 2}};
    float s1[4], s2[4];
    int i;

    (void)state;
    kt_random_model_predict(r1, p, 4, s1);
    kt_random_model_predict(r2, p, 4, s2);
    assert_memory_equal(s1, s2, sizeof(s1));
    for (i = 0; i < 4; i++)
        if (i == 2)
            assert_true(isinf(s1[i]) && s1[i] < 0);
        else
            assert_true(s1[i] >= 0 && s1[i] < 1);
    assert_true(s1[0] != s1[1]);
    kt_random_model_free(r1);
    kt_random_model_free(r2);
}

/* The training window: the last `recent` programs, and the fastest of
 * each task first, then the second fastest, until `recent` of them. */
static void
test_train_keep_window(void **state)
{
    /* arrival order: tasks 0 and 1 alternate, then task 2 once (failed) */
    const int64_t task[] = {0, 1, 0, 1, 0, 1, 0, 1, 2, 0, 1};
    const double cost[] = {5, 9, 1, 7, 3, 2, 4, 8, 0, 6, 6};
    unsigned char keep[11];
    int i;

    (void)state;
    /* recent 3: 8, 9, 10; fastest of task 0 (index 2) and task 1 (5),
     * then the second fastest of task 0 (4): 3 of them */
    assert_int_equal(kt_train_keep(task, cost, 11, 3, 2, keep), 6);
    for (i = 0; i < 11; i++)
        assert_int_equal(keep[i], i == 2 || i == 4 || i == 5 || i >= 8);
    /* per_task 1: only the fastest of each task */
    assert_int_equal(kt_train_keep(task, cost, 11, 3, 1, keep), 5);
    assert_true(keep[2] && keep[5] && !keep[4]);
    /* a window larger than the set keeps all */
    assert_int_equal(kt_train_keep(task, cost, 11, 64, 16, keep), 11);
    assert_int_equal(kt_train_keep(task, cost, 0, 4, 4, keep), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xgb_packsum_grad_by_hand),
        cmocka_unit_test(test_xgb_pairwise_grad),
        cmocka_unit_test(test_xgb_predict_threads),
        cmocka_unit_test(test_xgb_labels_per_task),
        cmocka_unit_test(test_train_keep_window),
        cmocka_unit_test(test_xgb_ranks_held_out_programs),
        cmocka_unit_test(test_xgb_continued_boosting),
        cmocka_unit_test(test_xgb_save_load_identical),
        cmocka_unit_test(test_xgb_empty_set_refused),
        cmocka_unit_test(test_xgb_predict_while_training),
        cmocka_unit_test(test_random_model_deterministic),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
