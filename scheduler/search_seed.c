/* search_seed.c - schedules measured before (stored records, e.g. after a
 * restart) back into the evolutionary search: their steps are decoded into
 * a genome of one of this search's sketches, so that they seed the GA as
 * this run's own measured candidates do (docs/search.md, Seeds).
 *
 * The decoder reads the genes off the steps sk_build emits (the sketch's
 * base steps as a prefix, the tile splits, the reduction unroll's split
 * after the tiling's reorder, fuse + parallel, vectorize, unroll, the
 * unroll pragma, compute_at and layout rewrite) and then builds
 * the genome and keeps it only when its steps hash to the record's: a
 * record of another sketch set or an older step format is simply not
 * decoded, never seeded wrongly.
 *
 * Another workload's schedule whose steps do not decode (e.g. the same
 * convolution with a bias and relu after it: one stage more, other
 * sketches) is carried over stage by stage (sk_transfer): each of its
 * stages that computes what a stage of this workload computes gives that
 * stage its genes, the other stages keep a fresh sample's. */
#include <string.h>

#include "scheduler/search_int.h"

static int
step_eq(const struct kt_step *a, const struct kt_step *b)
{
    char ha[17], hb[17];

    if (a->kind != b->kind || a->stage != b->stage)
        return 0;
    kt_steps_hash(a, 1, ha);
    kt_steps_hash(b, 1, hb);
    return strcmp(ha, hb) == 0;
}

/* The step of kind `kind` for stage i in steps, or NULL. */
static const struct kt_step *
find_step(const struct kt_step *steps, int nsteps, int kind, int i)
{
    int j;

    for (j = 0; j < nsteps; j++)
        if (steps[j].kind == (enum kt_step_kind)kind && steps[j].stage == i)
            return &steps[j];
    return NULL;
}

/* Fits n tile values v (outer first) of one axis into want values, the
 * innermost kept: extra outer levels are merged into level 0, missing
 * ones are 1. */
static void
fit_levels(int32_t *tiles, const int64_t *v, int n, int want)
{
    int l;

    for (l = 1; l <= want; l++) {
        int from = n - want + l - 1;
        tiles[l] = from >= 0 ? (int32_t)v[from] : 1;
    }
}

/* Genes read directly off the steps after the sketch's base prefix;
 * needs_loc[i] marks movable stages whose compute_at must be searched.
 * map (NULL: the identity) gives the sketch's stage of each stage the
 * steps name (-1: none, its steps are skipped); with a map only the
 * mapped stages' genes are replaced and a tiling's levels are fitted to
 * the sketch's.  -1 on a step this decoder cannot place. */
static int
read_genes(const struct sk_sketch *sk, const struct kt_step *steps, int nsteps,
           int from, const int *map, struct sk_genome *g, int *needs_loc)
{
    const struct kt_state *base = sk->base;
    /* per stage: its tiling's reorder was read; the reduction unroll's
     * annotation (the step after tile_mlt's split that follows the
     * reorder, or after the reorder itself: a window unrolled whole),
     * which is no register-tile unroll */
    int reordered[KT_MAX_STAGES] = {0}, red_annotation[KT_MAX_STAGES];
    int mapped[KT_MAX_STAGES] = {0};
    int j, a, l, slot, i;

    for (i = 0; i < KT_MAX_STAGES; i++) {
        red_annotation[i] = -1;
        if (map == NULL ? i < base->nstages : map[i] >= 0)
            mapped[map == NULL ? i : map[i]] = 1;
    }
    for (i = 0; i < base->nstages; i++) {
        const struct kt_sstage *ss = &base->stages[i];
        if (!mapped[i])
            continue;
        g->par[i] = g->vec[i] = g->unroll_inner[i] = 0;
        g->unroll[i] = g->red_unroll[i] = g->pack[i] = 0;
        if (sk->plan[i].role != SK_MLT)
            continue;
        slot = sk->plan[i].slot;
        for (a = 0; a < ss->naxes; a++) {
            for (l = 0; l < SK_MAXP; l++)
                g->tiles[slot][a][l] = 1;
            g->tiles[slot][a][0] = (int32_t)ss->axes[a].extent;
        }
    }
    for (j = from; j < nsteps; j++) {
        const struct kt_step *st = &steps[j];
        const struct sk_plan *p;
        int64_t prod = 1;
        int want;
        i = st->stage;
        if (i < 0 || i >= (map ? KT_MAX_STAGES : base->nstages))
            return -1;
        if (map != NULL && (i = map[i]) < 0)
            continue;
        p = &sk->plan[i];
        switch (st->kind) {
        case KT_STEP_SPLIT:
            if (p->role != SK_MLT)
                break; /* a fused consumer follows its producer's tiles */
            if (reordered[i]) {
                for (l = 0;
                     l < SK_RED_UNROLLS && sk_red_unroll_values[l] != st->v[0];
                     l++)
                    ;
                if (st->n != 1 || l == SK_RED_UNROLLS)
                    return -1;
                g->red_unroll[i] = (uint8_t)l;
                red_annotation[i] = j + 1;
                break;
            }
            a = st->iter;
            if (a < 0 || a >= base->stages[i].naxes || st->n < 1 ||
                st->n >= SK_MAXP)
                return -1;
            for (l = 0; l < st->n; l++)
                if (st->v[l] < 1 || st->v[l] > INT32_MAX)
                    return -1;
            want = map == NULL
                       ? st->n
                       : sk_nparts(p, base->stages[i].axes[a].reduce) - 1;
            fit_levels(g->tiles[p->slot][a], st->v, st->n, want);
            for (l = 1; l <= want; l++)
                prod *= g->tiles[p->slot][a][l];
            if (base->stages[i].axes[a].extent % prod != 0)
                return -1;
            g->tiles[p->slot][a][0] = (int32_t)(base->stages[i].axes[a].extent /
                                                prod);
            break;
        case KT_STEP_REORDER:
            reordered[i] = p->role == SK_MLT;
            if (reordered[i])
                red_annotation[i] = j + 1; /* a window unrolled whole */
            break;
        case KT_STEP_FUSE:
            g->par[i] = (uint8_t)(st->n < 255 ? st->n : 254);
            break;
        case KT_STEP_ANNOTATE:
            if (st->v[0] == KT_ANN_PARALLEL && g->par[i] == 0)
                g->par[i] = 1;
            else if (st->v[0] == KT_ANN_VECTORIZE)
                g->vec[i] = 1;
            else if (st->v[0] == KT_ANN_UNROLL && j != red_annotation[i])
                g->unroll_inner[i] = 1;
            else if (st->v[0] == KT_ANN_UNROLL && g->red_unroll[i] == 0)
                g->red_unroll[i] = SK_RED_UNROLLS - 1;
            break;
        case KT_STEP_PRAGMA:
            for (l = 0; l < 4 && sk_unroll_values[l] != st->v[0]; l++)
                ;
            if (l == 4)
                return -1;
            g->unroll[i] = (uint8_t)l;
            break;
        case KT_STEP_LAYOUT_REWRITE: g->pack[i] = 2; break;
        case KT_STEP_COMPUTE_AT:
            if (p->role == SK_PLAIN && p->may_move)
                needs_loc[i] = 1;
            break;
        default: break;
        }
    }
    /* a pack (cache_read) stage that is not inlined is kept: at its
     * compute_at or at the root (a map's caller reads it off the state) */
    for (i = 0; map == NULL && i < base->nstages; i++)
        if (base->stages[i].cache_read && g->pack[i] == 0 &&
            find_step(steps + from, nsteps - from, KT_STEP_COMPUTE_INLINE, i) ==
                NULL)
            g->pack[i] = 1;
    return 0;
}

/* The loc gene of stage i that reproduces the record's compute_at (the
 * attach point is picked as candidate (loc - 1) mod count). */
static int
find_loc(const struct kt_search *s, struct sk_genome *g, int i,
         const struct kt_step *want)
{
    int loc;

    for (loc = 1; loc <= KT_MAX_ITERS; loc++) {
        struct kt_state *st;
        const struct kt_step *got;
        int ok;
        g->loc[i] = (uint8_t)loc;
        st = sk_build(s, g, NULL, 0);
        if (st == NULL)
            continue;
        got = find_step(st->steps, st->nsteps, KT_STEP_COMPUTE_AT, i);
        ok = got != NULL && step_eq(got, want);
        kt_state_free(st);
        if (ok)
            return 0;
    }
    return -1;
}

/* Decodes steps into a genome of sketch k; 1 if it reproduces hash. */
static int
decode_sketch(const struct kt_search *s, int k, const struct kt_step *steps,
              int nsteps, uint64_t hash, struct sk_genome *g)
{
    const struct sk_sketch *sk = &s->sk[k];
    int needs_loc[KT_MAX_STAGES] = {0};
    struct kt_state *st;
    char hex[17];
    uint64_t h = 0;
    int j, i, align;

    if (nsteps < sk->base->nsteps)
        return 0;
    for (j = 0; j < sk->base->nsteps; j++)
        if (!step_eq(&sk->base->steps[j], &steps[j]))
            return 0;
    /* the align gene shows only in the tiles and the outer order: both
     * values are tried (aligned tiles decode as the genome's own) */
    for (align = 0; align < 2; align++) {
        memset(g, 0, sizeof(*g));
        g->sketch = (int32_t)k;
        g->align = (uint8_t)align;
        if (read_genes(sk, steps, nsteps, sk->base->nsteps, NULL, g,
                       needs_loc) < 0)
            return 0;
        for (i = 0; i < sk->base->nstages; i++)
            if (needs_loc[i] &&
                find_loc(s, g, i,
                         find_step(steps, nsteps, KT_STEP_COMPUTE_AT, i)) < 0)
                break;
        if (i < sk->base->nstages)
            continue;
        st = sk_build(s, g, NULL, 0);
        if (st == NULL)
            continue;
        kt_steps_hash(st->steps, st->nsteps, hex);
        kt_state_free(st);
        kt_hash_parse(hex, &h);
        if (h == hash)
            return 1;
    }
    return 0;
}

int
sk_decode(const struct kt_search *s, const struct kt_step *steps, int nsteps,
          uint64_t hash, struct sk_member *out)
{
    int k;

    for (k = 0; k < s->nsketches; k++)
        if (decode_sketch(s, k, steps, nsteps, hash, &out->g)) {
            out->hash = hash;
            out->score = 0;
            out->valid = 1;
            return 1;
        }
    return 0;
}

/* ---- another workload's schedule, stage by stage ---------------------- */

/* What load x of st reads, followed through cache_read copies to the
 * tensor they copy (a schedule inlines a pack or keeps it: the same
 * data): *t and idx[0..ndim) over x's variables; -1 if a composition
 * overflows. */
static int
resolve_load(const struct kt_state *st, const struct kt_expr *x,
             const struct kt_tensor **t, struct kt_affine *idx, int *ndim)
{
    int d, hops;

    *t = &st->tensors[x->src];
    *ndim = x->ndim;
    memcpy(idx, x->idx, sizeof(*idx) * (size_t)x->ndim);
    for (hops = 0; hops < KT_MAX_STAGES; hops++) {
        const struct kt_sstage *ps;
        struct kt_affine next[KT_MAX_DIMS];
        int p = (*t)->producer;
        if (p < 0 || p >= st->nstages)
            break;
        ps = &st->stages[p];
        if (!ps->cache_read || ps->body == NULL || ps->body->op != KT_X_LOAD ||
            ps->body->ndim > KT_MAX_DIMS)
            break;
        for (d = 0; d < ps->body->ndim; d++)
            if (kt_aff_compose(&next[d], &ps->body->idx[d], idx, *ndim) != KT_OK)
                return -1;
        *t = &st->tensors[ps->body->src];
        *ndim = ps->body->ndim;
        memcpy(idx, next, sizeof(*idx) * (size_t)*ndim);
    }
    return 0;
}

/* Loads compare by the tensor they read in the end (name and shape) and
 * its indexes: the two states number their tensors differently. */
static int
same_expr(const struct kt_state *a, const struct kt_expr *x,
          const struct kt_state *b, const struct kt_expr *y)
{
    int d;

    if (x == NULL || y == NULL)
        return x == y;
    if (x->op != y->op || memcmp(&x->value, &y->value, sizeof(x->value)) ||
        x->guarded != y->guarded ||
        memcmp(&x->pad_value, &y->pad_value, sizeof(x->pad_value)))
        return 0;
    if (x->op == KT_X_LOAD) {
        const struct kt_tensor *tx, *ty;
        struct kt_affine ix[KT_MAX_DIMS], iy[KT_MAX_DIMS];
        int nx, ny;
        if (x->ndim > KT_MAX_DIMS || y->ndim > KT_MAX_DIMS ||
            resolve_load(a, x, &tx, ix, &nx) < 0 ||
            resolve_load(b, y, &ty, iy, &ny) < 0)
            return 0;
        if (strcmp(tx->name, ty->name) != 0 || nx != ny ||
            tx->ndim != ty->ndim ||
            memcmp(tx->shape, ty->shape,
                   sizeof(tx->shape[0]) * (size_t)tx->ndim) != 0)
            return 0;
        for (d = 0; d < nx; d++)
            if (ix[d].c != iy[d].c || !kt_aff_same_terms(&ix[d], &iy[d]))
                return 0;
    }
    return same_expr(a, x->a, b, y->a) && same_expr(a, x->b, b, y->b);
}

/* Stage i of a computes what stage j of b computes (whatever its output
 * is called: a convolution's sum is its output in one workload and the
 * input of a bias + relu in another). */
static int
same_stage(const struct kt_state *a, int i, const struct kt_state *b, int j)
{
    const struct kt_sstage *x = &a->stages[i], *y = &b->stages[j];
    int k;

    if (x->op != y->op || x->naxes != y->naxes || x->nspatial != y->nspatial ||
        x->is_pad != y->is_pad || x->cache_read != y->cache_read)
        return 0;
    for (k = 0; k < x->naxes; k++)
        if (x->axes[k].extent != y->axes[k].extent ||
            x->axes[k].reduce != y->axes[k].reduce)
            return 0;
    return same_expr(a, x->body, b, y->body);
}

/* The parallel gene of stage i's loop nest in src (the stage it is
 * computed at, up to the root): its fused iterators, 1 for a parallel
 * loop alone, 0 for none. */
static uint8_t
nest_par(const struct kt_state *src, int i)
{
    const struct kt_step *fu;
    int hops, j;

    for (hops = 0; src->stages[i].attach_stage >= 0 && hops < KT_MAX_STAGES;
         hops++)
        i = src->stages[i].attach_stage;
    fu = find_step(src->steps, src->nsteps, KT_STEP_FUSE, i);
    if (fu != NULL)
        return (uint8_t)(fu->n < 255 ? fu->n : 254);
    for (j = 0; j < src->nsteps; j++)
        if (src->steps[j].kind == KT_STEP_ANNOTATE &&
            src->steps[j].stage == i && src->steps[j].v[0] == KT_ANN_PARALLEL)
            return 1;
    return 0;
}

/* The axis stage i of src vectorizes, -1 if none. */
static int
vector_axis(const struct kt_state *src, int i)
{
    const struct kt_sstage *ss = &src->stages[i];
    int it;

    for (it = 0; it < ss->niters; it++)
        if (ss->iters[it].ann == KT_ANN_VECTORIZE && ss->iters[it].nparts == 1)
            return ss->iters[it].parts[0].axis;
    return -1;
}

/* The genome of sketch k that takes the genes of every stage of src (the
 * other workload's schedule replayed) computing what a stage of k
 * computes, the others a fresh sample's; 0 when no tiled stage of k has
 * such a stage or the genome does not build. */
static int
transfer_sketch(struct kt_search *s, int k, const struct kt_state *src,
                struct sk_member *out)
{
    const struct sk_sketch *sk = &s->sk[k];
    const struct kt_state *base = sk->base;
    int map[KT_MAX_STAGES], needs_loc[KT_MAX_STAGES] = {0};
    int used[KT_MAX_STAGES] = {0}, tiled = 0, i, j;
    struct kt_state *st;
    char hex[17];
    uint64_t h = 0;

    for (i = 0; i < KT_MAX_STAGES; i++)
        map[i] = -1;
    for (i = 0; i < src->nstages; i++) {
        if (src->stages[i].inlined)
            continue;
        for (j = 0; j < base->nstages; j++)
            if (!used[j] && sk->plan[j].role != SK_INLINED &&
                same_stage(src, i, base, j))
                break;
        if (j == base->nstages)
            continue;
        if (sk->plan[j].role == SK_MLT) {
            /* only a tiling carries over, and a register tile is only
             * itself along the same vector axis */
            if (find_step(src->steps, src->nsteps, KT_STEP_REORDER, i) == NULL)
                continue;
            if (vector_axis(src, i) >= 0 &&
                vector_axis(src, i) !=
                    sk_vector_axis(&base->stages[j], &sk->plan[j]))
                return 0;
        }
        map[i] = j;
        used[j] = 1;
        tiled += sk->plan[j].role == SK_MLT;
    }
    if (tiled == 0)
        return 0;
    sk_sample_sketch(s, &s->rng, k, &out->g);
    if (read_genes(sk, src->steps, src->nsteps, 0, map, &out->g, needs_loc) < 0)
        return 0;
    for (i = 0; i < src->nstages; i++) {
        const struct kt_step *ca;
        struct kt_step want;
        if ((j = map[i]) < 0)
            continue;
        if (base->stages[j].cache_read)
            out->g.pack[j] = src->stages[i].prepacked ? 2 : 1;
        /* a tiling's parallel loop is its nest's, wherever either
         * workload computes it (a sum fused into its bias + relu or not) */
        if (sk->plan[j].role == SK_MLT) {
            int nest = sk->plan[j].partner >= 0 ? sk->plan[j].partner : j;
            if (nest == j || !used[nest])
                out->g.par[nest] = nest_par(src, i);
            /* and its unroll pragma only took effect at the root (the
             * lowering drops it under a compute_at) */
            if (src->stages[i].attach_stage >= 0)
                out->g.unroll[j] = 0;
        }
        if (sk->plan[j].role != SK_PLAIN || !sk->plan[j].may_move)
            continue;
        /* the same attach point, if this sketch has it; else the root (a
         * sampled one may sit inside an unrolled nest) */
        out->g.loc[j] = 0;
        ca = find_step(src->steps, src->nsteps, KT_STEP_COMPUTE_AT, i);
        if (!needs_loc[j] || ca == NULL || ca->v[0] < 0 ||
            ca->v[0] >= KT_MAX_STAGES || map[ca->v[0]] < 0)
            continue;
        want = *ca;
        want.stage = j;
        want.v[0] = map[ca->v[0]];
        if (find_loc(s, &out->g, j, &want) < 0)
            out->g.loc[j] = 0;
    }
    st = sk_build(s, &out->g, NULL, 0);
    if (st == NULL)
        return 0;
    kt_steps_hash(st->steps, st->nsteps, hex);
    kt_state_free(st);
    kt_hash_parse(hex, &h);
    out->hash = h;
    out->score = 0;
    out->valid = 1;
    out->origin = 0;
    return 1;
}

int
sk_transfer(struct kt_search *s, const struct kt_dag *from,
            const struct kt_step *steps, int nsteps, struct sk_member *out)
{
    struct kt_state *src = NULL;
    char err[256];
    int k, n = 0;

    if (kt_state_replay(from, steps, nsteps, &src, err, sizeof(err)) != KT_OK)
        return 0;
    for (k = 0; k < s->nsketches; k++)
        n += transfer_sketch(s, k, src, &out[n]);
    kt_state_free(src);
    return n;
}
