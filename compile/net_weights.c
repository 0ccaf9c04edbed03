/* net_weights.c - the weights file's contents of a compiled network: the
 * constants the steps read, as float32, batch norms folded into the
 * convolutions before them, ConvTranspose weights in their kernels' phase
 * layout (docs/compile.md, "Weights"). */
#include "compile/compile_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx.h"

int64_t
kt__cc_w_alloc(struct kt_cc_net *net, int64_t n)
{
    int64_t at = (net->nw + 15) / 16 * 16;

    if (at + n > net->capw) {
        net->capw = (at + n) * 2 + 1024;
        net->w = kt_xrealloc(net->w, (size_t)net->capw * sizeof(float));
    }
    memset(net->w + net->nw, 0, (size_t)(at + n - net->nw) * sizeof(float));
    net->nw = at + n;
    if (net->nallocs % 64 == 0)
        net->allocs = kt_xrealloc(net->allocs, (size_t)(net->nallocs + 64) *
                                                   sizeof(*net->allocs));
    net->allocs[net->nallocs].at = at;
    net->allocs[net->nallocs++].n = n;
    return at;
}

/* The weights slot of constant value v (converted to float, once). */
int64_t
kt__cc_w_raw(struct kt_cc_net *net, int v)
{
    const struct kt_onnx_value *val = &net->g->values[v];
    int64_t n = kt_onnx_value_elems(val), i, at;

    if (net->w_of_value[v] >= 0)
        return net->w_of_value[v];
    at = kt__cc_w_alloc(net, n);
    for (i = 0; i < n; i++)
        net->w[at + i] = (float)kt_onnx_value_get(val, i);
    net->w_of_value[v] = at;
    return at;
}

/* gamma / sqrt(var + eps) and beta - mean * scale of a batch norm. */
static void
bn_scale_shift(const struct kt_onnx_graph *g, const struct kt_onnx_node *bn,
               int64_t ch, double *scale, double *shift)
{
    double eps = kt_onnx_attr_float(bn, "epsilon", 1e-5);
    int64_t i;

    for (i = 0; i < ch; i++) {
        double gamma = kt_onnx_value_get(&g->values[bn->in[1]], i);
        double beta = kt_onnx_value_get(&g->values[bn->in[2]], i);
        double mean = kt_onnx_value_get(&g->values[bn->in[3]], i);
        double var = kt_onnx_value_get(&g->values[bn->in[4]], i);
        scale[i] = gamma / sqrt(var + eps);
        shift[i] = beta - mean * scale[i];
    }
}

int
kt__cc_bn_consts(const struct kt_onnx_graph *g, const struct kt_onnx_node *bn)
{
    int i;

    for (i = 1; i < 5; i++)
        if (bn->nin <= i || bn->in[i] < 0 || g->values[bn->in[i]].data == NULL)
            return 0;
    return 1;
}

/* A batch norm's scale (which = 1) or shift (2), per channel. */
int64_t
kt__cc_w_bn(struct kt_cc_net *net, const struct kt_onnx_node *bn, int which)
{
    int64_t ch = kt_onnx_value_elems(&net->g->values[bn->in[1]]), i, at;
    double *s = kt_xcalloc((size_t)ch * 2, sizeof(double));

    bn_scale_shift(net->g, bn, ch, s, s + ch);
    at = kt__cc_w_alloc(net, ch);
    for (i = 0; i < ch; i++)
        net->w[at + i] = (float)s[(which == 1 ? 0 : ch) + i];
    free(s);
    return at;
}

/* The output channel of element i of anchor a's ONNX weight (ch channels):
 * dim 0 of a Conv weight [K, C/g, R, S], dim 1 of a ConvTranspose weight
 * [C, K, R, S]. */
static int64_t
weight_channel(const struct kt_onnx_node *a, const struct kt_onnx_value *w,
               int64_t ch, int64_t i)
{
    if (strcmp(a->op, "ConvTranspose") == 0)
        return i / (w->dims[2] * w->dims[3]) % ch;
    return i / (kt_onnx_value_elems(w) / ch);
}

/* Anchor a's weight in ONNX layout, its output channels scaled by the
 * batch norm bn (NULL: as it is); caller frees. */
static float *
weight_data(const struct kt_onnx_graph *g, const struct kt_onnx_node *a,
            const struct kt_onnx_node *bn)
{
    const struct kt_onnx_value *w = &g->values[a->in[1]];
    int64_t n = kt_onnx_value_elems(w), i, ch = 1;
    float *out = kt_xmalloc((size_t)n * sizeof(float) + 1);
    double *s = NULL;

    if (bn != NULL) {
        ch = kt_onnx_value_elems(&g->values[bn->in[1]]);
        s = kt_xcalloc((size_t)ch * 2, sizeof(double));
        bn_scale_shift(g, bn, ch, s, s + ch);
    }
    for (i = 0; i < n; i++)
        out[i] = (float)(kt_onnx_value_get(w, i) *
                         (s ? s[weight_channel(a, w, ch, i)] : 1));
    free(s);
    return out;
}

/* A conv's weight with the batch norm bn folded in (rows scaled). */
int64_t
kt__cc_w_folded(struct kt_cc_net *net, const struct kt_onnx_node *a,
                const struct kt_onnx_node *bn)
{
    int64_t n = kt_onnx_value_elems(&net->g->values[a->in[1]]);
    int64_t at = kt__cc_w_alloc(net, n);
    float *w = weight_data(net->g, a, bn);

    memcpy(net->w + at, w, (size_t)n * sizeof(float));
    free(w);
    return at;
}

/* The bias with bn folded in: bias * scale + shift (bias 0 when a has
 * none). */
int64_t
kt__cc_w_folded_bias(struct kt_cc_net *net, const struct kt_onnx_node *a,
                     const struct kt_onnx_node *bn)
{
    const struct kt_onnx_graph *g = net->g;
    int64_t ch = kt_onnx_value_elems(&g->values[bn->in[1]]), i, at;
    int has_b = a->nin > 2 && a->in[2] >= 0;
    double *s = kt_xcalloc((size_t)ch * 2, sizeof(double));

    bn_scale_shift(g, bn, ch, s, s + ch);
    at = kt__cc_w_alloc(net, ch);
    for (i = 0; i < ch; i++)
        net->w[at + i] = (float)((has_b ? kt_onnx_value_get(&g->values[a->in[2]],
                                                            i)
                                        : 0) *
                                     s[i] +
                                 s[ch + i]);
    free(s);
    return at;
}

/* A ConvTranspose weight [C, K, R, S] in the phase layout of its kernel,
 * W[c,f,q,a,p,b] = Wonnx[c,f, a+pad_h+Sh*(q-ch), b+pad_w+Sw*(p-cw)] (0
 * outside the kernel; docs/onnx.md), bn folded in; -1 when the pads are
 * not given explicitly. */
int64_t
kt__cc_w_phase(struct kt_cc_net *net, const struct kt_onnx_kernel *k,
               const struct kt_onnx_node *bn, const struct kt_lbuf *lb)
{
    const struct kt_onnx_node *a = &net->g->nodes[k->anchor];
    const struct kt_onnx_value *wv = &net->g->values[a->in[1]];
    int64_t pads[4] = {0, 0, 0, 0}, d[6], n, i, at, R, S;
    char buf[32];
    float *w;

    if (strcmp(kt_onnx_attr_str(a, "auto_pad", "NOTSET", buf, sizeof(buf)),
               "NOTSET") != 0 ||
        kt_onnx_attr_ints(a, "output_shape", d, 6) != 0 ||
        kt_onnx_attr_ints(a, "pads", pads, 4) < 0 || lb->ndim != 6)
        return -1;
    memcpy(d, lb->shape, sizeof(d));
    R = wv->dims[2];
    S = wv->dims[3];
    n = d[0] * d[1] * d[2] * d[3] * d[4] * d[5];
    at = kt__cc_w_alloc(net, n);
    w = weight_data(net->g, a, bn);
    for (i = 0; i < n; i++) {
        int64_t b = i % d[5], p = i / d[5] % d[4],
                ph = i / (d[5] * d[4]) % d[3];
        int64_t q = i / (d[5] * d[4] * d[3]) % d[2];
        int64_t cf = i / (d[5] * d[4] * d[3] * d[2]);
        int64_t r = ph + pads[0] + d[3] * (q - k->conv_t_offset[0]);
        int64_t s = b + pads[1] + d[5] * (p - k->conv_t_offset[1]);
        if (r >= 0 && r < R && s >= 0 && s < S)
            net->w[at + i] = w[(cf * R + r) * S + s];
    }
    free(w);
    return at;
}

/* The transformed weight U [K, C, alpha, S] of a Winograd kernel
 * (kt_op_conv2d_winograd, docs/compile.md "Weights"), batch norm bn folded
 * in first; -1 when lb is not shaped like one for a's weight. */
int64_t
kt__cc_w_winograd(struct kt_cc_net *net, const struct kt_onnx_node *a,
                  const struct kt_onnx_node *bn, const struct kt_lbuf *lb)
{
    const struct kt_onnx_value *wv = &net->g->values[a->in[1]];
    struct kt_winograd wg;
    int64_t at;
    float *w;

    if (lb->ndim != 4 || wv->ndim != 4 || lb->shape[0] != wv->dims[0] ||
        lb->shape[1] != wv->dims[1] || lb->shape[3] != wv->dims[3] ||
        kt_winograd_matrices((int)(lb->shape[2] - wv->dims[2] + 1),
                             (int)wv->dims[2], &wg) != KT_OK)
        return -1;
    at = kt__cc_w_alloc(net, kt_onnx_value_elems(wv) / wg.r * wg.alpha);
    w = weight_data(net->g, a, bn);
    kt_winograd_weights(&wg, wv->dims[0], wv->dims[1], wv->dims[3], w,
                        net->w + at);
    free(w);
    return at;
}

/* The input transform BT (which 0) or the output transform AT (1) of a
 * Winograd kernel over alpha rows for a window of r rows; -1 when there
 * is no such transform. */
int64_t
kt__cc_w_winograd_matrix(struct kt_cc_net *net, int64_t alpha, int64_t r,
                         int which)
{
    struct kt_winograd wg;
    int64_t at, i, j, rows;

    if (kt_winograd_matrices((int)(alpha - r + 1), (int)r, &wg) != KT_OK)
        return -1;
    rows = which ? wg.m : wg.alpha;
    at = kt__cc_w_alloc(net, rows * wg.alpha);
    for (i = 0; i < rows; i++)
        for (j = 0; j < wg.alpha; j++)
            net->w[at + i * wg.alpha + j] = (float)(which ? wg.at[i][j]
                                                          : wg.bt[i][j]);
    return at;
}
