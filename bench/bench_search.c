/* bench_search.c - one search round on the conv2d task of docs/design.md section 6
 * (3x3, 64->64, 56x56, pad 1, +bias+relu): population 2048, 4 GA
 * iterations, scored by an XGBoost model (trained first on 512 of the
 * task's own candidates labelled with ktt_synthetic_cost, since no
 * measurements exist here), then the same with the random model, and the
 * feature extraction rate on real lowered candidate trees (programs/s).
 *
 * KT_BENCH_THREADS sets the scoring threads (default 2: this machine's
 * cores); KT_BENCH_POP the population. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "costmodel/costmodel.h"
#include "ir/ir.h"
#include "tests/support/ktt.h"
#include "scheduler/scheduler.h"

static int
env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v != NULL && *v ? atoi(v) : def;
}

static void
print_stats(const char *what, const struct kt_search_stats *st, int n)
{
    printf("%-28s %6.3f s total  (sample %.3f s, evolution %.3f s, of which "
           "build+lower+features+predict %.3f s)\n",
           what, st->total_s, st->sample_s, st->evo_s, st->score_s);
    /* picking: the chosen programs are built, lowered and featurized once
     * more (scoring keeps no trees) */
    printf("    picking the batch (rebuild of %d programs) %.4f s\n", n,
           st->total_s - st->sample_s - st->evo_s);
    printf("    sketches %d, sampled %d (fail %d), GA iters %d, mutations "
           "+%d/-%d, programs scored %d, returned %d, best score %.4g\n",
           st->sketches, st->sampled, st->sample_fail, st->iters,
           st->mutations_ok, st->mutations_fail, st->scored, n,
           (double)st->best_score);
}

/* The work after the search's replay for one candidate: lowering and
 * features, then the module.  before != 0: as the trial path did it before
 * the search carried the tree (kt_codegen_module lowers the candidate and
 * the reference again); else as now (the lowering and features are take()'s,
 * the module comes from that tree and the round's reference tree). */
static int
post_search(const struct kt_dag *dag, const struct kt_search_cand *c,
            const struct kt_looptree *ref, const struct kt_codegen_opts *cg,
            int before, size_t *bytes)
{
    struct kt_looptree *lt = NULL;
    struct kt_buf src;
    float *rows = NULL;
    int nrows = 0, rc;
    char err[512];

    kt_buf_init(&src);
    rc = kt_lower(c->state, &lt, err, sizeof(err));
    if (rc == KT_OK)
        rc = kt_features_extract(lt, &rows, &nrows, err, sizeof(err));
    if (rc == KT_OK)
        rc = before
                 ? kt_codegen_module(c->state, dag, cg, &src, err, sizeof(err))
                 : kt_codegen_module_lowered(ref, lt, dag, cg, &src, err,
                                             sizeof(err));
    *bytes += src.len;
    free(rows);
    kt_buf_free(&src);
    kt_looptree_free(lt);
    if (rc != KT_OK)
        fprintf(stderr, "candidate: %s\n", err);
    return rc;
}

/* The trial path after the search's replay, for the round's candidates,
 * both ways in this process (post_search). */
static int
trial_path(const struct kt_dag *dag, const struct kt_search_batch *b)
{
    struct kt_codegen_opts cg;
    struct kt_looptree *ref = NULL;
    size_t bytes[2] = {0, 0};
    double t0, t[2];
    char err[512];
    int i, way;

    kt_codegen_default_opts(&cg);
    for (way = 0; way < 2; way++) {
        t0 = kt_now();
        if (way == 1 &&
            kt_lower_reference(dag, &ref, err, sizeof(err)) != KT_OK) {
            fprintf(stderr, "reference: %s\n", err);
            return 1;
        }
        for (i = 0; i < b->n; i++)
            if (post_search(dag, &b->v[i], ref, &cg, way == 0, &bytes[way]) !=
                KT_OK)
                return 1;
        t[way] = kt_now() - t0;
    }
    kt_looptree_free(ref);
    printf("trial path of %d candidates after the search's replay (lower, "
           "features, module): %.3f s lowering each again in the module, "
           "%.3f s from the one tree (%.2fx), same source: %s\n",
           b->n, t[0], t[1], t[1] > 0 ? t[0] / t[1] : 0.0,
           bytes[0] == bytes[1] ? "yes" : "NO");
    return bytes[0] == bytes[1] ? 0 : 1;
}

int
main(void)
{
    struct kt_conv2d_params p = {
        .N = 1,
        .C = 64,
        .H = 56,
        .W = 56,
        .K = 64,
        .R = 3,
        .S = 3,
        .stride_h = 1,
        .stride_w = 1,
        .pad_h = 1,
        .pad_w = 1,
        .dilation_h = 1,
        .dilation_w = 1,
        .groups = 1,
        .epilogue = KT_EPI_BIAS | KT_EPI_RELU,
    };
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_search_opts o;
    struct kt_search *s = NULL;
    struct kt_search_batch b = {0, NULL};
    struct kt_search_stats st;
    struct kt_xgb_model *model = kt_xgb_new(NULL);
    struct kt_train_set set;
    char err[512];
    int i, nprog = 0, nrows_total = 0;
    double t0, tx;

    kt_op_conv2d(&d, &p);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    kt_search_opts_default(&o);
    o.nthreads = env_int("KT_BENCH_THREADS", 2);
    o.population = env_int("KT_BENCH_POP", 2048);
    o.seed = 7;
    if (kt_search_new(&s, dag, &o, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("task %s: %d sketches, population %d, %d GA iterations, %d "
           "scoring threads\n",
           d.name, kt_search_nsketches(s), o.population, o.num_iters,
           o.nthreads);

    /* Round 1: random model (no trained model yet), as Ansor's first round. */
    if (kt_search_next_batch(s, NULL, NULL, 0, 512, &b, &st, err, sizeof(err))) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    print_stats("round 1 (random model, 2 it)", &st, b.n);

    /* Feature extraction rate on these real candidates, and training data
     * labelled with a synthetic cost (no measurements here). */
    kt_train_set_init(&set);
    tx = 0;
    for (i = 0; i < b.n; i++) {
        struct kt_state *state = NULL;
        struct kt_looptree *lt = NULL;
        float *rows = NULL;
        int nrows = 0;
        double sec = 0;
        if (kt_state_replay(dag, b.v[i].steps, b.v[i].nsteps, &state, err,
                            sizeof(err)) != KT_OK ||
            kt_lower(state, &lt, err, sizeof(err)) != KT_OK) {
            fprintf(stderr, "candidate %d: %s\n", i, err);
            return 1;
        }
        t0 = kt_now();
        if (kt_features_extract(lt, &rows, &nrows, err, sizeof(err)) != KT_OK) {
            fprintf(stderr, "features: %s\n", err);
            return 1;
        }
        tx += kt_now() - t0;
        nrows_total += nrows;
        nprog++;
        sec = ktt_synthetic_cost(rows, nrows);
        kt_train_set_add(&set, rows, nrows, 0, sec);
        free(rows);
        kt_looptree_free(lt);
        kt_state_free(state);
        kt_search_record(s, b.v[i].steps, b.v[i].nsteps, sec);
    }
    printf("feature extraction: %d lowered conv2d candidates, %.1f rows each, "
           "%.0f programs/s (one core)\n",
           nprog, (double)nrows_total / nprog, nprog / tx);
    kt_train_set_label(&set, 0);
    if (kt_xgb_train(model, &set, NULL, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "train: %s\n", err);
        return 1;
    }
    kt_train_set_free(&set);
    kt_search_batch_free(&b);

    /* Round 2: the XGBoost model, 4 iterations: the number to report. */
    if (kt_search_next_batch(s, model, NULL, 0, 64, &b, &st, err, sizeof(err))) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    print_stats("round 2 (xgb, 4 it, 64 out)", &st, b.n);
    printf("one search round (population %d x %d iterations, scoring "
           "included): %.3f s (target <= 0.5 s)\n",
           o.population, st.iters, st.total_s);
    if (trial_path(dag, &b) != 0)
        return 1;
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_xgb_free(model);
    kt_dag_free(dag);
    return 0;
}
