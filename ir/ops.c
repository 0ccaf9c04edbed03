/* ops.c - the operator library: each builder writes a compute definition
 * and the shapes of its inputs (and of outputs whose extents the reads do
 * not fix).  Tensor names and layouts are fixed (docs/compute.md); other
 * modules rely on them.  On KT_EINVAL a builder leaves the reason in
 * d->text and d->name is "invalid".  This file: the shared helpers, the
 * contractions (dense, matmul, convolutions) and kt_op_build; pooling,
 * elementwise, softmax and normalizations are in ops_reduce.c. */
#include "ir/ops_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int
kt__op_bad(struct kt_op_def *d, const char *fmt, ...)
{
    va_list ap;

    memset(d, 0, sizeof(*d));
    snprintf(d->name, sizeof(d->name), "invalid");
    va_start(ap, fmt);
    vsnprintf(d->text, sizeof(d->text), fmt, ap);
    va_end(ap);
    return KT_EINVAL;
}

void
kt__op_add_shape(struct kt_op_def *d, const char *name, int ndim,
                 const int64_t *dims)
{
    struct kt_shape *s = &d->shapes[d->nshapes++];

    snprintf(s->name, sizeof(s->name), "%s", name);
    s->ndim = ndim;
    memcpy(s->dims, dims, sizeof(*dims) * (size_t)ndim);
}

/* A layer's weights are the same on every call: their layout may be
 * rewritten once, outside the timed kernel (cache_read + layout_rewrite). */
void
kt__op_add_weight(struct kt_op_def *d, const char *name, int ndim,
                  const int64_t *dims)
{
    kt__op_add_shape(d, name, ndim, dims);
    d->is_const[d->nshapes - 1] = 1;
}

/* Appends formatted text to d->text. */
void
kt__op_put(struct kt_op_def *d, const char *fmt, ...)
{
    size_t len = strlen(d->text);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(d->text + len, sizeof(d->text) - len, fmt, ap);
    va_end(ap);
}

void
kt__op_set_name(struct kt_op_def *d, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(d->name, sizeof(d->name), fmt, ap);
    va_end(ap);
}

/* A window parameter in a task's name: "2" when height and width agree,
 * "2x1" when not, so layers that differ only across are told apart. */
struct hw_label {
    char s[48];
};

static struct hw_label
hw_label(int64_t h, int64_t w)
{
    struct hw_label l;

    if (h == w)
        snprintf(l.s, sizeof(l.s), "%lld", (long long)h);
    else
        snprintf(l.s, sizeof(l.s), "%lldx%lld", (long long)h, (long long)w);
    return l;
}

/* The last stage's value with the epilogue applied: "T[idx] + B[bidx]"
 * and/or "max(..., 0)". */
void
kt__op_put_epilogue(struct kt_op_def *d, int epi, const char *idx,
                    const char *bidx)
{
    kt__op_put(d, "\nO[%s] = ", idx);
    if (epi & KT_EPI_RELU)
        kt__op_put(d, "max(");
    kt__op_put(d, "T[%s]", idx);
    if (epi & KT_EPI_BIAS)
        kt__op_put(d, " + B[%s]", bidx);
    if (epi & KT_EPI_RELU)
        kt__op_put(d, ", 0)");
}

/* Extents of a product's output that no 16-lane vector (columns) or no
 * register tile of 2 to 8 rows (rows) divides are computed over a padded
 * range into P, then copied into O: a 197 x 197 attention score tile runs
 * as 200 x 224 (14 whole vectors a row, tiles of 2 vectors by 8 or 10
 * rows).  Padding to whole vectors or rows that would cost more than
 * 1/16 is not done. */
static int64_t
round_up(int64_t n, int64_t q)
{
    return (n + q - 1) / q * q;
}

static int
has_divisor(int64_t m, int64_t lo, int64_t hi)
{
    int64_t d;

    for (d = lo; d <= hi; d++)
        if (m % d == 0)
            return 1;
    return 0;
}

/* Columns padded to whole vectors take one vector more where 2, 3 and 4
 * divide none of the 5 or more (197 -> 208 is 13): register tiles 2 to 4
 * vectors wide then fit, where a 1-vector tile is load-bound on some
 * cores (bench_fma on an AMD Zen 5: 1 vector by 10-14 rows from L1 ran at
 * 88-91% of the FMA peak, 2 vectors by 6-8 rows at 100%), and the extra
 * vector costs no arithmetic when it ends the last tile, which the code
 * generator narrows to the kept lanes (codegen_peel.c).  The ViT scores'
 * picks ran 1.00x oneDNN on 1 thread there against 0.86x with 208
 * columns (docs/performance.md). */
static int64_t
padded_cols(int64_t n)
{
    int64_t r = round_up(n, 16);

    if ((r - n) * 16 > n)
        return n;
    if (r != n && r / 16 > 4 && !has_divisor(r / 16, 2, 4))
        return r + 16;
    return r;
}

/* Rows padded to a multiple of 8 (else 4).  Where no tile of 2 to 4
 * vectors divides a row (208 columns, 13 vectors; padded columns take a
 * vector more instead, padded_cols), the register tiles are one vector
 * wide, and one vector a row keeps both FMA pipes busy only with 10 to 12
 * rows of accumulators (bench_fma: a 1-vector tile from L1 ran 160, 166,
 * 171-173, 170-172 and 174-175 GFLOPS with 8 to 12 rows on a 175 GFLOPS
 * core, docs/performance.md): those rows take the first extent a tile of
 * 10 to 12 rows divides, 198 for 197 rather than 200. */
static int64_t
padded_rows(int64_t m, int64_t n)
{
    int64_t r, p;

    if (has_divisor(m, 2, 8))
        return m;
    if (!has_divisor(padded_cols(n) / 16, 2, 4))
        for (p = m; (p - m) * 16 <= m; p++)
            if (has_divisor(p, 10, 12))
                return p;
    r = round_up(m, 8);
    if ((r - m) * 16 <= m)
        return r;
    r = round_up(m, 4);
    return (r - m) * 16 <= m ? r : m;
}

/* Writes "i:M, j:N" for the extents that padding changes. */
static void
put_padded_axes(struct kt_op_def *d, int64_t M, int64_t Mp, int64_t N,
                int64_t Np, int padded)
{
    if (Mp != M)
        kt__op_put(d, "i:%lld%s", (long long)(padded ? Mp : M),
                   Np != N ? ", " : "");
    if (Np != N)
        kt__op_put(d, "j:%lld", (long long)(padded ? Np : N));
}

/* "out[idx] += A[a_idx] * B[b_idx]" (operands named in a, b), over the
 * padded extents when padding pays; returns whether it does. */
static int
put_product_into(struct kt_op_def *d, const char *out, const char *idx,
                 const char *a, const char *b, int64_t M, int64_t N)
{
    int64_t Mp = padded_rows(M, N), Np = padded_cols(N);

    kt__op_put(d, "%s[%s] += %s * %s", out, idx, a, b);
    if (Mp == M && Np == N)
        return 0;
    kt__op_put(d, " pad ");
    put_padded_axes(d, M, Mp, N, Np, 1);
    return 1;
}

/* The clause of a stage that reads the padded product and writes the
 * M x N output: it iterates the same padded extents (so the search can
 * fuse it into the product's tiles) and drops the padding. */
static void
put_unpadding(struct kt_op_def *d, int64_t M, int64_t N)
{
    int64_t Mp = padded_rows(M, N), Np = padded_cols(N);

    kt__op_put(d, " where ");
    put_padded_axes(d, M, Mp, N, Np, 0);
    kt__op_put(d, " pad ");
    put_padded_axes(d, M, Mp, N, Np, 1);
}

/* The product into O, or, when padding pays, into P over the padded
 * extents and then copied into O (docs/compute.md, Padded extents). */
static void
put_product(struct kt_op_def *d, const char *idx, const char *a_idx,
            const char *b_name, const char *b_idx, int64_t M, int64_t N)
{
    char a[64], b[64];

    snprintf(a, sizeof(a), "A[%s]", a_idx);
    snprintf(b, sizeof(b), "%s[%s]", b_name, b_idx);
    if (padded_rows(M, N) == M && padded_cols(N) == N) {
        put_product_into(d, "O", idx, a, b, M, N);
        return;
    }
    put_product_into(d, "P", idx, a, b, M, N);
    kt__op_put(d, "\nO[%s] = P[%s]", idx, idx);
    put_unpadding(d, M, N);
}

int
kt_op_dense(struct kt_op_def *d, int64_t M, int64_t N, int64_t K, int epilogue)
{
    if (M <= 0 || N <= 0 || K <= 0)
        return kt__op_bad(d, "dense: sizes must be positive (M=%lld N=%lld K=%lld)",
                          (long long)M, (long long)N, (long long)K);
    if (epilogue & ~(KT_EPI_BIAS | KT_EPI_RELU))
        return kt__op_bad(d, "dense: unknown epilogue bits 0x%x", epilogue);
    memset(d, 0, sizeof(*d));
    kt__op_set_name(d, "dense_%lldx%lldx%lld%s%s", (long long)M, (long long)N,
                    (long long)K, epilogue & KT_EPI_BIAS ? "_bias" : "",
                    epilogue & KT_EPI_RELU ? "_relu" : "");
    kt__op_add_shape(d, "A", 2, (int64_t[]){M, K});
    kt__op_add_weight(d, "W", 2, (int64_t[]){N, K});
    if (epilogue & KT_EPI_BIAS)
        kt__op_add_shape(d, "B", 1, (int64_t[]){N});
    if (epilogue) {
        int padded = put_product_into(d, "T", "i,j", "A[i,k]", "W[j,k]", M, N);
        kt__op_put_epilogue(d, epilogue, "i,j", "j");
        if (padded)
            put_unpadding(d, M, N);
    } else {
        put_product(d, "i,j", "i,k", "W", "j,k", M, N);
    }
    return KT_OK;
}

static int
matmul(struct kt_op_def *d, int64_t M, int64_t N, int64_t K, int const_b)
{
    if (M <= 0 || N <= 0 || K <= 0)
        return kt__op_bad(d,
                          "matmul: sizes must be positive (M=%lld N=%lld "
                          "K=%lld)",
                          (long long)M, (long long)N, (long long)K);
    memset(d, 0, sizeof(*d));
    kt__op_set_name(d, "matmul_%lldx%lldx%lld%s", (long long)M, (long long)N,
                    (long long)K, const_b ? "_constb" : "");
    kt__op_add_shape(d, "A", 2, (int64_t[]){M, K});
    if (const_b)
        kt__op_add_weight(d, "B", 2, (int64_t[]){K, N});
    else
        kt__op_add_shape(d, "B", 2, (int64_t[]){K, N});
    put_product(d, "i,j", "i,k", "B", "k,j", M, N);
    return KT_OK;
}

int
kt_op_matmul(struct kt_op_def *d, int64_t M, int64_t N, int64_t K)
{
    return matmul(d, M, N, K, 0);
}

int
kt_op_matmul_const_b(struct kt_op_def *d, int64_t M, int64_t N, int64_t K)
{
    return matmul(d, M, N, K, 1);
}

int
kt_op_batch_matmul(struct kt_op_def *d, int64_t B, int64_t M, int64_t N,
                   int64_t K, int transpose_b)
{
    if (B <= 0 || M <= 0 || N <= 0 || K <= 0)
        return kt__op_bad(d,
                          "batch_matmul: sizes must be positive (B=%lld M=%lld "
                          "N=%lld K=%lld)",
                          (long long)B, (long long)M, (long long)N,
                          (long long)K);
    memset(d, 0, sizeof(*d));
    kt__op_set_name(d, "batch_matmul_%lldx%lldx%lldx%lld%s", (long long)B,
                    (long long)M, (long long)N, (long long)K,
                    transpose_b ? "_nt" : "");
    kt__op_add_shape(d, "A", 3, (int64_t[]){B, M, K});
    if (transpose_b)
        kt__op_add_shape(d, "B", 3, (int64_t[]){B, N, K});
    else
        kt__op_add_shape(d, "B", 3, (int64_t[]){B, K, N});
    put_product(d, "b,i,j", "b,i,k", "B", transpose_b ? "b,j,k" : "b,k,j", M,
                N);
    return KT_OK;
}

/* Writes "y*S+r*D-P" with unit factors and a zero offset left out. */
void
kt__op_window_index(char *buf, size_t n, const char *out, int64_t stride,
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
int64_t
kt__op_out_size(int64_t in, int64_t pad, int64_t dil, int64_t win,
                int64_t stride)
{
    int64_t num = in + 2 * pad - dil * (win - 1) - 1;

    return num < 0 ? 0 : num / stride + 1;
}

static int conv2d(struct kt_op_def *d, const struct kt_conv2d_params *p,
                  int64_t out_h, int64_t out_w, int pixels_apart);

int
kt_op_conv2d(struct kt_op_def *d, const struct kt_conv2d_params *p)
{
    return conv2d(d, p, 0, 0, 0);
}

int
kt_op_conv2d_grid(struct kt_op_def *d, const struct kt_conv2d_params *p)
{
    return conv2d(d, p, 0, 0, 1);
}

int
kt_op_conv2d_sized(struct kt_op_def *d, const struct kt_conv2d_params *p,
                   int64_t out_h, int64_t out_w)
{
    return conv2d(d, p, out_h, out_w, 0);
}

/* A pointwise convolution (1x1 window, stride 1, no padding) is a matrix
 * product over the image's H*W pixels, which lie contiguous in NCHW: its
 * definition indexes them as one axis.  With y and x apart the search
 * vectorized either the 56-wide rows (3.5 vectors) or the channels (and
 * then transposed its tile out): ResNet-50's 64 -> 256 expansion at 56x56
 * reached 0.93x oneDNN on 1 thread, the same product as a matmul 1.02x
 * (docs/performance.md).  The buffers are the same floats. */
static int
put_pointwise(struct kt_op_def *d, const struct kt_conv2d_params *p,
              const char *res)
{
    int64_t G = p->groups, P = p->H * p->W;

    if (G == 1) {
        kt__op_add_shape(d, "I", 3, (int64_t[]){p->N, p->C, P});
        kt__op_add_weight(d, "W", 2, (int64_t[]){p->K, p->C});
        kt__op_add_shape(d, res, 3, (int64_t[]){p->N, p->K, P});
        if (p->epilogue & KT_EPI_BIAS)
            kt__op_add_shape(d, "B", 1, (int64_t[]){p->K});
        kt__op_put(d, "%s[n,f,p] += I[n,c,p] * W[f,c]", res);
        if (p->epilogue)
            kt__op_put_epilogue(d, p->epilogue, "n,f,p", "f");
        return KT_OK;
    }
    kt__op_add_shape(d, "I", 4, (int64_t[]){p->N, G, p->C / G, P});
    kt__op_add_weight(d, "W", 3, (int64_t[]){G, p->K / G, p->C / G});
    kt__op_add_shape(d, res, 4, (int64_t[]){p->N, G, p->K / G, P});
    if (p->epilogue & KT_EPI_BIAS)
        kt__op_add_shape(d, "B", 2, (int64_t[]){G, p->K / G});
    kt__op_put(d, "%s[n,g,f,p] += I[n,g,c,p] * W[g,f,c]", res);
    if (p->epilogue)
        kt__op_put_epilogue(d, p->epilogue, "n,g,f,p", "g,f");
    return KT_OK;
}

static int
conv2d(struct kt_op_def *d, const struct kt_conv2d_params *p, int64_t out_h,
       int64_t out_w, int pixels_apart)
{
    char iy[96], ix[96];
    int64_t G = p->groups, OH, OW;
    const char *res;

    if (p->N <= 0 || p->C <= 0 || p->H <= 0 || p->W <= 0 || p->K <= 0 ||
        p->R <= 0 || p->S <= 0)
        return kt__op_bad(d,
                          "conv2d: sizes must be positive (N=%lld C=%lld "
                          "H=%lld "
                          "W=%lld K=%lld R=%lld S=%lld)",
                          (long long)p->N, (long long)p->C, (long long)p->H,
                          (long long)p->W, (long long)p->K, (long long)p->R,
                          (long long)p->S);
    if (p->stride_h <= 0 || p->stride_w <= 0 || p->dilation_h <= 0 ||
        p->dilation_w <= 0 || p->pad_h < 0 || p->pad_w < 0 || G <= 0)
        return kt__op_bad(d, "conv2d: strides, dilations and groups must be "
                             "positive and paddings non-negative");
    if (p->C % G != 0 || p->K % G != 0)
        return kt__op_bad(d,
                          "conv2d: groups=%lld must divide C=%lld and K=%lld",
                          (long long)G, (long long)p->C, (long long)p->K);
    if (p->epilogue & ~(KT_EPI_BIAS | KT_EPI_RELU))
        return kt__op_bad(d, "conv2d: unknown epilogue bits 0x%x", p->epilogue);
    OH = kt__op_out_size(p->H, p->pad_h, p->dilation_h, p->R, p->stride_h);
    OW = kt__op_out_size(p->W, p->pad_w, p->dilation_w, p->S, p->stride_w);
    if (out_h > 0 || out_w > 0) {
        OH = out_h;
        OW = out_w;
        if ((OH - 1) * p->stride_h - p->pad_h > p->H - 1 ||
            (OW - 1) * p->stride_w - p->pad_w > p->W - 1)
            OH = 0;
    }
    if (OH <= 0 || OW <= 0)
        return kt__op_bad(d,
                          "conv2d: the %lldx%lld window (dilation %lldx%lld) "
                          "does not fit the %lldx%lld input padded by "
                          "%lldx%lld",
                          (long long)p->R, (long long)p->S,
                          (long long)p->dilation_h, (long long)p->dilation_w,
                          (long long)p->H, (long long)p->W, (long long)p->pad_h,
                          (long long)p->pad_w);
    memset(d, 0, sizeof(*d));
    kt__op_set_name(d,
                    "conv2d_n%lld_c%lld_h%lld_w%lld_k%lld_r%lld_s%lld_st%s_"
                    "p%s_d%s_g%lld%s%s",
                    (long long)p->N, (long long)p->C, (long long)p->H,
                    (long long)p->W, (long long)p->K, (long long)p->R,
                    (long long)p->S, hw_label(p->stride_h, p->stride_w).s,
                    hw_label(p->pad_h, p->pad_w).s,
                    hw_label(p->dilation_h, p->dilation_w).s, (long long)G,
                    p->epilogue & KT_EPI_BIAS ? "_bias" : "",
                    p->epilogue & KT_EPI_RELU ? "_relu" : "");
    kt__op_window_index(iy, sizeof(iy), "y", p->stride_h, "r", p->dilation_h,
                        p->pad_h);
    kt__op_window_index(ix, sizeof(ix), "x", p->stride_w, "s", p->dilation_w,
                        p->pad_w);
    res = p->epilogue ? "T" : "O";
    if (!pixels_apart && p->R == 1 && p->S == 1 && p->stride_h == 1 &&
        p->stride_w == 1 && p->pad_h == 0 && p->pad_w == 0 && OH == p->H &&
        OW == p->W)
        return put_pointwise(d, p, res);
    if (G == 1) {
        kt__op_add_shape(d, "I", 4, (int64_t[]){p->N, p->C, p->H, p->W});
        kt__op_add_weight(d, "W", 4, (int64_t[]){p->K, p->C, p->R, p->S});
        kt__op_add_shape(d, res, 4, (int64_t[]){p->N, p->K, OH, OW});
        if (p->epilogue & KT_EPI_BIAS)
            kt__op_add_shape(d, "B", 1, (int64_t[]){p->K});
        kt__op_put(d, "%s[n,f,y,x] += I[n,c,%s,%s] * W[f,c,r,s]", res, iy, ix);
        if (p->epilogue)
            kt__op_put_epilogue(d, p->epilogue, "n,f,y,x", "f");
        return KT_OK;
    }
    kt__op_add_shape(d, "I", 5, (int64_t[]){p->N, G, p->C / G, p->H, p->W});
    kt__op_add_weight(d, "W", 5,
                      (int64_t[]){G, p->K / G, p->C / G, p->R, p->S});
    kt__op_add_shape(d, res, 5, (int64_t[]){p->N, G, p->K / G, OH, OW});
    if (p->epilogue & KT_EPI_BIAS)
        kt__op_add_shape(d, "B", 2, (int64_t[]){G, p->K / G});
    kt__op_put(d, "%s[n,g,f,y,x] += I[n,g,c,%s,%s] * W[g,f,c,r,s]", res, iy,
               ix);
    if (p->epilogue)
        kt__op_put_epilogue(d, p->epilogue, "n,g,f,y,x", "g,f");
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
        return kt__op_bad(d, "conv2d_transpose: sizes, strides and the output "
                             "size "
                             "must be positive");
    if (p->pad_h < 0 || p->pad_w < 0 || p->pad_h >= p->R || p->pad_w >= p->S)
        return kt__op_bad(d, "conv2d_transpose: pads must be in 0..kernel-1");
    conv_t_taps(p->R, p->stride_h, p->pad_h, ch, &qh);
    conv_t_taps(p->S, p->stride_w, p->pad_w, cw, &qw);
    oh = (p->out_h + p->stride_h - 1) / p->stride_h;
    ow = (p->out_w + p->stride_w - 1) / p->stride_w;
    memset(d, 0, sizeof(*d));
    kt__op_set_name(d,
                    "conv2d_transpose_n%lld_c%lld_h%lld_w%lld_k%lld_r%lld_s%"
                    "lld_"
                    "st%s_p%s",
                    (long long)p->N, (long long)p->C, (long long)p->H,
                    (long long)p->W, (long long)p->K, (long long)p->R,
                    (long long)p->S, hw_label(p->stride_h, p->stride_w).s,
                    hw_label(p->pad_h, p->pad_w).s);
    kt__op_add_shape(d, "I", 4, (int64_t[]){p->N, p->C, p->H, p->W});
    kt__op_add_shape(d, "W", 6,
                     (int64_t[]){p->C, p->K, qh, p->stride_h, qw, p->stride_w});
    kt__op_add_shape(d, "O", 6,
                     (int64_t[]){p->N, p->K, oh, p->stride_h, ow, p->stride_w});
    phase_index(iy, sizeof(iy), "y", *ch, "q");
    phase_index(ix, sizeof(ix), "x", *cw, "p");
    kt__op_put(d, "O[n,f,y,a,x,b] += I[n,c,%s,%s] * W[c,f,q,a,p,b]", iy, ix);
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
    kt__op_put(d, "\n%s", stages);
    for (; nextra > 0; nextra--, extra++)
        kt__op_add_shape(d, extra->name, extra->ndim, extra->dims);
    return KT_OK;
}
