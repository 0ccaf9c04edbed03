/* bench_train.c - cost-model training time and search-round time as the
 * stored records grow, on the conv2d task of bench_search (3x3, 64->64,
 * 56x56, pad 1, +bias+relu).  Programs are real lowered candidates of the
 * task; their "cost" is ktt_synthetic_cost times lognormal noise (no
 * measured data here), so the ranking accuracy printed compares training
 * schemes on the same synthetic target, not a tuning result.
 *
 * Part 1, at 200 / 1000 / 2000 records: training from scratch (Ansor's
 * scheme) and one search round (population 2048, 4 GA iterations) scored
 * by that model; pairwise ranking accuracy on 400 held-out programs.
 * Part 2, a tuning run's sequence: records arrive 64 per round up to 2000
 * and the model is trained after each round, once always from scratch (the
 * default) and once with boosting continued from the last model between
 * full retrains every 4th (kt_xgb_params.retrain_every): mean and largest
 * training time per round, and the final ranking accuracy of both.
 *
 *   build/bench/bench_train
 *
 * Every time is printed as wall and as this process's CPU time ("cpu"):
 * on a shared, loaded machine the CPU time is what the same work costs
 * on a quiet one (training runs on one thread).  KT_BENCH_THREADS sets the
 * scoring threads (default 2) and KT_BENCH_PREDICT_THREADS the model's
 * prediction threads (default 1); KT_BENCH_MODEL=ansor starts from Ansor's
 * model (kt_xgb_params_ansor) instead of the defaults; KT_BENCH_EARLY_STOP,
 * KT_BENCH_DEPTH, KT_BENCH_OBJECTIVE and KT_BENCH_RANK_PAIRS override those
 * kt_xgb_params defaults, KT_BENCH_RETRAIN_EVERY (4) and
 * KT_BENCH_WARM_ROUNDS those of the continued-boosting sequence. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/baseline.h"
#include "costmodel/costmodel.h"
#include "scheduler/scheduler.h"
#include "tests/support/ktt.h"

#define NHELD 400
#define NMAX 2000

struct prog {
    float *rows;
    int nrows;
    double cost;
};

static double
gauss(struct kt_rng *r)
{
    double u = kt_rng_unit(r), v = kt_rng_unit(r);
    return sqrt(-2 * log(u > 1e-12 ? u : 1e-12)) * cos(2 * M_PI * v);
}

static void
die(const char *what, const char *err)
{
    fprintf(stderr, "bench_train: %s: %s\n", what, err);
    exit(1);
}

/* Real candidates of the task (the search carries their features), costed
 * by ktt_synthetic_cost x noise. */
static int
collect(struct kt_search *s, struct prog *v, int n)
{
    struct kt_search_batch b = {0, NULL};
    struct kt_rng rng;
    char err[512];
    int i, got = 0;

    kt_rng_seed(&rng, 11);
    while (got < n) {
        if (kt_search_next_batch(s, NULL, NULL, 0, 512, &b, NULL, err,
                                 sizeof(err)) != KT_OK)
            die("search", err);
        if (b.n == 0)
            break;
        for (i = 0; i < b.n && got < n; i++) {
            if (b.v[i].rows == NULL)
                die("candidate",
                    b.v[i].feature_err ? b.v[i].feature_err : "no features");
            v[got].rows = b.v[i].rows;
            v[got].nrows = b.v[i].nrows;
            b.v[i].rows = NULL; /* v owns them now */
            v[got].cost = ktt_synthetic_cost(v[got].rows, v[got].nrows) *
                          exp(0.2 * gauss(&rng));
            got++;
        }
        kt_search_batch_free(&b);
    }
    return got;
}

/* Wall seconds; *cpu gets the CPU seconds. */
static double
train(struct kt_xgb_model *m, const struct prog *v, int n,
      struct kt_xgb_train_stats *stats, double *cpu)
{
    struct kt_train_set set;
    char err[512];
    double t0, c0;
    int i;

    kt_train_set_init(&set);
    for (i = 0; i < n; i++)
        kt_train_set_add(&set, v[i].rows, v[i].nrows, 0, v[i].cost);
    kt_train_set_label(&set, 0);
    t0 = kt_now();
    c0 = kt_bench_cpu_now();
    if (kt_xgb_train(m, &set, stats, err, sizeof(err)) != KT_OK)
        die("train", err);
    *cpu = kt_bench_cpu_now() - c0;
    t0 = kt_now() - t0;
    kt_train_set_free(&set);
    return t0;
}

/* Pairs of held-out programs ordered alike by score and by cost. */
static double
rank_accuracy(struct kt_xgb_model *m, const struct prog *held, int n)
{
    struct kt_prog_rows pr[NHELD];
    float score[NHELD];
    char err[512];
    long ok = 0, all = 0;
    int i, j;

    for (i = 0; i < n; i++) {
        pr[i].rows = held[i].rows;
        pr[i].nrows = held[i].nrows;
    }
    if (kt_xgb_predict(m, pr, n, score, err, sizeof(err)) != KT_OK)
        die("predict", err);
    for (i = 0; i < n; i++)
        for (j = i + 1; j < n; j++) {
            if (held[i].cost == held[j].cost)
                continue;
            all++;
            ok += (held[i].cost < held[j].cost) == (score[i] > score[j]);
        }
    return all ? (double)ok / all : 0;
}

/* Prediction alone: all n programs in one kt_xgb_predict call, 5 times. */
static void
predict_time(struct kt_xgb_model *m, const struct prog *v, int n)
{
    struct kt_prog_rows *pr = kt_xcalloc((size_t)n, sizeof(*pr));
    float *score = kt_xcalloc((size_t)n, sizeof(float));
    char err[512];
    double t0, c0;
    int i, k, rows = 0;

    for (i = 0; i < n; i++) {
        pr[i].rows = v[i].rows;
        pr[i].nrows = v[i].nrows;
        rows += v[i].nrows;
    }
    t0 = kt_now();
    c0 = kt_bench_cpu_now();
    for (k = 0; k < 5; k++)
        if (kt_xgb_predict(m, pr, n, score, err, sizeof(err)) != KT_OK)
            die("predict", err);
    printf("predicting %d programs (%d rows): %.2f ms (cpu %.2f)\n", n, rows,
           (kt_now() - t0) * 1e3 / 5, (kt_bench_cpu_now() - c0) * 1e3 / 5);
    free(pr);
    free(score);
}

static void
sequence(const char *name, const struct kt_xgb_params *p, const struct prog *v,
         int n, const struct prog *held, int nheld)
{
    struct kt_xgb_model *m = kt_xgb_new(p);
    struct kt_xgb_train_stats st;
    double sum = 0, mx = 0, t, c, csum = 0, cmx = 0;
    int k, rounds = 0;

    for (k = 64; k <= n; k += 64) {
        t = train(m, v, k, &st, &c);
        sum += t;
        mx = t > mx ? t : mx;
        csum += c;
        cmx = c > cmx ? c : cmx;
        rounds++;
    }
    printf("%-30s %2d trainings (64 more records each): mean %.3f s (cpu "
           "%.3f), max %.3f s (cpu %.3f), last %.3f s (cpu %.3f, %d boosting "
           "rounds), held-out accuracy %.3f\n",
           name, rounds, sum / rounds, csum / rounds, mx, cmx, t, c, st.rounds,
           rank_accuracy(m, held, nheld));
    kt_xgb_free(m);
}

int
main(void)
{
    static const int sizes[] = {200, 1000, 2000};
    struct prog *v = kt_xcalloc(NMAX + NHELD, sizeof(*v));
    struct kt_xgb_params scratch, cont;
    struct kt_search_opts o;
    struct kt_search *s = NULL, *s2 = NULL;
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    char err[512];
    int i, n;

    /* conv2d 3x3, 64->64 channels, 56x56, pad 1, +bias+relu */
    ktt_conv_def(&d, 64, 56, 64, 3, 1, 1, 1, 1, KT_EPI_BIAS | KT_EPI_RELU);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
        die("dag", err);
    kt_search_opts_default(&o);
    o.nthreads = kt_bench_env_int("KT_BENCH_THREADS", 2);
    o.seed = 7;
    if (kt_search_new(&s, dag, &o, err, sizeof(err)) != KT_OK)
        die("search", err);
    n = collect(s, v, NMAX + NHELD);
    if (n < NMAX + NHELD) {
        fprintf(stderr, "bench_train: only %d distinct candidates\n", n);
        return 1;
    }
    printf("task %s: %d programs (%d held out), cost = ktt_synthetic_cost x "
           "lognormal(0.2)\n",
           d.name, n, NHELD);
    if (getenv("KT_BENCH_MODEL") != NULL &&
        strcmp(getenv("KT_BENCH_MODEL"), "ansor") == 0)
        kt_xgb_params_ansor(&scratch);
    else
        kt_xgb_params_default(&scratch);
    scratch.predict_nthread = kt_bench_env_int("KT_BENCH_PREDICT_THREADS", 1);
    scratch.early_stop = kt_bench_env_int("KT_BENCH_EARLY_STOP",
                                          scratch.early_stop);
    scratch.max_depth = kt_bench_env_int("KT_BENCH_DEPTH", scratch.max_depth);
    scratch.early_stop_delta = kt_bench_env_double("KT_BENCH_EARLY_STOP_DELTA",
                                                   scratch.early_stop_delta);
    scratch.eta = kt_bench_env_double("KT_BENCH_ETA", scratch.eta);
    scratch.objective = kt_bench_env_int("KT_BENCH_OBJECTIVE",
                                         scratch.objective);
    scratch.rank_pairs = kt_bench_env_int("KT_BENCH_RANK_PAIRS",
                                          scratch.rank_pairs);
    scratch.retrain_every = 1;
    cont = scratch;
    cont.retrain_every = kt_bench_env_int("KT_BENCH_RETRAIN_EVERY", 4);
    cont.warm_rounds = kt_bench_env_int("KT_BENCH_WARM_ROUNDS",
                                        cont.warm_rounds);
    printf("kt_xgb_params: objective %d (rank_pairs %d), max_depth %d, "
           "early_stop %d, predict_nthread %d; continued boosting: "
           "retrain_every %d, warm_rounds %d\n",
           scratch.objective, scratch.rank_pairs, scratch.max_depth,
           scratch.early_stop, scratch.predict_nthread, cont.retrain_every,
           cont.warm_rounds);
    for (i = 0; i < 3; i++) {
        struct kt_xgb_model *m = kt_xgb_new(&scratch);
        struct kt_xgb_train_stats st;
        struct kt_search_batch b = {0, NULL};
        struct kt_search_stats ss;
        double c, cs, t = train(m, v, sizes[i], &st, &c);

        o.seed = 100 + (uint64_t)i;
        cs = kt_bench_cpu_now();
        if (kt_search_new(&s2, dag, &o, err, sizeof(err)) != KT_OK ||
            kt_search_next_batch(s2, m, NULL, 0, 64, &b, &ss, err,
                                 sizeof(err)) != KT_OK)
            die("search round", err);
        cs = kt_bench_cpu_now() - cs;
        printf("%5d records: training from scratch %.3f s (cpu %.3f, %d "
               "boosting rounds), search round %.3f s (cpu %.3f on %d "
               "threads; population %d x %d it), held-out accuracy %.3f\n",
               sizes[i], t, c, st.rounds, ss.total_s, cs, o.nthreads,
               o.population, ss.iters, rank_accuracy(m, v + NMAX, NHELD));
        printf("       search round: sample %.3f s, evolution %.3f s, "
               "scoring %.3f s of %d programs; ",
               ss.sample_s, ss.evo_s, ss.score_s, ss.scored);
        predict_time(m, v, NMAX + NHELD);
        kt_search_batch_free(&b);
        kt_search_free(s2);
        kt_xgb_free(m);
    }
    sequence("from scratch every time", &scratch, v, NMAX, v + NMAX, NHELD);
    sequence("continued boosting", &cont, v, NMAX, v + NMAX, NHELD);
    for (i = 0; i < n; i++)
        free(v[i].rows);
    free(v);
    kt_search_free(s);
    kt_dag_free(dag);
    return 0;
}
