/* search_grade.c - InitRegisterBlock's measures of a register tile: its
 * floats and vectors, the registers it holds, and its grade (how well it
 * suits a register micro-kernel, sk_grade_tile), by which samples pick
 * their tiles (search_init.c) and neighbours are kept (search_mutate.c). */
#include <string.h>

#include "scheduler/search_int.h"

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
int64_t
sk_widest_lanes(const struct kt_search *s)
{
    return s->o.vector_bytes >= 16 ? s->o.vector_bytes / 4 : 4;
}

/* Under rfactor, the vectorized innermost reduction part should fill
 * whole vectors (4-lane ones when the extent has no room for wider). */
int
sk_rf_vectorizes(const struct kt_search *s, const struct sk_genome *g, int slot)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    int i = sk->slot_stage[slot];
    const struct kt_sstage *ss = &sk->base->stages[i];
    int nR = sk_nparts(&sk->plan[i], 1), r = ss->naxes - 1;
    int64_t lanes = sk_widest_lanes(s);

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

    for (w = sk_widest_lanes(s); w >= 4; w /= 2)
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
    int64_t lanes = sk_widest_lanes(s);
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
        return SK_TILE_REUSING; /* sk_rf_vectorizes(), sk_reg_tile() see to it */
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
int
sk_whole_vector_axis(const struct kt_search *s, const struct sk_sketch *sk,
                     int i, int a, const struct sk_factors *f)
{
    const struct kt_sstage *ss = &sk->base->stages[i];
    int64_t e = ss->axes[a].extent, vecs;

    if (ss->axes[a].reduce || f->n < 2 || e > f->maxin ||
        e <= sk_widest_lanes(s) || e % sk_widest_lanes(s) == 0 ||
        sk_vector_axis(ss, &sk->plan[i]) != a)
        return 0;
    vecs = kt_vector_chunks(s->o.vector_bytes, e);
    return KT_CODEGEN_PIN_MIN_USES * vecs + operand_registers(vecs) <=
           vector_registers(s);
}

/* A register-blocked sample's rank: its tile's grade, doubled, plus one
 * unless the tile runs a matrix product's reduction whole in a cache
 * tiling that reads an operand again (sk_tile_rereads). */
int
sk_blocked_rank(const struct kt_search *s, const struct sk_genome *g, int slot)
{
    int whole_run = 0;
    enum sk_tile_grade grade = grade_tile(s, g, slot, &whole_run);

    return 2 * (int)grade + !(whole_run && sk_tile_rereads(s, g, slot));
}
