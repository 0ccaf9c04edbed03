/* test_search_tiles.c - the search rules that shape a batch matmul's
 * register tile and the place of its packed operand (scheduler/
 * search_init.c, search_grade.c, search_pack.c), on the attention batch matmul
 * of the suite (bmm_attn: 12 x 128 x 128 x 64, B read transposed), and a
 * pointwise convolution's whole rows of pixels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/search_int.h"
#include "tests/support/ktt.h"

static struct kt_dag *
bmm_nt(int64_t m)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    char err[512];

    assert_int_equal(kt_op_batch_matmul(&d, 12, m, m, 64, 1), KT_OK);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    return dag;
}

/* The same product written plainly, as a user's own task would (the
 * operator library pads a 197-wide one). */
static struct kt_dag *
bmm_nt_unpadded(int64_t m)
{
    struct kt_shape sh[2] = {{"A", 3, {12, m, 64}}, {"B", 3, {12, m, 64}}};
    struct kt_dag *dag = NULL;
    char err[512];

    if (kt_dag_parse("O[b,i,j] += A[b,i,k] * B[b,j,k]", sh, 2, &dag, err,
                     sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    return dag;
}

static struct kt_dag *
bmm_attn(void)
{
    return bmm_nt(128);
}

/* The tiled stage of st: the one with a reduction axis whose spatial
 * axis a is split. */
static const struct kt_sstage *
tiled_stage(const struct kt_state *st, int a)
{
    int i;

    for (i = 0; i < st->nstages; i++) {
        const struct kt_sstage *ss = &st->stages[i];
        if (!ss->inlined && ss->naxes > ss->nspatial && ss->nparts[a] > 1)
            return ss;
    }
    return NULL;
}

/* n random (policy random, AVX-512 target) candidates of dag, seed. */
static void
random_batch(const struct kt_dag *dag, uint64_t seed, int n,
             struct kt_search **s, struct kt_search_batch *b)
{
    struct kt_search_opts o;
    char err[512];

    kt_search_opts_default(&o);
    o.policy = KT_POLICY_RANDOM;
    o.population = n;
    o.seed = seed;
    o.vector_bytes = 64;
    *s = NULL;
    if (kt_search_new(s, dag, &o, err, sizeof(err)) != KT_OK ||
        kt_search_next_batch(*s, NULL, NULL, 0, n, b, NULL, err, sizeof(err)) !=
            KT_OK)
        fail_msg("%s", err);
}

/* A register tile over several batches reuses neither operand (each
 * batch reads its own A and B): register-blocked samples keep the batch
 * out of it: 428 of these 1024 samples span batches (uniform ones, 1 in
 * 4, and samples that found no blocked tile still may), 608 without the
 * rule; 256 samples were too few to tell the two apart reliably. */
static void
test_search_tile_keeps_batch_out(void **state)
{
    struct kt_dag *dag = bmm_attn();
    struct kt_search *s;
    struct kt_search_batch b;
    int i, tiled = 0, batched = 0;
    (void)state;

    random_batch(dag, 3, 1024, &s, &b);
    for (i = 0; i < b.n; i++) {
        const struct kt_sstage *ss = tiled_stage(b.v[i].state, 0);
        if (ss == NULL)
            continue;
        tiled++;
        batched += ss->part_extent[0][ss->nparts[0] - 1] > 1;
    }
    if (tiled < b.n / 2 || batched * 100 > tiled * 52)
        fail_msg("%d of %d tiled samples span batches in their register tile",
                 batched, tiled);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* A prime extent over the innermost bound (a ViT's 197 tokens) may run
 * whole inside the register tile, as 14 vectors: 103 of these 256
 * samples put all 197 columns in their register tile, none (nothing but
 * 1 could be innermost) without the rule. */
static void
test_search_prime_extent_in_register_tile(void **state)
{
    struct kt_dag *dag = bmm_nt_unpadded(197);
    struct kt_search *s;
    struct kt_search_batch b;
    int i, whole = 0;
    (void)state;

    random_batch(dag, 5, 256, &s, &b);
    for (i = 0; i < b.n; i++) {
        const struct kt_sstage *ss = tiled_stage(b.v[i].state, 0);
        if (ss != NULL && ss->part_extent[2][ss->nparts[2] - 1] == 197)
            whole++;
    }
    if (whole * 10 < b.n)
        fail_msg("%d of %d samples hold all 197 columns in the register tile",
                 whole, b.n);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* The operator library's matmul M x N x K (its padding included). */
static struct kt_dag *
matmul_dag(int64_t m, int64_t n, int64_t k)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    char err[512];

    assert_int_equal(kt_op_matmul(&d, m, n, k), KT_OK);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    return dag;
}

/* A column axis of whole vectors whose count 2, 3 and 4 do not divide
 * (6640 columns, 415 vectors = 5 x 83; a recognition head's 6625 classes
 * were padded to them before the operator library added a vector) may
 * run 5 vectors wide innermost, past the innermost bound of 64 lanes
 * that left its register tiles 1 vector wide: 170 of these 256 samples
 * (all tiled) hold 80 columns in their register tile (164 of the
 * 6625-class head's did), none without the rule. */
static void
test_search_wide_vector_run(void **state)
{
    struct kt_dag *dag = matmul_dag(40, 6640, 120);
    struct kt_search *s;
    struct kt_search_batch b;
    int i, tiled = 0, wide = 0;
    (void)state;

    random_batch(dag, 5, 256, &s, &b);
    for (i = 0; i < b.n; i++) {
        const struct kt_sstage *ss = tiled_stage(b.v[i].state, 1);
        if (ss == NULL)
            continue;
        tiled++;
        wide += ss->part_extent[1][ss->nparts[1] - 1] == 80;
    }
    if (tiled < 128 || wide * 10 < tiled)
        fail_msg("%d of %d tiled samples hold 80 columns in the register tile",
                 wide, tiled);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

static struct kt_dag *
gemm1024(void)
{
    return matmul_dag(1024, 1024, 1024);
}

/* Of n random samples of GEMM 1024^3 (seed 7), how many have a register
 * tile of 8 or more accumulator vectors that loads an operand per FMA:
 * 1 vector wide (a broadcast of A each) or 1 row (a vector of B each). */
static int
starved_gemm_tiles(int n)
{
    struct kt_dag *dag = gemm1024();
    struct kt_search *s;
    struct kt_search_batch b;
    int i, starved = 0;

    random_batch(dag, 7, n, &s, &b);
    for (i = 0; i < b.n; i++) {
        const struct kt_sstage *ss = tiled_stage(b.v[i].state, 0);
        int64_t rows, cols;
        if (ss == NULL)
            continue;
        rows = ss->part_extent[0][ss->nparts[0] - 1];
        cols = ss->part_extent[1][ss->nparts[1] - 1];
        starved += rows * cols >= 8 * 16 && (cols == 16 || rows == 1);
    }
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
    return starved;
}

/* Register-blocked samples reuse each operand load for 2 or more
 * accumulators where the shape allows: a GEMM's 16 x 1-vector tile
 * loads a broadcast of A per FMA (16 x 16 ran 0.84x of 8 x 32 on 1
 * thread).  13 of these 256 samples have such a tile (uniform samples,
 * 1 in 4, still may), 79 without the rule. */
static void
test_search_tile_reuses_operands(void **state)
{
    int starved = starved_gemm_tiles(256);
    (void)state;

    if (starved * 10 > 256)
        fail_msg("%d of 256 GEMM samples load an operand per FMA", starved);
}

/* Whether genome g of GEMM 1024^3 has a register tile whose accumulator
 * vectors, with the row of B they share (rows of 2 or more) and a
 * broadcast of A, outnumber AVX-512's 32 vector registers. */
static int
gemm_tile_spills(const struct kt_search *s, const struct sk_genome *g)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    int i = sk->slot_stage[0];
    int nS = sk_nparts(&sk->plan[i], 0);
    int64_t rows = g->tiles[0][0][nS - 1], cols = g->tiles[0][1][nS - 1];
    int64_t vecs = (cols + 15) / 16;

    assert_int_equal(sk->base->stages[i].nspatial, 2);
    return rows * vecs + (rows >= 2 ? vecs : 1) + 1 > 32;
}

/* No sample of GEMM 1024^3 spills its register tile, nor does a mutant
 * of one that does not: 8 x 64 (32 accumulators and 5 operand vectors)
 * ran at 0.76x-0.80x of 8 x 32 on 1 thread, and mutations grew 8 x 32
 * into it (docs/search.md).  Without the rule 72 of these 4096 samples spill
 * and 94 of the mutants of the others. */
static void
test_search_tile_no_spills(void **state)
{
    struct kt_dag *dag = gemm1024();
    struct kt_search *s = ktt_avx512_search(dag);
    struct kt_rng r;
    int n, spilled = 0, grown = 0;
    (void)state;

    kt_rng_seed(&r, 13);
    for (n = 0; n < 4096; n++) {
        struct sk_genome g, h;
        sk_sample(s, &r, &g);
        if (s->sk[g.sketch].nslots == 0)
            continue;
        spilled += gemm_tile_spills(s, &g);
        h = g;
        if (sk_mutate(s, &r, &h) == 0 && !gemm_tile_spills(s, &g))
            grown += gemm_tile_spills(s, &h);
    }
    if (spilled || grown)
        fail_msg("%d of 4096 GEMM samples spill, %d mutants of others", spilled,
                 grown);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* A convolution C -> K over side x side pixels, r x r window, same size
 * out (pad r / 2), epilogue bits epi. */
static struct kt_dag *
conv_dag(int64_t C, int64_t side, int64_t K, int64_t r, int epi)
{
    struct kt_conv2d_params p = {.N = 1,
                                 .C = C,
                                 .H = side,
                                 .W = side,
                                 .K = K,
                                 .R = r,
                                 .S = r,
                                 .pad_h = r / 2,
                                 .pad_w = r / 2,
                                 .stride_h = 1,
                                 .stride_w = 1,
                                 .dilation_h = 1,
                                 .dilation_w = 1,
                                 .groups = 1,
                                 .epilogue = epi};
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    char err[512];

    assert_int_equal(kt_op_conv2d(&d, &p), KT_OK);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    return dag;
}

/* Of 256 random samples of a 1x1 convolution 384 -> 360 over side x side
 * pixels (seed 11), how many hold all of its pixel axis in their register
 * tile. */
static int
whole_pixel_rows(int64_t side)
{
    struct kt_dag *dag = conv_dag(384, side, 360, 1, KT_EPI_BIAS);
    struct kt_search *s;
    struct kt_search_batch b;
    int i, whole = 0;

    random_batch(dag, 11, 256, &s, &b);
    for (i = 0; i < b.n; i++) {
        const struct kt_sstage *ss = tiled_stage(b.v[i].state, 2);
        whole += ss != NULL &&
                 ss->part_extent[2][ss->nparts[2] - 1] == side * side;
    }
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
    return whole;
}

/* A vectorized axis no vector divides, longer than the innermost bound
 * (a 1x1 convolution's 10 x 10 pixels), runs whole in 1 of 4 tile
 * samples: 125 of 256 samples hold all 100 pixels in their register tile
 * (those fit a register-blocked tile more often than the 16 + 4 lanes of
 * 20), 13 without the rule.  196 pixels (14 x 14) are 13 vectors: 3 rows
 * of them do not fit the registers, so they are drawn as before (11 of
 * 256 whole; 111 if the rule ignored the register file). */
static void
test_search_whole_vector_axis(void **state)
{
    int n;
    (void)state;

    if ((n = whole_pixel_rows(10)) * 5 < 256)
        fail_msg("%d of 256 samples hold all 100 pixels", n);
    if ((n = whole_pixel_rows(14)) * 10 > 256)
        fail_msg("%d of 256 samples hold all 196 pixels", n);
}

/* Of 256 random samples (seed 13) of the 3x3 convolution 96 -> 24 over
 * side x side pixels: *tiled have their column axis tiled, and the
 * return value of those have an innermost column part that is a multiple
 * of `multiple` (0: the whole side). */
static int
innermost_columns(int64_t side, int64_t multiple, int *tiled)
{
    struct kt_dag *dag = conv_dag(96, side, 24, 3, 0);
    struct kt_search *s;
    struct kt_search_batch b;
    int i, n = 0;

    *tiled = 0;
    random_batch(dag, 13, 256, &s, &b);
    for (i = 0; i < b.n; i++) {
        const struct kt_sstage *ss = tiled_stage(b.v[i].state, 3);
        int64_t part;
        if (ss == NULL)
            continue;
        (*tiled)++;
        part = ss->part_extent[3][ss->nparts[3] - 1];
        n += multiple > 0 ? part % multiple == 0 : part == side;
    }
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
    return n;
}

/* A vectorized axis whole vectors divide (the 80 columns of PP-OCR det's
 * 3x3 convolution 96 -> 24 at 80x80) gets an innermost part of whole
 * vectors (16, 80) in half the tile samples or more: 199 of these 256
 * random samples, 53 without the rule.  At 9 trials (a network task's
 * warm-up) that layer's best went from 67.1 to 100.9 GFLOPS
 * (docs/performance.md). */
static void
test_search_lane_multiple_axis(void **state)
{
    int tiled, whole = innermost_columns(80, 16, &tiled);
    (void)state;

    if (tiled < 128 || whole * 2 < tiled)
        fail_msg("%d of %d tiled samples have whole vectors innermost", whole,
                 tiled);
}

/* A vectorized axis no vector divides and the innermost bound holds
 * whole (the 10 columns of PP-OCR det's 3x3 convolution 96 -> 24 at
 * 10x10) runs whole in every register-blocked sample (10 columns are
 * 8 + 1 + 1 lanes, 5 are 4 + 1): of 256 random samples of seed 13 (all
 * tiled), 117 have all 10 innermost, 16 without the rule.  Alone, 64
 * trials of that layer ended at 35-39 us over 3 seeds against 41-54
 * (docs/performance.md). */
static void
test_search_narrow_axis_whole(void **state)
{
    int tiled, whole = innermost_columns(10, 0, &tiled);
    (void)state;

    if (tiled < 128 || whole * 3 < tiled)
        fail_msg("%d of %d tiled samples have all 10 columns innermost", whole,
                 tiled);
}

/* A vectorized axis no vector divides but longer than one vector (the
 * 28 columns of a 3x3 convolution at 28x28: rows of a local tile padded
 * to 32 hold it as two 16-lane vectors, docs/schedule.md) runs whole in
 * 1 of 4 tile samples: 143 of 256 random samples of seed 13 have all 28
 * innermost, 37 without the rule (a uniform choice gives it to 1 of 18
 * factorizations; those fit a register-blocked tile more often).  A
 * stride-2 depthwise convolution 56x56 -> 28x28 found its 4 x 28 tile
 * (2 threads: 60.9 GFLOPS) with the rule, stayed on 14 x 4 (44.8)
 * without (docs/performance.md). */
static void
test_search_padded_row_whole(void **state)
{
    int tiled, whole = innermost_columns(28, 0, &tiled);
    (void)state;

    if (tiled < 128 || whole * 3 < tiled)
        fail_msg("%d of %d tiled samples have all 28 columns innermost", whole,
                 tiled);
}

/* The points where the pack of stage 0 may be attached in stage consumer
 * of dag after steps (dag freed): count, and the points in cand. */
static int
pack_points_of(struct kt_dag *dag, int consumer, const char *json, int *cand)
{
    struct kt_state *st = ktt_replay_json(dag, json);
    int n;

    assert_non_null(st);
    n = sk_pack_attach_points(&st->stages[consumer], st->stages[0].out, 0,
                              cand);
    kt_state_free(st);
    kt_dag_free(dag);
    return n;
}

static int
pack_points(const char *json, int *cand)
{
    return pack_points_of(bmm_attn(), 1, json, cand);
}

/* The parallel loop fuses batches with row blocks (b x i0): every row
 * block repeats its batch's pack.  With i0 = 4 the pack goes at the
 * column loop j0 (built 4 times), not at i1 inside it (8 times; that
 * loop was offered when the fused loop counted as indexing B).  With
 * i0 = 8 no loop builds it 4 times or less: the least repeated one is
 * still offered (inlined, B would be gathered lane by lane). */
static void
test_search_pack_counts_fused_repeats(void **state)
{
    int cand[KT_MAX_ITERS];
    (void)state;

    /* b i0 j0 i1 k i2 j1, fused (b, i0): 48 x j0 8 x i1 2 x k 64 ... */
    assert_int_equal(pack_points("{\"v\":1,\"steps\":[[\"CHR\",0,1],"
                                 "[\"SP\",1,1,[2,16]],[\"SP\",1,4,[16]],"
                                 "[\"RE\",1,[0,1,4,2,6,3,5]],"
                                 "[\"FU\",1,0,2]]}",
                                 cand),
                     1);
    assert_int_equal(cand[0], 1);
    assert_int_equal(pack_points("{\"v\":1,\"steps\":[[\"CHR\",0,1],"
                                 "[\"SP\",1,1,[1,16]],[\"SP\",1,4,[16]],"
                                 "[\"RE\",1,[0,1,4,2,6,3,5]],"
                                 "[\"FU\",1,0,2]]}",
                                 cand),
                     1);
    assert_int_equal(cand[0], 1);
}

/* A loop that does not index B (the row blocks i0) would only rebuild
 * the tile the batch loop b0 builds: b0 i0 b1 j0 i1 k i2 j1 offers b0
 * and j0, not i0 (offered before, a tile rebuilt 4 times over). */
static void
test_search_pack_skips_rebuilding_points(void **state)
{
    int cand[KT_MAX_ITERS];
    (void)state;

    assert_int_equal(pack_points("{\"v\":1,\"steps\":[[\"CHR\",0,1],"
                                 "[\"SP\",1,0,[2]],[\"SP\",1,2,[2,16]],"
                                 "[\"SP\",1,5,[16]],"
                                 "[\"RE\",1,[0,2,1,5,3,7,4,6]]]}",
                                 cand),
                     2);
    assert_int_equal(cand[0], 0);
    assert_int_equal(cand[1], 3);
}

/* GEMM 1024^3 as i0 j0 k0 i1 j1 k1 i2 j2 with (i0, j0) fused for parallel
 * (1 x 8 column panels of 128), k whole: B's panel is built once per
 * fused iteration, at that loop (it ran at 173.6 / 333.0 GFLOPS on 1 / 2
 * threads, oneDNN 168.5 / 310.9 in the same bench_gemm run), not at the
 * row loop i1 inside it (128 times, the least once the fused loop was not
 * offered); at the column loop j1 it is copied once too, hoisted out of
 * i1 as B_pack[j1][k][32], and is offered as well. */
static void
test_search_pack_at_fused_loop(void **state)
{
    struct kt_dag *dag = gemm1024();
    int cand[KT_MAX_ITERS];
    (void)state;

    assert_int_equal(
        pack_points_of(dag, 2,
                       "{\"v\":1,\"steps\":[[\"CHR\",0,1],[\"CHR\",1,0],"
                       "[\"SP\",2,2,[1024]],[\"SP\",2,1,[4,32]],"
                       "[\"SP\",2,0,[128,8]],"
                       "[\"RE\",2,[0,3,6,1,4,7,2,5]],[\"FU\",2,0,2]]}",
                       cand),
        2);
    assert_int_equal(cand[0], 0);
    assert_int_equal(cand[1], 3);
}

/* A pack inside loops that do not index it is copied outside them (the
 * lowering hoists it, ir/lower_hoist.c), so those loops do not count as
 * rebuilding it: in j0 i1 i2 j1 k i3 j2 of GEMM 1024^3, B's 1024 x 32
 * panel at j1 is copied once per j0 as B_pack[j1][k][32] (1.02-1.04x
 * the 1024 x 128 pack at j0 on an Intel Xeon) and is offered beside j0;
 * before, it counted 128 rebuilds (i1 x i2) and only j0 was offered. */
static void
test_search_pack_hoisted_point(void **state)
{
    struct kt_dag *dag = gemm1024();
    int cand[KT_MAX_ITERS];
    (void)state;

    assert_int_equal(pack_points_of(dag, 2,
                                    "{\"v\":1,\"steps\":[[\"CHR\",0,1],["
                                    "\"CHR\",1,0],"
                                    "[\"SP\",2,2,[1024]],[\"SP\",2,1,[4,32]],"
                                    "[\"SP\",2,0,[64,2,8]],"
                                    "[\"RE\",2,[0,4,1,2,5,7,8,3,6]]]}",
                                    cand),
                     2);
    assert_int_equal(cand[0], 1);
    assert_int_equal(cand[1], 4);
}

/* Whether cand unrolls the reduction loop around its register tile: the
 * builder's split of that loop right after the tiling's reorder, whose
 * inner part of 4 is unrolled (search_build.c). */
static int
unrolls_reduction(const struct kt_search_cand *c)
{
    int j;

    for (j = 0; j + 2 < c->nsteps; j++) {
        const struct kt_step *re = &c->steps[j], *sp = re + 1, *an = re + 2;
        if (re->kind == KT_STEP_REORDER && sp->kind == KT_STEP_SPLIT &&
            sp->stage == re->stage && sp->n == 1 && sp->v[0] == 4 &&
            an->kind == KT_STEP_ANNOTATE && an->iter == sp->iter + 1 &&
            an->v[0] == KT_ANN_UNROLL)
            return 1;
    }
    return 0;
}

/* Register-blocked samples unroll the reduction loop around their tile
 * by 4 (as long as the unrolled micro-kernel stays within the code
 * generator's budget) in about 1 of 2 cases: a GEMM 1024^3 on an Intel
 * Xeon ran 1.03x-1.05x faster so.  Those kernels compute what the
 * reference does. */
static void
test_search_reduction_unroll(void **state)
{
    struct kt_dag *dag = matmul_dag(64, 96, 128);
    struct kt_search *s;
    struct kt_search_batch b;
    struct kt_state *picked[8];
    int i, n = 0, npicked = 0, skipped = 0;
    (void)state;

    random_batch(dag, 5, 256, &s, &b);
    for (i = 0; i < b.n; i++) {
        if (!unrolls_reduction(&b.v[i]))
            continue;
        n++;
        if (npicked < 8)
            picked[npicked++] = b.v[i].state;
    }
    if (n < b.n / 5 || n == b.n)
        fail_msg("%d of %d samples unroll their reduction loop", n, b.n);
    assert_int_equal(ktt_check_many(dag, picked, npicked, 7, &skipped), 0);
    assert_int_equal(skipped, 0);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* The innermost (register) part of axis a in slot 0 of g. */
static int32_t
reg_part(const struct kt_search *s, const struct sk_genome *g, int a)
{
    return g->tiles[0][a][s->fac[g->sketch][0][a]->n - 1];
}

/* A search on a 256^3 GEMM and a register-blocked 8 x 32 tile of it
 * whose reduction is split in parts, in *m; with nparts > 0, one whose
 * spatial axes are split in nparts parts. */
static struct kt_search *
gemm_blocked_8x32(struct kt_dag **dag, struct kt_rng *r, struct sk_member *m,
                  int nparts)
{
    struct kt_search *s = NULL;
    struct kt_search_opts o;
    char err[512];
    int tries;

    *dag = matmul_dag(256, 256, 256);
    kt_search_opts_default(&o);
    o.vector_bytes = 64;
    o.seed = 4;
    assert_int_equal(kt_search_new(&s, *dag, &o, err, sizeof(err)), KT_OK);
    kt_rng_seed(r, 10);
    memset(m, 0, sizeof(*m));
    for (tries = 0; tries < 100000; tries++) {
        sk_sample(s, r, &m->g);
        if (s->sk[m->g.sketch].nslots > 0 && reg_part(s, &m->g, 0) == 8 &&
            reg_part(s, &m->g, 1) == 32 && reg_part(s, &m->g, 2) < 256 &&
            sk_grade_tile(s, &m->g, 0) &&
            (nparts == 0 || s->fac[m->g.sketch][0][0]->n == nparts))
            return s;
    }
    fail_msg("no register-blocked 8 x 32 sample with k split");
    return NULL;
}

/* In *m, GEMM 1024^3's program of the given schedule (an 8 x 32 tile
 * over column panels of all rows, the columns as COLS splits them inside
 * their outermost part, k as SPLIT splits it). */
static void
gemm_cols_member(const struct kt_search *s, const char *cols, const char *split,
                 struct sk_member *m)
{
    char json[1024], err[256], hex[17];
    struct kt_step *steps = NULL;
    uint64_t h = 0;
    int n;

    snprintf(json, sizeof(json),
             "{\"v\":1,\"steps\":[[\"CHR\",0,1],[\"CHR\",1,0],"
             "[\"SP\",2,2,[%s]],[\"SP\",2,1,[%s]],"
             "[\"SP\",2,0,[1,128,8]],"
             "[\"RE\",2,[0,4,1,5,8,2,6,9,3,7]],[\"SP\",2,7,[4]],"
             "[\"AN\",2,8,\"unroll\"],[\"FU\",2,0,4],[\"CI\",1],"
             "[\"CA\",0,2,0],[\"AN\",0,1,\"vectorize\"],"
             "[\"AN\",2,0,\"parallel\"],[\"AN\",2,7,\"vectorize\"],"
             "[\"AN\",2,6,\"unroll\"],[\"PR\",2,0,512]]}",
             split, cols);
    if (kt_steps_from_json(json, &steps, &n, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    kt_steps_hash(steps, n, hex);
    kt_hash_parse(hex, &h);
    if (!sk_decode(s, steps, n, h, m))
        fail_msg("the schedule with columns [%s], k [%s] does not decode", cols,
                 split);
    free(steps);
}

static enum sk_tile_grade
gemm_cols_grade(const struct kt_search *s, const char *cols, const char *split)
{
    struct sk_member m;

    gemm_cols_member(s, cols, split, &m);
    return sk_grade_tile(s, &m.g, 0);
}

/* Whether that program reads an operand again (sk_tile_rereads). */
static int
gemm_cols_rereads(const struct kt_search *s, const char *cols,
                  const char *split)
{
    struct sk_member m;

    gemm_cols_member(s, cols, split, &m);
    return sk_tile_rereads(s, &m.g, 0);
}

/* The 128-column panels (8 of them) of an 8 x 32 tile over all rows of
 * the GEMM, k as SPLIT splits it. */
static enum sk_tile_grade
gemm_panel_grade(const struct kt_search *s, const char *split)
{
    return gemm_cols_grade(s, "8,4,32", split);
}

/* A matrix product's reduction stays in one pass around the register
 * tile where it may: an 8 x 32 tile over all 1024 steps of k grades
 * above the same tile over 2 passes of 512 (which ran at 0.91x of it on 1
 * thread, docs/search.md), most samples run k whole (44% of these 4000
 * without the grade, 65% with it), and fewer tile mutants of one that
 * does split it (35% of these without, 25% with). */
static void
test_search_tile_keeps_reduction_whole(void **state)
{
    struct kt_dag *dag = gemm1024();
    struct kt_search *s = ktt_avx512_search(dag);
    struct kt_rng r;
    int t, n = 0, whole = 0, mutants = 0, split = 0;
    (void)state;

    assert_int_equal(gemm_panel_grade(s, "1024"), SK_TILE_REUSING);
    assert_int_equal(gemm_panel_grade(s, "512"), SK_TILE_SPLIT_RUN);
    kt_rng_seed(&r, 11);
    for (t = 0; t < 4000; t++) {
        struct sk_genome g, h;
        sk_sample(s, &r, &g);
        if (s->sk[g.sketch].nslots == 0)
            continue;
        n++;
        if (reg_part(s, &g, 2) != 1024)
            continue;
        whole++;
        h = g;
        if (sk_mutate(s, &r, &h) != 0 ||
            memcmp(h.tiles, g.tiles, sizeof(g.tiles)) == 0)
            continue;
        mutants++;
        split += reg_part(s, &h, 2) != 1024;
    }
    if (whole * 10 < n * 6 || split * 10 > mutants * 3)
        fail_msg("%d of %d samples run k whole, %d of their %d tile mutants "
                 "split it",
                 whole, n, split, mutants);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* The cache tiling around a whole-k register tile reads A again once per
 * column panel: 128-column panels (B's 1024 x 128 in 512 KiB, A read 8
 * times) read no operand again, 32- and 64-column ones do (A read 32 and
 * 16 times: 0.90x-0.93x and 0.92x of them on 1 thread,
 * docs/performance.md), and so do 256-column ones (a 1 MiB panel does
 * not stay in cache beside A's rows: 0.80x).  All grade alike for the
 * mutations; of the samples that run k whole, most read no operand more
 * often than the panel tiling does (59% of these; 10% without the rule). */
static void
test_search_tile_reads_operands_once(void **state)
{
    struct kt_dag *dag = gemm1024();
    struct kt_search *s = ktt_avx512_search(dag);
    struct kt_rng r;
    int t, whole = 0, once = 0;
    (void)state;

    assert_false(gemm_cols_rereads(s, "8,4,32", "1024"));
    assert_false(gemm_cols_rereads(s, "1,4,32", "1024"));
    assert_true(gemm_cols_rereads(s, "32,1,32", "1024"));
    assert_true(gemm_cols_rereads(s, "16,2,32", "1024"));
    assert_true(gemm_cols_rereads(s, "4,8,32", "1024"));
    assert_int_equal(gemm_cols_grade(s, "32,1,32", "1024"), SK_TILE_REUSING);
    kt_rng_seed(&r, 12);
    for (t = 0; t < 2000; t++) {
        struct sk_genome g;
        sk_sample(s, &r, &g);
        if (s->sk[g.sketch].nslots == 0 || reg_part(s, &g, 2) != 1024)
            continue;
        whole++;
        once += !sk_tile_rereads(s, &g, 0);
    }
    if (once * 2 < whole)
        fail_msg("%d of %d samples that run k whole read no operand again "
                 "more than a panel tiling",
                 once, whole);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* The reads are one core's: dense 128 x 3072 x 768 (W 9.4 MB) with the
 * rows in 2 outermost parts reads all of W twice on one core, once on
 * each of two.  Whole-k samples that read no operand again, their rows'
 * outermost part made 2 (a factor 2 moved out of an inner part), read
 * W again on one core and not on two (all 593 of these), and samples
 * rank tiles by the 2-core count. */
static void
test_search_tile_rereads_per_core(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_search *one = NULL, *two = NULL;
    struct kt_search_opts o;
    struct kt_rng r;
    char err[512];
    int t, p, moved = 0, apart = 0, whole;
    (void)state;

    assert_int_equal(kt_op_dense(&d, 128, 3072, 768, 0), KT_OK);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    kt_search_opts_default(&o);
    o.vector_bytes = 64;
    o.cores = 1;
    assert_int_equal(kt_search_new(&one, dag, &o, err, sizeof(err)), KT_OK);
    o.cores = 2;
    assert_int_equal(kt_search_new(&two, dag, &o, err, sizeof(err)), KT_OK);
    assert_int_equal(one->nsketches, two->nsketches);
    kt_rng_seed(&r, 13);
    for (t = 0; t < 2000; t++) {
        struct sk_genome g;
        sk_sample(two, &r, &g);
        if (two->sk[g.sketch].nslots == 0 || reg_part(two, &g, 2) != 768 ||
            g.tiles[0][0][0] != 1 || sk_tile_rereads(two, &g, 0))
            continue;
        for (p = 1; p < two->fac[g.sketch][0][0]->n; p++)
            if (g.tiles[0][0][p] % 2 == 0)
                break;
        if (p == two->fac[g.sketch][0][0]->n)
            continue;
        g.tiles[0][0][p] /= 2;
        g.tiles[0][0][0] = 2;
        moved++;
        if (!sk_tile_rereads(one, &g, 0))
            fail_msg("rows in 2 outermost parts, one core: W read once");
        apart += !sk_tile_rereads(two, &g, 0);
    }
    if (moved < 20 || apart * 10 < moved * 9)
        fail_msg("%d of %d tilings with rows in 2 outermost parts read no "
                 "operand again on two cores",
                 apart, moved);
    /* and the samples rank their tiles so: of the 2-core search's
     * samples that run k whole, 364 of 1,094 read W again only when
     * counted on one core (39 when ranked before their stages were
     * parallel, as one core's) */
    kt_rng_seed(&r, 14);
    for (t = whole = apart = 0; t < 2000; t++) {
        struct sk_genome g;
        sk_sample(two, &r, &g);
        if (two->sk[g.sketch].nslots == 0 || reg_part(two, &g, 2) != 768)
            continue;
        whole++;
        apart += sk_tile_rereads(one, &g, 0) && !sk_tile_rereads(two, &g, 0);
    }
    if (whole < 500 || apart * 5 < whole)
        fail_msg("%d of %d whole-k samples of a 2-core search read W again "
                 "only on one core",
                 apart, whole);
    kt_search_free(one);
    kt_search_free(two);
    kt_dag_free(dag);
}

/* Every one of the n neighbours keeps each axis's extent, builds, and
 * computes what the reference does. */
static void
check_neighbours(const struct kt_dag *dag, const struct kt_search *s,
                 const struct sk_member *nb, int n)
{
    struct kt_state *picked[SK_MAX_NEIGHBOURS] = {0};
    char err[512];
    int i, a, l, skipped = 0;

    for (i = 0; i < n; i++) {
        const struct sk_genome *h = &nb[i].g;
        const struct kt_sstage *ss =
            &s->sk[h->sketch].base->stages[s->sk[h->sketch].slot_stage[0]];
        for (a = 0; a < ss->naxes; a++) {
            int64_t p = 1;
            for (l = 0; l < s->fac[h->sketch][0][a]->n; l++)
                p *= h->tiles[0][a][l];
            assert_int_equal(p, ss->axes[a].extent);
        }
        picked[i] = sk_build(s, h, err, sizeof(err));
        if (picked[i] == NULL)
            fail_msg("neighbour %d does not build: %s", i, err);
    }
    assert_int_equal(ktt_check_many(dag, picked, n, 11, &skipped), 0);
    assert_int_equal(skipped, 0);
    for (i = 0; i < n; i++)
        kt_state_free(picked[i]);
}

/* The neighbours of a GEMM's register-blocked 8 x 32 tile whose reduction
 * is split include the 4 x 64 tile of the same size (a divisor exchanged
 * between the two axes' register parts, which a divisor moved within one
 * axis cannot give), the 4 x 32 tile one divisor of the rows smaller (not
 * 16 x 32: its 32 accumulators leave no register for the operands), and
 * the same tile with the whole reduction inside.  From 4 x 32 the 8 x 32
 * tile is one divisor of the rows larger.  The sample's k in two levels
 * has nothing spatial between them (one pass, SK_TILE_REUSING): the
 * divisor the rows give moves outside them (give_outside_run), else
 * neither 4 x 64 nor 4 x 32 would grade as high and be offered. */
static void
test_search_tile_neighbours(void **state)
{
    struct kt_dag *dag = NULL;
    struct kt_search *s;
    struct sk_member m, *nb;
    struct kt_rng r;
    int i, n, reshaped = 0, whole = 0, grown = 0, shrunk = 0;
    (void)state;

    s = gemm_blocked_8x32(&dag, &r, &m, 0);
    assert_int_equal(sk_grade_tile(s, &m.g, 0), SK_TILE_REUSING);
    nb = kt_xcalloc(SK_MAX_NEIGHBOURS, sizeof(*nb));
    n = sk_gene_neighbours(s, &r, &m, nb, SK_MAX_NEIGHBOURS);
    for (i = 0; i < n; i++) {
        reshaped += reg_part(s, &nb[i].g, 0) == 4 &&
                    reg_part(s, &nb[i].g, 1) == 64;
        grown += reg_part(s, &nb[i].g, 0) == 16 &&
                 reg_part(s, &nb[i].g, 1) == 32;
        shrunk += reg_part(s, &nb[i].g, 0) == 4 &&
                  reg_part(s, &nb[i].g, 1) == 32;
        whole += reg_part(s, &nb[i].g, 0) == 8 &&
                 reg_part(s, &nb[i].g, 2) == 256;
    }
    if (reshaped != 1 || grown != 0 || shrunk != 1 || whole != 1)
        fail_msg("%d neighbours: %d with a 4 x 64 tile, %d with 16 x 32, %d "
                 "with 4 x 32, %d with all of k inside (want 1, 0, 1, 1)",
                 n, reshaped, grown, shrunk, whole);
    check_neighbours(dag, s, nb, n);
    for (i = 0; i < n; i++)
        if (reg_part(s, &nb[i].g, 0) == 4 && reg_part(s, &nb[i].g, 1) == 32)
            break;
    assert_true(i < n);
    m = nb[i];
    n = sk_gene_neighbours(s, &r, &m, nb, SK_MAX_NEIGHBOURS);
    for (i = grown = 0; i < n; i++)
        grown += reg_part(s, &nb[i].g, 0) == 8 &&
                 reg_part(s, &nb[i].g, 1) == 32;
    if (grown != 1)
        fail_msg("%d neighbours of the 4 x 32 tile: %d with 8 x 32 (want 1)", n,
                 grown);
    check_neighbours(dag, s, nb, n);
    free(nb);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* A register tile that fills the register file along the rows after its
 * columns took another register part is a neighbour: a 200 x 240 GEMM's
 * 25 x 16 tile (rows 2^3 x 5^2, 15 vectors of columns) has the 8 x 48
 * one, which no divisor exchange or single resize reaches (25 x 48
 * spills, 5 x 48 and 8 x 16 are each one move away), and 5 x 48 has it
 * by the rows alone.  (GEMM 1000^3's 8 x 48 tile ran 1.06x faster than
 * its 25 x 16 one, docs/search.md.)  A 77 x 96 product's 11 x 16 tile
 * (rows 7 x 11, 6 vectors of columns, which grow by their smallest
 * divisor to 32) has the 7 x 48 one, three vectors wide: the fastest tile
 * of the CLIP attention scores, where a run that settled on 11 x 16 ran
 * 0.86x of a 7 x 48 one on 1 thread (docs/performance.md). */
static void
test_search_filled_tile_neighbours(void **state)
{
    static const struct {
        int64_t m, n, k;
        int from[2], to[2];
    } cases[] = {
        {200, 240, 64, {25, 16}, {8, 48}},
        {200, 240, 64, {5, 48}, {8, 48}},
        {77, 96, 64, {11, 16}, {7, 48}},
    };
    struct sk_member m, *nb;
    struct kt_rng r;
    int i, n, tries, c, filled;
    (void)state;

    kt_rng_seed(&r, 3);
    nb = kt_xcalloc(SK_MAX_NEIGHBOURS, sizeof(*nb));
    for (c = 0; c < (int)(sizeof(cases) / sizeof(cases[0])); c++) {
        struct kt_dag *dag = matmul_dag(cases[c].m, cases[c].n, cases[c].k);
        struct kt_search *s = ktt_avx512_search(dag);
        memset(&m, 0, sizeof(m));
        for (tries = 0; tries < 200000; tries++) {
            sk_sample(s, &r, &m.g);
            if (s->sk[m.g.sketch].nslots > 0 &&
                reg_part(s, &m.g, 0) == cases[c].from[0] &&
                reg_part(s, &m.g, 1) == cases[c].from[1] &&
                sk_grade_tile(s, &m.g, 0) != SK_TILE_SPILLING)
                break;
        }
        if (tries == 200000)
            fail_msg("no %d x %d sample", cases[c].from[0], cases[c].from[1]);
        n = sk_gene_neighbours(s, &r, &m, nb, SK_MAX_NEIGHBOURS);
        for (i = filled = 0; i < n; i++)
            filled += reg_part(s, &nb[i].g, 0) == cases[c].to[0] &&
                      reg_part(s, &nb[i].g, 1) == cases[c].to[1];
        if (filled != 1)
            fail_msg("%d neighbours of the %d x %d tile: %d with %d x %d "
                     "(want 1)",
                     n, cases[c].from[0], cases[c].from[1], filled,
                     cases[c].to[0], cases[c].to[1]);
        for (i = 0; i < n; i++)
            if (memcmp(&nb[i].g, &m.g, sizeof(m.g)) == 0 ||
                (i > 0 && memcmp(&nb[i].g, &nb[i - 1].g, sizeof(m.g)) == 0))
                fail_msg("neighbour %d repeats a genome", i);
        check_neighbours(dag, s, nb, n);
        kt_search_free(s);
        kt_dag_free(dag);
    }
    free(nb);
}

/* A GEMM program with a spilling 8 x 64 tile (stored before spilling
 * tiles were graded) has neighbours, none of them spilling: its 8 x 32
 * and 4 x 64 tiles among them, not its other genes or cache tiles around
 * the same 8 x 64; nor does a tile mutation of it spill. */
static void
test_search_spilling_member_neighbours(void **state)
{
    struct kt_dag *dag = NULL;
    struct kt_search *s;
    struct sk_member m, *nb;
    struct kt_rng r;
    int i, n, l, narrow = 0, flat = 0, spilled = 0, mutants = 0;
    int32_t *cols;
    (void)state;

    s = gemm_blocked_8x32(&dag, &r, &m, 0);
    cols = m.g.tiles[0][1];
    l = s->fac[m.g.sketch][0][1]->n - 1;
    while (--l >= 0 && cols[l] % 2 != 0)
        ;
    assert_true(l >= 0);
    cols[l] /= 2;
    cols[s->fac[m.g.sketch][0][1]->n - 1] *= 2;
    assert_int_equal(reg_part(s, &m.g, 1), 64);
    assert_int_equal(sk_grade_tile(s, &m.g, 0), SK_TILE_SPILLING);
    nb = kt_xcalloc(SK_MAX_NEIGHBOURS, sizeof(*nb));
    n = sk_gene_neighbours(s, &r, &m, nb, SK_MAX_NEIGHBOURS);
    for (i = 0; i < n; i++) {
        spilled += gemm_tile_spills(s, &nb[i].g);
        narrow += reg_part(s, &nb[i].g, 0) == 8 &&
                  reg_part(s, &nb[i].g, 1) == 32;
        flat += reg_part(s, &nb[i].g, 0) == 4 && reg_part(s, &nb[i].g, 1) == 64;
    }
    if (spilled != 0 || narrow == 0 || flat == 0)
        fail_msg("%d neighbours of the 8 x 64 tile: %d spill, %d are 8 x 32, "
                 "%d 4 x 64",
                 n, spilled, narrow, flat);
    check_neighbours(dag, s, nb, n);
    for (i = spilled = 0; i < 400; i++) {
        struct sk_genome h = m.g;
        if (sk_mutate(s, &r, &h) != 0 || h.sketch != m.g.sketch ||
            memcmp(h.tiles, m.g.tiles, sizeof(h.tiles)) == 0)
            continue;
        mutants++;
        spilled += gemm_tile_spills(s, &h);
    }
    if (mutants < 100 || spilled != 0)
        fail_msg("%d of %d tile mutants of the 8 x 64 tile spill", spilled,
                 mutants);
    free(nb);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* Around an unchanged register tile, the neighbours move each outer part
 * of a spatial axis, or its smallest divisor, into the next part: rows
 * [4, 2, 4, 8] give [1, 8, 4, 8], [2, 4, 4, 8] and [4, 1, 8, 8] (2 is
 * all of the second part); columns [2, 1, 4, 32] give [1, 2, 4, 32] (a
 * part of 1 has nothing to move). */
static void
test_search_outer_part_neighbours(void **state)
{
    static const int32_t rows[4] = {4, 2, 4, 8}, cols[4] = {2, 1, 4, 32};
    static const int32_t want_rows[3][4] = {{1, 8, 4, 8},
                                            {2, 4, 4, 8},
                                            {4, 1, 8, 8}};
    static const int32_t want_cols[4] = {1, 2, 4, 32};
    struct kt_dag *dag = NULL;
    struct kt_search *s;
    struct sk_member m, *nb;
    struct kt_rng r;
    int i, w, n, found_rows[3] = {0}, found_cols = 0, other = 0;
    (void)state;

    s = gemm_blocked_8x32(&dag, &r, &m, 4);
    assert_int_equal(s->fac[m.g.sketch][0][1]->n, 4);
    memcpy(m.g.tiles[0][0], rows, sizeof(rows));
    memcpy(m.g.tiles[0][1], cols, sizeof(cols));
    nb = kt_xcalloc(SK_MAX_NEIGHBOURS, sizeof(*nb));
    n = sk_gene_neighbours(s, &r, &m, nb, SK_MAX_NEIGHBOURS);
    for (i = 0; i < n; i++) {
        const int32_t *hr = nb[i].g.tiles[0][0], *hc = nb[i].g.tiles[0][1];
        int same_rows = !memcmp(hr, rows, sizeof(rows));
        int same_cols = !memcmp(hc, cols, sizeof(cols));
        int known = same_rows && same_cols;
        for (w = 0; w < 3; w++)
            if (same_cols && !memcmp(hr, want_rows[w], sizeof(rows))) {
                found_rows[w]++;
                known = 1;
            }
        if (same_rows && !memcmp(hc, want_cols, sizeof(cols))) {
            found_cols++;
            known = 1;
        }
        /* the register exchanges change the last parts of both axes, a
         * larger or smaller register tile that of one */
        if (hr[3] != rows[3] || hc[3] != cols[3])
            known = 1;
        other += !known;
    }
    for (w = 0; w < 3; w++)
        if (found_rows[w] != 1)
            fail_msg("rows variant %d found %d times (want 1)", w,
                     found_rows[w]);
    if (found_cols != 1 || other != 0)
        fail_msg("columns variant found %d times (want 1), %d other "
                 "spatial tiles (want 0)",
                 found_cols, other);
    check_neighbours(dag, s, nb, n);
    free(nb);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* The padded attention product (200 x 224): a pack of a padded operand
 * built inside the kernel, with the padding inlined into it, is never
 * placed where the tiling rebuilds it more than 4 times (the runs that
 * ended on such forms repacked the 200-row A panel for each of 13 column
 * tiles: 0.48x of oneDNN against 0.68x).  One left at the root (a padded
 * copy of the whole operand) is built once. */
static void
test_search_padded_pack_not_rebuilt(void **state)
{
    struct kt_dag *dag = bmm_nt(197);
    struct kt_search *s;
    struct kt_search_batch b;
    int i, p, c, packs = 0;
    (void)state;

    random_batch(dag, 7, 512, &s, &b);
    for (i = 0; i < b.n; i++) {
        const struct kt_state *st = b.v[i].state;
        for (p = 0; p < st->nstages; p++) {
            const struct kt_sstage *ps = &st->stages[p];
            if (!ps->cache_read || ps->inlined || ps->prepacked ||
                !ps->body->guarded)
                continue;
            packs++;
            c = ps->attach_stage;
            if (c < 0)
                continue;
            if (sk_pack_rebuilt_often(&st->stages[c], ps->out))
                fail_msg("sample %d: %s is rebuilt for every tile", i,
                         ps->name);
        }
    }
    assert_true(packs > b.n / 4);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* The padded attention scores (197 -> 200 rows): A, broadcast from rows
 * read in order along k, is read in place with its row checks (its pack
 * inlined back) in about half the samples: 220 of these 512, against 11
 * (where its consumer's loops left no place for the pack) when a padded
 * operand's pack was never inlined by choice.  Those programs match the
 * reference. */
static void
test_search_padded_rows_read_in_place(void **state)
{
    struct kt_dag *dag = bmm_nt(197);
    struct kt_search *s;
    struct kt_search_batch b;
    struct kt_state *in_place[4];
    int i, p, n = 0, count = 0, skipped = 0;
    (void)state;

    random_batch(dag, 7, 512, &s, &b);
    for (i = 0; i < b.n; i++) {
        const struct kt_state *st = b.v[i].state;
        int a_in_place = 0;
        for (p = 0; p < st->nstages; p++) {
            const struct kt_sstage *ps = &st->stages[p];
            if (!ps->cache_read || !ps->inlined || !ps->body->guarded)
                continue;
            a_in_place |= ps->name[0] == 'A';
        }
        count += a_in_place;
        if (a_in_place && n < 4)
            in_place[n++] = kt_state_clone(st);
    }
    if (count < b.n / 8 || count > b.n * 3 / 4)
        fail_msg("%d of %d samples read A in place", count, b.n);
    assert_int_equal(ktt_check_many(dag, in_place, n, 11, &skipped), 0);
    assert_int_equal(skipped, 0);
    for (i = 0; i < n; i++)
        kt_state_free(in_place[i]);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* A stage tiled to hold its fused producer follows that producer's tiles
 * even when a lower stage, planned after the pair (stages are planned
 * last to first), inserts a pack or a cache write below them: in a
 * Winograd convolution (three tiled stages) the epilogue follows the
 * output transform, and the products' weight pack and local stage come
 * later.  With the pair's stage numbers left unshifted the epilogue
 * followed the products' tiles: no sample of this layer built. */
static void
test_search_follow_after_insert(void **state)
{
    struct kt_conv2d_params p = {1, 256, 14, 14, 256,
                                 3, 3,   1,  1,  1,
                                 1, 1,   1,  1,  KT_EPI_BIAS | KT_EPI_RELU};
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_search *s;
    struct kt_search_batch b;
    char err[512];
    int k, i, follows = 0;
    (void)state;

    assert_int_equal(kt_op_conv2d_winograd(&d, &p, 2), KT_OK);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    random_batch(dag, 5, 64, &s, &b);
    for (k = 0; k < s->nsketches; k++) {
        const struct sk_sketch *sk = &s->sk[k];
        for (i = 0; i < sk->base->nstages; i++) {
            const struct sk_plan *pl = &sk->plan[i];
            if (pl->role != SK_FOLLOW)
                continue;
            follows++;
            assert_true(pl->partner >= 0 && pl->partner < i);
            assert_int_equal(sk->plan[pl->partner].role, SK_MLT);
            assert_int_equal(sk->plan[pl->partner].partner, i);
            assert_true(kt_expr_reads(sk->base->stages[i].body,
                                      sk->base->stages[pl->partner].out));
        }
    }
    assert_true(follows > 0);
    if (b.n < 32)
        fail_msg("%d of 64 samples built", b.n);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* Whether stage i's reorder in st's steps is followed by an unroll
 * annotation of it: its window loop unrolled whole (search_build.c). */
static int
window_unrolled_whole(const struct kt_state *st, int i)
{
    int j;

    for (j = 0; j + 1 < st->nsteps; j++)
        if (st->steps[j].kind == KT_STEP_REORDER && st->steps[j].stage == i &&
            st->steps[j + 1].kind == KT_STEP_ANNOTATE &&
            st->steps[j + 1].stage == i &&
            st->steps[j + 1].v[0] == KT_ANN_UNROLL)
            return 1;
    return 0;
}

/* sk_unroll_window moves a stride-2 depthwise convolution's column taps
 * (3) next to the register tile and unrolls them whole, from samples
 * with the taps outside; applied again it changes nothing; a GEMM's k
 * is no window (its loop stays as it was). */
static void
test_search_window_unrolled_whole(void **state)
{
    struct kt_dag *dag = ktt_depthwise3x3(56, 2), *gemm = gemm1024();
    struct kt_search *s = ktt_avx512_search(dag);
    struct kt_search *sg = ktt_avx512_search(gemm);
    struct kt_rng r;
    int n, moved = 0, slot;
    (void)state;

    kt_rng_seed(&r, 29);
    for (n = 0; n < 256; n++) {
        struct sk_genome g;
        sk_sample(s, &r, &g);
        for (slot = 0; slot < s->sk[g.sketch].nslots; slot++) {
            int i = s->sk[g.sketch].slot_stage[slot];
            struct kt_state *st = sk_build(s, &g, NULL, 0);
            int skip = st == NULL || window_unrolled_whole(st, i);
            kt_state_free(st);
            if (skip || sk_unroll_window(s, &g, slot) != 0)
                continue;
            st = sk_build(s, &g, NULL, 0);
            assert_non_null(st);
            assert_true(window_unrolled_whole(st, i));
            kt_state_free(st);
            assert_int_equal(sk_unroll_window(s, &g, slot), -1);
            moved++;
        }
        sk_sample(sg, &r, &g);
        for (slot = 0; slot < sg->sk[g.sketch].nslots; slot++)
            assert_int_equal(sk_unroll_window(sg, &g, slot), -1);
    }
    assert_true(moved > 0);
    kt_search_free(s);
    kt_search_free(sg);
    kt_dag_free(dag);
    kt_dag_free(gemm);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_tile_keeps_batch_out),
        cmocka_unit_test(test_search_prime_extent_in_register_tile),
        cmocka_unit_test(test_search_wide_vector_run),
        cmocka_unit_test(test_search_tile_reuses_operands),
        cmocka_unit_test(test_search_tile_no_spills),
        cmocka_unit_test(test_search_tile_keeps_reduction_whole),
        cmocka_unit_test(test_search_tile_reads_operands_once),
        cmocka_unit_test(test_search_tile_rereads_per_core),
        cmocka_unit_test(test_search_whole_vector_axis),
        cmocka_unit_test(test_search_lane_multiple_axis),
        cmocka_unit_test(test_search_narrow_axis_whole),
        cmocka_unit_test(test_search_padded_row_whole),
        cmocka_unit_test(test_search_pack_counts_fused_repeats),
        cmocka_unit_test(test_search_pack_skips_rebuilding_points),
        cmocka_unit_test(test_search_pack_at_fused_loop),
        cmocka_unit_test(test_search_pack_hoisted_point),
        cmocka_unit_test(test_search_reduction_unroll),
        cmocka_unit_test(test_search_tile_neighbours),
        cmocka_unit_test(test_search_filled_tile_neighbours),
        cmocka_unit_test(test_search_spilling_member_neighbours),
        cmocka_unit_test(test_search_outer_part_neighbours),
        cmocka_unit_test(test_search_padded_pack_not_rebuilt),
        cmocka_unit_test(test_search_padded_rows_read_in_place),
        cmocka_unit_test(test_search_follow_after_insert),
        cmocka_unit_test(test_search_window_unrolled_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
