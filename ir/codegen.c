/* codegen.c - C code generation from a loop tree.
 *
 * Plain loops become C for-loops (OpenMP for parallel ones).  A loop whose
 * whole body can be expanded - only unrolled and vectorized loops below it,
 * within a statement budget - becomes a micro-kernel: its body is emitted
 * as straight-line code with explicit GCC vector-extension operations, and
 * every buffer it only touches at addresses that do not change across the
 * loop is held in registers for the duration of the loop (scalar
 * replacement).  That turns a tiled GEMM's accumulator tile into vector
 * registers, which is what makes the generated code fast. */
#include "ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct binding {
    int set;
    struct kt_affine val;
};

/* A buffer access held in a register inside a micro-kernel. */
struct reg {
    int buf;
    struct kt_affine addr;
    int width;
};

#define MAX_REGS 256

struct cg {
    const struct kt_looptree *lt;
    const struct kt_codegen_opts *o;
    struct kt_buf *out;
    int reference;
    int indent;
    struct binding *env;       /* per variable: substitution while expanding */
    unsigned char *unrolled;   /* per loop variable: unroll by pragma */
    unsigned char *inner;      /* per variable: defined inside the kernel loop */
    int nregs;
    struct reg regs[MAX_REGS];
    int promote_ok[KT_MAX_TENSORS * 2];
    int stored[KT_MAX_TENSORS * 2];
    int analysing;             /* pass 1 of a micro-kernel */
    int kernel_var;
    int nchunk;                /* counter for chunk-loop names */
    int rc;
    char *err;
    size_t errlen;
};

static void
line(struct cg *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
line(struct cg *g, const char *fmt, ...)
{
    va_list ap;
    int i;

    for (i = 0; i < g->indent; i++)
        kt_buf_puts(g->out, "    ");
    va_start(ap, fmt);
    kt_buf_vprintf(g->out, fmt, ap);
    va_end(ap);
    kt_buf_putc(g->out, '\n');
}

static void
fail(struct cg *g, const char *msg)
{
    if (g->rc == KT_OK)
        g->rc = kt_seterr(g->err, g->errlen, KT_ESCHEDULE, "codegen: %s", msg);
}

/* ---- affine helpers ---------------------------------------------------- */

static void
subst(struct cg *g, const struct kt_affine *a, int keep_var, struct kt_affine *out)
{
    int i;

    kt_aff_const(out, a->c);
    for (i = 0; i < a->n; i++) {
        int v = a->var[i];
        if (v != keep_var && g->env[v].set) {
            if (kt_aff_add(out, &g->env[v].val, a->k[i]) != KT_OK)
                fail(g, "index expression too long");
        } else if (kt_aff_add_term(out, v, a->k[i]) != KT_OK) {
            fail(g, "index expression too long");
        }
    }
}

/* Flat row-major address of idx in buffer b, with bindings applied except
 * to keep_var. */
static void
flat_addr(struct cg *g, int b, const struct kt_affine *idx, int keep_var,
          struct kt_affine *out)
{
    const struct kt_lbuf *buf = &g->lt->bufs[b];
    int64_t stride = 1;
    int d;

    kt_aff_const(out, 0);
    for (d = buf->ndim - 1; d >= 0; d--) {
        struct kt_affine s;
        subst(g, &idx[d], keep_var, &s);
        if (kt_aff_add(out, &s, stride) != KT_OK)
            fail(g, "index expression too long");
        stride *= buf->shape[d];
    }
}

static void
put_aff(struct cg *g, struct kt_buf *b, const struct kt_affine *a)
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

static int
aff_equal(const struct kt_affine *a, const struct kt_affine *b)
{
    int i;

    if (a->c != b->c || a->n != b->n)
        return 0;
    for (i = 0; i < a->n; i++)
        if (kt_aff_coef(b, a->var[i]) != a->k[i])
            return 0;
    return 1;
}

static int
aff_uses_inner(const struct cg *g, const struct kt_affine *a)
{
    int i;

    for (i = 0; i < a->n; i++)
        if (g->inner[a->var[i]])
            return 1;
    return 0;
}

/* Lanes for a vectorized loop of extent e: the widest of W, W/2, W/4
 * (at least 4) dividing e, or 1. */
static int
lanes_for(const struct cg *g, int64_t e)
{
    int w = g->o->vector_bytes / 4;

    for (; w >= 4; w /= 2)
        if (e % w == 0)
            return w;
    return 1;
}

/* ---- registers (scalar replacement) ------------------------------------ */

static int
find_reg(const struct cg *g, int buf, const struct kt_affine *addr, int width)
{
    int i;

    for (i = 0; i < g->nregs; i++)
        if (g->regs[i].buf == buf && g->regs[i].width == width &&
            aff_equal(&g->regs[i].addr, addr))
            return i;
    return -1;
}

/* Pass 1 sees an access: buffers touched at addresses that vary across the
 * kernel loop, strided, guarded or overlapping are not promoted. */
static void
note_access(struct cg *g, int buf, const struct kt_affine *addr, int64_t lane_coef,
            int width, int guarded, int is_store)
{
    int i, w = lane_coef == 0 ? 1 : width;

    if (is_store)
        g->stored[buf] = 1;
    if (!g->promote_ok[buf])
        return;
    if (guarded || (lane_coef != 0 && lane_coef != 1) || aff_uses_inner(g, addr)) {
        g->promote_ok[buf] = 0;
        return;
    }
    for (i = 0; i < g->nregs; i++) {
        const struct reg *r = &g->regs[i];
        struct kt_affine diff = *addr;
        int64_t d;
        if (r->buf != buf)
            continue;
        kt_aff_add(&diff, &r->addr, -1);
        if (diff.n != 0) {
            g->promote_ok[buf] = 0;   /* cannot prove they do not overlap */
            return;
        }
        d = diff.c;
        if (d == 0 && r->width == w)
            return;                   /* already known */
        if ((d >= 0 && d < r->width) || (d < 0 && -d < w)) {
            g->promote_ok[buf] = 0;
            return;
        }
    }
    if (g->nregs == MAX_REGS) {
        g->promote_ok[buf] = 0;
        return;
    }
    g->regs[g->nregs].buf = buf;
    g->regs[g->nregs].addr = *addr;
    g->regs[g->nregs].width = w;
    g->nregs++;
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

static void
put_load_scalar(struct cg *g, struct kt_buf *b, const struct kt_expr *e,
                const struct kt_affine *addr, int lane_var, int lane)
{
    const struct kt_lbuf *buf = &g->lt->bufs[e->src];
    int d;

    if (!e->guarded) {
        kt_buf_printf(b, "t_%s[", buf->name);
        put_aff(g, b, addr);
        kt_buf_puts(b, "]");
        return;
    }
    kt_buf_puts(b, "((");
    for (d = 0; d < e->ndim; d++) {
        struct kt_affine a;
        subst(g, &e->idx[d], -1, &a);
        if (lane_var >= 0 && lane)
            a.c += kt_aff_coef(&e->idx[d], lane_var) * lane;
        if (d)
            kt_buf_puts(b, " && ");
        kt_buf_puts(b, "(unsigned long)(");
        put_aff(g, b, &a);
        kt_buf_printf(b, ") < %lldUL", (long long)buf->shape[d]);
    }
    kt_buf_printf(b, ") ? t_%s[", buf->name);
    put_aff(g, b, addr);
    kt_buf_puts(b, "] : ");
    put_float(b, e->pad_value);
    kt_buf_puts(b, ")");
}

/* Renders e into b; returns 1 if the value is a vector of w lanes (it
 * varies with lane_var), 0 for a scalar. */
static int
put_expr(struct cg *g, struct kt_buf *b, const struct kt_expr *e, int lane_var, int w)
{
    static const char *const scalar_fn[KT_X_NOPS] = {
        [KT_X_EXP] = "expf", [KT_X_LOG] = "logf", [KT_X_SQRT] = "sqrtf",
        [KT_X_TANH] = "tanhf", [KT_X_SIGMOID] = "kt_sigmoid",
        [KT_X_RELU] = "kt_relu", [KT_X_ABS] = "fabsf",
        [KT_X_MAX] = "kt_max", [KT_X_MIN] = "kt_min",
    };
    static const char *const vector_fn[KT_X_NOPS] = {
        [KT_X_EXP] = "kt_vexp", [KT_X_LOG] = "kt_vlog", [KT_X_SQRT] = "kt_vsqrt",
        [KT_X_TANH] = "kt_vtanh", [KT_X_SIGMOID] = "kt_vsigmoid",
        [KT_X_RELU] = "kt_vrelu", [KT_X_ABS] = "kt_vabs",
        [KT_X_MAX] = "kt_vmax", [KT_X_MIN] = "kt_vmin",
    };
    struct kt_buf sa, sb;
    int va, vb, vec;

    switch (e->op) {
    case KT_X_CONST:
        put_float(b, e->value);
        return 0;
    case KT_X_LOAD: {
        struct kt_affine pre, addr;
        int64_t c;
        int r, l;
        flat_addr(g, e->src, e->idx, lane_var, &pre);
        c = lane_var >= 0 ? kt_aff_coef(&pre, lane_var) : 0;
        subst(g, &pre, -1, &addr);
        if (g->analysing) {
            note_access(g, e->src, &addr, c, w, e->guarded, 0);
            kt_buf_puts(b, "0");
            return c != 0;
        }
        r = find_reg(g, e->src, &addr, c == 0 ? 1 : w);
        if (r >= 0 && g->promote_ok[e->src] && (c == 0 || c == 1)) {
            kt_buf_printf(b, "r%d", r);
            return c != 0;
        }
        if (c == 0) {
            put_load_scalar(g, b, e, &addr, -1, 0);
            return 0;
        }
        if (c == 1 && !e->guarded) {
            kt_buf_printf(b, "kt_ld%d(&t_%s[", w, g->lt->bufs[e->src].name);
            put_aff(g, b, &addr);
            kt_buf_puts(b, "])");
            return 1;
        }
        kt_buf_printf(b, "((kt_v%d){", w);
        for (l = 0; l < w; l++) {
            struct kt_affine al = addr;
            al.c += c * l;
            if (l)
                kt_buf_puts(b, ", ");
            put_load_scalar(g, b, e, &al, lane_var, l);
        }
        kt_buf_puts(b, "})");
        return 1;
    }
    default:
        break;
    }
    kt_buf_init(&sa);
    kt_buf_init(&sb);
    va = put_expr(g, &sa, e->a, lane_var, w);
    vb = e->b ? put_expr(g, &sb, e->b, lane_var, w) : 0;
    vec = va || vb;
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
            fail(g, "unknown expression operator");
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

static const char *
combine_op(enum kt_reduce op)
{
    switch (op) {
    case KT_SUM: return "+";
    case KT_MAXR: return "max";
    default: return "min";
    }
}

static void
emit_store(struct cg *g, const struct kt_node *n, int lane_var, int w)
{
    const char *bname = g->lt->bufs[n->buf].name;
    struct kt_affine pre, addr;
    struct kt_buf val, dst;
    int64_t c;
    int vec, r;

    flat_addr(g, n->buf, n->idx, lane_var, &pre);
    c = lane_var >= 0 ? kt_aff_coef(&pre, lane_var) : 0;
    subst(g, &pre, -1, &addr);
    kt_buf_init(&val);
    kt_buf_init(&dst);
    vec = put_expr(g, &val, n->expr, lane_var, w);
    if (g->analysing) {
        note_access(g, n->buf, &addr, c, w, 0, 1);
        goto done;
    }
    r = find_reg(g, n->buf, &addr, c == 0 ? 1 : w);
    if (r >= 0 && g->promote_ok[n->buf] && (c == 0 || c == 1)) {
        if (c == 1 && !vec) {
            struct kt_buf t;
            kt_buf_init(&t);
            kt_buf_printf(&t, "kt_bc%d(%s)", w, val.p);
            kt_buf_free(&val);
            val = t;
        }
        if (c == 0 && vec) {
            if (n->op == KT_ASSIGN)
                line(g, "r%d = (%s)[%d];", r, val.p, w - 1);
            else
                line(g, "r%d = kt_%s(r%d, kt_h%s%d(%s));", r,
                     n->op == KT_SUM ? "add" : combine_op(n->op), r,
                     n->op == KT_SUM ? "sum" : combine_op(n->op), w, val.p);
        } else if (n->op == KT_ASSIGN) {
            line(g, "r%d = %s;", r, val.p);
        } else if (n->op == KT_SUM) {
            line(g, "r%d += %s;", r, val.p);
        } else if (c == 1) {
            line(g, "r%d = kt_v%s%d(r%d, %s);", r, combine_op(n->op), w, r, val.p);
        } else {
            line(g, "r%d = kt_%s(r%d, %s);", r, combine_op(n->op), r, val.p);
        }
        goto done;
    }
    kt_buf_printf(&dst, "t_%s[", bname);
    put_aff(g, &dst, &addr);
    kt_buf_puts(&dst, "]");
    if (c == 0 && !vec) {
        if (n->op == KT_ASSIGN)
            line(g, "%s = %s;", dst.p, val.p);
        else if (n->op == KT_SUM)
            line(g, "%s += %s;", dst.p, val.p);
        else
            line(g, "%s = kt_%s(%s, %s);", dst.p, combine_op(n->op), dst.p, val.p);
    } else if (c == 0) {
        /* All lanes land on one element: reduce across lanes. */
        if (n->op == KT_ASSIGN)
            line(g, "%s = (%s)[%d];", dst.p, val.p, w - 1);
        else
            line(g, "%s = kt_%s(%s, kt_h%s%d(%s));", dst.p,
                 n->op == KT_SUM ? "add" : combine_op(n->op), dst.p,
                 n->op == KT_SUM ? "sum" : combine_op(n->op), w, val.p);
    } else if (c == 1) {
        struct kt_buf p;
        kt_buf_init(&p);
        kt_buf_printf(&p, "&t_%s[", bname);
        put_aff(g, &p, &addr);
        kt_buf_puts(&p, "]");
        if (!vec)
            line(g, "kt_st%d(%s, kt_bc%d(%s));", w, p.p, w, val.p);
        else if (n->op == KT_ASSIGN)
            line(g, "kt_st%d(%s, %s);", w, p.p, val.p);
        else if (n->op == KT_SUM)
            line(g, "kt_st%d(%s, kt_ld%d(%s) + %s);", w, p.p, w, p.p, val.p);
        else
            line(g, "kt_st%d(%s, kt_v%s%d(kt_ld%d(%s), %s));", w, p.p,
                 combine_op(n->op), w, w, p.p, val.p);
        kt_buf_free(&p);
    } else {
        /* Strided destination: scatter lane by lane. */
        if (vec)
            line(g, "{ kt_v%d v_ = %s;", w, val.p);
        else
            line(g, "{ kt_v%d v_ = kt_bc%d(%s);", w, w, val.p);
        line(g, "  for (int l_ = 0; l_ < %d; l_++) {", w);
        kt_buf_reset(&dst);
        kt_buf_printf(&dst, "t_%s[", bname);
        put_aff(g, &dst, &addr);
        kt_buf_printf(&dst, " + %lld*l_]", (long long)c);
        if (n->op == KT_ASSIGN)
            line(g, "    %s = v_[l_];", dst.p);
        else if (n->op == KT_SUM)
            line(g, "    %s += v_[l_];", dst.p);
        else
            line(g, "    %s = kt_%s(%s, v_[l_]);", dst.p, combine_op(n->op), dst.p);
        line(g, "  } }");
    }
done:
    kt_buf_free(&val);
    kt_buf_free(&dst);
}

/* ---- loops ------------------------------------------------------------- */

static int64_t
trip(const struct kt_node *n)
{
    int64_t t = 0;
    int i;

    if (n->kind == KT_N_STORE)
        return 1;
    for (i = 0; i < n->nkids; i++)
        t += trip(n->kids[i]);
    if (n->kind == KT_N_LOOP)
        t *= n->extent;
    return t;
}

/* Loops under an auto_unroll_max_step pragma whose whole nest runs at most
 * that many iterations are unrolled, as TVM's unroll pass does. */
static void
mark_unroll(struct cg *g, const struct kt_node *n, int max_step)
{
    int i;

    if (n->kind == KT_N_LOOP && n->auto_unroll_max_step > max_step)
        max_step = n->auto_unroll_max_step;
    if (n->kind == KT_N_LOOP && max_step > 0 && n->ann == KT_ANN_NONE &&
        trip(n) <= max_step)
        g->unrolled[n->var] = 1;
    for (i = 0; i < n->nkids; i++)
        mark_unroll(g, n->kids[i], max_step);
}

static int
is_unrolled(const struct cg *g, const struct kt_node *n)
{
    return n->ann == KT_ANN_UNROLL || g->unrolled[n->var];
}

static int
only_stores(const struct kt_node *n)
{
    int i;

    for (i = 0; i < n->nkids; i++)
        if (n->kids[i]->kind != KT_N_STORE)
            return 0;
    return 1;
}

/* Statements n expands to when fully unrolled, or -1 if it cannot be. */
static int64_t
expand_count(const struct cg *g, const struct kt_node *n)
{
    int64_t sum = 0, c;
    int i;

    if (n->kind == KT_N_STORE)
        return 1;
    if (n->kind == KT_N_LET)
        return 0;
    if (n->kind != KT_N_LOOP)
        return -1;
    for (i = 0; i < n->nkids; i++) {
        c = expand_count(g, n->kids[i]);
        if (c < 0)
            return -1;
        sum += c;
    }
    if (n->ann == KT_ANN_VECTORIZE && only_stores(n) && lanes_for(g, n->extent) > 1)
        return n->extent / lanes_for(g, n->extent) * sum;
    if (is_unrolled(g, n) || n->extent == 1 ||
        (n->ann == KT_ANN_VECTORIZE && n->extent <= 16))
        return n->extent * sum;
    return -1;
}

static void emit_node(struct cg *g, const struct kt_node *n);

static void
emit_let(struct cg *g, const struct kt_node *n)
{
    struct kt_affine src, a;

    kt_aff_var(&a, n->src_var, 1);
    subst(g, &a, -1, &src);
    if (src.n == 0) {
        g->env[n->var].set = 1;
        kt_aff_const(&g->env[n->var].val, (src.c / n->div) % n->mod);
        return;
    }
    if (g->analysing)
        return;
    {
        struct kt_buf b;
        kt_buf_init(&b);
        put_aff(g, &b, &src);
        line(g, "const long %s = (%s) / %lld %% %lld;", g->lt->var_names[n->var],
             b.p, (long long)n->div, (long long)n->mod);
        kt_buf_free(&b);
    }
}

/* Emits (or, while analysing, walks) the fully expanded form of n. */
static void
expand(struct cg *g, const struct kt_node *n, int lane_var, int w)
{
    int64_t i;
    int k, lw;

    switch (n->kind) {
    case KT_N_STORE:
        emit_store(g, n, lane_var, w);
        return;
    case KT_N_LET:
        emit_let(g, n);
        return;
    case KT_N_LOOP:
        break;
    default:
        fail(g, "cannot expand this node");
        return;
    }
    lw = n->ann == KT_ANN_VECTORIZE && only_stores(n) ? lanes_for(g, n->extent) : 1;
    g->env[n->var].set = 1;
    for (i = 0; i < n->extent; i += lw) {
        kt_aff_const(&g->env[n->var].val, i);
        for (k = 0; k < n->nkids; k++) {
            if (lw > 1)
                expand(g, n->kids[k], n->var, lw);
            else
                expand(g, n->kids[k], lane_var, w);
        }
    }
    g->env[n->var].set = 0;
}

static void
mark_inner(struct cg *g, const struct kt_node *n, int on)
{
    int i;

    if (n->kind == KT_N_LOOP || n->kind == KT_N_LET)
        g->inner[n->var] = (unsigned char)on;
    for (i = 0; i < n->nkids; i++)
        mark_inner(g, n->kids[i], on);
}

static void
loop_header(struct cg *g, const struct kt_node *n, int step)
{
    const char *v = g->lt->var_names[n->var];

    if (g->reference) {
        line(g, "for (long %s = 0; %s < %lld; %s++) {", v, v, (long long)n->extent, v);
        return;
    }
    if (n->ann == KT_ANN_PARALLEL)
        line(g, "#pragma omp parallel for schedule(static)");
    else if (is_unrolled(g, n) && step == 1)
        line(g, "#pragma GCC unroll %lld", (long long)(n->extent < 64 ? n->extent : 64));
    if (step == 1)
        line(g, "for (long %s = 0; %s < %lld; %s++) {", v, v, (long long)n->extent, v);
    else
        line(g, "for (long %s = 0; %s < %lld; %s += %d) {", v, v,
             (long long)n->extent, v, step);
}

/* A loop whose body expands completely: straight-line vector code, with
 * loop-invariant accesses held in registers. */
static void
emit_kernel_loop(struct cg *g, const struct kt_node *n)
{
    int i, k, keep = 0;

    g->nregs = 0;
    for (i = 0; i < g->lt->nbufs; i++) {
        g->promote_ok[i] = n->ann != KT_ANN_PARALLEL;
        g->stored[i] = 0;
    }
    mark_inner(g, n, 1);
    g->analysing = 1;
    for (k = 0; k < n->nkids; k++)
        expand(g, n->kids[k], -1, 1);
    g->analysing = 0;
    mark_inner(g, n, 0);
    /* Keep registers only for promotable buffers that the loop writes. */
    for (i = 0; i < g->nregs; i++)
        if (g->promote_ok[g->regs[i].buf] && g->stored[g->regs[i].buf])
            g->regs[keep++] = g->regs[i];
    g->nregs = keep;
    if (g->nregs > 0) {
        line(g, "{");
        g->indent++;
        for (i = 0; i < g->nregs; i++) {
            struct kt_buf a;
            kt_buf_init(&a);
            put_aff(g, &a, &g->regs[i].addr);
            if (g->regs[i].width > 1)
                line(g, "kt_v%d r%d = kt_ld%d(&t_%s[%s]);", g->regs[i].width, i,
                     g->regs[i].width, g->lt->bufs[g->regs[i].buf].name, a.p);
            else
                line(g, "float r%d = t_%s[%s];", i,
                     g->lt->bufs[g->regs[i].buf].name, a.p);
            kt_buf_free(&a);
        }
    }
    loop_header(g, n, 1);
    g->indent++;
    for (k = 0; k < n->nkids; k++)
        expand(g, n->kids[k], -1, 1);
    g->indent--;
    line(g, "}");
    if (g->nregs > 0) {
        for (i = 0; i < g->nregs; i++) {
            struct kt_buf a;
            kt_buf_init(&a);
            put_aff(g, &a, &g->regs[i].addr);
            if (g->regs[i].width > 1)
                line(g, "kt_st%d(&t_%s[%s], r%d);", g->regs[i].width,
                     g->lt->bufs[g->regs[i].buf].name, a.p, i);
            else
                line(g, "t_%s[%s] = r%d;", g->lt->bufs[g->regs[i].buf].name, a.p, i);
            kt_buf_free(&a);
        }
        g->indent--;
        line(g, "}");
    }
    g->nregs = 0;
}

static void
emit_loop(struct cg *g, const struct kt_node *n)
{
    int64_t count = 0, c;
    int k, w;

    if (!g->reference && n->ann == KT_ANN_VECTORIZE && only_stores(n) &&
        (w = lanes_for(g, n->extent)) > 1) {
        loop_header(g, n, w);
        g->indent++;
        for (k = 0; k < n->nkids; k++)
            emit_store(g, n->kids[k], n->var, w);
        g->indent--;
        line(g, "}");
        return;
    }
    if (!g->reference) {
        for (k = 0; k < n->nkids && count >= 0; k++) {
            c = expand_count(g, n->kids[k]);
            count = c < 0 ? -1 : count + c;
        }
        if (count >= 0 && count <= g->o->max_unrolled_stmts) {
            emit_kernel_loop(g, n);
            return;
        }
    }
    loop_header(g, n, 1);
    g->indent++;
    for (k = 0; k < n->nkids; k++)
        emit_node(g, n->kids[k]);
    g->indent--;
    line(g, "}");
}

#define STACK_TILE_BYTES (256 * 1024)

static int64_t
buf_elems(const struct kt_lbuf *b)
{
    int64_t n = 1;
    int d;

    for (d = 0; d < b->ndim; d++)
        n *= b->shape[d];
    return n;
}

static void
emit_node(struct cg *g, const struct kt_node *n)
{
    int k;

    switch (n->kind) {
    case KT_N_SEQ:
        for (k = 0; k < n->nkids; k++)
            emit_node(g, n->kids[k]);
        break;
    case KT_N_LOOP:
        emit_loop(g, n);
        break;
    case KT_N_LET:
        emit_let(g, n);
        break;
    case KT_N_STORE:
        emit_store(g, n, -1, 1);
        break;
    case KT_N_ALLOC: {
        const struct kt_lbuf *b = &g->lt->bufs[n->buf];
        int64_t elems = buf_elems(b);
        int heap = elems * 4 > STACK_TILE_BYTES;
        line(g, "{");
        g->indent++;
        if (heap) {
            line(g, "float *restrict t_%s = aligned_alloc(64, %lld);", b->name,
                 (long long)((elems * 4 + 63) / 64 * 64));
            line(g, "if (t_%s == NULL) abort();", b->name);
        } else {
            line(g, "float t_%s[%lld] __attribute__((aligned(64)));", b->name,
                 (long long)elems);
        }
        for (k = 0; k < n->nkids; k++)
            emit_node(g, n->kids[k]);
        if (heap)
            line(g, "free(t_%s);", b->name);
        g->indent--;
        line(g, "}");
        break;
    }
    }
}

void
kt_codegen_default_opts(struct kt_codegen_opts *o)
{
    memset(o, 0, sizeof(*o));
#if defined(__x86_64__)
    __builtin_cpu_init();
    o->vector_bytes = __builtin_cpu_supports("avx512f") ? 64
                      : __builtin_cpu_supports("avx2") ? 32 : 16;
#else
    o->vector_bytes = 16;
#endif
    o->max_unrolled_stmts = 256;
}

static int
gen_function(const struct kt_looptree *lt, const struct kt_codegen_opts *o,
             const char *fname, int reference, struct kt_buf *out, char *err,
             size_t errlen)
{
    struct cg g;
    int i;

    memset(&g, 0, sizeof(g));
    g.lt = lt;
    g.o = o;
    g.out = out;
    g.reference = reference;
    g.err = err;
    g.errlen = errlen;
    g.env = kt_xcalloc((size_t)lt->nvars + 1, sizeof(*g.env));
    g.unrolled = kt_xcalloc((size_t)lt->nvars + 1, 1);
    g.inner = kt_xcalloc((size_t)lt->nvars + 1, 1);
    if (!reference)
        mark_unroll(&g, lt->root, 0);

    line(&g, "static void\n%s(float *const *args)\n{", fname);
    g.indent = 1;
    for (i = 0; i < lt->nargs; i++)
        line(&g, "float *restrict t_%s = (float *)__builtin_assume_aligned(args[%d], 64);",
             lt->bufs[lt->args[i]].name, i);
    for (i = 0; i < lt->nbufs; i++) {
        const struct kt_lbuf *b = &lt->bufs[i];
        if (b->scope != KT_BUF_HEAP)
            continue;
        line(&g, "float *restrict t_%s = aligned_alloc(64, %lld);", b->name,
             (long long)((buf_elems(b) * 4 + 63) / 64 * 64));
        line(&g, "if (t_%s == NULL) abort();", b->name);
    }
    emit_node(&g, lt->root);
    for (i = 0; i < lt->nbufs; i++)
        if (lt->bufs[i].scope == KT_BUF_HEAP)
            line(&g, "free(t_%s);", lt->bufs[i].name);
    g.indent = 0;
    line(&g, "}");
    free(g.env);
    free(g.unrolled);
    free(g.inner);
    return g.rc;
}

int
kt_codegen_function(const struct kt_looptree *lt, const struct kt_codegen_opts *o,
                    const char *fname, struct kt_buf *out, char *err, size_t errlen)
{
    return gen_function(lt, o, fname, 0, out, err, errlen);
}

int
kt__codegen_reference(const struct kt_looptree *lt, const struct kt_codegen_opts *o,
                      const char *fname, struct kt_buf *out, char *err, size_t errlen)
{
    return gen_function(lt, o, fname, 1, out, err, errlen);
}
