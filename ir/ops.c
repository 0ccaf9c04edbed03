/* ops.c - the operator library: each builder writes a compute definition
 * and the shapes of its inputs (and of outputs whose extents the reads do
 * not fix).  Tensor names and layouts are fixed (docs/compute.md); other
 * modules rely on them.  On KT_EINVAL a builder leaves the reason in
 * d->text and d->name is "invalid". */
#include "ir/ir.h"

#include <stdio.h>
#include <string.h>

static int bad(struct kt_op_def *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
bad(struct kt_op_def *d, const char *fmt, ...)
{
    va_list ap;

    memset(d, 0, sizeof(*d));
    snprintf(d->name, sizeof(d->name), "invalid");
    va_start(ap, fmt);
    vsnprintf(d->text, sizeof(d->text), fmt, ap);
    va_end(ap);
    return KT_EINVAL;
}

static void
add_shape(struct kt_op_def *d, const char *name, int ndim, const int64_t *dims)
{
    struct kt_shape *s = &d->shapes[d->nshapes++];

    snprintf(s->name, sizeof(s->name), "%s", name);
    s->ndim = ndim;
    memcpy(s->dims, dims, sizeof(*dims) * (size_t)ndim);
}

/* A layer's weights are the same on every call: their layout may be
 * rewritten once, outside the timed kernel (cache_read + layout_rewrite). */
static void
add_weight(struct kt_op_def *d, const char *name, int ndim, const int64_t *dims)
{
    add_shape(d, name, ndim, dims);
    d->is_const[d->nshapes - 1] = 1;
}

/* Appends formatted text to d->text. */
static void put(struct kt_op_def *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
put(struct kt_op_def *d, const char *fmt, ...)
{
    size_t len = strlen(d->text);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(d->text + len, sizeof(d->text) - len, fmt, ap);
    va_end(ap);
}

static void set_name(struct kt_op_def *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
set_name(struct kt_op_def *d, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(d->name, sizeof(d->name), fmt, ap);
    va_end(ap);
}

/* The last stage's value with the epilogue applied: "T[idx] + B[bidx]"
 * and/or "max(..., 0)". */
static void
put_epilogue(struct kt_op_def *d, int epi, const char *idx, const char *bidx)
{
    put(d, "\nO[%s] = ", idx);
    if (epi & KT_EPI_RELU)
        put(d, "max(");
    put(d, "T[%s]", idx);
    if (epi & KT_EPI_BIAS)
        put(d, " + B[%s]", bidx);
    if (epi & KT_EPI_RELU)
        put(d, ", 0)");
}

int
kt_op_dense(struct kt_op_def *d, int64_t M, int64_t N, int64_t K, int epilogue)
{
    if (M <= 0 || N <= 0 || K <= 0)
        return bad(d, "dense: sizes must be positive (M=%lld N=%lld K=%lld)",
                   (long long)M, (long long)N, (long long)K);
    if (epilogue & ~(KT_EPI_BIAS | KT_EPI_RELU))
        return bad(d, "dense: unknown epilogue bits 0x%x", epilogue);
    memset(d, 0, sizeof(*d));
    set_name(d, "dense_%lldx%lldx%lld%s%s", (long long)M, (long long)N,
             (long long)K, epilogue & KT_EPI_BIAS ? "_bias" : "",
             epilogue & KT_EPI_RELU ? "_relu" : "");
    add_shape(d, "A", 2, (int64_t[]){M, K});
    add_weight(d, "W", 2, (int64_t[]){N, K});
    if (epilogue & KT_EPI_BIAS)
        add_shape(d, "B", 1, (int64_t[]){N});
    put(d, "%s[i,j] += A[i,k] * W[j,k]", epilogue ? "T" : "O");
    if (epilogue)
        put_epilogue(d, epilogue, "i,j", "j");
    return KT_OK;
}

int
kt_op_matmul(struct kt_op_def *d, int64_t M, int64_t N, int64_t K)
{
    if (M <= 0 || N <= 0 || K <= 0)
        return bad(d,
                   "matmul: sizes must be positive (M=%lld N=%lld "
                   "K=%lld)",
                   (long long)M, (long long)N, (long long)K);
    memset(d, 0, sizeof(*d));
    set_name(d, "matmul_%lldx%lldx%lld", (long long)M, (long long)N,
             (long long)K);
    add_shape(d, "A", 2, (int64_t[]){M, K});
    add_shape(d, "B", 2, (int64_t[]){K, N});
    put(d, "O[i,j] += A[i,k] * B[k,j]");
    return KT_OK;
}

int
kt_op_batch_matmul(struct kt_op_def *d, int64_t B, int64_t M, int64_t N,
                   int64_t K, int transpose_b)
{
    if (B <= 0 || M <= 0 || N <= 0 || K <= 0)
        return bad(d,
                   "batch_matmul: sizes must be positive (B=%lld M=%lld "
                   "N=%lld K=%lld)",
                   (long long)B, (long long)M, (long long)N, (long long)K);
    memset(d, 0, sizeof(*d));
    set_name(d, "batch_matmul_%lldx%lldx%lldx%lld%s", (long long)B,
             (long long)M, (long long)N, (long long)K,
             transpose_b ? "_nt" : "");
    add_shape(d, "A", 3, (int64_t[]){B, M, K});
    if (transpose_b)
        add_shape(d, "B", 3, (int64_t[]){B, N, K});
    else
        add_shape(d, "B", 3, (int64_t[]){B, K, N});
    put(d, "O[b,i,j] += A[b,i,k] * B[%s]", transpose_b ? "b,j,k" : "b,k,j");
    return KT_OK;
}

/* Writes "y*S+r*D-P" with unit factors and a zero offset left out. */
static void
window_index(char *buf, size_t n, const char *out, int64_t stride,
             const char *win, int64_t dil, int64_t pad)
{
    char s[32] = "", dd[32] = "", p[32] = "";

    if (stride != 1)
        snprintf(s, sizeof(s), "*%lld", (long long)stride);
    if (dil != 1)
        snprintf(dd, sizeof(dd), "*%lld", (long long)dil);
    if (pad != 0)
        snprintf(p, sizeof(p), "-%lld", (long long)pad);
    snprintf(buf, n, "%s%s+%s%s%s", out, s, win, dd, p);
}

/* Output size of a sliding window, or a value <= 0 when none fits. */
static int64_t
out_size(int64_t in, int64_t pad, int64_t dil, int64_t win, int64_t stride)
{
    int64_t num = in + 2 * pad - dil * (win - 1) - 1;

    return num < 0 ? 0 : num / stride + 1;
}

int
kt_op_conv2d(struct kt_op_def *d, const struct kt_conv2d_params *p)
{
    return kt_op_conv2d_sized(d, p, 0, 0);
}

int
kt_op_conv2d_sized(struct kt_op_def *d, const struct kt_conv2d_params *p,
                   int64_t out_h, int64_t out_w)
{
    char iy[96], ix[96];
    int64_t G = p->groups, OH, OW;
    const char *res;

    if (p->N <= 0 || p->C <= 0 || p->H <= 0 || p->W <= 0 || p->K <= 0 ||
        p->R <= 0 || p->S <= 0)
        return bad(d,
                   "conv2d: sizes must be positive (N=%lld C=%lld H=%lld "
                   "W=%lld K=%lld R=%lld S=%lld)",
                   (long long)p->N, (long long)p->C, (long long)p->H,
                   (long long)p->W, (long long)p->K, (long long)p->R,
                   (long long)p->S);
    if (p->stride_h <= 0 || p->stride_w <= 0 || p->dilation_h <= 0 ||
        p->dilation_w <= 0 || p->pad_h < 0 || p->pad_w < 0 || G <= 0)
        return bad(d, "conv2d: strides, dilations and groups must be "
                      "positive and paddings non-negative");
    if (p->C % G != 0 || p->K % G != 0)
        return bad(d, "conv2d: groups=%lld must divide C=%lld and K=%lld",
                   (long long)G, (long long)p->C, (long long)p->K);
    if (p->epilogue & ~(KT_EPI_BIAS | KT_EPI_RELU))
        return bad(d, "conv2d: unknown epilogue bits 0x%x", p->epilogue);
    OH = out_size(p->H, p->pad_h, p->dilation_h, p->R, p->stride_h);
    OW = out_size(p->W, p->pad_w, p->dilation_w, p->S, p->stride_w);
    if (out_h > 0 || out_w > 0) {
        OH = out_h;
        OW = out_w;
        if ((OH - 1) * p->stride_h - p->pad_h > p->H - 1 ||
            (OW - 1) * p->stride_w - p->pad_w > p->W - 1)
            OH = 0;
    }
    if (OH <= 0 || OW <= 0)
        return bad(d,
                   "conv2d: the %lldx%lld window (dilation %lldx%lld) "
                   "does not fit the %lldx%lld input padded by %lldx%lld",
                   (long long)p->R, (long long)p->S, (long long)p->dilation_h,
                   (long long)p->dilation_w, (long long)p->H, (long long)p->W,
                   (long long)p->pad_h, (long long)p->pad_w);
    memset(d, 0, sizeof(*d));
    set_name(d,
             "conv2d_n%lld_c%lld_h%lld_w%lld_k%lld_r%lld_s%lld_st%lld_"
             "p%lld_d%lld_g%lld%s%s",
             (long long)p->N, (long long)p->C, (long long)p->H, (long long)p->W,
             (long long)p->K, (long long)p->R, (long long)p->S,
             (long long)p->stride_h, (long long)p->pad_h,
             (long long)p->dilation_h, (long long)G,
             p->epilogue & KT_EPI_BIAS ? "_bias" : "",
             p->epilogue & KT_EPI_RELU ? "_relu" : "");
    window_index(iy, sizeof(iy), "y", p->stride_h, "r", p->dilation_h,
                 p->pad_h);
    window_index(ix, sizeof(ix), "x", p->stride_w, "s", p->dilation_w,
                 p->pad_w);
    res = p->epilogue ? "T" : "O";
    if (G == 1) {
        add_shape(d, "I", 4, (int64_t[]){p->N, p->C, p->H, p->W});
        add_weight(d, "W", 4, (int64_t[]){p->K, p->C, p->R, p->S});
        add_shape(d, res, 4, (int64_t[]){p->N, p->K, OH, OW});
        if (p->epilogue & KT_EPI_BIAS)
            add_shape(d, "B", 1, (int64_t[]){p->K});
        put(d, "%s[n,f,y,x] += I[n,c,%s,%s] * W[f,c,r,s]", res, iy, ix);
        if (p->epilogue)
            put_epilogue(d, p->epilogue, "n,f,y,x", "f");
        return KT_OK;
    }
    add_shape(d, "I", 5, (int64_t[]){p->N, G, p->C / G, p->H, p->W});
    add_weight(d, "W", 5, (int64_t[]){G, p->K / G, p->C / G, p->R, p->S});
    add_shape(d, res, 5, (int64_t[]){p->N, G, p->K / G, OH, OW});
    if (p->epilogue & KT_EPI_BIAS)
        add_shape(d, "B", 2, (int64_t[]){G, p->K / G});
    put(d, "%s[n,g,f,y,x] += I[n,g,c,%s,%s] * W[g,f,c,r,s]", res, iy, ix);
    if (p->epilogue)
        put_epilogue(d, p->epilogue, "n,g,f,y,x", "g,f");
    return KT_OK;
}

int
kt_op_pool2d(struct kt_op_def *d, int is_max, int64_t N, int64_t C, int64_t H,
             int64_t W, int64_t kernel, int64_t stride, int64_t pad)
{
    char iy[96], ix[96];
    int64_t OH, OW;

    if (N <= 0 || C <= 0 || H <= 0 || W <= 0 || kernel <= 0 || stride <= 0)
        return bad(d, "pool2d: sizes, kernel and stride must be positive");
    if (pad < 0 || 2 * pad > kernel)
        return bad(d,
                   "pool2d: padding %lld must be in 0..kernel/2 (kernel "
                   "%lld)",
                   (long long)pad, (long long)kernel);
    OH = out_size(H, pad, 1, kernel, stride);
    OW = out_size(W, pad, 1, kernel, stride);
    if (OH <= 0 || OW <= 0)
        return bad(d,
                   "pool2d: kernel %lld does not fit the %lldx%lld input "
                   "padded by %lld",
                   (long long)kernel, (long long)H, (long long)W,
                   (long long)pad);
    memset(d, 0, sizeof(*d));
    set_name(d, "%s_pool2d_n%lld_c%lld_h%lld_w%lld_k%lld_st%lld_p%lld",
             is_max ? "max" : "avg", (long long)N, (long long)C, (long long)H,
             (long long)W, (long long)kernel, (long long)stride,
             (long long)pad);
    add_shape(d, "I", 4, (int64_t[]){N, C, H, W});
    add_shape(d, "O", 4, (int64_t[]){N, C, OH, OW});
    window_index(iy, sizeof(iy), "y", stride, "r", 1, pad);
    window_index(ix, sizeof(ix), "x", stride, "s", 1, pad);
    if (is_max)
        put(d, "O[n,c,y,x] max= I[n,c,%s,%s]", iy, ix);
    else
        put(d, "O[n,c,y,x] += I[n,c,%s,%s] * (1/(%lld*%lld))", iy, ix,
            (long long)kernel, (long long)kernel);
    put(d, " where r:%lld, s:%lld", (long long)kernel, (long long)kernel);
    return KT_OK;
}

int
kt_op_global_avg_pool(struct kt_op_def *d, int64_t N, int64_t C, int64_t H,
                      int64_t W)
{
    if (N <= 0 || C <= 0 || H <= 0 || W <= 0)
        return bad(d, "global_avg_pool: sizes must be positive");
    memset(d, 0, sizeof(*d));
    set_name(d, "global_avg_pool_n%lld_c%lld_h%lld_w%lld", (long long)N,
             (long long)C, (long long)H, (long long)W);
    add_shape(d, "I", 4, (int64_t[]){N, C, H, W});
    put(d, "O[n,c] += I[n,c,h,w] * (1/(%lld*%lld))", (long long)H,
        (long long)W);
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
        return bad(d, "elementwise %.32s: sizes must be positive", kind);
    memset(d, 0, sizeof(*d));
    put(d, "O[n,c,h,w] = ");
    if (strcmp(kind, "add") == 0) {
        put(d, "%s + %s", a, b);
        two = 1;
    } else if (strcmp(kind, "mul") == 0) {
        put(d, "%s * %s", a, b);
        two = 1;
    } else if (strcmp(kind, "relu") == 0) {
        put(d, "max(%s, 0)", a);
    } else if (strcmp(kind, "hardswish") == 0) {
        put(d, "%s * min(max(%s + 3, 0), 6) / 6", a, a);
    } else if (strcmp(kind, "sigmoid") == 0) {
        put(d, "sigmoid(%s)", a);
    } else {
        return bad(d,
                   "elementwise: unknown kind '%.32s' (known: add, mul, "
                   "relu, hardswish, sigmoid)",
                   kind);
    }
    set_name(d, "%s_n%lld_c%lld_h%lld_w%lld", kind, (long long)N, (long long)C,
             (long long)H, (long long)W);
    add_shape(d, "A", 4, (int64_t[]){N, C, H, W});
    if (two)
        add_shape(d, "B", 4, (int64_t[]){N, C, H, W});
    return KT_OK;
}

int
kt_op_softmax(struct kt_op_def *d, int64_t rows, int64_t cols)
{
    if (rows <= 0 || cols <= 0)
        return bad(d,
                   "softmax: sizes must be positive (rows=%lld "
                   "cols=%lld)",
                   (long long)rows, (long long)cols);
    memset(d, 0, sizeof(*d));
    set_name(d, "softmax_%lldx%lld", (long long)rows, (long long)cols);
    add_shape(d, "X", 2, (int64_t[]){rows, cols});
    put(d, "M[i] max= X[i,j]\n"
           "E[i,j] = exp(X[i,j] - M[i])\n"
           "S[i] += E[i,j]\n"
           "O[i,j] = E[i,j] / S[i]");
    return KT_OK;
}

int
kt_op_build(const struct kt_op_def *d, struct kt_dag **out, char *err,
            size_t errlen)
{
    *out = NULL;
    if (d->nshapes < 0 || d->nshapes > KT_MAX_TENSORS)
        return kt_seterr(err, errlen, KT_EINVAL, "%s: bad shape count %d",
                         d->name, d->nshapes);
    return kt_dag_parse_weights(d->text, d->shapes, d->is_const, d->nshapes,
                                out, err, errlen);
}

/* ---- Operators for imported models (ONNX) ------------------------------ */

int
kt_op_softmax_axis(struct kt_op_def *d, int64_t outer, int64_t n, int64_t inner)
{
    if (outer <= 0 || n <= 0 || inner <= 0)
        return bad(d,
                   "softmax: sizes must be positive (outer=%lld n=%lld "
                   "inner=%lld)",
                   (long long)outer, (long long)n, (long long)inner);
    if (inner == 1)
        return kt_op_softmax(d, outer, n);
    memset(d, 0, sizeof(*d));
    set_name(d, "softmax_%lldx%lldx%lld", (long long)outer, (long long)n,
             (long long)inner);
    add_shape(d, "X", 3, (int64_t[]){outer, n, inner});
    put(d, "M[i,k] max= X[i,j,k]\n"
           "E[i,j,k] = exp(X[i,j,k] - M[i,k])\n"
           "S[i,k] += E[i,j,k]\n"
           "O[i,j,k] = E[i,j,k] / S[i,k]");
    return KT_OK;
}

int
kt_op_reduce_mean(struct kt_op_def *d, int64_t outer, int64_t n, int64_t inner)
{
    if (outer <= 0 || n <= 0 || inner <= 0)
        return bad(d,
                   "reduce_mean: sizes must be positive (outer=%lld "
                   "n=%lld inner=%lld)",
                   (long long)outer, (long long)n, (long long)inner);
    memset(d, 0, sizeof(*d));
    set_name(d, "reduce_mean_%lldx%lldx%lld", (long long)outer, (long long)n,
             (long long)inner);
    if (inner == 1) {
        add_shape(d, "X", 2, (int64_t[]){outer, n});
        put(d, "O[i] += X[i,j] * (1/%lld)", (long long)n);
    } else {
        add_shape(d, "X", 3, (int64_t[]){outer, n, inner});
        put(d, "O[i,k] += X[i,j,k] * (1/%lld)", (long long)n);
    }
    return KT_OK;
}

int
kt_op_layer_norm(struct kt_op_def *d, int64_t rows, int64_t cols, double eps)
{
    if (rows <= 0 || cols <= 0)
        return bad(d,
                   "layer_norm: sizes must be positive (rows=%lld "
                   "cols=%lld)",
                   (long long)rows, (long long)cols);
    if (!(eps > 0 && eps < 1))
        return bad(d, "layer_norm: epsilon must be in (0, 1) (got %g)", eps);
    memset(d, 0, sizeof(*d));
    set_name(d, "layer_norm_%lldx%lld", (long long)rows, (long long)cols);
    add_shape(d, "X", 2, (int64_t[]){rows, cols});
    put(d,
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
        return bad(d, "pool: sizes, windows and strides must be positive and "
                      "pads non-negative");
    if (!pool_windows_fit(p->H, p->kh, p->stride_h, p->pad_h, p->out_h) ||
        !pool_windows_fit(p->W, p->kw, p->stride_w, p->pad_w, p->out_w))
        return bad(d,
                   "pool: a %lldx%lld window with stride %lldx%lld and "
                   "pads %lldx%lld gives %lldx%lld outputs of the %lldx%lld "
                   "input, and some window holds no input element",
                   (long long)p->kh, (long long)p->kw, (long long)p->stride_h,
                   (long long)p->stride_w, (long long)p->pad_h,
                   (long long)p->pad_w, (long long)p->out_h,
                   (long long)p->out_w, (long long)p->H, (long long)p->W);
    if (p->kh == p->kw && p->stride_h == p->stride_w && p->pad_h == p->pad_w &&
        2 * p->pad_h <= p->kh && !pool_needs_counts(p) &&
        out_size(p->H, p->pad_h, 1, p->kh, p->stride_h) == p->out_h &&
        out_size(p->W, p->pad_w, 1, p->kw, p->stride_w) == p->out_w)
        return kt_op_pool2d(d, p->is_max, p->N, p->C, p->H, p->W, p->kh,
                            p->stride_h, p->pad_h);
    memset(d, 0, sizeof(*d));
    set_name(d,
             "%s_pool_n%lld_c%lld_h%lld_w%lld_k%lldx%lld_st%lldx%lld_"
             "p%lldx%lld",
             p->is_max ? "max" : "avg", (long long)p->N, (long long)p->C,
             (long long)p->H, (long long)p->W, (long long)p->kh,
             (long long)p->kw, (long long)p->stride_h, (long long)p->stride_w,
             (long long)p->pad_h, (long long)p->pad_w);
    add_shape(d, "I", 4, (int64_t[]){p->N, p->C, p->H, p->W});
    add_shape(d, "O", 4, (int64_t[]){p->N, p->C, p->out_h, p->out_w});
    window_index(iy, sizeof(iy), "y", p->stride_h, "r", 1, p->pad_h);
    window_index(ix, sizeof(ix), "x", p->stride_w, "s", 1, p->pad_w);
    if (p->is_max) {
        put(d, "O[n,c,y,x] max= I[n,c,%s,%s]", iy, ix);
    } else if (pool_needs_counts(p)) {
        add_shape(d, "Nrm", 2, (int64_t[]){p->out_h, p->out_w});
        put(d, "O[n,c,y,x] += I[n,c,%s,%s] * Nrm[y,x]", iy, ix);
    } else {
        put(d, "O[n,c,y,x] += I[n,c,%s,%s] * (1/(%lld*%lld))", iy, ix,
            (long long)p->kh, (long long)p->kw);
    }
    put(d, " where r:%lld, s:%lld", (long long)p->kh, (long long)p->kw);
    return KT_OK;
}

static int64_t
floor_div(int64_t a, int64_t b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* The phase taps of one dimension of a transposed convolution: for output
 * phase a the kernel tap is a + pad + stride*(q - c), q in [0, taps). */
static void
conv_t_taps(int64_t k, int64_t stride, int64_t pad, int64_t *c, int64_t *taps)
{
    int64_t a, lo = INT64_MAX, hi = INT64_MIN;

    for (a = 0; a < stride; a++) {
        int64_t qlo = -floor_div(a + pad, stride);
        int64_t qhi = floor_div(k - 1 - a - pad, stride);
        if (qlo < lo)
            lo = qlo;
        if (qhi > hi)
            hi = qhi;
    }
    *c = -lo;
    *taps = hi - lo + 1;
}

/* "y+c-q" with a zero offset left out. */
static void
phase_index(char *buf, size_t n, const char *out, int64_t c, const char *tap)
{
    if (c == 0)
        snprintf(buf, n, "%s-%s", out, tap);
    else
        snprintf(buf, n, "%s%+lld-%s", out, (long long)c, tap);
}

int
kt_op_conv2d_transpose(struct kt_op_def *d, const struct kt_conv_t_params *p,
                       int64_t *ch, int64_t *cw)
{
    int64_t qh, qw, oh, ow;
    char iy[64], ix[64];

    if (p->N <= 0 || p->C <= 0 || p->H <= 0 || p->W <= 0 || p->K <= 0 ||
        p->R <= 0 || p->S <= 0 || p->stride_h <= 0 || p->stride_w <= 0 ||
        p->out_h <= 0 || p->out_w <= 0)
        return bad(d, "conv2d_transpose: sizes, strides and the output size "
                      "must be positive");
    if (p->pad_h < 0 || p->pad_w < 0 || p->pad_h >= p->R || p->pad_w >= p->S)
        return bad(d, "conv2d_transpose: pads must be in 0..kernel-1");
    conv_t_taps(p->R, p->stride_h, p->pad_h, ch, &qh);
    conv_t_taps(p->S, p->stride_w, p->pad_w, cw, &qw);
    oh = (p->out_h + p->stride_h - 1) / p->stride_h;
    ow = (p->out_w + p->stride_w - 1) / p->stride_w;
    memset(d, 0, sizeof(*d));
    set_name(d,
             "conv2d_transpose_n%lld_c%lld_h%lld_w%lld_k%lld_r%lld_s%lld_"
             "st%lld_p%lld",
             (long long)p->N, (long long)p->C, (long long)p->H, (long long)p->W,
             (long long)p->K, (long long)p->R, (long long)p->S,
             (long long)p->stride_h, (long long)p->pad_h);
    add_shape(d, "I", 4, (int64_t[]){p->N, p->C, p->H, p->W});
    add_shape(d, "W", 6,
              (int64_t[]){p->C, p->K, qh, p->stride_h, qw, p->stride_w});
    add_shape(d, "O", 6,
              (int64_t[]){p->N, p->K, oh, p->stride_h, ow, p->stride_w});
    phase_index(iy, sizeof(iy), "y", *ch, "q");
    phase_index(ix, sizeof(ix), "x", *cw, "p");
    put(d, "O[n,f,y,a,x,b] += I[n,c,%s,%s] * W[c,f,q,a,p,b]", iy, ix);
    return KT_OK;
}

/* Renames the output tensor O to Y in the text (whole names only). */
static void
rename_output(struct kt_op_def *d)
{
    size_t i, n = strlen(d->text);
    int k;

    for (i = 0; i + 1 < n; i++) {
        char prev = i > 0 ? d->text[i - 1] : ' ';
        int ident = (prev >= 'A' && prev <= 'Z') ||
                    (prev >= 'a' && prev <= 'z') ||
                    (prev >= '0' && prev <= '9') || prev == '_';
        if (d->text[i] == 'O' && d->text[i + 1] == '[' && !ident)
            d->text[i] = 'Y';
    }
    for (k = 0; k < d->nshapes; k++)
        if (strcmp(d->shapes[k].name, "O") == 0)
            d->shapes[k].name[0] = 'Y';
}

int
kt_op_epilogue(struct kt_op_def *d, const char *stages,
               const struct kt_shape *extra, int nextra)
{
    if (strlen(d->text) + strlen(stages) + 2 >= sizeof(d->text) ||
        d->nshapes + nextra > KT_MAX_TENSORS)
        return KT_ETOOBIG;
    rename_output(d);
    put(d, "\n%s", stages);
    for (; nextra > 0; nextra--, extra++)
        add_shape(d, extra->name, extra->ndim, extra->dims);
    return KT_OK;
}
