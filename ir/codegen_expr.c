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
        stride *= buf->shape[d];
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

static void
put_float(struct kt_buf *b, float v)
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

/* The bounds checks of guarded read e at lane (of lane_var), joined by
 * &&. */
static void
put_bounds(struct cg *g, struct kt_buf *b, const struct kt_expr *e,
           int lane_var, int lane)
{
    const struct kt_lbuf *buf = &g->lt->bufs[e->src];
    int d;

    for (d = 0; d < e->ndim; d++) {
        struct kt_affine a;
        kt__cg_subst(g, &e->idx[d], -1, &a);
        if (lane_var >= 0 && lane)
            a.c += kt_aff_coef(&e->idx[d], lane_var) * lane;
        if (d)
            kt_buf_puts(b, " && ");
        kt_buf_puts(b, "(unsigned long)(");
        kt__cg_put_aff(g, b, &a);
        kt_buf_printf(b, ") < %lldUL", (long long)buf->shape[d]);
    }
}

static void
put_load_scalar(struct cg *g, struct kt_buf *b, const struct kt_expr *e,
                const struct kt_affine *addr, int lane_var, int lane)
{
    const struct kt_lbuf *buf = &g->lt->bufs[e->src];

    if (!e->guarded) {
        kt_buf_printf(b, "t_%s[", buf->name);
        kt__cg_put_aff(g, b, addr);
        kt_buf_puts(b, "]");
        return;
    }
    kt_buf_puts(b, "((");
    put_bounds(g, b, e, lane_var, lane);
    kt_buf_printf(b, ") ? t_%s[", buf->name);
    kt__cg_put_aff(g, b, addr);
    kt_buf_puts(b, "] : ");
    put_float(b, e->pad_value);
    kt_buf_puts(b, ")");
}

#define KT_CG_MAX_SHUFFLE_STRIDE 4

/* A vector of w lanes read at addr + stride*lane, for a small constant
 * stride, as 'stride' contiguous loads combined by shuffles instead of w
 * scalar loads.  The last load ends at the last lane's element, so exactly
 * the span the scalar gather reads is touched (nothing past it). */
static void
put_strided_load(struct cg *g, struct kt_buf *b, int src,
                 const struct kt_affine *addr, int64_t stride, int w)
{
    const char *name = g->lt->bufs[src].name;
    int64_t span = stride * (w - 1) + 1, start[KT_CG_MAX_SHUFFLE_STRIDE];
    int nvec = (int)stride, j, l;

    for (j = 0; j < nvec; j++)
        start[j] = j == nvec - 1 ? span - w : (int64_t)j * w;
    /* Round j merges vector j into lanes picked so far (j = 1 merges
     * vectors 0 and 1). */
    for (j = 1; j < nvec; j++)
        kt_buf_puts(b, "__builtin_shufflevector(");
    for (j = 0; j < nvec; j++) {
        struct kt_affine a = *addr;
        a.c += start[j];
        if (j > 0)
            kt_buf_puts(b, ", ");
        kt_buf_printf(b, "kt_ld%d(&t_%s[", w, name);
        kt__cg_put_aff(g, b, &a);
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

/* Renders e into b; returns 1 if the value is a vector of w lanes (it
 * varies with lane_var), 0 for a scalar. */
static int
put_expr(struct cg *g, struct kt_buf *b, const struct kt_expr *e, int lane_var,
         int w)
{
    static const char *const scalar_fn[KT_X_NOPS] = {
        [KT_X_EXP] = "expf",           [KT_X_LOG] = "logf",
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
    struct kt_buf sa, sb;
    int va, vb, vec;

    switch (e->op) {
    case KT_X_CONST: put_float(b, e->value); return 0;
    case KT_X_LOAD: {
        struct kt_affine pre, addr;
        int64_t c;
        int r;
        kt__cg_flat_addr(g, e->src, e->idx, lane_var, &pre);
        c = lane_var >= 0 ? kt_aff_coef(&pre, lane_var) : 0;
        kt__cg_subst(g, &pre, -1, &addr);
        if (g->analysing) {
            kt__cg_note_access(g, e->src, &addr, c, w, e->guarded, 0, 0,
                               KT_ASSIGN);
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
            kt_buf_printf(b, "kt_ld%d(&t_%s[", w, g->lt->bufs[e->src].name);
            kt__cg_put_aff(g, b, &addr);
            kt_buf_puts(b, "])");
            return 1;
        }
        if (!e->guarded && c >= 2 && c <= KT_CG_MAX_SHUFFLE_STRIDE) {
            put_strided_load(g, b, e->src, &addr, c, w);
            return 1;
        }
        if (e->guarded && c >= 1 && c <= KT_CG_MAX_SHUFFLE_STRIDE) {
            /* Every index is affine in the lane: in bounds at the first
             * and the last lane, every lane is, and the vector load
             * touches nothing outside that span.  Lane by lane only at
             * the edges. */
            kt_buf_puts(b, "((");
            put_bounds(g, b, e, lane_var, 0);
            kt_buf_puts(b, " && ");
            put_bounds(g, b, e, lane_var, w - 1);
            kt_buf_puts(b, ") ? ");
            if (c == 1) {
                kt_buf_printf(b, "kt_ld%d(&t_%s[", w, g->lt->bufs[e->src].name);
                kt__cg_put_aff(g, b, &addr);
                kt_buf_puts(b, "])");
            } else {
                put_strided_load(g, b, e->src, &addr, c, w);
            }
            kt_buf_puts(b, " : ");
            put_gather(g, b, e, &addr, lane_var, c, w);
            kt_buf_puts(b, ")");
            return 1;
        }
        put_gather(g, b, e, &addr, lane_var, c, w);
        return 1;
    }
    default: break;
    }
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
        kt_buf_free(&sa);
        kt_buf_free(&sb);
        return 1;
    }
    if (vec && !va) {
        struct kt_buf t;
        kt_buf_init(&t);
        kt_buf_printf(&t, "kt_bc%d(%s)", w, sa.p);
        kt_buf_free(&sa);
        sa = t;
    }
    if (vec && e->b && !vb) {
        struct kt_buf t;
        kt_buf_init(&t);
        kt_buf_printf(&t, "kt_bc%d(%s)", w, sb.p);
        kt_buf_free(&sb);
        sb = t;
    }
    switch (e->op) {
    case KT_X_ADD: kt_buf_printf(b, "(%s + %s)", sa.p, sb.p); break;
    case KT_X_SUB: kt_buf_printf(b, "(%s - %s)", sa.p, sb.p); break;
    case KT_X_MUL: kt_buf_printf(b, "(%s * %s)", sa.p, sb.p); break;
    case KT_X_DIV: kt_buf_printf(b, "(%s / %s)", sa.p, sb.p); break;
    case KT_X_NEG: kt_buf_printf(b, "(-%s)", sa.p); break;
    case KT_X_MAX:
    case KT_X_MIN:
        if (vec)
            kt_buf_printf(b, "%s%d(%s, %s)", vector_fn[e->op], w, sa.p, sb.p);
        else
            kt_buf_printf(b, "%s(%s, %s)", scalar_fn[e->op], sa.p, sb.p);
        break;
    default:
        if (e->op >= KT_X_NOPS || scalar_fn[e->op] == NULL) {
            kt__cg_fail(g, "unknown expression operator");
            break;
        }
        if (vec)
            kt_buf_printf(b, "%s%d(%s)", vector_fn[e->op], w, sa.p);
        else
            kt_buf_printf(b, "%s(%s)", scalar_fn[e->op], sa.p);
        break;
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

void
kt__cg_emit_store(struct cg *g, const struct kt_node *n, int lane_var, int w)
{
    const char *bname = g->lt->bufs[n->buf].name;
    struct kt_affine pre, addr;
    struct kt_buf val, dst;
    int64_t c;
    int vec, r;

    kt__cg_flat_addr(g, n->buf, n->idx, lane_var, &pre);
    c = lane_var >= 0 ? kt_aff_coef(&pre, lane_var) : 0;
    kt__cg_subst(g, &pre, -1, &addr);
    kt_buf_init(&val);
    kt_buf_init(&dst);
    vec = put_expr(g, &val, n->expr, lane_var, w);
    if (g->analysing) {
        kt__cg_note_access(g, n->buf, &addr, c, w, 0, 1,
                           c == 0 && vec && n->op != KT_ASSIGN ? w : 0, n->op);
        goto done;
    }
    r = kt__cg_find_reg(g, n->buf, &addr, c, c == 0 ? 1 : w);
    if (r >= 0 && g->promote_ok[n->buf] && g->regs[r].acc > 0) {
        struct reg *rg = &g->regs[r];
        char acc[32];
        if (rg->next == 0)
            snprintf(acc, sizeof(acc), "r%d", r);
        else
            snprintf(acc, sizeof(acc), "r%d_%d", r, rg->next);
        rg->next = (rg->next + 1) % rg->split;
        if (n->op == KT_SUM)
            kt__cg_line(g, "%s += %s;", acc, val.p);
        else
            kt__cg_line(g, "%s = kt_v%s%d(%s, %s);", acc,
                        kt__cg_combine_op(n->op), w, acc, val.p);
        goto done;
    }
    if (r >= 0 && g->promote_ok[n->buf]) {
        if (c != 0 && !vec) {
            struct kt_buf t;
            kt_buf_init(&t);
            kt_buf_printf(&t, "kt_bc%d(%s)", w, val.p);
            kt_buf_free(&val);
            val = t;
        }
        if (c == 0 && vec) {
            if (n->op == KT_ASSIGN)
                kt__cg_line(g, "r%d = (%s)[%d];", r, val.p, w - 1);
            else
                kt__cg_line(g, "r%d = kt_%s(r%d, kt_h%s%d(%s));", r,
                            n->op == KT_SUM ? "add" : kt__cg_combine_op(n->op),
                            r,
                            n->op == KT_SUM ? "sum" : kt__cg_combine_op(n->op),
                            w, val.p);
        } else if (n->op == KT_ASSIGN) {
            kt__cg_line(g, "r%d = %s;", r, val.p);
        } else if (n->op == KT_SUM) {
            kt__cg_line(g, "r%d += %s;", r, val.p);
        } else if (c != 0) {
            kt__cg_line(g, "r%d = kt_v%s%d(r%d, %s);", r,
                        kt__cg_combine_op(n->op), w, r, val.p);
        } else {
            kt__cg_line(g, "r%d = kt_%s(r%d, %s);", r, kt__cg_combine_op(n->op),
                        r, val.p);
        }
        goto done;
    }
    kt_buf_printf(&dst, "t_%s[", bname);
    kt__cg_put_aff(g, &dst, &addr);
    kt_buf_puts(&dst, "]");
    if (c == 0 && !vec) {
        if (n->op == KT_ASSIGN)
            kt__cg_line(g, "%s = %s;", dst.p, val.p);
        else if (n->op == KT_SUM)
            kt__cg_line(g, "%s += %s;", dst.p, val.p);
        else
            kt__cg_line(g, "%s = kt_%s(%s, %s);", dst.p,
                        kt__cg_combine_op(n->op), dst.p, val.p);
    } else if (c == 0) {
        /* All lanes land on one element: reduce across lanes. */
        if (n->op == KT_ASSIGN)
            kt__cg_line(g, "%s = (%s)[%d];", dst.p, val.p, w - 1);
        else
            kt__cg_line(g, "%s = kt_%s(%s, kt_h%s%d(%s));", dst.p,
                        n->op == KT_SUM ? "add" : kt__cg_combine_op(n->op),
                        dst.p,
                        n->op == KT_SUM ? "sum" : kt__cg_combine_op(n->op), w,
                        val.p);
    } else if (c == 1) {
        struct kt_buf p;
        kt_buf_init(&p);
        kt_buf_printf(&p, "&t_%s[", bname);
        kt__cg_put_aff(g, &p, &addr);
        kt_buf_puts(&p, "]");
        if (!vec)
            kt__cg_line(g, "kt_st%d(%s, kt_bc%d(%s));", w, p.p, w, val.p);
        else if (n->op == KT_ASSIGN)
            kt__cg_line(g, "kt_st%d(%s, %s);", w, p.p, val.p);
        else if (n->op == KT_SUM)
            kt__cg_line(g, "kt_st%d(%s, kt_ld%d(%s) + %s);", w, p.p, w, p.p,
                        val.p);
        else
            kt__cg_line(g, "kt_st%d(%s, kt_v%s%d(kt_ld%d(%s), %s));", w, p.p,
                        kt__cg_combine_op(n->op), w, w, p.p, val.p);
        kt_buf_free(&p);
    } else {
        /* Strided destination: scatter lane by lane. */
        if (vec)
            kt__cg_line(g, "{ kt_v%d v_ = %s;", w, val.p);
        else
            kt__cg_line(g, "{ kt_v%d v_ = kt_bc%d(%s);", w, w, val.p);
        kt__cg_line(g, "  for (int l_ = 0; l_ < %d; l_++) {", w);
        kt_buf_reset(&dst);
        kt_buf_printf(&dst, "t_%s[", bname);
        kt__cg_put_aff(g, &dst, &addr);
        kt_buf_printf(&dst, " + %lld*l_]", (long long)c);
        if (n->op == KT_ASSIGN)
            kt__cg_line(g, "    %s = v_[l_];", dst.p);
        else if (n->op == KT_SUM)
            kt__cg_line(g, "    %s += v_[l_];", dst.p);
        else
            kt__cg_line(g, "    %s = kt_%s(%s, v_[l_]);", dst.p,
                        kt__cg_combine_op(n->op), dst.p);
        kt__cg_line(g, "  } }");
    }
done:
    kt_buf_free(&val);
    kt_buf_free(&dst);
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
        if (!put_expr(g, &val, n->expr, lane_var, w)) {
            struct kt_buf t;
            kt_buf_init(&t);
            kt_buf_printf(&t, "kt_bc%d(%s)", w, val.p);
            kt_buf_free(&val);
            val = t;
        }
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
