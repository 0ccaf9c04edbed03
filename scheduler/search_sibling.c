/* search_sibling.c - MutateSketch: a genome moved to a sibling sketch, one
 * made by the same rules except that elementwise stages (padding) are
 * inlined in one and kept in the other, or that a tiled stage is fused
 * into its consumer in one (at either level) and written whole before it
 * in the other.  Siblings tile the same stages with the same structures
 * over the same factor tables, so the tiling genes keep their meaning: a
 * tiling measured reading a padded copy is tried reading the padding in
 * place (guarded), and the other way round; one measured writing a padded
 * batch matmul's product whole and copying it out is tried with the copy
 * fused around its tiles.  The sketches of each kind are otherwise
 * reached only by fresh samples, so a good tiling found in one never met
 * the other (docs/search.md).  Each round also proposes the siblings of
 * the fastest measured program (search_policy.c). */
#include <string.h>

#include "scheduler/search_int.h"

/* What siblings may differ in: which elementwise stages are inlined, and
 * whether (and at which level) a tiled stage is fused into its consumer. */
enum { SIB_INLINING = 1, SIB_FUSION = 2 };

/* Whether plans p and q of a stage agree but for what siblings may differ
 * in: p or q inlines a plain stage, or a tiled stage is fused into its
 * consumer in one (role SK_FOLLOW there) and not in the other, or at
 * another level; what differs is or'ed into *differs. */
static int
same_plan_but_sibling(const struct sk_plan *p, const struct sk_plan *q,
                      int *differs)
{
    int ip = p->role == SK_INLINED, iq = q->role == SK_INLINED;

    if (ip != iq) {
        *differs |= SIB_INLINING;
        return (ip ? q->role : p->role) == SK_PLAIN;
    }
    if (p->role != q->role) {
        *differs |= SIB_FUSION;
        return (p->role == SK_PLAIN && q->role == SK_FOLLOW) ||
               (p->role == SK_FOLLOW && q->role == SK_PLAIN);
    }
    if (p->partner != q->partner || p->level != q->level) {
        *differs |= SIB_FUSION;
        if (p->role != SK_MLT && p->role != SK_FOLLOW)
            return 0;
    }
    return p->slot == q->slot && p->structure == q->structure &&
           p->vec_axis1 == q->vec_axis1 && p->pack_needed == q->pack_needed;
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

/* What sketches a and b differ in (SIB_*) if they are siblings, else 0. */
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
            !same_plan_but_sibling(&x->plan[i], &y->plan[i], &differs))
            return 0;
    for (i = 0; i < x->nslots; i++)
        if (x->slot_stage[i] != y->slot_stage[i] ||
            !same_factors(s, a, b, i, x->base->stages[x->slot_stage[i]].naxes))
            return 0;
    return differs;
}

/* g moved from sketch `from` to its sibling g->sketch: where a tiled stage
 * is fused into its consumer in one and not in the other, the parallel
 * depth goes with the loops that hold its outer tiles (the consumer's
 * where fused, its own where not). */
static void
carry_parallel(const struct kt_search *s, int from, struct sk_genome *g)
{
    const struct sk_sketch *x = &s->sk[from], *y = &s->sk[g->sketch];
    int i;

    for (i = 0; i < y->base->nstages; i++) {
        const struct sk_plan *p = &x->plan[i], *q = &y->plan[i];
        if (p->role != SK_MLT || q->role != SK_MLT)
            continue;
        if (p->partner < 0 && q->partner >= 0)
            g->par[q->partner] = g->par[i];
        else if (p->partner >= 0 && q->partner < 0)
            g->par[i] = g->par[p->partner];
    }
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
    k = g->sketch;
    g->sketch = (int32_t)cand[kt_rng_below(r, (uint64_t)n)];
    carry_parallel(s, k, g);
    return 0;
}

int
sk_siblings(const struct kt_search *s, const struct sk_member *m,
            struct sk_member *out)
{
    int k, n = 0;

    for (k = 0; k < s->nsketches; k++) {
        int differs = siblings(s, m->g.sketch, k);
        /* the closest: in what is inlined or in the fusion, not both */
        if (differs != SIB_INLINING && differs != SIB_FUSION)
            continue;
        memset(&out[n], 0, sizeof(out[n]));
        out[n].g = m->g;
        out[n].g.sketch = (int32_t)k;
        carry_parallel(s, m->g.sketch, &out[n].g);
        out[n].origin = m->hash;
        n++;
    }
    return n;
}
