/* codegen_lanes.c - the vector widths and buffer layout of the C code
 * generator (ir/codegen.c): the lanes each chunk of a vectorized loop
 * takes (the widest dividing width, wide vectors and a narrow tail, or
 * whole vectors along padded rows) and the rows of non-argument buffers
 * padded to whole vectors. */
#include "ir/codegen_int.h"

/* The widest of W, W/2, W/4 (at least 4) dividing e, or 1. */
static int
dividing_lanes(int vector_bytes, int64_t e)
{
    int w = vector_bytes / 4;

    for (; w >= 4; w /= 2)
        if (e % w == 0)
            return w;
    return 1;
}

/* Wide vectors and a narrow tail only where no wide width divides: a
 * 1000-wide GEMM's 5 x 40 tile ran 123 GFLOPS as 8-lane vectors and 108
 * as 16 + 16 + 8 (its rows are 32-byte aligned, so a 16-lane load splits
 * a cache line every other time); a dense layer's 4 x 40 tile on rows
 * padded to 48 ran 121 as 8-lane vectors, 97 as 16 + 16 + 8 (an 8-lane
 * and a 16-lane broadcast of every A element) and 121 as 16 + 16 + 16.
 * padded: the loop may run whole vectors into the rows' padding. */
static int
chunk_lanes(int vector_bytes, int64_t e, int64_t at, int padded)
{
    int w = vector_bytes / 4, d = dividing_lanes(vector_bytes, e);

    if (d >= w)
        return d;
    if (padded && w >= 4)
        return w;
    if (d >= 8)
        return d;
    for (; w >= 4; w /= 2)
        if (at + w <= e)
            return w;
    return 1;
}

int
kt_vector_chunk_lanes(int vector_bytes, int64_t e, int64_t at)
{
    return chunk_lanes(vector_bytes, e, at, 0);
}

int64_t
kt_vector_chunks(int vector_bytes, int64_t e)
{
    int64_t at, n = 0;

    for (at = 0; at < e; at += kt_vector_chunk_lanes(vector_bytes, e, at))
        n++;
    return n;
}

int64_t
kt_vector_chunks_padded(int vector_bytes, int64_t e)
{
    int64_t w = vector_bytes / 4;

    if (w < 4 || e <= w / 2)
        return kt_vector_chunks(vector_bytes, e);
    return (e + w - 1) / w;
}

int
kt__cg_lanes_for(const struct cg *g, int64_t e)
{
    return dividing_lanes(g->o->vector_bytes, e);
}

/* Whether guarded read e moves with var along its last dimension only,
 * at a stride of 1 to 4: every lane is checked, and its edge vectors are
 * masked loads (kt__cg_row_step), so lanes past the loop's extent read
 * padding and touch nothing outside the buffer. */
static int
guard_masks_along_rows(const struct kt_expr *e, int var)
{
    int64_t c = kt__cg_row_step(e, var);

    return c >= 1 && c <= KT_CG_MAX_SHUFFLE_STRIDE;
}

int
kt__cg_reads_guarded(const struct kt_expr *e, int var)
{
    int a, b;

    if (e == NULL)
        return 0;
    if (e->op == KT_X_LOAD)
        return !e->guarded ? 0 : guard_masks_along_rows(e, var) ? 1 : 2;
    a = kt__cg_reads_guarded(e->a, var);
    b = kt__cg_reads_guarded(e->b, var);
    return a > b ? a : b;
}

/* A loop that reads padding (guarded loads) keeps one width dividing its
 * extent: each guarded vector read carries a lane-by-lane fallback, and a
 * max pooling's padded copies and window reads (57 or 7 wide) as wide
 * vectors and tails weighed 650-2035 where the code-size bound is 512,
 * so the search dropped the sketch reading the padding in place.  Only
 * where every guarded read is masked and every other access runs along
 * padded rows does it take whole vectors into the padding (a stride-2
 * depthwise convolution's 28-wide register tile as 2 x 16 lanes instead
 * of 7 x 4).  Returns as kt__cg_reads_guarded. */
static int
loop_reads_guarded(const struct kt_node *n)
{
    int k, r = 0, kr;

    for (k = 0; k < n->nkids; k++)
        if (n->kids[k]->kind == KT_N_STORE) {
            kr = kt__cg_reads_guarded(n->kids[k]->expr, n->var);
            r = kr > r ? kr : r;
        }
    return r;
}

/* How the rows a vectorized loop touches lie for target vectors: */
enum rows {
    ROWS_NARROW, /* as they are: the loop takes kt_vector_chunk_lanes */
    ROWS_PADDED  /* the loop runs along padded rows only, each starting
                  * on a whole vector: its last vector may run on into the
                  * padding (40 = 16 + 16 + 16 in rows of 48) */
};

int64_t
kt__cg_buf_slack(const struct cg *g, int b)
{
    const struct kt_lbuf *buf = &g->lt->bufs[b];

    if ((buf->scope != KT_BUF_LOCAL && buf->scope != KT_BUF_HEAP) ||
        (g->slack != NULL && !g->slack[b]))
        return 0;
    return g->o->vector_bytes / 4;
}

/* How far past the end of its row (its pitch) read row of buffer b
 * reaches when loop top runs whole vectors of w lanes over it: the
 * largest offset of the row's other terms (a 3x3 window's column tap s in
 * I_pad[r][c + s]) plus the lanes' end, in *over; 0 when v is not the
 * row's contiguous index or an offset's range is unknown. */
static int
read_overrun(const struct cg *g, const struct kt_node *top, int b,
             const struct kt_affine *row, int w, int64_t *over)
{
    const struct kt_lbuf *buf = &g->lt->bufs[b];
    int64_t hi = row->c;
    int i;

    if (kt_aff_coef(row, top->var) != 1 || g->var_max == NULL)
        return 0;
    for (i = 0; i < row->n; i++) {
        if (row->var[i] == top->var || row->k[i] <= 0)
            continue;
        if (g->var_max[row->var[i]] < 0)
            return 0;
        hi += row->k[i] * g->var_max[row->var[i]];
    }
    *over = hi + (top->extent + w - 1) / w * w -
            kt__cg_pitch(g, buf, buf->ndim - 1);
    return 1;
}

/* The rows access idx of buffer b makes along the variable v of
 * vectorized loop top, with vectors of w lanes: padded when the loop
 * runs along whole rows, indexed by v alone, whose padding holds a whole
 * vector (rows then start on whole vectors; the padding starts as zeros,
 * emit_zero_padding).  A read of a local or intermediate buffer may
 * also be at an offset along its rows or in rows longer than the loop:
 * its lanes past the loop's extent read on into the row's padding, the
 * next row or the slack after the last row (kt__cg_buf_slack), never
 * past it, and their results only reach the store's padding (a 3 x 3
 * depthwise convolution's 56-wide rows, read at column taps 0-2 of a
 * padded copy 58 wide, as 4 x 16 lanes instead of 7 x 8).  A broadcast
 * (v absent) reads no rows; a lane reduction's target is no row. */
static enum rows
access_rows(const struct cg *g, const struct kt_node *top, int b,
            const struct kt_affine *idx, int w, int store)
{
    const struct kt_lbuf *buf = &g->lt->bufs[b];
    const struct kt_affine *row = &idx[buf->ndim - 1];
    int64_t e = top->extent, over;
    int d;

    for (d = 0; d < buf->ndim - 1; d++)
        if (kt_aff_coef(&idx[d], top->var) != 0)
            return ROWS_NARROW;
    if (kt_aff_coef(row, top->var) == 0)
        return store ? ROWS_NARROW : ROWS_PADDED;
    if (buf->scope == KT_BUF_ARG)
        return ROWS_NARROW;
    if (!store)
        return read_overrun(g, top, b, row, w, &over) &&
                       over <= kt__cg_buf_slack(g, b)
                   ? ROWS_PADDED
                   : ROWS_NARROW;
    if (row->n != 1 || row->k[0] != 1 || row->c != 0 ||
        buf->shape[buf->ndim - 1] != e ||
        (e + w - 1) / w * w > kt__cg_pitch(g, buf, buf->ndim - 1))
        return ROWS_NARROW;
    return ROWS_PADDED;
}

static enum rows
min_rows(enum rows a, enum rows b)
{
    return a < b ? a : b;
}

static enum rows
expr_rows(const struct cg *g, const struct kt_node *top,
          const struct kt_expr *e, int w)
{
    if (e == NULL)
        return ROWS_PADDED;
    if (e->op == KT_X_LOAD && e->guarded && guard_masks_along_rows(e, top->var))
        return ROWS_PADDED;
    if (e->op == KT_X_LOAD)
        return access_rows(g, top, e->src, e->idx, w, 0);
    return min_rows(expr_rows(g, top, e->a, w), expr_rows(g, top, e->b, w));
}

/* The rows of every access under n in vectorized loop top. */
static enum rows
loop_rows(const struct cg *g, const struct kt_node *top,
          const struct kt_node *n)
{
    int w = g->o->vector_bytes / 4, k;
    enum rows r = ROWS_PADDED;

    if (w < 4)
        return ROWS_NARROW;
    if (n->kind == KT_N_STORE)
        return min_rows(access_rows(g, top, n->buf, n->idx, w, 1),
                        expr_rows(g, top, n->expr, w));
    for (k = 0; k < n->nkids && r != ROWS_NARROW; k++)
        r = min_rows(r, loop_rows(g, top, n->kids[k]));
    return r;
}

/* Marks in need the buffers a read under vectorized loop top runs past
 * the end of (read_overrun). */
static void
mark_overruns(const struct cg *g, const struct kt_node *top,
              const struct kt_expr *e, unsigned char *need)
{
    int64_t over;

    if (e == NULL)
        return;
    if (e->op == KT_X_LOAD && !e->guarded &&
        g->lt->bufs[e->src].scope != KT_BUF_ARG &&
        read_overrun(g, top, e->src, &e->idx[g->lt->bufs[e->src].ndim - 1],
                     g->o->vector_bytes / 4, &over) &&
        over > 0)
        need[e->src] = 1;
    mark_overruns(g, top, e->a, need);
    mark_overruns(g, top, e->b, need);
}

void
kt__cg_plan_slack(const struct cg *g, const struct kt_node *n,
                  unsigned char *need)
{
    int k;

    if (n->kind == KT_N_LOOP && n->ann == KT_ANN_VECTORIZE &&
        kt__cg_only_stores(n) &&
        (kt__cg_lane_rule(g, n) == KT_CG_LANES_PADDED ||
         kt__cg_lane_rule(g, n) == KT_CG_LANES_MASKED))
        for (k = 0; k < n->nkids; k++)
            mark_overruns(g, n, n->kids[k]->expr, need);
    for (k = 0; k < n->nkids; k++)
        kt__cg_plan_slack(g, n->kids[k], need);
}

/* Whether store s under vectorized loop top copies along the rows of an
 * argument: a value computed lane by lane (no constant, no reduction),
 * unguarded, into consecutive elements of its last dimension only. */
static int
copies_along_arg_row(const struct cg *g, const struct kt_node *top,
                     const struct kt_node *s)
{
    const struct kt_lbuf *buf;
    int d;

    if (s->kind != KT_N_STORE || s->guarded || s->op != KT_ASSIGN ||
        s->expr->op == KT_X_CONST)
        return 0;
    buf = &g->lt->bufs[s->buf];
    if (buf->scope != KT_BUF_ARG)
        return 0;
    for (d = 0; d < buf->ndim - 1; d++)
        if (kt_aff_coef(&s->idx[d], top->var) != 0)
            return 0;
    return kt_aff_coef(&s->idx[buf->ndim - 1], top->var) == 1;
}

/* Whether vectorized loop n runs whole vectors and masks its last store
 * (KT_CG_LANES_MASKED): where narrow chunks would end in scalars (an
 * extent no 4 lanes divide) or all be narrow (8-lane chunks of an extent
 * longer than a vector that no whole vector divides), its stores all copy
 * along an argument's rows and its reads may run on into padding (as
 * along padded rows).  Masked stores are one instruction with AVX-512
 * only, so wider vectors only.  A 14 x 14 depthwise convolution's bias +
 * ReLU out of its padded tile, 8 + 4 + 1 + 1 lanes a row before, ran 1.2x
 * faster as one masked 16-lane store; a 56 x 56 one's, 7 x 8 lanes a row,
 * 1.4x faster as 3 x 16 and a masked 16.  A 28-wide row stays 16 + 8 + 4:
 * as 16 and a masked 16 it ran 0.93x (docs/performance.md). */
static int
masks_tail(const struct cg *g, const struct kt_node *n)
{
    int w = g->o->vector_bytes / 4, k;
    int all_narrow = n->extent > w &&
                     dividing_lanes(g->o->vector_bytes, n->extent) >= 8;

    if (w < 16 || (n->extent % 4 == 0 && !all_narrow))
        return 0;
    for (k = 0; k < n->nkids; k++)
        if (!copies_along_arg_row(g, n, n->kids[k]) ||
            expr_rows(g, n, n->kids[k]->expr, w) != ROWS_PADDED)
            return 0;
    return n->nkids > 0;
}

int
kt__cg_lane_rule(const struct cg *g, const struct kt_node *n)
{
    int w = g->o->vector_bytes / 4, guarded;

    /* whole target vectors cover it under every rule: nothing to walk */
    if (w >= 4 && n->extent % w == 0)
        return KT_CG_LANES_NARROW;
    guarded = loop_reads_guarded(n);
    if (guarded == 2)
        return KT_CG_LANES_DIVIDING;
    if (loop_rows(g, n, n) == ROWS_PADDED)
        return KT_CG_LANES_PADDED;
    if (masks_tail(g, n))
        return KT_CG_LANES_MASKED;
    return guarded ? KT_CG_LANES_DIVIDING : KT_CG_LANES_NARROW;
}

int
kt__cg_rule_lanes(const struct cg *g, const struct kt_node *n, int rule,
                  int64_t i)
{
    if (rule == KT_CG_LANES_DIVIDING)
        return kt__cg_lanes_for(g, n->extent);
    return chunk_lanes(g->o->vector_bytes, n->extent, i,
                       rule == KT_CG_LANES_PADDED ||
                           rule == KT_CG_LANES_MASKED);
}

int
kt__cg_chunk_lanes(const struct cg *g, const struct kt_node *n, int64_t i)
{
    return kt__cg_rule_lanes(g, n, kt__cg_lane_rule(g, n), i);
}

int64_t
kt__cg_chunks(const struct cg *g, const struct kt_node *n)
{
    int rule = kt__cg_lane_rule(g, n);
    int64_t at, c = 0;

    for (at = 0; at < n->extent; at += kt__cg_rule_lanes(g, n, rule, at))
        c++;
    return c;
}

/* Rows (the innermost dimension) of a local tile, root intermediate or
 * packed weight longer than half a vector that vectors do not fill are
 * laid out padded to whole vectors: each row then starts 64-byte aligned,
 * and a wide load of a row's chunk does not split a cache line (the
 * 197-wide pack of a ViT's attention B, read 16 lanes at a time, misses
 * the alignment in 15 rows of 16 otherwise), and a loop along whole
 * padded rows runs whole vectors into the padding (a classifier's weights
 * packed in 40-wide rows: 3 x 16 lanes instead of 5 x 8; a 14 x 14
 * depthwise convolution's 14-wide rows one vector of 16 instead of 14
 * scalars: 1.31x / 1.18x on 1 / 2 threads, docs/performance.md).
 * Arguments keep their shape. */
int64_t
kt_lbuf_pitch(const struct kt_lbuf *b, int d, int vector_bytes)
{
    int64_t e = b->shape[d];
    int64_t w = vector_bytes / 4;

    if (d != b->ndim - 1 || b->ndim < 2 || w < 4 || e <= w / 2 || e % w == 0 ||
        b->scope == KT_BUF_ARG)
        return e;
    return (e + w - 1) / w * w;
}

int64_t
kt_lbuf_stored_elems(const struct kt_lbuf *b, int vector_bytes)
{
    int64_t n = 1;
    int d;

    for (d = 0; d < b->ndim; d++)
        n *= kt_lbuf_pitch(b, d, vector_bytes);
    return n;
}

int64_t
kt__cg_pitch(const struct cg *g, const struct kt_lbuf *b, int d)
{
    return kt_lbuf_pitch(b, d, g->o->vector_bytes);
}

int64_t
kt__cg_buf_elems(const struct cg *g, const struct kt_lbuf *b)
{
    return kt_lbuf_stored_elems(b, g->o->vector_bytes);
}
