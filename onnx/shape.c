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

#define FOLD_MAX 4096          /* constants up to this size are folded */
#define ELEMS_MAX ((int64_t)1 << 40)   /* any tensor, as the IR allows */

/* A double as an int64 without undefined behaviour for huge values. */
static int64_t
clamp_i64(double d)
{
    if (!(d > -4e18))
        return d != d ? 0 : -(int64_t)4e18;
    return d < 4e18 ? (int64_t)d : (int64_t)4e18;
}

struct ctx {
    struct kt__ox *x;
    struct kt_onnx_graph *g;
    struct kt_onnx_node *n;
    int index;
};

static struct kt_onnx_value *
in(struct ctx *c, int i)
{
    return i < c->n->nin && c->n->in[i] >= 0 ? &c->g->values[c->n->in[i]]
                                             : NULL;
}

static struct kt_onnx_value *
out(struct ctx *c, int i)
{
    return i < c->n->nout && c->n->out[i] >= 0 ? &c->g->values[c->n->out[i]]
                                               : NULL;
}

/* Where a value comes from, for messages. */
static const char *
origin(struct ctx *c, const struct kt_onnx_value *v, char *buf, size_t len)
{
    char l[200];

    if (v->producer >= 0)
        snprintf(buf, len, "from %s", kt__ox_node_label(
                 &c->g->nodes[v->producer], l, sizeof(l)));
    else if (v->is_input)
        snprintf(buf, len, "graph input");
    else
        snprintf(buf, len, "constant");
    return buf;
}

/* "path: node 'b' (Conv): input 'y' (from node 'a' (Relu), 1x64x8x8): "
 * followed by the problem. */
static int
mismatch(struct ctx *c, int i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
mismatch(struct ctx *c, int i, const char *fmt, ...)
{
    struct kt_onnx_value *v = in(c, i);
    char l[200], o[260], sh[128], msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (v == NULL)
        return kt_seterr(c->x->err, c->x->errlen, KT_ESHAPE, "%s: %s: %s",
                         c->g->path, kt__ox_node_label(c->n, l, sizeof(l)),
                         msg);
    return kt_seterr(c->x->err, c->x->errlen, KT_ESHAPE, "%s: %s: input "
                     "'%.200s' (%s, %s): %s", c->g->path,
                     kt__ox_node_label(c->n, l, sizeof(l)), v->name,
                     origin(c, v, o, sizeof(o)),
                     kt__ox_shape_str(v, sh, sizeof(sh)), msg);
}

/* Marks the node unsupported with a reason (the op is listed). */
static int
unsupported(struct ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
unsupported(struct ctx *c, const char *fmt, ...)
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

static void
set_shape(struct kt_onnx_value *v, int ndim, const int64_t *dims, int dtype)
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
same_shape(struct ctx *c, int from, int to)
{
    struct kt_onnx_value *a = in(c, from);
    set_shape(out(c, to), a->ndim, a->dims, a->dtype);
}

static int
is_const(const struct kt_onnx_value *v)
{
    return v != NULL && v->data != NULL;
}

/* Reads a constant int list (a 1-D or scalar constant input). */
static int
const_ints(const struct kt_onnx_value *v, int64_t *dst, int max)
{
    int64_t n = kt_onnx_value_elems(v), i;

    if (!is_const(v) || n < 0 || n > max)
        return -1;
    for (i = 0; i < n; i++)
        dst[i] = clamp_i64(kt_onnx_value_get(v, i));
    return (int)n;
}

/* Stores doubles as a constant of dtype (float, double or an int type). */
static void
store_const(struct kt_onnx_value *v, int dtype, const double *vals, int64_t n)
{
    size_t es = kt__ox_dtype_size(dtype);
    unsigned char *b;
    int64_t i;

    if (es == 0)
        dtype = KT_ONNX_FLOAT, es = 4;
    b = kt_xcalloc((size_t)n + 1, es);
    for (i = 0; i < n; i++) {
        double d = vals[i];
        int64_t k64 = clamp_i64(d);
        if (k64 > INT32_MAX || k64 < INT32_MIN)
            k64 = k64 < 0 ? INT32_MIN : INT32_MAX;
        switch (dtype) {
        case KT_ONNX_FLOAT: { float f = (float)d; memcpy(b + 4 * i, &f, 4);
                              break; }
        case KT_ONNX_DOUBLE: memcpy(b + 8 * i, &d, 8); break;
        case KT_ONNX_INT64: { int64_t k = clamp_i64(d); memcpy(b + 8 * i, &k, 8);
                              break; }
        case KT_ONNX_INT32: { int32_t k = (int32_t)k64; memcpy(b + 4 * i, &k, 4);
                              break; }
        default: b[i] = (unsigned char)k64; break;
        }
    }
    kt__ox_set_owned(v, dtype, b, (size_t)n * es);
}

/* Copies a constant's elements (reshapes keep data). */
static void
copy_const(struct kt_onnx_value *dst, const struct kt_onnx_value *src)
{
    void *b;

    if (!is_const(src) || kt_onnx_value_elems(src) > FOLD_MAX)
        return;
    b = kt_xmalloc(src->nbytes + 1);
    memcpy(b, src->data, src->nbytes);
    kt__ox_set_owned(dst, src->dtype, b, src->nbytes);
}

static int
norm_axis(int64_t axis, int rank)
{
    if (axis < 0)
        axis += rank;
    return axis < 0 || axis >= (rank > 0 ? rank : 1) ? -1 : (int)axis;
}

/* ---- Elementwise ---------------------------------------------------------- */

static const char *const unary_ops[] = {
    "Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "HardSigmoid", "HardSwish",
    "Gelu", "Clip", "Neg", "Exp", "Log", "Abs", "Reciprocal",
    "BatchNormalization", NULL
};
static const char *const binary_ops[] = {"Add", "Sub", "Mul", "Div", "Pow",
                                         NULL};

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
broadcast(struct ctx *c, const struct kt_onnx_value *a,
          const struct kt_onnx_value *b, struct kt_onnx_value *o)
{
    int r = a->ndim > b->ndim ? a->ndim : b->ndim, i;
    int64_t dims[KT_ONNX_MAX_DIMS];

    for (i = 0; i < r; i++) {
        int ia = i - (r - a->ndim), ib = i - (r - b->ndim);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        char sh[128];
        if (da != db && da != 1 && db != 1)
            return mismatch(c, 0, "does not broadcast with input '%.200s' "
                            "(%s): dim %d is %lld against %lld", b->name,
                            kt__ox_shape_str(b, sh, sizeof(sh)), i,
                            (long long)da, (long long)db);
        dims[i] = da == 1 ? db : da;
    }
    set_shape(o, r, dims, a->dtype);
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
infer_binary(struct ctx *c)
{
    struct kt_onnx_value *a = in(c, 0), *b = in(c, 1), *o = out(c, 0);
    int64_t n, k;
    double *vals;
    int rc;

    if (a == NULL || b == NULL)
        return mismatch(c, 0, "needs two inputs");
    if ((rc = broadcast(c, a, b, o)) != 0)
        return rc;
    n = kt_onnx_value_elems(o);
    if (!is_const(a) || !is_const(b) || n > FOLD_MAX)
        return 0;
    vals = kt_xcalloc((size_t)n + 1, sizeof(*vals));
    for (k = 0; k < n; k++)
        vals[k] = binop(c->n->op, kt_onnx_value_get(a, bcast_index(a, o, k)),
                        kt_onnx_value_get(b, bcast_index(b, o, k)));
    store_const(o, a->dtype, vals, n);
    free(vals);
    return 0;
}

static int
infer_unary(struct ctx *c)
{
    struct kt_onnx_value *a = in(c, 0);
    int i;

    if (a == NULL)
        return mismatch(c, 0, "needs an input");
    if (strcmp(c->n->op, "BatchNormalization") == 0) {
        if (a->ndim < 2)
            return mismatch(c, 0, "needs at least 2 dims (N, C, ...)");
        for (i = 1; i < 5; i++) {
            struct kt_onnx_value *p = in(c, i);
            if (p == NULL || !is_const(p) || kt_onnx_value_elems(p) !=
                a->dims[1])
                return mismatch(c, 0, "parameter %d must be a constant of "
                                "%lld values (one per channel)", i,
                                (long long)a->dims[1]);
        }
        if (kt_onnx_attr_int(c->n, "training_mode", 0) != 0)
            return unsupported(c, "training_mode=1");
    }
    if (strcmp(c->n->op, "Clip") == 0 && ((in(c, 1) != NULL &&
        !is_const(in(c, 1))) || (in(c, 2) != NULL && !is_const(in(c, 2)))))
        return unsupported(c, "min/max that are not constants");
    if (strcmp(c->n->op, "Gelu") == 0) {
        char buf[16];
        const char *ap = kt_onnx_attr_str(c->n, "approximate", "none", buf,
                                          sizeof(buf));
        if (strcmp(ap, "none") != 0 && strcmp(ap, "tanh") != 0)
            return unsupported(c, "approximate=%s", ap);
    }
    same_shape(c, 0, 0);
    for (i = 1; i < c->n->nout; i++)   /* Dropout's mask */
        same_shape(c, 0, i);
    return 0;
}

static int
infer_identity(struct ctx *c)
{
    int rc = infer_unary(c);
    if (rc == 0)
        copy_const(out(c, 0), in(c, 0));
    return rc;
}

/* ---- Constants and shape arithmetic --------------------------------------- */

static int
infer_constant(struct ctx *c)
{
    const Onnx__NodeProto *p = c->n->proto;
    struct kt_onnx_value *o = out(c, 0);
    size_t i;

    for (i = 0; o != NULL && i < p->n_attribute; i++) {
        const Onnx__AttributeProto *a = p->attribute[i];
        double vals[1024];
        size_t k;
        if (a->name == NULL)
            continue;
        if (strcmp(a->name, "value") == 0 && a->t != NULL)
            return kt__ox_tensor(c->x, o, a->t, "Constant");
        if (strcmp(a->name, "value_float") == 0 || strcmp(a->name,
            "value_int") == 0) {
            vals[0] = a->name[6] == 'f' ? a->f : (double)a->i;
            set_shape(o, 0, NULL, 0);
            store_const(o, a->name[6] == 'f' ? KT_ONNX_FLOAT : KT_ONNX_INT64,
                        vals, 1);
            return 0;
        }
        if ((strcmp(a->name, "value_floats") == 0 && a->n_floats <= 1024) ||
            (strcmp(a->name, "value_ints") == 0 && a->n_ints <= 1024)) {
            int fl = a->name[6] == 'f';
            int64_t n = fl ? (int64_t)a->n_floats : (int64_t)a->n_ints;
            for (k = 0; k < (size_t)n; k++)
                vals[k] = fl ? a->floats[k] : (double)a->ints[k];
            set_shape(o, 1, &n, 0);
            store_const(o, fl ? KT_ONNX_FLOAT : KT_ONNX_INT64, vals, n);
            return 0;
        }
    }
    return unsupported(c, "no value attribute the importer reads");
}

static int
infer_shape(struct ctx *c)
{
    struct kt_onnx_value *a = in(c, 0);
    double vals[KT_ONNX_MAX_DIMS];
    int64_t start = kt_onnx_attr_int(c->n, "start", 0);
    int64_t end = kt_onnx_attr_int(c->n, "end", a != NULL ? a->ndim : 0), n;
    int i;

    if (a == NULL)
        return mismatch(c, 0, "needs an input");
    if (start < 0)
        start += a->ndim;
    if (end < 0)
        end += a->ndim;
    start = start < 0 ? 0 : start > a->ndim ? a->ndim : start;
    end = end < start ? start : end > a->ndim ? a->ndim : end;
    n = end - start;
    for (i = 0; i < n; i++)
        vals[i] = (double)a->dims[start + i];
    set_shape(out(c, 0), 1, &n, KT_ONNX_INT64);
    store_const(out(c, 0), KT_ONNX_INT64, vals, n);
    return 0;
}

static int
infer_cast(struct ctx *c)
{
    struct kt_onnx_value *a = in(c, 0), *o = out(c, 0);
    int to = (int)kt_onnx_attr_int(c->n, "to", KT_ONNX_FLOAT);
    int64_t n, k;
    double *vals;

    if (a == NULL)
        return mismatch(c, 0, "needs an input");
    set_shape(o, a->ndim, a->dims, to);
    o->dtype = to;
    n = kt_onnx_value_elems(a);
    if (!is_const(a) || n > FOLD_MAX || kt__ox_dtype_size(to) == 0)
        return 0;
    vals = kt_xcalloc((size_t)n + 1, sizeof(*vals));
    for (k = 0; k < n; k++)
        vals[k] = kt_onnx_value_get(a, k);
    store_const(o, to, vals, n);
    free(vals);
    return 0;
}

static int
infer_gather(struct ctx *c)
{
    struct kt_onnx_value *a = in(c, 0), *idx = in(c, 1), *o = out(c, 0);
    int64_t dims[KT_ONNX_MAX_DIMS], n, inner = 1, k;
    int axis, r = 0, i;
    double *vals;

    if (a == NULL || idx == NULL)
        return mismatch(c, 0, "needs data and indices");
    axis = norm_axis(kt_onnx_attr_int(c->n, "axis", 0), a->ndim);
    if (axis < 0 || a->ndim + idx->ndim - 1 > KT_ONNX_MAX_DIMS)
        return mismatch(c, 0, "axis out of range");
    for (i = 0; i < axis; i++)
        dims[r++] = a->dims[i];
    for (i = 0; i < idx->ndim; i++)
        dims[r++] = idx->dims[i];
    for (i = axis + 1; i < a->ndim; i++) {
        dims[r++] = a->dims[i];
        inner *= a->dims[i];
    }
    set_shape(o, r, dims, a->dtype);
    n = kt_onnx_value_elems(o);
    if (!is_const(a) || !is_const(idx) || n > FOLD_MAX)
        return 0;
    vals = kt_xcalloc((size_t)n + 1, sizeof(*vals));
    for (k = 0; k < n; k++) {
        int64_t in_i = k % inner, rest = k / inner;
        int64_t j = rest % kt_onnx_value_elems(idx), outer = rest /
                    kt_onnx_value_elems(idx);
        int64_t g = clamp_i64(kt_onnx_value_get(idx, j));
        if (g < 0)
            g += a->dims[axis];
        vals[k] = kt_onnx_value_get(a, (outer * a->dims[axis] + g) * inner +
                                    in_i);
    }
    store_const(o, a->dtype, vals, n);
    free(vals);
    return 0;
}

static int
infer_concat(struct ctx *c)
{
    struct kt_onnx_value *a = in(c, 0), *o = out(c, 0);
    int64_t dims[KT_ONNX_MAX_DIMS];
    int axis, i, d, allc = 1;

    if (a == NULL)
        return mismatch(c, 0, "needs inputs");
    axis = norm_axis(kt_onnx_attr_int(c->n, "axis", 0), a->ndim);
    if (axis < 0)
        return mismatch(c, 0, "axis out of range");
    memcpy(dims, a->dims, sizeof(dims));
    dims[axis] = 0;
    for (i = 0; i < c->n->nin; i++) {
        struct kt_onnx_value *b = in(c, i);
        if (b == NULL)
            continue;
        if (b->ndim != a->ndim)
            return mismatch(c, i, "rank %d differs from the first input's %d",
                            b->ndim, a->ndim);
        for (d = 0; d < a->ndim; d++)
            if (d != axis && b->dims[d] != a->dims[d])
                return mismatch(c, i, "dim %d is %lld but the first input's "
                                "is %lld (concat axis %d)", d,
                                (long long)b->dims[d], (long long)a->dims[d],
                                axis);
        dims[axis] += b->dims[axis];
        allc &= is_const(b);
    }
    set_shape(o, a->ndim, dims, a->dtype);
    if (allc && a->ndim == 1 && dims[0] <= FOLD_MAX) {
        double vals[FOLD_MAX];
        int64_t k = 0, j;
        for (i = 0; i < c->n->nin; i++)
            for (j = 0; in(c, i) != NULL && j < in(c, i)->dims[0]; j++)
                vals[k++] = kt_onnx_value_get(in(c, i), j);
        store_const(o, a->dtype, vals, k);
    }
    return 0;
}

static int
infer_reshape(struct ctx *c)
{
    struct kt_onnx_value *a = in(c, 0), *o = out(c, 0);
    int64_t sh[KT_ONNX_MAX_DIMS], known = 1, total;
    int n, i, neg = -1;

    if (a == NULL)
        return mismatch(c, 0, "needs an input");
    if (c->n->nin >= 2)
        n = const_ints(in(c, 1), sh, KT_ONNX_MAX_DIMS);
    else
        n = kt_onnx_attr_ints(c->n, "shape", sh, KT_ONNX_MAX_DIMS);
    if (n < 0 || n > KT_ONNX_MAX_DIMS)
        return unsupported(c, "a target shape that is not a constant of at "
                           "most %d dims", KT_ONNX_MAX_DIMS);
    for (i = 0; i < n; i++) {
        if (sh[i] == 0 && !kt_onnx_attr_int(c->n, "allowzero", 0))
            sh[i] = i < a->ndim ? a->dims[i] : 1;
        if (sh[i] == -1) {
            if (neg >= 0)
                return mismatch(c, 1, "two -1 dims in the target shape");
            neg = i;
        } else if (sh[i] < 1 || sh[i] > ELEMS_MAX || known > ELEMS_MAX /
                   sh[i]) {
            return mismatch(c, 1, "bad target dim %lld", (long long)sh[i]);
        } else {
            known *= sh[i];
        }
    }
    total = kt_onnx_value_elems(a);
    if (neg >= 0)
        sh[neg] = known > 0 ? total / known : 0;
    if (neg >= 0 ? sh[neg] * known != total : known != total)
        return mismatch(c, 0, "cannot reshape %lld elements to %lld",
                        (long long)total, (long long)known);
    set_shape(o, n, sh, a->dtype);
    copy_const(o, a);
    return 0;
}

static int
infer_flatten(struct ctx *c)
{
    struct kt_onnx_value *a = in(c, 0);
    int64_t sh[2] = {1, 1};
    int axis, i;

    if (a == NULL)
        return mismatch(c, 0, "needs an input");
    axis = (int)kt_onnx_attr_int(c->n, "axis", 1);
    if (axis < 0)
        axis += a->ndim;
    if (axis < 0 || axis > a->ndim)
        return mismatch(c, 0, "axis %d out of range", axis);
    for (i = 0; i < a->ndim; i++)
        sh[i >= axis] *= a->dims[i];
    set_shape(out(c, 0), 2, sh, a->dtype);
    copy_const(out(c, 0), a);
    return 0;
}

static int
infer_transpose(struct ctx *c)
{
    struct kt_onnx_value *a = in(c, 0);
    int64_t perm[KT_ONNX_MAX_DIMS], sh[KT_ONNX_MAX_DIMS];
    int n, i, seen = 0;

    if (a == NULL)
        return mismatch(c, 0, "needs an input");
    n = kt_onnx_attr_ints(c->n, "perm", perm, KT_ONNX_MAX_DIMS);
    if (n == 0)
        for (n = 0; n < a->ndim; n++)
            perm[n] = a->ndim - 1 - n;
    if (n != a->ndim)
        return mismatch(c, 0, "perm has %d entries for %d dims", n, a->ndim);
    for (i = 0; i < n; i++) {
        if (perm[i] < 0 || perm[i] >= n || (seen & (1 << perm[i])))
            return mismatch(c, 0, "perm is not a permutation");
        seen |= 1 << perm[i];
        sh[i] = a->dims[perm[i]];
    }
    set_shape(out(c, 0), n, sh, a->dtype);
    return 0;
}

static int
infer_slice(struct ctx *c)
{
    struct kt_onnx_value *a = in(c, 0), *o = out(c, 0);
    int64_t st[KT_ONNX_MAX_DIMS], en[KT_ONNX_MAX_DIMS], ax[KT_ONNX_MAX_DIMS];
    int64_t sp[KT_ONNX_MAX_DIMS], dims[KT_ONNX_MAX_DIMS];
    int64_t first[KT_ONNX_MAX_DIMS] = {0}, step[KT_ONNX_MAX_DIMS];
    int n, ne, na, i;

    if (a == NULL)
        return mismatch(c, 0, "needs an input");
    if (c->g->opset < 10) {
        n = kt_onnx_attr_ints(c->n, "starts", st, KT_ONNX_MAX_DIMS);
        ne = kt_onnx_attr_ints(c->n, "ends", en, KT_ONNX_MAX_DIMS);
        na = kt_onnx_attr_ints(c->n, "axes", ax, KT_ONNX_MAX_DIMS);
        for (i = 0; i < n; i++)
            sp[i] = 1;
    } else {
        n = const_ints(in(c, 1), st, KT_ONNX_MAX_DIMS);
        ne = const_ints(in(c, 2), en, KT_ONNX_MAX_DIMS);
        na = in(c, 3) != NULL ? const_ints(in(c, 3), ax, KT_ONNX_MAX_DIMS) : 0;
        if (in(c, 4) != NULL) {
            if (const_ints(in(c, 4), sp, KT_ONNX_MAX_DIMS) != n)
                return unsupported(c, "steps that are not constants");
        } else {
            for (i = 0; i < n && i < KT_ONNX_MAX_DIMS; i++)
                sp[i] = 1;
        }
    }
    if (n < 0 || ne != n || na < 0 || (na != 0 && na != n))
        return unsupported(c, "starts/ends/axes that are not constants of "
                           "equal length");
    memcpy(dims, a->dims, sizeof(dims));
    for (i = 0; i < a->ndim; i++)
        step[i] = 1;
    for (i = 0; i < n; i++) {
        int d = norm_axis(na ? ax[i] : i, a->ndim);
        int64_t len, s, e;
        if (d < 0 || sp[i] == 0 || sp[i] > ELEMS_MAX || sp[i] < -ELEMS_MAX)
            return mismatch(c, 0, "slice axis or step out of range");
        len = a->dims[d];
        s = st[i] < -ELEMS_MAX ? -ELEMS_MAX : st[i] > ELEMS_MAX ? ELEMS_MAX
                                                                : st[i];
        e = en[i] < -ELEMS_MAX ? -ELEMS_MAX : en[i] > ELEMS_MAX ? ELEMS_MAX
                                                                : en[i];
        s = s < 0 ? s + len : s;
        e = e < 0 ? e + len : e;
        if (sp[i] > 0) {
            s = s < 0 ? 0 : s > len ? len : s;
            e = e < 0 ? 0 : e > len ? len : e;
            dims[d] = e > s ? (e - s + sp[i] - 1) / sp[i] : 0;
        } else {
            s = s < 0 ? -1 : s > len - 1 ? len - 1 : s;
            e = e < -1 ? -1 : e > len - 1 ? len - 1 : e;
            dims[d] = s > e ? (s - e - sp[i] - 1) / -sp[i] : 0;
        }
        first[d] = s;
        step[d] = sp[i];
    }
    set_shape(o, a->ndim, dims, a->dtype);
    if (is_const(a) && a->ndim == 1 && dims[0] <= FOLD_MAX) {
        double vals[FOLD_MAX];
        int64_t k;
        for (k = 0; k < dims[0]; k++)
            vals[k] = kt_onnx_value_get(a, first[0] + k * step[0]);
        store_const(o, a->dtype, vals, dims[0]);
    }
    return 0;
}

/* Squeeze and Unsqueeze: axes from the attribute (opset < 13) or input. */
static int
squeeze_axes(struct ctx *c, int64_t *axes)
{
    if (c->n->nin >= 2)
        return const_ints(in(c, 1), axes, KT_ONNX_MAX_DIMS);
    return kt_onnx_attr_ints(c->n, "axes", axes, KT_ONNX_MAX_DIMS);
}

static int
infer_squeeze(struct ctx *c)
{
    struct kt_onnx_value *a = in(c, 0);
    int64_t axes[KT_ONNX_MAX_DIMS], dims[KT_ONNX_MAX_DIMS];
    int n, i, j, r = 0, drop;

    if (a == NULL)
        return mismatch(c, 0, "needs an input");
    n = squeeze_axes(c, axes);
    if (n < 0)
        return unsupported(c, "axes that are not constants");
    for (i = 0; i < a->ndim; i++) {
        drop = n == 0 && a->dims[i] == 1;
        for (j = 0; j < n; j++)
            if (norm_axis(axes[j], a->ndim) == i)
                drop = 1;
        if (drop && a->dims[i] != 1)
            return mismatch(c, 0, "cannot squeeze dim %d of size %lld", i,
                            (long long)a->dims[i]);
        if (!drop)
            dims[r++] = a->dims[i];
    }
    set_shape(out(c, 0), r, dims, a->dtype);
    copy_const(out(c, 0), a);
    return 0;
}

static int
infer_unsqueeze(struct ctx *c)
{
    struct kt_onnx_value *a = in(c, 0);
    int64_t axes[KT_ONNX_MAX_DIMS], dims[KT_ONNX_MAX_DIMS];
    int n, i, j, r, k = 0, ins;

    if (a == NULL)
        return mismatch(c, 0, "needs an input");
    n = squeeze_axes(c, axes);
    r = a->ndim + n;
    if (n <= 0 || r > KT_ONNX_MAX_DIMS)
        return unsupported(c, "axes that are not constants");
    for (i = 0; i < r; i++) {
        ins = 0;
        for (j = 0; j < n; j++)
            if (norm_axis(axes[j], r) == i)
                ins = 1;
        if (!ins && k >= a->ndim)
            return mismatch(c, 0, "bad unsqueeze axes");
        dims[i] = ins ? 1 : a->dims[k++];
    }
    set_shape(out(c, 0), r, dims, a->dtype);
    copy_const(out(c, 0), a);
    return 0;
}

static const struct {
    const char *op;
    int (*infer)(struct ctx *c);
} ops[] = {
    {"Constant", infer_constant}, {"Shape", infer_shape},
    {"Cast", infer_cast}, {"Gather", infer_gather},
    {"Concat", infer_concat}, {"Reshape", infer_reshape},
    {"Flatten", infer_flatten}, {"Transpose", infer_transpose},
    {"Slice", infer_slice}, {"Squeeze", infer_squeeze},
    {"Unsqueeze", infer_unsqueeze}, {"Identity", infer_identity},
    {"Dropout", infer_identity},
};

static int
infer_node(struct ctx *c)
{
    size_t k;
    int i, handled = 0, rc;

    for (i = 0; i < c->n->nin; i++) {
        struct kt_onnx_value *v = in(c, i);
        if (v != NULL && v->ndim < 0)
            return unsupported(c, "input '%.100s' has an unknown shape "
                               "(after an unsupported node)", v->name);
    }
    if (c->n->domain[0] != '\0' && strcmp(c->n->domain, "ai.onnx") != 0)
        return unsupported(c, "domain %.60s", c->n->domain);
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
    return unsupported(c, "operator not supported");
}

static int
sane_shape(const struct kt_onnx_value *v)
{
    int64_t n = 1;
    int i;

    for (i = 0; i < v->ndim; i++) {
        if (v->dims[i] < 0 || v->dims[i] > ELEMS_MAX ||
            (v->dims[i] > 0 && n > ELEMS_MAX / v->dims[i]))
            return 0;
        n *= v->dims[i];
    }
    return 1;
}

int
kt__ox_infer(struct kt__ox *x)
{
    struct kt_onnx_graph *g = x->g;
    struct ctx c;
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
            struct kt_onnx_value *o = out(&c, j);
            if (o != NULL && !sane_shape(o))
                return mismatch(&c, 0, "output '%.100s' would have more than "
                                "2^40 elements or a dim < 0", o->name);
            if (o != NULL && o->ndim < 0 && j == 0) {
                unsupported(&c, "output shape unknown");
                g->nunsupported++;
                break;
            }
        }
        if (c.n->role != KT_ONNX_ROLE_UNSUPPORTED && out(&c, 0) != NULL &&
            is_const(out(&c, 0)))
            c.n->role = KT_ONNX_ROLE_CONSTANT;
    }
    return KT_OK;
}
