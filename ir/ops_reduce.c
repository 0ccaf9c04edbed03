/* ops_reduce.c - the operator library's pooling, elementwise, softmax and
 * normalization builders (the contractions and the shared helpers are in
 * ops.c).  Tensor names and layouts are fixed (docs/compute.md). */
#include "ir/ops_int.h"

#include <stdio.h>
#include <string.h>

int
kt_op_pool2d(struct kt_op_def *d, int is_max, int64_t N, int64_t C, int64_t H,
             int64_t W, int64_t kernel, int64_t stride, int64_t pad)
{
    char iy[96], ix[96];
    int64_t OH, OW;

    if (N <= 0 || C <= 0 || H <= 0 || W <= 0 || kernel <= 0 || stride <= 0)
        return kt__op_bad(d,
                          "pool2d: sizes, kernel and stride must be positive");
    if (pad < 0 || 2 * pad > kernel)
        return kt__op_bad(d,
                          "pool2d: padding %lld must be in 0..kernel/2 (kernel "
                          "%lld)",
                          (long long)pad, (long long)kernel);
    OH = kt__op_out_size(H, pad, 1, kernel, stride);
    OW = kt__op_out_size(W, pad, 1, kernel, stride);
    if (OH <= 0 || OW <= 0)
        return kt__op_bad(d,
                          "pool2d: kernel %lld does not fit the %lldx%lld "
                          "input "
                          "padded by %lld",
                          (long long)kernel, (long long)H, (long long)W,
                          (long long)pad);
    memset(d, 0, sizeof(*d));
    kt__op_set_name(d, "%s_pool2d_n%lld_c%lld_h%lld_w%lld_k%lld_st%lld_p%lld",
                    is_max ? "max" : "avg", (long long)N, (long long)C,
                    (long long)H, (long long)W, (long long)kernel,
                    (long long)stride, (long long)pad);
    kt__op_add_shape(d, "I", 4, (int64_t[]){N, C, H, W});
    kt__op_add_shape(d, "O", 4, (int64_t[]){N, C, OH, OW});
    kt__op_window_index(iy, sizeof(iy), "y", stride, "r", 1, pad);
    kt__op_window_index(ix, sizeof(ix), "x", stride, "s", 1, pad);
    if (is_max)
        kt__op_put(d, "O[n,c,y,x] max= I[n,c,%s,%s]", iy, ix);
    else
        kt__op_put(d, "O[n,c,y,x] += I[n,c,%s,%s] * (1/(%lld*%lld))", iy, ix,
                   (long long)kernel, (long long)kernel);
    kt__op_put(d, " where r:%lld, s:%lld", (long long)kernel,
               (long long)kernel);
    return KT_OK;
}

int
kt_op_global_avg_pool(struct kt_op_def *d, int64_t N, int64_t C, int64_t H,
                      int64_t W)
{
    int64_t P = H * W, padded = P >= 16 ? (P + 15) / 16 * 16 : P;

    if (N <= 0 || C <= 0 || H <= 0 || W <= 0)
        return kt__op_bad(d, "global_avg_pool: sizes must be positive");
    memset(d, 0, sizeof(*d));
    kt__op_set_name(d, "global_avg_pool_n%lld_c%lld_h%lld_w%lld", (long long)N,
                    (long long)C, (long long)H, (long long)W);
    /* One reduction over the H*W contiguous points of a channel, read as
     * vectors with lane accumulators (docs/search.md, Rfactor) and padded
     * to whole 16-lane vectors: a 7x7 window is 3 vectors and one lane
     * (a masked load), where over h and w apart its innermost 7 points
     * fit no vector and the channels, 49 floats apart, were gathered lane
     * by lane. */
    kt__op_add_shape(d, "I", 3, (int64_t[]){N, C, P});
    kt__op_put(d, "O[n,c] += I[n,c,p] * (1/%lld)", (long long)P);
    if (padded != P)
        kt__op_put(d, " pad p:%lld", (long long)padded);
    return KT_OK;
}

int
kt_op_elementwise(struct kt_op_def *d, const char *kind, int64_t N, int64_t C,
                  int64_t H, int64_t W)
{
    static const char *const a = "A[n,c,h,w]", *const b = "B[n,c,h,w]";
    int two = 0;

    if (kind == NULL)
        kind = "(null)";
    if (N <= 0 || C <= 0 || H <= 0 || W <= 0)
        return kt__op_bad(d, "elementwise %.32s: sizes must be positive", kind);
    memset(d, 0, sizeof(*d));
    kt__op_put(d, "O[n,c,h,w] = ");
    if (strcmp(kind, "add") == 0) {
        kt__op_put(d, "%s + %s", a, b);
        two = 1;
    } else if (strcmp(kind, "mul") == 0) {
        kt__op_put(d, "%s * %s", a, b);
        two = 1;
    } else if (strcmp(kind, "relu") == 0) {
        kt__op_put(d, "max(%s, 0)", a);
    } else if (strcmp(kind, "hardswish") == 0) {
        kt__op_put(d, "%s * min(max(%s + 3, 0), 6) / 6", a, a);
    } else if (strcmp(kind, "sigmoid") == 0) {
        kt__op_put(d, "sigmoid(%s)", a);
    } else {
        return kt__op_bad(d,
                          "elementwise: unknown kind '%.32s' (known: add, mul, "
                          "relu, hardswish, sigmoid)",
                          kind);
    }
    kt__op_set_name(d, "%s_n%lld_c%lld_h%lld_w%lld", kind, (long long)N,
                    (long long)C, (long long)H, (long long)W);
    kt__op_add_shape(d, "A", 4, (int64_t[]){N, C, H, W});
    if (two)
        kt__op_add_shape(d, "B", 4, (int64_t[]){N, C, H, W});
    return KT_OK;
}

int
kt_op_softmax(struct kt_op_def *d, int64_t rows, int64_t cols)
{
    if (rows <= 0 || cols <= 0)
        return kt__op_bad(d,
                          "softmax: sizes must be positive (rows=%lld "
                          "cols=%lld)",
                          (long long)rows, (long long)cols);
    memset(d, 0, sizeof(*d));
    kt__op_set_name(d, "softmax_%lldx%lld", (long long)rows, (long long)cols);
    kt__op_add_shape(d, "X", 2, (int64_t[]){rows, cols});
    kt__op_put(d, "M[i] max= X[i,j]\n"
                  "E[i,j] = exp(X[i,j] - M[i])\n"
                  "S[i] += E[i,j]\n"
                  "O[i,j] = E[i,j] / S[i]");
    return KT_OK;
}

/* ---- Operators for imported models (ONNX) ------------------------------ */

int
kt_op_softmax_axis(struct kt_op_def *d, int64_t outer, int64_t n, int64_t inner)
{
    if (outer <= 0 || n <= 0 || inner <= 0)
        return kt__op_bad(d,
                          "softmax: sizes must be positive (outer=%lld n=%lld "
                          "inner=%lld)",
                          (long long)outer, (long long)n, (long long)inner);
    if (inner == 1)
        return kt_op_softmax(d, outer, n);
    memset(d, 0, sizeof(*d));
    kt__op_set_name(d, "softmax_%lldx%lldx%lld", (long long)outer, (long long)n,
                    (long long)inner);
    kt__op_add_shape(d, "X", 3, (int64_t[]){outer, n, inner});
    kt__op_put(d, "M[i,k] max= X[i,j,k]\n"
                  "E[i,j,k] = exp(X[i,j,k] - M[i,k])\n"
                  "S[i,k] += E[i,j,k]\n"
                  "O[i,j,k] = E[i,j,k] / S[i,k]");
    return KT_OK;
}

int
kt_op_reduce_mean(struct kt_op_def *d, int64_t outer, int64_t n, int64_t inner)
{
    if (outer <= 0 || n <= 0 || inner <= 0)
        return kt__op_bad(d,
                          "reduce_mean: sizes must be positive (outer=%lld "
                          "n=%lld inner=%lld)",
                          (long long)outer, (long long)n, (long long)inner);
    memset(d, 0, sizeof(*d));
    kt__op_set_name(d, "reduce_mean_%lldx%lldx%lld", (long long)outer,
                    (long long)n, (long long)inner);
    if (inner == 1) {
        kt__op_add_shape(d, "X", 2, (int64_t[]){outer, n});
        kt__op_put(d, "O[i] += X[i,j] * (1/%lld)", (long long)n);
    } else {
        kt__op_add_shape(d, "X", 3, (int64_t[]){outer, n, inner});
        kt__op_put(d, "O[i,k] += X[i,j,k] * (1/%lld)", (long long)n);
    }
    return KT_OK;
}

int
kt_op_layer_norm(struct kt_op_def *d, int64_t rows, int64_t cols, double eps)
{
    if (rows <= 0 || cols <= 0)
        return kt__op_bad(d,
                          "layer_norm: sizes must be positive (rows=%lld "
                          "cols=%lld)",
                          (long long)rows, (long long)cols);
    if (!(eps > 0 && eps < 1))
        return kt__op_bad(d, "layer_norm: epsilon must be in (0, 1) (got %g)",
                          eps);
    memset(d, 0, sizeof(*d));
    kt__op_set_name(d, "layer_norm_%lldx%lld", (long long)rows,
                    (long long)cols);
    kt__op_add_shape(d, "X", 2, (int64_t[]){rows, cols});
    kt__op_put(d,
               "M[i] += X[i,j] * (1/%lld)\n"
               "D[i,j] = X[i,j] - M[i]\n"
               "V[i] += D[i,j] * D[i,j] * (1/%lld)\n"
               "O[i,j] = D[i,j] / sqrt(V[i] + %.9g)",
               (long long)cols, (long long)cols, (float)eps);
    return KT_OK;
}

/* Every window of a pool must hold at least one real element. */
static int
pool_windows_fit(int64_t in, int64_t k, int64_t stride, int64_t pad,
                 int64_t out)
{
    return out >= 1 && k - 1 - pad >= 0 && (out - 1) * stride - pad <= in - 1;
}

/* An average that excludes padding divides by a per-window count when
 * some window reaches outside the input; with count_include_pad every
 * window divides by kh*kw. */
static int
pool_needs_counts(const struct kt_pool_params *p)
{
    if (p->is_max || p->count_include_pad)
        return 0;
    return p->pad_h > 0 || p->pad_w > 0 ||
           (p->out_h - 1) * p->stride_h + p->kh > p->H ||
           (p->out_w - 1) * p->stride_w + p->kw > p->W;
}

int
kt_op_pool(struct kt_op_def *d, const struct kt_pool_params *p)
{
    char iy[96], ix[96];

    if (p->N <= 0 || p->C <= 0 || p->H <= 0 || p->W <= 0 || p->kh <= 0 ||
        p->kw <= 0 || p->stride_h <= 0 || p->stride_w <= 0 || p->pad_h < 0 ||
        p->pad_w < 0)
        return kt__op_bad(d, "pool: sizes, windows and strides must be "
                             "positive and "
                             "pads non-negative");
    if (!pool_windows_fit(p->H, p->kh, p->stride_h, p->pad_h, p->out_h) ||
        !pool_windows_fit(p->W, p->kw, p->stride_w, p->pad_w, p->out_w))
        return kt__op_bad(d,
                          "pool: a %lldx%lld window with stride %lldx%lld and "
                          "pads %lldx%lld gives %lldx%lld outputs of the "
                          "%lldx%lld "
                          "input, and some window holds no input element",
                          (long long)p->kh, (long long)p->kw,
                          (long long)p->stride_h, (long long)p->stride_w,
                          (long long)p->pad_h, (long long)p->pad_w,
                          (long long)p->out_h, (long long)p->out_w,
                          (long long)p->H, (long long)p->W);
    if (p->kh == p->kw && p->stride_h == p->stride_w && p->pad_h == p->pad_w &&
        2 * p->pad_h <= p->kh && !pool_needs_counts(p) &&
        kt__op_out_size(p->H, p->pad_h, 1, p->kh, p->stride_h) == p->out_h &&
        kt__op_out_size(p->W, p->pad_w, 1, p->kw, p->stride_w) == p->out_w)
        return kt_op_pool2d(d, p->is_max, p->N, p->C, p->H, p->W, p->kh,
                            p->stride_h, p->pad_h);
    memset(d, 0, sizeof(*d));
    kt__op_set_name(d,
                    "%s_pool_n%lld_c%lld_h%lld_w%lld_k%lldx%lld_st%lldx%lld_"
                    "p%lldx%lld",
                    p->is_max ? "max" : "avg", (long long)p->N, (long long)p->C,
                    (long long)p->H, (long long)p->W, (long long)p->kh,
                    (long long)p->kw, (long long)p->stride_h,
                    (long long)p->stride_w, (long long)p->pad_h,
                    (long long)p->pad_w);
    kt__op_add_shape(d, "I", 4, (int64_t[]){p->N, p->C, p->H, p->W});
    kt__op_add_shape(d, "O", 4, (int64_t[]){p->N, p->C, p->out_h, p->out_w});
    kt__op_window_index(iy, sizeof(iy), "y", p->stride_h, "r", 1, p->pad_h);
    kt__op_window_index(ix, sizeof(ix), "x", p->stride_w, "s", 1, p->pad_w);
    if (p->is_max) {
        kt__op_put(d, "O[n,c,y,x] max= I[n,c,%s,%s]", iy, ix);
    } else if (pool_needs_counts(p)) {
        kt__op_add_shape(d, "Nrm", 2, (int64_t[]){p->out_h, p->out_w});
        kt__op_put(d, "O[n,c,y,x] += I[n,c,%s,%s] * Nrm[y,x]", iy, ix);
    } else {
        kt__op_put(d, "O[n,c,y,x] += I[n,c,%s,%s] * (1/(%lld*%lld))", iy, ix,
                   (long long)p->kh, (long long)p->kw);
    }
    kt__op_put(d, " where r:%lld, s:%lld", (long long)p->kh, (long long)p->kw);
    return KT_OK;
}
