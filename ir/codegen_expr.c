/* codegen_expr.c - expressions and stores of the C code generator
 * (ir/codegen.c drives it): index arithmetic under the current variable
 * bindings, loads and stores as scalars or GCC vectors; the registers of
 * micro-kernels are ir/codegen_regs.c's. */
#include "ir/codegen_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- affine helpers ---------------------------------------------------- */

void
kt__cg_subst(struct cg *g, const struct kt_affine *a, int keep_var,
             struct kt_affine *out)
{
    int i;

    kt_aff_const(out, a->c);
    for (i = 0; i < a->n; i++) {
        int v = a->var[i];
        if (v != keep_var && g->env[v].set) {
            if (kt_aff_add(out, &g->env[v].val, a->k[i]) != KT_OK)
                kt__cg_fail(g, "index expression too long");
        } else if (kt_aff_add_term(out, v, a->k[i]) != KT_OK) {
            kt__cg_fail(g, "index expression too long");
        }
    }
}

void
kt__cg_flat_addr(struct cg *g, int b, const struct kt_affine *idx, int keep_var,
                 struct kt_affine *out)
{
    const struct kt_lbuf *buf = &g->lt->bufs[b];
    int64_t stride = 1;
    int d;

    kt_aff_const(out, 0);
    for (d = buf->ndim - 1; d >= 0; d--) {
        struct kt_affine s;
        kt__cg_subst(g, &idx[d], keep_var, &s);
        if (kt_aff_add(out, &s, stride) != KT_OK)
            kt__cg_fail(g, "index expression too long");
        stride *= kt__cg_pitch(g, buf, d);
    }
}

void
kt__cg_put_aff(struct cg *g, struct kt_buf *b, const struct kt_affine *a)
{
    int order[KT_AFF_TERMS], i, j, n = 0;

    for (i = 0; i < a->n; i++) {
        /* Sorted by variable so equal forms print equally. */
        for (j = n; j > 0 && a->var[order[j - 1]] > a->var[i]; j--)
            order[j] = order[j - 1];
        order[j] = i;
        n++;
    }
    if (a->n == 0) {
        kt_buf_printf(b, "%lld", (long long)a->c);
        return;
    }
    for (i = 0; i < n; i++) {
        int64_t k = a->k[order[i]];
        const char *name = g->lt->var_names[a->var[order[i]]];
        if (i > 0)
            kt_buf_puts(b, k < 0 ? " - " : " + ");
        else if (k < 0)
            kt_buf_puts(b, "-");
        if (k == 1 || k == -1)
            kt_buf_puts(b, name);
        else
            kt_buf_printf(b, "%lld*%s", (long long)(k < 0 ? -k : k), name);
    }
    if (a->c)
        kt_buf_printf(b, " %c %lld", a->c < 0 ? '-' : '+',
                      (long long)(a->c < 0 ? -a->c : a->c));
}

/* ---- expressions ------------------------------------------------------- */

void
kt__cg_put_float(struct kt_buf *b, float v)
{
    char tmp[48];

    if (isinf(v)) {
        kt_buf_puts(b, v < 0 ? "(-INFINITY)" : "INFINITY");
        return;
    }
    snprintf(tmp, sizeof(tmp), "%.9g", (double)v);
    if (strpbrk(tmp, ".en") == NULL)
        strcat(tmp, ".0");
    kt_buf_printf(b, "%sf", tmp);
}

/* The lowest and highest value of a + step * lane for every value the C
 * gives its variables (0..var_max) and lane (0..lanes-1); 0 when some
 * variable's range is unknown. */
static int
range_by_ranges(const struct cg *g, const struct kt_affine *a, int64_t step,
                int lanes, int64_t *lo, int64_t *hi)
{
    int i;

    *lo = *hi = a->c;
    if (g->var_max == NULL || lanes < 1)
        return 0;
    for (i = 0; i < a->n; i++) {
        int64_t m = g->var_max[a->var[i]];
        if (m < 0)
            return 0;
        if (a->k[i] > 0)
            *hi += a->k[i] * m;
        else
            *lo += a->k[i] * m;
    }
    if (step > 0)
        *hi += step * (lanes - 1);
    else
        *lo += step * (lanes - 1);
    return 1;
}

/* Whether a + step * lane stays inside [0, extent) for every value the C
 * gives its variables (0..var_max) and lane (0..lanes-1). */
static int
inside_by_ranges(const struct cg *g, const struct kt_affine *a, int64_t step,
                 int lanes, int64_t extent)
{
    int64_t lo, hi;

    return range_by_ranges(g, a, step, lanes, &lo, &hi) && lo >= 0 &&
           hi < extent;
}

int
kt__cg_inside(const struct cg *g, const struct kt_affine *a, int64_t extent)
{
    return inside_by_ranges(g, a, 0, 1, extent);
}

int
kt__cg_outside(const struct cg *g, const struct kt_affine *a, int64_t extent)
{
    int64_t lo, hi;

    return range_by_ranges(g, a, 0, 1, &lo, &hi) && (hi < 0 || lo >= extent);
}

int
kt__cg_put_bound(struct cg *g, struct kt_buf *b, int *nchecks,
                 const struct kt_affine *a, int64_t step, const char *lane_text,
                 int lanes, int64_t extent)
{
    int64_t lo, hi;
    int ranged = range_by_ranges(g, a, lane_text != NULL ? step : 0,
                                 lane_text != NULL ? lanes : 1, &lo, &hi);

    if (ranged && lo >= 0 && hi < extent)
        return 0;
    if ((*nchecks)++ > 0)
        kt_buf_puts(b, " && ");
    /* a check no value passes (the peeled last tile's, codegen_peel.c,
     * whose column is a constant past the edge) reads as what it is */
    if (ranged && (hi < 0 || lo >= extent)) {
        kt_buf_puts(b, "0");
        return 1;
    }
    kt_buf_puts(b, "(unsigned long)(");
    kt__cg_put_aff(g, b, a);
    if (lane_text != NULL && step == 1)
        kt_buf_printf(b, " + %s", lane_text);
    else if (lane_text != NULL && step != 0)
        kt_buf_printf(b, " + %lld*%s", (long long)step, lane_text);
    kt_buf_printf(b, ") < %lldUL", (long long)extent);
    return 0;
}

void
kt__cg_end_checks(struct kt_buf *b, int nchecks)
{
    if (nchecks == 0)
        kt_buf_puts(b, "1");
}

void
kt__cg_put_lane_mask(struct cg *g, struct kt_buf *b, int *nparts,
                     const struct kt_affine *a, int64_t step, int lanes,
                     int64_t extent)
{
    if (inside_by_ranges(g, a, step, lanes, extent))
        return;
    if ((*nparts)++ > 0)
        kt_buf_puts(b, " & ");
    if (step == 0)
        kt_buf_puts(b, "-(unsigned)((unsigned long)(");
    else
        kt_buf_printf(b, "%s(", step == 1 ? "kt_span" : "kt_lanes");
    kt__cg_put_aff(g, b, a);
    if (step == 0)
        kt_buf_printf(b, ") < %lldUL)", (long long)extent);
    else if (step == 1)
        kt_buf_printf(b, ", %lld, %d)", (long long)extent, lanes);
    else
        kt_buf_printf(b, ", %lld, %lld, %d)", (long long)step,
                      (long long)extent, lanes);
}

void
kt__cg_end_mask(struct kt_buf *b, int nparts)
{
    if (nparts == 0)
        kt_buf_puts(b, "~0u");
}

void
kt__cg_loop_range(struct cg *g, int var, int64_t step, int64_t end)
{
    if (g->var_max != NULL && step > 0 && end > 0)
        g->var_max[var] = (end - 1) / step * step;
}

void
kt__cg_note_ranges(struct cg *g, const struct kt_node *n)
{
    int64_t m = -1;
    int k;

    if (n->kind == KT_N_LOOP)
        m = n->extent - 1;
    else if (n->kind == KT_N_LET && n->mod > 0)
        m = n->mod - 1;
    if (n->kind == KT_N_LOOP || n->kind == KT_N_LET) {
        /* a variable named twice gets the larger range */
        if (m > g->var_max[n->var])
            g->var_max[n->var] = m;
    }
    for (k = 0; k < n->nkids; k++)
        kt__cg_note_ranges(g, n->kids[k]);
}

/* The bounds checks of index idx of buffer src at lane (of lane_var) and
 * row (of row_var, -1 for none), joined by && and counted in *nchecks;
 * with lane_dims_only, only the dimensions that vary with the lane (the
 * others were checked at lane 0). */
static void
put_index_bounds(struct cg *g, struct kt_buf *b, int *nchecks, int src,
                 const struct kt_affine *idx, int ndim, int lane_var, int lane,
                 int row_var, int row, int lane_dims_only)
{
    const struct kt_lbuf *buf = &g->lt->bufs[src];
    int d;

    for (d = 0; d < ndim; d++) {
        struct kt_affine a;
        int64_t lc = lane_var >= 0 ? kt_aff_coef(&idx[d], lane_var) : 0;
        if (lane_dims_only && lc == 0)
            continue;
        kt__cg_subst(g, &idx[d], -1, &a);
        a.c += lc * lane;
        if (row_var >= 0 && row)
            a.c += kt_aff_coef(&idx[d], row_var) * row;
        kt__cg_put_bound(g, b, nchecks, &a, 0, NULL, 1, buf->shape[d]);
    }
}

/* The checks of guarded read e as a vector from lane 0 to lane last (0:
 * one element) at row (of row_var, -1 for none), "1" when none is
 * needed; returns how many. */
static int
put_span_bounds(struct cg *g, struct kt_buf *b, const struct kt_expr *e,
                int lane_var, int last, int row_var, int row)
{
    int nchecks = 0;

    put_index_bounds(g, b, &nchecks, e->src, e->idx, e->ndim, lane_var, 0,
                     row_var, row, 0);
    if (last > 0)
        put_index_bounds(g, b, &nchecks, e->src, e->idx, e->ndim, lane_var,
                         last, row_var, row, 1);
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

    put_index_bounds(g, b, &nchecks, e->src, e->idx, e->ndim, lane_var, lane,
                     -1, 0, 0);
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
static int
put_load(struct cg *g, struct kt_buf *b, const struct kt_expr *e, int lane_var,
         int w)
{
    struct kt_affine pre, addr;
    int64_t c;
    int r;

    kt__cg_flat_addr(g, e->src, e->idx, lane_var, &pre);
    c = lane_var >= 0 ? kt_aff_coef(&pre, lane_var) : 0;
    kt__cg_subst(g, &pre, -1, &addr);
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

/* Scalar operand s as a vector of w lanes (broadcast). */
static void
broadcast(struct kt_buf *s, int w)
{
    struct kt_buf t;

    kt_buf_init(&t);
    kt_buf_printf(&t, "kt_bc%d(%s)", w, s->p);
    kt_buf_free(s);
    *s = t;
}

/* Operator e applied to its rendered operands sa and sb (sb unused for a
 * unary one); vec: the result is a vector. */
static void
put_op(struct cg *g, struct kt_buf *b, const struct kt_expr *e, const char *sa,
       const char *sb, int vec, int w)
{
    static const char *const scalar_fn[KT_X_NOPS] = {
        [KT_X_EXP] = "kt_exp",         [KT_X_LOG] = "logf",
        [KT_X_SQRT] = "sqrtf",         [KT_X_TANH] = "tanhf",
        [KT_X_SIGMOID] = "kt_sigmoid", [KT_X_RELU] = "kt_relu",
        [KT_X_ABS] = "fabsf",          [KT_X_MAX] = "kt_max",
        [KT_X_MIN] = "kt_min",
    };
    static const char *const vector_fn[KT_X_NOPS] = {
        [KT_X_EXP] = "kt_vexp",         [KT_X_LOG] = "kt_vlog",
        [KT_X_SQRT] = "kt_vsqrt",       [KT_X_TANH] = "kt_vtanh",
        [KT_X_SIGMOID] = "kt_vsigmoid", [KT_X_RELU] = "kt_vrelu",
        [KT_X_ABS] = "kt_vabs",         [KT_X_MAX] = "kt_vmax",
        [KT_X_MIN] = "kt_vmin",
    };

    switch (e->op) {
    case KT_X_ADD: kt_buf_printf(b, "(%s + %s)", sa, sb); break;
    case KT_X_SUB: kt_buf_printf(b, "(%s - %s)", sa, sb); break;
    case KT_X_MUL: kt_buf_printf(b, "(%s * %s)", sa, sb); break;
    case KT_X_DIV: kt_buf_printf(b, "(%s / %s)", sa, sb); break;
    case KT_X_NEG: kt_buf_printf(b, "(-%s)", sa); break;
    case KT_X_MAX:
    case KT_X_MIN:
        if (vec)
            kt_buf_printf(b, "%s%d(%s, %s)", vector_fn[e->op], w, sa, sb);
        else
            kt_buf_printf(b, "%s(%s, %s)", scalar_fn[e->op], sa, sb);
        break;
    default:
        if (e->op >= KT_X_NOPS || scalar_fn[e->op] == NULL) {
            kt__cg_fail(g, "unknown expression operator");
            break;
        }
        if (vec)
            kt_buf_printf(b, "%s%d(%s)", vector_fn[e->op], w, sa);
        else
            kt_buf_printf(b, "%s(%s)", scalar_fn[e->op], sa);
        break;
    }
}

/* Renders e into b; returns 1 if the value is a vector of w lanes (it
 * varies with lane_var), 0 for a scalar. */
static int
put_expr(struct cg *g, struct kt_buf *b, const struct kt_expr *e, int lane_var,
         int w)
{
    struct kt_buf sa, sb;
    int va, vb, vec;

    if (e->op == KT_X_CONST) {
        kt__cg_put_float(b, e->value);
        return 0;
    }
    if (e->op == KT_X_LOAD)
        return put_load(g, b, e, lane_var, w);
    kt_buf_init(&sa);
    kt_buf_init(&sb);
    va = put_expr(g, &sa, e->a, lane_var, w);
    vb = e->b ? put_expr(g, &sb, e->b, lane_var, w) : 0;
    vec = va || vb;
    if (e->op == KT_X_DIV && va && !vb) {
        /* A divisor the same in every lane (softmax's row sum): one scalar
         * reciprocal, which gcc computes once where it is invariant, and
         * a vector multiply, instead of a vector divide per W lanes
         * (within 1 ulp of the quotient). */
        kt_buf_printf(b, "(%s * kt_bc%d(1.0f / %s))", sa.p, w, sb.p);
    } else {
        if (vec && !va)
            broadcast(&sa, w);
        if (vec && e->b && !vb)
            broadcast(&sb, w);
        put_op(g, b, e, sa.p, sb.p, vec, w);
    }
    kt_buf_free(&sa);
    kt_buf_free(&sb);
    return vec;
}

/* ---- statements -------------------------------------------------------- */

const char *
kt__cg_combine_op(enum kt_reduce op)
{
    switch (op) {
    case KT_SUM: return "+";
    case KT_MAXR: return "max";
    default: return "min";
    }
}

/* Store n of val (vec: a vector) into an accumulator of register r split
 * into partial sums (the register tile's accumulators). */
static void
store_to_split_acc(struct cg *g, const struct kt_node *n, int r,
                   const char *val, int w)
{
    struct reg *rg = &g->regs[r];
    char acc[32];

    if (rg->next == 0)
        snprintf(acc, sizeof(acc), "r%d", r);
    else
        snprintf(acc, sizeof(acc), "r%d_%d", r, rg->next);
    rg->next = (rg->next + 1) % rg->split;
    if (n->op == KT_SUM)
        kt__cg_line(g, "%s += %s;", acc, val);
    else
        kt__cg_line(g, "%s = kt_v%s%d(%s, %s);", acc, kt__cg_combine_op(n->op),
                    w, acc, val);
}

/* Store n of val into register r; c: the address's lane coefficient. */
static void
store_to_reg(struct cg *g, const struct kt_node *n, int r, int64_t c,
             const char *val, int vec, int w)
{
    const char *op = kt__cg_combine_op(n->op);

    if (c == 0 && vec) {
        if (n->op == KT_ASSIGN)
            kt__cg_line(g, "r%d = (%s)[%d];", r, val, w - 1);
        else
            kt__cg_line(g, "r%d = kt_%s(r%d, kt_h%s%d(%s));", r,
                        n->op == KT_SUM ? "add" : op, r,
                        n->op == KT_SUM ? "sum" : op, w, val);
    } else if (n->op == KT_ASSIGN) {
        kt__cg_line(g, "r%d = %s;", r, val);
    } else if (n->op == KT_SUM) {
        kt__cg_line(g, "r%d += %s;", r, val);
    } else if (c != 0) {
        kt__cg_line(g, "r%d = kt_v%s%d(r%d, %s);", r, op, w, r, val);
    } else {
        kt__cg_line(g, "r%d = kt_%s(r%d, %s);", r, op, r, val);
    }
}

/* Store n of val to the buffer element dst (every lane lands on it: c == 0
 * and a vector val is reduced across lanes). */
static void
store_to_element(struct cg *g, const struct kt_node *n, const char *dst,
                 const char *val, int vec, int w)
{
    const char *op = kt__cg_combine_op(n->op);

    if (!vec) {
        if (n->op == KT_ASSIGN)
            kt__cg_line(g, "%s = %s;", dst, val);
        else if (n->op == KT_SUM)
            kt__cg_line(g, "%s += %s;", dst, val);
        else
            kt__cg_line(g, "%s = kt_%s(%s, %s);", dst, op, dst, val);
    } else if (n->op == KT_ASSIGN) {
        kt__cg_line(g, "%s = (%s)[%d];", dst, val, w - 1);
    } else {
        kt__cg_line(g, "%s = kt_%s(%s, kt_h%s%d(%s));", dst,
                    n->op == KT_SUM ? "add" : op, dst,
                    n->op == KT_SUM ? "sum" : op, w, val);
    }
}

/* Store n of val to w contiguous elements from addr, or to the first
 * g->store_lanes of them where set (the masked last chunk of an
 * assignment's loop, KT_CG_LANES_MASKED). */
static void
store_to_vector(struct cg *g, const struct kt_node *n,
                const struct kt_affine *addr, const char *val, int vec, int w)
{
    unsigned mask = (1u << g->store_lanes) - 1u;
    struct kt_buf p;

    kt_buf_init(&p);
    kt_buf_printf(&p, "&t_%s[", g->lt->bufs[n->buf].name);
    kt__cg_put_aff(g, &p, addr);
    kt_buf_puts(&p, "]");
    if (g->store_lanes > 0 && vec)
        kt__cg_line(g, "kt_stm%d(%s, %s, 0x%xu);", w, p.p, val, mask);
    else if (g->store_lanes > 0)
        kt__cg_line(g, "kt_stm%d(%s, kt_bc%d(%s), 0x%xu);", w, p.p, w, val,
                    mask);
    else if (!vec)
        kt__cg_line(g, "kt_st%d(%s, kt_bc%d(%s));", w, p.p, w, val);
    else if (n->op == KT_ASSIGN)
        kt__cg_line(g, "kt_st%d(%s, %s);", w, p.p, val);
    else if (n->op == KT_SUM)
        kt__cg_line(g, "kt_st%d(%s, kt_ld%d(%s) + %s);", w, p.p, w, p.p, val);
    else
        kt__cg_line(g, "kt_st%d(%s, kt_v%s%d(kt_ld%d(%s), %s));", w, p.p,
                    kt__cg_combine_op(n->op), w, w, p.p, val);
    kt_buf_free(&p);
}

int
kt__cg_strided_store(const struct cg *g, int64_t c, int w)
{
    return g->o->vector_bytes == 64 && c >= 2 && c <= KT_MAX_STRIDED_STORE &&
           (w == 16 || w == 8);
}

void
kt__cg_put_strided_store(struct cg *g, const char *name, const char *addr,
                         int64_t c, const char *val, int w)
{
    struct kt_buf pick;
    int64_t j, p;

    kt_buf_init(&pick);
    kt__cg_line(g, "{ kt_v%d s_ = %s;", w, val);
    for (j = 0; j < c; j++) {
        unsigned mask = 0;
        kt_buf_reset(&pick);
        for (p = 0; p < w; p++) {
            int64_t e = j * w + p, lane = e % c == 0 ? e / c : w;
            if (lane < w)
                mask |= 1u << p;
            kt_buf_printf(&pick, ", %lld", (long long)(lane < w ? lane : 0));
        }
        if (j == 0)
            kt__cg_line(g,
                        "  kt_stm%d(&t_%s[%s], __builtin_shufflevector(s_, "
                        "s_%s), 0x%xu);",
                        w, name, addr, pick.p, mask);
        else
            kt__cg_line(g,
                        "  kt_stm%d(&t_%s[%s + %lld], "
                        "__builtin_shufflevector(s_, s_%s), 0x%xu);",
                        w, name, addr, (long long)(j * w), pick.p, mask);
    }
    kt__cg_line(g, "}");
    kt_buf_free(&pick);
}

/* Strided destination: masked stores of shuffled vectors where the target
 * has them (kt__cg_strided_store), else scattered lane by lane. */
static void
store_scattered(struct cg *g, const struct kt_node *n,
                const struct kt_affine *addr, int64_t c, const char *val,
                int vec, int w)
{
    struct kt_buf dst;

    if (n->op == KT_ASSIGN && g->store_lanes == 0 &&
        kt__cg_strided_store(g, c, w)) {
        struct kt_buf at, v;
        kt_buf_init(&at);
        kt_buf_init(&v);
        kt__cg_put_aff(g, &at, addr);
        if (vec)
            kt_buf_puts(&v, val);
        else
            kt_buf_printf(&v, "kt_bc%d(%s)", w, val);
        kt__cg_put_strided_store(g, g->lt->bufs[n->buf].name, at.p, c, v.p, w);
        kt_buf_free(&at);
        kt_buf_free(&v);
        return;
    }
    if (vec)
        kt__cg_line(g, "{ kt_v%d v_ = %s;", w, val);
    else
        kt__cg_line(g, "{ kt_v%d v_ = kt_bc%d(%s);", w, w, val);
    kt__cg_line(g, "  for (int l_ = 0; l_ < %d; l_++) {", w);
    kt_buf_init(&dst);
    kt_buf_printf(&dst, "t_%s[", g->lt->bufs[n->buf].name);
    kt__cg_put_aff(g, &dst, addr);
    kt_buf_printf(&dst, " + %lld*l_]", (long long)c);
    if (n->op == KT_ASSIGN)
        kt__cg_line(g, "    %s = v_[l_];", dst.p);
    else if (n->op == KT_SUM)
        kt__cg_line(g, "    %s += v_[l_];", dst.p);
    else
        kt__cg_line(g, "    %s = kt_%s(%s, v_[l_]);", dst.p,
                    kt__cg_combine_op(n->op), dst.p);
    kt__cg_line(g, "  } }");
    kt_buf_free(&dst);
}

/* Contiguous guarded store n of v_ outside the whole-vector case: a
 * masked store of the lanes inside (combined with what they hold unless
 * n assigns). */
static void
put_masked_store(struct cg *g, const struct kt_node *n,
                 const struct kt_affine *addr, int lane_var, int w)
{
    struct kt_buf mask, at;
    int d, nparts = 0;

    kt_buf_init(&mask);
    for (d = 0; d < n->ndim; d++) {
        struct kt_affine a;
        kt__cg_subst(g, &n->idx[d], -1, &a);
        kt__cg_put_lane_mask(g, &mask, &nparts, &a,
                             kt_aff_coef(&n->idx[d], lane_var), w,
                             g->lt->bufs[n->buf].shape[d]);
    }
    kt__cg_end_mask(&mask, nparts);
    kt_buf_init(&at);
    kt_buf_printf(&at, "&t_%s[", g->lt->bufs[n->buf].name);
    kt__cg_put_aff(g, &at, addr);
    kt_buf_puts(&at, "]");
    kt__cg_line(g, "unsigned m_ = %s;", mask.p);
    if (n->op == KT_ASSIGN)
        kt__cg_line(g, "kt_stm%d(%s, v_, m_);", w, at.p);
    else if (n->op == KT_SUM)
        kt__cg_line(g,
                    "kt_stm%d(%s, kt_ldm%d(%s, m_, kt_bc%d(0.0f)) + v_, m_);",
                    w, at.p, w, at.p, w);
    else
        kt__cg_line(g, "kt_stm%d(%s, kt_v%s%d(kt_ldm%d(%s, m_, v_), v_), m_);",
                    w, at.p, kt__cg_combine_op(n->op), w, w, at.p);
    kt_buf_free(&mask);
    kt_buf_free(&at);
}

/* The lanes of guarded store n of v_, outside the whole-vector case: a
 * masked store when contiguous, else one loop over them, each checked, so
 * the fallback stays small whatever the width. */
static void
put_lanes_guarded(struct cg *g, const struct kt_node *n,
                  const struct kt_affine *addr, int64_t c, int lane_var, int w)
{
    struct kt_buf cond, at;
    int d, nchecks = 0;

    if (c == 1) {
        put_masked_store(g, n, addr, lane_var, w);
        return;
    }
    kt_buf_init(&cond);
    for (d = 0; d < n->ndim; d++) {
        struct kt_affine a;
        kt__cg_subst(g, &n->idx[d], -1, &a);
        kt__cg_put_bound(g, &cond, &nchecks, &a,
                         kt_aff_coef(&n->idx[d], lane_var), "l_", w,
                         g->lt->bufs[n->buf].shape[d]);
    }
    kt__cg_end_checks(&cond, nchecks);
    kt_buf_init(&at);
    kt_buf_printf(&at, "t_%s[", g->lt->bufs[n->buf].name);
    kt__cg_put_aff(g, &at, addr);
    if (c == 1)
        kt_buf_puts(&at, " + l_]");
    else
        kt_buf_printf(&at, " + %lld*l_]", (long long)c);
    kt__cg_line(g, "for (int l_ = 0; l_ < %d; l_++)", w);
    if (n->op == KT_ASSIGN)
        kt__cg_line(g, "    if (%s) %s = v_[l_];", cond.p, at.p);
    else if (n->op == KT_SUM)
        kt__cg_line(g, "    if (%s) %s += v_[l_];", cond.p, at.p);
    else
        kt__cg_line(g, "    if (%s) %s = kt_%s(%s, v_[l_]);", cond.p, at.p,
                    kt__cg_combine_op(n->op), at.p);
    kt_buf_free(&cond);
    kt_buf_free(&at);
}

/* Store n (guarded: a stage padded past its output, or an accumulator
 * retargeted through a padded copy and not held in a register) of val:
 * whole when its first and last lanes are in bounds, else lane by lane,
 * dropping the lanes outside. */
static void
store_guarded(struct cg *g, const struct kt_node *n,
              const struct kt_affine *addr, int64_t c, const char *val, int vec,
              int lane_var, int w)
{
    struct kt_buf cond, at;
    int lanes = c == 0 ? 1 : w, nchecks = 0;

    kt_buf_init(&cond);
    put_index_bounds(g, &cond, &nchecks, n->buf, n->idx, n->ndim, lane_var, 0,
                     -1, 0, 0);
    if (lanes > 1)
        put_index_bounds(g, &cond, &nchecks, n->buf, n->idx, n->ndim, lane_var,
                         lanes - 1, -1, 0, 1);
    kt_buf_init(&at);
    if (nchecks > 0) {
        kt__cg_line(g, "if (%s) {", cond.p);
        g->indent++;
    }
    if (c == 0) {
        kt_buf_printf(&at, "t_%s[", g->lt->bufs[n->buf].name);
        kt__cg_put_aff(g, &at, addr);
        kt_buf_puts(&at, "]");
        store_to_element(g, n, at.p, val, vec, w);
    } else if (c == 1)
        store_to_vector(g, n, addr, val, vec, w);
    else
        store_scattered(g, n, addr, c, val, vec, w);
    if (nchecks == 0) { /* the loops' ranges keep it inside */
        kt_buf_free(&cond);
        kt_buf_free(&at);
        return;
    }
    g->indent--;
    if (lanes > 1) {
        kt__cg_line(g, "} else {");
        g->indent++;
        if (vec)
            kt__cg_line(g, "kt_v%d v_ = %s;", w, val);
        else
            kt__cg_line(g, "kt_v%d v_ = kt_bc%d(%s);", w, w, val);
        put_lanes_guarded(g, n, addr, c, lane_var, w);
        g->indent--;
    }
    kt__cg_line(g, "}");
    kt_buf_free(&cond);
    kt_buf_free(&at);
}

void
kt__cg_emit_store(struct cg *g, const struct kt_node *n, int lane_var, int w)
{
    struct kt_affine pre, addr;
    struct kt_buf val, dst;
    int64_t c;
    int vec, r;

    kt__cg_flat_addr(g, n->buf, n->idx, lane_var, &pre);
    c = lane_var >= 0 ? kt_aff_coef(&pre, lane_var) : 0;
    kt__cg_subst(g, &pre, -1, &addr);
    if (g->matching_init) {
        kt__cg_match_init_store(g, n, &addr, c, w);
        return;
    }
    kt_buf_init(&val);
    vec = put_expr(g, &val, n->expr, lane_var, w);
    if (g->analysing) {
        if (g->store_lanes > 0) /* its masked store is to memory */
            g->promote_ok[n->buf] = 0;
        kt__cg_note_access(g, n->buf, &addr, c, w, n->guarded, 1,
                           c == 0 && vec && n->op != KT_ASSIGN ? w : 0, n->op,
                           n->guarded ? n : NULL, lane_var);
        kt_buf_free(&val);
        return;
    }
    r = kt__cg_find_reg(g, n->buf, &addr, c, c == 0 ? 1 : w);
    if (r >= 0 && g->promote_ok[n->buf] && g->regs[r].acc > 0) {
        store_to_split_acc(g, n, r, val.p, w);
    } else if (r >= 0 && g->promote_ok[n->buf]) {
        if (c != 0 && !vec)
            broadcast(&val, w);
        store_to_reg(g, n, r, c, val.p, vec, w);
    } else if (n->guarded) {
        store_guarded(g, n, &addr, c, val.p, vec, lane_var, w);
    } else if (c == 0) {
        kt_buf_init(&dst);
        kt_buf_printf(&dst, "t_%s[", g->lt->bufs[n->buf].name);
        kt__cg_put_aff(g, &dst, &addr);
        kt_buf_puts(&dst, "]");
        store_to_element(g, n, dst.p, val.p, vec, w);
        kt_buf_free(&dst);
    } else if (c == 1) {
        store_to_vector(g, n, &addr, val.p, vec, w);
    } else {
        store_scattered(g, n, &addr, c, val.p, vec, w);
    }
    kt_buf_free(&val);
}

/* The address of store n as C text in b (lane variable unbound). */
static void
put_store_addr(struct cg *g, struct kt_buf *b, const struct kt_node *n)
{
    struct kt_affine pre, addr;

    kt__cg_flat_addr(g, n->buf, n->idx, -1, &pre);
    kt__cg_subst(g, &pre, -1, &addr);
    kt_buf_printf(b, "t_%s[", g->lt->bufs[n->buf].name);
    kt__cg_put_aff(g, b, &addr);
    kt_buf_puts(b, "]");
}

int
kt__cg_lane_reduction(struct cg *g, const struct kt_node *n, int lane_var)
{
    struct kt_affine pre;

    if (n->kind != KT_N_STORE || n->op == KT_ASSIGN)
        return 0;
    kt__cg_flat_addr(g, n->buf, n->idx, lane_var, &pre);
    return kt_aff_coef(&pre, lane_var) == 0;
}

void
kt__cg_emit_lane_acc(struct cg *g, const struct kt_node *n, int i, int q,
                     int phase, int lane_var, int w)
{
    static const char *const identity[] =
        {[KT_SUM] = "0.0f", [KT_MAXR] = "(-INFINITY)", [KT_MINR] = "INFINITY"};
    const char *op = kt__cg_combine_op(n->op);
    struct kt_buf val, dst;

    kt_buf_init(&val);
    kt_buf_init(&dst);
    if (phase == 0) {
        kt__cg_line(g, "kt_v%d acc%d_%d = kt_bc%d(%s);", w, i, q, w,
                    identity[n->op]);
    } else if (phase == 1) {
        if (!put_expr(g, &val, n->expr, lane_var, w))
            broadcast(&val, w);
        if (n->op == KT_SUM)
            kt__cg_line(g, "acc%d_%d += %s;", i, q, val.p);
        else
            kt__cg_line(g, "acc%d_%d = kt_v%s%d(acc%d_%d, %s);", i, q, op, w, i,
                        q, val.p);
    } else if (phase == 2) {
        if (n->op == KT_SUM)
            kt__cg_line(g, "acc%d_0 += acc%d_%d;", i, i, q);
        else
            kt__cg_line(g, "acc%d_0 = kt_v%s%d(acc%d_0, acc%d_%d);", i, op, w,
                        i, i, q);
    } else {
        put_store_addr(g, &dst, n);
        kt__cg_line(g, "%s = kt_%s(%s, kt_h%s%d(acc%d_0));", dst.p,
                    n->op == KT_SUM ? "add" : op, dst.p,
                    n->op == KT_SUM ? "sum" : op, w, i);
    }
    kt_buf_free(&val);
    kt_buf_free(&dst);
}
