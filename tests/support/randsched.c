/* randsched.c - seeded random schedules in the shapes the CPU sketch rules
 * produce, for the code generator sweep (see ktt.h). */
#include "tests/support/ktt.h"

#include <stdio.h>
#include <string.h>

static int64_t
rand_divisor(struct kt_rng *r, int64_t n)
{
    int64_t d[256];
    int nd = 0;
    int64_t i;

    for (i = 1; i <= n && nd < 256; i++)
        if (n % i == 0)
            d[nd++] = i;
    return d[kt_rng_below(r, (uint64_t)nd)];
}

/* The single live consumer of stage p, or -1. */
static int
sole_consumer(const struct kt_state *st, int p)
{
    int c, found = -1;

    for (c = 0; c < st->nstages; c++) {
        if (c == p || st->stages[c].inlined ||
            !kt_expr_reads(st->stages[c].body, st->stages[p].out))
            continue;
        if (found >= 0)
            return -1;
        found = c;
    }
    return found;
}

/* The reader of p that all its other readers are read by alone, -1 if
 * p has one reader or no such one. */
static int
final_consumer(const struct kt_state *st, int p)
{
    int c, q, found = -1, n = 0;

    if (st->tensors[st->stages[p].out].kind == KT_TENSOR_OUTPUT)
        return -1;
    for (c = 0; c < st->nstages; c++) {
        int all = 1;
        if (c == p || st->stages[c].inlined ||
            !kt_expr_reads(st->stages[c].body, st->stages[p].out))
            continue;
        n++;
        for (q = 0; q < st->nstages; q++)
            if (q != p && q != c && !st->stages[q].inlined &&
                kt_expr_reads(st->stages[q].body, st->stages[p].out) &&
                sole_consumer(st, q) != c)
                all = 0;
        if (all)
            found = c;
    }
    return n >= 2 ? found : -1;
}

static int
apply(struct kt_state *st, struct kt_step s)
{
    char err[256];

    return kt_state_apply(st, &s, err, sizeof(err));
}

static struct kt_step
step(enum kt_step_kind k, int stage, int iter)
{
    struct kt_step s;

    memset(&s, 0, sizeof(s));
    s.kind = k;
    s.stage = stage;
    s.iter = iter;
    return s;
}

/* Splits axis iterator 'it' (one part) into 1 + n parts whose inner
 * lengths multiply to a divisor of 'limit'. */
static void
split_random(struct kt_state *st, struct kt_rng *r, int s, int it,
             int64_t limit, int maxparts)
{
    struct kt_step sp = step(KT_STEP_SPLIT, s, it);
    int n = (int)kt_rng_below(r, (uint64_t)maxparts), i;
    int64_t left = rand_divisor(r, limit);

    if (n == 0)
        return;
    sp.n = n;
    for (i = n - 1; i >= 0; i--) {
        sp.v[i] = i == 0 ? left : rand_divisor(r, left);
        left /= sp.v[i];
    }
    apply(st, sp);
}

static void
shuffle(struct kt_rng *r, int64_t *v, int n)
{
    int i;

    for (i = n - 1; i > 0; i--) {
        int j = (int)kt_rng_below(r, (uint64_t)i + 1);
        int64_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/* The rfactor sketch's shape: every axis split in two, order spatial
 * outers, other reductions, the last reduction's outer part, spatial
 * inners, the last reduction's inner part (vectorized later: lane
 * accumulators). */
static void
rfactor_shape(struct kt_state *st, struct kt_rng *r, int s)
{
    const struct kt_sstage *ss = &st->stages[s];
    struct kt_step re = step(KT_STEP_REORDER, s, 0);
    int a, nsp = ss->nspatial, last = ss->naxes - 1;

    for (a = last; a >= 0; a--) {
        struct kt_step sp = step(KT_STEP_SPLIT, s, a);
        sp.n = 1;
        sp.v[0] = rand_divisor(r, st->stages[s].axes[a].extent);
        apply(st, sp);
    }
    for (a = 0; a < nsp; a++)
        re.v[re.n++] = 2 * a;
    for (a = nsp; a < last; a++) {
        re.v[re.n++] = 2 * a;
        re.v[re.n++] = 2 * a + 1;
    }
    re.v[re.n++] = 2 * last;
    for (a = 0; a < nsp; a++)
        re.v[re.n++] = 2 * a + 1;
    re.v[re.n++] = 2 * last + 1;
    apply(st, re);
}

/* A random tensor read by e (reservoir sampling over its loads). */
static int
random_read(const struct kt_expr *e, struct kt_rng *r, int *seen)
{
    int pick = -1, sub;

    if (e == NULL)
        return -1;
    if (e->op == KT_X_LOAD && kt_rng_below(r, (uint64_t)++ * seen) == 0)
        pick = e->src;
    sub = random_read(e->a, r, seen);
    pick = sub >= 0 ? sub : pick;
    sub = random_read(e->b, r, seen);
    return sub >= 0 ? sub : pick;
}

/* cache_read of one tensor a reduction reads, now and then.  The draws
 * come from a stream of their own (r's state is not advanced), so the
 * schedules without a pack are the ones the sweep drew before packs. */
static void
random_cache_reads(struct kt_state *st, const struct kt_rng *parent)
{
    struct kt_rng own = *parent, *r = &own;
    int s;

    kt_rng_seed(r, kt_rng_next(r) ^ 0x9e3779b97f4a7c15ULL);

    for (s = st->nstages - 1; s >= 0; s--) {
        struct kt_step chr = step(KT_STEP_CACHE_READ, s, 0);
        int seen = 0;
        if (st->stages[s].op == KT_ASSIGN || kt_rng_unit(r) >= 0.5)
            continue;
        chr.v[0] = random_read(st->stages[s].body, r, &seen);
        if (chr.v[0] >= 0)
            apply(st, chr);
    }
}

/* Which producers go inside their consumer (-1: none). */
static void
random_attach_targets(const struct kt_state *st, struct kt_rng *r,
                      int *attach_to)
{
    int s;

    for (s = 0; s < st->nstages; s++) {
        const struct kt_sstage *ss = &st->stages[s];
        int c;
        attach_to[s] = -1;
        if (ss->inlined || st->tensors[ss->out].kind == KT_TENSOR_OUTPUT)
            continue;
        c = sole_consumer(st, s);
        if (c < 0)
            continue;
        if (strstr(ss->name, "_local") != NULL && kt_rng_unit(r) < 0.8)
            attach_to[s] = c;
        else if (ss->is_pad && kt_rng_unit(r) < 0.3)
            attach_to[s] = c;
        else if (ss->cache_read && kt_rng_unit(r) < 0.7)
            attach_to[s] = c;
        else if (!ss->is_pad && st->stages[c].naxes == st->stages[c].nspatial &&
                 st->stages[c].nspatial == ss->nspatial && kt_rng_unit(r) < 0.5)
            attach_to[s] = c;
    }
    /* A stage read by c and by stages c alone reads (softmax's exp, read
     * by the row sum and the output) may go into c with all of them. */
    for (s = 0; s < st->nstages; s++) {
        int c = final_consumer(st, s), q;
        if (c < 0 || attach_to[s] >= 0 || st->stages[s].inlined ||
            kt_rng_unit(r) >= 0.5)
            continue;
        for (q = 0; q < st->nstages; q++)
            if (q != c && !st->stages[q].inlined &&
                kt_expr_reads(st->stages[q].body, st->stages[s].out))
                attach_to[q] = c;
        attach_to[s] = c;
    }
}

/* A consumer's two-level spatial tile (lengths into tile), outer tiles
 * first; its producers attach at *attach_at after the outer tiles. */
static void
tile_consumer(struct kt_state *st, struct kt_rng *r, int s, int attached,
              int64_t *tile, int *attach_at)
{
    const struct kt_sstage *ss = &st->stages[s];
    int nsp = ss->nspatial, nred = ss->naxes - ss->nspatial, a, fuse;
    struct kt_step re = step(KT_STEP_REORDER, s, 0);

    for (a = nsp - 1; a >= 0; a--) {
        struct kt_step sp = step(KT_STEP_SPLIT, s, a);
        tile[a] = rand_divisor(r, ss->axes[a].extent);
        sp.n = 1;
        sp.v[0] = tile[a];
        apply(st, sp);
    }
    /* iterators: o0 i0 o1 i1 ... then reductions */
    re.n = st->stages[s].niters;
    for (a = 0; a < nsp; a++) {
        re.v[a] = 2 * a;
        re.v[nsp + nred + a] = 2 * a + 1;
    }
    for (a = 0; a < nred; a++)
        re.v[nsp + a] = 2 * nsp + a;
    apply(st, re);
    fuse = st->stages[s].attach_stage < 0 && !attached && nsp > 1
               ? (int)kt_rng_below(r, (uint64_t)nsp) + 1
               : 1;
    if (fuse > 1) {
        struct kt_step fu = step(KT_STEP_FUSE, s, 0);
        fu.n = fuse;
        apply(st, fu);
    }
    *attach_at = (int)kt_rng_below(r, (uint64_t)(nsp - fuse + 1));
}

/* Random splits under the bounds lim (per axis), then maybe a random
 * order and, at root, a fused parallel prefix. */
static void
tile_random(struct kt_state *st, struct kt_rng *r, int s, const int64_t *lim,
            int attached)
{
    int a, i;

    for (a = st->stages[s].naxes - 1; a >= 0; a--)
        split_random(st, r, s, a, lim[a], 3);
    if (kt_rng_unit(r) < 0.7) {
        struct kt_step re = step(KT_STEP_REORDER, s, 0);
        re.n = st->stages[s].niters;
        for (i = 0; i < re.n; i++)
            re.v[i] = i;
        shuffle(r, re.v, re.n);
        apply(st, re);
    }
    if (!attached && kt_rng_unit(r) < 0.5) {
        int k = 0;
        while (k < st->stages[s].niters && !st->stages[s].iters[k].reduce)
            k++;
        if (k >= 2) {
            struct kt_step fu = step(KT_STEP_FUSE, s, 0);
            fu.n = 2 + (int)kt_rng_below(r, (uint64_t)k - 1);
            apply(st, fu);
        }
    }
}

/* Tile: consumers get a two-level spatial tile with the producer's
 * attach point after the outer tiles; other stages random tiles. */
static void
random_tiles(struct kt_state *st, struct kt_rng *r, const int *attach_to,
             int *attach_at)
{
    int64_t tile[KT_MAX_STAGES][KT_MAX_AXES];
    int s, p, a;

    memset(tile, 0, sizeof(tile)); /* 0: the consumer has no tile there */

    for (s = st->nstages - 1; s >= 0; s--) {
        const struct kt_sstage *ss = &st->stages[s];
        int consumer = 0, nsp = ss->nspatial;
        if (ss->inlined)
            continue;
        for (p = 0; p < st->nstages; p++)
            if (attach_to[p] == s && !st->stages[p].is_pad &&
                !st->stages[p].cache_read)
                consumer = 1;
        if (attach_to[s] >= 0 && (ss->is_pad || ss->cache_read))
            continue; /* padding and packs stay unsplit: any region fits */
        if (consumer) {
            tile_consumer(st, r, s, attach_to[s] >= 0, tile[s], &attach_at[s]);
        } else if (ss->naxes > nsp && attach_to[s] < 0 &&
                   kt_rng_unit(r) < 0.25) {
            rfactor_shape(st, r, s);
        } else {
            int64_t lim[KT_MAX_AXES];
            for (a = 0; a < ss->naxes; a++)
                lim[a] = ss->axes[a].extent;
            if (attach_to[s] >= 0) {
                /* Inner lengths must tile the consumer's tile. */
                int c = attach_to[s];
                for (a = 0; a < nsp; a++)
                    if (tile[c][a] > 0)
                        lim[a] = tile[c][a];
            }
            tile_random(st, r, s, lim, attach_to[s] >= 0);
        }
    }
}

/* Parallel, vectorize, unroll and auto-unroll annotations, now and then. */
static void
random_annotations(struct kt_state *st, struct kt_rng *r)
{
    int s, i;

    for (s = 0; s < st->nstages; s++) {
        const struct kt_sstage *ss = &st->stages[s];
        int last = ss->niters - 1;
        if (ss->inlined)
            continue;
        if (ss->cache_read && kt_rng_unit(r) < 0.6)
            apply(st, step(KT_STEP_LAYOUT_REWRITE, s, 0)); /* weights only */
        if (ss->attach_stage < 0 && !ss->iters[0].reduce && kt_rng_unit(r) < 0.7)
            apply(st,
                  (struct kt_step){KT_STEP_ANNOTATE, s, 0, 0, {KT_ANN_PARALLEL}});
        if (last > 0 && kt_rng_unit(r) < 0.7)
            apply(st, (struct kt_step){KT_STEP_ANNOTATE,
                                       s,
                                       last,
                                       0,
                                       {KT_ANN_VECTORIZE}});
        for (i = last - 1; i >= 1 && i >= last - 2; i--)
            if (ss->iters[i].extent <= 16 && kt_rng_unit(r) < 0.5)
                apply(st, (struct kt_step){KT_STEP_ANNOTATE,
                                           s,
                                           i,
                                           0,
                                           {KT_ANN_UNROLL}});
        if (kt_rng_unit(r) < 0.5) {
            static const int steps[] = {0, 16, 64, 512};
            apply(st, (struct kt_step){KT_STEP_PRAGMA,
                                       s,
                                       0,
                                       0,
                                       {steps[kt_rng_below(r, 4)]}});
        }
    }
}

struct kt_state *
ktt_random_schedule(const struct kt_dag *dag, struct kt_rng *r)
{
    struct kt_state *st = kt_state_new(dag);
    int attach_to[KT_MAX_STAGES], attach_at[KT_MAX_STAGES];
    int s;

    random_cache_reads(st, r);
    /* Cache writes on reduction outputs, from the last stage down so that
     * inserted stages do not move the ones still to visit. */
    for (s = st->nstages - 1; s >= 0; s--) {
        const struct kt_sstage *ss = &st->stages[s];
        if (ss->op != KT_ASSIGN && !ss->is_pad && kt_rng_unit(r) < 0.4)
            apply(st, step(KT_STEP_CACHE_WRITE, s, 0));
    }
    /* Inline elementwise stages (padding included) now and then. */
    for (s = 0; s < st->nstages; s++) {
        const struct kt_sstage *ss = &st->stages[s];
        double pr = ss->is_pad ? 0.3 : ss->cache_read ? 0.1 : 0.5;
        if (ss->op == KT_ASSIGN &&
            st->tensors[ss->out].kind != KT_TENSOR_OUTPUT &&
            kt_rng_unit(r) < pr)
            apply(st, step(KT_STEP_COMPUTE_INLINE, s, 0));
    }
    random_attach_targets(st, r, attach_to);
    for (s = 0; s < KT_MAX_STAGES; s++)
        attach_at[s] = -1;
    random_tiles(st, r, attach_to, attach_at);
    /* Attach producers, readers first (a stage's other readers must be
     * in place before it attaches next to them). */
    for (s = st->nstages - 1; s >= 0; s--) {
        struct kt_step ca = step(KT_STEP_COMPUTE_AT, s, 0);
        int c = attach_to[s];
        if (c < 0)
            continue;
        ca.v[0] = c;
        /* a consumer left untiled (a pack that went into its own reader)
         * has no attach point of its own: any of its loops */
        if (st->stages[s].is_pad || st->stages[s].cache_read ||
            attach_at[c] < 0)
            ca.v[1] = (int)kt_rng_below(r, (uint64_t)st->stages[c].niters);
        else
            ca.v[1] = attach_at[c];
        apply(st, ca);
    }
    random_annotations(st, r);
    return st;
}
