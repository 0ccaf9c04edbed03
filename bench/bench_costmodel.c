/* bench_costmodel.c - cost-model throughput on hand-built GEMM loop trees:
 * feature extraction (programs/s, one core), XGBoost training on 10,000
 * programs and batched prediction.
 *
 * The programs are dense-layer schedules with random tiles, fusion and
 * annotations; their "cost" is ktt_synthetic_cost times lognormal noise
 * (no measured data here), so the ranking accuracy printed is how well
 * the model learns that synthetic target, not a tuning result.
 * KT_BENCH_PROGRAMS overrides the 10,000; KT_BENCH_TREE_METHOD (hist,
 * exact, approx) overrides the XGBoost tree method. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel/costmodel.h"
#include "tests/support/ktt.h"
#include "tests/unit/cm_trees.h"

static int64_t
pick(struct kt_rng *r, const int64_t *v, int n)
{
    return v[kt_rng_below(r, (uint64_t)n)];
}

static struct kt_looptree *
random_gemm(struct kt_rng *r, int *task)
{
    static const int64_t dims[][3] = {{512, 512, 512},
                                      {1024, 1024, 1024},
                                      {128, 768, 3072},
                                      {64, 1000, 2048}};
    static const int64_t t[] = {1, 2, 4, 8, 16, 32, 64};
    struct tb_gemm g;
    int d = (int)kt_rng_below(r, 4);

    g.M = dims[d][0];
    g.N = dims[d][1];
    g.K = dims[d][2];
    do {
        g.ti = pick(r, t, 6);
    } while (g.M % g.ti);
    do {
        g.tj = pick(r, t, 7);
    } while (g.N % g.tj);
    do {
        g.tk = pick(r, t, 5);
    } while (g.K % g.tk);
    g.fuse = (int)kt_rng_below(r, 2);
    g.vectorize = kt_rng_below(r, 4) != 0;
    g.unroll = (int)kt_rng_below(r, 2);
    g.parallel = kt_rng_below(r, 4) != 0;
    *task = d;
    return tb_gemm_tree(&g);
}

/* Box-Muller normal. */
static double
gauss(struct kt_rng *r)
{
    double u = kt_rng_unit(r) + 1e-12, v = kt_rng_unit(r);

    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* Pairwise ranking accuracy among programs of the same task. */
static double
pairwise(const float *s, const double *truth, const int *task, int n)
{
    int i, j, ok = 0, all = 0;

    for (i = 0; i < n; i++)
        for (j = i + 1; j < n; j++)
            if (task[i] == task[j] && truth[i] != truth[j]) {
                all++;
                ok += (s[i] > s[j]) == (truth[i] > truth[j]);
            }
    return all ? (double)ok / all : 0;
}

int
main(void)
{
    enum { NTREES = 256, NTEST = 1000 };
    struct kt_looptree *trees[NTREES];
    struct kt_rng rng;
    struct kt_train_set set;
    struct kt_xgb_model *m;
    struct kt_xgb_train_stats st;
    struct kt_prog_rows *progs;
    float *rows, *scores;
    double t0, dt, sec, *truth, *pre;
    int tasks[NTEST];
    char err[512];
    int i, n, nprog = 10000, task, rc;
    const char *env = getenv("KT_BENCH_PROGRAMS");

    if (env != NULL && atoi(env) > 0)
        nprog = atoi(env);
    kt_rng_seed(&rng, 1);
    for (i = 0; i < NTREES; i++)
        trees[i] = random_gemm(&rng, &task);

    /* 1. Feature extraction rate, one thread. */
    t0 = kt_now();
    for (n = 0; kt_now() - t0 < 1.0; n++) {
        rc = kt_features_extract(trees[n % NTREES], &rows, &i, err,
                                 sizeof(err));
        if (rc < 0) {
            fprintf(stderr, "extract: %s\n", err);
            return 1;
        }
        free(rows);
    }
    dt = kt_now() - t0;
    printf("feature extraction: %.0f programs/s (%d GEMM trees, 3 stores "
           "each, %d programs in %.2f s, one thread)\n",
           n / dt, NTREES, n, dt);

    for (i = 0; i < NTREES; i++)
        tb_free(trees[i]);

    /* 2. A training set of nprog programs; cost = synthetic x noise. */
    truth = kt_xmalloc((size_t)(nprog + NTEST) * sizeof(double));
    pre = kt_xmalloc((size_t)(nprog + NTEST) * sizeof(double));
    progs = kt_xcalloc((size_t)NTEST, sizeof(*progs));
    kt_train_set_init(&set);
    for (i = 0; i < nprog + NTEST; i++) {
        struct kt_looptree *lt = random_gemm(&rng, &task);
        double cost;
        kt_features_extract(lt, &rows, &n, err, sizeof(err));
        sec = ktt_synthetic_cost(rows, n);
        cost = sec * exp(0.3 * gauss(&rng));
        truth[i] = 1.0 / cost;
        pre[i] = 1.0 / sec;
        if (i < nprog) {
            kt_train_set_add(&set, rows, n, task, cost);
        } else {
            tasks[i - nprog] = task;
            progs[i - nprog].rows = rows;
            progs[i - nprog].nrows = n;
            rows = NULL;
        }
        free(rows);
        tb_free(lt);
    }
    kt_train_set_label(&set, 0);
    {
        struct kt_xgb_params xp;
        kt_xgb_params_default(&xp);
        if (getenv("KT_BENCH_TREE_METHOD") != NULL)
            xp.tree_method = getenv("KT_BENCH_TREE_METHOD");
        m = kt_xgb_new(&xp);
    }
    t0 = kt_now();
    if (kt_xgb_train(m, &set, &st, err, sizeof(err)) < 0) {
        fprintf(stderr, "train: %s\n", err);
        return 1;
    }
    dt = kt_now() - t0;
    printf("xgb train: %d programs, %d rows: %.2f s, %d rounds (best %d, "
           "train p-rmse %.4f), nthread 1\n",
           nprog, st.nrows, dt, st.rounds, st.best_round, st.best_prmse);

    /* 3. Batched prediction rate and held-out ranking. */
    scores = kt_xmalloc(NTEST * sizeof(float));
    t0 = kt_now();
    for (n = 0; kt_now() - t0 < 1.0; n++)
        if (kt_xgb_predict(m, progs, NTEST, scores, err, sizeof(err)) < 0) {
            fprintf(stderr, "predict: %s\n", err);
            return 1;
        }
    dt = kt_now() - t0;
    printf("xgb predict: %.0f programs/s (batches of %d)\n",
           (double)n * NTEST / dt, NTEST);
    {
        float *ps = kt_xmalloc(NTEST * sizeof(float));
        for (i = 0; i < NTEST; i++)
            ps[i] = (float)pre[nprog + i];
        printf("held-out pairwise accuracy within a task (synthetic "
               "target): model %.3f, the noiseless synthetic cost %.3f "
               "(the ceiling: the target is it x noise)\n",
               pairwise(scores, truth + nprog, tasks, NTEST),
               pairwise(ps, truth + nprog, tasks, NTEST));
        free(ps);
    }
    for (i = 0; i < NTEST; i++)
        free((void *)progs[i].rows);
    free(progs);
    free(scores);
    free(truth);
    free(pre);
    kt_train_set_free(&set);
    kt_xgb_free(m);
    return 0;
}
