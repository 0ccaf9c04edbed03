/* scheduler.h - what to tune: task extraction from a model config, the
 * task scheduler that picks the task to tune each round, and (added later
 * in its own section) the search policy that proposes candidates. */
#ifndef KT_SCHEDULER_H
#define KT_SCHEDULER_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "config/config.h"
#include "ir/ir.h"

/* ======================================================================
 * Task extraction and task scheduler (scheduler/task_extract.c,
 * scheduler/task_sched.c)
 * ====================================================================== */

/* One tuning task: a compute DAG that occurs 'weight' times in the model. */
struct kt_task {
    char name[96];             /* readable and unique within the model */
    char tag[64];              /* similarity group tag; "" = no group */
    struct kt_dag *dag;        /* owned */
    double weight;
    double flops;              /* per call, = dag->flops */
    int first_layer;           /* layers[] index it came from, -1 = tasks[] */
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
void kt_tasks_free(struct kt_tasks *t);    /* NULL is a no-op */
/* Sum of weight x flops over the tasks. */
double kt_tasks_total_flops(const struct kt_tasks *t);

/* ---- Task scheduler ----------------------------------------------------
 * Pure logic (no I/O, no clock): Ansor's task scheduler (ANSOR.md section
 * 1) with costs in seconds.  The caller loops:
 *
 *     while ((i = kt_task_sched_next(s)) >= 0) {
 *         ... search and measure up to kt_task_sched_per_round(s) trials
 *         kt_task_sched_update(s, i, best_cost_of_this_round, n_measured);
 *     }
 */
#define KT_SCHED_NO_COST 1e10  /* best cost of a task with no valid program */

struct kt_task_sched_opts {
    int strategy;              /* enum kt_strategy */
    int64_t trials;            /* total budget */
    int64_t measures_per_round;
    int64_t early_stopping;    /* per task, trials; 0 = off */
    int64_t early_stopping_all; /* whole model, trials; 0 = off */
    int64_t max_failed_rounds; /* 0 = never */
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
    KT_SCHED_BUDGET,           /* trials used up */
    KT_SCHED_ALL_DEAD,         /* every task exhausted or early-stopped */
    KT_SCHED_EARLY_STOP        /* early_stopping_all fired */
};

struct kt_task_sched;          /* opaque */

/* Creates a scheduler for n tasks with weights[i] and flops[i]; tags[i]
 * (may be NULL or "" for none) define the similarity groups.  Copies
 * everything.  Returns KT_EINVAL with a message when n < 1 or when
 * min(measures_per_round, trials / n) is 0 (the budget is smaller than one
 * trial per task). */
int kt_task_sched_new(struct kt_task_sched **out, int n, const double *weights,
                      const double *flops, const char *const *tags,
                      const struct kt_task_sched_opts *o, char *err,
                      size_t errlen);
void kt_task_sched_free(struct kt_task_sched *s);   /* NULL is a no-op */

/* The task to tune next, or -1 when done (see kt_task_sched_stopped).
 * Warm-up: every task not yet tuned, in index order.  Then gradient (the
 * most negative gradient; all equal -> a seeded random live task) or
 * round-robin (the next live task).  Calling it twice without an update
 * returns the same task. */
int kt_task_sched_next(struct kt_task_sched *s);
/* Trials to measure this round: min(measures_per_round, trials / n). */
int64_t kt_task_sched_per_round(const struct kt_task_sched *s);
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
 * Search policy (to be added below by its owner)
 * ====================================================================== */

#endif /* KT_SCHEDULER_H */
