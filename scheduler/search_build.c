/* search_build.c - the builder that turns a genome into a schedule state:
 * the sketch's base state, then per stage (last to first) its tiling,
 * fuse for parallel or compute_at, pack modes, and the annotations
 * (docs/search.md, Candidates are genomes). */
#include <string.h>

#include "scheduler/search_int.h"

/* ---- genome -> state --------------------------------------------------- */

#define APPLY(st, ...)                                                         \
    do {                                                                       \
        struct kt_step st_ = __VA_ARGS__;                                      \
        if (kt_state_apply((st), &st_, err, errlen) != KT_OK)                  \
            goto fail;                                                         \
    } while (0)

static int
find_iter(const struct kt_sstage *ss, int axis, int part)
{
    int j;

    for (j = 0; j < ss->niters; j++)
        if (ss->iters[j].nparts == 1 && ss->iters[j].parts[0].axis == axis &&
            ss->iters[j].parts[0].part == part)
            return j;
    return -1;
}

static int
count_kind(const char *structure, char k)
{
    int n = 0;

    for (; *structure; structure++)
        n += *structure == k;
    return n;
}

/* The axes in the order of one tile level: the stage's order, but at the
 * last spatial level vec_axis (>= 0) goes last. */
static int
level_axis(const struct kt_sstage *ss, int k, int last_spatial, int vec_axis)
{
    if (!last_spatial || vec_axis < 0 || k >= ss->nspatial)
        return k;
    if (k == ss->nspatial - 1)
        return vec_axis;
    return k >= vec_axis ? k + 1 : k;
}

/* The k-th axis of the outer level when axis first (>= 0) goes first. */
static int
outer_axis(int k, int first)
{
    if (first < 0)
        return k;
    if (k == 0)
        return first;
    return k <= first ? k - 1 : k;
}

/* Expands u steps of the reduction loop at iterator j (the innermost one
 * around a register tile) into the micro-kernel: a split whose inner part
 * of u is unrolled.  A window's loop of 2 to u steps (a 3 x 3 window's
 * column taps) is unrolled whole: a stride-2 read's taps then share
 * their loads (ir/codegen_expr.c).  Longer loops that u does not divide
 * stay as they are. */
static int
unroll_reduction(struct kt_state *st, int i, int j, int u, char *err,
                 size_t errlen)
{
    const struct kt_sstage *ss = &st->stages[i];
    int64_t e = ss->iters[j].extent;

    if (u > 1 && e > 1 && e <= u &&
        sk_window_axis(ss, ss->iters[j].parts[0].axis)) {
        APPLY(st, {KT_STEP_ANNOTATE, i, j, 0, {KT_ANN_UNROLL}});
        return 0;
    }
    if (u <= 1 || e <= u || e % u != 0)
        return 0;
    APPLY(st, {KT_STEP_SPLIT, i, j, 1, {u}});
    APPLY(st, {KT_STEP_ANNOTATE, i, j + 1, 0, {KT_ANN_UNROLL}});
    return 0;
fail:
    return -1;
}

/* Multi-level tiling of stage i; red_unroll: the factor of
 * unroll_reduction for the last reduction level when a spatial level
 * (the register tile) follows it; first: the spatial axis whose outer
 * part goes first (search_align.c), -1 for the stage's order. */
static int
tile_mlt(struct kt_state *st, int i, const int32_t (*tiles)[SK_MAXP],
         const char *structure, int vec_axis, int red_unroll, int first,
         char *err, size_t errlen)
{
    struct kt_step re;
    int nS = count_kind(structure, 'S'), nR = count_kind(structure, 'R');
    int a, k, l, ls = 0, lr = 0, naxes = st->stages[i].naxes, last_red = -1;
    const char *c;

    for (a = naxes - 1; a >= 0; a--) {
        const struct kt_sstage *ss = &st->stages[i];
        int np = ss->axes[a].reduce ? nR : nS;
        struct kt_step sp;
        if (ss->axes[a].extent <= 1)
            continue;
        memset(&sp, 0, sizeof(sp));
        sp.kind = KT_STEP_SPLIT;
        sp.stage = i;
        sp.iter = a;
        sp.n = np - 1;
        for (l = 1; l < np; l++)
            sp.v[l - 1] = tiles[a][l];
        if (kt_state_apply(st, &sp, err, errlen) != KT_OK)
            return -1;
    }
    memset(&re, 0, sizeof(re));
    re.kind = KT_STEP_REORDER;
    re.stage = i;
    for (c = structure; *c; c++) {
        int red = *c == 'R', lev = red ? lr++ : ls++;
        for (k = 0; k < naxes; k++) {
            const struct kt_sstage *ss = &st->stages[i];
            int j;
            a = level_axis(ss, k, !red && lev == nS - 1, vec_axis);
            if (!red && lev == 0 && nS > 1)
                a = outer_axis(k, first);
            if (ss->axes[a].reduce != red)
                continue;
            if (ss->axes[a].extent <= 1 && lev != 0)
                continue;
            j = find_iter(ss, a, ss->axes[a].extent <= 1 ? 0 : lev);
            if (j < 0)
                return kt_seterr(err, errlen, KT_ESCHEDULE,
                                 "tile: no part %d "
                                 "of axis %d",
                                 lev, a);
            re.v[re.n++] = j;
            if (red && lev == nR - 1 && c[1] == 'S')
                last_red = re.n - 1;
        }
    }
    if (kt_state_apply(st, &re, err, errlen) != KT_OK)
        return -1;
    return last_red >= 0
               ? unroll_reduction(st, i, last_red, red_unroll, err, errlen)
               : 0;
}

/* The axis consumer i (fused into a producer whose register tile
 * vectorizes its axis v) puts last in its own inner tile instead of its
 * last one, or -1: v when i stores along v at a stride of 2 to 4 (the
 * axes after v span 2 to 4 elements: a transposed convolution's output
 * phases, O[..., x, b]), which an AVX-512 target writes as masked stores
 * (docs/schedule.md), where its last axis is a vector of at most 4 lanes
 * read from the producer's tile with v's stride. */
static int
follow_vector_axis(const struct kt_search *s, const struct kt_state *st, int i,
                   int v)
{
    const struct kt_sstage *ss = &st->stages[i];
    int64_t after = 1;
    int a;

    if (s->o.vector_bytes != 64 || v < 0 || v >= ss->nspatial)
        return -1;
    for (a = v + 1; a < ss->nspatial; a++)
        after *= ss->axes[a].extent;
    return after >= 2 && after <= KT_MAX_STRIDED_STORE ? v : -1;
}

/* Splits consumer i like its fused producer's spatial tiles down to level
 * 'level', axis first's outer part first (-1: none), axis vec_last (-1:
 * none) last in the innermost level; returns the index of the last
 * iterator of level - 1. */
static int
tile_follow(struct kt_state *st, int i, const int32_t (*tiles)[SK_MAXP], int nS,
            int level, int first, int vec_last, char *err, size_t errlen)
{
    struct kt_step re;
    int a, k, l, nsp = st->stages[i].nspatial, ap = -1;

    for (a = nsp - 1; a >= 0; a--) {
        struct kt_step sp;
        int64_t rest = 1;
        if (st->stages[i].axes[a].extent <= 1)
            continue;
        memset(&sp, 0, sizeof(sp));
        sp.kind = KT_STEP_SPLIT;
        sp.stage = i;
        sp.iter = a;
        sp.n = level;
        for (l = 1; l < level; l++)
            sp.v[l - 1] = tiles[a][l];
        for (l = level; l < nS; l++)
            rest *= tiles[a][l];
        sp.v[level - 1] = rest;
        if (kt_state_apply(st, &sp, err, errlen) != KT_OK)
            return -1;
    }
    memset(&re, 0, sizeof(re));
    re.kind = KT_STEP_REORDER;
    re.stage = i;
    for (l = 0; l <= level; l++) {
        for (k = 0; k < nsp; k++) {
            const struct kt_sstage *ss = &st->stages[i];
            int j;
            a = l == 0 ? outer_axis(k, first)
                       : level_axis(ss, k, l == level, vec_last);
            if (ss->axes[a].extent <= 1 && l != 0)
                continue;
            j = find_iter(ss, a, ss->axes[a].extent <= 1 ? 0 : l);
            if (j < 0)
                return kt_seterr(err, errlen, KT_ESCHEDULE,
                                 "follow: no part "
                                 "%d of axis %d",
                                 l, a);
            re.v[re.n++] = j;
        }
        if (l == level - 1)
            ap = re.n - 1;
    }
    if (kt_state_apply(st, &re, err, errlen) != KT_OK)
        return -1;
    return ap;
}

/* Plain stage i's spatial axis a split into an outer part of length e,
 * which goes first (search_align.c). */
static int
split_first(struct kt_state *st, int i, int a, int64_t e, char *err,
            size_t errlen)
{
    const struct kt_sstage *ss = &st->stages[i];
    struct kt_step re;
    int j, k;

    if (ss->transformed || e <= 1 || ss->axes[a].extent % e != 0)
        return 0;
    if (e < ss->axes[a].extent)
        APPLY(st, {KT_STEP_SPLIT, i, a, 1, {ss->axes[a].extent / e}});
    memset(&re, 0, sizeof(re));
    re.kind = KT_STEP_REORDER;
    re.stage = i;
    re.v[re.n++] = a;
    for (j = 0, k = st->stages[i].niters; j < k; j++)
        if (j != a)
            re.v[re.n++] = j;
    if (kt_state_apply(st, &re, err, errlen) != KT_OK)
        return -1;
    return 0;
fail:
    return -1;
}

/* A stage that is not tiled and ends in a reduction loop (a row sum or
 * max: softmax, reduce_mean, layer norm) reduces into one element per
 * loop: vectorized, it keeps lane accumulators and reduces across lanes
 * once (docs/search.md).  Whole 4-lane vectors must divide a short loop
 * (a 7-wide pooling window stays scalar); from 16 on, the lanes past the
 * last whole vector are added as a narrower vector and scalars (197 = 12
 * x 16 + 4 + 1: softmax's rows of a ViT's attention). */
static int
lane_reduction(const struct sk_plan *p, const struct kt_iter *it)
{
    return p->role != SK_MLT && it->reduce &&
           (it->extent % 4 == 0 || it->extent >= 16);
}

/* Whether some read of tensor t in e moves with axis a. */
static int
load_moves(const struct kt_expr *e, int t, int a)
{
    int d, i;

    if (e == NULL)
        return 0;
    if (e->op == KT_X_LOAD && e->src == t)
        for (d = 0; d < e->ndim; d++)
            for (i = 0; i < e->idx[d].n; i++)
                if (e->idx[d].var[i] == a && e->idx[d].k[i] != 0)
                    return 1;
    return load_moves(e->a, t, a) || load_moves(e->b, t, a);
}

/* Whether the reads of tensor t by stage cs move with iterator j: computed
 * inside a loop its consumer reads it the same at every step of (softmax's
 * row sum in the output's column loop), a stage only recomputes the same
 * region, so such loops are no attach points. */
static int
iter_moves_read(const struct kt_sstage *cs, int j, int t)
{
    int q;

    for (q = 0; q < cs->iters[j].nparts; q++)
        if (load_moves(cs->body, t, cs->iters[j].parts[q].axis))
            return 1;
    return 0;
}

/* A stage read by c and by others can only be computed at the loop of c
 * where all the others are (docs/schedule.md, compute_at): that loop in
 * *cand and 1, or 0 while some other reader is elsewhere. */
static int
coattach_point(const struct kt_state *st, int p, int c, int *cand)
{
    int r, at = -1;

    for (r = 0; r < st->nstages; r++) {
        const struct kt_sstage *rs = &st->stages[r];
        if (r == p || r == c || rs->inlined ||
            !kt_expr_reads(rs->body, st->stages[p].out))
            continue;
        if (rs->attach_stage != c || (at >= 0 && rs->attach_iter != at))
            return 0;
        at = rs->attach_iter;
    }
    cand[0] = at;
    return at >= 0;
}

/* The leading iterators of a root stage that its par gene fuses into
 * the parallel loop, of the first m (its spatial ones); 255 is Ansor's
 * InitParallel: until the degree reaches 16 x cores. */
static int
parallel_depth(const struct kt_search *s, const struct kt_sstage *ss,
               uint8_t par, int m)
{
    int64_t deg = 1;
    int kf;

    if (par != 255)
        return par < m ? par : m;
    for (kf = 0; kf < m && deg < 16 * (int64_t)s->o.cores; kf++)
        deg *= ss->iters[kf].extent;
    return kf;
}

/* A plain root stage whose parallel loop would take in its last loop (an
 * elementwise stage over one axis, or over rows too few to share: a GELU
 * of 1 x 3072) would not be vectorized at all: the parallel loop is not
 * vectorized.  Its last loop is split instead, the vectorized run inside:
 * the longest run of whole vectors (the widest that divide it, 4 lanes at
 * least) that leaves 16 x cores iterations outside.  0 when no vector
 * divides it or it is one vector long (docs/search.md). */
static int64_t
vector_run(const struct kt_search *s, const struct kt_sstage *ss, int last)
{
    int64_t lanes = s->o.vector_bytes >= 16 ? s->o.vector_bytes / 4 : 4;
    int64_t ext = ss->iters[last].extent, outer = 1, run;
    int j;

    for (j = 0; j < last; j++)
        outer *= ss->iters[j].extent;
    while (lanes > 4 && ext % lanes != 0)
        lanes /= 2;
    if (ext % lanes != 0 || ext <= lanes)
        return 0;
    for (run = lanes; ext % (2 * run) == 0 &&
                      outer * (ext / (2 * run)) >= 16 * (int64_t)s->o.cores;
         run *= 2)
        ;
    return run;
}

/* The annotations of a built genome: parallel where sk_build fused,
 * vectorize, the register tile's unroll and the auto-unroll pragma. */
static int
annotate(struct kt_state *st, const struct sk_sketch *k,
         const struct sk_genome *g, const int *par_on, char *err, size_t errlen)
{
    int i, j, n = st->nstages;

    for (i = 0; i < n; i++) {
        const struct sk_plan *p = &k->plan[i];
        const struct kt_sstage *ss = &st->stages[i];
        int last = ss->niters - 1;
        if (ss->inlined)
            continue;
        if (par_on[i])
            APPLY(st, {KT_STEP_ANNOTATE, i, 0, 0, {KT_ANN_PARALLEL}});
        if (g->vec[i] && last >= 0 &&
            (ss->iters[last].reduce == 0 ||
             (p->role == SK_MLT && p->structure == SK_STRUCT_RF) ||
             lane_reduction(p, &ss->iters[last])) &&
            ss->iters[last].extent > 1 && ss->iters[last].ann == KT_ANN_NONE)
            APPLY(st, {KT_STEP_ANNOTATE, i, last, 0, {KT_ANN_VECTORIZE}});
        /* rfactor: the spatial register tile is always unrolled, so the
         * lane accumulators of all its elements live in registers */
        if (p->role == SK_MLT &&
            (g->unroll_inner[i] || p->structure == SK_STRUCT_RF)) {
            /* the innermost spatial level, but its last iterator */
            for (j = last - 1;
                 j >= 0 && ss->iters[j].reduce == 0 && ss->iters[j].nparts == 1;
                 j--) {
                const struct kt_iter *it = &ss->iters[j];
                int ax = it->parts[0].axis;
                if (it->parts[0].part != ss->nparts[ax] - 1)
                    break;
                if (it->extent > 1 && it->ann == KT_ANN_NONE)
                    APPLY(st, {KT_STEP_ANNOTATE, i, j, 0, {KT_ANN_UNROLL}});
            }
        }
        if (p->has_reduce && sk_unroll_values[g->unroll[i] & 3] > 0)
            APPLY(st, {KT_STEP_PRAGMA,
                       i,
                       0,
                       0,
                       {sk_unroll_values[g->unroll[i] & 3]}});
    }
    return 0;
fail:
    return -1;
}

struct kt_state *
sk_build(const struct kt_search *s, const struct sk_genome *g, char *err,
         size_t errlen)
{
    const struct sk_sketch *k = &s->sk[g->sketch];
    struct kt_state *st = kt_state_clone(k->base);
    int ap[KT_MAX_STAGES], par_on[KT_MAX_STAGES] = {0};
    struct sk_aligned al;
    int i, j, n = st->nstages;

    sk_align(s, g, &al);

    for (i = n - 1; i >= 0; i--) {
        const struct sk_plan *p = &k->plan[i];
        int tgt = -1, titer = -1, m, kf, ap_pre = -1, ap_cand[KT_MAX_ITERS];
        ap[i] = -1;
        if (st->stages[i].inlined)
            continue;
        if (st->stages[i].cache_read &&
            (g->pack[i] == 0 || !p->may_move ||
             sk_pack_attach_points(&st->stages[p->consumer], st->stages[i].out,
                                   g->pack[i] == 2, ap_cand) == 0)) {
            APPLY(st, {KT_STEP_COMPUTE_INLINE, i, 0, 0, {0}});
            continue;
        }
        if (p->role == SK_MLT && p->partner >= 0) {
            tgt = p->partner;
            titer = ap[tgt];
        } else if (p->role == SK_PLAIN && p->may_move && g->loc[i] > 0) {
            const struct kt_sstage *cs = &st->stages[p->consumer];
            int cand[KT_MAX_ITERS], nc = 0;
            if (st->stages[i].cache_read)
                nc = sk_pack_attach_points(cs, st->stages[i].out,
                                           g->pack[i] == 2, cand);
            else if (sk_sole_reader(st, i) == -2)
                nc = coattach_point(st, i, p->consumer, cand);
            else
                for (j = 0; j < cs->niters && cs->iters[j].reduce == 0; j++)
                    if (cs->iters[j].extent > 1 &&
                        iter_moves_read(cs, j, st->stages[i].out))
                        cand[nc++] = j;
            /* a copy of padding that may not be inlined back, and that
             * this tiling makes rebuild often: a slow program, not built */
            if (st->stages[i].cache_read && g->pack[i] == 1 &&
                st->stages[i].body->guarded &&
                sk_pack_rebuilt_often(cs, st->stages[i].out)) {
                snprintf(err, errlen, "%s: rebuilt for every tile",
                         st->stages[i].name);
                goto fail;
            }
            if (nc > 0) {
                tgt = p->consumer;
                titer = cand[(g->loc[i] - 1) % nc];
            }
        }
        if (p->role == SK_MLT &&
            tile_mlt(st, i, al.tiles[p->slot], sk_structures[p->structure],
                     p->vec_axis1 - 1,
                     sk_red_unroll_values[g->red_unroll[i] % SK_RED_UNROLLS],
                     al.first[i], err, errlen) != 0)
            goto fail;
        if (p->role == SK_FOLLOW) {
            const struct sk_plan *pp = &k->plan[p->partner];
            int v = follow_vector_axis(s, st, i,
                                       sk_vector_axis(&st->stages[p->partner],
                                                      pp));
            ap_pre = tile_follow(st, i, al.tiles[pp->slot],
                                 count_kind(sk_structures[pp->structure], 'S'),
                                 p->level, al.first[i], v, err, errlen);
            if (ap_pre < 0)
                goto fail;
        }
        if (tgt < 0 && p->role == SK_PLAIN && al.first[i] >= 0 &&
            split_first(st, i, al.first[i], al.outer[i], err, errlen) != 0)
            goto fail;
        if (tgt < 0) {
            const struct kt_sstage *ss = &st->stages[i];
            for (m = 0; m < ss->niters && ss->iters[m].reduce == 0; m++)
                ;
            if (p->role == SK_FOLLOW && m > ap_pre + 1)
                m = ap_pre + 1;
            kf = parallel_depth(s, ss, g->par[i], m);
            if (p->role == SK_PLAIN && g->vec[i] && m >= 1 && m == ss->niters &&
                kf == m && ss->iters[m - 1].nparts == 1 &&
                ss->iters[m - 1].ann == KT_ANN_NONE) {
                int64_t run = vector_run(s, ss, m - 1);
                if (run > 0) {
                    APPLY(st, {KT_STEP_SPLIT, i, m - 1, 1, {run}});
                    ss = &st->stages[i];
                    kf = parallel_depth(s, ss, g->par[i], m + 1);
                    kf = kf < m ? kf : m; /* the run stays inside */
                }
            }
            if (kf >= 2)
                APPLY(st, {KT_STEP_FUSE, i, 0, kf, {0}});
            par_on[i] = kf >= 1;
            ap[i] = ap_pre >= 0 && kf >= 1 ? ap_pre - (kf - 1) : ap_pre;
        } else {
            ap[i] = ap_pre;
            if (titer < 0) {
                kt_seterr(err, errlen, KT_ESCHEDULE, "no attach point");
                goto fail;
            }
            APPLY(st, {KT_STEP_COMPUTE_AT, i, 0, 2, {tgt, titer}});
        }
        if (st->stages[i].cache_read && g->pack[i] == 2)
            APPLY(st, {KT_STEP_LAYOUT_REWRITE, i, 0, 0, {0}});
    }
    if (annotate(st, k, g, par_on, err, errlen) != 0)
        goto fail;
    return st;
fail:
    kt_state_free(st);
    return NULL;
}
