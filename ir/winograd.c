/* winograd.c - convolutions by Winograd's minimal filtering along the rows
 * (docs/compute.md, "Winograd convolutions"): the transform matrices of
 * F(m, r) built by Cook-Toom, the row tile a convolution takes, and the
 * definition kt_op_conv2d_winograd writes.  m output rows of an r-row
 * window cost m + r - 1 products per column and tap where the direct form
 * costs m * r, and every read stays a contiguous row, as in NCHW. */
#include "ir/ops_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The finite interpolation points, in the order tiles use them: small
 * magnitudes first keep the transforms' entries small (rounding). */
static const double points[KT_WINO_MAX_ALPHA - 1] = {0,  1,   -1,  2,
                                                     -2, 0.5, -0.5};

/* Inverts the n x n matrix a (row-major) into inv; -1 when singular. */
static int
invert(int n, const double *a, double *inv)
{
    double w[KT_WINO_MAX_ALPHA][2 * KT_WINO_MAX_ALPHA];
    int i, j, k, piv;

    for (i = 0; i < n; i++)
        for (j = 0; j < 2 * n; j++)
            w[i][j] = j < n ? a[i * n + j] : (j - n == i);
    for (k = 0; k < n; k++) {
        piv = k;
        for (i = k + 1; i < n; i++)
            if (fabs(w[i][k]) > fabs(w[piv][k]))
                piv = i;
        if (fabs(w[piv][k]) < 1e-12)
            return -1;
        for (j = 0; j < 2 * n; j++) {
            double t = w[k][j];
            w[k][j] = w[piv][j];
            w[piv][j] = t;
        }
        for (i = 0; i < n; i++) {
            double f = w[i][k] / w[k][k];
            if (i == k)
                continue;
            for (j = 0; j < 2 * n; j++)
                w[i][j] -= f * w[k][j];
        }
    }
    for (i = 0; i < n; i++)
        for (j = 0; j < n; j++)
            inv[i * n + j] = w[i][n + j] / w[i][i];
    return 0;
}

/* Row t of the evaluation of a polynomial with n coefficients at point t
 * (the last row: at infinity, its leading coefficient). */
static double
eval_entry(int alpha, int t, int j, int n)
{
    if (t == alpha - 1)
        return j == n - 1;
    return pow(points[t], j);
}

/* Linear convolution c = u * g (lengths m and r) by Toom-Cook is
 * c = C [(E_m u) . (E_r g)], with E_n the evaluation at the alpha points
 * and C the interpolation, the inverse of E_alpha.  The correlation
 * y_i = sum_j g_j d_(i+j) is its transpose in u and c:
 * y = E_m^T [(E_r g) . (C^T d)], so AT = E_m^T, G = E_r, BT = C^T.  Each
 * row of BT is scaled to whole numbers (its G row divided to match), so
 * the transform the kernel computes on activations rounds the least. */
int
kt_winograd_matrices(int m, int r, struct kt_winograd *w)
{
    double e[KT_WINO_MAX_ALPHA * KT_WINO_MAX_ALPHA];
    double c[KT_WINO_MAX_ALPHA * KT_WINO_MAX_ALPHA];
    int alpha = m + r - 1, t, j, s;

    memset(w, 0, sizeof(*w));
    if (m < 1 || r < 1 || alpha > KT_WINO_MAX_ALPHA)
        return KT_EINVAL;
    w->m = m;
    w->r = r;
    w->alpha = alpha;
    for (t = 0; t < alpha; t++)
        for (j = 0; j < alpha; j++)
            e[t * alpha + j] = eval_entry(alpha, t, j, alpha);
    if (invert(alpha, e, c) != 0)
        return KT_EINVAL;
    for (t = 0; t < alpha; t++) {
        for (j = 0; j < m; j++)
            w->at[j][t] = eval_entry(alpha, t, j, m);
        for (j = 0; j < r; j++)
            w->g[t][j] = eval_entry(alpha, t, j, r);
        for (j = 0; j < alpha; j++)
            w->bt[t][j] = c[j * alpha + t];
    }
    for (t = 0; t < alpha; t++) {
        for (s = 1; s <= 720; s++) {
            for (j = 0; j < alpha; j++) {
                double v = w->bt[t][j] * s;
                if (fabs(v - nearbyint(v)) > 1e-9)
                    break;
            }
            if (j == alpha)
                break;
        }
        if (s > 720)
            continue;
        for (j = 0; j < alpha; j++)
            w->bt[t][j] = nearbyint(w->bt[t][j] * s) + 0.0; /* no -0 */
        for (j = 0; j < r; j++)
            w->g[t][j] /= s;
    }
    return KT_OK;
}

int
kt_winograd_tile(const struct kt_conv2d_params *p)
{
    int64_t OH = kt__op_out_size(p->H, p->pad_h, p->dilation_h, p->R,
                                 p->stride_h);
    static const int tiles[] = {4, 2};
    size_t i;

    if (p->groups != 1 || p->stride_h != 1 || p->dilation_h != 1 || p->R < 2 ||
        OH <= 0 ||
        kt__op_out_size(p->W, p->pad_w, p->dilation_w, p->S, p->stride_w) <= 0)
        return 0;
    for (i = 0; i < sizeof(tiles) / sizeof(tiles[0]); i++)
        if (OH % tiles[i] == 0 && tiles[i] + p->R - 1 <= KT_WINO_MAX_ALPHA &&
            tiles[i] <= OH)
            return tiles[i];
    return 0;
}

/* The FLOPs of p's Winograd form with row tile m over those of its direct
 * form: the input transform (alpha x alpha per padded input column of a
 * row tile and channel), the products (alpha x S per output column of a
 * row tile, channel pair) and the output transform (m x alpha per output
 * column of a row tile and output channel). */
static double
winograd_work(const struct kt_conv2d_params *p, int m)
{
    double OH = (double)kt__op_out_size(p->H, p->pad_h, 1, p->R, 1);
    double OW = (double)kt__op_out_size(p->W, p->pad_w, p->dilation_w, p->S,
                                        p->stride_w);
    double a = m + (double)p->R - 1, tiles = (double)p->N * OH / m;
    double XW = (OW - 1) * (double)p->stride_w +
                (double)(p->S - 1) * (double)p->dilation_w + 1;
    double direct = (double)p->N * OH * OW * (double)p->K * (double)p->C *
                    (double)(p->R * p->S);
    double wino = tiles * (double)p->C * XW * a * a +
                  tiles * OW * (double)p->K * (double)p->C * a * (double)p->S +
                  tiles * OW * (double)p->K * m * a;

    return wino / direct;
}

int
kt_winograd_choose(const struct kt_conv2d_params *p)
{
    int64_t OH = kt__op_out_size(p->H, p->pad_h, 1, p->R, 1);
    int64_t OW = kt__op_out_size(p->W, p->pad_w, p->dilation_w, p->S,
                                 p->stride_w);
    double direct_mflop = 2e-6 * (double)(p->N * p->K * p->C * p->R * p->S) *
                          (double)(OH * OW);
    int m = kt_winograd_tile(p);

    if (m == 0 || direct_mflop < KT_WINO_MIN_MFLOP)
        return 0;
    return winograd_work(p, m) <= KT_WINO_MAX_WORK ? m : 0;
}

int
kt_op_conv2d_winograd(struct kt_op_def *d, const struct kt_conv2d_params *p,
                      int m)
{
    int64_t OH, OW, XW, alpha = m + p->R - 1;
    const char *res = p->epilogue ? "T" : "O";
    char name[sizeof(d->name)], ix[96];
    int rc;

    /* the direct form checks the parameters and names the layer */
    if ((rc = kt_op_conv2d(d, p)) != KT_OK)
        return rc;
    OH = kt__op_out_size(p->H, p->pad_h, p->dilation_h, p->R, p->stride_h);
    OW = kt__op_out_size(p->W, p->pad_w, p->dilation_w, p->S, p->stride_w);
    if (p->groups != 1 || p->stride_h != 1 || p->dilation_h != 1 || m < 2 ||
        alpha > KT_WINO_MAX_ALPHA || OH % m != 0)
        return kt__op_bad(d,
                          "conv2d_winograd: needs one group, stride and "
                          "dilation 1 along the rows, a row tile m >= 2 that "
                          "divides the %lld output rows and m + R - 1 <= %d "
                          "(m=%d R=%lld)",
                          (long long)OH, KT_WINO_MAX_ALPHA, m, (long long)p->R);
    snprintf(name, sizeof(name), "%s", d->name);
    memset(d, 0, sizeof(*d));
    kt__op_set_name(d, "%s_wino%d", name, m);
    d->wino_m = m;
    d->wino_r = (int)p->R;
    /* the padded input columns the taps of one output row read */
    XW = (OW - 1) * p->stride_w + (p->S - 1) * p->dilation_w + 1;
    kt__op_add_shape(d, "I", 4, (int64_t[]){p->N, p->C, p->H, p->W});
    kt__op_add_weight(d, "U", 4, (int64_t[]){p->K, p->C, alpha, p->S});
    /* BT and AT are constants too, but a few dozen floats: no schedule
     * gains by rewriting their layout, and the search would try */
    kt__op_add_shape(d, "BT", 2, (int64_t[]){alpha, alpha});
    kt__op_add_shape(d, "AT", 2, (int64_t[]){m, alpha});
    kt__op_add_shape(d, res, 5, (int64_t[]){p->N, p->K, OH / m, m, OW});
    if (p->epilogue & KT_EPI_BIAS)
        kt__op_add_shape(d, "B", 1, (int64_t[]){p->K});
    kt__op_put(d,
               "V[n,c,t,e,x] += I[n,c,t*%d+a-%lld,x-%lld] * BT[e,a] "
               "where t:%lld, x:%lld\n",
               m, (long long)p->pad_h, (long long)p->pad_w, (long long)(OH / m),
               (long long)XW);
    kt__op_window_index(ix, sizeof(ix), "x", p->stride_w, "s", p->dilation_w,
                        0);
    kt__op_put(d, "M[n,f,t,e,x] += U[f,c,e,s] * V[n,c,t,e,%s] where x:%lld\n",
               ix, (long long)OW);
    kt__op_put(d, "%s[n,f,t,i,x] += M[n,f,t,e,x] * AT[i,e]", res);
    if (p->epilogue)
        kt__op_put_epilogue(d, p->epilogue, "n,f,t,i,x", "f");
    return KT_OK;
}

void
kt_winograd_weights(const struct kt_winograd *w, int64_t K, int64_t C,
                    int64_t S, const float *W, float *U)
{
    int64_t f, c, e, s, j;

    for (f = 0; f < K; f++)
        for (c = 0; c < C; c++)
            for (e = 0; e < w->alpha; e++)
                for (s = 0; s < S; s++) {
                    double acc = 0;
                    for (j = 0; j < w->r; j++)
                        acc += w->g[e][j] * W[((f * C + c) * w->r + j) * S + s];
                    U[((f * C + c) * w->alpha + e) * S + s] = (float)acc;
                }
}
