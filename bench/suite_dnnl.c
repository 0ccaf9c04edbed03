/* suite_dnnl.c - the oneDNN baselines of the benchmark suite: what a user
 * of oneDNN 2.x's C API writes for each suite operator with plain row-major
 * / NCHW tensors (see suite.h). */
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/baseline.h"
#include "bench/suite.h"

struct suite_dnnl {
    const struct suite_op *op;
    int sgemm; /* 1: dnnl_sgemm calls, no primitive */
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    dnnl_primitive_t prim;
    int nargs;
    dnnl_exec_arg_t args[4];
    dnnl_memory_t mem[4];
};

#define DNNL_TRY(call)                                                         \
    do {                                                                       \
        dnnl_status_t s_ = (call);                                             \
        if (s_ != dnnl_success) {                                              \
            snprintf(err, errlen, "%s: oneDNN status %d", #call, (int)s_);     \
            goto fail;                                                         \
        }                                                                      \
    } while (0)

static int
is_matrix_product(const struct kt_layer *L)
{
    return L->op == KT_LAYER_MATMUL || L->op == KT_LAYER_DENSE ||
           L->op == KT_LAYER_BATCH_MATMUL;
}

/* A product whose second operand is a constant weight: kerntune may
 * store it in the layout its kernel reads, packed once outside the timing,
 * so oneDNN gets the same (a third variant, weights reordered once). */
static int
has_weights(const struct kt_layer *L)
{
    return L->op == KT_LAYER_DENSE || (L->op == KT_LAYER_MATMUL && L->const_b);
}

int
suite_dnnl_variants(const struct suite_op *op)
{
    switch (op->layer->op) {
    case KT_LAYER_MATMUL:
    case KT_LAYER_DENSE: return has_weights(op->layer) ? 3 : 2;
    case KT_LAYER_BATCH_MATMUL: return 2;
    case KT_LAYER_CONV2D:
    case KT_LAYER_MAXPOOL:
    case KT_LAYER_AVGPOOL:
    case KT_LAYER_GLOBAL_AVG_POOL:
    case KT_LAYER_SOFTMAX: return 1;
    default: return 0;
    }
}

/* Batch, M, N, K of a matrix product and whether its second operand is
 * stored [N, K] (dense weights, attention's K^T). */
static void
product_dims(const struct kt_layer *L, int64_t *b, int64_t *m, int64_t *n,
             int64_t *k, int *trans_b)
{
    *b = L->op == KT_LAYER_BATCH_MATMUL ? L->B : 1;
    *m = L->M;
    *n = L->N;
    *k = L->K;
    *trans_b = L->op == KT_LAYER_DENSE ||
               (L->op == KT_LAYER_BATCH_MATMUL && L->transpose_b);
}

static void
run_sgemm(const struct suite_dnnl *d)
{
    const struct suite_op *op = d->op;
    int64_t b, m, n, k, i;
    int tb;

    product_dims(op->layer, &b, &m, &n, &k, &tb);
    for (i = 0; i < b; i++)
        dnnl_sgemm('N', tb ? 'T' : 'N', m, n, k, 1.0f, op->x + i * m * k, k,
                   op->w + i * k * n, tb ? k : n, 0.0f, op->out + i * m * n, n);
    if (op->bias != NULL)
        kt_bench_epilogue(op->out, b * m, n, op->bias, 0, 0);
}

void
suite_dnnl_run(void *arg)
{
    struct suite_dnnl *d = arg;

    if (d->sgemm) {
        run_sgemm(d);
        return;
    }
    dnnl_primitive_execute(d->prim, d->stream, d->nargs, d->args);
    dnnl_stream_wait(d->stream);
}

static dnnl_status_t
add_arg(struct suite_dnnl *d, int arg, const dnnl_memory_desc_t *md,
        const void *p)
{
    dnnl_memory_t m;
    dnnl_status_t s = dnnl_memory_create(&m, md, d->eng, (void *)p);

    if (s == dnnl_success) {
        d->mem[d->nargs] = m;
        d->args[d->nargs].arg = arg;
        d->args[d->nargs].memory = m;
        d->nargs++;
    }
    return s;
}

static dnnl_status_t
md_plain(dnnl_memory_desc_t *md, int nd, const int64_t *dims,
         dnnl_format_tag_t tag)
{
    dnnl_dims_t dd;
    int i;

    for (i = 0; i < nd; i++)
        dd[i] = dims[i];
    return dnnl_memory_desc_init_by_tag(md, nd, dd, dnnl_f32, tag);
}

/* Reorders the user's weights (user_md at p) once into the layout the
 * primitive wants and passes those as DNNL_ARG_WEIGHTS. */
static int
add_reordered_weights(struct suite_dnnl *d, dnnl_primitive_desc_t pd,
                      const dnnl_memory_desc_t *user_md, const void *p,
                      char *err, size_t errlen)
{
    const dnnl_memory_desc_t
        *want = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t r = NULL;
    dnnl_memory_t from = NULL, to = NULL;
    dnnl_exec_arg_t a[2];
    int rc = -1;

    DNNL_TRY(dnnl_memory_create(&from, user_md, d->eng, (void *)p));
    DNNL_TRY(dnnl_memory_create(&to, want, d->eng, DNNL_MEMORY_ALLOCATE));
    DNNL_TRY(dnnl_reorder_primitive_desc_create(&rpd, user_md, d->eng, want,
                                                d->eng, NULL));
    DNNL_TRY(dnnl_primitive_create(&r, rpd));
    a[0].arg = DNNL_ARG_FROM;
    a[0].memory = from;
    a[1].arg = DNNL_ARG_TO;
    a[1].memory = to;
    DNNL_TRY(dnnl_primitive_execute(r, d->stream, 2, a));
    DNNL_TRY(dnnl_stream_wait(d->stream));
    d->mem[d->nargs] = to;
    d->args[d->nargs].arg = DNNL_ARG_WEIGHTS;
    d->args[d->nargs].memory = to;
    d->nargs++;
    to = NULL;
    rc = 0;
fail:
    dnnl_memory_destroy(to);
    dnnl_memory_destroy(from);
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
    return rc;
}

/* The convolution primitive with the bias and relu post-op, NCHW src and
 * dst, weights in the layout it picks (reordered once). */
static int
make_conv(struct suite_dnnl *d, const struct suite_op *op,
          dnnl_primitive_desc_t *pd, char *err, size_t errlen)
{
    struct kt_conv2d_params p;
    int64_t OH, OW, g;
    dnnl_memory_desc_t src, wany, wuser, bias, dst;
    dnnl_convolution_desc_t cd;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_dims_t strides, dil, pad;
    int rc = -1;

    suite_conv_params(op->layer, &p);
    g = p.groups;
    OH = (p.H + 2 * p.pad_h - p.dilation_h * (p.R - 1) - 1) / p.stride_h + 1;
    OW = (p.W + 2 * p.pad_w - p.dilation_w * (p.S - 1) - 1) / p.stride_w + 1;
    DNNL_TRY(md_plain(&src, 4, (int64_t[]){p.N, p.C, p.H, p.W}, dnnl_nchw));
    DNNL_TRY(md_plain(&dst, 4, (int64_t[]){p.N, p.K, OH, OW}, dnnl_nchw));
    DNNL_TRY(md_plain(&bias, 1, (int64_t[]){p.K}, dnnl_x));
    if (g == 1) {
        DNNL_TRY(
            md_plain(&wuser, 4, (int64_t[]){p.K, p.C, p.R, p.S}, dnnl_oihw));
        DNNL_TRY(md_plain(&wany, 4, (int64_t[]){p.K, p.C, p.R, p.S},
                          dnnl_format_tag_any));
    } else {
        int64_t wd[5] = {g, p.K / g, p.C / g, p.R, p.S};
        DNNL_TRY(md_plain(&wuser, 5, wd, dnnl_goihw));
        DNNL_TRY(md_plain(&wany, 5, wd, dnnl_format_tag_any));
    }
    strides[0] = p.stride_h, strides[1] = p.stride_w;
    dil[0] = p.dilation_h - 1, dil[1] = p.dilation_w - 1;
    pad[0] = p.pad_h, pad[1] = p.pad_w;
    DNNL_TRY(dnnl_dilated_convolution_forward_desc_init(&cd,
                                                        dnnl_forward_inference,
                                                        dnnl_convolution_direct,
                                                        &src, &wany,
                                                        op->bias ? &bias : NULL,
                                                        &dst, strides, dil, pad,
                                                        pad));
    DNNL_TRY(dnnl_primitive_attr_create(&attr));
    if (p.epilogue & KT_EPI_RELU) {
        DNNL_TRY(dnnl_post_ops_create(&po));
        DNNL_TRY(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f,
                                              0.0f));
        DNNL_TRY(dnnl_primitive_attr_set_post_ops(attr, po));
    }
    DNNL_TRY(dnnl_primitive_desc_create(pd, &cd, attr, d->eng, NULL));
    DNNL_TRY(add_arg(d, DNNL_ARG_SRC, &src, op->x));
    if (add_reordered_weights(d, *pd, &wuser, op->w, err, errlen) != 0)
        goto fail;
    if (op->bias)
        DNNL_TRY(add_arg(d, DNNL_ARG_BIAS, &bias, op->bias));
    DNNL_TRY(add_arg(d, DNNL_ARG_DST, &dst, op->out));
    rc = 0;
fail:
    dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* The matmul primitive on plain row-major tensors (dense weights [N, K]
 * and attention's K are read through strides, as stored), or with
 * reorder, the weights in the layout it picks (reordered once). */
static int
make_matmul(struct suite_dnnl *d, const struct suite_op *op, int reorder,
            dnnl_primitive_desc_t *pd, char *err, size_t errlen)
{
    int64_t b, m, n, k;
    int tb;
    dnnl_memory_desc_t src, wei, wany, bias, dst;
    dnnl_matmul_desc_t md;
    dnnl_dims_t wd, ws;

    product_dims(op->layer, &b, &m, &n, &k, &tb);
    DNNL_TRY(md_plain(&src, 3, (int64_t[]){b, m, k}, dnnl_abc));
    DNNL_TRY(md_plain(&dst, 3, (int64_t[]){b, m, n}, dnnl_abc));
    DNNL_TRY(md_plain(&bias, 3, (int64_t[]){1, 1, n}, dnnl_abc));
    wd[0] = b, wd[1] = k, wd[2] = n;
    ws[0] = k * n, ws[1] = tb ? 1 : n, ws[2] = tb ? k : 1;
    DNNL_TRY(dnnl_memory_desc_init_by_strides(&wei, 3, wd, dnnl_f32, ws));
    DNNL_TRY(md_plain(&wany, 3, (int64_t[]){b, k, n}, dnnl_format_tag_any));
    DNNL_TRY(dnnl_matmul_desc_init(&md, &src, reorder ? &wany : &wei,
                                   op->bias ? &bias : NULL, &dst));
    DNNL_TRY(dnnl_primitive_desc_create(pd, &md, NULL, d->eng, NULL));
    DNNL_TRY(add_arg(d, DNNL_ARG_SRC, &src, op->x));
    if (reorder) {
        if (add_reordered_weights(d, *pd, &wei, op->w, err, errlen) != 0)
            return -1;
    } else {
        DNNL_TRY(add_arg(d, DNNL_ARG_WEIGHTS, &wei, op->w));
    }
    if (op->bias)
        DNNL_TRY(add_arg(d, DNNL_ARG_BIAS, &bias, op->bias));
    DNNL_TRY(add_arg(d, DNNL_ARG_DST, &dst, op->out));
    return 0;
fail:
    return -1;
}

/* Pooling (max with padding excluded; global average as a full window) and
 * softmax over the rows. */
static int
make_pool_softmax(struct suite_dnnl *d, const struct suite_op *op,
                  dnnl_primitive_desc_t *pd, char *err, size_t errlen)
{
    const struct kt_layer *L = op->layer;
    dnnl_memory_desc_t src, dst;
    dnnl_dims_t strides, kernel, pad;

    if (L->op == KT_LAYER_SOFTMAX) {
        dnnl_softmax_desc_t sd;
        DNNL_TRY(md_plain(&src, 2, (int64_t[]){L->rows, L->cols}, dnnl_nc));
        DNNL_TRY(dnnl_softmax_forward_desc_init(&sd, dnnl_forward_inference,
                                                &src, 1));
        DNNL_TRY(dnnl_primitive_desc_create(pd, &sd, NULL, d->eng, NULL));
        dst = src;
    } else {
        dnnl_pooling_desc_t pl;
        int global = L->op == KT_LAYER_GLOBAL_AVG_POOL;
        int64_t kk = global ? L->H : L->kernel, st = global ? 1 : L->stride[0];
        int64_t pp = global ? 0 : L->pad[0];
        int64_t OH = (L->H + 2 * pp - kk) / st + 1,
                OW = (L->W + 2 * pp - (global ? L->W : kk)) / st + 1;
        DNNL_TRY(
            md_plain(&src, 4, (int64_t[]){L->N, L->C, L->H, L->W}, dnnl_nchw));
        DNNL_TRY(md_plain(&dst, 4, (int64_t[]){L->N, L->C, OH, OW}, dnnl_nchw));
        strides[0] = strides[1] = st;
        kernel[0] = kk, kernel[1] = global ? L->W : kk;
        pad[0] = pad[1] = pp;
        DNNL_TRY(
            dnnl_pooling_forward_desc_init(&pl, dnnl_forward_inference,
                                           L->op == KT_LAYER_MAXPOOL
                                               ? dnnl_pooling_max
                                               : dnnl_pooling_avg_include_padding,
                                           &src, &dst, strides, kernel, pad,
                                           pad));
        DNNL_TRY(dnnl_primitive_desc_create(pd, &pl, NULL, d->eng, NULL));
    }
    DNNL_TRY(add_arg(d, DNNL_ARG_SRC, &src, op->x));
    DNNL_TRY(add_arg(d, DNNL_ARG_DST, &dst, op->out));
    return 0;
fail:
    return -1;
}

struct suite_dnnl *
suite_dnnl_new(const struct suite_op *op, int variant, char *name,
               size_t namelen, char *err, size_t errlen)
{
    struct suite_dnnl *d = calloc(1, sizeof(*d));
    dnnl_primitive_desc_t pd = NULL;
    const char *impl = "?";
    int rc;

    d->op = op;
    if (is_matrix_product(op->layer) && variant == 0) {
        d->sgemm = 1;
        snprintf(name, namelen, "dnnl_sgemm");
        return d;
    }
    DNNL_TRY(dnnl_engine_create(&d->eng, dnnl_cpu, 0));
    DNNL_TRY(dnnl_stream_create(&d->stream, d->eng, dnnl_stream_default_flags));
    if (op->layer->op == KT_LAYER_CONV2D)
        rc = make_conv(d, op, &pd, err, errlen);
    else if (is_matrix_product(op->layer))
        rc = make_matmul(d, op, variant == 2, &pd, err, errlen);
    else
        rc = make_pool_softmax(d, op, &pd, err, errlen);
    if (rc != 0)
        goto fail;
    DNNL_TRY(dnnl_primitive_create(&d->prim, pd));
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(name, namelen, "%s %s",
             op->layer->op == KT_LAYER_CONV2D               ? "conv"
             : is_matrix_product(op->layer) && variant == 2 ? "matmul reordered"
             : is_matrix_product(op->layer)                 ? "matmul"
             : op->layer->op == KT_LAYER_SOFTMAX            ? "softmax"
                                                            : "pool",
             impl);
    dnnl_primitive_desc_destroy(pd);
    return d;
fail:
    dnnl_primitive_desc_destroy(pd);
    suite_dnnl_free(d);
    return NULL;
}

void
suite_dnnl_free(struct suite_dnnl *d)
{
    int i;

    if (d == NULL)
        return;
    for (i = 0; i < d->nargs; i++)
        dnnl_memory_destroy(d->mem[i]);
    dnnl_primitive_destroy(d->prim);
    if (d->stream)
        dnnl_stream_destroy(d->stream);
    if (d->eng)
        dnnl_engine_destroy(d->eng);
    free(d);
}
