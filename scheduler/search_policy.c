/* search_policy.c - the search API: options, and one round (initial
 * population and evolutionary search in search_ga.c, then eps-greedy
 * picking with deduplication); measured results come back through
 * search_feedback.c.  See docs/search.md. */
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
    o->max_reduce_run = 1024;
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
        o->max_reduce_run < 1 || o->max_register_tile < 1 || o->cores < 1)
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
    sk_seen_init(&s->proposed);
    sk_seen_init(&s->programs);
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
    sk_seen_free(&s->proposed);
    sk_seen_free(&s->programs);
    free(s->prop);
    free(s->meas);
    free(s->meas_tput);
    free(s->xfer);
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

/* Adds m to the batch if it is new; 1 if added. */
static int
take(struct sk_round *R, const struct sk_member *m, int from_random,
     struct kt_search_batch *out, int cap)
{
    struct kt_state *st;
    struct kt_looptree *lt = NULL;
    struct kt_search_cand *c;
    uint64_t program;
    char err[256];

    if (out->n >= cap || !m->valid || !sk_is_new(R, m->hash) ||
        kt_u64set_has(&R->taken, m->hash)) {
        if (m->valid && !sk_is_new(R, m->hash))
            R->st->skipped_measured++;
        return 0;
    }
    /* Built and lowered again rather than kept from scoring: keeping the
     * trees of a scored batch until its scores are known cost 25-30% more
     * CPU per round (freed late, the allocator no longer reuses hot
     * memory), while lowering the picks again is ~1.5% of a round
     * (bench_search).  From here the candidate carries this tree and its
     * features to the module and the training rows. */
    st = sk_build(R->s, &m->g, NULL, 0);
    if (st == NULL || kt_lower(st, &lt, err, sizeof(err)) != KT_OK) {
        kt_state_free(st);
        return 0;
    }
    /* Another schedule of a program already proposed or measured (a
     * cache-write tile the lowering drops, a split of extent 1): the same
     * kernel, measured once (docs/search.md). */
    program = kt_looptree_hash(lt);
    if (sk_seen_has(&R->s->programs, program) ||
        kt_u64set_has(&R->taken_programs, program)) {
        kt_looptree_free(lt);
        kt_state_free(st);
        sk_seen_add(&R->s->proposed, m->hash); /* not looked at again */
        R->st->skipped_same_program++;
        return 0;
    }
    kt_u64set_add(&R->taken_programs, program);
    R->programs[out->n] = program;
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
    if (m->origin == 0)
        R->s->fresh_picked++;
    if (from_random)
        R->st->picked_random++;
    else
        R->st->picked_best++;
    return 1;
}

/* The members a round looked at: where the genomes of its picks are. */
struct round_pools {
    struct sk_member *init, *best, *near;
    int ninit, nbest, nnear;
};

/* The fastest measured program's neighbours, whatever the model predicts
 * for them: its siblings (its genes in the sketches that differ from its
 * own only in what is inlined: padding read in place or copied), so the
 * tiling that won with one choice is measured once with the other, and
 * its variants in one gene that mutations seldom reach and the model
 * cannot tell apart well (sk_gene_neighbours): GEMM 1024^3's best form
 * ran 1.04x-1.05x faster with its reduction loop unrolled by 4, and
 * without these, runs kept the tile shape and reduction split they
 * settled on early (docs/search.md, One round). */
static int
take_neighbours(struct sk_round *R, const struct sk_member *fastest,
                struct kt_search_batch *out, int n)
{
    struct sk_member *nb = kt_xcalloc(SK_MAX_SKETCHES + SK_MAX_NEIGHBOURS,
                                      sizeof(*nb));
    int nn = sk_siblings(R->s, fastest, nb), i, rc = KT_OK;

    nn += sk_gene_neighbours(R->s, &R->s->rng, fastest, nb + nn,
                             SK_MAX_NEIGHBOURS);
    if (nn > 0)
        rc = sk_score(&R->sc, nb, nn, R->err, R->errlen);
    for (i = 0; rc == KT_OK && i < nn; i++)
        if (take(R, &nb[i], 0, out, n))
            sk_remember(R->s, &nb[i]);
    free(nb);
    return rc;
}

/* Other workloads' schedules carried over (kt_search_seed_other), measured
 * as they are, best predicted first: one per program carried over (its
 * other sketches' genomes are dropped: the fastest program's siblings
 * reach them if it wins) and at most 1 in SK_TRANSFER_SHARE of the batch;
 * the rest wait for the next batch.  One measured meanwhile or not
 * building is dropped. */
static int
take_transfers(struct sk_round *R, struct kt_search_batch *out, int n)
{
    struct kt_search *s = R->s;
    int cap = out->n + n / SK_TRANSFER_SHARE + 1, i, j, kept = 0, rc;
    int nx = s->nxfer, ndone = 0;
    struct sk_member *m;
    struct sk_transfer *keep;
    uint64_t *done;

    if (nx == 0)
        return KT_OK;
    m = kt_xcalloc((size_t)nx, sizeof(*m));
    for (i = 0; i < nx; i++)
        m[i] = s->xfer[i].m;
    rc = sk_score(&R->sc, m, nx, R->err, R->errlen);
    if (rc != KT_OK) {
        free(m);
        return rc;
    }
    keep = kt_xcalloc((size_t)nx, sizeof(*keep));
    done = kt_xcalloc((size_t)nx, sizeof(*done));
    while (nx > 0) {
        int best = 0;
        for (i = 1; i < nx; i++)
            if (sk_cmp_score_desc(&m[i], &m[best]) < 0)
                best = i;
        for (j = 0; j < ndone && done[j] != m[best].origin; j++)
            ;
        if (j == ndone && m[best].valid && sk_is_new(R, m[best].hash)) {
            if (out->n >= cap || out->n >= n) {
                keep[kept].m = m[best];
                keep[kept++].from = s->xfer[best].from;
            } else if (take(R, &m[best], 0, out, n)) {
                out->v[out->n - 1].transfer = 1;
                sk_remember(s, &m[best]);
                R->st->picked_transfer++;
                done[ndone++] = m[best].origin;
            }
        }
        m[best] = m[--nx];
        s->xfer[best] = s->xfer[nx];
    }
    memcpy(s->xfer, keep, sizeof(*keep) * (size_t)kept);
    s->nxfer = kept;
    free(keep);
    free(done);
    free(m);
    return KT_OK;
}

/* Picks descending from no seed (origin 0), best predicted first: the
 * evolved ones, then those of the initial population's first nfresh (its
 * measured seeds follow them), up to 1 in SK_FRESH_SHARE of the batch
 * while the search has proposed fewer than SK_FRESH_MIN such programs.
 * A network's tasks are tuned in rounds of a few trials (200 over 52
 * tasks: 3 each), which the other tasks' programs carried over, the
 * fastest program's neighbours and the near share fill on their own:
 * PP-OCRv4 detection's two 80 x 80 Winograd layers took 32 of their 41
 * trials from seeds (1.62 ms at best), where the layer tuned alone in
 * rounds of 32 had 6 of its first 32 programs under 1.0 ms; with this,
 * three tunings of the network ran 1.37x faster on average
 * (docs/search.md, One round). */
static void
take_fresh(struct sk_round *R, const struct round_pools *P, int nfresh,
           struct kt_search_batch *out, int n)
{
    int want = out->n + (n + SK_FRESH_SHARE - 1) / SK_FRESH_SHARE;
    int before = out->n, i;

    if (R->s->fresh_picked >= SK_FRESH_MIN)
        return;
    if (want > n)
        want = n;
    for (i = 0; i < P->nbest && out->n < want; i++)
        if (P->best[i].origin == 0)
            take(R, &P->best[i], 0, out, want);
    while (out->n < want) {
        int best = -1;
        for (i = 0; i < nfresh; i++) {
            const struct sk_member *m = &P->init[i];
            if (m->origin == 0 && m->valid && sk_is_new(R, m->hash) &&
                !kt_u64set_has(&R->taken, m->hash) &&
                (best < 0 || sk_cmp_score_desc(m, &P->init[best]) < 0))
                best = i;
        }
        if (best < 0)
            break;
        if (!take(R, &P->init[best], 0, out, want)) /* not tried again */
            kt_u64set_add(&R->taken, P->init[best].hash);
    }
    R->st->picked_fresh += out->n - before;
}

/* Sketch policies: the evolutionary search from the initial population
 * and the measured seeds, then the picks (the fastest measured program's
 * neighbours, near a measured program, best predicted, eps-greedy
 * random). */
static int
pick_evolved(struct sk_round *R, struct round_pools *P, int iters, int n,
             struct kt_search_batch *out)
{
    struct kt_search *s = R->s;
    struct kt_search_stats *stats = R->st;
    int nseed = sk_measured_seed_count(s), nrand, near, i, rc;
    double t1 = kt_now();

    P->init = kt_xrealloc(P->init, sizeof(*P->init) *
                                       ((size_t)P->ninit + (size_t)nseed + 1));
    stats->measured_seeds = sk_measured_seeds(s, P->init + P->ninit, nseed);
    /* scored by this round's model: a stored seed has no score yet, and
     * the roulette only picks members scoring above 0 */
    rc = sk_score(&R->sc, P->init + P->ninit, stats->measured_seeds, R->err,
                  R->errlen);
    if (rc != KT_OK)
        return rc;
    P->ninit += stats->measured_seeds;
    rc = sk_evolve(R, P->init, P->ninit, iters, 2 * n, &P->best, &P->nbest,
                   n / SK_NEAR_SHARE + 1, &P->near, &P->nnear);
    if (rc != KT_OK)
        return rc;
    stats->evo_s = kt_now() - t1;
    take_fresh(R, P, P->ninit - stats->measured_seeds, out, n);
    rc = take_transfers(R, out, n);
    if (rc != KT_OK)
        return rc;
    if (stats->measured_seeds > 0) {
        rc = take_neighbours(R, &P->init[P->ninit - stats->measured_seeds], out,
                             n);
        if (rc != KT_OK)
            return rc;
    }
    /* a share of the batch stays close to what was measured (stored
     * records after a restart included): counted over the picks that
     * descend from a measured program, not over the fresh ones taken
     * first (those had used up the share in a network's early rounds) */
    near = 0;
    for (i = 0; i < out->n; i++)
        near += out->v[i].seed_of[0] != '\0';
    for (i = 0; i < P->nnear && near < n / SK_NEAR_SHARE + 1; i++)
        near += take(R, &P->near[i], 0, out, n);
    /* eps-greedy: num_random picks from the initial population */
    nrand = (int)(s->o.eps_greedy * n);
    for (i = 0; i < P->nbest && out->n < n - nrand; i++)
        take(R, &P->best[i], 0, out, n - nrand);
    for (i = 0; i < 3 * nrand && out->n < n && P->ninit > 0; i++)
        take(R, &P->init[kt_rng_below(&s->rng, (uint64_t)P->ninit)], 1, out, n);
    for (i = 0; i < P->nbest && out->n < n; i++)
        take(R, &P->best[i], 0, out, n);
    /* then the rest of the initial population, best predicted first */
    qsort(P->init, (size_t)P->ninit, sizeof(*P->init), sk_cmp_score_desc);
    for (i = 0; i < P->ninit && out->n < n; i++)
        take(R, &P->init[i], 1, out, n);
    return KT_OK;
}

/* Still short of n: samples more, with random mutations so that every
 * value a mutation can reach is covered (a small or nearly exhausted
 * space). */
static int
pick_extra(struct sk_round *R, int n, struct kt_search_batch *out)
{
    struct sk_member *all = NULL;
    int extra, i, rc = KT_OK;

    for (extra = 0; extra < 4 && out->n < n && rc == KT_OK; extra++) {
        int na = 0;
        free(all);
        all = NULL;
        rc = sk_sample_init(R, 1, &all, &na);
        for (i = 0; rc == KT_OK && i < na && out->n < n; i++)
            if (take(R, &all[i], 1, out, n))
                sk_remember(R->s, &all[i]);
    }
    free(all);
    return rc;
}

static const struct sk_member *
find_member(const struct sk_member *v, int n, uint64_t h)
{
    int i;

    for (i = 0; i < n; i++)
        if (v[i].hash == h)
            return &v[i];
    return NULL;
}

/* Remembers what was proposed (and the genomes, for kt_search_record;
 * pick_extra remembers its own, which are in none of the pools). */
static void
remember_proposed(struct kt_search *s, const struct round_pools *P,
                  const struct kt_search_batch *out, const uint64_t *programs)
{
    int i;

    for (i = 0; i < out->n; i++) {
        const struct sk_member *m;
        uint64_t h = 0;
        kt_hash_parse(out->v[i].hash, &h);
        sk_seen_add(&s->proposed, h);
        sk_seen_add(&s->programs, programs[i]);
        /* find the genome among the candidates we looked at */
        m = find_member(P->best, P->nbest, h);
        if (m == NULL)
            m = find_member(P->near, P->nnear, h);
        if (m == NULL)
            m = find_member(P->init, P->ninit, h);
        if (m != NULL)
            sk_remember(s, m);
    }
}

int
kt_search_next_batch(struct kt_search *s, struct kt_xgb_model *model,
                     const uint64_t *measured, size_t nmeasured, int n,
                     struct kt_search_batch *out, struct kt_search_stats *stats,
                     char *err, size_t errlen)
{
    struct kt_search_stats local;
    struct sk_round R;
    struct round_pools P;
    int i, rc = KT_OK, iters;
    size_t k;
    double t0 = kt_now();

    out->n = 0;
    out->v = NULL;
    if (n <= 0)
        return kt_seterr(err, errlen, KT_EINVAL, "search: batch size %d", n);
    if (stats == NULL)
        stats = &local;
    memset(stats, 0, sizeof(*stats));
    stats->best_score = -INFINITY;
    memset(&P, 0, sizeof(P));
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
    kt_u64set_init(&R.taken_programs);
    /* measured[] is remembered: later calls need not pass it again */
    for (k = 0; measured != NULL && k < nmeasured; k++)
        sk_seen_add(&s->proposed, measured[k]);
    stats->sketches = s->nsketches;
    out->v = kt_xcalloc((size_t)n, sizeof(*out->v));
    R.programs = kt_xcalloc((size_t)n, sizeof(*R.programs));
    iters = s->o.num_iters;
    if (R.sc.model == NULL && iters > 2)
        iters = 2; /* Ansor, with the random model */

    rc = sk_sample_init(&R, 0, &P.init, &P.ninit);
    stats->sample_s = kt_now() - t0;
    if (rc == KT_OK && s->o.policy == KT_POLICY_RANDOM) {
        for (i = 0; i < P.ninit && out->n < n; i++)
            take(&R, &P.init[i], 1, out, n);
    } else if (rc == KT_OK) {
        rc = pick_evolved(&R, &P, iters, n, out);
    }
    if (rc == KT_OK)
        rc = pick_extra(&R, n, out);
    if (rc == KT_OK)
        remember_proposed(s, &P, out, R.programs);
    stats->scored = R.sc.nscored;
    stats->score_s = R.sc.t_build + R.sc.t_score;
    stats->total_s = kt_now() - t0;
    kt_u64set_free(&R.taken);
    kt_u64set_free(&R.taken_programs);
    free(R.programs);
    sk_score_ctx_free(&R.sc);
    pthread_mutex_unlock(&s->lock);
    free(P.init);
    free(P.best);
    free(P.near);
    if (rc != KT_OK)
        kt_search_batch_free(out);
    return rc;
}
