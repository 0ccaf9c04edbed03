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
 * decoded, never seeded wrongly. */
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

/* Genes read directly off the steps after the sketch's base prefix;
 * needs_loc[i] marks movable stages whose compute_at must be searched.
 * -1 on a step this decoder cannot place. */
static int
read_genes(const struct sk_sketch *sk, const struct kt_step *steps, int nsteps,
           int from, struct sk_genome *g, int *needs_loc)
{
    const struct kt_state *base = sk->base;
    /* per stage: its tiling's reorder was read; the reduction unroll's
     * annotation (the step after tile_mlt's split that follows the
     * reorder), which is no register-tile unroll */
    int reordered[KT_MAX_STAGES] = {0}, red_annotation = -1;
    int j, a, l, slot, i;

    for (slot = 0; slot < sk->nslots; slot++) {
        const struct kt_sstage *ss = &base->stages[sk->slot_stage[slot]];
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
        i = st->stage;
        if (i < 0 || i >= base->nstages)
            return -1;
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
                red_annotation = j + 1;
                break;
            }
            a = st->iter;
            if (a < 0 || a >= base->stages[i].naxes || st->n < 1 ||
                st->n >= SK_MAXP)
                return -1;
            for (l = 1; l <= st->n; l++) {
                if (st->v[l - 1] < 1 || st->v[l - 1] > INT32_MAX)
                    return -1;
                g->tiles[p->slot][a][l] = (int32_t)st->v[l - 1];
                prod *= st->v[l - 1];
            }
            if (base->stages[i].axes[a].extent % prod != 0)
                return -1;
            g->tiles[p->slot][a][0] = (int32_t)(base->stages[i].axes[a].extent /
                                                prod);
            break;
        case KT_STEP_REORDER: reordered[i] = p->role == SK_MLT; break;
        case KT_STEP_FUSE:
            g->par[i] = (uint8_t)(st->n < 255 ? st->n : 254);
            break;
        case KT_STEP_ANNOTATE:
            if (st->v[0] == KT_ANN_PARALLEL && g->par[i] == 0)
                g->par[i] = 1;
            else if (st->v[0] == KT_ANN_VECTORIZE)
                g->vec[i] = 1;
            else if (st->v[0] == KT_ANN_UNROLL && j != red_annotation)
                g->unroll_inner[i] = 1;
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
     * compute_at or at the root */
    for (i = 0; i < base->nstages; i++)
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
    int j, i;

    if (nsteps < sk->base->nsteps)
        return 0;
    for (j = 0; j < sk->base->nsteps; j++)
        if (!step_eq(&sk->base->steps[j], &steps[j]))
            return 0;
    memset(g, 0, sizeof(*g));
    g->sketch = (int32_t)k;
    if (read_genes(sk, steps, nsteps, sk->base->nsteps, g, needs_loc) < 0)
        return 0;
    for (i = 0; i < sk->base->nstages; i++)
        if (needs_loc[i] &&
            find_loc(s, g, i, find_step(steps, nsteps, KT_STEP_COMPUTE_AT, i)) <
                0)
            return 0;
    st = sk_build(s, g, NULL, 0);
    if (st == NULL)
        return 0;
    kt_steps_hash(st->steps, st->nsteps, hex);
    kt_state_free(st);
    kt_hash_parse(hex, &h);
    return h == hash;
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
