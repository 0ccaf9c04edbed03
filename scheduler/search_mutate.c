/* search_mutate.c - Ansor's mutation rules on genomes (docs/search.md,
 * Mutations): tile sizes, the unroll genes, pack modes, sibling sketches,
 * compute locations and the parallel depth. */
#include <string.h>

#include "scheduler/search_int.h"

/* ---- mutation ---------------------------------------------------------- */

/* Moves a divisor of one axis's tile between two of its levels (the
 * innermost bound kept). */
static int
move_tile_divisor(struct kt_search *s, struct kt_rng *r, struct sk_genome *g,
                  int slot)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    const struct kt_sstage *ss = &sk->base->stages[sk->slot_stage[slot]];
    const struct sk_factors *f;
    int a, n, perm[SK_MAXP], pi;
    int32_t *l;

    a = (int)kt_rng_below(r, (uint64_t)ss->naxes);
    f = s->fac[g->sketch][slot][a];
    n = f->n;
    if (ss->axes[a].extent <= 1 || n < 2)
        return -1;
    l = g->tiles[slot][a];
    for (pi = 0; pi < n; pi++)
        perm[pi] = pi;
    for (pi = n - 1; pi > 0; pi--) {
        int j = (int)kt_rng_below(r, (uint64_t)pi + 1), t = perm[pi];
        perm[pi] = perm[j];
        perm[j] = t;
    }
    for (pi = 0; pi < n; pi++) {
        int src = perm[pi], dst = perm[(pi + 1) % n];
        int64_t divs[64], d;
        int nd = 0;
        if (l[src] <= 1)
            continue;
        for (d = 2; d <= l[src] && nd < 64; d++) {
            if (l[src] % d != 0)
                continue;
            if (dst == n - 1 && (int64_t)l[dst] * d > f->maxin)
                continue;
            divs[nd++] = d;
        }
        if (nd == 0)
            continue;
        d = divs[kt_rng_below(r, (uint64_t)nd)];
        l[src] = (int32_t)(l[src] / d);
        l[dst] = (int32_t)(l[dst] * d);
        return 0;
    }
    return -1;
}

/* MutateTileSize.  A mutant of a register-blocked tile that is no longer
 * one is refused 3 times in 4: most of the population stays micro-kernels
 * (uniform moves break them almost always), some explore around them. */
static int
mutate_tile(struct kt_search *s, struct kt_rng *r, struct sk_genome *g)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    int tries, slot;

    if (sk->nslots == 0)
        return -1;
    for (tries = 0; tries < 16; tries++) {
        int32_t before[KT_MAX_AXES][SK_MAXP];
        int was_blocked;
        slot = (int)kt_rng_below(r, (uint64_t)sk->nslots);
        memcpy(before, g->tiles[slot], sizeof(before));
        was_blocked = sk_register_blocked(s, g, slot);
        if (move_tile_divisor(s, r, g, slot) != 0)
            continue;
        if (sk_reg_tile(s, g, slot) <= sk_register_tile_limit(s) &&
            (!was_blocked || sk_register_blocked(s, g, slot) ||
             kt_rng_below(r, 4) == 0)) {
            sk_shrink_red_unroll(s, g, slot);
            return 0;
        }
        memcpy(g->tiles[slot], before, sizeof(before));
    }
    return -1;
}

static int
pick_stage(const struct sk_sketch *sk, struct kt_rng *r, int want)
{
    int cand[KT_MAX_STAGES], n = 0, i;

    for (i = 0; i < sk->base->nstages; i++) {
        const struct sk_plan *p = &sk->plan[i];
        int ok;
        if (p->role == SK_INLINED)
            continue;
        switch (want) {
        case 0: ok = p->has_reduce || p->role == SK_MLT; break; /* unroll */
        case 1: ok = p->may_move; break;                        /* location */
        default:
            ok = !(p->role == SK_MLT && p->partner >= 0);
            break; /* parallel */
        }
        if (ok)
            cand[n++] = i;
    }
    return n ? cand[kt_rng_below(r, (uint64_t)n)] : -1;
}

int
sk_mutate(struct kt_search *s, struct kt_rng *r, struct sk_genome *g)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    double u = kt_rng_unit(r);
    int i;
    uint8_t v;

    if (u < 0.90)
        return mutate_tile(s, r, g);
    if (u < 0.92 && sk_pack_mutate(sk, r, g) == 0) /* MutatePack */
        return 0;
    if (u < 0.94) { /* MutateAutoUnroll (+ inner and reduction unroll) */
        int pick;
        i = pick_stage(sk, r, 0);
        if (i < 0)
            return -1;
        pick = sk->plan[i].role != SK_MLT        ? 2
               : !sk->plan[i].has_reduce         ? 0
               : sk_red_unrollable(&sk->plan[i]) ? (int)kt_rng_below(r, 3)
                                                 : 2 * (int)kt_rng_below(r, 2);
        if (pick == 0) {
            g->unroll_inner[i] ^= 1;
            return 0;
        }
        if (pick == 1) {
            int to = sk_pick_red_unroll(s, r, g, sk->plan[i].slot,
                                        g->red_unroll[i]);
            if (to < 0)
                return -1;
            g->red_unroll[i] = (uint8_t)to;
            return 0;
        }
        v = (uint8_t)kt_rng_below(r, 4);
        if (v == g->unroll[i])
            v = (uint8_t)((v + 1) & 3);
        g->unroll[i] = v;
        return 0;
    }
    if (u < 0.96 && sk_sibling_mutate(s, r, g) == 0) /* MutateSketch */
        return 0;
    if (u < 0.99) { /* MutateComputeLocation */
        i = pick_stage(sk, r, 1);
        if (i < 0)
            return -1;
        v = kt_rng_below(r, 3) == 0 ? 0 : (uint8_t)(1 + kt_rng_below(r, 64));
        if (v == g->loc[i])
            return -1;
        g->loc[i] = v;
        return 0;
    }
    i = pick_stage(sk, r, 2); /* MutateParallel */
    if (i < 0)
        return -1;
    v = (uint8_t)(1 + kt_rng_below(r, 6));
    if (v == g->par[i])
        return -1;
    g->par[i] = v;
    return 0;
}
