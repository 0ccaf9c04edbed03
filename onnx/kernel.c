/* kernel.c - the compute definition of each anchor operator through the
 * IR operator library: ONNX attributes to kt_op_* parameters.  The
 * definition's output is O; fuse.c appends the epilogue. */
#include "onnx/int.h"

#include <stdio.h>
#include <string.h>

static const struct kt_onnx_value *
input(struct kt__ox *x, const struct kt_onnx_node *n, int i)
{
    return i < n->nin && n->in[i] >= 0 ? &x->g->values[n->in[i]] : NULL;
}

static int64_t
prod(const int64_t *d, int from, int to)
{
    int64_t p = 1;
    for (; from < to; from++)
        p *= d[from];
    return p;
}

/* Conv and ConvTranspose (with the phase offsets of the latter). */
static int
def_conv(struct kt__ox *x, struct kt_onnx_kernel *k, int bits, int grid)
{
    const struct kt_onnx_node *n = &x->g->nodes[k->anchor];
    const struct kt_onnx_value *a = input(x, n, 0), *w = input(x, n, 1);
    int transposed = strcmp(n->op, "ConvTranspose") == 0, rc;
    struct kt__ox_window win;

    rc = kt__ox_window(x, n, a->dims + 2, w->dims + 2, transposed ? 2 : 0,
                       &win);
    if (rc != 0)
        return rc;
    if (transposed) {
        const struct kt_conv_t_params t = {a->dims[0], a->dims[1], a->dims[2],
                                           a->dims[3], w->dims[1], w->dims[2],
                                           w->dims[3], win.s[0],   win.s[1],
                                           win.pb[0],  win.pb[1],  win.out[0],
                                           win.out[1]};
        return kt_op_conv2d_transpose(&k->def, &t, &k->conv_t_offset[0],
                                      &k->conv_t_offset[1]);
    } else {
        const struct kt_conv2d_params p =
            {a->dims[0], a->dims[1],
             a->dims[2], a->dims[3],
             w->dims[0], w->dims[2],
             w->dims[3], win.s[0],
             win.s[1],   win.pb[0],
             win.pb[1],  win.d[0],
             win.d[1],   kt_onnx_attr_int(n, "group", 1),
             bits};
        int m = (x->flags & KT_ONNX_WINOGRAD) ? kt_winograd_choose(&p) : 0;
        if (win.pb[0] != win.pe[0] || win.pb[1] != win.pe[1])
            return kt_op_conv2d_sized(&k->def, &p, win.out[0], win.out[1]);
        if (m > 0)
            return kt_op_conv2d_winograd(&k->def, &p, m);
        return grid ? kt_op_conv2d_grid(&k->def, &p)
                    : kt_op_conv2d(&k->def, &p);
    }
}

static int
def_pool(struct kt__ox *x, struct kt_onnx_kernel *k)
{
    const struct kt_onnx_node *n = &x->g->nodes[k->anchor];
    const struct kt_onnx_value *a = input(x, n, 0);
    struct kt_pool_params p;
    struct kt__ox_window win;
    int64_t one[2] = {1, 1};
    int rc;

    memset(&p, 0, sizeof(p));
    p.N = a->dims[0];
    p.C = a->dims[1];
    p.H = a->dims[2];
    p.W = a->dims[3];
    if (strcmp(n->op, "GlobalAveragePool") == 0)
        return kt_op_global_avg_pool(&k->def, p.N, p.C, p.H, p.W);
    p.is_max = strcmp(n->op, "AveragePool") != 0;
    if (strcmp(n->op, "GlobalMaxPool") == 0) {
        p.kh = p.H;
        p.kw = p.W;
        p.stride_h = p.stride_w = p.out_h = p.out_w = 1;
        return kt_op_pool(&k->def, &p);
    }
    if ((rc = kt__ox_window(x, n, a->dims + 2, one, 1, &win)) != 0)
        return rc;
    p.kh = win.k[0];
    p.kw = win.k[1];
    p.stride_h = win.s[0];
    p.stride_w = win.s[1];
    p.pad_h = win.pb[0];
    p.pad_w = win.pb[1];
    p.out_h = win.out[0];
    p.out_w = win.out[1];
    p.count_include_pad = (int)kt_onnx_attr_int(n, "count_include_pad", 0);
    return kt_op_pool(&k->def, &p);
}

/* A 2-D product; a constant B (a layer's weights, as exported Linear
 * layers read them) may be stored in the layout the schedule reads. */
static int
matmul(struct kt_op_def *d, int64_t M, int64_t N, int64_t K,
       const struct kt_onnx_value *b)
{
    return kt__ox_is_const(b) ? kt_op_matmul_const_b(d, M, N, K)
                              : kt_op_matmul(d, M, N, K);
}

static int
def_matmul(struct kt__ox *x, struct kt_onnx_kernel *k, int bits)
{
    const struct kt_onnx_node *n = &x->g->nodes[k->anchor];
    const struct kt_onnx_value *a = input(x, n, 0), *b = input(x, n, 1);
    int64_t K = a->dims[a->ndim - 1], N, M, B = 1, i;

    if (strcmp(n->op, "Gemm") == 0) {
        M = a->dims[0];
        if (kt_onnx_attr_int(n, "transB", 0))
            return kt_op_dense(&k->def, M, b->dims[0], K, bits);
        return matmul(&k->def, M, b->dims[1], K, b);
    }
    N = b->ndim >= 2 ? b->dims[b->ndim - 1] : 1;
    if (b->ndim <= 2) {
        M = prod(a->dims, 0, a->ndim - 1);
        return matmul(&k->def, M, N, K, b);
    }
    M = a->ndim >= 2 ? a->dims[a->ndim - 2] : 1;
    for (i = 0; i < b->ndim - 2; i++) {
        int64_t ia = i - (b->ndim - a->ndim);
        int64_t da = ia >= 0 ? a->dims[ia] : 1;
        if (da != b->dims[i] || a->ndim > b->ndim)
            return kt_seterr(k->def.text, sizeof(k->def.text), KT_EINVAL,
                             "MatMul broadcasting over batch dims (A %lld "
                             "against B %lld)",
                             (long long)da, (long long)b->dims[i]);
        B *= b->dims[i];
    }
    return kt_op_batch_matmul(&k->def, B, M, N, K, 0);
}

static int
def_softmax(struct kt__ox *x, struct kt_onnx_kernel *k)
{
    const struct kt_onnx_node *n = &x->g->nodes[k->anchor];
    const struct kt_onnx_value *a = input(x, n, 0);
    int64_t axis = kt_onnx_attr_int(n, "axis", x->g->opset < 13 ? 1 : -1);

    if (axis < 0)
        axis += a->ndim;
    if (x->g->opset < 13)
        return kt_op_softmax(&k->def, prod(a->dims, 0, (int)axis),
                             prod(a->dims, (int)axis, a->ndim));
    return kt_op_softmax_axis(&k->def, prod(a->dims, 0, (int)axis),
                              a->dims[axis],
                              prod(a->dims, (int)axis + 1, a->ndim));
}

/* The reduced axes [lo, hi) when contiguous, else -1. */
static int
reduce_range(struct kt__ox *x, const struct kt_onnx_node *n, int *lo, int *hi)
{
    int set = kt__ox_reduce_axes(x, n), i;

    if (set <= 0)
        return -1;
    for (i = 0; !(set & (1 << i)); i++)
        ;
    *lo = i;
    for (; set & (1 << i); i++)
        ;
    *hi = i;
    return (set >> i) == 0 ? 0 : -1;
}

static int
def_reduce(struct kt__ox *x, struct kt_onnx_kernel *k)
{
    const struct kt_onnx_node *n = &x->g->nodes[k->anchor];
    const struct kt_onnx_value *a = input(x, n, 0);
    int lo, hi;

    if (reduce_range(x, n, &lo, &hi) < 0)
        return kt_seterr(k->def.text, sizeof(k->def.text), KT_EINVAL,
                         "ReduceMean over axes that are not contiguous");
    if (k->kind == KT_ONNX_K_LAYER_NORM) {
        const struct kt_onnx_node *add = &x->g->nodes[k->nodes[4]];
        const struct kt_onnx_value *e = input(x, add, 0)->data != NULL
                                            ? input(x, add, 0)
                                            : input(x, add, 1);
        return kt_op_layer_norm(&k->def, prod(a->dims, 0, lo),
                                prod(a->dims, lo, a->ndim),
                                kt_onnx_value_get(e, 0));
    }
    return kt_op_reduce_mean(&k->def, prod(a->dims, 0, lo),
                             prod(a->dims, lo, hi), prod(a->dims, hi, a->ndim));
}

static int
def_layer_norm(struct kt__ox *x, struct kt_onnx_kernel *k)
{
    const struct kt_onnx_node *n = &x->g->nodes[k->anchor];
    const struct kt_onnx_value *a = input(x, n, 0);
    int64_t axis = kt_onnx_attr_int(n, "axis", -1);

    if (axis < 0)
        axis += a->ndim;
    return kt_op_layer_norm(&k->def, prod(a->dims, 0, (int)axis),
                            prod(a->dims, (int)axis, a->ndim),
                            kt_onnx_attr_float(n, "epsilon", 1e-5));
}

int
kt__ox_anchor_def(struct kt__ox *x, struct kt_onnx_kernel *k, int bits,
                  int grid)
{
    const char *op = x->g->nodes[k->anchor].op;

    memset(&k->def, 0, sizeof(k->def));
    if (k->kind == KT_ONNX_K_ELEMENTWISE) {
        snprintf(k->def.name, sizeof(k->def.name), "elementwise");
        return KT_OK;
    }
    if (strncmp(op, "Conv", 4) == 0)
        return def_conv(x, k, bits, grid);
    if (strstr(op, "Pool") != NULL)
        return def_pool(x, k);
    if (strcmp(op, "Gemm") == 0 || strcmp(op, "MatMul") == 0)
        return def_matmul(x, k, bits);
    if (strcmp(op, "Softmax") == 0)
        return def_softmax(x, k);
    if (strcmp(op, "ReduceMean") == 0)
        return def_reduce(x, k);
    if (strcmp(op, "LayerNormalization") == 0)
        return def_layer_norm(x, k);
    return kt_seterr(k->def.text, sizeof(k->def.text), KT_EINVAL,
                     "%s is not an anchor", op);
}
