/* codegen_load.c - the reads of the C code generator's expressions
 * (ir/codegen_expr.c): a buffer element as a scalar, or w lanes of it as
 * a GCC vector -- contiguous, broadcast, strided (contiguous loads and
 * shuffles), gathered, or guarded by bounds checks at padding edges. */
#include "ir/codegen_int.h"

/* The checks of guarded read e as a vector from lane 0 to lane last (0:
 * one element) at row (of row_var, -1 for none), "1" when none is
 * needed; returns how many. */
static int
put_span_bounds(struct cg *g, struct kt_buf *b, const struct kt_expr *e,
                int lane_var, int last, int row_var, int row)
{
    int nchecks = 0;

    kt__cg_put_index_bounds(g, b, &nchecks, e->src, e->idx, e->ndim, lane_var,
                            0, row_var, row, 0);
    if (last > 0)
        kt__cg_put_index_bounds(g, b, &nchecks, e->src, e->idx, e->ndim,
                                lane_var, last, row_var, row, 1);
    kt__cg_end_checks(b, nchecks);
    return nchecks;
}

/* The checks of guarded read e at the constant lane (of lane_var), "1"
 * when none is needed; returns how many. */
static int
put_lane_bounds(struct cg *g, struct kt_buf *b, const struct kt_expr *e,
                int lane_var, int lane)
{
    int nchecks = 0;

    kt__cg_put_index_bounds(g, b, &nchecks, e->src, e->idx, e->ndim, lane_var,
                            lane, -1, 0, 0);
    kt__cg_end_checks(b, nchecks);
    return nchecks;
}

static void
put_load_scalar(struct cg *g, struct kt_buf *b, const struct kt_expr *e,
                const struct kt_affine *addr, int lane_var, int lane)
{
    const struct kt_lbuf *buf = &g->lt->bufs[e->src];
    struct kt_buf checks;
    int nchecks = 0;

    kt_buf_init(&checks);
    if (e->guarded)
        nchecks = put_lane_bounds(g, &checks, e, lane_var, lane);
    if (nchecks == 0) {
        kt_buf_printf(b, "t_%s[", buf->name);
        kt__cg_put_aff(g, b, addr);
        kt_buf_puts(b, "]");
    } else {
        kt_buf_printf(b, "((%s) ? t_%s[", checks.p, buf->name);
        kt__cg_put_aff(g, b, addr);
        kt_buf_puts(b, "] : ");
        kt__cg_put_float(b, e->pad_value);
        kt_buf_puts(b, ")");
    }
    kt_buf_free(&checks);
}

int64_t
kt__cg_row_step(const struct kt_expr *e, int var)
{
    int d;

    if (e->ndim < 1)
        return 0;
    for (d = 0; d < e->ndim - 1; d++)
        if (kt_aff_coef(&e->idx[d], var) != 0)
            return 0;
    return kt_aff_coef(&e->idx[e->ndim - 1], var);
}

/* A guarded read at its edge vectors: e, its row (of row_var, -1: none)
 * fixed at row; alone when no check of the whole vector precedes it (its
 * masks then decide every lane, padding or not). */
struct guard {
    const struct kt_expr *e;
    int row_var, row, alone;
};

/* The bounds mask of the w elements from addr + at of guarded read e,
 * which moves with the lanes along its last dimension only (its row, of
 * row_var, fixed at row): the elements inside along every dimension.
 * Adds to *along the parts the lane dimension needs. */
static void
put_span_mask(struct cg *g, struct kt_buf *b, const struct kt_expr *e,
              int row_var, int row, int64_t at, int w, int *along)
{
    const struct kt_lbuf *buf = &g->lt->bufs[e->src];
    int d, nparts = 0, before;

    for (d = 0; d < e->ndim; d++) {
        struct kt_affine a;
        int last = d == e->ndim - 1;
        kt__cg_subst(g, &e->idx[d], -1, &a);
        if (row_var >= 0 && row)
            a.c += kt_aff_coef(&e->idx[d], row_var) * row;
        if (last)
            a.c += at;
        before = nparts;
        kt__cg_put_lane_mask(g, b, &nparts, &a, last, w, buf->shape[d]);
        if (last)
            *along += nparts - before;
    }
    kt__cg_end_mask(b, nparts);
}

/* The stride contiguous loads (masked by mask[j] with pad when masked)
 * from addr + start[j] merged by shuffles into the w lanes at addr +
 * stride * lane.  Round j merges vector j into lanes picked so far (j = 1
 * merges vectors 0 and 1). */
static void
put_shuffled(struct cg *g, struct kt_buf *b, const char *name,
             const struct kt_affine *addr, int64_t stride, int w,
             const int64_t *start, const struct kt_expr *masked,
             const struct kt_buf *mask, const struct kt_buf *pad)
{
    int nvec = (int)stride, j, l;

    for (j = 1; j < nvec; j++)
        kt_buf_puts(b, "__builtin_shufflevector(");
    for (j = 0; j < nvec; j++) {
        struct kt_affine a = *addr;
        a.c += start[j];
        if (j > 0)
            kt_buf_puts(b, ", ");
        kt_buf_printf(b, "kt_ld%s%d(&t_%s[", masked != NULL ? "m" : "", w,
                      name);
        kt__cg_put_aff(g, b, &a);
        if (masked != NULL)
            kt_buf_printf(b, "], %s, %s)", mask[j].p, pad->p);
        else
            kt_buf_puts(b, "])");
        if (j == 0)
            continue;
        for (l = 0; l < w; l++) {
            int64_t e = stride * l;
            int from = (int)(e / w < nvec - 1 ? e / w : nvec - 1);
            int64_t pick;
            if (from == j)
                pick = w + (e - start[j]); /* from the new vector */
            else if (from < j)
                pick = j == 1 ? e - start[0] : l; /* already placed */
            else
                pick = 0; /* placed by a later round */
            kt_buf_printf(b, ", %lld", (long long)pick);
        }
        kt_buf_puts(b, ")");
    }
}

/* A vector of w lanes read at addr + stride*lane, for a small constant
 * stride, as 'stride' contiguous loads combined by shuffles instead of w
 * scalar loads.  The last load ends at the last lane's element, so exactly
 * the span the scalar gather reads is touched (nothing past it).  With a
 * guard (a guarded read moving along its last dimension only), each load
 * is a masked load of the elements inside (padding elsewhere): a vector
 * at the edge of the padding without a loop over its lanes.  Returns
 * how many of the masks' parts check the lanes' own dimension. */
static int
put_strided_load(struct cg *g, struct kt_buf *b, int src,
                 const struct kt_affine *addr, int64_t stride, int w,
                 const struct guard *gd)
{
    const struct kt_expr *masked = gd != NULL ? gd->e : NULL;
    const char *name = g->lt->bufs[src].name;
    int64_t span = stride * (w - 1) + 1, start[KT_CG_MAX_SHUFFLE_STRIDE];
    int nvec = (int)stride, j, along = 0;
    struct kt_buf mask[KT_CG_MAX_SHUFFLE_STRIDE], pad;

    kt_buf_init(&pad);
    for (j = 0; j < nvec; j++) {
        start[j] = j == nvec - 1 ? span - w : (int64_t)j * w;
        kt_buf_init(&mask[j]);
        if (masked != NULL)
            put_span_mask(g, &mask[j], masked, gd->row_var, gd->row, start[j],
                          w, &along);
    }
    if (masked != NULL) {
        kt_buf_printf(&pad, "kt_bc%d(", w);
        kt__cg_put_float(&pad, masked->pad_value);
        kt_buf_puts(&pad, ")");
    }
    /* inside along the lanes everywhere after a failed check of the
     * vector: a check the lanes share failed, and every lane is padding */
    if (masked != NULL && along == 0 && !gd->alone)
        kt_buf_puts(b, pad.p);
    else
        put_shuffled(g, b, name, addr, stride, w, start, masked, mask, &pad);
    for (j = 0; j < nvec; j++)
        kt_buf_free(&mask[j]);
    kt_buf_free(&pad);
    return along;
}

/* The w lanes of e at addr + c * lane, read (and bounds-checked) one by
 * one. */
static void
put_gather(struct cg *g, struct kt_buf *b, const struct kt_expr *e,
           const struct kt_affine *addr, int lane_var, int64_t c, int w)
{
    int l;

    kt_buf_printf(b, "((kt_v%d){", w);
    for (l = 0; l < w; l++) {
        struct kt_affine al = *addr;
        al.c += c * l;
        if (l)
            kt_buf_puts(b, ", ");
        put_load_scalar(g, b, e, &al, lane_var, l);
    }
    kt_buf_puts(b, "})");
}

/* A vector of w lanes read at addr + lane. */
static void
put_contiguous_load(struct cg *g, struct kt_buf *b, int src,
                    const struct kt_affine *addr, int w)
{
    kt_buf_printf(b, "kt_ld%d(&t_%s[", w, g->lt->bufs[src].name);
    kt__cg_put_aff(g, b, addr);
    kt_buf_puts(b, "])");
}

/* The lanes of contiguous guarded read gd at addr + lane where the whole
 * vector is not in bounds: a masked load of the lanes inside, padding
 * elsewhere. */
static void
put_masked_read(struct cg *g, struct kt_buf *b, const struct guard *gd,
                const struct kt_affine *addr, int lane_var, int w)
{
    const struct kt_expr *e = gd->e;
    const struct kt_lbuf *buf = &g->lt->bufs[e->src];
    struct kt_buf mask, pad;
    int d, pass, nparts = 0;

    kt_buf_init(&mask);
    kt_buf_init(&pad);
    kt_buf_printf(&pad, "kt_bc%d(", w);
    kt__cg_put_float(&pad, e->pad_value);
    kt_buf_puts(&pad, ")");
    /* the dimensions along the lanes first: with none to check, the
     * failed check was one the lanes share, and every lane is padding */
    for (pass = 0; pass < 2; pass++) {
        for (d = 0; d < e->ndim; d++) {
            struct kt_affine a;
            int64_t step = kt_aff_coef(&e->idx[d], lane_var);
            if ((step == 0) != pass)
                continue;
            kt__cg_subst(g, &e->idx[d], -1, &a);
            if (gd->row_var >= 0 && gd->row)
                a.c += kt_aff_coef(&e->idx[d], gd->row_var) * gd->row;
            kt__cg_put_lane_mask(g, &mask, &nparts, &a, step, w, buf->shape[d]);
        }
        if (pass == 0 && nparts == 0)
            break;
    }
    if (nparts == 0) {
        kt_buf_puts(b, pad.p);
    } else {
        kt_buf_printf(b, "kt_ldm%d(&t_%s[", w, buf->name);
        kt__cg_put_aff(g, b, addr);
        kt_buf_printf(b, "], %s, %s)", mask.p, pad.p);
    }
    kt_buf_free(&mask);
    kt_buf_free(&pad);
}

/* A stride-2 depthwise convolution's 4-lane reads ran 7% slower with
 * masked edges than with the loop, which its rare edges (a fifth of its
 * vectors) enter; a max pooling's 8-lane ones (56-wide rows, 7 vectors,
 * AVX-512) ran 1.13x / 1.2x faster as masked loads alone. */
int
kt__cg_strided_masked(const struct cg *g, const struct kt_expr *e, int lane_var,
                      int64_t c, int w)
{
    int target = g->o->vector_bytes / 4;

    return c >= 2 && c <= KT_CG_MAX_SHUFFLE_STRIDE &&
           (w == target || (target == 16 && w == 8)) &&
           kt__cg_row_step(e, lane_var) == c;
}

/* The lanes of guarded read gd at addr + c * lane where the whole vector
 * is not in bounds: a masked load when contiguous, masked loads merged
 * by shuffles where kt__cg_strided_masked, else one loop over the lanes,
 * each checked, padding elsewhere.  Unrolled lane by lane, a transposing
 * pack's 16 edge rows were half of gcc's time on a padded
 * attention-scores kernel (2.8 s against 1.3 s). */
static void
put_lanes_read_guarded(struct cg *g, struct kt_buf *b, const struct guard *gd,
                       const struct kt_affine *addr, int64_t c, int lane_var,
                       int w)
{
    const struct kt_expr *e = gd->e;
    const struct kt_lbuf *buf = &g->lt->bufs[e->src];
    int d, nchecks = 0;

    if (c == 1) {
        put_masked_read(g, b, gd, addr, lane_var, w);
        return;
    }
    if (kt__cg_strided_masked(g, e, lane_var, c, w)) {
        put_strided_load(g, b, e->src, addr, c, w, gd);
        return;
    }
    kt_buf_printf(b, "({ kt_v%d g_ = kt_bc%d(", w, w);
    kt__cg_put_float(b, e->pad_value);
    kt_buf_printf(b, "); for (int gl_ = 0; gl_ < %d; gl_++) if (", w);
    for (d = 0; d < e->ndim; d++) {
        struct kt_affine a;
        kt__cg_subst(g, &e->idx[d], -1, &a);
        if (gd->row_var >= 0 && gd->row)
            a.c += kt_aff_coef(&e->idx[d], gd->row_var) * gd->row;
        kt__cg_put_bound(g, b, &nchecks, &a, kt_aff_coef(&e->idx[d], lane_var),
                         "gl_", w, buf->shape[d]);
    }
    kt__cg_end_checks(b, nchecks);
    kt_buf_printf(b, ") g_[gl_] = t_%s[", buf->name);
    kt__cg_put_aff(g, b, addr);
    kt_buf_printf(b, " + %lld*gl_]; g_; })", (long long)c);
}

/* Strided guarded read gd as masked loads alone, without the check of
 * the whole vector choosing unmasked loads, where the masks check the
 * lanes' own dimension: 1 if written to b.  Checked, stride-2 depthwise
 * convolutions' window reads (both forms' loads and shuffles for each
 * column tap) ran 1.12x-1.15x slower than masked loads alone.  Contiguous
 * reads keep their check: alone, stride-1 depthwise kernels ran
 * 0.87x-1.0x; so does a read whose masks would check only dimensions the
 * lanes share (a select of the load or the padding, no mask to build;
 * docs/performance.md).  With AVX-512 only: there a masked load is one
 * instruction. */
static int
masked_alone(struct cg *g, struct kt_buf *b, struct guard *gd,
             const struct kt_affine *addr, int64_t c, int lane_var, int w)
{
    struct kt_buf one;
    int along;

    if (g->o->vector_bytes < 64 ||
        !kt__cg_strided_masked(g, gd->e, lane_var, c, w))
        return 0;
    kt_buf_init(&one);
    gd->alone = 1;
    along = put_strided_load(g, &one, gd->e->src, addr, c, w, gd);
    gd->alone = 0;
    if (along > 0)
        kt_buf_puts(b, one.p);
    kt_buf_free(&one);
    return along > 0;
}

int
kt__cg_shared_taps(const struct cg *g, const struct kt_expr *e, int lane_var,
                   int64_t c, int w, int64_t *t)
{
    const struct kt_affine *ix = &e->idx[e->ndim - 1];
    int i, taps = 0;

    if (g->o->vector_bytes < 64 || c != 2 || w != g->o->vector_bytes / 4 ||
        kt__cg_row_step(e, lane_var) != c)
        return 0;
    if (t != NULL)
        *t = 0;
    for (i = 0; i < ix->n; i++) {
        int v = ix->var[i];
        int fixed = g->env != NULL && g->env[v].set && g->env[v].val.n == 0;
        if (v == lane_var || ix->k[i] <= -c * w || ix->k[i] >= c * w ||
            !(fixed || g->expanding[v]))
            continue;
        if (fixed && t != NULL)
            *t += ix->k[i] * g->env[v].val.c;
        taps++;
    }
    return taps > 0;
}

/* Window taps along a stride-2 read as shared loads (AVX-512).  Tap t of
 * a stride-2 read of w lanes reads elements t + 2 * lane from the taps'
 * origin: lanes t % 2 + 2 * i of the block of 2 * w elements there, moved
 * on by t / 2 lanes into the next block.  Each block is two masked loads,
 * the same for every tap and for the next vector along the row, so once
 * a body expands its column taps and vectors gcc loads each block once:
 * a stride-2 3 x 3 depthwise convolution's taps 0 and 1 are the even and
 * odd lanes of one block, tap 2 the even lanes moved on by one.  Each
 * load's mask checks its own elements, so the blocks' reads before and
 * past the vector's span touch nothing outside the source.  By hand, a
 * 4 x 28 tile of MobileNet-V2's 56 x 56 stride-2 depthwise convolution
 * ran 1.41x faster on 1 thread of a Zen 4 (docs/performance.md). */
static int
put_shared_taps(struct cg *g, struct kt_buf *b, const struct guard *gd,
                const struct kt_affine *addr, int64_t c, int lane_var, int w)
{
    const struct kt_expr *e = gd->e;
    const char *name = g->lt->bufs[e->src].name;
    int64_t t, rho, m, blk;
    int nblk, k, j, l, along = 0;

    if (!kt__cg_shared_taps(g, e, lane_var, c, w, &t) || t < 0)
        return 0;
    rho = t % c;
    m = t / c;
    blk = m / w;
    nblk = m % w != 0 ? 2 : 1;
    if (nblk == 2)
        kt_buf_puts(b, "__builtin_shufflevector(");
    for (k = 0; k < nblk; k++) {
        if (k > 0)
            kt_buf_puts(b, ", ");
        kt_buf_puts(b, "__builtin_shufflevector(");
        for (j = 0; j < c; j++) {
            int64_t at = (blk + k) * c * w + j * w - t;
            struct kt_affine a = *addr;
            struct kt_buf mask;
            kt_buf_init(&mask);
            put_span_mask(g, &mask, e, gd->row_var, gd->row, at, w, &along);
            a.c += at;
            kt_buf_printf(b, "%skt_ldm%d(&t_%s[", j > 0 ? ", " : "", w, name);
            kt__cg_put_aff(g, b, &a);
            kt_buf_printf(b, "], %s, kt_bc%d(", mask.p, w);
            kt__cg_put_float(b, e->pad_value);
            kt_buf_puts(b, "))");
            kt_buf_free(&mask);
        }
        for (l = 0; l < w; l++)
            kt_buf_printf(b, ", %lld", (long long)(rho + c * l));
        kt_buf_puts(b, ")");
    }
    if (nblk == 2)
        for (l = 0; l < w; l++)
            kt_buf_printf(b, ", %lld%s", (long long)(m % w + l),
                          l == w - 1 ? ")" : "");
    return 1;
}

/* Guarded read e as a vector of w lanes at addr + c * lane (small
 * constant c), its row (of row_var, -1: none) fixed at row.  Every index
 * is affine in the lane: in bounds at the first and the last lane, every
 * lane is, and the vector load touches nothing outside that span.  Lane
 * by lane only at the edges. */
static void
put_guarded_vector_load(struct cg *g, struct kt_buf *b, const struct kt_expr *e,
                        const struct kt_affine *addr, int lane_var, int64_t c,
                        int row_var, int row, int w)
{
    struct guard gd = {e, row_var, row, 0};
    struct kt_buf checks;
    int proven;

    if (put_shared_taps(g, b, &gd, addr, c, lane_var, w))
        return;
    kt_buf_init(&checks);
    proven = put_span_bounds(g, &checks, e, lane_var, w - 1, row_var, row) == 0;
    if (!proven && masked_alone(g, b, &gd, addr, c, lane_var, w)) {
        kt_buf_free(&checks);
        return;
    }
    if (!proven)
        kt_buf_printf(b, "((%s) ? ", checks.p);
    kt_buf_free(&checks);
    if (c == 1)
        put_contiguous_load(g, b, e->src, addr, w);
    else
        put_strided_load(g, b, e->src, addr, c, w, NULL);
    if (proven)
        return;
    kt_buf_puts(b, " : ");
    put_lanes_read_guarded(g, b, &gd, addr, c, lane_var, w);
    kt_buf_puts(b, ")");
}

void
kt__cg_put_guarded_row(struct cg *g, struct kt_buf *b, const struct kt_expr *e,
                       const struct kt_affine *addr, int row_var, int row,
                       int lane_var, int w)
{
    put_guarded_vector_load(g, b, e, addr, lane_var, 1, row_var, row, w);
}

/* Load e into b; returns 1 if it is a vector (varies with lane_var). */
int
kt__cg_put_load(struct cg *g, struct kt_buf *b, const struct kt_expr *e,
                int lane_var, int w)
{
    struct kt_affine pre, addr;
    int64_t c;
    int r;

    if (e == g->given_load) {
        kt_buf_puts(b, g->given_text);
        return 1;
    }
    kt__cg_flat_addr(g, e->src, e->idx, lane_var, &pre);
    c = lane_var >= 0 ? kt_aff_coef(&pre, lane_var) : 0;
    kt__cg_subst_var(g, &pre, lane_var, &addr);
    if (g->analysing) {
        kt__cg_note_access(g, e->src, &addr, c, w, e->guarded, 0, 0, KT_ASSIGN,
                           NULL, lane_var);
        if (c == 1 && !e->guarded)
            kt__cg_pin_note(g, e->src, &addr, w);
        if (e->guarded && c >= 1 && c <= KT_CG_MAX_SHUFFLE_STRIDE &&
            g->shares != NULL) {
            struct kt_buf t;
            kt_buf_init(&t);
            put_guarded_vector_load(g, &t, e, &addr, lane_var, c, -1, 0, w);
            kt__cg_share_note(g, e->src, t.p, w,
                              kt__cg_load_weight(g, e, lane_var, w));
            kt_buf_free(&t);
        }
        kt_buf_puts(b, "0");
        return c != 0;
    }
    r = kt__cg_find_reg(g, e->src, &addr, c, c == 0 ? 1 : w);
    if (r >= 0 && g->promote_ok[e->src]) {
        kt_buf_printf(b, "r%d", r);
        return c != 0;
    }
    if (c == 0) {
        put_load_scalar(g, b, e, &addr, -1, 0);
        return 0;
    }
    if (c == 1 && !e->guarded) {
        if (!kt__cg_pin_load(g, b, e->src, &addr, w))
            put_contiguous_load(g, b, e->src, &addr, w);
    } else if (!e->guarded && c >= 2 && c <= KT_CG_MAX_SHUFFLE_STRIDE)
        put_strided_load(g, b, e->src, &addr, c, w, NULL);
    else if (e->guarded && c >= 1 && c <= KT_CG_MAX_SHUFFLE_STRIDE) {
        struct kt_buf t;
        kt_buf_init(&t);
        put_guarded_vector_load(g, &t, e, &addr, lane_var, c, -1, 0, w);
        if (!kt__cg_share_read(g, b, e->src, t.p, w))
            kt_buf_puts(b, t.p);
        kt_buf_free(&t);
    } else
        put_gather(g, b, e, &addr, lane_var, c, w);
    return 1;
}
