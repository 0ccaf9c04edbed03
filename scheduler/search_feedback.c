/* search_feedback.c - what a search keeps of its candidates: the genomes
 * of those whose results are pending, and the fastest measured programs,
 * which seed the population of later rounds (measured here, stored before
 * a restart, or of another workload), and the hashes never to propose
 * again.  All three are bounded. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/search_int.h"

/* ---- the hashes never to propose again -------------------------------- */

void
sk_seen_init(struct sk_seen *s)
{
    memset(s, 0, sizeof(*s));
    kt_u64set_init(&s->recent);
}

void
sk_seen_free(struct sk_seen *s)
{
    kt_u64set_free(&s->recent);
    free(s->bloom);
    memset(s, 0, sizeof(*s));
}

/* Probe i of h: double hashing over two mixes of the hash. */
static size_t
seen_bit(uint64_t h, int i)
{
    uint64_t a = kt_hash_mix(h), b = kt_hash_mix(h ^ 0x9e3779b97f4a7c15ULL) | 1;

    return (size_t)((a + (uint64_t)i * b) & (SK_SEEN_BLOOM_BITS - 1));
}

static void
bloom_add(struct sk_seen *s, uint64_t h)
{
    int i;

    for (i = 0; i < SK_SEEN_PROBES; i++) {
        size_t b = seen_bit(h, i);
        s->bloom[b / 64] |= 1ull << (b % 64);
    }
}

/* The recent hashes move into the filter (the u64 set keeps no order, so
 * all of them at once). */
static void
seen_age(struct sk_seen *s)
{
    size_t j;

    if (s->bloom == NULL)
        s->bloom = kt_xcalloc(SK_SEEN_BLOOM_BITS / 64, sizeof(uint64_t));
    for (j = 0; j < s->recent.cap; j++)
        if (s->recent.v[j] != 0)
            bloom_add(s, s->recent.v[j]);
    if (s->recent.has_zero)
        bloom_add(s, 0);
    s->nold += kt_u64set_count(&s->recent);
    kt_u64set_free(&s->recent);
}

void
sk_seen_add(struct sk_seen *s, uint64_t h)
{
    if (sk_seen_has(s, h))
        return;
    if (kt_u64set_count(&s->recent) >= SK_SEEN_EXACT)
        seen_age(s);
    kt_u64set_add(&s->recent, h);
}

int
sk_seen_has(const struct sk_seen *s, uint64_t h)
{
    int i;

    if (kt_u64set_has(&s->recent, h))
        return 1;
    if (s->bloom == NULL)
        return 0;
    for (i = 0; i < SK_SEEN_PROBES; i++) {
        size_t b = seen_bit(h, i);
        if (!(s->bloom[b / 64] >> (b % 64) & 1))
            return 0;
    }
    return 1;
}

size_t
sk_seen_bytes(const struct sk_seen *s)
{
    return s->recent.cap * sizeof(uint64_t) +
           (s->bloom != NULL ? SK_SEEN_BLOOM_BITS / 8 : 0);
}

/* ---- pending genomes and measured seeds -------------------------------- */

/* Genomes of candidates whose results have not come back: one or two
 * batches in flight.  The candidates of a dropped look-ahead round never
 * come back; beyond this many the oldest half is forgotten. */
#define SK_MAX_PENDING 1024

void
sk_remember(struct kt_search *s, const struct sk_member *m)
{
    int i;

    /* one entry per schedule: a neighbour of the fastest program can also
     * be in the evolved pools, and kt_search_record retires one entry per
     * result, so a second one would stay pending for good */
    for (i = 0; i < s->nprop; i++)
        if (s->prop[i].hash == m->hash)
            return;
    if (s->nprop == SK_MAX_PENDING) {
        int half = SK_MAX_PENDING / 2;
        memmove(s->prop, s->prop + half,
                sizeof(*s->prop) * (size_t)(s->nprop - half));
        s->nprop -= half;
    }
    if (s->nprop == s->capprop) {
        s->capprop = s->capprop ? 2 * s->capprop : 64;
        s->prop = kt_xrealloc(s->prop, sizeof(*s->prop) * (size_t)s->capprop);
    }
    s->prop[s->nprop++] = *m;
}

static int
cmp_tput_desc(const void *a, const void *b, void *arg)
{
    const double *t = arg;
    int x = *(const int *)a, y = *(const int *)b;

    if (t[x] != t[y])
        return t[x] > t[y] ? -1 : 1;
    return x - y;
}

/* The measured programs' indices, fastest first (earlier first among
 * equals); the caller frees it. */
static int *
measured_order(const struct kt_search *s)
{
    int *ord = kt_xmalloc(sizeof(int) * (size_t)(s->nmeas ? s->nmeas : 1));
    int i;

    for (i = 0; i < s->nmeas; i++)
        ord[i] = i;
    /* insertion sort: stable, and nmeas stays small (prune_measured) */
    for (i = 1; i < s->nmeas; i++) {
        int v = ord[i], j = i - 1;
        while (j >= 0 && cmp_tput_desc(&ord[j], &v, s->meas_tput) > 0) {
            ord[j + 1] = ord[j];
            j--;
        }
        ord[j + 1] = v;
    }
    return ord;
}

/* The seeds a round takes (Ansor: at most ratio x population). */
int
sk_measured_seed_count(const struct kt_search *s)
{
    return (int)(s->o.use_measured_ratio * s->o.population);
}

/* Top measured states by throughput. */
int
sk_measured_seeds(struct kt_search *s, struct sk_member *dst, int max)
{
    int *ord, i, n = 0;

    if (s->nmeas == 0 || max <= 0)
        return 0;
    ord = measured_order(s);
    for (i = 0; i < s->nmeas && n < max; i++) {
        dst[n] = s->meas[ord[i]];
        dst[n].origin = dst[n].hash; /* its mutants keep this */
        n++;
    }
    free(ord);
    return n;
}

/* Keeps the keep fastest measured programs, fastest first: no round
 * seeds from the others, so the seeds of every later round are the same
 * as if all were kept. */
static void
prune_measured(struct kt_search *s, int keep)
{
    int *ord = measured_order(s), i;
    struct sk_member *meas = kt_xmalloc(sizeof(*meas) * (size_t)s->capmeas);
    double *tput = kt_xmalloc(sizeof(*tput) * (size_t)s->capmeas);

    for (i = 0; i < keep && i < s->nmeas; i++) {
        meas[i] = s->meas[ord[i]];
        tput[i] = s->meas_tput[ord[i]];
    }
    free(s->meas);
    free(s->meas_tput);
    free(ord);
    s->meas = meas;
    s->meas_tput = tput;
    s->nmeas = i;
}

/* Appends m to the measured programs that seed the population. */
static void
add_measured(struct kt_search *s, const struct sk_member *m, double cost)
{
    int keep = sk_measured_seed_count(s);

    /* pruned in steps of keep + 64 appends: bounded and cheap */
    if (s->nmeas >= 2 * keep + 64)
        prune_measured(s, keep);
    if (s->nmeas == s->capmeas) {
        s->capmeas = s->capmeas ? 2 * s->capmeas : 64;
        s->meas = kt_xrealloc(s->meas, sizeof(*s->meas) * (size_t)s->capmeas);
        s->meas_tput = kt_xrealloc(s->meas_tput,
                                   sizeof(double) * (size_t)s->capmeas);
    }
    s->meas[s->nmeas] = *m;
    s->meas_tput[s->nmeas++] = 1.0 / cost;
}

/* Queues the transfers of another workload's schedule (hash origin) that
 * are new, in place of those of that workload's earlier programs not
 * measured yet (a task offers each new best: the latest is the one to
 * try): 1 if any. */
static int
queue_transfers(struct kt_search *s, const struct kt_dag *from,
                const struct kt_step *steps, int nsteps, uint64_t origin)
{
    struct sk_member *t = kt_xcalloc((size_t)s->nsketches + 1, sizeof(*t));
    int n = sk_transfer(s, from, steps, nsteps, t), i, j, queued = 0;

    if (n == 0) {
        free(t);
        return 0;
    }
    if (s->xfer == NULL)
        s->xfer = kt_xcalloc(SK_MAX_TRANSFERS, sizeof(*s->xfer));
    for (i = j = 0; i < s->nxfer; i++)
        if (s->xfer[i].from != from)
            s->xfer[j++] = s->xfer[i];
    s->nxfer = j;
    for (i = 0; i < n; i++) {
        if (sk_seen_has(&s->proposed, t[i].hash))
            continue;
        for (j = 0; j < s->nxfer && s->xfer[j].m.hash != t[i].hash; j++)
            ;
        if (j < s->nxfer)
            continue;
        if (s->nxfer == SK_MAX_TRANSFERS) {
            s->nxfer--;
            memmove(s->xfer, s->xfer + 1, sizeof(*s->xfer) * (size_t)s->nxfer);
        }
        t[i].origin = origin; /* its candidate's seed_of */
        s->xfer[s->nxfer].m = t[i];
        s->xfer[s->nxfer++].from = from;
        queued = 1;
    }
    free(t);
    return queued;
}

int
kt_search_seed_other(struct kt_search *s, const struct kt_step *steps,
                     int nsteps, double cost, const struct kt_dag *from)
{
    struct sk_member m;
    char hex[17];
    uint64_t h = 0;
    int i, seeded = 0;

    if (!(cost > 0) || !isfinite(cost))
        return 0;
    kt_steps_hash(steps, nsteps, hex);
    kt_hash_parse(hex, &h);
    pthread_mutex_lock(&s->lock);
    for (i = 0; i < s->nmeas && s->meas[i].hash != h; i++)
        ;
    if (i == s->nmeas && sk_decode(s, steps, nsteps, h, &m)) {
        /* not marked proposed: it was never measured on this workload */
        add_measured(s, &m, cost);
        seeded = 1;
    } else if (i == s->nmeas && from != NULL && from != s->dag) {
        seeded = queue_transfers(s, from, steps, nsteps, h);
    }
    pthread_mutex_unlock(&s->lock);
    return seeded;
}

/* kt_looptree_hash of the program the steps lower to, or 0. */
static uint64_t
program_of(const struct kt_search *s, const struct kt_step *steps, int nsteps)
{
    struct kt_state *st = NULL;
    struct kt_looptree *lt = NULL;
    char err[256];
    uint64_t h = 0;

    if (kt_state_replay(s->dag, steps, nsteps, &st, err, sizeof(err)) == KT_OK &&
        kt_lower(st, &lt, err, sizeof(err)) == KT_OK)
        h = kt_looptree_hash(lt);
    kt_looptree_free(lt);
    kt_state_free(st);
    return h;
}

int
kt_search_record(struct kt_search *s, const struct kt_step *steps, int nsteps,
                 double cost)
{
    char hex[17];
    uint64_t h = 0;
    int i, found = 0;

    kt_steps_hash(steps, nsteps, hex);
    kt_hash_parse(hex, &h);
    pthread_mutex_lock(&s->lock);
    if (!sk_seen_has(&s->proposed, h)) {
        /* measured elsewhere (a stored record): its program is not
         * measured again under another schedule */
        uint64_t program = program_of(s, steps, nsteps);
        if (program != 0)
            sk_seen_add(&s->programs, program);
    }
    if (!sk_seen_has(&s->proposed, h) && cost > 0 && isfinite(cost)) {
        /* ... and seeds the GA if it decodes */
        struct sk_member m;
        if (sk_decode(s, steps, nsteps, h, &m))
            sk_remember(s, &m);
    }
    sk_seen_add(&s->proposed, h);
    for (i = s->nprop - 1; i >= 0; i--) {
        if (s->prop[i].hash != h)
            continue;
        found = 1;
        if (cost > 0 && isfinite(cost))
            add_measured(s, &s->prop[i], cost);
        /* its result is in: the genome is no longer pending */
        memmove(&s->prop[i], &s->prop[i + 1],
                sizeof(*s->prop) * (size_t)(s->nprop - i - 1));
        s->nprop--;
        break;
    }
    /* a program measured again (timed first while its host was loaded
     * or its CPUs apart) keeps its faster timing */
    for (i = 0; !found && cost > 0 && isfinite(cost) && i < s->nmeas; i++)
        if (s->meas[i].hash == h && 1.0 / cost > s->meas_tput[i]) {
            s->meas_tput[i] = 1.0 / cost;
            found = 1;
        }
    pthread_mutex_unlock(&s->lock);
    return found;
}
