/* test_task_sched.c - the task scheduler against hand-computed choices.
 * Costs are seconds; gradients below are worked out in the comments from
 * docs/design.md 2.3: grad = w * (alpha * backward + (1 - alpha) * forward),
 * forward = min(best - best / t, g2) - best. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "scheduler/scheduler.h"

#include <math.h>

/* cmocka 1.1.5 compares floats only; doubles need their own check. */
#define assert_double_equal(a, b, eps)                                         \
    check_double((a), (b), (eps), __FILE__, __LINE__)

static void
check_double(double a, double b, double eps, const char *file, int line)
{
    if (!(fabs(a - b) <= eps)) {
        print_error("%s:%d: %.17g != %.17g (eps %g)\n", file, line, a, b, eps);
        fail();
    }
}

static void
opts(struct kt_task_sched_opts *o, int64_t trials)
{
    memset(o, 0, sizeof(*o));
    o->strategy = KT_STRATEGY_GRADIENT;
    o->trials = trials;
    o->measures_per_round = 64;
    o->alpha = 0.2;
    o->beta = 2;
    o->backward_window_size = 3;
    o->seed = 1;
}

static struct kt_task_sched *
mk(int n, const double *w, const double *f, const char *const *tags,
   const struct kt_task_sched_opts *o)
{
    struct kt_task_sched *s = NULL;
    char err[256];
    assert_int_equal(kt_task_sched_new(&s, n, w, f, tags, o, err, sizeof(err)),
                     0);
    return s;
}

/* Runs the warm-up with the given per-task costs, 64 trials each. */
static void
warm(struct kt_task_sched *s, const double *costs)
{
    int i;
    for (i = 0; i < kt_task_sched_ntasks(s); i++) {
        assert_int_equal(kt_task_sched_next(s), i);
        assert_int_equal(kt_task_sched_update(s, i, costs[i], 64), 0);
    }
}

/* Two tasks warmed up at costs (peak: the FMA peak in FLOP/s, 0 = none). */
static struct kt_task_sched *
warmed2(const double *w, const double *f, double peak, const double *costs,
        const struct kt_task_sched_opts *o)
{
    struct kt_task_sched *s = mk(2, w, f, NULL, o);

    if (peak > 0)
        kt_task_sched_set_peak(s, peak);
    warm(s, costs);
    return s;
}

/* The next pick is task, and the gradients of tasks 0 and 1 are g0, g1. */
static void
assert_pick(struct kt_task_sched *s, int task, double g0, double g1)
{
    assert_int_equal(kt_task_sched_next(s), task);
    assert_double_equal(kt_task_sched_gradient(s, 0), g0, 1e-12);
    assert_double_equal(kt_task_sched_gradient(s, 1), g1, 1e-12);
}

static void
test_task_sched_warmup_order(void **state)
{
    struct kt_task_sched_opts o;
    struct kt_task_sched *s;
    double w[3] = {1, 4, 1}, f[3] = {4e6, 1e6, 9e6};
    (void)state;
    opts(&o, 10000);
    s = mk(3, NULL, NULL, NULL, &o);
    assert_int_equal(kt_task_sched_next(s), 0);
    assert_int_equal(kt_task_sched_next(s), 0); /* no update: same task */
    kt_task_sched_update(s, 0, 1e-3, 64);
    assert_int_equal(kt_task_sched_next(s), 1);
    kt_task_sched_update(s, 1, 1e-3, 64);
    assert_int_equal(kt_task_sched_next(s), 2);
    kt_task_sched_update(s, 2, 1e-3, 64);
    assert_int_equal(kt_task_sched_total_trials(s), 192);
    kt_task_sched_free(s);
    /* With FLOPs: the largest weight x flops first, ties in index order
     * (4e6, 1e6 x 4 = 4e6, 9e6 -> 2, 0, 1). */
    s = mk(3, w, f, NULL, &o);
    assert_int_equal(kt_task_sched_next(s), 2);
    kt_task_sched_update(s, 2, 1e-3, 64);
    assert_int_equal(kt_task_sched_next(s), 0);
    kt_task_sched_update(s, 0, 1e-3, 64);
    assert_int_equal(kt_task_sched_next(s), 1);
    kt_task_sched_free(s);
}

static void
test_task_sched_dominant_latency(void **state)
{
    struct kt_task_sched_opts o;
    struct kt_task_sched *s;
    double costs[2] = {1e-3, 10e-3};
    double w[2] = {20, 1};
    (void)state;
    opts(&o, 10000);
    /* Equal weights: t = 1 so forward = -best; grad = 0.8 * -best:
     * task 0 -0.0008, task 1 -0.008 -> task 1. */
    s = warmed2(NULL, NULL, 0, costs, &o);
    assert_pick(s, 1, -0.0008, -0.008);
    /* Round 2 of task 1 at 8 ms: t = 2, forward = 4 - 8 = -4 ms,
     * grad = -0.0032, still below task 0's -0.0008. */
    kt_task_sched_update(s, 1, 8e-3, 64);
    assert_pick(s, 1, -0.0008, -0.0032);
    kt_task_sched_free(s);
    /* Weights 20 and 1: task 0 is 20 x 0.8 x -1 ms = -0.016 -> task 0. */
    s = warmed2(w, NULL, 0, costs, &o);
    assert_pick(s, 0, -0.016, -0.008);
    kt_task_sched_free(s);
}

/* docs/design.md 2.3, the roofline: with the target's FMA peak known, the
 * part of a task's latency above flops / peak falls like 1/t. */
static void
test_task_sched_roofline(void **state)
{
    struct kt_task_sched_opts o;
    struct kt_task_sched *s;
    double costs[2] = {10e-3, 8e-3};
    double f[2] = {1e9, 1e8}; /* 100 and 12.5 GFLOPS */
    (void)state;
    opts(&o, 10000);
    /* Without a peak: forward = -best, task 0 (-8 ms) before task 1. */
    s = warmed2(NULL, f, 0, costs, &o);
    assert_pick(s, 0, -0.008, -0.0064);
    assert_true(kt_task_sched_roof(s) == 0);
    kt_task_sched_free(s);
    /* Peak 125 GFLOPS: task 0 cannot go below 8 ms, forward = -2 ms and
     * grad 0.8 x -2 = -1.6 ms; task 1 could reach 0.8 ms: forward -7.2 ms,
     * grad -5.76 ms -> task 1. */
    s = warmed2(NULL, f, 125e9, costs, &o);
    assert_pick(s, 1, -0.0016, -0.00576);
    assert_true(kt_task_sched_roof(s) == 125e9);
    /* Round 2 of task 1 at 4 ms: t = 2, the 3.2 ms above its roof falls
     * like 1/t: g1 = 4 - 3.2 / 2 = 2.4 ms, forward -1.6 ms, grad -1.28 ms
     * (Ansor's -1.6 ms) -> task 0. */
    kt_task_sched_update(s, 1, 4e-3, 64);
    assert_pick(s, 0, -0.0016, -0.00128);
    kt_task_sched_free(s);
    /* A peak below a task's speed (timed under load) is raised to it:
     * at 50 GFLOPS task 0 (100) is its own roof, forward 0; task 1's
     * roof is 1 ms: grad 0.8 x -7 ms. */
    s = warmed2(NULL, f, 50e9, costs, &o);
    assert_pick(s, 1, 0, -0.0056);
    assert_float_equal(kt_task_sched_roof(s), 100e9, 1e-3);
    kt_task_sched_free(s);
}

static void
test_task_sched_backward_window(void **state)
{
    struct kt_task_sched_opts o;
    struct kt_task_sched *s;
    const double hist[4] = {10e-3, 8e-3, 6e-3, 5e-3};
    (void)state;
    /* Task 0: 4 rounds, history 10, 8, 6, 5 ms.  backward = (5 - 10) / 3 =
     * -1.6667 ms; forward = (5 - 5/4) - 5 = -1.25 ms; grad = 0.2 * -1.6667
     * + 0.8 * -1.25 = -1.3333 ms.  Task 1: 1 round at 1.5 ms, grad = 0.8 *
     * -1.5 = -1.2 ms.  So task 0. */
    opts(&o, 10000);
    s = mk(2, NULL, NULL, NULL, &o);
    kt_task_sched_restore(s, 0, 4, 4, hist, 5e-3, 256);
    kt_task_sched_restore(s, 1, 1, 1, NULL, 1.5e-3, 64);
    assert_int_equal(kt_task_sched_next(s), 0);
    assert_double_equal(kt_task_sched_gradient(s, 0), -1.0 / 3 * 4e-3, 1e-12);
    assert_double_equal(kt_task_sched_gradient(s, 1), -1.2e-3, 1e-12);
    assert_int_equal(kt_task_sched_total_trials(s), 320);
    kt_task_sched_free(s);
    /* alpha = 0 ignores the backward gradient: -1.25 ms vs -1.5 ms. */
    o.alpha = 0;
    s = mk(2, NULL, NULL, NULL, &o);
    kt_task_sched_restore(s, 0, 4, 4, hist, 5e-3, 256);
    kt_task_sched_restore(s, 1, 1, 1, NULL, 1.5e-3, 64);
    assert_int_equal(kt_task_sched_next(s), 1);
    kt_task_sched_free(s);
}

static void
test_task_sched_similar_group(void **state)
{
    struct kt_task_sched_opts o;
    struct kt_task_sched *s;
    const double f[3] = {1e9, 1e9, 1e9};
    const double h1[2] = {8e-2, 8e-2};
    const char *same[3] = {"conv", "conv", NULL};
    const char *apart[3] = {"conv", "other", NULL};
    (void)state;
    /* Task 0 runs 100 GFLOPS (10 ms), task 1 12.5 GFLOPS (80 ms, 2 rounds),
     * task 2 50 ms (1 round, no group).  Grouped, task 1: g1 = 40 ms,
     * g2 = 2 * 1e9 / 1e11 = 20 ms, forward = 20 - 80 = -60 ms, grad =
     * -48 ms; task 2: -40 ms; task 0: -8 ms -> task 1.  Not grouped, task
     * 1's grad is 0.8 * -40 = -32 ms -> task 2. */
    opts(&o, 10000);
    s = mk(3, NULL, f, same, &o);
    kt_task_sched_restore(s, 0, 1, 1, NULL, 1e-2, 64);
    kt_task_sched_restore(s, 1, 2, 1, h1, 8e-2, 128);
    kt_task_sched_restore(s, 2, 1, 1, NULL, 5e-2, 64);
    assert_int_equal(kt_task_sched_group(s, 0), kt_task_sched_group(s, 1));
    assert_int_equal(kt_task_sched_group(s, 2), -1);
    assert_int_equal(kt_task_sched_next(s), 1);
    assert_double_equal(kt_task_sched_gradient(s, 1), -0.048, 1e-12);
    assert_double_equal(kt_task_sched_gradient(s, 2), -0.04, 1e-12);
    kt_task_sched_free(s);
    s = mk(3, NULL, f, apart, &o);
    kt_task_sched_restore(s, 0, 1, 1, NULL, 1e-2, 64);
    kt_task_sched_restore(s, 1, 2, 1, h1, 8e-2, 128);
    kt_task_sched_restore(s, 2, 1, 1, NULL, 5e-2, 64);
    assert_int_equal(kt_task_sched_group(s, 1), -1);
    assert_int_equal(kt_task_sched_next(s), 2);
    assert_double_equal(kt_task_sched_gradient(s, 1), -0.032, 1e-12);
    kt_task_sched_free(s);
}

static void
test_task_sched_leaves_group(void **state)
{
    struct kt_task_sched_opts o;
    struct kt_task_sched *s;
    const double f[2] = {1e9, 1e9};
    const char *tags[2] = {"g", "g"};
    (void)state;
    /* Task 1 stays 8x slower than task 0 (below best/beta); once its rounds
     * exceed 5 + task 0's rounds (1) it leaves the group: at round 7. */
    opts(&o, 100000);
    s = mk(2, NULL, f, tags, &o);
    kt_task_sched_restore(s, 0, 1, 1, NULL, 1e-2, 64);
    kt_task_sched_restore(s, 1, 5, 1, NULL, 8e-2, 320);
    assert_int_equal(kt_task_sched_next(s), 1);
    kt_task_sched_update(s, 1, 8e-2, 64); /* round 6: 6 > 6 is false */
    assert_int_not_equal(kt_task_sched_group(s, 1), -1);
    kt_task_sched_next(s);
    kt_task_sched_update(s, 1, 8e-2, 64); /* round 7 */
    assert_int_equal(kt_task_sched_group(s, 1), -1);
    assert_int_equal(kt_task_sched_group(s, 0), -1); /* a group of one */
    kt_task_sched_free(s);
}

static void
test_task_sched_ties_seeded(void **state)
{
    struct kt_task_sched_opts o;
    const double w[3] = {0, 0, 0};
    const double c[3] = {1e-3, 1e-3, 1e-3};
    int picks[2][32], seen[3] = {0, 0, 0};
    int run, seed;
    (void)state;
    /* Weight 0 makes every gradient 0: an all-equal tie.  Task 1 is dead
     * (its warm-up found nothing to measure), so ties land on 0 or 2, and
     * the same seed gives the same pick. */
    for (run = 0; run < 2; run++) {
        for (seed = 0; seed < 32; seed++) {
            struct kt_task_sched *s;
            opts(&o, 10000);
            o.seed = (uint64_t)seed;
            s = mk(3, w, NULL, NULL, &o);
            kt_task_sched_next(s);
            kt_task_sched_update(s, 0, c[0], 64);
            kt_task_sched_next(s);
            kt_task_sched_update(s, 1, c[1], 0);
            kt_task_sched_next(s);
            kt_task_sched_update(s, 2, c[2], 64);
            assert_true(kt_task_sched_is_dead(s, 1));
            picks[run][seed] = kt_task_sched_next(s);
            seen[picks[run][seed]]++;
            kt_task_sched_free(s);
        }
    }
    assert_memory_equal(picks[0], picks[1], sizeof(picks[0]));
    assert_int_equal(seen[1], 0);
    assert_true(seen[0] > 0);
    assert_true(seen[2] > 0);
}

static void
test_task_sched_early_stopping_task(void **state)
{
    struct kt_task_sched_opts o;
    struct kt_task_sched *s;
    const double c[2] = {1e-3, 1e-3};
    int r;
    (void)state;
    /* Per-task early stopping at 128 trials: dead once (rounds - best
     * round) x 64 > 128, i.e. on the third round without a gain. */
    opts(&o, 100000);
    o.early_stopping = 128;
    s = mk(2, NULL, NULL, NULL, &o);
    warm(s, c);
    for (r = 0; r < 2; r++) {
        kt_task_sched_update(s, 0, 2e-3, 64);
        assert_false(kt_task_sched_is_dead(s, 0));
    }
    kt_task_sched_update(s, 0, 2e-3, 64);
    assert_true(kt_task_sched_is_dead(s, 0));
    for (r = 0; r < 5; r++) {
        int i = kt_task_sched_next(s);
        assert_int_equal(i, 1);
        kt_task_sched_update(s, 1, 1e-3 / (r + 2), 64);
    }
    kt_task_sched_free(s);
}

static void
test_task_sched_early_stopping_all(void **state)
{
    struct kt_task_sched_opts o;
    struct kt_task_sched *s;
    const double c[2] = {1e-3, 2e-3};
    (void)state;
    opts(&o, 100000);
    o.early_stopping_all = 128;
    s = mk(2, NULL, NULL, NULL, &o);
    warm(s, c);
    /* Main loop: a gain resets the counter, then two rounds of 64 without
     * one reach 128 and stop the run. */
    kt_task_sched_update(s, kt_task_sched_next(s), 0.5e-3, 64);
    assert_int_equal(kt_task_sched_stopped(s), KT_SCHED_RUNNING);
    kt_task_sched_update(s, kt_task_sched_next(s), 5e-3, 64);
    assert_int_not_equal(kt_task_sched_next(s), -1);
    kt_task_sched_update(s, kt_task_sched_next(s), 5e-3, 64);
    assert_int_equal(kt_task_sched_next(s), -1);
    assert_int_equal(kt_task_sched_stopped(s), KT_SCHED_EARLY_STOP);
    kt_task_sched_free(s);
}

static void
test_task_sched_dead_tasks(void **state)
{
    struct kt_task_sched_opts o;
    struct kt_task_sched *s;
    int i, guard = 0;
    (void)state;
    /* Task 1 never gets a valid program: dead after max_failed_rounds = 2.
     * Without the rule its 1e10 sentinel would take every round. */
    opts(&o, 100000);
    o.max_failed_rounds = 2;
    s = mk(2, NULL, NULL, NULL, &o);
    kt_task_sched_next(s);
    kt_task_sched_update(s, 0, 1e-3, 64);
    kt_task_sched_next(s);
    kt_task_sched_update(s, 1, KT_SCHED_NO_COST, 64);
    assert_false(kt_task_sched_is_dead(s, 1));
    assert_int_equal(kt_task_sched_next(s), 1); /* -8e9 dominates */
    kt_task_sched_update(s, 1, 0, 64);          /* all failed again */
    assert_true(kt_task_sched_is_dead(s, 1));
    assert_double_equal(kt_task_sched_latency_ms(s, 1), -1, 0);
    assert_double_equal(kt_task_sched_total_latency_ms(s), -1, 0);
    /* Task 0 runs until its space is exhausted (0 new programs). */
    while ((i = kt_task_sched_next(s)) >= 0 && guard++ < 10) {
        assert_int_equal(i, 0);
        kt_task_sched_update(s, 0, 1e-3, guard < 3 ? 64 : 0);
    }
    assert_int_equal(i, -1);
    assert_int_equal(guard, 3);
    assert_int_equal(kt_task_sched_stopped(s), KT_SCHED_ALL_DEAD);
    kt_task_sched_free(s);
}

static void
test_task_sched_budget(void **state)
{
    struct kt_task_sched_opts o;
    struct kt_task_sched *s;
    char err[256];
    int i, rounds = 0;
    (void)state;
    opts(&o, 100);
    s = mk(3, NULL, NULL, NULL, &o);
    assert_int_equal(kt_task_sched_per_round(s), 33); /* min(64, 100/3) */
    while ((i = kt_task_sched_next(s)) >= 0) {
        int64_t n = kt_task_sched_round_trials(s, i);
        /* warm-up rounds of 100 / (2 x 3) = 16, then 33 */
        assert_int_equal(n, rounds < 3 ? 16 : 33);
        kt_task_sched_update(s, i, 1e-3 / (rounds + 1), n);
        rounds++;
    }
    /* 3 warm-up rounds = 48 < 100, two more rounds, then 114 >= 100. */
    assert_int_equal(rounds, 5);
    assert_int_equal(kt_task_sched_stopped(s), KT_SCHED_BUDGET);
    assert_int_equal(kt_task_sched_total_trials(s), 114);
    kt_task_sched_free(s);
    opts(&o, 2);
    s = NULL;
    assert_int_equal(kt_task_sched_new(&s, 3, NULL, NULL, NULL, &o, err,
                                       sizeof(err)),
                     KT_EINVAL);
    assert_null(s);
    assert_non_null(strstr(err, "too few"));
}

/* A budget of 16 trials per task (a network of 62 tasks at 1,000 trials):
 * Ansor's warm-up would measure all of it in rounds of 16; here the
 * warm-up rounds get 8, and the gradient spends the other half on the
 * task that costs the most.  With room for full rounds (64 per task),
 * the warm-up rounds are full rounds. */
static void
test_task_sched_warmup_leaves_half(void **state)
{
    struct kt_task_sched_opts o;
    struct kt_task_sched *s;
    int64_t trials_of_0 = 0, warm_trials = 0;
    int i, r;
    (void)state;
    opts(&o, 1000);
    s = mk(62, NULL, NULL, NULL, &o);
    assert_int_equal(kt_task_sched_per_round(s), 16);
    for (r = 0; (i = kt_task_sched_next(s)) >= 0; r++) {
        int64_t n = kt_task_sched_round_trials(s, i), left;
        /* the engine's last round measures what is left of the budget */
        left = 1000 - kt_task_sched_total_trials(s);
        n = n < left ? n : left;
        /* task 0 costs 10 ms, the others 0.1 ms; no round improves */
        kt_task_sched_update(s, i, i == 0 ? 10e-3 : 0.1e-3, n);
        if (r < 62)
            warm_trials += n;
        if (i == 0)
            trials_of_0 += n;
    }
    assert_int_equal(warm_trials, 62 * 8);
    assert_int_equal(kt_task_sched_total_trials(s), 1000);
    assert_true(trials_of_0 >= 8 + 16 * 10);
    kt_task_sched_free(s);
    /* 64 x 3 trials per task: the warm-up rounds are the usual 64 */
    opts(&o, 64 * 3 * 3);
    s = mk(3, NULL, NULL, NULL, &o);
    for (i = 0; i < 3; i++) {
        assert_int_equal(kt_task_sched_next(s), i);
        assert_int_equal(kt_task_sched_round_trials(s, i), 64);
        kt_task_sched_update(s, i, 1e-3, 64);
    }
    assert_int_equal(kt_task_sched_round_trials(s, 0), 64);
    kt_task_sched_free(s);
    /* at most the per-round count, at least 8 */
    opts(&o, 62 * 9);
    s = mk(62, NULL, NULL, NULL, &o);
    assert_int_equal(kt_task_sched_round_trials(s, 0), 8);
    kt_task_sched_free(s);
    opts(&o, 62 * 5);
    s = mk(62, NULL, NULL, NULL, &o);
    assert_int_equal(kt_task_sched_round_trials(s, 0), 5);
    kt_task_sched_free(s);
}

static void
test_task_sched_round_robin(void **state)
{
    struct kt_task_sched_opts o;
    struct kt_task_sched *s;
    const int want[5] = {0, 2, 0, 2, 0};
    int k;
    (void)state;
    opts(&o, 100000);
    o.strategy = KT_STRATEGY_ROUND_ROBIN;
    s = mk(3, NULL, NULL, NULL, &o);
    kt_task_sched_next(s);
    kt_task_sched_update(s, 0, 1e-3, 64);
    kt_task_sched_next(s);
    kt_task_sched_update(s, 1, 1e-3, 0); /* dead */
    kt_task_sched_next(s);
    kt_task_sched_update(s, 2, 1e-3, 64);
    for (k = 0; k < 5; k++) {
        assert_int_equal(kt_task_sched_next(s), want[k]);
        kt_task_sched_update(s, want[k], 1e-3, 64);
    }
    kt_task_sched_free(s);
}

static void
test_task_sched_table_helpers(void **state)
{
    struct kt_task_sched_opts o;
    struct kt_task_sched *s;
    const double w[2] = {2, 3};
    const double f[2] = {2e9, 1e6};
    const double c[2] = {4e-3, 0.5e-3};
    (void)state;
    opts(&o, 1000);
    s = mk(2, w, f, NULL, &o);
    assert_double_equal(kt_task_sched_latency_ms(s, 0), -1, 0);
    assert_double_equal(kt_task_sched_gflops(s, 0), -1, 0);
    warm(s, c);
    assert_double_equal(kt_task_sched_latency_ms(s, 0), 4.0, 1e-12);
    assert_double_equal(kt_task_sched_gflops(s, 0), 500.0, 1e-9);
    assert_double_equal(kt_task_sched_gflops(s, 1), 2.0, 1e-12);
    /* 2 x 4 ms + 3 x 0.5 ms. */
    assert_double_equal(kt_task_sched_total_latency_ms(s), 9.5, 1e-12);
    assert_int_equal(kt_task_sched_trials(s, 1), 64);
    assert_int_equal(kt_task_sched_rounds(s, 1), 1);
    assert_int_equal(kt_task_sched_update(s, 7, 1e-3, 1), KT_EINVAL);
    kt_task_sched_free(s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_task_sched_warmup_order),
        cmocka_unit_test(test_task_sched_dominant_latency),
        cmocka_unit_test(test_task_sched_roofline),
        cmocka_unit_test(test_task_sched_backward_window),
        cmocka_unit_test(test_task_sched_similar_group),
        cmocka_unit_test(test_task_sched_leaves_group),
        cmocka_unit_test(test_task_sched_ties_seeded),
        cmocka_unit_test(test_task_sched_early_stopping_task),
        cmocka_unit_test(test_task_sched_early_stopping_all),
        cmocka_unit_test(test_task_sched_dead_tasks),
        cmocka_unit_test(test_task_sched_budget),
        cmocka_unit_test(test_task_sched_warmup_leaves_half),
        cmocka_unit_test(test_task_sched_round_robin),
        cmocka_unit_test(test_task_sched_table_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
