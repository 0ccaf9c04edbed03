/* scheduler.h - what to tune: task extraction from a model config, the
 * task scheduler that picks the task to tune each round, and (added later
 * in its own section) the search policy that proposes candidates. */
#ifndef KT_SCHEDULER_H
#define KT_SCHEDULER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/common.h"
#include "config/config.h"
#include "ir/ir.h"

/* ======================================================================
 * Task extraction and task scheduler (scheduler/task_extract.c,
 * scheduler/task_sched.c)
 * ====================================================================== */

/* One tuning task: a compute DAG that occurs 'weight' times in the model. */
struct kt_task {
    char name[96];      /* readable and unique within the model */
    char tag[64];       /* similarity group tag; "" = no group */
    struct kt_dag *dag; /* owned */
    double weight;
    double flops;       /* per call, = dag->flops */
    int first_layer;    /* layers[] index it came from, -1 = tasks[] */
    int wino_m, wino_r; /* a convolution in Winograd F(m, r) form, else 0:
                         * its weight argument is U = G W (ir/ir.h) */
};

struct kt_tasks {
    int n;
    struct kt_task *v;
};

/* Builds the tasks of a model: each layer (expanded by "repeat") becomes a
 * DAG through the IR operator library; a relu, or an add with
 * "operand": "bias", that directly follows a conv2d/dense with the same
 * output shape is fused into that layer's epilogue; layers with equal
 * workload keys become one task whose weight is the count.  Explicit
 * "tasks" are parsed as written and merged by workload key the same way
 * (weights add).  Task order is first occurrence.  On error returns the
 * IR's code with "path: layers[i] (op): message" in err.  Caller frees
 * with kt_tasks_free. */
int kt_tasks_extract(const struct kt_model_conf *m, struct kt_tasks *out,
                     char *err, size_t errlen);
void kt_tasks_free(struct kt_tasks *t); /* NULL is a no-op */
/* For a model with an "onnx" file: writes its graph in execution order
 * (kt_onnx_print_graph); the task numbers there are the indices of
 * kt_tasks_extract.  Nothing for other models. */
int kt_tasks_print_graph(const struct kt_model_conf *m, FILE *f, char *err,
                         size_t errlen);
/* For a model with an "onnx" file: the imported graph (kt_onnx_import
 * with the model's "inputs" and "partial"); the caller frees it with
 * kt_onnx_free. */
struct kt_onnx_graph;
int kt_tasks_import_onnx(const struct kt_model_conf *m,
                         struct kt_onnx_graph **g, char *err, size_t errlen);
/* Sum of weight x flops over the tasks. */
double kt_tasks_total_flops(const struct kt_tasks *t);

/* ---- Task scheduler ----------------------------------------------------
 * Pure logic (no I/O, no clock): Ansor's task scheduler (docs/design.md
 * section 2) with costs in seconds.  The caller loops:
 *
 *     while ((i = kt_task_sched_next(s)) >= 0) {
 *         ... search and measure up to kt_task_sched_round_trials(s, i)
 *         kt_task_sched_update(s, i, best_cost_of_this_round, n_measured);
 *     }
 */
#define KT_SCHED_NO_COST 1e10 /* best cost of a task with no valid program */

struct kt_task_sched_opts {
    int strategy;   /* enum kt_strategy */
    int64_t trials; /* total budget */
    int64_t measures_per_round;
    int64_t early_stopping;     /* per task, trials; 0 = off */
    int64_t early_stopping_all; /* whole model, trials; 0 = off */
    int64_t max_failed_rounds;  /* 0 = never */
    double alpha, beta;
    int64_t backward_window_size;
    uint64_t seed;
};

/* Fills o from a model's tuning section. */
void kt_task_sched_opts_from_conf(struct kt_task_sched_opts *o,
                                  const struct kt_tuning_conf *t);

/* Why kt_task_sched_next returned -1. */
enum kt_sched_stop {
    KT_SCHED_RUNNING,
    KT_SCHED_BUDGET,    /* trials used up */
    KT_SCHED_ALL_DEAD,  /* every task exhausted or early-stopped */
    KT_SCHED_EARLY_STOP /* early_stopping_all fired */
};

struct kt_task_sched; /* opaque */

/* Creates a scheduler for n tasks with weights[i] and flops[i]; tags[i]
 * (may be NULL or "" for none) define the similarity groups.  Copies
 * everything.  Returns KT_EINVAL with a message when n < 1 or when
 * min(measures_per_round, trials / n) is 0 (the budget is smaller than one
 * trial per task). */
int kt_task_sched_new(struct kt_task_sched **out, int n, const double *weights,
                      const double *flops, const char *const *tags,
                      const struct kt_task_sched_opts *o, char *err,
                      size_t errlen);
void kt_task_sched_free(struct kt_task_sched *s); /* NULL is a no-op */
/* An independent deep copy (the engine asks a copy "which task next if the
 * pending round brings no gain?" to search ahead while a batch is being
 * measured).  Caller frees with kt_task_sched_free. */
struct kt_task_sched *kt_task_sched_clone(const struct kt_task_sched *s);

/* The task to tune next, or -1 when done (see kt_task_sched_stopped).
 * Warm-up: every task not yet tuned, the largest weight x flops first (ties
 * in index order).  Then gradient (the most negative gradient; all equal
 * -> a seeded random live task) or round-robin (the next live task).
 * Calling it twice without an update returns the same task. */
int kt_task_sched_next(struct kt_task_sched *s);
/* Trials of a round after the warm-up: min(measures_per_round, trials / n). */
int64_t kt_task_sched_per_round(const struct kt_task_sched *s);
/* Trials to measure in task i's next round: the per-round count, except
 * in its warm-up round, which gets trials / (2 n) (at least
 * KT_SCHED_MIN_WARM_ROUND, at most the per-round count): the warm-up
 * leaves half the budget to the gradient (docs/design.md 2.1). */
#define KT_SCHED_MIN_WARM_ROUND 8
int64_t kt_task_sched_round_trials(const struct kt_task_sched *s, int i);
/* Records one round of task i: best_cost is the best cost (seconds) among
 * this round's valid results (>= KT_SCHED_NO_COST or <= 0 when none was
 * valid) and n_trials the number of programs measured (0 means the search
 * space is exhausted: the task becomes dead).  Returns KT_EINVAL for a bad
 * index. */
int kt_task_sched_update(struct kt_task_sched *s, int i, double best_cost,
                         int64_t n_trials);
/* Restores one task's state (resume from the database): rounds tuned, the
 * round of the last improvement, the best cost after each round (history,
 * nrounds entries, may be NULL: then only best_cost is known), and trials
 * measured.  Call before the first kt_task_sched_next. */
int kt_task_sched_restore(struct kt_task_sched *s, int i, int64_t rounds,
                          int64_t best_round, const double *history,
                          double best_cost, int64_t trials);
/* The target's measured float FMA peak in FLOP/s (0: unknown, the
 * default): only the part of a task's latency above flops / peak then
 * counts as room to gain in the forward gradient, so the rounds go where
 * there is room (docs/design.md 2.3). */
void kt_task_sched_set_peak(struct kt_task_sched *s, double flops_per_s);
/* The roofline the gradient uses: that peak, raised to the fastest task's
 * speed when one beats it; 0 without a peak. */
double kt_task_sched_roof(const struct kt_task_sched *s);
enum kt_sched_stop kt_task_sched_stopped(const struct kt_task_sched *s);
const char *kt_sched_stop_name(enum kt_sched_stop why);

/* Read-outs for the task table (all by task index). */
int kt_task_sched_ntasks(const struct kt_task_sched *s);
double kt_task_sched_best_cost(const struct kt_task_sched *s, int i);
/* Latency in ms, or -1 when the task has no valid program yet. */
double kt_task_sched_latency_ms(const struct kt_task_sched *s, int i);
/* flops / best cost / 1e9, or -1 when there is no valid program yet. */
double kt_task_sched_gflops(const struct kt_task_sched *s, int i);
int64_t kt_task_sched_trials(const struct kt_task_sched *s, int i);
int64_t kt_task_sched_rounds(const struct kt_task_sched *s, int i);
int kt_task_sched_is_dead(const struct kt_task_sched *s, int i);
/* Group id of task i, or -1 when it is in no group (or left it). */
int kt_task_sched_group(const struct kt_task_sched *s, int i);
/* Trials measured so far, over all tasks. */
int64_t kt_task_sched_total_trials(const struct kt_task_sched *s);
/* Estimated total latency, sum of weight x best cost, in ms; -1 until
 * every task has a valid program. */
double kt_task_sched_total_latency_ms(const struct kt_task_sched *s);
/* The gradient of task i as computed by the last gradient pick (0 for
 * dead tasks and before the first pick); for logs and tests. */
double kt_task_sched_gradient(const struct kt_task_sched *s, int i);

/* ======================================================================
 * Search policy (scheduler/search_*.c; docs/search.md)
 *
 * Ansor's sketch policy for CPUs: sketches (always-inline, multi-level
 * tiling "SSRSRS" and the k-panel order "SRSRS", fusion of an elementwise
 * consumer, cache write, rfactor "SSRSR" with a vectorized reduction), an
 * initial population from the init rules, an
 * evolutionary search scored by the cost model, eps-greedy picking and
 * deduplication against everything measured.  One struct kt_search per
 * task; every call locks the instance, so the engine may run it on a pool
 * thread.  No globals, no printing; deterministic for a seed (also with
 * several scoring threads).
 * ====================================================================== */

struct kt_search_opts {
    int policy;                /* enum kt_policy (config/config.h) */
    int population;            /* 2048 */
    int num_iters;             /* 4 (<= 2 with random scores, as Ansor) */
    double mutation_prob;      /* 0.85 */
    double eps_greedy;         /* 0.05 */
    double use_measured_ratio; /* 0.2: measured seeds in the population */
    int max_innermost_factor;  /* 64 */
    int max_innermost_reduce;  /* 512: longer reductions get cache_write */
    int max_reduce_run;        /* 1024: a multi-level tiling's innermost
                                  reduction part */
    int max_register_tile;     /* 384: floats in the innermost spatial tile */
    int vector_bytes;          /* 64 (AVX-512) */
    int cores;                 /* parallel degree aim = 16 x cores; 2 */
    int nthreads;              /* scoring threads; 1 */
    uint64_t seed;
};

/* Ansor's DEFAULT_PARAMS with this machine's vector width and cores. */
void kt_search_opts_default(struct kt_search_opts *o);
struct kt_search;    /* opaque */
struct kt_xgb_model; /* costmodel/costmodel.h */

/* Creates a search for dag (borrowed; must outlive the search): generates
 * the sketches.  KT_EINVAL for bad options, KT_ESCHEDULE when no sketch
 * can be built.  Caller frees with kt_search_free. */
int kt_search_new(struct kt_search **out, const struct kt_dag *dag,
                  const struct kt_search_opts *o, char *err, size_t errlen);
void kt_search_free(struct kt_search *s); /* NULL is a no-op */
/* Number of sketches and a one-line description of sketch i (borrowed). */
int kt_search_nsketches(struct kt_search *s);
const char *kt_search_sketch_desc(struct kt_search *s, int i);

/* One proposed candidate, built once: its steps replayed into state,
 * lowered into lt and its features extracted here, so the trial path
 * generates code from lt and trains on rows without building it again.
 * Owned by its batch; a caller may take any pointer and set it to NULL. */
struct kt_search_cand {
    struct kt_step *steps;
    int nsteps;
    struct kt_state *state;
    struct kt_looptree *lt;
    float *rows; /* nrows x KT_FEATURE_LEN; NULL when extraction failed */
    int nrows;
    char *feature_err; /* why rows is NULL (owned) */
    char hash[17];     /* kt_steps_hash of the steps */
    float score;       /* predicted; random-model score if none */
    int from_random;   /* an eps-greedy random pick */
    char seed_of[17];  /* "" or the schedule hash of the measured program
                        * (this run's or a stored one) it was mutated from,
                        * or with transfer set, the other workload's
                        * program it was carried over from */
    int transfer;      /* carried over from another workload's program */
};

struct kt_search_batch {
    int n;
    struct kt_search_cand *v;
};
void kt_search_batch_free(struct kt_search_batch *b); /* NULL is a no-op */

/* One generation of the evolutionary search (the task table's "GA Iter"
 * lines): the best and the worst score kept for output so far, the
 * population scored, and the mutations that produced it. */
#define KT_SEARCH_MAX_GENERATIONS 16
struct kt_search_generation {
    float max_score, min_score;
    int pop;
    int mutations_ok, mutations_fail;
};

/* What one call did, for the task table's "[ Search ]" section. */
struct kt_search_stats {
    int sketches;
    int sampled;        /* valid initial-population members */
    int sample_fail;    /* sampled genomes that did not lower */
    int measured_seeds; /* measured states put into the population */
    int iters;          /* GA generations run */
    int mutations_ok, mutations_fail;
    int scored;               /* programs built, lowered and scored */
    int skipped_measured;     /* picks dropped as already measured */
    int skipped_same_program; /* picks that lower to a program already
                                 proposed or measured */
    int picked_best, picked_random;
    int picked_transfer; /* of picked_best: other workloads' schedules
                            carried over (kt_search_seed_other) */
    int picked_fresh;    /* of picked_best: taken as descending from no
                            seed while the search had few such programs */
    float best_score;
    double sample_s, evo_s, score_s, total_s;
    int ngenerations; /* iters + 1 (the initial population), at
                                  most KT_SEARCH_MAX_GENERATIONS kept */
    struct kt_search_generation gen[KT_SEARCH_MAX_GENERATIONS];
};

/* Proposes up to n candidates that are distinct, lower without error and
 * are neither in measured[] (kt_storage_measured hashes, may be NULL; the
 * search remembers them, so a later call may pass NULL) nor recorded nor
 * returned by an earlier call of this search; fewer only when
 * the space looks exhausted (0 = exhausted).  model may be NULL or
 * untrained: random scores are used then (Ansor's first round).  out is
 * overwritten (free it with kt_search_batch_free); stats may be NULL. */
int kt_search_next_batch(struct kt_search *s, struct kt_xgb_model *model,
                         const uint64_t *measured, size_t nmeasured, int n,
                         struct kt_search_batch *out,
                         struct kt_search_stats *stats, char *err,
                         size_t errlen);

/* Feeds back one measured result: cost in seconds (<= 0 or not finite =
 * failed).  A candidate of this search that ran is remembered as a seed of
 * later initial populations, and so is a successful schedule measured
 * elsewhere (a stored record after a restart) whose steps decode into a
 * genome of this search (scheduler/search_seed.c); any schedule is never
 * proposed again.  A measured program recorded again keeps the faster of
 * its costs (measured again once its host's CPUs were close).  Returns 1
 * if it seeds the search, 0 if only its hash was recorded. */
int kt_search_record(struct kt_search *s, const struct kt_step *steps,
                     int nsteps, double cost);

/* A successful schedule of another workload (same target): when its steps
 * decode into a genome of this search (the same sketch, tiles that divide
 * this workload's extents), it seeds later populations like a measured
 * program, cost being what it would take here at the other workload's
 * throughput.  It is not marked measured: the same program may still be
 * proposed for this workload.  Otherwise, given the other workload's DAG
 * (from; NULL: not known), each stage of it that computes what a tiled
 * stage of this workload computes (the same convolution with or without
 * a bias and relu after it) lends its genes to a genome of each sketch
 * that has such a stage, and a next batch measures the best predicted of
 * them as it is (at most 1 in 4 of a batch are such).  Returns 1 if it
 * seeds the search either way. */
int kt_search_seed_other(struct kt_search *s, const struct kt_step *steps,
                         int nsteps, double cost, const struct kt_dag *from);

#endif /* KT_SCHEDULER_H */
