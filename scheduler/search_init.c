/* search_init.c - the init rules: random exact tile factorizations
 * (search_factors.c) drawn until a register-blocked tile of the best grade
 * (search_grade.c), compute location, parallel depth, vectorize and the
 * unroll genes (the mutation rules are in search_mutate.c). */
#include <string.h>

#include "scheduler/search_int.h"

/* ---- sampling ---------------------------------------------------------- */

/* Whether axis a of stage i is its vectorized spatial axis and whole
 * vectors divide it: a uniform sample seldom gives it an innermost part of
 * whole vectors (2 of the 10 parts of 160 up to 64), which the first,
 * model-less rounds of a network's many small tasks need. */
static int
lane_multiple_axis(const struct kt_search *s, const struct sk_sketch *sk, int i,
                   int a, const struct sk_factors *f)
{
    const struct kt_sstage *ss = &sk->base->stages[i];

    return !ss->axes[a].reduce && f->n >= 2 &&
           ss->axes[a].extent % sk_widest_lanes(s) == 0 &&
           sk_vector_axis(ss, &sk->plan[i]) == a;
}

/* A uniform pick among f's factorizations whose innermost part is whole
 * vectors; NULL when there is none. */
static const int32_t *
lane_multiple_pick(const struct kt_search *s, struct kt_rng *r,
                   const struct sk_factors *f)
{
    int64_t lanes = sk_widest_lanes(s);
    int j, n = 0, k;

    for (j = 0; j < f->count; j++)
        n += f->v[(size_t)j * (size_t)f->n + (size_t)f->n - 1] % lanes == 0;
    if (n == 0)
        return NULL;
    k = (int)kt_rng_below(r, (uint64_t)n);
    for (j = 0; j < f->count; j++) {
        const int32_t *v = &f->v[(size_t)j * (size_t)f->n];
        if (v[f->n - 1] % lanes == 0 && k-- == 0)
            return v;
    }
    return NULL;
}

/* Samples tile lengths: a uniform factorization per axis; a matrix
 * product's reduction runs whole inside the register tile in 1 sample of
 * 4 (a uniform one seldom does: 1 of 11 factorizations of GEMM 1024^3's
 * k; that form matched oneDNN where k-blocks of 256 ran at 0.96x-0.97x,
 * docs/performance.md), and so does a vectorized axis only whole
 * extents may pass (sk_whole_vector_axis: 1 of 100 factorizations of 100). */
static void
fill_tiles(struct kt_search *s, struct kt_rng *r, struct sk_genome *g, int slot)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    int i = sk->slot_stage[slot];
    const struct kt_sstage *ss = &sk->base->stages[i];
    int a, l, n;

    for (a = 0; a < ss->naxes; a++) {
        const struct sk_factors *f = s->fac[g->sketch][slot][a];
        const int32_t *v =
            &f->v[(size_t)kt_rng_below(r, (uint64_t)f->count) * (size_t)f->n];
        const int32_t *lv;
        if (lane_multiple_axis(s, sk, i, a, f) && kt_rng_below(r, 2) == 0 &&
            (lv = lane_multiple_pick(s, r, f)) != NULL)
            v = lv;
        n = sk_nparts(&sk->plan[i], ss->axes[a].reduce);
        for (l = 0; l < SK_MAXP; l++)
            g->tiles[slot][a][l] = 1;
        /* a one-part table (no factorization fits the bound) puts all
         * in the outer part */
        for (l = 0; l < f->n; l++)
            g->tiles[slot][a][l] = v[l];
        if ((sk_whole_run_axis(sk, i, a, f) ||
             sk_whole_vector_axis(s, sk, i, a, f)) &&
            kt_rng_below(r, 4) == 0) {
            for (l = 0; l < f->n - 1; l++)
                g->tiles[slot][a][l] = 1;
            g->tiles[slot][a][f->n - 1] = (int32_t)ss->axes[a].extent;
        }
        (void)n;
    }
}

/* Whether stage plan p has a reduction loop around its register tile that
 * the builder may unroll (sk_red_unroll_values): a multi-level tiling
 * whose innermost level is spatial, not an rfactor (its innermost
 * reduction part is its lane vector). */
int
sk_red_unrollable(const struct sk_plan *p)
{
    const char *c = sk_structures[p->structure];

    return p->role == SK_MLT && p->has_reduce && p->structure != SK_STRUCT_RF &&
           c[strlen(c) - 1] == 'S';
}

/* Vector statements a micro-kernel may repeat per step of its unrolled
 * reduction loop: with its loads each weighs about 3, so 128 stays within
 * the code generator's block budget (codegen_size.c: 2 x 256), where the
 * search would drop the candidate as too large. */
#define SK_RED_UNROLL_STMTS 128

/* Vector statements of slot's register tile per reduction step. */
static int64_t
tile_vectors(const struct kt_search *s, const struct sk_genome *g, int slot)
{
    int64_t lanes = sk_widest_lanes(s);

    return (sk_reg_tile(s, g, slot) + lanes - 1) / lanes;
}

/* Whether an index of a load in e reads reduction axis a beside a
 * spatial axis (below nspatial): a sliding window's taps (x * 2 + s). */
static int
reads_as_window(const struct kt_expr *e, int a, int nspatial)
{
    int d, k;

    if (e == NULL)
        return 0;
    if (e->op == KT_X_LOAD)
        for (d = 0; d < e->ndim; d++)
            if (kt_aff_coef(&e->idx[d], a) != 0)
                for (k = 0; k < e->idx[d].n; k++)
                    if (e->idx[d].var[k] < nspatial && e->idx[d].k[k] != 0)
                        return 1;
    return reads_as_window(e->a, a, nspatial) ||
           reads_as_window(e->b, a, nspatial);
}

int
sk_window_axis(const struct kt_sstage *ss, int a)
{
    return ss->axes[a].reduce && reads_as_window(ss->body, a, ss->nspatial);
}

/* Whether red_unroll value v changes slot's program and stays within
 * budget: the loop sk_build splits (the innermost part of the last
 * reduction level, of the last reduction axis longer than 1) is a
 * multiple of the factor longer than it, or a window's loop of 2 to the
 * factor steps (unrolled whole: a 3 x 3 window's column taps; a GEMM's
 * short k loop stays as it was) - a gene that builds the same program
 * only duplicates it - and the unrolled micro-kernel fits
 * SK_RED_UNROLL_STMTS.  No unroll always fits. */
static int
red_unroll_fits(const struct kt_search *s, const struct sk_genome *g, int slot,
                int v)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    int i = sk->slot_stage[slot], a, last = -1;
    const struct kt_sstage *ss = &sk->base->stages[i];
    int64_t u = sk_red_unroll_values[v], run;

    if (u <= 1)
        return 1;
    for (a = ss->nspatial; a < ss->naxes; a++)
        if (ss->axes[a].reduce && ss->axes[a].extent > 1)
            last = a;
    if (last < 0)
        return 0;
    run = g->tiles[slot][last][sk_nparts(&sk->plan[i], 1) - 1];
    if (run > 1 && run <= u)
        return sk_window_axis(ss, last) &&
               tile_vectors(s, g, slot) * run <= SK_RED_UNROLL_STMTS;
    return run > u && run % u == 0 &&
           tile_vectors(s, g, slot) * u <= SK_RED_UNROLL_STMTS;
}

/* Moves the taps of slot's last reduction axis, a window of 2 to 4
 * steps, into the loop around its register tile and unrolls that loop
 * whole: one mutation from a window loop outside the tile to taps that
 * share their loads (ir/codegen_expr.c), which a tile mutation and a
 * reduction unroll one after the other reach only through a program no
 * faster than the first.  -1 when that is the genome's program already
 * or does not fit. */
int
sk_unroll_window(const struct kt_search *s, struct sk_genome *g, int slot)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    int i = sk->slot_stage[slot], a, last = -1, n, l;
    const struct kt_sstage *ss = &sk->base->stages[i];
    int whole = SK_RED_UNROLLS - 1;
    int32_t was[SK_MAXP];

    for (a = ss->nspatial; a < ss->naxes; a++)
        if (ss->axes[a].reduce && ss->axes[a].extent > 1)
            last = a;
    if (last < 0 || ss->axes[last].extent > sk_red_unroll_values[whole] ||
        !sk_window_axis(ss, last))
        return -1;
    n = sk_nparts(&sk->plan[i], 1);
    if (g->red_unroll[i] == whole &&
        g->tiles[slot][last][n - 1] == ss->axes[last].extent)
        return -1;
    memcpy(was, g->tiles[slot][last], sizeof(was));
    for (l = 0; l < n; l++)
        g->tiles[slot][last][l] = 1;
    g->tiles[slot][last][n - 1] = (int32_t)ss->axes[last].extent;
    if (!red_unroll_fits(s, g, slot, whole)) {
        memcpy(g->tiles[slot][last], was, sizeof(was));
        return -1;
    }
    g->red_unroll[i] = (uint8_t)whole;
    return 0;
}

/* A random index into sk_red_unroll_values for slot's register tile
 * (other than avoid, -1 for none), among the factors that fit
 * (red_unroll_fits); -1 when none other does. */
int
sk_pick_red_unroll(const struct kt_search *s, struct kt_rng *r,
                   const struct sk_genome *g, int slot, int avoid)
{
    int fit[SK_RED_UNROLLS], n = 0, v;

    for (v = 0; v < SK_RED_UNROLLS; v++)
        if (v != avoid && red_unroll_fits(s, g, slot, v))
            fit[n++] = v;
    return n ? fit[kt_rng_below(r, (uint64_t)n)] : -1;
}

/* After a tile mutation: the largest reduction unroll not above the
 * genome's that still fits the new tiles. */
void
sk_shrink_red_unroll(const struct kt_search *s, struct sk_genome *g, int slot)
{
    int i = s->sk[g->sketch].slot_stage[slot];

    while (g->red_unroll[i] > 0 &&
           !red_unroll_fits(s, g, slot, g->red_unroll[i]))
        g->red_unroll[i]--;
}

int
sk_roll_reductions(const struct kt_search *s, struct sk_genome *g)
{
    int i, rolled = -1;

    for (i = 0; i < s->sk[g->sketch].base->nstages; i++)
        if (g->red_unroll[i] != 0) {
            g->red_unroll[i] = 0;
            rolled = 0;
        }
    return rolled;
}

/* Tile draws a sample makes for a tile of the grade it wants.  Where the
 * shape makes the top grade rare, 64 were too few: of the samples of a
 * depthwise 3x3 convolution of 576 channels at 14 x 14 reading its
 * padding in place, 3.7% found one in 64 draws, 12.5% in 256 (its fast
 * form, the whole 14 x 14 output in the register tile, is one), and 7 of
 * 8 of its tunings ended on that form against 4 of 8 with 64
 * (docs/performance.md, tests/unit/test_search_top_grade.c). */
#define SK_TILE_TRIES 256
/* A matrix product's register tile of the top grade in a cache tiling
 * that reads an operand again (sk_tile_rereads) is common, the panel
 * tiling that does not is rare (GEMM 1024^3: 128-column panels, rows in
 * at most 2 parts), so register-blocked samples try longer for one.
 * Only samples: the mutations grade without it, so the population may
 * still move between tilings the rule would rank apart (dense_b128 lost
 * 10% on 2 threads when mutations were held to it too). */
#define SK_REREAD_TRIES (4 * SK_TILE_TRIES)

void
sk_sample(struct kt_search *s, struct kt_rng *r, struct sk_genome *g)
{
    sk_sample_sketch(s, r, (int)kt_rng_below(r, (uint64_t)s->nsketches), g);
}

void
sk_sample_sketch(struct kt_search *s, struct kt_rng *r, int k,
                 struct sk_genome *g)
{
    const struct sk_sketch *sk;
    int slot, i, tries, blocked[SK_MAX_MLT] = {0};

    memset(g, 0, sizeof(*g));
    g->sketch = (int32_t)k;
    sk = &s->sk[g->sketch];
    /* before the tiles: their rank counts reads per core, and a kernel
     * runs on several cores only where its root's loops are parallel */
    for (i = 0; i < sk->base->nstages; i++)
        g->par[i] = 255; /* Ansor's InitParallel rule */
    for (slot = 0; slot < sk->nslots; slot++) {
        /* most samples are register-blocked, of the best grade their
         * tries find, the others uniform but for spilling tiles (the
         * tile mutations leave both kinds) */
        const int top = 2 * SK_TILE_REUSING + 1;
        int best = -1, rank, found = 0;
        int32_t fit[KT_MAX_AXES][SK_MAXP];
        blocked[slot] = kt_rng_below(r, 4) != 0;
        for (tries = 0; tries < SK_TILE_TRIES ||
                        (best == top - 1 && tries < SK_REREAD_TRIES);
             tries++) {
            fill_tiles(s, r, g, slot);
            if (sk_reg_tile(s, g, slot) > (blocked[slot]
                                               ? sk_register_tile_limit(s)
                                               : s->o.max_register_tile) ||
                !sk_rf_vectorizes(s, g, slot))
                continue;
            if (blocked[slot]) {
                rank = sk_blocked_rank(s, g, slot);
                found = rank == top;
            } else {
                rank = (int)sk_grade_tile(s, g, slot);
                found = rank != SK_TILE_SPILLING;
            }
            if (found)
                break;
            if (rank >= best) { /* the last of the best */
                memcpy(fit, g->tiles[slot], sizeof(fit));
                best = rank;
            }
        }
        if (!found && best >= 0)
            memcpy(g->tiles[slot], fit, sizeof(fit));
    }
    for (i = 0; i < sk->base->nstages; i++) {
        const struct sk_plan *p = &sk->plan[i];
        if (p->may_move)
            g->loc[i] = kt_rng_below(r, 3) == 0
                            ? 0
                            : (uint8_t)(1 + kt_rng_below(r, 64));
        g->vec[i] = 1;
        /* a register tile is one when unrolled (the micro-kernel keeps
         * the accumulators of a straight-line body in registers) */
        g->unroll_inner[i] = p->role == SK_MLT && blocked[p->slot]
                                 ? 1
                                 : (uint8_t)kt_rng_below(r, 2);
        g->unroll[i] = p->has_reduce ? (uint8_t)kt_rng_below(r, 4) : 0;
        g->red_unroll[i] = 0;
        if (sk_red_unrollable(p) && blocked[p->slot]) {
            int v = sk_pick_red_unroll(s, r, g, p->slot, -1);
            g->red_unroll[i] = (uint8_t)(v > 0 ? v : 0);
        }
    }
    /* most samples split a pipeline's stages alike (search_align.c):
     * about as fast on CPUs that share a cache, much faster on ones
     * that do not */
    g->align = kt_rng_below(r, 4) != 0;
    sk_pack_sample(sk, r, g);
}
