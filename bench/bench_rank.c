/* bench_rank.c - how well the cost model ranks real programs: loads every
 * successful trial of a tuning database, trains the XGBoost model on a
 * random 80% and reports the pairwise ranking accuracy on the held-out 20%
 * (pairs of the same workload: does the lower cost get the higher score?).
 * Then, in the order the trials were measured (the databases in the order
 * given, each by trial id), it trains on the first 80%
 * (all of them, and the daemon's bounded training windows of them:
 * costmodel.h kt_train_keep) and ranks the last 20%, the programs the
 * search proposes next.
 *
 *   build/bench/bench_rank DB [DB ...]
 *
 * bench/compare_policies.sh runs it on the databases of its tuning runs. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel/costmodel.h"
#include "ir/ir.h"
#include "storage/storage.h"

struct prog {
    float *rows;
    int nrows;
    int64_t group;
    double cost;
};

static int nprogs, capprogs;
static struct prog *progs;

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
                           "select workload, config, cost from logs "
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
        int n;

        if (dag == NULL || strcmp(dag->key, key) != 0) {
            kt_dag_free(dag);
            if (kt_dag_from_key(key, &dag, err, sizeof(err)) != KT_OK) {
                dag = NULL;
                continue;
            }
        }
        memset(&p, 0, sizeof(p));
        if (kt_steps_from_json(config, &steps, &n, err, sizeof(err)) == KT_OK &&
            kt_state_replay(dag, steps, n, &s, err, sizeof(err)) == KT_OK &&
            kt_lower(s, &lt, err, sizeof(err)) == KT_OK &&
            kt_features_extract(lt, &p.rows, &p.nrows, err, sizeof(err)) ==
                KT_OK) {
            p.group = (int64_t)(kt_hash64(dag->key, strlen(dag->key)) >> 1);
            p.cost = sqlite3_column_double(q, 2);
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

/* Pairwise ranking accuracy of a model trained on progs[train[0..ntrain)]
 * over progs[test0..test0+ntest); *pairs gets the pairs compared. */
static double
rank_accuracy(const int *train, int ntrain, int test0, int ntest,
              long long *npairs, double *train_s)
{
    struct kt_xgb_params xp;
    struct kt_xgb_model *m;
    struct kt_train_set set;
    struct kt_prog_rows *test;
    float *scores;
    char err[512];
    long long right = 0, pairs = 0;
    double t0;
    int i, j;

    kt_train_set_init(&set);
    for (i = 0; i < ntrain; i++)
        kt_train_set_add(&set, progs[train[i]].rows, progs[train[i]].nrows,
                         progs[train[i]].group, progs[train[i]].cost);
    kt_train_set_label(&set, 0.0f);
    kt_xgb_params_default(&xp);
    m = kt_xgb_new(&xp);
    t0 = kt_now();
    if (kt_xgb_train(m, &set, NULL, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "bench_rank: training: %s\n", err);
        exit(1);
    }
    *train_s = kt_now() - t0;
    test = kt_xcalloc((size_t)ntest, sizeof(*test));
    scores = kt_xcalloc((size_t)ntest, sizeof(float));
    for (i = 0; i < ntest; i++) {
        test[i].rows = progs[test0 + i].rows;
        test[i].nrows = progs[test0 + i].nrows;
    }
    if (kt_xgb_predict(m, test, ntest, scores, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "bench_rank: predict: %s\n", err);
        exit(1);
    }
    for (i = 0; i < ntest; i++)
        for (j = i + 1; j < ntest; j++) {
            const struct prog *a = &progs[test0 + i], *b = &progs[test0 + j];
            if (a->group != b->group || a->cost == b->cost)
                continue;
            pairs++;
            if ((a->cost < b->cost) == (scores[i] > scores[j]))
                right++;
        }
    kt_train_set_free(&set);
    kt_xgb_free(m);
    free(test);
    free(scores);
    *npairs = pairs;
    return pairs ? (double)right / (double)pairs : 0.0;
}

/* Trained on the first 80% in measurement order, all of it and the
 * training windows the daemon keeps (recent, and 16 fastest per task). */
static void
time_split(void)
{
    static const int windows[] = {128, 256, 512, 1024, 2048, 4096};
    int ntrain = nprogs * 4 / 5, ntest = nprogs - ntrain, i, w, n, per_task;
    int *idx = kt_xmalloc(sizeof(int) * (size_t)ntrain);
    int64_t *task = kt_xmalloc(sizeof(int64_t) * (size_t)ntrain);
    double *cost = kt_xmalloc(sizeof(double) * (size_t)ntrain);
    unsigned char *keep = kt_xmalloc((size_t)ntrain);
    long long pairs;
    double acc, secs;

    for (i = 0; i < ntrain; i++) {
        idx[i] = i;
        task[i] = progs[i].group;
        cost[i] = progs[i].cost;
    }
    acc = rank_accuracy(idx, ntrain, ntrain, ntest, &pairs, &secs);
    printf("measurement order: trained on all %d earlier programs (%.3f s): "
           "accuracy on the last 20%%: %.3f (%lld pairs)\n",
           ntrain, secs, acc, pairs);
    for (w = 0; w < (int)KT_ARRAY_LEN(windows) && windows[w] < ntrain; w++)
        for (per_task = 0; per_task <= 16; per_task += 16) {
            kt_train_keep(task, cost, ntrain, windows[w], per_task, keep);
            for (i = n = 0; i < ntrain; i++)
                if (keep[i])
                    idx[n++] = i;
            acc = rank_accuracy(idx, n, ntrain, ntest, &pairs, &secs);
            printf("  window: the last %d + the %d fastest per task: %d "
                   "programs (%.3f s): accuracy %.3f\n",
                   windows[w], per_task, n, secs, acc);
        }
    free(idx);
    free(task);
    free(cost);
    free(keep);
}

int
main(int argc, char **argv)
{
    struct kt_rng r;
    int i, j, ntrain, *train;
    long long pairs;
    double acc, secs;

    if (argc < 2) {
        printf("bench_rank: skipped (pass tuning databases; "
               "bench/compare_policies.sh does)\n");
        return 0;
    }
    for (i = 1; i < argc; i++)
        load(argv[i]);
    if (nprogs < 20) {
        printf("bench_rank: only %d successful trials; need at least 20\n",
               nprogs);
        return 0;
    }
    time_split();
    kt_rng_seed(&r, 42);
    for (i = nprogs - 1; i > 0; i--) {
        struct prog tmp;
        j = (int)kt_rng_below(&r, (uint64_t)i + 1);
        tmp = progs[i];
        progs[i] = progs[j];
        progs[j] = tmp;
    }
    ntrain = nprogs * 4 / 5;
    train = kt_xmalloc(sizeof(int) * (size_t)ntrain);
    for (i = 0; i < ntrain; i++)
        train[i] = i;
    acc = rank_accuracy(train, ntrain, ntrain, nprogs - ntrain, &pairs, &secs);
    printf("trained on %d real programs in %.3f s\n", ntrain, secs);
    printf("pairwise ranking accuracy on the held-out 20%%: %.3f (%lld pairs, "
           "%d programs)\n",
           acc, pairs, nprogs - ntrain);
    free(train);
    for (i = 0; i < nprogs; i++)
        free(progs[i].rows);
    free(progs);
    return 0;
}
