/* search_pack.c - packing in the sketches and genomes (docs/search.md).
 *
 * Rule: a stage that gets multi-level tiling reads every input operand
 * indexed by a reduction axis (without padding guards) through a
 * cache_read "_pack" stage: first its vector operand (whose index also
 * moves with the innermost spatial axis: B of a GEMM, the weights
 * W[out, in] of a dense layer), then the others (A of a GEMM, a conv's
 * weights).  The genome decides per pack stage: 0 = no
 * pack (the copy is inlined back), 1 = packed inside the kernel at the
 * chosen consumer loop (panel packing), 2 = layout rewrite (the packed
 * tiles are built once by the pack routine; constant weights only).  A
 * pack with no good place in its consumer's loops is inlined. */
#include <stdint.h>
#include <string.h>

#include "scheduler/search_int.h"

/* 1 if some index of a load of t in e uses axis a. */
static int
load_uses_axis(const struct kt_expr *e, int t, int a, int *guarded)
{
    int d;

    if (e == NULL)
        return 0;
    if (e->op == KT_X_LOAD && e->src == t) {
        *guarded |= e->guarded;
        for (d = 0; d < e->ndim; d++)
            if (kt_aff_coef(&e->idx[d], a) != 0)
                return 1;
    }
    return load_uses_axis(e->a, t, a, guarded) ||
           load_uses_axis(e->b, t, a, guarded);
}

int
sk_padded_past_end(const struct kt_state *st, int t)
{
    const struct kt_sstage *ps;
    int p = st->tensors[t].producer, d;

    if (p < 0 || !st->stages[p].is_pad || st->stages[p].inlined)
        return 0;
    ps = &st->stages[p];
    for (d = 0; d < ps->body->ndim; d++)
        if (ps->body->idx[d].c != 0)
            return 0;
    return 1;
}

static int
input_or_padded(const struct kt_state *st, int t)
{
    return st->tensors[t].kind == KT_TENSOR_INPUT || sk_padded_past_end(st, t);
}

int
sk_pack_operand(const struct kt_state *st, int s)
{
    const struct kt_sstage *ss = &st->stages[s];
    int t, a, pass, last = -1;

    for (a = 0; a < ss->nspatial; a++)
        if (ss->axes[a].extent > 1)
            last = a;
    if (last < 0)
        return -1;
    /* The vector operand first, then the other operands (A of a GEMM,
     * the weights of a conv). */
    for (pass = 0; pass < 2; pass++)
        for (t = 0; t < st->ntensors; t++) {
            int guarded = 0, red = 0;
            if (!input_or_padded(st, t) ||
                (pass == 0 && !load_uses_axis(ss->body, t, last, &guarded)))
                continue;
            for (a = ss->nspatial; a < ss->naxes; a++)
                red |= load_uses_axis(ss->body, t, a, &guarded);
            if (red && !guarded)
                return t;
        }
    return -1;
}

/* The extent of iterator j over its parts whose axes do not index t: how
 * often it repeats the same copy of t (a fused parallel loop of batches and
 * row blocks repeats a batch's pack once per row block). */
static int64_t
iter_unindexed_extent(const struct kt_sstage *cs, int j, int t)
{
    int q, guarded = 0;
    int64_t e = 1;

    for (q = 0; q < cs->iters[j].nparts; q++) {
        const struct kt_part_ref *pr = &cs->iters[j].parts[q];
        if (!load_uses_axis(cs->body, t, pr->axis, &guarded))
            e *= cs->part_extent[pr->axis][pr->part];
    }
    return e;
}

/* Whether loop it runs the innermost tile level of one of its axes. */
static int
holds_innermost_level(const struct kt_sstage *cs, const struct kt_iter *it)
{
    int q;

    for (q = 0; q < it->nparts; q++)
        if (it->parts[q].part == cs->nparts[it->parts[q].axis] - 1)
            return 1;
    return 0;
}

/* Whether attach point j builds the same tile as an offered point further
 * out: no loop from that point's body down to j indexes t, so the tile is
 * the same there, built fewer times.  The best stored attention batch
 * matmul of 197 tokens transposed each batch's B inside a row-block loop,
 * 4 times over. */
static int
built_further_out(const struct kt_sstage *cs, int t, const int64_t *repeat,
                  int64_t bound, int j)
{
    int k;

    for (k = j; k > 0; k--) {
        if (iter_unindexed_extent(cs, k, t) != cs->iters[k].extent)
            return 0;
        if (repeat[k - 1] >= 0 && repeat[k - 1] <= bound)
            return 1;
    }
    return 0;
}

/* Whether axis a indexes t alone: no index of t that uses it uses
 * another axis (B[k, j]'s j; not a window's row oh + kh, whose tiles
 * overlap). */
static int
indexes_alone(const struct kt_sstage *cs, const struct kt_expr *e, int t, int a)
{
    int d, b, others;

    if (e == NULL)
        return 1;
    if (e->op == KT_X_LOAD && e->src == t)
        for (d = 0; d < e->ndim; d++) {
            if (kt_aff_coef(&e->idx[d], a) == 0)
                continue;
            for (others = 0, b = 0; b < cs->naxes; b++)
                others += b != a && kt_aff_coef(&e->idx[d], b) != 0;
            if (others > 0)
                return 0;
        }
    return indexes_alone(cs, e->a, t, a) && indexes_alone(cs, e->b, t, a);
}

/* The iterator a pack of t attached at loop j is copied outside of, as
 * the lowering hoists it (ir/lower_hoist.c): out of the loops that do not
 * index t, crossing those that do as separate tiles, up to (not across)
 * a parallel, vectorized or fused loop or the outermost loop of a root
 * reader (which may become parallel).  j + 1 when it stays at j. */
static int
hoisted_to(const struct kt_sstage *cs, int t, int j)
{
    int k, to = j + 1;

    for (k = j; k >= 0; k--) {
        const struct kt_iter *it = &cs->iters[k];
        if (it->extent <= 1)
            continue;
        if (it->ann == KT_ANN_PARALLEL || it->ann == KT_ANN_VECTORIZE ||
            it->nparts != 1 || (k == 0 && cs->attach_stage < 0))
            break;
        if (iter_unindexed_extent(cs, k, t) == it->extent)
            to = k;
        else if (!indexes_alone(cs, cs->body, t, it->parts[0].axis))
            break;
    }
    return to;
}

/* Where the pack of tensor t may be attached: loops of its consumer that
 * run no innermost tile level (a loop fused for parallel too), where the
 * packed tile is reused by an inner loop that does not index it and is
 * built at most 4 times over (loops outside that do not index t repeat
 * the same copy, and so do the parts of a fused loop that do not) - or,
 * when no loop is built that seldom, as seldom as any is (a pack inlined
 * instead may be gathered lane by lane); loops the lowering hoists the
 * copy out of do not repeat it.  A layout rewrite (rewrite !=
 * 0) builds every tile once, before the kernel, so no repeat bound
 * applies to it.  A point that only rebuilds an offered point's tile is
 * left out (built_further_out). */
static int
attach_points(const struct kt_sstage *cs, int t, int rewrite, int *cand,
              int64_t *least)
{
    int64_t repeat[KT_MAX_ITERS], bound = INT64_MAX;
    int j, k, n = 0, copied_at;

    for (j = 0; j < cs->niters; j++) {
        const struct kt_iter *it = &cs->iters[j];
        int64_t reuse = 1;
        repeat[j] = -1;
        if (it->extent <= 1 || holds_innermost_level(cs, it))
            continue;
        repeat[j] = 1;
        copied_at = hoisted_to(cs, t, j);
        for (k = 0; k < cs->niters; k++) {
            if (k < copied_at)
                repeat[j] *= iter_unindexed_extent(cs, k, t);
            else if (k > j)
                reuse *= iter_unindexed_extent(cs, k, t);
        }
        if (rewrite)
            repeat[j] = 1;
        if (reuse < 2)
            repeat[j] = -1;
        else if (repeat[j] < bound)
            bound = repeat[j];
    }
    *least = bound;
    if (bound < 4)
        bound = 4;
    for (j = 0; j < cs->niters; j++)
        if (repeat[j] >= 0 && repeat[j] <= bound &&
            !built_further_out(cs, t, repeat, bound, j))
            cand[n++] = j;
    return n;
}

int
sk_pack_attach_points(const struct kt_sstage *cs, int t, int rewrite, int *cand)
{
    int64_t least;

    return attach_points(cs, t, rewrite, cand, &least);
}

int
sk_pack_rebuilt_often(const struct kt_sstage *cs, int t)
{
    int cand[KT_MAX_ITERS];
    int64_t least;

    return attach_points(cs, t, 0, cand, &least) > 0 && least > 4;
}

static int
packs_weight(const struct kt_state *st, int i)
{
    const struct kt_sstage *ss = &st->stages[i];

    return ss->cache_read && ss->body->op == KT_X_LOAD &&
           st->tensors[ss->body->src].is_const;
}

/* 1 if every load of t in e reads its innermost dimension at one
 * reduction axis (coefficient 1, nothing else): rows read in order along
 * the reduction, like A[i, k] of a GEMM.  *any: some load was seen. */
static int
rows_along_reduction(const struct kt_expr *e, int t, int nspatial, int *any)
{
    if (e == NULL)
        return 1;
    if (e->op == KT_X_LOAD && e->src == t) {
        const struct kt_affine *in;
        *any = 1;
        if (e->ndim == 0)
            return 0;
        in = &e->idx[e->ndim - 1];
        if (in->n != 1 || in->k[0] != 1 || in->var[0] < nspatial)
            return 0;
    }
    return rows_along_reduction(e->a, t, nspatial, any) &&
           rows_along_reduction(e->b, t, nspatial, any);
}

/* Whether pack stage i copies an operand its consumer broadcasts from
 * rows it already reads in order along the reduction (A of a GEMM or of
 * an attention batch matmul): the vector operand was packed first (it is
 * the one read with a stride), so an in-kernel copy of this one costs a
 * transposing pass and saves little (measured on the 1024^3 GEMM and the
 * 12 x 128 x 128 x 64 batch matmul, docs/search.md). */
static int
packs_ordered_rows(const struct kt_state *st, int i)
{
    int j, any = 0;

    for (j = i + 1; j < st->nstages; j++)
        if (kt_expr_reads(st->stages[j].body, st->stages[i].out))
            return rows_along_reduction(st->stages[j].body, st->stages[i].out,
                                        st->stages[j].nspatial, &any) &&
                   any;
    return 0;
}

/* 1 if every load of tensor t in e indexes the dims where t is longer
 * than from (its padding) by spatial axes only (below nspatial). */
static int
pads_spatially(const struct kt_expr *e, int t, const struct kt_tensor *tt,
               const struct kt_tensor *from, int nspatial)
{
    int d, q;

    if (e == NULL)
        return 1;
    if (e->op == KT_X_LOAD && e->src == t)
        for (d = 0; d < e->ndim && d < tt->ndim; d++)
            for (q = 0; tt->shape[d] > from->shape[d] && q < e->idx[d].n; q++)
                if (e->idx[d].var[q] >= nspatial)
                    return 0;
    return pads_spatially(e->a, t, tt, from, nspatial) &&
           pads_spatially(e->b, t, tt, from, nspatial);
}

/* Whether pack stage i copies an operand padded past its end only (a
 * zero padding after the last row or column, none before the first)
 * along axes its consumer reads it by spatially: its bounds checks then
 * fail only in the consumer's last tile along such an axis, not along
 * the reduction (a convolution's window over a right-padded row). */
static int
padded_past_end_spatially(const struct kt_state *st, int i)
{
    const struct kt_expr *e = st->stages[i].body;
    const struct kt_tensor *out = &st->tensors[st->stages[i].out];
    int d, j;

    if (e->op != KT_X_LOAD || st->tensors[e->src].ndim != out->ndim)
        return 0;
    for (d = 0; d < e->ndim; d++)
        if (e->idx[d].c < 0)
            return 0;
    for (j = i + 1; j < st->nstages; j++)
        if (kt_expr_reads(st->stages[j].body, st->stages[i].out))
            return pads_spatially(st->stages[j].body, st->stages[i].out, out,
                                  &st->tensors[e->src], st->stages[j].nspatial);
    return 0;
}

static uint8_t
random_mode(const struct sk_sketch *sk, int i, struct kt_rng *r)
{
    const struct kt_state *st = sk->base;

    /* read along the vector axis with a stride: unpacked, every vector
     * would be gathered lane by lane; a copy of a zero-padded operand
     * (the padding inlined into the pack): inlined back, every read in
     * the hot loop would check its bounds (a padding kept as its own
     * buffer may be read in place).  Except, half the time, an operand
     * broadcast from rows read in order along the reduction: its checks
     * are on the register tile's rows, the same for the whole reduction
     * run, and the compiler moves them out of it (the ViT attention
     * scores, A's rows padded 197 -> 200, read in place: 105.2 GFLOPS on
     * 1 thread against 102.7 packed, AMD Zen 4, docs/performance.md) */
    if (!sk->plan[i].pack_needed && st->stages[i].body->guarded &&
        packs_ordered_rows(st, i) && kt_rng_below(r, 2) == 0)
        return 0;
    /* ... and half the time, an operand padded past its end along
     * spatial axes only (B of a product whose columns no vector
     * divides): in place, its checks fail in the last tile only, which
     * the code generator emits apart (codegen_peel.c), and the copy is
     * saved.  40 x 120 -> 6625 classes, B an input: 215.0 GFLOPS read in
     * place against 182.5 packed per 64 columns, 1 thread, Zen 5
     * (docs/performance.md). */
    if (!sk->plan[i].pack_needed && st->stages[i].body->guarded &&
        !packs_weight(st, i) && !packs_ordered_rows(st, i) &&
        padded_past_end_spatially(st, i) && kt_rng_below(r, 2) == 0)
        return 0;
    if (sk->plan[i].pack_needed || st->stages[i].body->guarded)
        return (uint8_t)(packs_weight(st, i) && kt_rng_below(r, 4) != 0 ? 2
                                                                        : 1);
    if (packs_weight(st, i)) /* weights: mostly rewritten */
        return (uint8_t)(kt_rng_below(r, 4) < 2 ? 2 : kt_rng_below(r, 2));
    if (packs_ordered_rows(st, i)) /* mostly read in place */
        return (uint8_t)(kt_rng_below(r, 4) == 0);
    return (uint8_t)kt_rng_below(r, 2);
}

void
sk_pack_sample(const struct sk_sketch *sk, struct kt_rng *r,
               struct sk_genome *g)
{
    int i;

    for (i = 0; i < sk->base->nstages; i++) {
        if (!sk->base->stages[i].cache_read)
            continue;
        g->pack[i] = random_mode(sk, i, r);
        if (g->pack[i] != 0 && g->loc[i] == 0)
            g->loc[i] = (uint8_t)(1 + kt_rng_below(r, 64));
    }
}

int
sk_pack_mutate(const struct sk_sketch *sk, struct kt_rng *r,
               struct sk_genome *g)
{
    int cand[KT_MAX_STAGES], n = 0, i;
    uint8_t v;

    for (i = 0; i < sk->base->nstages; i++)
        if (sk->base->stages[i].cache_read && !sk->base->stages[i].inlined)
            cand[n++] = i;
    if (n == 0)
        return -1;
    i = cand[kt_rng_below(r, (uint64_t)n)];
    v = random_mode(sk, i, r);
    if (v == g->pack[i])
        return -1;
    g->pack[i] = v;
    return 0;
}
