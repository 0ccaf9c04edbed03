/* jobs.c - batches of candidates on the tracker: each candidate is a build
 * job, then a run job (the built .so travels back through the tracker, so
 * build and run may happen on different workers, as with a cross compiler
 * on the host and a board that only runs).  Jobs wait in submission order;
 * the queue of a key is the jobs of batches for that key; dispatch.c hands
 * them to workers. */
#include "measure/tracker_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


void
kt_measure_default_opts(struct kt_measure_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->number = 1;
    o->repeat = 3;
    o->min_repeat_ms = 100;
    o->build_timeout_ms = 15000;
    o->run_timeout_ms = 10000;
    o->mem_mb = 2048;
    o->tolerance = 1e-4;
    o->seed = 1;
}

static void
batch_free(struct kt__batch *b)
{
    int i;

    for (i = 0; i < b->n; i++) {
        free(b->c[i].source);
        free(b->c[i].cc);
        free(b->c[i].so);
        free(b->c[i].err_text);
        kt_msg_free(&b->c[i].kvs);
    }
    free(b->c);
    free(b);
}

static void
batch_complete(struct kt__batch *b)
{
    struct kt_tracker *t = b->t;
    struct kt_result *r;
    struct kt_kv *kvs;
    struct kt__batch **p;
    int i, k, nkv = 0;

    for (p = &t->batches; *p != NULL; p = &(*p)->next) {
        if (*p == b) {
            *p = b->next;
            break;
        }
    }
    for (i = 0; i < b->n; i++)
        nkv += b->c[i].kvs.nkv;
    r = kt_xcalloc((size_t)b->n, sizeof(*r));
    kvs = kt_xcalloc((size_t)(nkv ? nkv : 1), sizeof(*kvs));
    nkv = 0;
    for (i = 0; i < b->n; i++) {
        struct kt__cand *c = &b->c[i];
        r[i] = c->res;
        r[i].err_text = c->err_text ? c->err_text : "";
        r[i].worker = c->worker;
        r[i].kvs = &kvs[nkv];
        r[i].nkvs = c->kvs.nkv;
        for (k = 0; k < c->kvs.nkv; k++, nkv++) {
            kvs[nkv].k = c->kvs.keys[k];
            kvs[nkv].v = c->kvs.vals[k];
        }
    }
    b->cb(b->arg, r, b->n);
    free(kvs);
    free(r);
    batch_free(b);
}

/* Records the final result of c; completes its batch when it was last. */
static void
cand_finish(struct kt__cand *c, int err_no, const char *text)
{
    struct kt__batch *b = c->b;

    if (c->w != NULL) {
        if (c->stage == KT__STAGE_BUILD)
            c->w->nbuild--;
        else
            c->w->nrun--;
        c->w = NULL;
    }
    c->state = KT__JOB_DONE;
    c->res.err_no = err_no;
    free(c->err_text);
    c->err_text = kt_xstrdup(text ? text : "");
    free(c->so);
    c->so = NULL;
    if (--b->remaining == 0)
        batch_complete(b);
}

/* A candidate whose object was built before skips its build. */
static void
take_built(struct kt__cand *c)
{
    const char *builder;
    const unsigned char *so = kt__obj_find(c->b->t, c->b->key, c->cc, c->source,
                                           &c->solen, &builder);

    if (so == NULL)
        return;
    c->so = kt_xmalloc(c->solen);
    memcpy(c->so, so, c->solen);
    c->stage = KT__STAGE_RUN;
    kt_msg_set(&c->kvs, "build_worker", builder);
    kt_msg_set(&c->kvs, "build_reused", "1");
}

int
kt_tracker_submit(struct kt_tracker *t, const char *key,
                  const struct kt_candidate *cands, int n,
                  const struct kt_measure_opts *o, kt_measure_done_cb cb,
                  void *arg, char *err, size_t errlen)
{
    struct kt__batch *b, **tail;
    int i, preset = 0;

    if (t->closing)
        return kt_seterr(err, errlen, KT_ECANCELED, "tracker is closing");
    if (key == NULL || key[0] == '\0' || strlen(key) >= sizeof(b->key))
        return kt_seterr(err, errlen, KT_EINVAL, "submit: bad key");
    if (n <= 0 || cb == NULL)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "submit: need candidates and a callback");
    if (o->number < 1 || o->repeat < 1 || o->repeat > KT_MAX_REPEAT ||
        o->min_repeat_ms < 0 || o->cooldown_ms < 0 || o->build_timeout_ms < 1 ||
        o->run_timeout_ms < 1 || o->threads < 0 || o->mem_mb < 0 ||
        !(o->tolerance >= 0) || !(o->settle >= 0 && o->settle <= 1) ||
        !(o->stop_ratio >= 0) || !(o->stop_above_s >= 0) ||
        !(o->placement_wait_s >= 0))
        return kt_seterr(err, errlen, KT_EINVAL,
                         "submit: measure options out of range (number>=1,"
                         " 1<=repeat<=%d, timeouts>=1 ms, 0<=settle<=1,"
                         " stop_ratio>=0)",
                         KT_MAX_REPEAT);
    for (i = 0; i < n; i++)
        if (cands[i].preset_err_no == 0 &&
            (cands[i].source == NULL || cands[i].cc == NULL))
            return kt_seterr(err, errlen, KT_EINVAL,
                             "submit: candidate %d has no source or cc", i);
    b = kt_xcalloc(1, sizeof(*b));
    b->t = t;
    snprintf(b->key, sizeof(b->key), "%s", key);
    b->o = *o;
    b->cb = cb;
    b->arg = arg;
    b->n = b->remaining = n;
    b->c = kt_xcalloc((size_t)n, sizeof(*b->c));
    for (tail = &t->batches; *tail != NULL; tail = &(*tail)->next)
        ;
    *tail = b;
    for (i = 0; i < n; i++) {
        struct kt__cand *c = &b->c[i];
        c->b = b;
        kt_msg_init(&c->kvs, NULL);
        c->stage = KT__STAGE_BUILD;
        c->state = KT__JOB_QUEUED;
        if (cands[i].preset_err_no != 0) {
            c->state = KT__JOB_DONE;
            c->res.err_no = cands[i].preset_err_no;
            c->err_text = kt_xstrdup(
                cands[i].preset_err_text ? cands[i].preset_err_text : "");
            preset++;
            continue;
        }
        c->source = kt_xstrdup(cands[i].source);
        c->cc = kt_xstrdup(cands[i].cc);
        if (cands[i].avoid_worker != NULL)
            snprintf(c->avoid, sizeof(c->avoid), "%s", cands[i].avoid_worker);
        take_built(c);
    }
    b->remaining -= preset;
    if (b->remaining == 0) {
        batch_complete(b);
        return 0;
    }
    kt__dispatch(t);
    return 0;
}

static struct kt__cand *
find_active(struct kt_tracker *t, struct kt__conn *w, const char *id)
{
    struct kt__batch *b;
    int i;

    for (b = t->batches; b != NULL; b = b->next)
        for (i = 0; i < b->n; i++)
            if (b->c[i].state == KT__JOB_ACTIVE && b->c[i].w == w &&
                strcmp(b->c[i].id, id) == 0)
                return &b->c[i];
    return NULL;
}

/* Parses "c1,c2,..." strictly: exactly want costs, each finite and > 0
 * seconds.  Returns 0, or -1 with the reason in why. */
static int
parse_costs(struct kt__cand *c, const char *s, int want, int fewer_ok,
            char *why, size_t whylen)
{
    char *end;

    c->res.ncosts = 0;
    if (s == NULL || *s == '\0') {
        snprintf(why, whylen, "worker returned no costs");
        return -1;
    }
    for (;;) {
        double v = strtod(s, &end);
        if (end == s || (*end != ',' && *end != '\0')) {
            snprintf(why, whylen,
                     "worker returned malformed costs near "
                     "'%.20s'",
                     s);
            return -1;
        }
        if (!isfinite(v) || !(v > 0)) {
            snprintf(why, whylen,
                     "worker returned cost %g: costs must be "
                     "finite and positive",
                     v);
            return -1;
        }
        if (c->res.ncosts == KT_MAX_REPEAT || c->res.ncosts == want) {
            snprintf(why, whylen,
                     "worker returned more than %d costs for "
                     "repeat=%d",
                     c->res.ncosts, want);
            return -1;
        }
        c->res.costs[c->res.ncosts++] = v;
        if (*end == '\0')
            break;
        s = end + 1;
    }
    /* an early-stopped run has one repeat, a settled one two */
    if (c->res.ncosts != want && !(fewer_ok > 0 && c->res.ncosts == fewer_ok)) {
        snprintf(why, whylen, "worker returned %d costs for repeat=%d",
                 c->res.ncosts, want);
        return -1;
    }
    return 0;
}

/* How many costs a run result may have besides `repeat`: one when the
 * request allowed an early stop and the worker says it stopped, two when
 * it allowed settling (repeat 3) and the worker says it settled; 0 none. */
static int
fewer_costs_ok(const struct kt__cand *c, const struct kt_msg *m)
{
    const struct kt_measure_opts *o = &c->b->o;
    const char *es = kt_msg_get(m, "early_stop");
    const char *st = kt_msg_get(m, "settled");

    if (c->stop_above > 0 && es != NULL && strcmp(es, "1") == 0)
        return 1;
    if (o->settle > 0 && o->repeat == 3 && st != NULL && strcmp(st, "1") == 0)
        return 2;
    return 0;
}

/* Result keys a worker may set on a trial, with their size caps; the
 * tracker's own keys (worker, build_worker, lost_worker, ...) can't be
 * spoofed, and a worker cannot grow a trial without bound. */
static size_t
result_key_cap(const char *k)
{
    static const char *const small[] = {"build_s",     "compiler_status",
                                        "signal",      "number",
                                        "run_s",       "rel_err",
                                        "ref_cached",  "workload",
                                        "flops",       "cost",
                                        "cv",          "mem_limit",
                                        "pack_s",      "check_s",
                                        "time_s",      "check_is_repeat0",
                                        "early_stop",  "settled",
                                        "build_cpu_s", "occupancy",
                                        "occupancies", "retimed",
                                        "contended",   "kernel_threads",
                                        "cpu_cost",    "numbers",
                                        "calls",       "threads_bound",
                                        "xcpu_ns"};
    size_t i;

    if (strcmp(k, "compiler_output") == 0)
        return KT_BUILD_STDERR_MAX + 64;
    for (i = 0; i < KT_ARRAY_LEN(small); i++)
        if (strcmp(k, small[i]) == 0)
            return 128;
    return 0;
}

/* A run that stopped early after its first repeat was slower than the
 * bound it was sent; one that settled after two repeats had them within
 * `settle` of each other; 1 when c's costs are neither or agree. */
static int
short_run_agrees(const struct kt__cand *c, char *why, size_t whylen)
{
    double lo, hi;

    if (c->res.ncosts == 1 && c->b->o.repeat > 1 &&
        !(c->res.costs[0] * (1 + 1e-9) > c->stop_above)) {
        snprintf(why, whylen,
                 "worker says it stopped early, but its cost %.6g s is not "
                 "above the bound %.6g s",
                 c->res.costs[0], c->stop_above);
        return 0;
    }
    if (c->res.ncosts != 2 || c->b->o.repeat != 3)
        return 1;
    lo = fmin(c->res.costs[0], c->res.costs[1]);
    hi = fmax(c->res.costs[0], c->res.costs[1]);
    if (hi <= lo * (1 + c->b->o.settle) * (1 + 1e-9))
        return 1;
    snprintf(why, whylen,
             "worker says its timing settled, but its two costs differ by "
             "%.3g%% (settle %.3g%%)",
             100 * (hi / lo - 1), 100 * c->b->o.settle);
    return 0;
}

/* A note that the timing ended early is kept only from a run the tracker
 * allowed to: a worker cannot label a trial it was asked to time fully. */
static int
claim_allowed(const struct kt__cand *c, const char *k)
{
    const struct kt_measure_opts *o = &c->b->o;

    if (strcmp(k, "early_stop") == 0)
        return c->stop_above > 0;
    if (strcmp(k, "settled") == 0)
        return o->settle > 0 && o->repeat == 3;
    return 1;
}

static void
keep_result_kvs(struct kt__cand *c, const struct kt_msg *m)
{
    int i;

    for (i = 0; i < m->nkv; i++) {
        size_t cap = result_key_cap(m->keys[i]);
        if (cap == 0 || !claim_allowed(c, m->keys[i]))
            continue;
        if (strlen(m->vals[i]) <= cap) {
            kt_msg_set(&c->kvs, m->keys[i], m->vals[i]);
        } else {
            char *v = kt_xstrdup(m->vals[i]);
            v[cap] = '\0';
            kt_msg_set(&c->kvs, m->keys[i], v);
            free(v);
        }
    }
}

/* Back to the queue, to be timed again once its host's CPUs are close
 * (hold.c); not a retry of a lost worker's job. */
static void
requeue_held(struct kt__cand *c)
{
    const char *held = kt_msg_get(&c->kvs, "placement_held");

    c->w->nrun--;
    c->w = NULL;
    c->state = KT__JOB_QUEUED;
    c->attempts--;
    kt_msg_setf(&c->kvs, "placement_held", "%d",
                (held != NULL ? atoi(held) : 0) + 1);
}

/* Where the run's threads sat (hold.c): KT__PLACE_HOLD has requeued c;
 * KT__PLACE_APART results are taken marked contended. */
static int
judge_placement(struct kt__cand *c, struct kt__conn *w, const struct kt_msg *m,
                double *quiet_ns)
{
    const char *held = kt_msg_get(&c->kvs, "placement_held");
    double wait_s = c->b->o.placement_wait_s, xcpu = 0;
    /* a worker whose round trips swing back and forth does not hold one
     * candidate for ever: no more holds than wait_s takes */
    int got, place, max_holds = 8 + (int)(wait_s * 1000 / KT__HOLD_MAX_MS);
    char err[160];

    *quiet_ns = 0;
    got = kt_msg_get_double(m, "xcpu_ns", 0, 0, 0, 1e9, &xcpu, err,
                            sizeof(err));
    if (got < 0 || !(xcpu > 0))
        return KT__PLACE_NEAR;
    /* a candidate at its cap is taken without holding its host's other
     * runs for it */
    place = kt__place_judge(w->t, w->host, xcpu, wait_s,
                            held == NULL || atoi(held) < max_holds, kt_now(),
                            quiet_ns);
    if (place == KT__PLACE_HOLD)
        requeue_held(c);
    return place;
}

void
kt__on_result(struct kt__conn *w, const struct kt_msg *m)
{
    struct kt_tracker *t = w->t;
    const char *id = kt_msg_get(m, "id"), *stage = kt_msg_get(m, "stage");
    const char *text = kt_msg_get(m, "err_text");
    struct kt__cand *c = id ? find_active(t, w, id) : NULL;
    char err[200], why[160];
    double quiet_ns = 0;
    int place = KT__PLACE_NEAR;
    long long e;

    if (c == NULL || stage == NULL ||
        strcmp(stage, c->stage == KT__STAGE_BUILD ? "build" : "run") != 0) {
        log_warnx("tracker: worker %s sent a result for job '%s', which it "
                  "was not given; ignored",
                  w->name, id ? id : "?");
        return;
    }
    if (kt_msg_get_ll(m, "err_no", 1, 0, 0, 8, &e, err, sizeof(err)) < 0) {
        e = KT_MERR_UNKNOWN;
        text = err;
    }
    w->done++;
    t->results++;
    if (c->stage == KT__STAGE_RUN && e == 0 &&
        (place = judge_placement(c, w, m, &quiet_ns)) == KT__PLACE_HOLD) {
        kt__dispatch(t);
        return;
    }
    keep_result_kvs(c, m);
    if (c->stage == KT__STAGE_BUILD) {
        (void)kt_msg_get_double(m, "build_s", 0, 0, 0, 1e9, &c->res.build_s,
                                err, sizeof(err));
        if (e == 0 && m->payload_len == 0) {
            e = KT_MERR_COMPILE_HOST;
            text = "worker returned no shared object";
        }
        if (e != 0) {
            cand_finish(c, (int)e, text);
        } else {
            w->nbuild--;
            c->w = NULL;
            kt_msg_set(&c->kvs, "build_worker", w->name);
            c->so = kt_xmalloc(m->payload_len);
            memcpy(c->so, m->payload, m->payload_len);
            c->solen = m->payload_len;
            kt__obj_put(t, c->b->key, c->cc, c->source, c->so, c->solen,
                        w->name);
            c->stage = KT__STAGE_RUN;
            c->state = KT__JOB_QUEUED;
            c->attempts = 0;
        }
    } else {
        (void)kt_msg_get_double(m, "run_s", 0, 0, 0, 1e9, &c->res.run_s, err,
                                sizeof(err));
        if (e == 0) {
            if (parse_costs(c, kt_msg_get(m, "costs"), c->b->o.repeat,
                            fewer_costs_ok(c, m), why, sizeof(why)) == 0 &&
                short_run_agrees(c, why, sizeof(why))) {
                kt_run_summarize(c->res.costs, c->res.ncosts, &c->res.cost,
                                 &c->res.cv);
                if (c->b->best_s <= 0 || c->res.cost < c->b->best_s)
                    c->b->best_s = c->res.cost;
                if (place == KT__PLACE_APART) {
                    kt_msg_set(&c->kvs, "contended", "1");
                    kt_msg_setf(&c->kvs, "xcpu_quiet_ns", "%.0f", quiet_ns);
                }
            } else {
                log_warnx("tracker: worker %s, job %s: %s; err_no 8", w->name,
                          c->id, why);
                c->res.ncosts = 0;
                e = KT_MERR_UNKNOWN;
                text = why;
            }
        }
        kt_msg_set(&c->kvs, "worker", w->name);
        if (e != 0)
            kt__obj_drop(t, c->b->key, c->cc, c->source);
        cand_finish(c, (int)e, text);
    }
    kt__dispatch(t);
}

void
kt__worker_lost(struct kt__conn *w, const char *why)
{
    struct kt_tracker *t = w->t;
    struct kt__batch *b, *next;
    int i;

    for (b = t->batches; b != NULL; b = next) {
        next = b->next; /* cand_finish may free b */
        for (i = 0; i < b->n; i++) {
            struct kt__cand *c = &b->c[i];
            if (c->state != KT__JOB_ACTIVE || c->w != w)
                continue;
            if (c->attempts > t->o.max_retries) {
                struct kt_buf msg;
                kt_buf_init(&msg);
                kt_buf_printf(&msg,
                              "worker %s lost (%s) during %s; gave up "
                              "after %d attempts",
                              w->name, why,
                              c->stage == KT__STAGE_BUILD ? "build" : "run",
                              c->attempts);
                int last = b->remaining == 1;
                kt_msg_set(&c->kvs, "lost_worker", w->name);
                cand_finish(c, KT_MERR_UNKNOWN, msg.p);
                kt_buf_free(&msg);
                if (last)
                    break; /* b is freed */
            } else {
                log_info("tracker: re-queueing %s (%s, attempt %d) after "
                         "losing %s",
                         c->id, c->stage == KT__STAGE_BUILD ? "build" : "run",
                         c->attempts, w->name);
                c->state = KT__JOB_QUEUED;
                c->w = NULL;
                kt_msg_set(&c->kvs, "requeued_from", w->name);
            }
        }
    }
    w->nbuild = w->nrun = 0;
}

void
kt__check_deadlines(struct kt_tracker *t, double now)
{
    struct kt__batch *b;
    int i;

    for (b = t->batches; b != NULL; b = b->next) {
        for (i = 0; i < b->n; i++) {
            struct kt__cand *c = &b->c[i];
            struct kt__conn *w = c->w;
            char why[160];
            if (c->state != KT__JOB_ACTIVE || now < c->deadline)
                continue;
            snprintf(why, sizeof(why),
                     "no answer to %s %s within its "
                     "deadline",
                     c->stage == KT__STAGE_BUILD ? "build" : "run", c->id);
            /* The worker is stuck: the job fails, the worker is dropped
             * (it reconnects) and its other jobs are re-queued. */
            kt_msg_set(&c->kvs, "stuck_worker", w->name);
            cand_finish(c,
                        c->stage == KT__STAGE_BUILD ? KT_MERR_BUILD_TIMEOUT
                                                    : KT_MERR_RUN_TIMEOUT,
                        why);
            kt__conn_drop(w, why);
            return; /* lists changed; the next tick continues */
        }
    }
}

void
kt__fail_all(struct kt_tracker *t, const char *why)
{
    while (t->batches != NULL) {
        struct kt__batch *b = t->batches;
        int i;
        for (i = 0; t->batches == b && i < b->n; i++)
            if (b->c[i].state != KT__JOB_DONE)
                cand_finish(&b->c[i], KT_MERR_UNKNOWN, why);
    }
}

void
kt__status_queues(struct kt_tracker *t, struct kt_msg *m)
{
    struct kt__batch *b;
    char keys[32][64];
    int pending[32], active[32], nk = 0, i, j;

    for (b = t->batches; b != NULL; b = b->next) {
        for (j = 0; j < nk; j++)
            if (strcmp(keys[j], b->key) == 0)
                break;
        if (j == nk) {
            if (nk == 32)
                continue;
            snprintf(keys[nk], sizeof(keys[nk]), "%s", b->key);
            pending[nk] = active[nk] = 0;
            nk++;
        }
        for (i = 0; i < b->n; i++) {
            pending[j] += b->c[i].state == KT__JOB_QUEUED;
            active[j] += b->c[i].state == KT__JOB_ACTIVE;
        }
    }
    kt_msg_setf(m, "queues", "%d", nk);
    for (j = 0; j < nk; j++) {
        char k[32];
        snprintf(k, sizeof(k), "q.%d.key", j);
        kt_msg_set(m, k, keys[j]);
        snprintf(k, sizeof(k), "q.%d.pending", j);
        kt_msg_setf(m, k, "%d", pending[j]);
        snprintf(k, sizeof(k), "q.%d.active", j);
        kt_msg_setf(m, k, "%d", active[j]);
    }
}
