/* search_sketch.c - sketch generation (Ansor's CPU sketch rules); the
 * builder that turns a genome into a state is search_build.c.
 *
 * Rules, tried for each stage from the last to the first (docs/search.md, Sketches):
 * AlwaysInline (elementwise, not an output: inlined; padding stages and
 * expensive stages with several readers are both inlined and, in a second
 * set of sketches, kept as a stage),
 * then for stages that need multi-level tiling (a reduction with data
 * reuse) MultiLevelTilingWithFusion (a sole elementwise consumer reading
 * the stage at identity indexes: fused at level 1 or 2), AddCacheWrite
 * (no such consumer: a "_local" stage fused into the copy at level 1 or 2)
 * and MultiLevelTiling (no fusion); other stages are skipped.  Each tiling
 * exists in two loop orders: Ansor's "SSRSRS" and "SRSRS", whose order
 * j0 k0 i1 k1 i2 j2 (with i0 = 1) keeps a k-panel of B in cache for GEMM.
 * A reduction read contiguously along its innermost reduction axis but
 * gathered along its innermost spatial one (dense with weights [out, in],
 * softmax) also gets the rfactor sketch "SSRSR" with that reduction part
 * vectorized into lane accumulators (docs/search.md). */
#include <stdio.h>
#include <string.h>

#include "scheduler/search_int.h"

const char *const sk_structures[] = {"SSRSRS", "SRSRS", "SSRSR"};

/* Vector lanes that fill the widest vector register (64 bytes). */
#define SK_WIDE_LANES 16
const int sk_unroll_values[4] = {0, 16, 64, 512};
/* Expanding 4 steps of a GEMM's reduction loop around its 8 x 32 register
 * tile ran 1.03x-1.05x faster on an Intel Xeon with two 512-bit FMA ports;
 * 8 steps no faster than 4 (and twice the compiler's time), 2 no faster
 * than none (docs/search.md). */
const int sk_red_unroll_values[SK_RED_UNROLLS] = {1, 4};

/* ---- DAG analysis on a state ------------------------------------------- */

int
sk_sole_reader(const struct kt_state *st, int p)
{
    int c, found = -1;

    for (c = 0; c < st->nstages; c++) {
        if (c == p || st->stages[c].inlined ||
            !kt_expr_reads(st->stages[c].body, st->stages[p].out))
            continue;
        if (found >= 0)
            return -2;
        found = c;
    }
    return found;
}

/* The reader stage p can be computed at when it has several readers: the
 * one every other reader has as its sole reader (softmax's exp, read by
 * the row sum and by the output, which also reads the sum: the output);
 * -1 if none. */
static int
final_reader(const struct kt_state *st, int p)
{
    int c, r, final = -1;

    for (c = 0; c < st->nstages && final < 0; c++) {
        if (c == p || st->stages[c].inlined ||
            !kt_expr_reads(st->stages[c].body, st->stages[p].out))
            continue;
        final = c;
        for (r = 0; r < st->nstages; r++)
            if (r != p && r != c && !st->stages[r].inlined &&
                kt_expr_reads(st->stages[r].body, st->stages[p].out) &&
                sk_sole_reader(st, r) != c)
                final = -1;
    }
    return final;
}

static int
has_expensive_op(const struct kt_expr *e)
{
    if (e == NULL)
        return 0;
    if (e->op == KT_X_EXP || e->op == KT_X_LOG || e->op == KT_X_TANH ||
        e->op == KT_X_SIGMOID || e->op == KT_X_SQRT)
        return 1;
    return has_expensive_op(e->a) || has_expensive_op(e->b);
}

/* An elementwise stage also kept as a stage, in a second set of sketches:
 * padding (inlined, its guarded reads sit in the consumer's innermost
 * loop, per-lane gathers when vectorized; at root or attached, the hot
 * loop reads a padded buffer with no bounds checks), and a stage with an
 * expensive operator read by several stages (inlined, each reader
 * recomputes it: softmax's exp twice per element; kept, once into a row
 * buffer that the row sum and the output both read). */
static int
also_kept(const struct kt_state *st, int s)
{
    return st->stages[s].is_pad || (has_expensive_op(st->stages[s].body) &&
                                    sk_sole_reader(st, s) == -2);
}

static int
is_output(const struct kt_state *st, int s)
{
    return st->tensors[st->stages[s].out].kind == KT_TENSOR_OUTPUT;
}

static int
is_elementwise(const struct kt_sstage *ss)
{
    return ss->naxes == ss->nspatial && ss->op == KT_ASSIGN;
}

/* Bit mask of the axis variables used by the loads of e. */
static void
load_masks(const struct kt_expr *e, int *any_missing, int nspatial,
           const struct kt_sstage *ss)
{
    int d, i, a;

    if (e == NULL)
        return;
    if (e->op == KT_X_LOAD) {
        uint32_t used = 0;
        for (d = 0; d < e->ndim; d++)
            for (i = 0; i < e->idx[d].n; i++)
                if (e->idx[d].k[i] != 0 && e->idx[d].var[i] < 32)
                    used |= 1u << e->idx[d].var[i];
        for (a = 0; a < nspatial; a++)
            if (ss->axes[a].extent > 1 && !(used & (1u << a)))
                *any_missing = 1;
    }
    load_masks(e->a, any_missing, nspatial, ss);
    load_masks(e->b, any_missing, nspatial, ss);
}

/* A reduction with data reuse: some read does not depend on some spatial
 * axis (matmul, conv, dense; not pooling or softmax's reductions). */
static int
needs_mlt(const struct kt_sstage *ss)
{
    int missing = 0;

    if (ss->is_pad || ss->inlined || ss->op == KT_ASSIGN ||
        ss->naxes == ss->nspatial)
        return 0;
    load_masks(ss->body, &missing, ss->nspatial, ss);
    return missing;
}

/* SpatialVector: a reduction without data reuse (pooling) that rfactor
 * does not vectorize (a window of 3 x 3 or 7 x 7: short innermost
 * reduction) and whose last spatial axis has 16 points or more is also
 * tiled (the plain multi-level tiling), so its innermost spatial tile is
 * vectorized under the reduction loops with the accumulators in
 * registers; untiled, its innermost loop is a reduction and nothing is
 * vectorized. */
static int
wants_spatial_tiles(const struct kt_sstage *ss)
{
    int a, last = -1;

    if (ss->is_pad || ss->inlined || ss->op == KT_ASSIGN ||
        ss->naxes == ss->nspatial)
        return 0;
    for (a = 0; a < ss->nspatial; a++)
        if (ss->axes[a].extent > 1)
            last = a;
    return last >= 0 && ss->axes[last].extent >= SK_WIDE_LANES;
}

static int
identity_loads(const struct kt_expr *e, int t, int ndim)
{
    int d;

    if (e == NULL)
        return 1;
    if (e->op == KT_X_LOAD && e->src == t) {
        if (e->ndim != ndim)
            return 0;
        for (d = 0; d < ndim; d++)
            if (e->idx[d].c != 0 || e->idx[d].n != 1 || e->idx[d].var[0] != d ||
                e->idx[d].k[0] != 1)
                return 0;
    }
    return identity_loads(e->a, t, ndim) && identity_loads(e->b, t, ndim);
}

/* The elementwise consumer stage p can be fused into, or -1. */
static int
fusable_consumer(const struct kt_state *st, int p)
{
    const struct kt_sstage *ps = &st->stages[p], *cs;
    int c = sk_sole_reader(st, p), a;

    if (c < 0)
        return -1;
    cs = &st->stages[c];
    if (!is_elementwise(cs) || cs->nspatial != ps->nspatial)
        return -1;
    for (a = 0; a < ps->nspatial; a++)
        if (cs->axes[a].extent != ps->axes[a].extent)
            return -1;
    return identity_loads(cs->body, ps->out, ps->nspatial) ? c : -1;
}

/* Scans the loads of e (of tensor t; every tensor for t < 0) along axis
 * a: sets *bcast for a load that does not move along a; ors into *bad 1
 * for one that moves with a stride other than 1 through the pack of a
 * constant weight (a pack can lay it out contiguously), 2 for any other
 * such load. */
static void
scan_axis(const struct kt_state *st, const struct kt_expr *e, int a, int t,
          int *bcast, int *bad)
{
    if (e == NULL)
        return;
    if (e->op == KT_X_LOAD && (t < 0 || e->src == t)) {
        const struct kt_tensor *x = &st->tensors[e->src];
        int64_t c = kt_load_flat_coef(e, x->shape, a);
        int p = x->producer;
        int repackable = p >= 0 && st->stages[p].cache_read &&
                         st->stages[p].body->op == KT_X_LOAD &&
                         st->tensors[st->stages[p].body->src].is_const;
        if (c == 0)
            *bcast = 1;
        else if (c != 1)
            *bad |= repackable ? 1 : 2;
    }
    scan_axis(st, e->a, a, t, bcast, bad);
    scan_axis(st, e->b, a, t, bcast, bad);
}

/* Whether a load of tensor t in stage s moves along spatial axis a with a
 * stride other than 0 and 1. */
static int
strided_along(const struct kt_state *st, int s, int t, int a)
{
    int bcast = 0, bad = 0;

    scan_axis(st, st->stages[s].body, a, t, &bcast, &bad);
    return bad != 0;
}

/* ChannelVector: a spatial axis other than the last that the register
 * tile of stage s should vectorize instead, or -1.  Only when the last
 * axis cannot fill wide vectors with contiguous loads (its extent is no
 * multiple of 16 lanes or some load reads it with a stride: a conv's
 * output width, 56 or 28 wide, stride 2) and the other axis can: a
 * multiple of 16, some operand does not move along it (broadcast, the
 * reuse of a register tile) and every operand that does is read
 * contiguously or is a pack of a constant weight (the pack lays it out
 * contiguously: a conv's output channels over W[f, c, r, s]). */
static int
channel_vector_axis(const struct kt_state *st, int s)
{
    const struct kt_sstage *ss = &st->stages[s];
    int last = -1, a, bcast = 0, bad = 0;

    for (a = 0; a < ss->nspatial; a++)
        if (ss->axes[a].extent > 1)
            last = a;
    if (last < 0)
        return -1;
    scan_axis(st, ss->body, last, -1, &bcast, &bad);
    if (ss->axes[last].extent % SK_WIDE_LANES == 0 && bad == 0)
        return -1;
    for (a = last - 1; a >= 0; a--) {
        if (ss->axes[a].extent % SK_WIDE_LANES != 0)
            continue;
        bcast = bad = 0;
        scan_axis(st, ss->body, a, -1, &bcast, &bad);
        if (bcast && bad < 2)
            return a;
    }
    return -1;
}

/* Whether the last spatial axis of stage s fills the target's vectors
 * with contiguous reads (AVX2: 8 lanes, a conv's output width of 56 does;
 * AVX-512: 16 lanes, it does not). */
static int
last_axis_fills_vectors(const struct kt_search *s, const struct kt_state *st,
                        int stage)
{
    const struct kt_sstage *ss = &st->stages[stage];
    int64_t lanes = s->o.vector_bytes >= 16 ? s->o.vector_bytes / 4 : 4;
    int last = -1, a, bcast = 0, bad = 0;

    for (a = 0; a < ss->nspatial; a++)
        if (ss->axes[a].extent > 1)
            last = a;
    if (last < 0)
        return 1;
    scan_axis(st, ss->body, last, -1, &bcast, &bad);
    return ss->axes[last].extent % lanes == 0 && bad == 0;
}

int
sk_vector_axis(const struct kt_sstage *ss, const struct sk_plan *p)
{
    int a, last = -1;

    if (p->vec_axis1 > 0)
        return p->vec_axis1 - 1;
    for (a = 0; a < ss->nspatial; a++)
        if (ss->axes[a].extent > 1)
            last = a;
    return last;
}

/* ---- sketch generation ------------------------------------------------- */

struct gen {
    struct kt_search *s;
    int overflow;
};

static void
finish(struct gen *G, struct kt_state *st, struct sk_plan *plan,
       const char *desc)
{
    struct kt_search *s = G->s;
    struct sk_sketch *k;
    int i, nslots = 0;

    if (s->nsketches == SK_MAX_SKETCHES) {
        G->overflow = 1;
        return;
    }
    k = &s->sk[s->nsketches];
    memset(k, 0, sizeof(*k));
    memcpy(k->plan, plan, sizeof(k->plan));
    for (i = 0; i < st->nstages; i++) {
        struct sk_plan *p = &k->plan[i];
        p->has_reduce = st->stages[i].naxes > st->stages[i].nspatial;
        if (st->stages[i].inlined) {
            p->role = SK_INLINED;
            continue;
        }
        if (p->role == SK_MLT) {
            if (nslots == SK_MAX_MLT) {
                p->role = SK_PLAIN; /* too many: leave untiled */
                p->partner = -1;
            } else {
                p->slot = nslots;
                k->slot_stage[nslots++] = i;
            }
        }
        if (p->role == SK_PLAIN && !is_output(st, i)) {
            int c = sk_sole_reader(st, i);
            if (c == -2)
                c = final_reader(st, i);
            if (c >= 0) {
                p->may_move = 1;
                p->consumer = c;
            }
        }
    }
    k->nslots = nslots;
    k->base = kt_state_clone(st);
    snprintf(k->desc, sizeof(k->desc), "%s", desc[0] ? desc : "plain");
    s->nsketches++;
}

static void gen_stage(struct gen *G, struct kt_state *st, struct sk_plan *plan,
                      int s, const char *desc);

static void
with_desc(char *out, size_t n, const char *desc, const char *one)
{
    if (snprintf(out, n, "%s%s%s", desc, desc[0] ? "; " : "", one) >= (int)n)
        out[n - 1] = '\0'; /* a description, cut */
}

/* Plans MLT for stage s of st, fused into consumer c at levels 1 and 2
 * (c >= 0) or not fused (c < 0), in every loop structure. */
static void
plan_mlt(struct gen *G, struct kt_state *st, struct sk_plan *plan, int s, int c,
         const char *desc, int cw, int vec_axis)
{
    struct sk_plan p2[KT_MAX_STAGES];
    char d2[256], one[192], vec[48] = "";
    int structure, level, t, packed_axis = vec_axis;

    if (packed_axis < 0) /* the last spatial axis (sk_vector_axis) */
        for (t = 0; t < st->stages[s].nspatial; t++)
            if (st->stages[s].axes[t].extent > 1)
                packed_axis = t;
    if (vec_axis >= 0)
        snprintf(vec, sizeof(vec), ", vector %s",
                 st->stages[s].axes[vec_axis].name);
    for (structure = 0; structure < SK_NSTRUCT_MLT; structure++) {
        for (level = c >= 0 ? 1 : 0; level <= (c >= 0 ? 2 : 0); level++) {
            memcpy(p2, plan, sizeof(p2));
            p2[s].role = SK_MLT;
            p2[s].structure = structure;
            p2[s].partner = c;
            p2[s].level = level;
            p2[s].vec_axis1 = vec_axis + 1;
            /* an operand read along the vectorized axis with a stride
             * (K^T of an attention batch matmul, a conv's weights under
             * ChannelVector) is always packed: inlined, every vector of
             * it is gathered lane by lane */
            for (t = 0; t < s; t++)
                p2[t].pack_needed = packed_axis >= 0 &&
                                    st->stages[t].cache_read &&
                                    strided_along(st, s, st->stages[t].out,
                                                  packed_axis);
            if (c >= 0) {
                p2[c].role = SK_FOLLOW;
                p2[c].partner = s;
                p2[c].level = level;
            }
            if (c >= 0)
                snprintf(one, sizeof(one), "%s: %s%s, fused at level %d%s",
                         st->stages[s].name, cw ? "cache_write, " : "",
                         sk_structures[structure], level, vec);
            else
                snprintf(one, sizeof(one), "%s: %s%s", st->stages[s].name,
                         sk_structures[structure], vec);
            with_desc(d2, sizeof(d2), desc, one);
            gen_stage(G, st, p2, s - 1, d2);
        }
    }
}

/* The tilings of rule 2 for stage s: the plain ones (the last axis
 * vectorized) when plain, the ChannelVector ones when vec >= 0.  Where the
 * last axis gives narrower or gathered vectors, ChannelVector replaces the
 * plain tilings: conv1x1 (56 wide) tuned at 200 trials spent 132 trials on
 * them and its best, a plain 16 x 8-lane tile (0.602 ms), ran 0.87x the
 * channel-vector 8 x 16-lane tile an earlier run found (0.512 ms) on 1
 * thread in the same process; every conv of the suite whose best is known
 * (both stops) is channel-vectorized. */
static void
plan_mlt_kinds(struct gen *G, struct kt_state *st, struct sk_plan *plan, int s,
               int c, const char *desc, int cw, int vec, int plain)
{
    if (plain)
        plan_mlt(G, st, plan, s, c, desc, cw, -1);
    if (vec >= 0)
        plan_mlt(G, st, plan, s, c, desc, cw, vec);
}

/* Ors into *unit whether some load reads axis r with unit stride and into
 * *gather whether some load reads axis sp with a stride other than 0, 1. */
static void
scan_strides(const struct kt_state *st, const struct kt_expr *e, int r, int sp,
             int *unit, int *gather)
{
    int64_t c;

    if (e == NULL)
        return;
    if (e->op == KT_X_LOAD) {
        const int64_t *shape = st->tensors[e->src].shape;
        *unit |= kt_load_flat_coef(e, shape, r) == 1;
        c = sp >= 0 ? kt_load_flat_coef(e, shape, sp) : 0;
        *gather |= c != 0 && c != 1;
    }
    scan_strides(st, e->a, r, sp, unit, gather);
    scan_strides(st, e->b, r, sp, unit, gather);
}

/* AddCacheWrite pays only when the reduction is longer than one run of
 * a register tile may be (max_innermost_reduce): the tile's partial sums
 * then leave the registers between reduction parts and a compact local
 * tile holds them.  A shorter reduction (a batch matmul over a head size
 * of 64) can run whole inside the tile, which then writes each output
 * once; the local copy only adds a pass over the output, and its four
 * sketches took most samples from the two without it (bmm_attn: the best
 * of 200 trials was a cache-write 8 x 16 tile, 0.88x-0.92x oneDNN on 1
 * thread; the same tile without the copy, by hand, 0.98x-1.06x in the
 * same runs). */
static int
reduction_fits_register_run(const struct kt_search *s,
                            const struct kt_sstage *ss)
{
    int64_t total = 1;
    int a;

    for (a = ss->nspatial; a < ss->naxes; a++)
        total *= ss->axes[a].extent;
    return total <= s->o.max_innermost_reduce;
}

#define SK_RF_MIN_EXTENT 16

/* A reduction whose innermost reduction axis is read contiguously while
 * vectorizing its innermost spatial axis would gather lane by lane (GEMV,
 * dense with weights [out, in], softmax, global pooling): worth the
 * rfactor sketch, which vectorizes the reduction instead. */
static int
wants_rfactor(const struct kt_state *st, int s)
{
    const struct kt_sstage *ss = &st->stages[s];
    int r = ss->naxes - 1, sp, unit = 0, gather = 0;

    if (ss->is_pad || ss->inlined || ss->op == KT_ASSIGN ||
        ss->naxes == ss->nspatial || ss->axes[r].extent < SK_RF_MIN_EXTENT ||
        ss->axes[r].extent % 4 != 0)
        return 0;
    for (sp = ss->nspatial - 1; sp >= 0 && ss->axes[sp].extent <= 1; sp--)
        ;
    scan_strides(st, ss->body, r, sp, &unit, &gather);
    return unit && (gather || sp < 0);
}

/* The rfactor sketch of stage s, unfused and, when it has a fusable
 * elementwise consumer c, fused into c's outer tile (one parallel loop for
 * both, the reduction's outputs in a local tile). */
static void
plan_rfactor(struct gen *G, struct kt_state *st, const struct sk_plan *plan,
             int s, int c, const char *desc)
{
    struct sk_plan p2[KT_MAX_STAGES];
    char d2[160], one[96];
    int fused;

    for (fused = 0; fused <= (c >= 0); fused++) {
        memcpy(p2, plan, sizeof(p2));
        p2[s].role = SK_MLT;
        p2[s].structure = SK_STRUCT_RF;
        p2[s].partner = fused ? c : -1;
        p2[s].level = fused;
        if (fused) {
            p2[c].role = SK_FOLLOW;
            p2[c].partner = s;
            p2[c].level = 1;
        }
        snprintf(one, sizeof(one), "%s: rfactor %s%s", st->stages[s].name,
                 sk_structures[SK_STRUCT_RF],
                 fused ? ", fused at level 1" : "");
        with_desc(d2, sizeof(d2), desc, one);
        gen_stage(G, st, p2, s - 1, d2);
    }
}

/* The plans of a state with a stage inserted at s (a pack or a cache
 * write's local stage): later plans move up one, and so do the stage
 * numbers they hold (a fused stage's partner, planned before: stages are
 * planned last to first). */
static void
plans_with_stage_at(const struct sk_plan *plan, int s, struct sk_plan *p2)
{
    int i;

    memset(p2, 0, sizeof(*p2) * KT_MAX_STAGES);
    memcpy(p2, plan, sizeof(*plan) * (size_t)s);
    memcpy(p2 + s + 1, plan + s,
           sizeof(*plan) * (size_t)(KT_MAX_STAGES - s - 1));
    p2[s].partner = -1;
    for (i = 0; i < KT_MAX_STAGES; i++)
        if (i != s && p2[i].partner >= s)
            p2[i].partner++;
}

static void
gen_stage(struct gen *G, struct kt_state *st, struct sk_plan *plan, int s,
          const char *desc)
{
    struct kt_step step;
    char err[256], one[48], kept[160];

    if (G->overflow)
        return;
    if (s < 0) {
        finish(G, st, plan, desc);
        return;
    }
    memset(&step, 0, sizeof(step));
    step.stage = s;
    /* AlwaysInline (a pack is kept: the genome inlines it or not) */
    if (is_elementwise(&st->stages[s]) && !is_output(st, s) &&
        !st->stages[s].cache_read) {
        struct kt_state *c = kt_state_clone(st);
        step.kind = KT_STEP_COMPUTE_INLINE;
        if (kt_state_apply(c, &step, err, sizeof(err)) == KT_OK) {
            plan[s].role = SK_INLINED;
            gen_stage(G, c, plan, s - 1, desc);
            kt_state_free(c);
            if (!also_kept(st, s))
                return;
            snprintf(one, sizeof(one), "%s kept", st->stages[s].name);
            with_desc(kept, sizeof(kept), desc, one);
            desc = kept;
        } else {
            kt_state_free(c);
        }
    }
    if (needs_mlt(&st->stages[s]) && sk_pack_operand(st, s) >= 0) {
        /* AddCacheRead: the next operand through a "_pack" stage
         * inserted at s; the stage itself moves to s + 1. */
        struct kt_state *cr = kt_state_clone(st);
        step.kind = KT_STEP_CACHE_READ;
        step.v[0] = sk_pack_operand(st, s);
        if (kt_state_apply(cr, &step, err, sizeof(err)) == KT_OK) {
            struct sk_plan p2[KT_MAX_STAGES];
            char d2[160];
            plans_with_stage_at(plan, s, p2);
            with_desc(d2, sizeof(d2), desc, cr->stages[s].name);
            gen_stage(G, cr, p2, s + 1, d2);
            kt_state_free(cr);
            return;
        }
        kt_state_free(cr);
        step.v[0] = 0;
    }
    if (needs_mlt(&st->stages[s])) {
        int c = fusable_consumer(st, s), vec = channel_vector_axis(st, s);
        int plain = vec < 0 || last_axis_fills_vectors(G->s, st, s);
        if (c >= 0) {
            plan_mlt_kinds(G, st, plan, s, c, desc, 0, vec, plain);
        } else if (!reduction_fits_register_run(G->s, &st->stages[s])) {
            /* AddCacheWrite: the local stage is fused into the copy. */
            struct kt_state *cw = kt_state_clone(st);
            step.kind = KT_STEP_CACHE_WRITE;
            if (kt_state_apply(cw, &step, err, sizeof(err)) == KT_OK) {
                struct sk_plan p2[KT_MAX_STAGES];
                plans_with_stage_at(plan, s, p2);
                plan_mlt_kinds(G, cw, p2, s, s + 1, desc, 1, vec, plain);
            }
            kt_state_free(cw);
        }
        plan_mlt_kinds(G, st, plan, s, -1, desc, 0, vec, plain);
        if (wants_rfactor(st, s))
            plan_rfactor(G, st, plan, s, c, desc);
        return;
    }
    if (wants_rfactor(st, s))
        plan_rfactor(G, st, plan, s, fusable_consumer(st, s), desc);
    else if (wants_spatial_tiles(&st->stages[s]))
        plan_mlt(G, st, plan, s, -1, desc, 0, -1);
    /* SkipStage */
    plan[s].role = SK_PLAIN;
    plan[s].partner = -1;
    gen_stage(G, st, plan, s - 1, desc);
}

int
sk_generate(struct kt_search *s, char *err, size_t errlen)
{
    struct gen G = {s, 0};
    struct sk_plan plan[KT_MAX_STAGES];
    struct kt_state *st = kt_state_new(s->dag);
    int i;

    memset(plan, 0, sizeof(plan));
    for (i = 0; i < KT_MAX_STAGES; i++)
        plan[i].partner = -1;
    gen_stage(&G, st, plan, st->nstages - 1, "");
    kt_state_free(st);
    if (s->nsketches == 0)
        return kt_seterr(err, errlen, KT_ESCHEDULE,
                         "%s: no sketch could be "
                         "generated",
                         s->dag->key ? s->dag->key : "dag");
    return KT_OK;
}

void
sk_free_sketches(struct kt_search *s)
{
    int i;

    for (i = 0; i < s->nsketches; i++)
        kt_state_free(s->sk[i].base);
    s->nsketches = 0;
}
