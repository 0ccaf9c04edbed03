/* search_policy.c - the search API: options, one round (initial
 * population, evolutionary search, eps-greedy picking with deduplication)
 * and feedback of measured results.  See docs/search.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/search_int.h"

void
kt_search_opts_default(struct kt_search_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->policy = KT_POLICY_SKETCH_XGB;
    o->population = 2048;
    o->num_iters = 4;
    o->mutation_prob = 0.85;
    o->eps_greedy = 0.05;
    o->use_measured_ratio = 0.2;
    o->max_innermost_factor = 64;
    o->max_innermost_reduce = 512;
    o->max_register_tile = 384;
    o->vector_bytes = 64;
    o->cores = 2;
    o->nthreads = 1;
    o->seed = 1;
}

int
kt_search_new(struct kt_search **out, const struct kt_dag *dag,
              const struct kt_search_opts *o, char *err, size_t errlen)
{
    struct kt_search *s;
    int rc;

    *out = NULL;
    if (o->policy < 0 || o->policy > KT_POLICY_RANDOM || o->population < 1 ||
        o->num_iters < 0 || o->mutation_prob < 0 || o->mutation_prob > 1 ||
        o->eps_greedy < 0 || o->eps_greedy > 1 || o->use_measured_ratio < 0 ||
        o->max_innermost_factor < 1 || o->max_innermost_reduce < 1 ||
        o->max_register_tile < 1 || o->cores < 1)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "search options: policy %d, "
                         "population %d, num_iters %d, mutation_prob %g, "
                         "eps_greedy %g, max_innermost_factor %d, cores %d: "
                         "out of range",
                         o->policy, o->population, o->num_iters,
                         o->mutation_prob, o->eps_greedy,
                         o->max_innermost_factor, o->cores);
    s = kt_xcalloc(1, sizeof(*s));
    pthread_mutex_init(&s->lock, NULL);
    s->dag = dag;
    s->o = *o;
    kt_rng_seed(&s->rng, o->seed);
    s->rmodel = kt_random_model_new(o->seed ^ 0x5eed5eedULL);
    kt_u64set_init(&s->proposed);
    rc = sk_generate(s, err, errlen);
    if (rc == KT_OK && sk_prepare_factors(s) != KT_OK)
        rc = kt_seterr(err, errlen, KT_EINVAL,
                       "%s: an axis extent is too large",
                       dag->key ? dag->key : "dag");
    if (rc != KT_OK) {
        kt_search_free(s);
        return rc;
    }
    *out = s;
    return KT_OK;
}

void
kt_search_free(struct kt_search *s)
{
    if (s == NULL)
        return;
    sk_free_sketches(s);
    sk_free_factors(s);
    kt_random_model_free(s->rmodel);
    kt_u64set_free(&s->proposed);
    free(s->prop);
    free(s->meas);
    free(s->meas_tput);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int
kt_search_nsketches(struct kt_search *s)
{
    return s->nsketches;
}

const char *
kt_search_sketch_desc(struct kt_search *s, int i)
{
    return i >= 0 && i < s->nsketches ? s->sk[i].desc : "";
}

void
kt_search_batch_free(struct kt_search_batch *b)
{
    int i;

    if (b == NULL)
        return;
    for (i = 0; i < b->n; i++) {
        free(b->v[i].steps);
        kt_state_free(b->v[i].state);
        kt_looptree_free(b->v[i].lt);
        free(b->v[i].rows);
        free(b->v[i].feature_err);
    }
    free(b->v);
    b->v = NULL;
    b->n = 0;
}

/* ---- one round --------------------------------------------------------- */

struct round {
    struct kt_search *s;
    struct sk_score_ctx sc;
    struct kt_u64set taken; /* picked in this batch */
    struct kt_search_stats *st;
    char *err;
    size_t errlen;
};

/* Never measured (passed in now or before, or recorded), never proposed. */
static int
is_new(const struct round *R, uint64_t h)
{
    return !kt_u64set_has(&R->s->proposed, h);
}

static int
cmp_score_desc(const void *a, const void *b)
{
    const struct sk_member *x = a, *y = b;

    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

/* Samples until at least min(population, 50) valid distinct members
 * (Ansor's SampleInitPopulation); *out gets them, scored. */
static int
sample_init(struct round *R, int mutate, struct sk_member **out, int *nout)
{
    struct kt_search *s = R->s;
    int pop = s->o.population, need = pop < 50 ? pop : 50, n = 0, iter, rc, i;
    int no_progress = 0;
    struct sk_member *m = kt_xcalloc((size_t)pop, sizeof(*m));
    struct sk_member *res = kt_xcalloc((size_t)pop, sizeof(*res));
    struct kt_u64set seen;

    kt_u64set_init(&seen);
    for (iter = 0; n < need && no_progress < 5; iter++) {
        int before = n;
        for (i = 0; i < pop; i++) {
            int k, nm = mutate ? (int)kt_rng_below(&s->rng, 4) : 0;
            sk_sample(s, &s->rng, &m[i].g);
            for (k = 0; k < nm; k++)
                sk_mutate(s, &s->rng, &m[i].g);
        }
        rc = sk_score(&R->sc, m, pop, R->err, R->errlen);
        if (rc != KT_OK)
            goto fail;
        for (i = 0; i < pop && n < pop; i++) {
            if (!m[i].valid || !(m[i].score > -1e10f)) {
                R->st->sample_fail++;
                continue;
            }
            if (kt_u64set_add(&seen, m[i].hash))
                res[n++] = m[i];
        }
        no_progress = n > before ? 0 : no_progress + 1;
    }
    free(m);
    kt_u64set_free(&seen);
    *out = res;
    *nout = n;
    R->st->sampled += n;
    return KT_OK;
fail:
    free(m);
    free(res);
    kt_u64set_free(&seen);
    return rc;
}

/* The figures of one generation: the kept heap and the mutation pass
 * that produced the population. */
static void
record_generation(struct kt_search_stats *st, const struct sk_member *heap,
                  int nheap, int pop, int mut_ok, int mut_fail)
{
    struct kt_search_generation *g;
    int j;

    if (st->ngenerations >= KT_SEARCH_MAX_GENERATIONS)
        return;
    g = &st->gen[st->ngenerations++];
    g->pop = pop;
    g->mutations_ok = mut_ok;
    g->mutations_fail = mut_fail;
    g->max_score = g->min_score = 0;
    for (j = 0; j < nheap; j++) {
        if (j == 0 || heap[j].score > g->max_score)
            g->max_score = heap[j].score;
        if (j == 0 || heap[j].score < g->min_score)
            g->min_score = heap[j].score;
    }
}

/* 1 in NEAR_SHARE candidates of a batch (and at least one) descends from a
 * measured program when there are such mutants. */
#define NEAR_SHARE 8

/* Keeps the cap best-scoring members offered to heap (in: their hashes). */
static void
heap_offer(struct sk_member *heap, int *nheap, int cap, struct kt_u64set *in,
           const struct sk_member *m)
{
    int lo = 0, j;

    if (kt_u64set_has(in, m->hash))
        return;
    if (*nheap < cap) {
        heap[(*nheap)++] = *m;
        kt_u64set_add(in, m->hash);
        return;
    }
    for (j = 1; j < *nheap; j++)
        if (heap[j].score < heap[lo].score)
            lo = j;
    if (m->score > heap[lo].score) {
        /* the evicted one may come back later */
        struct kt_u64set keep;
        kt_u64set_init(&keep);
        for (j = 0; j < *nheap; j++)
            if (j != lo)
                kt_u64set_add(&keep, heap[j].hash);
        kt_u64set_free(in);
        *in = keep;
        heap[lo] = *m;
        kt_u64set_add(in, m->hash);
    }
}

/* The evolutionary search; *best gets up to out_size members never
 * measured, best first, and *near up to near_size of them that descend
 * from a measured program (they would rarely make *best when the model
 * scores unmeasured samples higher than what was measured). */
static int
evolve(struct round *R, struct sk_member *init, int ninit, int iters,
       int out_size, struct sk_member **best, int *nbest, int near_size,
       struct sk_member **near, int *nnear)
{
    struct kt_search *s = R->s;
    int pop = s->o.population, k, i, nheap = 0, rc = KT_OK;
    struct sk_member *cur = kt_xcalloc((size_t)pop + (size_t)ninit,
                                       sizeof(*cur));
    struct sk_member *next = kt_xcalloc((size_t)pop + (size_t)ninit,
                                        sizeof(*next));
    struct sk_member *heap = kt_xcalloc((size_t)out_size + 1, sizeof(*heap));
    struct sk_member *kin = kt_xcalloc((size_t)near_size + 1, sizeof(*kin));
    double *cum = kt_xcalloc((size_t)pop + (size_t)ninit, sizeof(double));
    struct kt_u64set in_heap, in_kin;
    int ncur = ninit, mut_ok = 0, mut_fail = 0, nkin = 0;

    kt_u64set_init(&in_heap);
    kt_u64set_init(&in_kin);
    memcpy(cur, init, sizeof(*cur) * (size_t)ninit);
    for (k = 0; k <= iters; k++) {
        double total = 0;
        int nnext = 0, attempts = 0;
        if (k > 0) {
            rc = sk_score(&R->sc, cur, ncur, R->err, R->errlen);
            if (rc != KT_OK)
                break;
        }
        for (i = 0; i < ncur; i++) {
            const struct sk_member *m = &cur[i];
            if (!m->valid || !is_new(R, m->hash))
                continue;
            heap_offer(heap, &nheap, out_size, &in_heap, m);
            if (m->origin != 0)
                heap_offer(kin, &nkin, near_size, &in_kin, m);
            if (m->score > R->st->best_score)
                R->st->best_score = m->score;
        }
        record_generation(R->st, heap, nheap, ncur, mut_ok, mut_fail);
        /* nothing left to breed from (no valid initial sample) */
        if (k == iters || ncur == 0)
            break;
        mut_ok = R->st->mutations_ok;
        mut_fail = R->st->mutations_fail;
        R->st->iters++;
        for (i = 0; i < ncur; i++) {
            double w = cur[i].valid && cur[i].score > 0 ? cur[i].score : 0;
            total += w;
            cum[i] = total;
        }
        while (nnext < pop) {
            int p;
            if (total > 0) {
                double u = kt_rng_unit(&s->rng) * total;
                int lo = 0, hi = ncur - 1;
                while (lo < hi) {
                    int mid = (lo + hi) / 2;
                    if (cum[mid] > u)
                        hi = mid;
                    else
                        lo = mid + 1;
                }
                p = lo;
            } else {
                p = (int)kt_rng_below(&s->rng, (uint64_t)ncur);
            }
            next[nnext] = cur[p];
            if (kt_rng_unit(&s->rng) < s->o.mutation_prob &&
                attempts++ < 8 * pop) {
                if (sk_mutate(s, &s->rng, &next[nnext].g) != 0) {
                    R->st->mutations_fail++;
                    continue;
                }
                R->st->mutations_ok++;
            }
            nnext++;
        }
        {
            struct sk_member *t = cur;
            cur = next;
            next = t;
            ncur = nnext;
        }
        mut_ok = R->st->mutations_ok - mut_ok;
        mut_fail = R->st->mutations_fail - mut_fail;
    }
    kt_u64set_free(&in_heap);
    kt_u64set_free(&in_kin);
    free(cur);
    free(next);
    free(cum);
    qsort(heap, (size_t)nheap, sizeof(*heap), cmp_score_desc);
    qsort(kin, (size_t)nkin, sizeof(*kin), cmp_score_desc);
    *best = heap;
    *nbest = nheap;
    *near = kin;
    *nnear = nkin;
    return rc;
}

static void
remember(struct kt_search *s, const struct sk_member *m)
{
    if (s->nprop == s->capprop) {
        s->capprop = s->capprop ? 2 * s->capprop : 64;
        s->prop = kt_xrealloc(s->prop, sizeof(*s->prop) * (size_t)s->capprop);
    }
    s->prop[s->nprop++] = *m;
}

/* Adds m to the batch if it is new; 1 if added. */
static int
take(struct round *R, const struct sk_member *m, int from_random,
     struct kt_search_batch *out, int cap)
{
    struct kt_state *st;
    struct kt_looptree *lt = NULL;
    struct kt_search_cand *c;
    char err[256];

    if (out->n >= cap || !m->valid || !is_new(R, m->hash) ||
        kt_u64set_has(&R->taken, m->hash)) {
        if (m->valid && !is_new(R, m->hash))
            R->st->skipped_measured++;
        return 0;
    }
    st = sk_build(R->s, &m->g, NULL, 0);
    if (st == NULL || kt_lower(st, &lt, err, sizeof(err)) != KT_OK) {
        kt_state_free(st);
        return 0;
    }
    c = &out->v[out->n++];
    memset(c, 0, sizeof(*c));
    c->lt = lt;
    if (kt_features_extract(lt, &c->rows, &c->nrows, err, sizeof(err)) !=
        KT_OK) {
        c->rows = NULL;
        c->nrows = 0;
        c->feature_err = kt_xstrdup(err);
    }
    c->nsteps = st->nsteps;
    c->steps = kt_xmalloc(sizeof(*c->steps) *
                          (size_t)(st->nsteps ? st->nsteps : 1));
    memcpy(c->steps, st->steps, sizeof(*c->steps) * (size_t)st->nsteps);
    kt_steps_hash(st->steps, st->nsteps, c->hash);
    c->score = m->score;
    c->from_random = from_random;
    if (m->origin != 0)
        kt_hash_hex(m->origin, c->seed_of);
    c->state = st;
    kt_u64set_add(&R->taken, m->hash);
    if (from_random)
        R->st->picked_random++;
    else
        R->st->picked_best++;
    return 1;
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

/* Top measured states by throughput (Ansor: at most ratio x population). */
static int
measured_seeds(struct kt_search *s, struct sk_member *dst, int max)
{
    int *ord, i, n = 0;

    if (s->nmeas == 0 || max <= 0)
        return 0;
    ord = kt_xmalloc(sizeof(int) * (size_t)s->nmeas);
    for (i = 0; i < s->nmeas; i++)
        ord[i] = i;
    /* insertion sort: stable and small */
    for (i = 1; i < s->nmeas; i++) {
        int v = ord[i], j = i - 1;
        while (j >= 0 && cmp_tput_desc(&ord[j], &v, s->meas_tput) > 0) {
            ord[j + 1] = ord[j];
            j--;
        }
        ord[j + 1] = v;
    }
    for (i = 0; i < s->nmeas && n < max; i++) {
        dst[n] = s->meas[ord[i]];
        dst[n].origin = dst[n].hash; /* its mutants keep this */
        n++;
    }
    free(ord);
    return n;
}

int
kt_search_next_batch(struct kt_search *s, struct kt_xgb_model *model,
                     const uint64_t *measured, size_t nmeasured, int n,
                     struct kt_search_batch *out, struct kt_search_stats *stats,
                     char *err, size_t errlen)
{
    struct kt_search_stats local;
    struct round R;
    struct sk_member *init = NULL, *best = NULL, *all = NULL, *near = NULL;
    int ninit = 0, nbest = 0, nnear = 0, i, rc = KT_OK, iters, nrand, extra;
    size_t k;
    double t0 = kt_now(), t1;

    out->n = 0;
    out->v = NULL;
    if (n <= 0)
        return kt_seterr(err, errlen, KT_EINVAL, "search: batch size %d", n);
    if (stats == NULL)
        stats = &local;
    memset(stats, 0, sizeof(*stats));
    stats->best_score = -INFINITY;
    pthread_mutex_lock(&s->lock);
    memset(&R, 0, sizeof(R));
    R.s = s;
    R.sc.s = s;
    R.sc.model = s->o.policy == KT_POLICY_SKETCH_XGB && model != NULL &&
                         kt_xgb_trained(model)
                     ? model
                     : NULL;
    R.st = stats;
    R.err = err;
    R.errlen = errlen;
    kt_u64set_init(&R.taken);
    /* measured[] is remembered: later calls need not pass it again */
    for (k = 0; measured != NULL && k < nmeasured; k++)
        kt_u64set_add(&s->proposed, measured[k]);
    stats->sketches = s->nsketches;
    out->v = kt_xcalloc((size_t)n, sizeof(*out->v));
    iters = s->o.num_iters;
    if (R.sc.model == NULL && iters > 2)
        iters = 2; /* Ansor, with the random model */

    rc = sample_init(&R, 0, &init, &ninit);
    if (rc != KT_OK)
        goto done;
    t1 = kt_now();
    stats->sample_s = t1 - t0;
    if (s->o.policy == KT_POLICY_RANDOM) {
        for (i = 0; i < ninit && out->n < n; i++)
            take(&R, &init[i], 1, out, n);
    } else {
        int nseed = (int)(s->o.use_measured_ratio * s->o.population);
        init = kt_xrealloc(init,
                           sizeof(*init) * ((size_t)ninit + (size_t)nseed + 1));
        stats->measured_seeds = measured_seeds(s, init + ninit, nseed);
        /* scored by this round's model: a stored seed has no score yet, and
         * the roulette only picks members scoring above 0 */
        rc = sk_score(&R.sc, init + ninit, stats->measured_seeds, err, errlen);
        if (rc != KT_OK)
            goto done;
        ninit += stats->measured_seeds;
        rc = evolve(&R, init, ninit, iters, 2 * n, &best, &nbest,
                    n / NEAR_SHARE + 1, &near, &nnear);
        if (rc != KT_OK)
            goto done;
        stats->evo_s = kt_now() - t1;
        /* a share of the batch stays close to what was measured (stored
         * records after a restart included) */
        for (i = 0; i < nnear && out->n < n / NEAR_SHARE + 1; i++)
            take(&R, &near[i], 0, out, n);
        /* eps-greedy: num_random picks from the initial population */
        nrand = (int)(s->o.eps_greedy * n);
        for (i = 0; i < nbest && out->n < n - nrand; i++)
            take(&R, &best[i], 0, out, n - nrand);
        for (i = 0; i < 3 * nrand && out->n < n && ninit > 0; i++)
            take(&R, &init[kt_rng_below(&s->rng, (uint64_t)ninit)], 1, out, n);
        for (i = 0; i < nbest && out->n < n; i++)
            take(&R, &best[i], 0, out, n);
        /* then the rest of the initial population, best predicted first */
        qsort(init, (size_t)ninit, sizeof(*init), cmp_score_desc);
        for (i = 0; i < ninit && out->n < n; i++)
            take(&R, &init[i], 1, out, n);
    }
    /* Still short: sample more, with random mutations so that every
     * value a mutation can reach is covered (a small or nearly exhausted
     * space). */
    for (extra = 0; extra < 4 && out->n < n; extra++) {
        int na = 0;
        free(all);
        all = NULL;
        rc = sample_init(&R, 1, &all, &na);
        if (rc != KT_OK)
            goto done;
        for (i = 0; i < na && out->n < n; i++)
            take(&R, &all[i], 1, out, n);
    }
    /* Remember what was proposed (and the genomes, for kt_search_record). */
    for (i = 0; i < out->n; i++) {
        struct sk_member m;
        uint64_t h = 0;
        int j, found = 0;
        kt_hash_parse(out->v[i].hash, &h);
        kt_u64set_add(&s->proposed, h);
        /* find the genome among the candidates we looked at */
        for (j = 0; j < nbest && !found; j++)
            if (best[j].hash == h) {
                m = best[j];
                found = 1;
            }
        for (j = 0; j < nnear && !found; j++)
            if (near[j].hash == h) {
                m = near[j];
                found = 1;
            }
        for (j = 0; j < ninit && !found; j++)
            if (init[j].hash == h) {
                m = init[j];
                found = 1;
            }
        if (found)
            remember(s, &m);
    }
done:
    stats->scored = R.sc.nscored;
    stats->score_s = R.sc.t_build + R.sc.t_score;
    stats->total_s = kt_now() - t0;
    kt_u64set_free(&R.taken);
    sk_score_ctx_free(&R.sc);
    pthread_mutex_unlock(&s->lock);
    free(init);
    free(best);
    free(near);
    free(all);
    if (rc != KT_OK)
        kt_search_batch_free(out);
    return rc;
}

/* Appends m to the measured programs that seed the population. */
static void
add_measured(struct kt_search *s, const struct sk_member *m, double cost)
{
    if (s->nmeas == s->capmeas) {
        s->capmeas = s->capmeas ? 2 * s->capmeas : 64;
        s->meas = kt_xrealloc(s->meas, sizeof(*s->meas) * (size_t)s->capmeas);
        s->meas_tput = kt_xrealloc(s->meas_tput,
                                   sizeof(double) * (size_t)s->capmeas);
    }
    s->meas[s->nmeas] = *m;
    s->meas_tput[s->nmeas++] = 1.0 / cost;
}

int
kt_search_seed_other(struct kt_search *s, const struct kt_step *steps,
                     int nsteps, double cost)
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
    }
    pthread_mutex_unlock(&s->lock);
    return seeded;
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
    if (!kt_u64set_has(&s->proposed, h) && cost > 0 && isfinite(cost)) {
        /* measured elsewhere (a stored record): seeds the GA if it decodes */
        struct sk_member m;
        if (sk_decode(s, steps, nsteps, h, &m))
            remember(s, &m);
    }
    kt_u64set_add(&s->proposed, h);
    for (i = s->nprop - 1; i >= 0; i--) {
        if (s->prop[i].hash != h)
            continue;
        found = 1;
        if (cost > 0 && isfinite(cost))
            add_measured(s, &s->prop[i], cost);
        break;
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}
