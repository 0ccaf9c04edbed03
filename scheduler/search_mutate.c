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

/* MutateTileSize.  A mutant whose register tile grade drops
 * (sk_grade_tile) is refused 3 times in 4: most of the population
 * stays micro-kernels (uniform moves break them almost always), some
 * explore around them; a spilling mutant always is, also of a spilling
 * tile (a GEMM's 8 x 32 tile grown to 8 x 64 ran at 0.76x-0.80x of it on
 * 1 thread, docs/search.md; databases stored before the grade hold such
 * programs). */
static int
mutate_tile(struct kt_search *s, struct kt_rng *r, struct sk_genome *g)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    int tries, slot;

    if (sk->nslots == 0)
        return -1;
    for (tries = 0; tries < 16; tries++) {
        int32_t before[KT_MAX_AXES][SK_MAXP];
        enum sk_tile_grade was, now;
        slot = (int)kt_rng_below(r, (uint64_t)sk->nslots);
        memcpy(before, g->tiles[slot], sizeof(before));
        was = sk_grade_tile(s, g, slot);
        if (move_tile_divisor(s, r, g, slot) != 0)
            continue;
        now = sk_grade_tile(s, g, slot);
        if (sk_reg_tile(s, g, slot) <= sk_register_tile_limit(s) &&
            now != SK_TILE_SPILLING &&
            (now >= was || kt_rng_below(r, 4) == 0)) {
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

/* Flips g's align gene; -1 (g unchanged) where it changes nothing. */
static int
flip_align(const struct kt_search *s, struct sk_genome *g)
{
    struct sk_aligned al;
    struct sk_genome on = *g;

    on.align = 1;
    if (!sk_align(s, &on, &al))
        return -1;
    g->align ^= 1;
    return 0;
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
            int slot = sk->plan[i].slot;
            int to = sk_pick_red_unroll(s, r, g, slot, g->red_unroll[i]);
            /* where no other factor fits, and half the time, a window's
             * taps next to the tile and unrolled whole instead */
            if ((to < 0 || kt_rng_below(r, 2) == 0) &&
                sk_unroll_window(s, g, slot) == 0)
                return 0;
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
    if (u < 0.995 && flip_align(s, g) == 0) /* MutateAlign */
        return 0;
    i = pick_stage(sk, r, 2); /* MutateParallel */
    if (i < 0)
        return -1;
    v = (uint8_t)(1 + kt_rng_below(r, 6));
    if (v == g->par[i])
        return -1;
    g->par[i] = v;
    return 0;
}

static int
add_neighbour(const struct sk_member *m, const struct sk_genome *g,
              struct sk_member *out, int n, int cap)
{
    int i;

    if (n >= cap || memcmp(g, &m->g, sizeof(*g)) == 0)
        return n;
    for (i = 0; i < n; i++)
        if (memcmp(g, &out[i].g, sizeof(*g)) == 0)
            return n; /* two moves may reach the same tile */
    memset(&out[n], 0, sizeof(out[n]));
    out[n].g = *g;
    out[n].origin = m->hash;
    return n + 1;
}

/* Gives the smallest divisor of axis a's register part to a's next
 * outer part and takes it into axis b's register part from the innermost
 * outer part of b it divides; -1 when the bound or the parts refuse. */
static int
exchange_register_divisor(const struct kt_search *s, struct sk_genome *g,
                          int slot, int a, int b)
{
    const struct sk_factors *fa = s->fac[g->sketch][slot][a];
    const struct sk_factors *fb = s->fac[g->sketch][slot][b];
    int32_t(*t)[SK_MAXP] = g->tiles[slot];
    int n = fa->n, p;
    int32_t d;

    if (n < 2 || fb->n != n)
        return -1;
    for (d = 2; d <= t[a][n - 1] && t[a][n - 1] % d != 0; d++)
        ;
    if (d > t[a][n - 1] || (int64_t)t[b][n - 1] * d > fb->maxin)
        return -1;
    for (p = n - 2; p >= 0 && t[b][p] % d != 0; p--)
        ;
    if (p < 0)
        return -1;
    t[a][n - 1] /= d;
    t[a][n - 2] *= d;
    t[b][p] /= d;
    t[b][n - 1] *= d;
    return 0;
}

/* Grows axis a's register part by the smallest divisor of its innermost
 * outer part above 1 (grow != 0), or gives the smallest divisor of the
 * register part to the next outer part: the register tile one step larger
 * or smaller along a.  -1 when nothing moves or the bound refuses. */
static int
resize_register_part(const struct kt_search *s, struct sk_genome *g, int slot,
                     int a, int grow)
{
    const struct sk_factors *f = s->fac[g->sketch][slot][a];
    int32_t *t = g->tiles[slot][a], d;
    int n = f->n, p = n - 1;

    if (n < 2)
        return -1;
    if (grow)
        for (p = n - 2; p >= 0 && t[p] == 1; p--)
            ;
    if (p < 0 || t[p] == 1)
        return -1;
    for (d = 2; t[p] % d != 0; d++)
        ;
    if (!grow) {
        t[n - 1] /= d;
        t[n - 2] *= d;
        return 0;
    }
    if ((int64_t)t[n - 1] * d > f->maxin)
        return -1;
    t[p] /= d;
    t[n - 1] *= d;
    return 0;
}

/* Sets axis a's register part to d, a divisor of the axis: the old one
 * goes back to outer part back, and d is taken from the outer parts
 * innermost first (what divides d of each). */
static void
set_register_part(const struct kt_search *s, struct sk_genome *g, int slot,
                  int a, int32_t d, int back)
{
    int32_t *t = g->tiles[slot][a];
    int n = s->fac[g->sketch][slot][a]->n, l;
    int64_t rem = d, c;

    t[back] *= t[n - 1];
    for (l = n - 2; l >= 0 && rem > 1; l--) {
        c = sk_gcd(t[l], rem);
        t[l] = (int32_t)(t[l] / c);
        rem /= c;
    }
    t[n - 1] = d;
}

/* Gives spatial axis a the largest register part, a divisor of the axis
 * within its bound, whose tile is within the register tile bound and of
 * grade want or better: the register file filled along a.  The old
 * register part goes back to the innermost outer part that keeps the
 * grade (where the next one would split a reduction run whole around the
 * tile, a part further out).  -1 when none does. */
static int
fill_register_part(const struct kt_search *s, struct sk_genome *g, int slot,
                   int a, enum sk_tile_grade want)
{
    const struct sk_factors *f = s->fac[g->sketch][slot][a];
    int32_t was[SK_MAXP];
    int64_t d;
    int back;

    if (f->n < 2)
        return -1;
    memcpy(was, g->tiles[slot][a], sizeof(was));
    for (d = f->maxin < f->extent ? f->maxin : f->extent; d >= 1; d--) {
        if (f->extent % d != 0)
            continue;
        for (back = f->n - 2; back >= 0; back--) {
            set_register_part(s, g, slot, a, (int32_t)d, back);
            if (sk_reg_tile(s, g, slot) <= sk_register_tile_limit(s) &&
                sk_grade_tile(s, g, slot) >= want)
                return 0;
            memcpy(g->tiles[slot][a], was, sizeof(was));
        }
    }
    return -1;
}

/* Sets axis v's register part to d and fills the register file along
 * axis b (fill_register_part), the old part of v going back to the
 * innermost outer part where the tile then grades want; -1 when none
 * does. */
static int
fill_beside_register_part(const struct kt_search *s, struct sk_genome *g,
                          int slot, int v, int32_t d, int b,
                          enum sk_tile_grade want)
{
    const struct sk_factors *f = s->fac[g->sketch][slot][v];
    int32_t was[SK_MAXP];
    int back;

    memcpy(was, g->tiles[slot][v], sizeof(was));
    for (back = f->n - 2; back >= 0; back--) {
        set_register_part(s, g, slot, v, d, back);
        if (fill_register_part(s, g, slot, b, want) == 0)
            return 0;
        memcpy(g->tiles[slot][v], was, sizeof(was));
    }
    return -1;
}

/* The register tiles that fill the register file along a spatial axis
 * (fill_register_part), as m's tile is, after its vectorized axis grew
 * or shrank by a divisor (resize_register_part) and with each other
 * register part of whole vectors along that axis, of no lower grade.
 * Two register tiles of about the same size may be no divisor exchange
 * apart: GEMM 1000^3's 25 x 16 tile (rows 1000 = 2^3 x 5^3) and its
 * 8 x 48 one, which ran 1.06x faster on 1 thread and 1.03x on 2 (the
 * same outer loops, bench/bench_modules on the Zen 5,
 * docs/performance.md); runs that settled on the first never measured
 * the second with loops as good around it.  Nor is one vector's growth
 * always enough: the CLIP attention scores' 96 padded columns grow from
 * 16 to 32 by their smallest divisor, and 7 x 48, the fastest tile
 * there, is three vectors wide. */
static int
filled_neighbours(const struct kt_search *s, const struct sk_member *m,
                  int slot, enum sk_tile_grade grade, struct sk_member *out,
                  int n, int cap)
{
    const struct sk_sketch *sk = &s->sk[m->g.sketch];
    int i = sk->slot_stage[slot], b, move;
    const struct kt_sstage *ss = &sk->base->stages[i];
    int v = sk_vector_axis(ss, &sk->plan[i]);
    const struct sk_factors *fv;
    int64_t lanes, d, dmax;

    /* without a vectorized axis, or under rfactor, the grade does not
     * count registers (grade_tile) */
    if (v < 0 || sk->plan[i].structure == SK_STRUCT_RF)
        return n;
    for (move = 0; move < 3; move++)
        for (b = 0; b < ss->nspatial; b++) {
            struct sk_genome g = m->g;
            if (move > 0 && (b == v || resize_register_part(s, &g, slot, v,
                                                            move == 2) != 0))
                continue;
            if (fill_register_part(s, &g, slot, b, grade) != 0)
                continue;
            sk_shrink_red_unroll(s, &g, slot);
            n = add_neighbour(m, &g, out, n, cap);
        }
    fv = s->fac[m->g.sketch][slot][v];
    lanes = sk_vector_lanes(s, fv->extent);
    dmax = fv->maxin < fv->extent ? fv->maxin : fv->extent;
    if (fv->n < 2 || lanes == 1)
        return n;
    for (d = lanes; d <= dmax; d += lanes)
        for (b = 0; b < ss->nspatial; b++) {
            struct sk_genome g = m->g;
            if (b == v || fv->extent % d != 0 ||
                d == m->g.tiles[slot][v][fv->n - 1] ||
                fill_beside_register_part(s, &g, slot, v, (int32_t)d, b,
                                          grade) != 0)
                continue;
            sk_shrink_red_unroll(s, &g, slot);
            n = add_neighbour(m, &g, out, n, cap);
        }
    return n;
}

/* Moves all of spatial axis a's part l into its next part (whole), or
 * the smallest divisor of it when that is not all of it; both parts
 * outer than the register part, which stays as it is.  -1 when nothing
 * moves. */
static int
move_outer_part(const struct kt_search *s, struct sk_genome *g, int slot, int a,
                int l, int whole)
{
    int32_t *t = g->tiles[slot][a], d;

    if (l + 1 >= s->fac[g->sketch][slot][a]->n - 1 || t[l] == 1)
        return -1;
    for (d = 2; !whole && t[l] % d != 0; d++)
        ;
    if (whole)
        d = t[l];
    else if (d == t[l])
        return -1; /* the same move as whole */
    t[l] /= d;
    t[l + 1] *= d;
    return 0;
}

/* Axis a's part next outside its register part (level n - 2) in m. */
static int32_t
next_part(const struct kt_search *s, const struct sk_member *m, int slot, int a)
{
    int n = s->fac[m->g.sketch][slot][a]->n;

    return n >= 2 ? m->g.tiles[slot][a][n - 2] : 1;
}

/* After a register-part move gave axis a's next outer part (level n - 2)
 * a divisor: where that part lies between two levels of a reduction run
 * whole around the tile (k split over two levels with nothing spatial
 * between), the run is now split in passes (SK_TILE_SPLIT_RUN); the
 * divisor moves on outward, level by level, until the tile grades want
 * again.  was: the part before the move.  -1 when no level does. */
static int
give_outside_run(const struct kt_search *s, struct sk_genome *g, int slot,
                 int a, int32_t was, enum sk_tile_grade want)
{
    int32_t *t = g->tiles[slot][a];
    int l = s->fac[g->sketch][slot][a]->n - 2;
    int32_t d = t[l] / was;

    while (sk_grade_tile(s, g, slot) < want && l > 0 && d > 1) {
        t[l] /= d;
        t[--l] *= d;
    }
    return sk_grade_tile(s, g, slot) < want ? -1 : 0;
}

/* Tile variants of slot: its whole reduction inside the register tile
 * (a matrix product's reduction split in parts), each register tile of
 * the same size with a divisor exchanged between two spatial axes
 * (8 x 32 <-> 4 x 64) and each one a divisor larger or smaller along one
 * axis (4 x 48 <-> 8 x 48: runs that settled early on the smaller tile of
 * a classifier layer stayed there, 0.83x-0.85x of oneDNN against
 * 1.07x-1.10x), within the register bound and of no lower grade
 * (sk_grade_tile; the divisor a part gives goes outside a whole reduction
 * run, give_outside_run), and the cache tiles around an unchanged register tile
 * with an outer part, or its smallest divisor, moved into the next part
 * (a GEMM chunk 128 columns wide rather than 64, holding all rows, packs
 * B once). */
static int
tile_neighbours(const struct kt_search *s, const struct sk_member *m, int slot,
                struct sk_member *out, int n, int cap)
{
    const struct sk_sketch *sk = &s->sk[m->g.sketch];
    int i = sk->slot_stage[slot], a, b, l, whole, grow;
    const struct kt_sstage *ss = &sk->base->stages[i];
    enum sk_tile_grade grade = sk_grade_tile(s, &m->g, slot);

    for (a = ss->nspatial; a < ss->naxes; a++) {
        const struct sk_factors *f = s->fac[m->g.sketch][slot][a];
        struct sk_genome g = m->g;
        if (!sk_whole_run_axis(sk, i, a, f))
            continue;
        for (l = 0; l < f->n - 1; l++)
            g.tiles[slot][a][l] = 1;
        g.tiles[slot][a][f->n - 1] = (int32_t)ss->axes[a].extent;
        sk_shrink_red_unroll(s, &g, slot);
        n = add_neighbour(m, &g, out, n, cap);
    }
    for (a = 0; a < ss->nspatial; a++)
        for (b = 0; b < ss->nspatial; b++) {
            struct sk_genome g = m->g;
            if (a == b || exchange_register_divisor(s, &g, slot, a, b) != 0 ||
                sk_reg_tile(s, &g, slot) > sk_register_tile_limit(s) ||
                give_outside_run(s, &g, slot, a, next_part(s, m, slot, a),
                                 grade) != 0)
                continue;
            sk_shrink_red_unroll(s, &g, slot);
            n = add_neighbour(m, &g, out, n, cap);
        }
    for (a = 0; a < ss->nspatial; a++)
        for (grow = 0; grow < 2; grow++) {
            struct sk_genome g = m->g;
            if (resize_register_part(s, &g, slot, a, grow) != 0 ||
                sk_reg_tile(s, &g, slot) > sk_register_tile_limit(s) ||
                give_outside_run(s, &g, slot, a, next_part(s, m, slot, a),
                                 grade) != 0)
                continue;
            sk_shrink_red_unroll(s, &g, slot);
            n = add_neighbour(m, &g, out, n, cap);
        }
    n = filled_neighbours(s, m, slot, grade, out, n, cap);
    for (a = 0; a < ss->nspatial; a++)
        for (l = 0; l < SK_MAXP; l++)
            for (whole = 0; whole < 2; whole++) {
                struct sk_genome g = m->g;
                if (move_outer_part(s, &g, slot, a, l, whole) == 0)
                    n = add_neighbour(m, &g, out, n, cap);
            }
    return n;
}

/* Drops the members of out[0..n) with a spilling register tile (the
 * neighbours of a spilling program that keep its tile); how many are
 * left. */
static int
drop_spilling(const struct kt_search *s, struct sk_member *out, int n)
{
    int i, k = 0, slot;

    for (i = 0; i < n; i++) {
        const struct sk_sketch *sk = &s->sk[out[i].g.sketch];
        for (slot = 0; slot < sk->nslots; slot++)
            if (sk_grade_tile(s, &out[i].g, slot) == SK_TILE_SPILLING)
                break;
        if (slot == sk->nslots)
            out[k++] = out[i];
    }
    return k;
}

int
sk_gene_neighbours(const struct kt_search *s, struct kt_rng *r,
                   const struct sk_member *m, struct sk_member *out, int cap)
{
    const struct sk_sketch *sk = &s->sk[m->g.sketch];
    int i, n = 0;
    uint8_t v;

    for (i = 0; i < sk->base->nstages; i++) {
        const struct sk_plan *p = &sk->plan[i];
        struct sk_genome g = m->g;
        if (p->role == SK_INLINED)
            continue;
        if (sk_red_unrollable(p)) {
            int to = sk_pick_red_unroll(s, r, &m->g, p->slot, g.red_unroll[i]);
            if (to >= 0) {
                g.red_unroll[i] = (uint8_t)to;
                n = add_neighbour(m, &g, out, n, cap);
                g.red_unroll[i] = m->g.red_unroll[i];
            }
            if (sk_unroll_window(s, &g, p->slot) == 0) {
                n = add_neighbour(m, &g, out, n, cap);
                g = m->g;
            }
        }
        if (p->has_reduce)
            for (v = 0; v < 4; v++) {
                g.unroll[i] = v;
                n = add_neighbour(m, &g, out, n, cap);
            }
        g.unroll[i] = m->g.unroll[i];
        if (p->role == SK_MLT && g.unroll_inner[i] == 0) {
            g.unroll_inner[i] = 1;
            n = add_neighbour(m, &g, out, n, cap);
        }
    }
    {
        struct sk_genome g = m->g;
        if (sk_pack_mutate(sk, r, &g) == 0)
            n = add_neighbour(m, &g, out, n, cap);
        g = m->g;
        if (flip_align(s, &g) == 0)
            n = add_neighbour(m, &g, out, n, cap);
    }
    for (i = 0; i < sk->nslots; i++)
        n = tile_neighbours(s, m, i, out, n, cap);
    return drop_spilling(s, out, n);
}
