/* codegen_expr.c - expressions of the C code generator (ir/codegen.c
 * drives it): index arithmetic under the current variable bindings, bounds
 * checks, and expressions as scalars or GCC vectors; their reads are
 * ir/codegen_load.c's, stores ir/codegen_store.c's, the registers of
 * micro-kernels ir/codegen_regs.c's. */
#include "ir/codegen_int.h"

#include <math.h>
#include <stdio.h>
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
kt__cg_subst_var(struct cg *g, const struct kt_affine *a, int var,
                 struct kt_affine *out)
{
    int64_t k = kt_aff_coef(a, var);

    *out = *a;
    if (var < 0 || k == 0 || !g->env[var].set)
        return;
    if (kt_aff_add_term(out, var, -k) != KT_OK ||
        kt_aff_add(out, &g->env[var].val, k) != KT_OK)
        kt__cg_fail(g, "index expression too long");
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

void
kt__cg_put_index_bounds(struct cg *g, struct kt_buf *b, int *nchecks, int src,
                        const struct kt_affine *idx, int ndim, int lane_var,
                        int lane, int row_var, int row, int lane_dims_only)
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

void
kt__cg_broadcast(struct kt_buf *s, int w)
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

int
kt__cg_put_expr(struct cg *g, struct kt_buf *b, const struct kt_expr *e,
                int lane_var, int w)
{
    struct kt_buf sa, sb;
    int va, vb, vec;

    if (e->op == KT_X_CONST) {
        kt__cg_put_float(b, e->value);
        return 0;
    }
    if (e->op == KT_X_LOAD)
        return kt__cg_put_load(g, b, e, lane_var, w);
    kt_buf_init(&sa);
    kt_buf_init(&sb);
    va = kt__cg_put_expr(g, &sa, e->a, lane_var, w);
    vb = e->b ? kt__cg_put_expr(g, &sb, e->b, lane_var, w) : 0;
    vec = va || vb;
    if (e->op == KT_X_DIV && va && !vb) {
        /* A divisor the same in every lane (softmax's row sum): one scalar
         * reciprocal, which gcc computes once where it is invariant, and
         * a vector multiply, instead of a vector divide per W lanes
         * (within 1 ulp of the quotient). */
        kt_buf_printf(b, "(%s * kt_bc%d(1.0f / %s))", sa.p, w, sb.p);
    } else {
        if (vec && !va)
            kt__cg_broadcast(&sa, w);
        if (vec && e->b && !vb)
            kt__cg_broadcast(&sb, w);
        put_op(g, b, e, sa.p, sb.p, vec, w);
    }
    kt_buf_free(&sa);
    kt_buf_free(&sb);
    return vec;
}
