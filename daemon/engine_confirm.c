/* engine_confirm.c - a result that would become its task's best is timed
 * again before the round is stored, on another worker of the key when
 * there is one (kt_candidate.avoid_worker).  The trial keeps the slower of
 * the two timings and names the other in its "timed_also" key; a
 * re-timing that fails stores the trial as UNKNOWN_ERROR with both sides
 * in its text.  So one worker's cost alone, a made-up one included, never
 * becomes the best that the scheduler, `kerntune show` and export use
 * (docs/protocol.md, trust model).  When the run has the C of the best
 * the trial would beat (measured, or rebuilt from the database by the
 * task's search), that program is timed in the same batch, and the trial
 * must beat it side by side too ("timed_beside", weigh_beside).
 *
 * Load on the worker's machine (docs/measure.md, "Timing on a shared
 * machine") must neither bury nor crown a candidate: a result the worker
 * marked contended=1 whose cost at its CPU time (cpu_cost) would beat the
 * best is timed once more at the end of the round and keeps the faster
 * timing (load only adds time); a confirmation that comes back contended
 * and slower is tried once more before the slower one stands; and the
 * search and the cost model learn a contended result's cpu_cost. */
#include "daemon/engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A re-timing this many times off the first is logged as suspicious. */
#define CONFIRM_WARN_RATIO 3.0
/* At most one contended result in this many of a round is timed again. */
#define RETIME_SHARE 8

/* r->confirmed[i], per trial */
enum {
    CONFIRMED = 1,     /* timed again as a would-be best */
    RETIMED = 2,       /* contended: timed once more */
    RETIMING = 4,      /* that re-timing is the one in flight */
    CONFIRM_AGAIN = 8, /* its confirmation came back contended once */
};

static int
is_contended(const char *v)
{
    return v != NULL && strcmp(v, "1") == 0;
}

/* What a cost must beat to become the task's best: the task's best and
 * every cost of this round already confirmed.  The program that sets it
 * and its schedule hash, when this run has its C (else source is NULL). */
struct bar {
    double cost;
    const char *source;
    const char *hash;
    int index; /* the round's trial that sets it, -1: the task's best */
};

static struct bar
bar_of(struct kt_job *job, const struct kt_round *r)
{
    const struct kt_task_state *ts = &job->ts[r->task];
    struct bar b;
    int i;

    b.cost = kt_task_sched_best_cost(job->sched, r->task);
    b.source = ts->best_source;
    b.hash = ts->best_hash;
    b.index = -1;
    for (i = 0; i < r->nres; i++)
        if ((r->confirmed[i] & CONFIRMED) && r->trials[i].result.err_no == 0 &&
            r->trials[i].result.cost < b.cost) {
            b.cost = r->trials[i].result.cost;
            b.source = r->c[i].source;
            b.hash = r->c[i].hash;
            b.index = i;
        }
    return b;
}

/* Trial i would become the task's best: it beats the bar, or ties a
 * trial of the round that sets it and comes first (the round's best is
 * its first lowest cost, engine_results.c), so an unconfirmed timing
 * never wins on a tie. */
static int
would_be_best(const struct kt_round *r, int i, const struct bar *b)
{
    const struct kt_trial *t = &r->trials[i];

    return t->result.err_no == 0 &&
           (t->result.cost < b->cost ||
            (b->index > i && t->result.cost == b->cost));
}

/* The lowest successful, unconfirmed trial that would still be the task's
 * best; -1 when there is none. */
static int
next_to_confirm(struct kt_job *job, const struct kt_round *r)
{
    struct bar bar = bar_of(job, r);
    int i, pick = -1;

    for (i = 0; i < r->nres; i++) {
        const struct kt_trial *t = &r->trials[i];
        if ((r->confirmed[i] & CONFIRMED) || !would_be_best(r, i, &bar))
            continue;
        if (pick < 0 || t->result.cost < r->trials[pick].result.cost)
            pick = i;
    }
    return pick;
}

double
kt__trial_learning_cost(const struct kt_trial *t)
{
    const char *cpu = kt_result_kv(&t->result, "cpu_cost");
    double v;

    if (t->result.err_no != 0 || cpu == NULL ||
        !is_contended(kt_result_kv(&t->result, "contended")))
        return t->result.cost;
    v = atof(cpu);
    return v > 0 && v < t->result.cost ? v : t->result.cost;
}

/* The contended trial, not yet timed again, whose cost at its CPU time
 * (kt__trial_learning_cost) is lowest and beats the best; -1 when there
 * is none or the round's share of re-timings is used. */
static int
next_to_retime(struct kt_job *job, const struct kt_round *r)
{
    double bar = bar_of(job, r).cost, est, pick_est = 0;
    int i, pick = -1, used = 0;

    for (i = 0; i < r->nres; i++)
        used += (r->confirmed[i] & RETIMED) != 0;
    if (used >= (r->nres + RETIME_SHARE - 1) / RETIME_SHARE)
        return -1;
    for (i = 0; i < r->nres; i++) {
        const struct kt_trial *t = &r->trials[i];
        if ((r->confirmed[i] & RETIMED) || t->result.err_no != 0 ||
            !is_contended(kt_result_kv(&t->result, "contended")))
            continue;
        est = kt__trial_learning_cost(t);
        if (est < bar && (pick < 0 || est < pick_est)) {
            pick = i;
            pick_est = est;
        }
    }
    return pick;
}

static void
add_kv(struct kt_trial *t, const char *k, const char *v)
{
    struct kt_kv *kv = (struct kt_kv *)t->result.kvs;

    /* build_trials leaves KT_CONFIRM_NOTES free slots per trial */
    kv[t->result.nkvs].k = kt_xstrdup(k);
    kv[t->result.nkvs].v = kt_xstrdup(v);
    t->result.nkvs++;
}

static void
reject(struct kt_job *job, struct kt_trial *t, const char *why)
{
    char text[1024]; /* why is up to 600 bytes */

    snprintf(text, sizeof(text), "cost %.6g s from worker %s not confirmed: %s",
             t->result.cost, t->result.worker, why);
    log_warnx("engine: job %s: trial %lld of %s: %s", job->name,
              (long long)t->trial_no, t->task_name, text);
    free((char *)t->result.err_text);
    t->result.err_text = kt_xstrdup(text);
    t->result.err_no = KT_MERR_UNKNOWN;
    t->result.cost = 0;
    t->result.ncosts = 0;
    job->unconfirmed++;
}

/* Replaces the value of t's note k, if t has it (the notes are owned: the
 * round waits for its re-timings). */
static void
replace_kv(struct kt_trial *t, const char *k, const char *v)
{
    struct kt_kv *kv = (struct kt_kv *)t->result.kvs;
    int i;

    for (i = 0; i < t->result.nkvs; i++)
        if (strcmp(kv[i].k, k) == 0) {
            free((char *)kv[i].v);
            kv[i].v = kt_xstrdup(v);
        }
}

/* Removes t's note k, if t has it (the notes are owned). */
static void
drop_kv(struct kt_trial *t, const char *k)
{
    struct kt_kv *kv = (struct kt_kv *)t->result.kvs;
    int i;

    for (i = 0; i < t->result.nkvs; i++)
        if (strcmp(kv[i].k, k) == 0) {
            free((char *)kv[i].k);
            free((char *)kv[i].v);
            kv[i] = kv[--t->result.nkvs];
            return;
        }
}

/* Trial t takes the costs and the worker of the re-timing res, which had
 * every repeat: the first timing's notes on how its repeats went (settled
 * after two, stopped after one, their calls) describe the costs no longer. */
static void
take_timing(struct kt_trial *t, const struct kt_result *res)
{
    static const char *const repeat_notes[] = {"number", "numbers", "calls"};
    size_t k;

    drop_kv(t, "settled");
    drop_kv(t, "early_stop");
    for (k = 0; k < KT_ARRAY_LEN(repeat_notes); k++)
        if (kt_result_kv(res, repeat_notes[k]) != NULL)
            replace_kv(t, repeat_notes[k], kt_result_kv(res, repeat_notes[k]));
    free((char *)t->result.worker);
    t->result.worker = kt_xstrdup(res->worker ? res->worker : "?");
    t->result.cost = res->cost;
    t->result.ncosts = res->ncosts;
    memcpy((double *)t->result.costs, res->costs,
           sizeof(double) * (size_t)res->ncosts);
}

/* The confirmation res came with a timing of the best beside it, in the
 * same batch, seconds apart on one host (on a shared machine a kernel's
 * timings minutes apart differ by 10-20%, docs/performance.md: more than
 * two close programs do).  The trial costs its first timing or the
 * best's stored cost times the ratio of the two timed side by side,
 * whichever is higher.  A program that loses to the best side
 * by side never becomes the best, and one that wins is not buried by a
 * slow spell during its confirmation.  Neither worker alone crowns one:
 * the first timing and the ratio come from different workers when there
 * are two.  The costs kept are still the slower timing's. */
static void
weigh_beside(const struct kt_round *r, struct kt_trial *t, double first,
             const struct kt_result *res, const struct kt_result *beside)
{
    double scaled = r->beside_cost * res->cost / beside->cost;
    char note[200];

    snprintf(note, sizeof(note), "%.9g s beside %.9g s of schedule %s (%.9g s)",
             res->cost, beside->cost, r->beside_hash, r->beside_cost);
    add_kv(t, "timed_beside", note);
    t->result.cost = scaled > first ? scaled : first;
}

/* Folds the re-timing res into trial t: the slower timing stands, unless
 * the best was timed beside it (beside not NULL: weigh_beside). */
static void
fold(struct kt_job *job, const struct kt_round *r, struct kt_trial *t,
     const struct kt_result *res, const struct kt_result *beside)
{
    const char *other = res->worker ? res->worker : "?";
    char also[160], why[400];
    double first = t->result.cost;

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
                  t->result.worker, res->cost, other);
    if (res->cost > first) {
        snprintf(also, sizeof(also), "%.9g s on %s", first, t->result.worker);
        take_timing(t, res);
    } else {
        snprintf(also, sizeof(also), "%.9g s on %s", res->cost, other);
    }
    add_kv(t, "timed_also", also);
    if (beside != NULL && beside->err_no != 0)
        log_warnx("engine: job %s: trial %lld of %s: the best, schedule %s, "
                  "failed beside it (err_no %d: %.300s)",
                  job->name, (long long)t->trial_no, t->task_name,
                  r->beside_hash, beside->err_no,
                  beside->err_text ? beside->err_text : "");
    else if (beside != NULL && beside->cost > 0 && res->cost > 0)
        weigh_beside(r, t, first, res, beside);
}

/* Folds the re-timing res of a contended trial t: the faster timing
 * stands, with the other named in "timed_contended" and the notes of the
 * one kept.  A failed re-timing leaves t as it was. */
static void
fold_retimed(struct kt_trial *t, const struct kt_result *res)
{
    const char *other = res->worker ? res->worker : "?";
    const char *occ = kt_result_kv(res, "occupancy");
    const char *cpu = kt_result_kv(res, "cpu_cost");
    char note[160];

    if (res->err_no != 0) {
        snprintf(note, sizeof(note), "err_no %d on %s", res->err_no, other);
    } else if (res->cost < t->result.cost) {
        snprintf(note, sizeof(note), "%.9g s on %s", t->result.cost,
                 t->result.worker);
        take_timing(t, res);
        replace_kv(t, "contended",
                   is_contended(kt_result_kv(res, "contended")) ? "1" : "0");
        if (occ != NULL)
            replace_kv(t, "occupancy", occ);
        if (cpu != NULL)
            replace_kv(t, "cpu_cost", cpu);
    } else {
        snprintf(note, sizeof(note), "%.9g s on %s", res->cost, other);
    }
    add_kv(t, "timed_contended", note);
}

static void confirm_done(void *arg, const struct kt_result *res, int n);

/* Times trial i of round r again, away from the worker avoid (NULL:
 * anywhere), with the program of beside (NULL: alone) in the same batch. */
static int
submit_again(struct kt_job *job, struct kt_round *r, int i, const char *avoid,
             const struct bar *beside, char *err, size_t errlen)
{
    struct kt_measure_opts full_timing = job->mo;
    struct kt_candidate c[2];
    int n = 1;

    /* A re-timing gets every repeat: an early-stopped or settled one would
     * replace the trial's costs with fewer costs and no note saying why. */
    full_timing.stop_above_s = 0;
    full_timing.stop_ratio = 0;
    full_timing.settle = 0;
    memset(c, 0, sizeof(c));
    c[0].source = r->c[i].source;
    c[0].cc = job->cc;
    c[0].avoid_worker = avoid;
    r->confirming = i;
    r->beside = 0;
    if (beside != NULL && beside->source != NULL) {
        c[1] = c[0];
        c[1].source = beside->source;
        r->beside = 1;
        snprintf(r->beside_hash, sizeof(r->beside_hash), "%s", beside->hash);
        r->beside_cost = beside->cost;
        n = 2;
    }
    if (job->e->o.submit != NULL)
        return job->e->o.submit(job->e->o.submit_arg, job->conf->target.key, c,
                                n, &full_timing, confirm_done, r, err, errlen);
    return kt_tracker_submit(job->e->o.tracker, job->conf->target.key, c, n,
                             &full_timing, confirm_done, r, err, errlen);
}

/* Submits the next re-timing of round r: contended trials first, then
 * would-be bests; 0 when none is needed (or none could be submitted: a
 * would-be best is then rejected). */
int
kt__job_confirm_next(struct kt_job *job, struct kt_round *r)
{
    char err[512], why[600];
    int i;

    while ((i = next_to_retime(job, r)) >= 0) {
        r->confirmed[i] |= RETIMED | RETIMING;
        if (submit_again(job, r, i, NULL, NULL, err, sizeof(err)) == KT_OK)
            return 1;
        r->confirmed[i] &= (unsigned char)~RETIMING;
        log_warnx("engine: job %s: contended trial not timed again: %s",
                  job->name, err);
    }
    while ((i = next_to_confirm(job, r)) >= 0) {
        struct bar best = bar_of(job, r);
        r->confirmed[i] |= CONFIRMED;
        if (submit_again(job, r, i, r->trials[i].result.worker, &best, err,
                         sizeof(err)) == KT_OK)
            return 1;
        snprintf(why, sizeof(why), "re-timing not submitted: %.500s", err);
        reject(job, &r->trials[i], why);
    }
    return 0;
}

static int
is_contended_result(const struct kt_result *res)
{
    return res != NULL && res->err_no == 0 &&
           is_contended(kt_result_kv(res, "contended"));
}

/* The confirmation res of t came back contended and slower than t. */
static int
slowed_by_load(const struct kt_trial *t, const struct kt_result *res)
{
    return is_contended_result(res) && res->cost > t->result.cost;
}

static void
confirm_done(void *arg, const struct kt_result *res, int n)
{
    struct kt_round *r = arg;
    struct kt_job *job = r->job;
    int i = r->confirming;
    struct kt_trial *t = &r->trials[i];
    const struct kt_result *beside = r->beside && n >= 2 ? &res[1] : NULL;

    if (job->abandoned) {
        kt__job_round_abandon(job, r, r->nres);
        return;
    }
    if (r->confirmed[i] & RETIMING) {
        r->confirmed[i] &= (unsigned char)~RETIMING;
        if (n >= 1)
            fold_retimed(t, &res[0]);
    } else if (n >= 1 && !(r->confirmed[i] & CONFIRM_AGAIN) &&
               (is_contended_result(beside) || slowed_by_load(t, &res[0]))) {
        /* load slowed the confirmation, or the best beside it (which would
         * flatter the trial): once more before it stands */
        r->confirmed[i] = (unsigned char)((r->confirmed[i] | CONFIRM_AGAIN) &
                                          ~CONFIRMED);
    } else if (n >= 1) {
        fold(job, r, t, &res[0], beside);
    } else {
        reject(job, t, "no re-timing result");
    }
    if (kt__job_confirm_next(job, r))
        return;
    kt__job_commit_round(job, r);
}
