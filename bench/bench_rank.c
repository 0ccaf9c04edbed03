/* bench_rank.c - how well the cost model ranks real programs: loads every
 * successful trial of tuning databases (timing the feature extraction),
 * then reports the pairwise ranking accuracy on held-out programs (pairs
 * of the same workload: does the lower cost get the higher score?).
 * First in measurement order: each task's first 80% of trials (by trial
 * id) train, all of them and the daemon's bounded training windows of
 * them (costmodel.h kt_train_keep), and its last 20%, the programs the
 * search proposes next, are ranked.  Then on random 80/20 splits
 * (KT_RANK_SEEDS of them, default 1, seeds 42, 43, ...) and their mean.
 *
 *   build/bench/bench_rank DB [DB ...]
 *
 * The held-out pairs of the random splits are also counted by the cost
 * ratio of the pair (near-equal costs are mostly timing noise).
 *
 * KT_RANK_EACH=1 ranks every database alone (its own training set) and
 * prints a line per database and their mean.  KT_RANK_DUMP=FILE writes
 * the first random split's held-out programs (trial id, cost, score).
 * KT_RANK_WINDOWS=0 skips the windows.  The model is the kt_xgb_params
 * default (KT_RANK_MODEL=ansor: Ansor's pack-sum), changed by the
 * variables read in model_params().  bench/compare_policies.sh runs it on
 * the databases of its tuning runs. */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/baseline.h"
#include "costmodel/costmodel.h"
#include "ir/ir.h"
#include "storage/storage.h"

struct prog {
    float *rows;
    int nrows;
    int64_t group;
    double cost;
    int order;   /* among its group's programs, in measurement order */
    int group_n; /* programs of its group */
    int64_t id;  /* trial id in its database */
};

static int nprogs, capprogs;
static struct prog *progs;
static double extract_s; /* CPU seconds in kt_features_extract */
static struct kt_xgb_train_stats last_stats;

/* Held-out pairs of the random splits by the cost ratio of the pair
 * (slower / faster): near-equal costs are mostly timing noise. */
static const double ratio_edges[] = {1.01, 1.03, 1.1, 1.3, 2, INFINITY};
#define NBINS ((int)KT_ARRAY_LEN(ratio_edges))
static long long bin_pairs[NBINS], bin_right[NBINS];
static int count_bins; /* 1 while the random splits run */
static FILE *dump;     /* KT_RANK_DUMP: held-out scores of the first split */

/* Sets order and group_n (programs are loaded in measurement order). */
static void
number_in_groups(void)
{
    int i, j;

    for (i = 0; i < nprogs; i++) {
        progs[i].order = 0;
        progs[i].group_n = 0;
        for (j = 0; j < nprogs; j++)
            if (progs[j].group == progs[i].group) {
                progs[i].order += j < i;
                progs[i].group_n++;
            }
    }
}

static void
load(const char *path)
{
    struct kt_storage *st = NULL;
    sqlite3_stmt *q;
    struct kt_dag *dag = NULL;
    char err[512];

    if (kt_storage_open(&st, path, NULL, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "bench_rank: %s\n", err);
        exit(1);
    }
    if (sqlite3_prepare_v2(kt_storage_db(st),
                           "select workload, config, cost, id from logs "
                           "where err_no = 0 order by id",
                           -1, &q, NULL) != SQLITE_OK) {
        fprintf(stderr, "bench_rank: %s: %s\n", path,
                sqlite3_errmsg(kt_storage_db(st)));
        exit(1);
    }
    while (sqlite3_step(q) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(q, 0);
        const char *config = (const char *)sqlite3_column_text(q, 1);
        struct kt_step *steps = NULL;
        struct kt_state *s = NULL;
        struct kt_looptree *lt = NULL;
        struct prog p;
        double c0 = 0;
        int n, ok;

        if (dag == NULL || strcmp(dag->key, key) != 0) {
            kt_dag_free(dag);
            if (kt_dag_from_key(key, &dag, err, sizeof(err)) != KT_OK) {
                dag = NULL;
                continue;
            }
        }
        memset(&p, 0, sizeof(p));
        ok = kt_steps_from_json(config, &steps, &n, err, sizeof(err)) ==
                 KT_OK &&
             kt_state_replay(dag, steps, n, &s, err, sizeof(err)) == KT_OK &&
             kt_lower(s, &lt, err, sizeof(err)) == KT_OK;
        if (ok) {
            c0 = kt_bench_cpu_now();
            ok = kt_features_extract(lt, &p.rows, &p.nrows, err, sizeof(err)) ==
                 KT_OK;
            extract_s += kt_bench_cpu_now() - c0;
        }
        if (ok) {
            p.group = (int64_t)(kt_hash64(dag->key, strlen(dag->key)) >> 1);
            p.cost = sqlite3_column_double(q, 2);
            p.id = sqlite3_column_int64(q, 3);
            if (nprogs == capprogs) {
                capprogs = capprogs ? capprogs * 2 : 1024;
                progs = kt_xrealloc(progs, sizeof(*progs) * (size_t)capprogs);
            }
            progs[nprogs++] = p;
        }
        kt_looptree_free(lt);
        kt_state_free(s);
        free(steps);
    }
    sqlite3_finalize(q);
    kt_dag_free(dag);
    kt_storage_close(st);
}

/* The model settings under test: the kt_xgb_params defaults (Ansor's with
 * KT_RANK_MODEL=ansor), changed by KT_RANK_OBJECTIVE (0 pack-sum, 1 pairwise), KT_RANK_PAIRS, KT_RANK_DEPTH,
 * KT_RANK_ETA, KT_RANK_MIN_CHILD_WEIGHT and KT_RANK_EARLY_STOP; and the
 * labels' weight floor by KT_RANK_WEIGHT_FLOOR (0). */
static void
model_params(struct kt_xgb_params *xp)
{
    const char *model = getenv("KT_RANK_MODEL");

    if (model != NULL && strcmp(model, "ansor") == 0)
        kt_xgb_params_ansor(xp);
    else
        kt_xgb_params_default(xp);
    xp->objective = kt_bench_env_int("KT_RANK_OBJECTIVE", xp->objective);
    xp->rank_pairs = kt_bench_env_int("KT_RANK_PAIRS", xp->rank_pairs);
    xp->max_depth = kt_bench_env_int("KT_RANK_DEPTH", xp->max_depth);
    xp->eta = kt_bench_env_double("KT_RANK_ETA", xp->eta);
    xp->min_child_weight = kt_bench_env_double("KT_RANK_MIN_CHILD_WEIGHT",
                                               xp->min_child_weight);
    xp->early_stop = kt_bench_env_int("KT_RANK_EARLY_STOP", xp->early_stop);
    xp->early_stop_delta = kt_bench_env_double("KT_RANK_EARLY_STOP_DELTA",
                                               xp->early_stop_delta);
}

/* Pairwise ranking accuracy of a model trained on progs[train[0..ntrain)]
 * over progs[test[0..ntest)]; *npairs gets the pairs compared. */
static double
rank_accuracy(const int *train, int ntrain, const int *test, int ntest,
              long long *npairs, double *train_s)
{
    struct kt_xgb_params xp;
    struct kt_xgb_model *m;
    struct kt_train_set set;
    struct kt_prog_rows *rows;
    float *scores;
    char err[512];
    long long right = 0, pairs = 0;
    double t0;
    int i, j;

    kt_train_set_init(&set);
    for (i = 0; i < ntrain; i++)
        kt_train_set_add(&set, progs[train[i]].rows, progs[train[i]].nrows,
                         progs[train[i]].group, progs[train[i]].cost);
    kt_train_set_label(&set,
                       (float)kt_bench_env_double("KT_RANK_WEIGHT_FLOOR", 0));
    model_params(&xp);
    m = kt_xgb_new(&xp);
    t0 = kt_now();
    if (kt_xgb_train(m, &set, &last_stats, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "bench_rank: training: %s\n", err);
        exit(1);
    }
    *train_s = kt_now() - t0;
    rows = kt_xcalloc((size_t)ntest, sizeof(*rows));
    scores = kt_xcalloc((size_t)ntest, sizeof(float));
    for (i = 0; i < ntest; i++) {
        rows[i].rows = progs[test[i]].rows;
        rows[i].nrows = progs[test[i]].nrows;
    }
    if (kt_xgb_predict(m, rows, ntest, scores, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "bench_rank: predict: %s\n", err);
        exit(1);
    }
    if (dump != NULL)
        for (i = 0; i < ntest; i++)
            fprintf(dump, "%lld %.9g %.6g\n", (long long)progs[test[i]].id,
                    progs[test[i]].cost, scores[i]);
    for (i = 0; i < ntest; i++)
        for (j = i + 1; j < ntest; j++) {
            const struct prog *a = &progs[test[i]], *b = &progs[test[j]];
            if (a->group != b->group || a->cost == b->cost)
                continue;
            int ok = (a->cost < b->cost) == (scores[i] > scores[j]), k = 0;
            double ratio = a->cost > b->cost ? a->cost / b->cost
                                             : b->cost / a->cost;
            pairs++;
            right += ok;
            while (count_bins && ratio >= ratio_edges[k])
                k++;
            bin_pairs[k] += count_bins;
            bin_right[k] += count_bins && ok;
        }
    kt_train_set_free(&set);
    kt_xgb_free(m);
    free(rows);
    free(scores);
    *npairs = pairs;
    return pairs ? (double)right / (double)pairs : 0.0;
}

/* In measurement order: each task's first 80% of programs train (all of
 * them, and the training windows the daemon keeps of them: recent, and 16
 * fastest per task), its last 20% are ranked.  Returns the accuracy of
 * training on all. */
static double
time_split(int windows_too)
{
    static const int windows[] = {128, 256, 512, 1024, 2048, 4096};
    int *train = kt_xmalloc(sizeof(int) * (size_t)nprogs);
    int *test = kt_xmalloc(sizeof(int) * (size_t)nprogs);
    int64_t *task = kt_xmalloc(sizeof(int64_t) * (size_t)nprogs);
    double *cost = kt_xmalloc(sizeof(double) * (size_t)nprogs);
    unsigned char *keep = kt_xmalloc((size_t)nprogs);
    int *idx = kt_xmalloc(sizeof(int) * (size_t)nprogs);
    int ntrain = 0, ntest = 0, i, w, n, per_task;
    long long pairs;
    double acc, all, secs;

    for (i = 0; i < nprogs; i++) {
        if (progs[i].order < progs[i].group_n * 4 / 5) {
            task[ntrain] = progs[i].group;
            cost[ntrain] = progs[i].cost;
            train[ntrain++] = i;
        } else {
            test[ntest++] = i;
        }
    }
    all = rank_accuracy(train, ntrain, test, ntest, &pairs, &secs);
    printf("measurement order: trained on each task's first 80%%, %d "
           "programs (%.3f s): accuracy on the last 20%%: %.3f (%lld "
           "pairs)\n",
           ntrain, secs, all, pairs);
    for (w = 0;
         windows_too && w < (int)KT_ARRAY_LEN(windows) && windows[w] < ntrain;
         w++)
        for (per_task = 0; per_task <= 16; per_task += 16) {
            kt_train_keep(task, cost, ntrain, windows[w], per_task, keep);
            for (i = n = 0; i < ntrain; i++)
                if (keep[i])
                    idx[n++] = train[i];
            acc = rank_accuracy(idx, n, test, ntest, &pairs, &secs);
            printf("  window: the last %d + the %d fastest per task: %d "
                   "programs (%.3f s): accuracy %.3f\n",
                   windows[w], per_task, n, secs, acc);
        }
    free(train);
    free(test);
    free(task);
    free(cost);
    free(keep);
    free(idx);
    return all;
}

/* Random 80/20 splits (seeds 42, 43, ...): the mean accuracy. */
static double
random_splits(int nseeds)
{
    int *perm = kt_xmalloc(sizeof(int) * (size_t)nprogs);
    int ntrain = nprogs * 4 / 5, i, j, k, t;
    long long pairs;
    double acc, sum = 0, secs;

    for (k = 0; k < nseeds; k++) {
        struct kt_rng r;
        kt_rng_seed(&r, 42 + (uint64_t)k);
        for (i = 0; i < nprogs; i++)
            perm[i] = i;
        for (i = nprogs - 1; i > 0; i--) {
            j = (int)kt_rng_below(&r, (uint64_t)i + 1);
            t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        if (k == 0 && getenv("KT_RANK_DUMP") != NULL)
            dump = fopen(getenv("KT_RANK_DUMP"), "w");
        acc = rank_accuracy(perm, ntrain, perm + ntrain, nprogs - ntrain,
                            &pairs, &secs);
        if (dump != NULL)
            fclose(dump);
        dump = NULL;
        printf("random split (seed %d): trained on %d programs in %.3f s (%d "
               "boosting rounds): pairwise ranking accuracy on the held-out "
               "20%%: %.3f (%lld pairs, %d programs)\n",
               42 + k, ntrain, secs, last_stats.rounds, acc, pairs,
               nprogs - ntrain);
        sum += acc;
    }
    free(perm);
    return sum / nseeds;
}

static void
print_bins(void)
{
    int k;

    printf("random splits, held-out pairs by cost ratio:");
    for (k = 0; k < NBINS; k++)
        if (bin_pairs[k] > 0)
            printf(" <%g: %.3f (%lld)", ratio_edges[k],
                   (double)bin_right[k] / (double)bin_pairs[k], bin_pairs[k]);
    printf("\n");
}

/* Loads the databases paths[0..n) and reports on them as one training
 * set; 0 if there were too few programs. */
static int
rank_dbs(char **paths, int n, int nseeds, double *order, double *rnd)
{
    int i;

    for (i = 0; i < n; i++)
        load(paths[i]);
    if (nprogs < 20) {
        printf("bench_rank: only %d successful trials; need at least 20\n",
               nprogs);
        return 0;
    }
    number_in_groups();
    printf("features: %d programs extracted in %.1f ms of CPU (%.1f us per "
           "program)\n",
           nprogs, extract_s * 1e3, extract_s * 1e6 / nprogs);
    *order = time_split(kt_bench_env_int("KT_RANK_WINDOWS", 1));
    count_bins = 1;
    *rnd = random_splits(nseeds);
    count_bins = 0;
    printf("summary: random split %.3f (mean of %d), measurement order "
           "%.3f\n",
           *rnd, nseeds, *order);
    for (i = 0; i < nprogs; i++)
        free(progs[i].rows);
    free(progs);
    progs = NULL;
    nprogs = capprogs = 0;
    extract_s = 0;
    return 1;
}

/* KT_RANK_EACH=1: every database alone (its own training set), one line
 * each, and the means over them. */
static void
rank_each(char **paths, int n, int nseeds)
{
    double *order = kt_xcalloc((size_t)n, sizeof(double));
    double *rnd = kt_xcalloc((size_t)n, sizeof(double));
    double so = 0, sr = 0;
    int i, used = 0;

    for (i = 0; i < n; i++) {
        printf("== %s\n", paths[i]);
        if (rank_dbs(&paths[i], 1, nseeds, &order[i], &rnd[i])) {
            so += order[i];
            sr += rnd[i];
            used++;
        } else {
            order[i] = rnd[i] = NAN;
        }
    }
    printf("\neach database alone (random split mean of %d / measurement "
           "order):\n",
           nseeds);
    for (i = 0; i < n; i++) {
        const char *base = strrchr(paths[i], '/');
        printf("  %-40s %.3f / %.3f\n", base ? base + 1 : paths[i], rnd[i],
               order[i]);
    }
    if (used > 0)
        printf("  %-40s %.3f / %.3f\n", "mean", sr / used, so / used);
    print_bins();
    free(order);
    free(rnd);
}

int
main(int argc, char **argv)
{
    int nseeds = kt_bench_env_int("KT_RANK_SEEDS", 1);
    double order, rnd;

    if (argc < 2) {
        printf("bench_rank: skipped (pass tuning databases; "
               "bench/compare_policies.sh does)\n");
        return 0;
    }
    if (nseeds < 1)
        nseeds = 1;
    if (kt_bench_env_int("KT_RANK_EACH", 0)) {
        rank_each(argv + 1, argc - 1, nseeds);
        return 0;
    }
    if (rank_dbs(argv + 1, argc - 1, nseeds, &order, &rnd))
        print_bins();
    return 0;
}
