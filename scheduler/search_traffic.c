/* search_traffic.c - how often a matrix product's tiling reads its
 * operands from beyond the cache (sk_tile_rereads).
 *
 * A register tile that reuses its operands and runs the reduction whole
 * can still sit in a cache tiling that streams one operand many times: a
 * GEMM 1024^3 program that packs B in chunks of 32 columns reads all of
 * A (4 MiB) once per chunk, 32 times, where the hand form's 128-column
 * chunks (B's panel 512 KiB) read it 8 times.  With the same 8 x 32
 * register tile, 32-column chunks ran at 0.90x-0.93x of 128-column ones on
 * 1 thread (docs/search.md); the tuner's 2-thread timings do not tell
 * them apart, so register-blocked samples prefer, by rule, tilings that
 * read no operand again (sk_sample_sketch). */
#include <string.h>

#include "scheduler/search_int.h"

/* Bytes of cache one core can count on keeping a tile's operands in: a
 * Zen 5 core's L2; a Sapphire Rapids core has 2 MiB, but a 256-column
 * GEMM chunk (a 1 MiB panel of B) ran at 0.80x of 128-column ones. */
#define SK_CACHE_BYTES (1 << 20)
#define SK_ELEM_BYTES 4 /* float32 */
#define SK_MAX_OPERANDS 8

int
sk_is_operand(const struct kt_sstage *ss, const struct kt_expr *e)
{
    int r;

    if (e->op != KT_X_LOAD)
        return 0;
    for (r = ss->nspatial; r < ss->naxes; r++)
        if (kt_expr_load_uses(e, r))
            return 1;
    return 0;
}

static int
collect_operands(const struct kt_sstage *ss, const struct kt_expr *e,
                 const struct kt_expr **ops, int n)
{
    if (e == NULL)
        return n;
    if (sk_is_operand(ss, e) && n < SK_MAX_OPERANDS)
        ops[n++] = e;
    n = collect_operands(ss, e->a, ops, n);
    return collect_operands(ss, e->b, ops, n);
}

/* Elements load e touches while each axis a runs over ext[a] values. */
static double
footprint(const struct kt_expr *e, const int64_t *ext)
{
    double elems = 1;
    int d, t;

    for (d = 0; d < e->ndim; d++) {
        const struct kt_affine *x = &e->idx[d];
        double span = 1;
        for (t = 0; t < x->n; t++) {
            int64_t k = x->k[t] < 0 ? -x->k[t] : x->k[t];
            span += (double)k * (double)(ext[x->var[t]] - 1);
        }
        elems *= span;
    }
    return elems;
}

/* One loop of the tiling, inner loops already in ext: each operand it
 * moves reads new data each iteration; one it does not move is read
 * again each iteration unless what one iteration touches fits the cache
 * (then it stays there).  reads[] counts elements read. */
static void
add_loop(const struct kt_expr *const *ops, int nops, int64_t *ext, int a,
         int64_t extent, double *reads)
{
    double iteration = 0, before[SK_MAX_OPERANDS];
    int o;

    for (o = 0; o < nops; o++) {
        before[o] = footprint(ops[o], ext);
        iteration += before[o] * SK_ELEM_BYTES;
    }
    ext[a] *= extent;
    for (o = 0; o < nops; o++) {
        if (kt_expr_load_uses(ops[o], a))
            reads[o] *= footprint(ops[o], ext) / before[o];
        else if (iteration > SK_CACHE_BYTES)
            reads[o] *= (double)extent;
    }
}

/* The outermost loop with more than one iteration among the first
 * `fused` loops of the leading spatial levels (the ones the kernel fuses
 * and runs in parallel; InitParallel's 255 fuses at least up to it), as
 * its level in *pos and its axis in *axis (left as they are when there
 * is none). */
static void
first_parallel_loop(const struct kt_sstage *ss, const char *c,
                    const int32_t (*tiles)[SK_MAXP], int fused, int *pos,
                    int *axis)
{
    int p, a, n = 0;

    for (p = 0; c[p] == 'S'; p++)
        for (a = 0; a < ss->nspatial && n < fused; a++, n++)
            if (tiles[a][p] > 1) {
                *pos = p;
                *axis = a;
                return;
            }
}

int
sk_tile_rereads(const struct kt_search *s, const struct sk_genome *g, int slot)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    int i = sk->slot_stage[slot];
    /* the stage whose loops hold the parallel one: the consumer a
     * cache-write tiling is fused into, else the stage itself */
    int root = sk->plan[i].partner >= 0 ? sk->plan[i].partner : i;
    const struct kt_sstage *ss = &sk->base->stages[i];
    const char *c = sk_structures[sk->plan[i].structure];
    const struct kt_expr *ops[SK_MAX_OPERANDS];
    int part[2], pos, a, o, nops = collect_operands(ss, ss->body, ops, 0);
    int par_pos = -1, par_axis = -1;
    int64_t ext[KT_MAX_AXES], run = 1;
    double reads[SK_MAX_OPERANDS], flops = 2, excess = 0, panel_excess;

    part[0] = sk_nparts(&sk->plan[i], 0);
    part[1] = sk_nparts(&sk->plan[i], 1);
    for (a = 0; a < ss->naxes; a++) {
        ext[a] = 1;
        if (ss->axes[a].reduce)
            run *= ss->axes[a].extent;
    }
    for (o = 0; o < nops; o++)
        reads[o] = 1;
    /* One core's share: each runs its own range of the parallel loops and
     * keeps its operands in its own cache, so an operand the rows' two
     * halves both read is read once by each core, not twice by one. */
    if (s->o.cores > 1)
        first_parallel_loop(ss, c, g->tiles[slot], g->par[root], &par_pos,
                            &par_axis);
    /* the loops from the innermost out, a level's axes last to first */
    for (pos = (int)strlen(c) - 1; pos >= 0; pos--) {
        int reduce = c[pos] == 'R', p = --part[reduce];
        for (a = ss->naxes - 1; a >= 0; a--) {
            int64_t n = g->tiles[slot][a][p];
            if (pos == par_pos && a == par_axis)
                n = (n + s->o.cores - 1) / s->o.cores;
            if (ss->axes[a].reduce == reduce && n > 1)
                add_loop(ops, nops, ext, a, n, reads);
        }
    }
    for (a = 0; a < ss->naxes; a++)
        flops *= (double)ext[a];
    for (o = 0; o < nops; o++)
        excess += (reads[o] - footprint(ops[o], ext)) * SK_ELEM_BYTES;
    /* A panel tiling keeps one operand's run x W panel in half the cache
     * (W = cache / (2 run 4 bytes)) and reads the other once per W
     * columns: 2 / W bytes of it per flop beyond its first read. */
    panel_excess = flops * 2.0 * (2.0 * (double)run * SK_ELEM_BYTES) /
                   (double)SK_CACHE_BYTES;
    return excess > panel_excess;
}
