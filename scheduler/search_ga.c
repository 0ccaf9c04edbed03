/* search_ga.c - the evolutionary search of one round: the initial
 * population (Ansor's SampleInitPopulation) and the generations of
 * roulette selection and mutation that keep the best-scoring programs
 * never measured.  See docs/search.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/search_int.h"

/* Never measured (passed in now or before, or recorded), never proposed. */
int
sk_is_new(const struct sk_round *R, uint64_t h)
{
    return !sk_seen_has(&R->s->proposed, h);
}

int
sk_cmp_score_desc(const void *a, const void *b)
{
    const struct sk_member *x = a, *y = b;

    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

/* Samples until at least min(population, 50) valid distinct members
 * (Ansor's SampleInitPopulation); *out gets them, scored. */
int
sk_sample_init(struct sk_round *R, int mutate, struct sk_member **out,
               int *nout)
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
int
sk_evolve(struct sk_round *R, struct sk_member *init, int ninit, int iters,
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
            if (!m->valid || !sk_is_new(R, m->hash))
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
    qsort(heap, (size_t)nheap, sizeof(*heap), sk_cmp_score_desc);
    qsort(kin, (size_t)nkin, sizeof(*kin), sk_cmp_score_desc);
    *best = heap;
    *nbest = nheap;
    *near = kin;
    *nnear = nkin;
    return rc;
}
