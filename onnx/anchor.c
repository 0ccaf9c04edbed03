/* anchor.c - the operators that become tuning tasks (Conv, ConvTranspose,
 * Gemm, MatMul, pools, Softmax, ReduceMean, LayerNormalization) and
 * Resize: their shape rules, and the compute definition of each one
 * through the IR operator library (ir/ops.c). */
#include "onnx/int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct kt_onnx_value *
val(struct kt__ox *x, const struct kt_onnx_node *n, int i, int output)
{
    int k = output ? (i < n->nout ? n->out[i] : -1)
                   : (i < n->nin ? n->in[i] : -1);
    return k >= 0 ? &x->g->values[k] : NULL;
}

static int fail(struct kt__ox *x, const struct kt_onnx_node *n, int code,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* code < 0: an error naming the node (and the input's producer);
 * code == 1: the node is unsupported with that reason. */
static int
fail(struct kt__ox *x, const struct kt_onnx_node *n, int code, const char *fmt,
     ...)
{
    struct kt_onnx_node *mn = (struct kt_onnx_node *)n;
    char msg[400], l[200], l2[200] = "";
    const struct kt_onnx_value *a = val(x, n, 0, 0);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (code == 1) {
        mn->role = KT_ONNX_ROLE_UNSUPPORTED;
        free(mn->note);
        mn->note = kt_xstrdup(msg);
        return 1;
    }
    if (a != NULL && a->producer >= 0)
        snprintf(l2, sizeof(l2), " (input '%.100s' from %s)", a->name,
                 kt__ox_node_label(&x->g->nodes[a->producer], l, sizeof(l)));
    return kt_seterr(x->err, x->errlen, code, "%s: %s%s: %s", x->g->path,
                     kt__ox_node_label(n, l, sizeof(l)), l2, msg);
}

static void
set_out(struct kt_onnx_value *o, int ndim, const int64_t *dims, int dtype)
{
    if (o == NULL)
        return;
    o->ndim = ndim;
    memcpy(o->dims, dims, (size_t)ndim * sizeof(*dims));
    if (o->dtype == 0)
        o->dtype = dtype ? dtype : KT_ONNX_FLOAT;
}

/* ---- Sliding windows ------------------------------------------------------ */

int
kt__ox_window(struct kt__ox *x, const struct kt_onnx_node *n,
              const int64_t hw[2], const int64_t kdef[2], int kind,
              struct kt__ox_window *w)
{
    int64_t pads[4] = {0, 0, 0, 0}, v[8];
    char buf[32];
    const char *ap = kt_onnx_attr_str(n, "auto_pad", "NOTSET", buf,
                                      sizeof(buf));
    int i, np, ceil_mode = (int)kt_onnx_attr_int(n, "ceil_mode", 0);

    memset(w, 0, sizeof(*w));
    w->k[0] = kdef[0];
    w->k[1] = kdef[1];
    if (kt_onnx_attr_ints(n, "kernel_shape", v, 8) == 2)
        w->k[0] = v[0], w->k[1] = v[1];
    w->s[0] = w->s[1] = w->d[0] = w->d[1] = 1;
    if ((np = kt_onnx_attr_ints(n, "strides", v, 8)) == 2)
        w->s[0] = v[0], w->s[1] = v[1];
    else if (np != 0)
        return fail(x, n, 1, "strides for %d dims (2-D only)", np);
    if ((np = kt_onnx_attr_ints(n, "dilations", v, 8)) == 2)
        w->d[0] = v[0], w->d[1] = v[1];
    else if (np != 0)
        return fail(x, n, 1, "dilations for %d dims (2-D only)", np);
    if ((np = kt_onnx_attr_ints(n, "pads", pads, 4)) != 0 && np != 4)
        return fail(x, n, 1, "pads for %d dims (2-D only)", np / 2);
    for (i = 0; i < 2; i++) {
        int64_t k = w->k[i], s = w->s[i], d = w->d[i], span = (k - 1) * d + 1;
        if (k < 1 || s < 1 || d < 1 || k > 1024 || s > 1024 || d > 1024 ||
            pads[i] < 0 || pads[i + 2] < 0 || pads[i] > 65536 ||
            pads[i + 2] > 65536)
            return fail(x, n, KT_ESHAPE,
                        "bad kernel %lld, stride %lld or "
                        "dilation %lld",
                        (long long)k, (long long)s, (long long)d);
        if (kind == 2) { /* transposed */
            int64_t opad = 0, total;
            if (kt_onnx_attr_ints(n, "output_padding", v, 8) == 2)
                opad = v[i];
            if (opad < 0 || opad >= s)
                return fail(x, n, KT_ESHAPE,
                            "output_padding must be in "
                            "0..stride-1");
            if (kt_onnx_attr_ints(n, "output_shape", v, 8) == 2) {
                w->out[i] = v[i] < 1 || v[i] > 16777216 ? 0 : v[i];
                total = s * (hw[i] - 1) + opad + span - w->out[i];
                w->pb[i] = strcmp(ap, "SAME_UPPER") == 0 ? total / 2
                                                         : total - total / 2;
                w->pe[i] = total - w->pb[i];
            } else {
                if (strcmp(ap, "SAME_UPPER") == 0 ||
                    strcmp(ap, "SAME_LOWER") == 0) {
                    w->out[i] = hw[i] * s;
                    total = s * (hw[i] - 1) + opad + span - w->out[i];
                    w->pb[i] = ap[5] == 'U' ? total / 2 : total - total / 2;
                    w->pe[i] = total - w->pb[i];
                } else {
                    w->pb[i] = pads[i];
                    w->pe[i] = pads[i + 2];
                    w->out[i] = s * (hw[i] - 1) + opad + span - w->pb[i] -
                                w->pe[i];
                }
            }
        } else if (strcmp(ap, "SAME_UPPER") == 0 ||
                   strcmp(ap, "SAME_LOWER") == 0) {
            int64_t total;
            w->out[i] = (hw[i] + s - 1) / s;
            total = (w->out[i] - 1) * s + span - hw[i];
            if (total < 0)
                total = 0;
            w->pb[i] = ap[5] == 'U' ? total / 2 : total - total / 2;
            w->pe[i] = total - w->pb[i];
        } else {
            int64_t num;
            if (strcmp(ap, "VALID") != 0)
                w->pb[i] = pads[i], w->pe[i] = pads[i + 2];
            num = hw[i] + w->pb[i] + w->pe[i] - span;
            if (num < 0)
                w->out[i] = 0;
            else if (ceil_mode && kind == 1) {
                w->out[i] = (num + s - 1) / s + 1;
                if ((w->out[i] - 1) * s >= hw[i] + w->pb[i])
                    w->out[i]--;
            } else {
                w->out[i] = num / s + 1;
            }
        }
        if (w->pb[i] < 0 || w->pe[i] < 0)
            return fail(x, n, KT_ESHAPE, "negative padding");
        if (w->out[i] < 1)
            return fail(x, n, KT_ESHAPE,
                        "the %lldx%lld window (stride "
                        "%lldx%lld, dilation %lldx%lld) does not fit the "
                        "%lldx%lld input",
                        (long long)w->k[0], (long long)w->k[1],
                        (long long)w->s[0], (long long)w->s[1],
                        (long long)w->d[0], (long long)w->d[1],
                        (long long)hw[0], (long long)hw[1]);
    }
    return 0;
}

/* ---- Shape rules ---------------------------------------------------------- */

static int
need_rank(struct kt__ox *x, const struct kt_onnx_node *n, int i, int rank)
{
    const struct kt_onnx_value *v = val(x, n, i, 0);
    char sh[96];

    if (v == NULL)
        return fail(x, n, KT_ESHAPE, "input %d is missing", i);
    if (v->ndim != rank)
        return fail(x, n, i == 0 ? 1 : KT_ESHAPE,
                    "input %d '%.100s' is %s; "
                    "%d dims are supported",
                    i, v->name, kt__ox_shape_str(v, sh, sizeof(sh)), rank);
    return 0;
}

static int
infer_conv(struct kt__ox *x, const struct kt_onnx_node *n, int transposed)
{
    const struct kt_onnx_value *a = val(x, n, 0, 0), *w = val(x, n, 1, 0);
    const struct kt_onnx_value *b = val(x, n, 2, 0);
    struct kt__ox_window win;
    int64_t g = kt_onnx_attr_int(n, "group", 1), K, dims[4];
    char sh[96];
    int rc;

    if ((rc = need_rank(x, n, 0, 4)) != 0 || (rc = need_rank(x, n, 1, 4)))
        return rc;
    if (g < 1 || g > 16777216 || a->dims[1] % g != 0)
        return fail(x, n, KT_ESHAPE,
                    "group %lld does not divide the %lld "
                    "input channels",
                    (long long)g, (long long)a->dims[1]);
    if (!transposed && w->dims[1] * g != a->dims[1])
        return fail(x, n, KT_ESHAPE,
                    "weight '%.100s' (%s) expects %lld input "
                    "channels, the input has %lld",
                    w->name, kt__ox_shape_str(w, sh, sizeof(sh)),
                    (long long)(w->dims[1] * g), (long long)a->dims[1]);
    if (transposed && w->dims[0] != a->dims[1])
        return fail(x, n, KT_ESHAPE,
                    "weight '%.100s' (%s) expects %lld input "
                    "channels, the input has %lld",
                    w->name, kt__ox_shape_str(w, sh, sizeof(sh)),
                    (long long)w->dims[0], (long long)a->dims[1]);
    K = transposed ? w->dims[1] * g : w->dims[0];
    if (K % g != 0)
        return fail(x, n, KT_ESHAPE,
                    "group %lld does not divide the %lld "
                    "output channels",
                    (long long)g, (long long)K);
    if (b != NULL && kt_onnx_value_elems(b) != K)
        return fail(x, n, KT_ESHAPE,
                    "bias '%.100s' has %lld values for %lld "
                    "output channels",
                    b->name, (long long)kt_onnx_value_elems(b), (long long)K);
    rc = kt__ox_window(x, n, a->dims + 2, w->dims + 2, transposed ? 2 : 0,
                       &win);
    if (rc != 0)
        return rc;
    if (win.k[0] != w->dims[2] || win.k[1] != w->dims[3])
        return fail(x, n, KT_ESHAPE,
                    "kernel_shape %lldx%lld disagrees with "
                    "weight '%.100s' (%s)",
                    (long long)win.k[0], (long long)win.k[1], w->name,
                    kt__ox_shape_str(w, sh, sizeof(sh)));
    dims[0] = a->dims[0];
    dims[1] = K;
    dims[2] = win.out[0];
    dims[3] = win.out[1];
    set_out(val(x, n, 0, 1), 4, dims, a->dtype);
    if (transposed && (g != 1 || win.d[0] != 1 || win.d[1] != 1))
        return fail(x, n, 1,
                    "group %lld, dilation %lldx%lld (only group 1, "
                    "dilation 1)",
                    (long long)g, (long long)win.d[0], (long long)win.d[1]);
    if (transposed && (win.pb[0] >= win.k[0] || win.pb[1] >= win.k[1]))
        return fail(x, n, 1, "pads of a whole kernel or more");
    return 0;
}

static int
infer_pool(struct kt__ox *x, const struct kt_onnx_node *n, int global)
{
    const struct kt_onnx_value *a = val(x, n, 0, 0);
    struct kt__ox_window win;
    int64_t dims[4], one[2] = {1, 1};
    int rc;

    if ((rc = need_rank(x, n, 0, 4)) != 0)
        return rc;
    memcpy(dims, a->dims, sizeof(dims));
    if (global) {
        dims[2] = dims[3] = 1;
    } else {
        if ((rc = kt__ox_window(x, n, a->dims + 2, one, 1, &win)) != 0)
            return rc;
        dims[2] = win.out[0];
        dims[3] = win.out[1];
    }
    set_out(val(x, n, 0, 1), 4, dims, a->dtype);
    if (!global && (win.d[0] != 1 || win.d[1] != 1))
        return fail(x, n, 1, "dilated pooling");
    if (!global && n->nout > 1 && n->out[1] >= 0)
        return fail(x, n, 1, "the Indices output");
    if (!global && (win.pb[0] >= win.k[0] || win.pb[1] >= win.k[1]))
        return fail(x, n, KT_ESHAPE, "pads of a whole window or more");
    return 0;
}

static int
infer_gemm(struct kt__ox *x, const struct kt_onnx_node *n)
{
    const struct kt_onnx_value *a = val(x, n, 0, 0), *b = val(x, n, 1, 0);
    int ta = (int)kt_onnx_attr_int(n, "transA", 0);
    int tb = (int)kt_onnx_attr_int(n, "transB", 0);
    int64_t dims[2], K;
    char sh[96];
    int rc;

    if ((rc = need_rank(x, n, 0, 2)) != 0 || (rc = need_rank(x, n, 1, 2)))
        return rc;
    K = a->dims[ta ? 0 : 1];
    if (b->dims[tb ? 1 : 0] != K)
        return fail(x, n, KT_ESHAPE,
                    "B '%.100s' (%s%s) has %lld rows, A has "
                    "%lld columns",
                    b->name, kt__ox_shape_str(b, sh, sizeof(sh)),
                    tb ? ", transposed" : "", (long long)b->dims[tb ? 1 : 0],
                    (long long)K);
    dims[0] = a->dims[ta ? 1 : 0];
    dims[1] = b->dims[tb ? 0 : 1];
    set_out(val(x, n, 0, 1), 2, dims, a->dtype);
    if (ta)
        return fail(x, n, 1, "transA=1");
    return 0;
}

static int
infer_matmul(struct kt__ox *x, const struct kt_onnx_node *n)
{
    const struct kt_onnx_value *a = val(x, n, 0, 0), *b = val(x, n, 1, 0);
    int64_t dims[KT_ONNX_MAX_DIMS];
    int r, i, ra, rb;
    char sh[96];

    if (a == NULL || b == NULL || a->ndim < 1 || b->ndim < 1)
        return fail(x, n, KT_ESHAPE, "needs two inputs of rank >= 1");
    ra = a->ndim;
    rb = b->ndim;
    if (a->dims[ra - 1] != b->dims[rb >= 2 ? rb - 2 : 0])
        return fail(x, n, KT_ESHAPE,
                    "A has %lld columns but B '%.100s' (%s) "
                    "has %lld rows",
                    (long long)a->dims[ra - 1], b->name,
                    kt__ox_shape_str(b, sh, sizeof(sh)),
                    (long long)b->dims[rb >= 2 ? rb - 2 : 0]);
    r = (ra > rb ? ra : rb);
    if (r < 2)
        r = 2;
    for (i = 0; i < r - 2; i++) {
        int ia = i - (r - ra), ib = i - (r - rb);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return fail(x, n, KT_ESHAPE,
                        "batch dims do not broadcast (%lld "
                        "against %lld)",
                        (long long)da, (long long)db);
        dims[i] = da > db ? da : db;
    }
    dims[r - 2] = ra >= 2 ? a->dims[ra - 2] : 1;
    dims[r - 1] = rb >= 2 ? b->dims[rb - 1] : 1;
    if (ra == 1 || rb == 1) { /* vector operands drop their dim */
        if (ra == 1)
            dims[r - 2] = dims[r - 1], r--;
        else
            r--;
    }
    set_out(val(x, n, 0, 1), r, dims, a->dtype);
    return 0;
}

static int
infer_softmax(struct kt__ox *x, const struct kt_onnx_node *n)
{
    const struct kt_onnx_value *a = val(x, n, 0, 0);
    int64_t axis = kt_onnx_attr_int(n, "axis", x->g->opset < 13 ? 1 : -1);

    if (a == NULL || a->ndim < 1)
        return fail(x, n, KT_ESHAPE, "needs an input");
    if (axis < -a->ndim || axis >= a->ndim)
        return fail(x, n, KT_ESHAPE, "axis %lld out of range", (long long)axis);
    set_out(val(x, n, 0, 1), a->ndim, a->dims, a->dtype);
    return 0;
}

/* The reduced axes of ReduceMean as a bit set (0 = none). */
int
kt__ox_reduce_axes(struct kt__ox *x, const struct kt_onnx_node *n)
{
    const struct kt_onnx_value *a = val(x, n, 0, 0);
    int64_t axes[KT_ONNX_MAX_DIMS];
    int k, i, set = 0;

    if (n->nin >= 2 && n->in[1] >= 0) {
        const struct kt_onnx_value *v = val(x, n, 1, 0);
        if (v->data == NULL || kt_onnx_value_elems(v) > KT_ONNX_MAX_DIMS)
            return -1;
        k = (int)kt_onnx_value_elems(v);
        for (i = 0; i < k; i++) {
            double d = kt_onnx_value_get(v, i);
            if (d != floor(d) || fabs(d) > KT_ONNX_MAX_DIMS) /* NaN too */
                return -1;
            axes[i] = (int64_t)d;
        }
    } else {
        k = kt_onnx_attr_ints(n, "axes", axes, KT_ONNX_MAX_DIMS);
    }
    if (k < 0)
        return -1;
    if (k == 0)
        return (1 << a->ndim) - 1;
    for (i = 0; i < k; i++) {
        int64_t ax = axes[i] < 0 ? axes[i] + a->ndim : axes[i];
        if (ax < 0 || ax >= a->ndim)
            return -1;
        set |= 1 << ax;
    }
    return set;
}

static int
infer_reduce(struct kt__ox *x, const struct kt_onnx_node *n)
{
    const struct kt_onnx_value *a = val(x, n, 0, 0);
    int64_t dims[KT_ONNX_MAX_DIMS];
    int set, keep = (int)kt_onnx_attr_int(n, "keepdims", 1), i, r = 0;

    if (a == NULL || a->ndim < 1)
        return fail(x, n, KT_ESHAPE, "needs an input");
    set = kt__ox_reduce_axes(x, n);
    if (set < 0)
        return fail(x, n, 1, "axes that are not constants in range");
    for (i = 0; i < a->ndim; i++) {
        if (set & (1 << i)) {
            if (keep)
                dims[r++] = 1;
        } else {
            dims[r++] = a->dims[i];
        }
    }
    set_out(val(x, n, 0, 1), r, dims, a->dtype);
    return 0;
}

static int
infer_resize(struct kt__ox *x, const struct kt_onnx_node *n)
{
    const struct kt_onnx_value *a = val(x, n, 0, 0), *sc = NULL, *sz = NULL;
    int64_t dims[KT_ONNX_MAX_DIMS];
    char buf[32];
    const char *mode = kt_onnx_attr_str(n, "mode", "nearest", buf, sizeof(buf));
    int i;

    if (a == NULL || a->ndim < 1)
        return fail(x, n, KT_ESHAPE, "needs an input");
    if (strcmp(n->op, "Upsample") == 0 || x->g->opset < 11)
        sc = val(x, n, 1, 0);
    else {
        sc = val(x, n, 2, 0);
        sz = val(x, n, 3, 0);
    }
    if (sz != NULL && kt_onnx_value_elems(sz) == 0)
        sz = NULL;
    if (sc != NULL && kt_onnx_value_elems(sc) == 0)
        sc = NULL;
    for (i = 0; i < a->ndim; i++) {
        double d;
        if (sz != NULL && sz->data != NULL && kt_onnx_value_elems(sz) == a->ndim)
            d = kt_onnx_value_get(sz, i);
        else if (sc != NULL && sc->data != NULL &&
                 kt_onnx_value_elems(sc) == a->ndim)
            d = floor((double)a->dims[i] * kt_onnx_value_get(sc, i));
        else
            return fail(x, n, 1,
                        "scales/sizes that are not constants of "
                        "one value per dim");
        dims[i] = d >= 1 && d < 16777216.0 ? (int64_t)d : 0;
        if (dims[i] < 1)
            return fail(x, n, KT_ESHAPE, "output dim %d would be %lld", i,
                        (long long)dims[i]);
    }
    set_out(val(x, n, 0, 1), a->ndim, dims, a->dtype);
    if (strcmp(mode, "nearest") != 0 && strcmp(mode, "linear") != 0 &&
        strcmp(mode, "bilinear") != 0)
        return fail(x, n, 1, "mode=%s (nearest and linear only)", mode);
    return 0;
}

static int
infer_layer_norm(struct kt__ox *x, const struct kt_onnx_node *n)
{
    const struct kt_onnx_value *a = val(x, n, 0, 0);
    int64_t axis = kt_onnx_attr_int(n, "axis", -1);

    if (a == NULL || a->ndim < 1)
        return fail(x, n, KT_ESHAPE, "needs an input");
    if (axis < 0)
        axis += a->ndim;
    if (axis < 0 || axis >= a->ndim)
        return fail(x, n, KT_ESHAPE, "axis out of range");
    set_out(val(x, n, 0, 1), a->ndim, a->dims, a->dtype);
    if (n->nout > 1)
        return fail(x, n, 1, "the Mean/InvStdDev outputs");
    return 0;
}

int
kt__ox_infer_anchor(struct kt__ox *x, struct kt_onnx_node *n, int *handled)
{
    const char *op = n->op;

    *handled = 1;
    if (strcmp(op, "Conv") == 0)
        return infer_conv(x, n, 0);
    if (strcmp(op, "ConvTranspose") == 0)
        return infer_conv(x, n, 1);
    if (strcmp(op, "MaxPool") == 0 || strcmp(op, "AveragePool") == 0)
        return infer_pool(x, n, 0);
    if (strcmp(op, "GlobalAveragePool") == 0 ||
        strcmp(op, "GlobalMaxPool") == 0)
        return infer_pool(x, n, 1);
    if (strcmp(op, "Gemm") == 0)
        return infer_gemm(x, n);
    if (strcmp(op, "MatMul") == 0)
        return infer_matmul(x, n);
    if (strcmp(op, "Softmax") == 0)
        return infer_softmax(x, n);
    if (strcmp(op, "ReduceMean") == 0)
        return infer_reduce(x, n);
    if (strcmp(op, "Resize") == 0 || strcmp(op, "Upsample") == 0)
        return infer_resize(x, n);
    if (strcmp(op, "LayerNormalization") == 0)
        return infer_layer_norm(x, n);
    *handled = 0;
    return 0;
}
