/* search_sibling.c - MutateSketch: a genome moved to a sibling sketch, one
 * made by the same rules except that elementwise stages (padding) are
 * inlined in one and kept in the other.  Siblings tile the same stages
 * with the same structures over the same factor tables, so every gene
 * keeps its meaning: a tiling measured reading a padded copy is tried
 * reading the padding in place (guarded), and the other way round.  The
 * sketches of each kind are otherwise reached only by fresh samples, so a
 * good tiling found in one never met the other (docs/search.md).  Each
 * round also proposes the siblings of the fastest measured program
 * (search_policy.c). */
#include <string.h>

#include "scheduler/search_int.h"

static int
same_plan_but_inlining(const struct sk_plan *p, const struct sk_plan *q,
                       int *differs)
{
    int ip = p->role == SK_INLINED, iq = q->role == SK_INLINED;

    if (ip != iq) {
        *differs = 1;
        return (ip ? q->role : p->role) == SK_PLAIN;
    }
    return p->role == q->role && p->partner == q->partner &&
           p->level == q->level && p->slot == q->slot &&
           p->structure == q->structure && p->vec_axis1 == q->vec_axis1 &&
           p->pack_needed == q->pack_needed;
}

static int
same_factors(const struct kt_search *s, int a, int b, int slot, int naxes)
{
    int ax;

    for (ax = 0; ax < naxes; ax++) {
        const struct sk_factors *x = s->fac[a][slot][ax];
        const struct sk_factors *y = s->fac[b][slot][ax];
        if ((x == NULL) != (y == NULL))
            return 0;
        if (x != NULL &&
            (x->n != y->n || x->extent != y->extent || x->maxin != y->maxin))
            return 0;
    }
    return 1;
}

static int
siblings(const struct kt_search *s, int a, int b)
{
    const struct sk_sketch *x = &s->sk[a], *y = &s->sk[b];
    int i, differs = 0;

    if (a == b || x->base->nstages != y->base->nstages ||
        x->nslots != y->nslots)
        return 0;
    for (i = 0; i < x->base->nstages; i++)
        if (x->base->stages[i].naxes != y->base->stages[i].naxes ||
            !same_plan_but_inlining(&x->plan[i], &y->plan[i], &differs))
            return 0;
    for (i = 0; i < x->nslots; i++)
        if (x->slot_stage[i] != y->slot_stage[i] ||
            !same_factors(s, a, b, i, x->base->stages[x->slot_stage[i]].naxes))
            return 0;
    return differs;
}

int
sk_sibling_mutate(const struct kt_search *s, struct kt_rng *r,
                  struct sk_genome *g)
{
    int cand[SK_MAX_SKETCHES], n = 0, k;

    for (k = 0; k < s->nsketches; k++)
        if (siblings(s, g->sketch, k))
            cand[n++] = k;
    if (n == 0)
        return -1;
    g->sketch = (int32_t)cand[kt_rng_below(r, (uint64_t)n)];
    return 0;
}

int
sk_siblings(const struct kt_search *s, const struct sk_member *m,
            struct sk_member *out)
{
    int k, n = 0;

    for (k = 0; k < s->nsketches; k++) {
        if (!siblings(s, m->g.sketch, k))
            continue;
        memset(&out[n], 0, sizeof(out[n]));
        out[n].g = m->g;
        out[n].g.sketch = (int32_t)k;
        out[n].origin = m->hash;
        n++;
    }
    return n;
}
