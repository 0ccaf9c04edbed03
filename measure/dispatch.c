/* dispatch.c - the tracker gives a queued job to an idle worker of the
 * batch's key with the role (a build also to a worker of a key trusted to
 * build for it, kt_key_builder); with serialize_hosts a host times one
 * kernel at a time and compiles nothing meanwhile.  Runs go first; a
 * re-timing avoids the worker that timed it when there is another. */
#include "measure/tracker_int.h"

#include <stdio.h>
#include <string.h>

#define DEADLINE_GRACE_S 10.0
#define MAX_HOSTS 64

struct hosts {
    const char *name[MAX_HOSTS];
    int runs[MAX_HOSTS];
    int builds[MAX_HOSTS];
    int run_waiting[MAX_HOSTS];
    int n;
};

static int
host_of(struct hosts *h, const char *name)
{
    int i;

    for (i = 0; i < h->n; i++)
        if (strcmp(h->name[i], name) == 0)
            return i;
    if (h->n == MAX_HOSTS)
        return MAX_HOSTS - 1;
    h->name[h->n] = name;
    return h->n++;
}

/* The early-stop bound of a run (docs/measure.md): the engine's (the
 * task's best before the batch, times stop_ratio) or stop_ratio times the
 * best the batch has measured since, whichever is lower; 0 = none. */
static double
stop_above(const struct kt_measure_opts *o, double batch_best_s)
{
    double bound = o->stop_above_s;

    if (o->stop_ratio > 0 && batch_best_s > 0 &&
        (bound <= 0 || o->stop_ratio * batch_best_s < bound))
        bound = o->stop_ratio * batch_best_s;
    return bound;
}

static void
send_job(struct kt_tracker *t, struct kt__cand *c, struct kt__conn *w)
{
    struct kt__batch *b = c->b;
    struct kt_msg m;
    int tmo;

    snprintf(c->id, sizeof(c->id), "j%lu", ++t->next_id);
    c->w = w;
    c->state = KT__JOB_ACTIVE;
    c->attempts++;
    c->res.attempts++;
    if (c->stage == KT__STAGE_BUILD) {
        tmo = b->o.build_timeout_ms;
        w->nbuild++;
        kt_msg_init(&m, "build");
        kt_msg_set(&m, "id", c->id);
        kt_msg_setf(&m, "timeout_ms", "%d", tmo);
        kt_msg_set(&m, "cc", c->cc);
        kt_msg_set_payload(&m, c->source, strlen(c->source));
    } else {
        tmo = b->o.run_timeout_ms;
        w->nrun++;
        kt_msg_init(&m, "run");
        kt_msg_set(&m, "id", c->id);
        kt_msg_setf(&m, "timeout_ms", "%d", tmo);
        kt_msg_setf(&m, "number", "%d", b->o.number);
        kt_msg_setf(&m, "repeat", "%d", b->o.repeat);
        kt_msg_setf(&m, "min_repeat_ms", "%d", b->o.min_repeat_ms);
        kt_msg_setf(&m, "cooldown_ms", "%d", b->o.cooldown_ms);
        kt_msg_setf(&m, "flush", "%d", b->o.flush_cache ? 1 : 0);
        kt_msg_setf(&m, "threads", "%d", b->o.threads);
        kt_msg_setf(&m, "mem_mb", "%lld", b->o.mem_mb);
        kt_msg_setf(&m, "tol", "%.9g", b->o.tolerance);
        kt_msg_setf(&m, "seed", "%llu", (unsigned long long)b->o.seed);
        c->stop_above = stop_above(&b->o, b->best_s);
        if (c->stop_above > 0)
            kt_msg_setf(&m, "stop_above", "%.9g", c->stop_above);
        if (b->o.settle > 0)
            kt_msg_setf(&m, "settle", "%.9g", b->o.settle);
        kt_msg_set_payload(&m, c->so, c->solen);
    }
    /* past the worker's own deadline (a build's is a CPU-time budget with
     * a wall-time backstop KT_BUILD_WALL_FACTOR times longer) */
    c->deadline = kt_now() +
                  tmo / 1000.0 * 1.5 *
                      (c->stage == KT__STAGE_BUILD ? KT_BUILD_WALL_FACTOR : 1) +
                  DEADLINE_GRACE_S;
    snprintf(c->worker, sizeof(c->worker), "%s", w->name);
    log_debug("tracker: %s %s of batch key=%s to %s",
              c->stage == KT__STAGE_BUILD ? "build" : "run", c->id, b->key,
              w->name);
    kt__conn_send(w, &m);
    kt_msg_free(&m);
}

/* Builds by a worker of another key only where the configuration trusts
 * that key's builders for the batch's key (kt_key_builder). */
static int
trusted_builder(const struct kt_tracker *t, const char *key,
                const char *build_key)
{
    int i;

    for (i = 0; i < t->nkeybuild; i++)
        if (strcmp(t->keybuild[i].key, key) == 0 &&
            strcmp(t->keybuild[i].build_key, build_key) == 0)
            return 1;
    return 0;
}

static int
usable(const struct kt__conn *w, const struct kt__batch *b, int role)
{
    if (w->state != KT__CONN_WORKER || !(w->roles & role))
        return 0;
    return strcmp(w->key, b->key) == 0 ||
           (role == KT_ROLE_BUILD && trusted_builder(b->t, b->key, w->key));
}

/* A run that should avoid a worker waits for another run worker of the
 * key while one is connected (busy or not); it goes to the avoided worker
 * only when that is the key's only one. */
static int
avoided(const struct kt_tracker *t, const struct kt__cand *c,
        const struct kt__conn *w)
{
    const struct kt__conn *o;

    if (c->avoid[0] == '\0' || strcmp(w->name, c->avoid) != 0)
        return 0;
    for (o = t->conns; o != NULL; o = o->next)
        if (o != w && usable(o, c->b, KT_ROLE_RUN))
            return 1;
    return 0;
}

void
kt__dispatch(struct kt_tracker *t)
{
    struct hosts h;
    struct kt__conn *w;
    struct kt__batch *b;
    int i, ser = t->o.serialize_hosts;
    double now = kt_now();

    if (t->closing)
        return;
    memset(&h, 0, sizeof(h));
    for (w = t->conns; w != NULL; w = w->next) {
        if (w->state != KT__CONN_WORKER)
            continue;
        i = host_of(&h, w->host);
        h.runs[i] += w->nrun;
        h.builds[i] += w->nbuild;
    }
    /* Runs first: an idle run worker whose host is quiet. */
    for (b = t->batches; b != NULL; b = b->next) {
        for (i = 0; i < b->n; i++) {
            struct kt__cand *c = &b->c[i];
            if (c->state != KT__JOB_QUEUED || c->stage != KT__STAGE_RUN)
                continue;
            for (w = t->conns; w != NULL; w = w->next) {
                int hi;
                if (!usable(w, b, KT_ROLE_RUN) || w->nrun || w->nbuild ||
                    avoided(t, c, w) || kt__place_held(t, w->host, now))
                    continue;
                hi = host_of(&h, w->host);
                if (ser && (h.runs[hi] || h.builds[hi])) {
                    if (!h.runs[hi])
                        h.run_waiting[hi] = 1;
                    continue;
                }
                send_job(t, c, w);
                h.runs[hi]++;
                break;
            }
        }
    }
    /* Builds: a worker with a free slot, on a host that is not timing and
     * has no timing run waiting for its builds to drain. */
    for (b = t->batches; b != NULL; b = b->next) {
        for (i = 0; i < b->n; i++) {
            struct kt__cand *c = &b->c[i];
            if (c->state != KT__JOB_QUEUED || c->stage != KT__STAGE_BUILD)
                continue;
            for (w = t->conns; w != NULL; w = w->next) {
                int hi;
                if (!usable(w, b, KT_ROLE_BUILD) || w->nrun ||
                    w->nbuild >= w->jobs)
                    continue;
                hi = host_of(&h, w->host);
                if (ser && (h.runs[hi] || h.run_waiting[hi]))
                    continue;
                send_job(t, c, w);
                h.builds[hi]++;
                break;
            }
        }
    }
}
