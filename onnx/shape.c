/* shape.c - shape inference over the whole graph, node by node in
 * execution order: every input shape comes from its producer, so a
 * disagreement is reported with both nodes.  Small constant tensors
 * (Shape, Cast, Gather, Concat, Slice, arithmetic: the shape computations
 * exporters emit) are folded so that Reshape and friends see their
 * values.  Ops the importer does not know are marked unsupported. */
#include "onnx/int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A double as an int64 without undefined behaviour for huge values. */
int64_t
kt__ox_clamp_i64(double d)
{
    if (!(d > -4e18))
        return d != d ? 0 : -(int64_t)4e18;
    return d < 4e18 ? (int64_t)d : (int64_t)4e18;
}

struct kt_onnx_value *
kt__ox_in(struct kt__ox_ctx *c, int i)
{
    return i < c->n->nin && c->n->in[i] >= 0 ? &c->g->values[c->n->in[i]]
                                             : NULL;
}

struct kt_onnx_value *
kt__ox_out(struct kt__ox_ctx *c, int i)
{
    return i < c->n->nout && c->n->out[i] >= 0 ? &c->g->values[c->n->out[i]]
                                               : NULL;
}

/* Where a value comes from, for messages. */
static const char *
origin(struct kt__ox_ctx *c, const struct kt_onnx_value *v, char *buf,
       size_t len)
{
    char l[200];

    if (v->producer >= 0)
        snprintf(buf, len, "from %s",
                 kt__ox_node_label(&c->g->nodes[v->producer], l, sizeof(l)));
    else if (v->is_input)
        snprintf(buf, len, "graph input");
    else
        snprintf(buf, len, "constant");
    return buf;
}

/* "path: node 'b' (Conv): input 'y' (from node 'a' (Relu), 1x64x8x8): "
 * followed by the problem. */
int
kt__ox_mismatch(struct kt__ox_ctx *c, int i, const char *fmt, ...)
{
    struct kt_onnx_value *v = kt__ox_in(c, i);
    char l[200], o[260], sh[128], msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (v == NULL)
        return kt_seterr(c->x->err, c->x->errlen, KT_ESHAPE, "%s: %s: %s",
                         c->g->path, kt__ox_node_label(c->n, l, sizeof(l)),
                         msg);
    return kt_seterr(c->x->err, c->x->errlen, KT_ESHAPE,
                     "%s: %s: input "
                     "'%.200s' (%s, %s): %s",
                     c->g->path, kt__ox_node_label(c->n, l, sizeof(l)), v->name,
                     origin(c, v, o, sizeof(o)),
                     kt__ox_shape_str(v, sh, sizeof(sh)), msg);
}

/* Marks the node unsupported with a reason (the op is listed). */
int
kt__ox_unsupported(struct kt__ox_ctx *c, const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    c->n->role = KT_ONNX_ROLE_UNSUPPORTED;
    free(c->n->note);
    c->n->note = kt_xstrdup(msg);
    return 1;
}

void
kt__ox_set_shape(struct kt_onnx_value *v, int ndim, const int64_t *dims,
                 int dtype)
{
    if (v == NULL)
        return;
    v->ndim = ndim;
    if (ndim > 0)
        memcpy(v->dims, dims, (size_t)ndim * sizeof(*dims));
    if (v->dtype == 0)
        v->dtype = dtype;
}

static void
same_shape(struct kt__ox_ctx *c, int from, int to)
{
    struct kt_onnx_value *a = kt__ox_in(c, from);
    kt__ox_set_shape(kt__ox_out(c, to), a->ndim, a->dims, a->dtype);
}

int
kt__ox_is_const(const struct kt_onnx_value *v)
{
    return v != NULL && v->data != NULL;
}

/* Reads a constant int list (a 1-D or scalar constant input). */
int
kt__ox_const_ints(const struct kt_onnx_value *v, int64_t *dst, int max)
{
    int64_t n, i;

    if (!kt__ox_is_const(v)) /* also an optional input left out: NULL */
        return -1;
    n = kt_onnx_value_elems(v);
    if (n < 0 || n > max)
        return -1;
    for (i = 0; i < n; i++)
        dst[i] = kt__ox_clamp_i64(kt_onnx_value_get(v, i));
    return (int)n;
}

/* Stores doubles as a constant of dtype (float, double or an int type). */
void
kt__ox_store_const(struct kt_onnx_value *v, int dtype, const double *vals,
                   int64_t n)
{
    size_t es = kt__ox_dtype_size(dtype);
    unsigned char *b;
    int64_t i;

    if (es == 0)
        dtype = KT_ONNX_FLOAT, es = 4;
    b = kt_xcalloc((size_t)n + 1, es);
    for (i = 0; i < n; i++) {
        double d = vals[i];
        int64_t k64 = kt__ox_clamp_i64(d);
        if (k64 > INT32_MAX || k64 < INT32_MIN)
            k64 = k64 < 0 ? INT32_MIN : INT32_MAX;
        switch (dtype) {
        case KT_ONNX_FLOAT: {
            float f = (float)d;
            memcpy(b + 4 * i, &f, 4);
            break;
        }
        case KT_ONNX_DOUBLE: memcpy(b + 8 * i, &d, 8); break;
        case KT_ONNX_INT64: {
            int64_t k = kt__ox_clamp_i64(d);
            memcpy(b + 8 * i, &k, 8);
            break;
        }
        case KT_ONNX_INT32: {
            int32_t k = (int32_t)k64;
            memcpy(b + 4 * i, &k, 4);
            break;
        }
        default: b[i] = (unsigned char)k64; break;
        }
    }
    kt__ox_set_owned(v, dtype, b, (size_t)n * es);
}

/* Copies a constant's elements (reshapes keep data). */
void
kt__ox_copy_const(struct kt_onnx_value *dst, const struct kt_onnx_value *src)
{
    void *b;

    if (!kt__ox_is_const(src) || kt_onnx_value_elems(src) > KT__OX_FOLD_MAX)
        return;
    b = kt_xmalloc(src->nbytes + 1);
    memcpy(b, src->data, src->nbytes);
    kt__ox_set_owned(dst, src->dtype, b, src->nbytes);
}

int
kt__ox_norm_axis(int64_t axis, int rank)
{
    if (axis < 0)
        axis += rank;
    return axis < 0 || axis >= (rank > 0 ? rank : 1) ? -1 : (int)axis;
}

/* ---- Elementwise ---------------------------------------------------------- */

static const char *const unary_ops[] =
    {"Relu",        "Sigmoid",   "Tanh", "Erf",        "Sqrt",
     "HardSigmoid", "HardSwish", "Gelu", "Clip",       "Neg",
     "Exp",         "Log",       "Abs",  "Reciprocal", "BatchNormalization",
     NULL};
static const char *const binary_ops[] = {"Add", "Sub", "Mul",
                                         "Div", "Pow", NULL};

static int
in_list(const char *op, const char *const *list)
{
    for (; *list != NULL; list++)
        if (strcmp(op, *list) == 0)
            return 1;
    return 0;
}

int
kt__ox_is_elementwise(const char *op)
{
    return in_list(op, unary_ops) || in_list(op, binary_ops) ||
           strcmp(op, "Identity") == 0 || strcmp(op, "Dropout") == 0;
}

static double
binop(const char *op, double a, double b)
{
    switch (op[0]) {
    case 'A': return a + b;
    case 'S': return a - b;
    case 'M': return a * b;
    case 'D': return b == 0 ? 0 : a / b;
    default: return pow(a, b);
    }
}

/* Numpy broadcasting of a and b into o. */
static int
broadcast(struct kt__ox_ctx *c, const struct kt_onnx_value *a,
          const struct kt_onnx_value *b, struct kt_onnx_value *o)
{
    int r = a->ndim > b->ndim ? a->ndim : b->ndim, i;
    int64_t dims[KT_ONNX_MAX_DIMS];

    for (i = 0; i < r; i++) {
        int ia = i - (r - a->ndim), ib = i - (r - b->ndim);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        char sh[128];
        if (da != db && da != 1 && db != 1)
            return kt__ox_mismatch(c, 0,
                                   "does not broadcast with input '%.200s' "
                                   "(%s): dim %d is %lld against %lld",
                                   b->name, kt__ox_shape_str(b, sh, sizeof(sh)),
                                   i, (long long)da, (long long)db);
        dims[i] = da == 1 ? db : da;
    }
    kt__ox_set_shape(o, r, dims, a->dtype);
    return 0;
}

/* Element index of the broadcast operand v for output element k. */
static int64_t
bcast_index(const struct kt_onnx_value *v, const struct kt_onnx_value *o,
            int64_t k)
{
    int64_t idx = 0, stride = 1;
    int d;

    for (d = o->ndim - 1; d >= 0; d--) {
        int vd = d - (o->ndim - v->ndim);
        int64_t coord = k % o->dims[d];
        k /= o->dims[d];
        if (vd >= 0) {
            if (v->dims[vd] != 1)
                idx += coord * stride;
            stride *= v->dims[vd];
        }
    }
    return idx;
}

static int
infer_binary(struct kt__ox_ctx *c)
{
    struct kt_onnx_value *a = kt__ox_in(c, 0), *b = kt__ox_in(c, 1),
                         *o = kt__ox_out(c, 0);
    int64_t n, k;
    double *vals;
    int rc;

    if (a == NULL || b == NULL)
        return kt__ox_mismatch(c, 0, "needs two inputs");
    if ((rc = broadcast(c, a, b, o)) != 0)
        return rc;
    n = kt_onnx_value_elems(o);
    if (!kt__ox_is_const(a) || !kt__ox_is_const(b) || n > KT__OX_FOLD_MAX)
        return 0;
    vals = kt_xcalloc((size_t)n + 1, sizeof(*vals));
    for (k = 0; k < n; k++)
        vals[k] = binop(c->n->op, kt_onnx_value_get(a, bcast_index(a, o, k)),
                        kt_onnx_value_get(b, bcast_index(b, o, k)));
    kt__ox_store_const(o, a->dtype, vals, n);
    free(vals);
    return 0;
}

static int
infer_unary(struct kt__ox_ctx *c)
{
    struct kt_onnx_value *a = kt__ox_in(c, 0);
    int i;

    if (a == NULL)
        return kt__ox_mismatch(c, 0, "needs an input");
    if (strcmp(c->n->op, "BatchNormalization") == 0) {
        if (a->ndim < 2)
            return kt__ox_mismatch(c, 0, "needs at least 2 dims (N, C, ...)");
        for (i = 1; i < 5; i++) {
            struct kt_onnx_value *p = kt__ox_in(c, i);
            if (p == NULL || !kt__ox_is_const(p) ||
                kt_onnx_value_elems(p) != a->dims[1])
                return kt__ox_mismatch(c, 0,
                                       "parameter %d must be a constant of "
                                       "%lld values (one per channel)",
                                       i, (long long)a->dims[1]);
        }
        if (kt_onnx_attr_int(c->n, "training_mode", 0) != 0)
            return kt__ox_unsupported(c, "training_mode=1");
    }
    if (strcmp(c->n->op, "Clip") == 0 &&
        ((kt__ox_in(c, 1) != NULL && !kt__ox_is_const(kt__ox_in(c, 1))) ||
         (kt__ox_in(c, 2) != NULL && !kt__ox_is_const(kt__ox_in(c, 2)))))
        return kt__ox_unsupported(c, "min/max that are not constants");
    if (strcmp(c->n->op, "Gelu") == 0) {
        char buf[16];
        const char *ap = kt_onnx_attr_str(c->n, "approximate", "none", buf,
                                          sizeof(buf));
        if (strcmp(ap, "none") != 0 && strcmp(ap, "tanh") != 0)
            return kt__ox_unsupported(c, "approximate=%s", ap);
    }
    same_shape(c, 0, 0);
    for (i = 1; i < c->n->nout; i++) /* Dropout's mask */
        same_shape(c, 0, i);
    return 0;
}

static int
infer_identity(struct kt__ox_ctx *c)
{
    int rc = infer_unary(c);
    if (rc == 0)
        kt__ox_copy_const(kt__ox_out(c, 0), kt__ox_in(c, 0));
    return rc;
}

static const struct {
    const char *op;
    int (*infer)(struct kt__ox_ctx *c);
} ops[] = {
    {"Constant", kt__ox_infer_constant},
    {"Shape", kt__ox_infer_shape},
    {"Cast", kt__ox_infer_cast},
    {"Gather", kt__ox_infer_gather},
    {"Concat", kt__ox_infer_concat},
    {"Reshape", kt__ox_infer_reshape},
    {"Flatten", kt__ox_infer_flatten},
    {"Transpose", kt__ox_infer_transpose},
    {"Slice", kt__ox_infer_slice},
    {"Squeeze", kt__ox_infer_squeeze},
    {"Unsqueeze", kt__ox_infer_unsqueeze},
    {"Identity", infer_identity},
    {"Dropout", infer_identity},
};

static int
infer_node(struct kt__ox_ctx *c)
{
    size_t k;
    int i, handled = 0, rc;

    for (i = 0; i < c->n->nin; i++) {
        struct kt_onnx_value *v = kt__ox_in(c, i);
        if (v != NULL && v->ndim < 0)
            return kt__ox_unsupported(c,
                                      "input '%.100s' has an unknown shape "
                                      "(after an unsupported node)",
                                      v->name);
    }
    if (c->n->nout < 1 || c->n->out[0] < 0)
        return kt__ox_unsupported(c, "no output");
    if (c->n->domain[0] != '\0' && strcmp(c->n->domain, "ai.onnx") != 0)
        return kt__ox_unsupported(c, "domain %.60s", c->n->domain);
    for (k = 0; k < KT_ARRAY_LEN(ops); k++)
        if (strcmp(ops[k].op, c->n->op) == 0)
            return ops[k].infer(c);
    if (in_list(c->n->op, binary_ops))
        return infer_binary(c);
    if (in_list(c->n->op, unary_ops))
        return infer_unary(c);
    rc = kt__ox_infer_anchor(c->x, c->n, &handled);
    if (handled)
        return rc;
    return kt__ox_unsupported(c, "operator not supported");
}

static int
sane_shape(const struct kt_onnx_value *v)
{
    int64_t n = 1;
    int i;

    for (i = 0; i < v->ndim; i++) {
        if (v->dims[i] < 0 || v->dims[i] > KT__OX_ELEMS_MAX ||
            (v->dims[i] > 0 && n > KT__OX_ELEMS_MAX / v->dims[i]))
            return 0;
        n *= v->dims[i];
    }
    return 1;
}

int
kt__ox_infer(struct kt__ox *x)
{
    struct kt_onnx_graph *g = x->g;
    struct kt__ox_ctx c;
    int i, j, rc;

    memset(&c, 0, sizeof(c));
    c.x = x;
    c.g = g;
    for (i = 0; i < g->nnodes; i++) {
        c.n = &g->nodes[i];
        c.index = i;
        rc = infer_node(&c);
        if (rc < 0)
            return rc;
        if (c.n->role == KT_ONNX_ROLE_UNSUPPORTED) {
            g->nunsupported++;
            continue;
        }
        for (j = 0; j < c.n->nout; j++) {
            struct kt_onnx_value *o = kt__ox_out(&c, j);
            if (o != NULL && !sane_shape(o))
                return kt__ox_mismatch(&c, 0,
                                       "output '%.100s' would have more than "
                                       "2^40 elements or a dim < 0",
                                       o->name);
            if (o != NULL && o->ndim < 0 && j == 0) {
                kt__ox_unsupported(&c, "output shape unknown");
                g->nunsupported++;
                break;
            }
        }
        if (c.n->role != KT_ONNX_ROLE_UNSUPPORTED &&
            kt__ox_out(&c, 0) != NULL && kt__ox_is_const(kt__ox_out(&c, 0)))
            c.n->role = KT_ONNX_ROLE_CONSTANT;
    }
    return KT_OK;
}
