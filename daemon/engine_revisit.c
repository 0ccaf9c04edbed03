/* engine_revisit.c - programs timed while their host's CPUs sat apart,
 * timed again once they are close (docs/measure.md, "Thread placement").
 *
 * On a VM whose host moves one vCPU to another CCX for a while, a 2-thread
 * kernel that passes data between its threads runs up to 2.4x slower, and
 * the tracker marks such results contended (xcpu_quiet_ns).  A task's best
 * is its lowest cost, so a program timed apart loses to any program timed
 * close: in a det tuning whose results were 63% apart, the bias + relu
 * Winograd task kept its 9th trial (0.95 ms) through 142 trials, most
 * timed apart, though its later programs ran 0.77 ms close.  So a result
 * timed apart whose cost over that slowdown would beat the task's best is
 * kept (the last KT_MAX_REVISITS per task), and once most of a round's
 * results are timed close again, the task's next rounds measure it again
 * as an extra candidate, stored as its own trial with a "revisit_of" note
 * naming the first (a trial of the budget, counted in the round's size). */
#include "daemon/engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest slowdown of a kernel with the CPUs apart measured on the
 * machine of docs/performance.md (0.78 -> 1.88 ms): a result timed apart
 * over this is the least it could cost close. */
#define APART_SLOWDOWN 2.4
/* At most one revisit in this many candidates of a round (and one). */
#define REVISIT_SHARE 8

void
kt__revisit_free(struct kt_revisit *v, int n)
{
    int i;

    for (i = 0; i < n; i++)
        free(v[i].config);
}

static void
keep(struct kt_task_state *ts, const char *config, int64_t trial_no)
{
    if (ts->nrevisit == KT_MAX_REVISITS) {
        free(ts->revisit[0].config);
        memmove(ts->revisit, ts->revisit + 1,
                sizeof(*ts->revisit) * (KT_MAX_REVISITS - 1));
        ts->nrevisit--;
    }
    ts->revisit[ts->nrevisit].config = kt_xstrdup(config);
    ts->revisit[ts->nrevisit].trial_no = trial_no;
    ts->nrevisit++;
}

void
kt__revisit_collect(struct kt_job *job, struct kt_round *r, double best)
{
    struct kt_task_state *ts = &job->ts[r->task];
    int i, apart = 0, close = 0;

    for (i = 0; i < r->nres; i++) {
        const struct kt_trial *t = &r->trials[i];
        int is_apart = kt_result_kv(&t->result, "xcpu_quiet_ns") != NULL;
        if (t->result.err_no != 0 ||
            kt_result_kv(&t->result, "xcpu_ns") == NULL)
            continue;
        apart += is_apart;
        close += !is_apart;
        /* a revisit is not revisited: timed apart twice, it stands */
        if (is_apart && !r->c[i].revisit &&
            t->result.cost / APART_SLOWDOWN < best)
            keep(ts, r->c[i].config, t->trial_no);
    }
    if (apart + close > 0)
        job->cpus_apart = apart > close;
}

void
kt__revisit_take(struct kt_job *job, struct kt_round *r)
{
    struct kt_task_state *ts = &job->ts[r->task];
    int n = (r->want + REVISIT_SHARE - 1) / REVISIT_SHARE;

    if (job->cpus_apart || ts->nrevisit == 0 || r->want < 2)
        return;
    if (n > ts->nrevisit)
        n = ts->nrevisit;
    /* the newest: the task's best moves on, older ones are less likely
     * to beat it */
    r->revisit = kt_xcalloc((size_t)n, sizeof(*r->revisit));
    memcpy(r->revisit, ts->revisit + ts->nrevisit - n,
           sizeof(*r->revisit) * (size_t)n);
    r->nrevisit = n;
    ts->nrevisit -= n;
    r->want -= n;
}
