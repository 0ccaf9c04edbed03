/* task_sched.c - the task scheduler: which task gets the next round of
 * measurements.  A transcription of Ansor's TaskScheduler (TVM v0.14.0
 * python/tvm/auto_scheduler/task_scheduler.py) as described in
 * docs/design.md section 2, with costs in seconds and the objective
 * f = sum_i weight_i * best_cost_i.  Deliberate differences, each marked
 * "Deviation" below: the chain gradient is w_i exactly instead of a finite
 * difference; the all-equal tie picks among live tasks only; the options
 * max_failed_rounds (docs/design.md 2.5) and the per-task early stopping are 0 =
 * off; trial counts are exact rather than rounds x per_round; the warm-up
 * rounds take at most half the budget and go largest task first; with the
 * target's FMA peak known, the forward gradient has a roofline.
 *
 * Pure logic: no I/O, no clock, randomness from a seeded kt_rng. */
#include "scheduler/scheduler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Latencies at or above this mean "no valid program" (docs/design.md 2.1). */
#define VALID_LIMIT 1e9

struct kt_task_sched {
    int n;
    struct kt_task_sched_opts o;
    int64_t per_round;
    int64_t warm_round; /* trials of a task's first round */
    double *weight, *flops, *best, *grad;
    double peak_flops;   /* FLOP/s of the target's FMA peak; 0 = unknown */
    int64_t *rounds;     /* task_cts */
    int64_t *best_round; /* task_best_cts */
    int64_t *trials;     /* exact trials measured per task */
    double **hist;       /* task_costs_history */
    int64_t *hist_n, *hist_cap;
    char *dead;
    int ndead;
    int *group; /* -1 = none */
    int *group_size;
    struct kt_rng rng;
    int64_t ct, best_ct;
    double cur_score, best_score;
    int warmed;  /* warm-up round robin finished */
    int pending; /* task returned by next, not yet updated */
    int rr_idx;
    enum kt_sched_stop stop;
};

void
kt_task_sched_opts_from_conf(struct kt_task_sched_opts *o,
                             const struct kt_tuning_conf *t)
{
    memset(o, 0, sizeof(*o));
    o->strategy = t->strategy;
    o->trials = t->trials;
    o->measures_per_round = t->measures_per_round;
    o->early_stopping = t->early_stopping;
    o->early_stopping_all = t->early_stopping_all;
    o->max_failed_rounds = t->max_failed_rounds;
    o->alpha = t->alpha;
    o->beta = t->beta;
    o->backward_window_size = t->backward_window_size;
    o->seed = (uint64_t)t->seed;
}

static double
score(const struct kt_task_sched *s)
{
    double f = 0;
    int i;
    for (i = 0; i < s->n; i++)
        f += s->weight[i] * s->best[i];
    return f;
}

int
kt_task_sched_new(struct kt_task_sched **out, int n, const double *weights,
                  const double *flops, const char *const *tags,
                  const struct kt_task_sched_opts *o, char *err, size_t errlen)
{
    struct kt_task_sched *s;
    int i, j;

    *out = NULL;
    if (n < 1)
        return kt_seterr(err, errlen, KT_EINVAL, "task scheduler: no tasks");
    if (o->measures_per_round < 1 || o->trials < 1 || o->beta <= 0 ||
        o->backward_window_size < 1 || o->alpha < 0 || o->alpha > 1)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "task scheduler: invalid "
                         "options");
    /* docs/design.md 2.1. */
    if (o->trials / n < 1)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "task scheduler: %lld "
                         "trials are too few for %d tasks (at least one "
                         "per task)",
                         (long long)o->trials, n);
    s = kt_xcalloc(1, sizeof(*s));
    s->n = n;
    s->o = *o;
    s->per_round = o->measures_per_round < o->trials / n ? o->measures_per_round
                                                         : o->trials / n;
    /* Deviation (docs/design.md 2.1): the warm-up takes at most half the
     * budget, so that the gradient rounds can go to the tasks that cost
     * the most; Ansor's warm-up at trials / n per task is the whole run. */
    s->warm_round = o->trials / (2 * (int64_t)n);
    if (s->warm_round < KT_SCHED_MIN_WARM_ROUND)
        s->warm_round = KT_SCHED_MIN_WARM_ROUND;
    if (s->warm_round > s->per_round)
        s->warm_round = s->per_round;
    s->weight = kt_xcalloc((size_t)n, sizeof(double));
    s->flops = kt_xcalloc((size_t)n, sizeof(double));
    s->best = kt_xcalloc((size_t)n, sizeof(double));
    s->grad = kt_xcalloc((size_t)n, sizeof(double));
    s->rounds = kt_xcalloc((size_t)n, sizeof(int64_t));
    s->best_round = kt_xcalloc((size_t)n, sizeof(int64_t));
    s->trials = kt_xcalloc((size_t)n, sizeof(int64_t));
    s->hist = kt_xcalloc((size_t)n, sizeof(double *));
    s->hist_n = kt_xcalloc((size_t)n, sizeof(int64_t));
    s->hist_cap = kt_xcalloc((size_t)n, sizeof(int64_t));
    s->dead = kt_xcalloc((size_t)n, 1);
    s->group = kt_xcalloc((size_t)n, sizeof(int));
    s->group_size = kt_xcalloc((size_t)n, sizeof(int));
    for (i = 0; i < n; i++) {
        s->weight[i] = weights != NULL ? weights[i] : 1.0;
        s->flops[i] = flops != NULL ? flops[i] : 0.0;
        s->best[i] = KT_SCHED_NO_COST;
        s->group[i] = -1;
    }
    /* docs/design.md 2.4: equal non-empty tags form a group; the group id is the
     * index of its first member. */
    for (i = 0; tags != NULL && i < n; i++) {
        if (tags[i] == NULL || tags[i][0] == '\0')
            continue;
        for (j = 0; j <= i; j++) {
            if (tags[j] != NULL && strcmp(tags[j], tags[i]) == 0) {
                s->group[i] = j;
                s->group_size[j]++;
                break;
            }
        }
    }
    kt_rng_seed(&s->rng, o->seed);
    s->cur_score = score(s);
    s->pending = -1;
    s->rr_idx = -1;
    *out = s;
    return 0;
}

void
kt_task_sched_free(struct kt_task_sched *s)
{
    int i;
    if (s == NULL)
        return;
    for (i = 0; i < s->n; i++)
        free(s->hist[i]);
    free(s->hist);
    free(s->hist_n);
    free(s->hist_cap);
    free(s->weight);
    free(s->flops);
    free(s->best);
    free(s->grad);
    free(s->rounds);
    free(s->best_round);
    free(s->trials);
    free(s->dead);
    free(s->group);
    free(s->group_size);
    free(s);
}

static void
hist_push(struct kt_task_sched *s, int i, double v)
{
    if (s->hist_n[i] == s->hist_cap[i]) {
        s->hist_cap[i] = s->hist_cap[i] ? 2 * s->hist_cap[i] : 16;
        s->hist[i] = kt_xrealloc(s->hist[i],
                                 (size_t)s->hist_cap[i] * sizeof(double));
    }
    s->hist[i][s->hist_n[i]++] = v;
}

static void
mark_dead(struct kt_task_sched *s, int i)
{
    if (!s->dead[i]) {
        s->dead[i] = 1;
        s->ndead++;
    }
}

/* Best speed (flops per second) over the members of group g. */
static double
group_best_flops(const struct kt_task_sched *s, int g)
{
    double b = 0;
    int j;
    for (j = 0; j < s->n; j++)
        if (s->group[j] == g && s->flops[j] / s->best[j] > b)
            b = s->flops[j] / s->best[j];
    return b;
}

/* The roofline of the gradient: the measured peak, or the fastest task's
 * speed when that is higher (a peak timed under load is low), 0 without
 * a measured peak. */
static double
roof_flops(const struct kt_task_sched *s)
{
    double r = s->peak_flops;
    int i;

    if (!(r > 0))
        return 0;
    for (i = 0; i < s->n; i++)
        if (s->best[i] < VALID_LIMIT && s->flops[i] / s->best[i] > r)
            r = s->flops[i] / s->best[i];
    return r;
}

/* docs/design.md 2.3: the gradient of task i (not dead), with roofline
 * peak (FLOP/s, 0 = none). */
static double
gradient(const struct kt_task_sched *s, int i, double peak)
{
    int64_t t = s->rounds[i], w = s->o.backward_window_size;
    double chain, backward = 0, g1, g2, forward, roof, best = s->best[i];

    /* chain_grad = df/dg_i.  Deviation: Ansor takes a finite difference
     * with delta 1e-4, which for the weighted sum is w_i up to rounding
     * (and the rounding is large next to the 1e10 sentinel). */
    chain = s->weight[i];
    /* backward_grad = (g_i(t) - g_i(t - W)) / W over the history. */
    if (t - 1 < s->hist_n[i] && t - 1 - w >= 0)
        backward = (s->hist[i][t - 1] - s->hist[i][t - 1 - w]) / (double)w;
    /* forward_grad: latency keeps falling like 1/t (g_next_1), or reaches
     * beta times the best speed of a similar task (g_next_2).  Deviation
     * (docs/design.md 2.3): with the target's FMA peak known, what falls
     * like 1/t is the part of the latency above the task's roofline
     * flops / peak, not all of it. */
    roof = peak > 0 ? s->flops[i] / peak : 0;
    if (roof > best)
        roof = best;
    g1 = t > 0 ? best - (best - roof) / (double)t : best;
    g2 = s->o.beta * 1e30;
    if (s->group[i] >= 0 && s->group_size[s->group[i]] > 1) {
        double bf = group_best_flops(s, s->group[i]);
        if (bf > 0)
            g2 = s->o.beta * s->flops[i] / bf;
    }
    forward = (g1 < g2 ? g1 : g2) - best;
    return chain * (s->o.alpha * backward + (1 - s->o.alpha) * forward);
}

static int
pick_gradient(struct kt_task_sched *s)
{
    double gmin = 0, gmax = 0, peak = roof_flops(s);
    int i, first = 1, arg = -1, nlive = 0;
    uint64_t k;

    for (i = 0; i < s->n; i++) {
        double g = s->dead[i] ? 0 : gradient(s, i, peak);
        s->grad[i] = g;
        if (first || g < gmin) {
            gmin = g;
            arg = i; /* argmin: the first index of the minimum */
        }
        if (first || g > gmax)
            gmax = g;
        first = 0;
        if (!s->dead[i])
            nlive++;
    }
    if (gmax != gmin)
        return arg;
    /* All gradients equal: Ansor picks uniformly among all tasks.
     * Deviation: among the live ones (docs/design.md 5: a dead pick wastes the
     * round). */
    k = kt_rng_below(&s->rng, (uint64_t)nlive);
    for (i = 0; i < s->n; i++) {
        if (s->dead[i])
            continue;
        if (k == 0)
            return i;
        k--;
    }
    return -1;
}

int
kt_task_sched_next(struct kt_task_sched *s)
{
    int i;
    if (s->pending >= 0)
        return s->pending;
    if (s->stop != KT_SCHED_RUNNING)
        return -1;
    /* docs/design.md 2.2 step 1: warm-up over the untuned tasks (restored
     * tasks skip it), the largest weight x flops first.  Deviation: Ansor
     * goes in index order; the small tasks that keep only their warm-up's
     * trials gain most from a trained model and from in-job seeds.  The
     * budget is not checked here. */
    if (!s->warmed) {
        int pick = -1;
        for (i = 0; i < s->n; i++)
            if (s->rounds[i] == 0 && !s->dead[i] &&
                (pick < 0 ||
                 s->weight[i] * s->flops[i] > s->weight[pick] * s->flops[pick]))
                pick = i;
        if (pick >= 0) {
            s->pending = pick;
            return pick;
        }
        s->warmed = 1;
        s->best_ct = s->ct;
        s->best_score = s->cur_score;
    }
    /* Step 7: the main loop's condition. */
    if (s->ct >= s->o.trials) {
        s->stop = KT_SCHED_BUDGET;
        return -1;
    }
    if (s->ndead >= s->n) {
        s->stop = KT_SCHED_ALL_DEAD;
        return -1;
    }
    if (s->o.strategy == KT_STRATEGY_ROUND_ROBIN) {
        do {
            s->rr_idx = (s->rr_idx + 1) % s->n;
        } while (s->dead[s->rr_idx]);
        s->pending = s->rr_idx;
    } else {
        s->pending = pick_gradient(s);
    }
    return s->pending;
}

/* docs/design.md 2.4: a task that is tuned far more than the rest of its group
 * and is still much slower leaves the group. */
static void
adjust_group(struct kt_task_sched *s, int i)
{
    int g = s->group[i], j;
    int64_t maxr = 0;
    double bf, cur;
    if (g < 0 || s->group_size[g] <= 1)
        return;
    bf = group_best_flops(s, g);
    cur = s->flops[i] / s->best[i];
    for (j = 0; j < s->n; j++)
        if (j != i && s->group[j] == g && s->rounds[j] > maxr)
            maxr = s->rounds[j];
    if (cur < bf / s->o.beta && s->rounds[i] > 5 + maxr) {
        s->group[i] = -1;
        s->group_size[g]--;
    }
}

static int
all_valid(const struct kt_task_sched *s)
{
    int i;
    for (i = 0; i < s->n; i++)
        if (s->best[i] >= VALID_LIMIT)
            return 0;
    return 1;
}

/* Dead-task rules shared by update and restore (docs/design.md 2.5). */
static void
check_dead(struct kt_task_sched *s, int i)
{
    int64_t no_change = (s->rounds[i] - s->best_round[i]) * s->per_round;
    if (s->o.early_stopping > 0 && no_change > s->o.early_stopping)
        mark_dead(s, i);
    if (s->o.max_failed_rounds > 0 && s->best[i] >= VALID_LIMIT &&
        s->rounds[i] >= s->o.max_failed_rounds)
        mark_dead(s, i);
}

int
kt_task_sched_update(struct kt_task_sched *s, int i, double best_cost,
                     int64_t n_trials)
{
    if (i < 0 || i >= s->n || n_trials < 0)
        return KT_EINVAL;
    if (s->pending == i)
        s->pending = -1;
    /* docs/design.md 2.5 (Ansor's _tune_task). */
    s->rounds[i]++;
    if (best_cost > 0 && best_cost < KT_SCHED_NO_COST &&
        best_cost < s->best[i]) {
        s->best[i] = best_cost;
        s->best_round[i] = s->rounds[i];
    }
    if (n_trials == 0)
        mark_dead(s, i); /* the search found nothing new to measure */
    check_dead(s, i);
    hist_push(s, i, s->best[i]);
    s->ct += n_trials;
    s->trials[i] += n_trials;
    s->cur_score = score(s);
    if (!s->warmed)
        return 0;
    /* docs/design.md 2.2 step 3. */
    adjust_group(s, i);
    if (s->cur_score < s->best_score) {
        s->best_score = s->cur_score;
        s->best_ct = s->ct;
    } else if (s->o.early_stopping_all > 0 &&
               s->ct - s->best_ct >= s->o.early_stopping_all && all_valid(s)) {
        s->stop = KT_SCHED_EARLY_STOP;
    }
    return 0;
}

int
kt_task_sched_restore(struct kt_task_sched *s, int i, int64_t rounds,
                      int64_t best_round, const double *history,
                      double best_cost, int64_t trials)
{
    int64_t r;
    if (i < 0 || i >= s->n || rounds < 0 || best_round < 0 ||
        best_round > rounds || trials < 0 || s->warmed)
        return KT_EINVAL;
    s->rounds[i] = rounds;
    s->best_round[i] = best_round;
    s->best[i] = best_cost > 0 && best_cost < KT_SCHED_NO_COST
                     ? best_cost
                     : KT_SCHED_NO_COST;
    s->hist_n[i] = 0;
    if (history != NULL) {
        for (r = 0; r < rounds; r++)
            hist_push(s, i, history[r]);
    } else if (rounds > 0) {
        hist_push(s, i, s->best[i]); /* as Ansor's _restore_status */
    }
    s->ct += trials - s->trials[i];
    s->trials[i] = trials;
    if (rounds > 0)
        check_dead(s, i);
    s->cur_score = score(s);
    return 0;
}

double
kt_task_sched_roof(const struct kt_task_sched *s)
{
    return roof_flops(s);
}

void
kt_task_sched_set_peak(struct kt_task_sched *s, double flops_per_s)
{
    s->peak_flops = flops_per_s > 0 ? flops_per_s : 0;
}

enum kt_sched_stop
kt_task_sched_stopped(const struct kt_task_sched *s)
{
    return s->stop;
}

const char *
kt_sched_stop_name(enum kt_sched_stop why)
{
    switch (why) {
    case KT_SCHED_RUNNING: return "running";
    case KT_SCHED_BUDGET: return "trial budget used";
    case KT_SCHED_ALL_DEAD: return "every task is done";
    case KT_SCHED_EARLY_STOP: return "early stopping (no improvement)";
    }
    return "?";
}

int
kt_task_sched_ntasks(const struct kt_task_sched *s)
{
    return s->n;
}

int64_t
kt_task_sched_per_round(const struct kt_task_sched *s)
{
    return s->per_round;
}

int64_t
kt_task_sched_round_trials(const struct kt_task_sched *s, int i)
{
    if (i >= 0 && i < s->n && s->rounds[i] == 0)
        return s->warm_round;
    return s->per_round;
}

double
kt_task_sched_best_cost(const struct kt_task_sched *s, int i)
{
    return s->best[i];
}

double
kt_task_sched_latency_ms(const struct kt_task_sched *s, int i)
{
    return s->best[i] < VALID_LIMIT ? s->best[i] * 1e3 : -1;
}

double
kt_task_sched_gflops(const struct kt_task_sched *s, int i)
{
    return s->best[i] < VALID_LIMIT ? s->flops[i] / s->best[i] / 1e9 : -1;
}

int64_t
kt_task_sched_trials(const struct kt_task_sched *s, int i)
{
    return s->trials[i];
}

int64_t
kt_task_sched_rounds(const struct kt_task_sched *s, int i)
{
    return s->rounds[i];
}

int
kt_task_sched_is_dead(const struct kt_task_sched *s, int i)
{
    return s->dead[i];
}

int
kt_task_sched_group(const struct kt_task_sched *s, int i)
{
    return s->group[i] >= 0 && s->group_size[s->group[i]] > 1 ? s->group[i]
                                                              : -1;
}

int64_t
kt_task_sched_total_trials(const struct kt_task_sched *s)
{
    return s->ct;
}

double
kt_task_sched_total_latency_ms(const struct kt_task_sched *s)
{
    return all_valid(s) ? s->cur_score * 1e3 : -1;
}

double
kt_task_sched_gradient(const struct kt_task_sched *s, int i)
{
    return s->grad[i];
}

static void *
dup_array(const void *p, size_t n, size_t size)
{
    void *q = kt_xmalloc(n * size);

    memcpy(q, p, n * size);
    return q;
}

struct kt_task_sched *
kt_task_sched_clone(const struct kt_task_sched *src)
{
    struct kt_task_sched *s = kt_xmalloc(sizeof(*s));
    size_t n = (size_t)src->n;
    int i;

    *s = *src;
    s->weight = dup_array(src->weight, n, sizeof(double));
    s->flops = dup_array(src->flops, n, sizeof(double));
    s->best = dup_array(src->best, n, sizeof(double));
    s->grad = dup_array(src->grad, n, sizeof(double));
    s->rounds = dup_array(src->rounds, n, sizeof(int64_t));
    s->best_round = dup_array(src->best_round, n, sizeof(int64_t));
    s->trials = dup_array(src->trials, n, sizeof(int64_t));
    s->hist_n = dup_array(src->hist_n, n, sizeof(int64_t));
    s->hist_cap = dup_array(src->hist_cap, n, sizeof(int64_t));
    s->dead = dup_array(src->dead, n, 1);
    s->group = dup_array(src->group, n, sizeof(int));
    s->group_size = dup_array(src->group_size, n, sizeof(int));
    s->hist = kt_xcalloc(n, sizeof(double *));
    for (i = 0; i < src->n; i++)
        if (src->hist[i] != NULL)
            s->hist[i] = dup_array(src->hist[i],
                                   (size_t)(src->hist_cap[i] ? src->hist_cap[i]
                                                             : 1),
                                   sizeof(double));
    return s;
}
