/* engine_confirm.c - a result that would become its task's best is timed
 * again before the round is stored, on another worker of the key when
 * there is one (kt_candidate.avoid_worker).  The trial keeps the slower of
 * the two timings and names the other in its "timed_also" key; a
 * re-timing that fails stores the trial as UNKNOWN_ERROR with both sides
 * in its text.  So one worker's cost alone, a made-up one included, never
 * becomes the best that the scheduler, `kerntune show` and export use
 * (docs/protocol.md, trust model). */
#include "daemon/engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A re-timing this many times off the first is logged as suspicious. */
#define CONFIRM_WARN_RATIO 3.0

/* The lowest successful, unconfirmed trial that would still be the task's
 * best: below the task's best and below every cost of this round already
 * confirmed; -1 when there is none. */
static int
next_to_confirm(struct kt_job *job, const struct kt_round *r)
{
    double bar = kt_task_sched_best_cost(job->sched, r->task);
    int i, pick = -1;

    for (i = 0; i < r->nres; i++)
        if (r->confirmed[i] && r->trials[i].err_no == 0 &&
            r->trials[i].cost < bar)
            bar = r->trials[i].cost;
    for (i = 0; i < r->nres; i++) {
        const struct kt_trial *t = &r->trials[i];
        if (r->confirmed[i] || t->err_no != 0 || !(t->cost < bar))
            continue;
        if (pick < 0 || t->cost < r->trials[pick].cost)
            pick = i;
    }
    return pick;
}

static void
add_kv(struct kt_trial *t, const char *k, const char *v)
{
    struct kt_kv *kv = (struct kt_kv *)t->kvs;

    /* build_trials leaves one free slot per trial for this */
    kv[t->nkvs].k = kt_xstrdup(k);
    kv[t->nkvs].v = kt_xstrdup(v);
    t->nkvs++;
}

static void
reject(struct kt_job *job, struct kt_trial *t, const char *why)
{
    char text[512];

    snprintf(text, sizeof(text), "cost %.6g s from worker %s not confirmed: %s",
             t->cost, t->worker, why);
    log_warnx("engine: job %s: trial %lld of %s: %s", job->name,
              (long long)t->trial_no, t->task_name, text);
    free((char *)t->err_text);
    t->err_text = kt_xstrdup(text);
    t->err_no = KT_MERR_UNKNOWN;
    t->cost = 0;
    t->ncosts = 0;
    job->unconfirmed++;
}

/* Folds the re-timing res into trial t: the slower timing stands. */
static void
fold(struct kt_job *job, struct kt_trial *t,
     const struct kt_measure_result *res)
{
    const char *other = res->worker ? res->worker : "?";
    char also[160], why[400];
    double first = t->cost;

    if (res->err_no != 0) {
        snprintf(why, sizeof(why),
                 "timing it again on %s failed (err_no %d: "
                 "%.300s)",
                 other, res->err_no, res->err_text ? res->err_text : "");
        reject(job, t, why);
        return;
    }
    job->confirmed++;
    if (res->cost > first * CONFIRM_WARN_RATIO ||
        first > res->cost * CONFIRM_WARN_RATIO)
        log_warnx("engine: job %s: trial %lld of %s: %.6g s on %s, %.6g s "
                  "on %s when timed again",
                  job->name, (long long)t->trial_no, t->task_name, first,
                  t->worker, res->cost, other);
    if (res->cost > first) {
        snprintf(also, sizeof(also), "%.9g s on %s", first, t->worker);
        free((char *)t->worker);
        t->worker = kt_xstrdup(other);
        t->cost = res->cost;
        t->ncosts = res->ncosts;
        memcpy((double *)t->costs, res->costs,
               sizeof(double) * (size_t)res->ncosts);
    } else {
        snprintf(also, sizeof(also), "%.9g s on %s", res->cost, other);
    }
    add_kv(t, "timed_also", also);
}

static void confirm_done(void *arg, const struct kt_measure_result *res, int n);

/* Submits the next re-timing of round r; 0 when none is needed (or none
 * could be submitted: then the trial is rejected). */
int
kt__job_confirm_next(struct kt_job *job, struct kt_round *r)
{
    struct kt_candidate c;
    struct kt_measure_opts full_timing = job->mo;
    char err[512], why[600];
    int i, rc;

    /* A re-timing gets every repeat: an early-stopped one would replace
     * the trial's costs with a single cost and no early_stop note. */
    full_timing.stop_above_s = 0;
    while ((i = next_to_confirm(job, r)) >= 0) {
        memset(&c, 0, sizeof(c));
        c.source = r->c[i].source;
        c.cc = job->cc;
        c.avoid_worker = r->trials[i].worker;
        r->confirmed[i] = 1;
        r->confirming = i;
        if (job->e->o.submit != NULL)
            rc = job->e->o.submit(job->e->o.submit_arg, job->conf->target.key,
                                  &c, 1, &full_timing, confirm_done, r, err,
                                  sizeof(err));
        else
            rc = kt_tracker_submit(job->e->o.tracker, job->conf->target.key, &c,
                                   1, &full_timing, confirm_done, r, err,
                                   sizeof(err));
        if (rc == KT_OK)
            return 1;
        snprintf(why, sizeof(why), "re-timing not submitted: %.500s", err);
        reject(job, &r->trials[i], why);
    }
    return 0;
}

static void
confirm_done(void *arg, const struct kt_measure_result *res, int n)
{
    struct kt_round *r = arg;
    struct kt_job *job = r->job;

    if (job->abandoned) {
        kt__job_round_abandon(job, r, r->nres);
        return;
    }
    if (n >= 1)
        fold(job, &r->trials[r->confirming], &res[0]);
    else
        reject(job, &r->trials[r->confirming], "no re-timing result");
    if (kt__job_confirm_next(job, r))
        return;
    kt__job_commit_round(job, r);
}
