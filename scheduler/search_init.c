/* search_init.c - the init rules: random exact tile factorizations with a
 * bound on the innermost factor, register-blocked tiles, compute
 * location, parallel depth, vectorize and the unroll genes (the mutation
 * rules are in search_mutate.c). */
#include <stdlib.h>
#include <string.h>

#include "scheduler/search_int.h"

#define SK_MAX_FACTORS 200000

/* ---- factorization tables ---------------------------------------------- */

static void
enum_factors(struct sk_factors *f, int32_t *cur, int pos, int64_t rest,
             int64_t maxin)
{
    int64_t d;

    if (f->count >= SK_MAX_FACTORS)
        return;
    if (pos == 0) {
        cur[0] = (int32_t)rest;
        memcpy(&f->v[(size_t)f->count * (size_t)f->n], cur,
               sizeof(*cur) * (size_t)f->n);
        f->count++;
        return;
    }
    for (d = 1; d <= rest; d++) {
        if (rest % d != 0 || (pos == f->n - 1 && d > maxin))
            continue;
        cur[pos] = (int32_t)d;
        enum_factors(f, cur, pos - 1, rest / d, maxin);
    }
}

static int64_t
count_factors(int64_t rest, int pos, int n, int64_t maxin, int64_t cap)
{
    int64_t d, c = 0;

    if (pos == 0)
        return 1;
    for (d = 1; d <= rest && c < cap; d++)
        if (rest % d == 0 && !(pos == n - 1 && d > maxin))
            c += count_factors(rest / d, pos - 1, n, maxin, cap);
    return c;
}

static struct sk_factors *
get_factors(struct kt_search *s, int64_t extent, int n, int64_t maxin)
{
    struct sk_factors *f;
    int32_t cur[SK_MAXP];
    int64_t cnt;
    int i;

    for (i = 0; i < s->nfac; i++)
        if (s->facs[i]->extent == extent && s->facs[i]->n == n &&
            s->facs[i]->maxin == maxin)
            return s->facs[i];
    f = kt_xcalloc(1, sizeof(*f));
    f->extent = extent;
    f->n = n;
    f->maxin = maxin;
    cnt = count_factors(extent, n - 1, n, maxin, SK_MAX_FACTORS);
    if (cnt > SK_MAX_FACTORS)
        cnt = SK_MAX_FACTORS;
    f->v = kt_xcalloc((size_t)(cnt ? cnt : 1) * (size_t)n, sizeof(int32_t));
    enum_factors(f, cur, n - 1, extent, maxin);
    if (s->nfac == s->capfac) {
        s->capfac = s->capfac ? 2 * s->capfac : 16;
        s->facs = kt_xrealloc(s->facs, sizeof(*s->facs) * (size_t)s->capfac);
    }
    s->facs[s->nfac++] = f;
    return f;
}

int
sk_nparts(const struct sk_plan *p, int reduce)
{
    const char *c = sk_structures[p->structure];
    int n = 0;

    for (; *c; c++)
        n += (*c == 'R') == reduce;
    return n;
}

static int64_t widest_lanes(const struct kt_search *s);

/* An rfactor's innermost reduction part is one run of vectors folded
 * into a few lane accumulators per row (KT_CG_MAX_ACC_SPLIT), so it may
 * run longer than a spatial tile: dense_b1's GEMV (3072 x 768) ran at
 * 42-44 GFLOPS on 1 thread with runs of 256 against 40-41 with 64, each
 * row's weights read in longer streams (docs/performance.md). */
#define SK_RF_RUN_VECTORS 16

/* An axis of whole vectors whose count 2, 3 and 4 do not divide tiles
 * only 1 vector wide within max_innermost_factor (6640 lanes, 415
 * vectors = 5 x 83; 112 pixels, 7 vectors): each step of such a tile
 * loads 1 vector and broadcasts one scalar per accumulator.  Its
 * smallest run of 5 to SK_WIDE_RUN_VECTORS vectors may run innermost too
 * (lanes of it; 0 when the axis has none). */
#define SK_WIDE_RUN_VECTORS 8

static int64_t
wide_run_lanes(const struct kt_search *s, int64_t extent)
{
    int64_t lanes = widest_lanes(s), vectors = extent / lanes, w;

    if (extent % lanes != 0 || vectors % 2 == 0 || vectors % 3 == 0)
        return 0;
    for (w = 5; w <= SK_WIDE_RUN_VECTORS; w++)
        if (vectors % w == 0)
            return w * lanes;
    return 0;
}

/* The bound on the innermost part of axis a of a tiled stage: the
 * reduction part around the register tile of a multi-level tiling may run
 * longer (each accumulator is loaded and stored once per pass over it:
 * GEMM 1024^3 with an 8 x 64 tile ran at 81 GFLOPS with 64 of k inside,
 * 100 with 256), up to the whole k of that GEMM (max_reduce_run): its
 * 8 x 32 tile over all 1024 steps of k, B packed per 32 columns, ran at
 * 1.01x / 1.00x-1.06x oneDNN on 1 / 2 threads where 256 steps ran at
 * 0.96x (docs/performance.md); an rfactor's innermost reduction part is
 * its run of lane vectors (SK_RF_RUN_VECTORS).  An
 * axis no full vector divides (the 197 tokens of a ViT's attention, a
 * prime; CLIP's 77; an rfactor's reduction of 300) may run whole inside
 * when its register tile can hold it: within the bound it could only be
 * 1 wide, or 7 or 11, where 197 lanes are 14 vectors and 77 are 7
 * (kt_vector_chunks). */
static int64_t
innermost_bound(const struct kt_search *s, const struct sk_plan *p,
                const struct kt_axis *ax)
{
    int64_t bound = s->o.max_innermost_factor;

    if (ax->reduce && p->structure != SK_STRUCT_RF)
        return s->o.max_reduce_run;
    if (ax->reduce && bound < SK_RF_RUN_VECTORS * widest_lanes(s))
        bound = SK_RF_RUN_VECTORS * widest_lanes(s);
    /* Whole extents are a separate bound: the larger of the two holds. */
    if (ax->extent > bound && ax->extent % widest_lanes(s) != 0 &&
        ax->extent <= sk_register_tile_limit(s))
        bound = ax->extent;
    if (!ax->reduce && bound < wide_run_lanes(s, ax->extent))
        bound = wide_run_lanes(s, ax->extent);
    return bound;
}

int
sk_prepare_factors(struct kt_search *s)
{
    int k, slot, a;

    for (k = 0; k < s->nsketches; k++) {
        const struct sk_sketch *sk = &s->sk[k];
        for (slot = 0; slot < sk->nslots; slot++) {
            int i = sk->slot_stage[slot];
            const struct kt_sstage *ss = &sk->base->stages[i];
            for (a = 0; a < ss->naxes; a++) {
                struct sk_factors *f;
                int n = sk_nparts(&sk->plan[i], ss->axes[a].reduce);
                int64_t maxin = innermost_bound(s, &sk->plan[i], &ss->axes[a]);
                if (ss->axes[a].extent > INT32_MAX)
                    return KT_EINVAL;
                f = get_factors(s, ss->axes[a].extent, n, maxin);
                if (f->count == 0) /* innermost bound: allow all-outer */
                    f = get_factors(s, ss->axes[a].extent, 1, maxin);
                s->fac[k][slot][a] = f;
            }
        }
    }
    return KT_OK;
}

void
sk_free_factors(struct kt_search *s)
{
    int i;

    for (i = 0; i < s->nfac; i++) {
        free(s->facs[i]->v);
        free(s->facs[i]);
    }
    free(s->facs);
    s->facs = NULL;
    s->nfac = s->capfac = 0;
}

/* ---- sampling ---------------------------------------------------------- */

/* Floats in the innermost spatial tile of slot (the register tile); under
 * rfactor every element of it is a vector of lane accumulators. */
int64_t
sk_reg_tile(const struct kt_search *s, const struct sk_genome *g, int slot)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    int i = sk->slot_stage[slot];
    const struct kt_sstage *ss = &sk->base->stages[i];
    int nS = sk_nparts(&sk->plan[i], 0), a;
    int64_t p = 1;

    for (a = 0; a < ss->nspatial; a++)
        p *= g->tiles[slot][a][nS - 1];
    if (sk->plan[i].structure == SK_STRUCT_RF)
        p *= s->o.vector_bytes > 0 ? s->o.vector_bytes / 4 : 1;
    return p;
}

/* Lanes of the target's widest vector (4 when it has none wider). */
static int64_t
widest_lanes(const struct kt_search *s)
{
    return s->o.vector_bytes >= 16 ? s->o.vector_bytes / 4 : 4;
}

/* Under rfactor, the vectorized innermost reduction part should fill
 * whole vectors (4-lane ones when the extent has no room for wider). */
static int
rf_vectorizes(const struct kt_search *s, const struct sk_genome *g, int slot)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    int i = sk->slot_stage[slot];
    const struct kt_sstage *ss = &sk->base->stages[i];
    int nR = sk_nparts(&sk->plan[i], 1), r = ss->naxes - 1;
    int64_t lanes = widest_lanes(s);

    if (sk->plan[i].structure != SK_STRUCT_RF ||
        s->fac[g->sketch][slot][r]->n < nR)
        return 1;
    if (ss->axes[r].extent % lanes != 0)
        lanes = 4;
    return g->tiles[slot][r][nR - 1] % lanes == 0;
}

/* Lanes of the vectors the code generator emits for an innermost loop
 * over a tile of this extent: the widest of 16, 8, 4 dividing it (at
 * most the target's vector width), 1 when none does. */
int64_t
sk_vector_lanes(const struct kt_search *s, int64_t extent)
{
    int64_t w;

    for (w = widest_lanes(s); w >= 4; w /= 2)
        if (extent % w == 0)
            return w;
    return 1;
}

/* InitRegisterBlock: the register tile of a multi-level tiling keeps at
 * least SK_MIN_ACC_VECTORS independent vector accumulators (an FMA's
 * latency times the FMA ports: fewer leave the pipes idle; bench_fma's
 * tiles ask for 10, but 10 here moved GEMM 1024^3's searches from 8 x 32
 * tiles to 4 x 64 ones, which load twice as many B vectors per FMA,
 * with no gain, docs/search.md) and, with the
 * operand registers (operand_registers()), at most the target's vector
 * registers (vector_registers()), its vectorized
 * innermost part fills whole vectors as wide as the axis allows, and the
 * reduction loops inside the tile's load and store run at least
 * SK_MIN_PANEL_STEPS iterations (each accumulator vector is loaded and
 * stored once per SK_MIN_PANEL_STEPS FMAs, and the operand panels are
 * read from cache that long), and it spans no axis that moves every
 * operand (moves_all_operands()): SK_TILE_BLOCKED; SK_TILE_REUSING when
 * besides each operand load serves 2 or more accumulators
 * (operand_reused()) and a matrix product's reduction runs whole inside
 * the accumulators' load and store where it may (SK_TILE_SPLIT_RUN where
 * it is split into passes).  A tile the stage's shape cannot give passes.
 * SK_TILE_SPILLING: the accumulators and the operand vectors they share
 * (held_registers()) outnumber the vector registers. */
#define SK_MIN_ACC_VECTORS 8
#define SK_MIN_PANEL_STEPS 64

/* Architectural vector registers: 32 with 64-byte vectors (AVX-512), 16
 * with narrower ones (AVX2, SSE). */
static int64_t
vector_registers(const struct kt_search *s)
{
    return s->o.vector_bytes >= 64 ? 32 : 16;
}

/* The largest register tile a sample or mutant may have: the option, or
 * a full register file of accumulators when that is larger. */
int64_t
sk_register_tile_limit(const struct kt_search *s)
{
    int64_t lanes = widest_lanes(s);
    int64_t file = vector_registers(s) * lanes;

    return file > s->o.max_register_tile ? file : s->o.max_register_tile;
}

/* Steps of the reduction run around the register tile of slot: its
 * innermost reduction parts, and the ones further out while the spatial
 * parts between are all 1 or held by the consumer it is fused into (the
 * generated micro-kernel then keeps the accumulators in registers across
 * all of them: a dense layer's 8 x 32 tile fused at level 2 over k 16 x
 * 48 runs 768 steps); *total is the whole reduction. */
static int64_t
panel_steps(const struct kt_search *s, const struct sk_genome *g, int slot,
            int64_t *total)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    int i = sk->slot_stage[slot];
    const struct kt_sstage *ss = &sk->base->stages[i];
    const char *c = sk_structures[sk->plan[i].structure];
    int sp = sk_nparts(&sk->plan[i], 0) - 1, rp = sk_nparts(&sk->plan[i], 1);
    int pos, a, tile = 1;
    int64_t p = 1;

    *total = 1;
    for (a = ss->nspatial; a < ss->naxes; a++)
        *total *= ss->axes[a].extent;
    rp--;
    for (pos = (int)strlen(c) - 1; pos >= 0; pos--) {
        if (c[pos] == 'R') {
            for (a = ss->nspatial; a < ss->naxes; a++)
                p *= g->tiles[slot][a][rp];
            rp--;
            tile = 0;
            continue;
        }
        /* a spatial level outside the run: all 1 or it ends (the levels
         * a fused consumer holds are 1 in this stage's region) */
        if (!tile && sp >= sk->plan[i].level)
            for (a = 0; a < ss->nspatial; a++)
                if (g->tiles[slot][a][sp] != 1)
                    return p;
        sp--;
    }
    return p;
}

/* Vector registers the tile's operands take besides the accumulators:
 * one row of the operand that moves along the vectorized axis (B of a
 * GEMM: vecs vectors, reused by every row of the tile) and one broadcast
 * of the other.  A tile whose accumulators leave no room
 * for them spills: GEMM 1024^3's 8 x 64 tile (32 accumulators + 4 + 1)
 * kept 5 accumulators on the stack, a load and a store each per FMA, and
 * ran at 93.8 GFLOPS on 1 thread where 8 x 32 ran at 100.4 in the same
 * run (bench/bench_gemm.c with both schedules). */
static int64_t
operand_registers(int64_t vecs)
{
    return vecs + 1;
}

/* Over the operands in e (sk_is_operand()): *n counts them, *moving those
 * whose index uses axis a. */
static void
count_operands(const struct kt_sstage *ss, const struct kt_expr *e, int a,
               int *n, int *moving)
{
    if (e == NULL)
        return;
    if (sk_is_operand(ss, e)) {
        *n += 1;
        *moving += kt_expr_load_uses(e, a);
    }
    count_operands(ss, e->a, a, n, moving);
    count_operands(ss, e->b, a, n, moving);
}

/* Length of n elements of axis a in the register tile's terms: vectors
 * along the vectorized axis v, elements along the others. */
static int64_t
tile_span(const struct kt_search *s, int a, int v, int64_t n)
{
    return a == v ? kt_vector_chunks(s->o.vector_bytes, n) : n;
}

/* Whether operand e is read once for 2 or more of the tile's
 * accumulators wherever the stage lets it be: the tile spans 2 or more
 * along some spatial axis e does not index (tile_span()), or the stage
 * has no such axis that long.  A GEMM tile of 16 rows x 1 vector loads a
 * broadcast of A per FMA: it ran at 137.6 GFLOPS on 1 thread where 8 x 2
 * vectors ran at 163.3 (bench/bench_gemm.c, docs/performance.md). */
static int
operand_reused(const struct kt_search *s, const struct kt_sstage *ss,
               const int32_t *tile, int v, const struct kt_expr *e)
{
    int a, room = 0;

    for (a = 0; a < ss->nspatial; a++) {
        if (kt_expr_load_uses(e, a) ||
            tile_span(s, a, v, ss->axes[a].extent) < 2)
            continue;
        if (tile_span(s, a, v, tile[a]) >= 2)
            return 1;
        room = 1;
    }
    return !room;
}

/* Vector registers the operands in e hold while the tile's FMAs run: one
 * read along the vectorized axis v and reused by the tile's other rows
 * (a spatial axis it does not index spans 2 or more) keeps its row of
 * vecs vectors, any other one a register at a time (a broadcast, or a
 * vector feeding a single FMA). */
static int64_t
held_registers(const struct kt_sstage *ss, const int32_t *tile, int v,
               int64_t vecs, const struct kt_expr *e)
{
    int a;

    if (e == NULL)
        return 0;
    if (sk_is_operand(ss, e)) {
        if (kt_expr_load_uses(e, v))
            for (a = 0; a < ss->nspatial; a++)
                if (a != v && tile[a] >= 2 && !kt_expr_load_uses(e, a))
                    return vecs;
        return 1;
    }
    return held_registers(ss, tile, v, vecs, e->a) +
           held_registers(ss, tile, v, vecs, e->b);
}

/* Whether every operand in e is reused (operand_reused()). */
static int
operands_reused(const struct kt_search *s, const struct kt_sstage *ss,
                const int32_t *tile, int v, const struct kt_expr *e)
{
    if (e == NULL)
        return 1;
    if (sk_is_operand(ss, e) && !operand_reused(s, ss, tile, v, e))
        return 0;
    return operands_reused(s, ss, tile, v, e->a) &&
           operands_reused(s, ss, tile, v, e->b);
}

/* Whether spatial axis a moves every operand (the batch of a batch
 * matmul): a register tile along it reuses neither, each of its rows
 * reads its own of both.  bmm_attn's 6 x 1 x 32 tile over six batches ran
 * at 40 GFLOPS on 1 thread where the 1 x 8 x 16 one ran at 109
 * (docs/search.md). */
static int
moves_all_operands(const struct kt_sstage *ss, int a)
{
    int n = 0, moving = 0;

    count_operands(ss, ss->body, a, &n, &moving);
    return n > 0 && moving == n;
}

/* Whether slot's stage is a matrix product whose reduction may run whole
 * around its register tile (sk_whole_run_axis).  One pass over it is
 * worth keeping: GEMM 1024^3's 8 x 32 tile in 128-column panels ran at
 * 0.91x (1 thread) and 0.90x-0.96x (2 threads) of its whole-k form with
 * k in 2 passes of 512, 0.86x / 0.90x in 4 of 256 (docs/search.md). */
static int
may_run_whole(const struct kt_search *s, const struct sk_genome *g, int slot)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    int i = sk->slot_stage[slot], a;
    const struct kt_sstage *ss = &sk->base->stages[i];

    for (a = ss->nspatial; a < ss->naxes; a++)
        if (sk_whole_run_axis(sk, i, a, s->fac[g->sketch][slot][a]))
            return 1;
    return 0;
}

/* Vectors per row of slot's register tile, t lanes along its vectorized
 * axis v: where the stage is fused into its consumer, the tile is
 * accumulated in a local buffer, and where that buffer's rows are the
 * tile's (v's parts between the fusion level and the innermost all 1),
 * the code generator runs whole vectors along them, padded
 * (kt_vector_chunks_padded); else the rows as they are.  Counted as 8 + 4
 * + 1 + 1 lanes, a 14 x 14 depthwise convolution's tile of 2 rows looked
 * a full one and 14 rows spilling: its searches settled on 2 rows, which
 * ran at half the speed of 14 on the Zen 5 (docs/performance.md). */
static int64_t
tile_row_vectors(const struct kt_search *s, const struct sk_genome *g, int slot,
                 int v, int64_t t)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    const struct sk_plan *p = &sk->plan[sk->slot_stage[slot]];
    int nS = sk_nparts(p, 0), l;

    if (p->partner < 0 || p->level < 1)
        return kt_vector_chunks(s->o.vector_bytes, t);
    for (l = p->level; l < nS - 1; l++)
        if (g->tiles[slot][v][l] != 1)
            return kt_vector_chunks(s->o.vector_bytes, t);
    return kt_vector_chunks_padded(s->o.vector_bytes, t);
}

/* sk_grade_tile(); *whole_run is set to 1 where the tile runs whole a
 * reduction that may run whole (may_run_whole()). */
static enum sk_tile_grade
grade_tile(const struct kt_search *s, const struct sk_genome *g, int slot,
           int *whole_run)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    int i = sk->slot_stage[slot];
    const struct kt_sstage *ss = &sk->base->stages[i];
    int nS = sk_nparts(&sk->plan[i], 0), a, v;
    int64_t lanes, acc, vecs, t, space = 1, total, steps;
    int32_t tile[KT_MAX_AXES];

    if (sk->plan[i].structure == SK_STRUCT_RF)
        return SK_TILE_REUSING; /* rf_vectorizes(), sk_reg_tile() see to it */
    for (a = 0; a < ss->nspatial; a++)
        space *= ss->axes[a].extent;
    v = sk_vector_axis(ss, &sk->plan[i]);
    if (v < 0 || s->fac[g->sketch][slot][v]->n < nS)
        return SK_TILE_REUSING;
    lanes = sk_vector_lanes(s, ss->axes[v].extent);
    t = g->tiles[slot][v][nS - 1];
    for (a = 0; a < ss->nspatial; a++)
        tile[a] = g->tiles[slot][a][nS - 1];
    /* the code generator's vectors per row of the tile: 197 lanes are
     * 14 (12 x 16 + 4 + 1), or 13 along a padded local row */
    vecs = tile_row_vectors(s, g, slot, v, t);
    acc = sk_reg_tile(s, g, slot) / t * vecs;
    if (acc + held_registers(ss, tile, v, vecs, ss->body) > vector_registers(s))
        return SK_TILE_SPILLING;
    if (t % lanes != 0)
        return SK_TILE_LOOSE;
    /* no vector divides the axis: its whole extent fills the most lanes
     * per vector (10 = 8 + 1 + 1, 5 = 4 + 1), so the tile takes all of it
     * where the innermost bound allows */
    if (lanes == 1 && t != ss->axes[v].extent &&
        ss->axes[v].extent <= s->fac[g->sketch][slot][v]->maxin)
        return SK_TILE_LOOSE;
    for (a = 0; a < ss->nspatial; a++)
        if (a != v && g->tiles[slot][a][nS - 1] > 1 && moves_all_operands(ss, a))
            return SK_TILE_LOOSE;
    steps = panel_steps(s, g, slot, &total);
    if (steps < SK_MIN_PANEL_STEPS && steps < total)
        return SK_TILE_LOOSE;
    if (acc + operand_registers(vecs) > vector_registers(s) ||
        (acc < SK_MIN_ACC_VECTORS && space / lanes >= SK_MIN_ACC_VECTORS))
        return SK_TILE_LOOSE;
    if (!operands_reused(s, ss, tile, v, ss->body))
        return SK_TILE_BLOCKED;
    if (!may_run_whole(s, g, slot))
        return SK_TILE_REUSING;
    *whole_run = steps == total;
    return *whole_run ? SK_TILE_REUSING : SK_TILE_SPLIT_RUN;
}

enum sk_tile_grade
sk_grade_tile(const struct kt_search *s, const struct sk_genome *g, int slot)
{
    int whole_run = 0;

    return grade_tile(s, g, slot, &whole_run);
}

/* Whether axis a of stage i may run whole inside the register tile: the
 * only reduction axis of a multi-level tiling (a matrix product: GEMM,
 * dense, batch matmul), not longer than the innermost bound. */
int
sk_whole_run_axis(const struct sk_sketch *sk, int i, int a,
                  const struct sk_factors *f)
{
    const struct kt_sstage *ss = &sk->base->stages[i];

    return ss->axes[a].reduce && ss->naxes - ss->nspatial == 1 &&
           sk->plan[i].structure != SK_STRUCT_RF && f->n > 1 &&
           ss->axes[a].extent <= f->maxin;
}

/* Whether axis a of stage i is its vectorized axis, no full vector
 * divides it, it is longer than one vector, and a register tile of as
 * many such rows as the code generator pins shared vectors for
 * (KT_CODEGEN_PIN_MIN_USES) fits the register file: a 1x1
 * convolution's 100 pixels (10 x 10) as one row of 7 vectors, 3 output
 * channels deep, ran 14-17% faster than the 20-pixel rows (16 + 4 lanes)
 * that uniform samples give, and they pass the innermost bound only
 * whole (innermost_bound); a stride-2 depthwise convolution's 28 output
 * columns, in local rows padded to 32, are two 16-lane vectors where its
 * tiles of 4 columns took 4-lane ones (1.36x faster, docs/performance.md);
 * 196 pixels (14 x 14, 13 vectors) fit one row only. */
static int
whole_vector_axis(const struct kt_search *s, const struct sk_sketch *sk, int i,
                  int a, const struct sk_factors *f)
{
    const struct kt_sstage *ss = &sk->base->stages[i];
    int64_t e = ss->axes[a].extent, vecs;

    if (ss->axes[a].reduce || f->n < 2 || e > f->maxin ||
        e <= widest_lanes(s) || e % widest_lanes(s) == 0 ||
        sk_vector_axis(ss, &sk->plan[i]) != a)
        return 0;
    vecs = kt_vector_chunks(s->o.vector_bytes, e);
    return KT_CODEGEN_PIN_MIN_USES * vecs + operand_registers(vecs) <=
           vector_registers(s);
}

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
           ss->axes[a].extent % widest_lanes(s) == 0 &&
           sk_vector_axis(ss, &sk->plan[i]) == a;
}

/* A uniform pick among f's factorizations whose innermost part is whole
 * vectors; NULL when there is none. */
static const int32_t *
lane_multiple_pick(const struct kt_search *s, struct kt_rng *r,
                   const struct sk_factors *f)
{
    int64_t lanes = widest_lanes(s);
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
 * extents may pass (whole_vector_axis: 1 of 100 factorizations of 100). */
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
             whole_vector_axis(s, sk, i, a, f)) &&
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
    int64_t lanes = widest_lanes(s);

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

/* A register-blocked sample's rank: its tile's grade, doubled, plus one
 * unless the tile runs a matrix product's reduction whole in a cache
 * tiling that reads an operand again (sk_tile_rereads). */
static int
blocked_rank(const struct kt_search *s, const struct sk_genome *g, int slot)
{
    int whole_run = 0;
    enum sk_tile_grade grade = grade_tile(s, g, slot, &whole_run);

    return 2 * (int)grade + !(whole_run && sk_tile_rereads(s, g, slot));
}

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
                !rf_vectorizes(s, g, slot))
                continue;
            if (blocked[slot]) {
                rank = blocked_rank(s, g, slot);
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
