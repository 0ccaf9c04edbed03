/* test_ops.c - the operator library: FLOPs against hand formulas, the
 * no-unguarded-out-of-bounds property after padding, print/parse round
 * trips, parameter errors, and grouped convolutions against naive loops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "tests/support/ktt.h"

enum op_kind { DENSE, MATMUL, BMM, CONV, POOL, GAP, ELEM, SOFTMAX };

struct op_case {
    enum op_kind kind;
    int64_t a, b, c, d; /* sizes, meaning depends on kind */
    int flag;           /* epilogue / transpose / is_max */
    const char *elem;   /* elementwise kind */
    struct kt_conv2d_params conv;
    double flops; /* hand formula */
};

#define CONVP(n, c, h, w, k, r, s, st, p, dl, g, epi)                          \
    {                                                                          \
        n, c, h, w, k, r, s, st, st, p, p, dl, dl, g, epi                      \
    }

static int64_t
osz(int64_t in, int64_t pad, int64_t dil, int64_t win, int64_t stride)
{
    return (in + 2 * pad - dil * (win - 1) - 1) / stride + 1;
}

static double
conv_flops(const struct kt_conv2d_params *p)
{
    double out = (double)p->N * (double)p->K *
                 (double)osz(p->H, p->pad_h, p->dilation_h, p->R, p->stride_h) *
                 (double)osz(p->W, p->pad_w, p->dilation_w, p->S, p->stride_w);
    int epi = ((p->epilogue & KT_EPI_BIAS) != 0) +
              ((p->epilogue & KT_EPI_RELU) != 0);

    return 2.0 * out * (double)(p->C / p->groups) * (double)(p->R * p->S) +
           epi * out;
}

static struct op_case cases[] = {
    {DENSE, 64, 32, 16, 0, 0, NULL, {0}, 2.0 * 64 * 32 * 16},
    {DENSE, 64, 32, 16, 0, KT_EPI_BIAS, NULL, {0}, 2.0 * 64 * 32 * 16 + 64 * 32},
    {DENSE, 64, 32, 16, 0, KT_EPI_RELU, NULL, {0}, 2.0 * 64 * 32 * 16 + 64 * 32},
    {DENSE,
     7,
     5,
     3,
     0,
     KT_EPI_BIAS | KT_EPI_RELU,
     NULL,
     {0},
     2.0 * 7 * 5 * 3 + 2 * 7 * 5},
    {MATMUL, 1024, 1024, 1024, 0, 0, NULL, {0}, 2.0 * 1024 * 1024 * 1024},
    {MATMUL, 40, 6625, 120, 0, 1, NULL, {0}, 2.0 * 40 * 6625 * 120},
    {BMM, 4, 8, 16, 32, 0, NULL, {0}, 2.0 * 4 * 8 * 16 * 32},
    {BMM, 4, 8, 16, 32, 1, NULL, {0}, 2.0 * 4 * 8 * 16 * 32},
    {CONV, 0, 0, 0, 0, 0, NULL, CONVP(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 0),
     0},
    {CONV, 0, 0, 0, 0, 0, NULL, CONVP(1, 3, 224, 224, 64, 7, 7, 2, 3, 1, 1, 3),
     0},
    {CONV, 0, 0, 0, 0, 0, NULL, CONVP(2, 8, 9, 9, 4, 3, 3, 2, 0, 2, 1, 1), 0},
    {CONV, 0, 0, 0, 0, 0, NULL, CONVP(1, 32, 28, 28, 32, 3, 3, 1, 1, 1, 32, 3),
     0},
    {CONV, 0, 0, 0, 0, 0, NULL, CONVP(1, 8, 10, 10, 16, 3, 3, 2, 2, 2, 4, 0), 0},
    {CONV, 0, 0, 0, 0, 0, NULL, CONVP(1, 16, 14, 14, 8, 1, 1, 1, 0, 1, 1, 2), 0},
    {POOL, 1, 64, 112, 112, 1, NULL, {0}, 0},
    {POOL, 1, 64, 112, 112, 0, NULL, {0}, 0},
    {GAP, 1, 512, 7, 7, 0, NULL, {0}, 2.0 * 512 * 49},
    {ELEM, 1, 16, 8, 8, 0, "add", {0}, 1.0 * 16 * 64},
    {ELEM, 1, 16, 8, 8, 0, "mul", {0}, 1.0 * 16 * 64},
    {ELEM, 1, 16, 8, 8, 0, "relu", {0}, 1.0 * 16 * 64},
    {ELEM, 1, 16, 8, 8, 0, "hardswish", {0}, 5.0 * 16 * 64},
    {ELEM, 1, 16, 8, 8, 0, "sigmoid", {0}, 1.0 * 16 * 64},
    {SOFTMAX, 12, 100, 0, 0, 0, NULL, {0}, 5.0 * 12 * 100},
};

/* Pool cases: kernel 3, stride 2, pad 1 (ResNet's stem pool). */
static double
pool_flops(const struct op_case *c)
{
    int64_t o = osz(c->c, 1, 1, 3, 2);

    return (c->flag ? 1.0 : 2.0) * (double)(c->a * c->b * o * o * 9);
}

static int
make_op(const struct op_case *c, struct kt_op_def *od)
{
    switch (c->kind) {
    case DENSE: return kt_op_dense(od, c->a, c->b, c->c, c->flag);
    case MATMUL:
        return c->flag ? kt_op_matmul_const_b(od, c->a, c->b, c->c)
                       : kt_op_matmul(od, c->a, c->b, c->c);
    case BMM: return kt_op_batch_matmul(od, c->a, c->b, c->c, c->d, c->flag);
    case CONV: return kt_op_conv2d(od, &c->conv);
    case POOL:
        return kt_op_pool2d(od, c->flag, c->a, c->b, c->c, c->d, 3, 2, 1);
    case GAP: return kt_op_global_avg_pool(od, c->a, c->b, c->c, c->d);
    case ELEM: return kt_op_elementwise(od, c->elem, c->a, c->b, c->c, c->d);
    case SOFTMAX: return kt_op_softmax(od, c->a, c->b);
    }
    return KT_EINVAL;
}

static struct kt_dag *
must_build(const struct kt_op_def *od)
{
    struct kt_dag *d = NULL;
    char err[256] = "";

    if (kt_op_build(od, &d, err, sizeof(err)) != KT_OK)
        fail_msg("build of %s failed: %s\n%s", od->name, err, od->text);
    return d;
}

/* Fails when an unguarded load of stage s can leave its tensor. */
static void
check_loads(const struct kt_dag *d, const struct kt_stage *s,
            const struct kt_expr *e)
{
    const struct kt_tensor *t;
    int64_t lo, hi, v;
    int k, i;

    if (e == NULL)
        return;
    if (e->op == KT_X_LOAD && !e->guarded) {
        t = &d->tensors[e->src];
        assert_int_equal(e->ndim, t->ndim);
        for (k = 0; k < e->ndim; k++) {
            lo = hi = e->idx[k].c;
            for (i = 0; i < e->idx[k].n; i++) {
                v = e->idx[k].k[i] * (s->axes[e->idx[k].var[i]].extent - 1);
                if (v < 0)
                    lo += v;
                else
                    hi += v;
            }
            if (lo < 0 || hi >= t->shape[k])
                fail_msg("stage %s reads %s dim %d over [%lld, %lld], shape "
                         "%lld",
                         s->name, t->name, k, (long long)lo, (long long)hi,
                         (long long)t->shape[k]);
        }
    }
    check_loads(d, s, e->a);
    check_loads(d, s, e->b);
}

static void
test_ops_flops_bounds_roundtrip(void **state)
{
    struct kt_shape sh[KT_MAX_TENSORS];
    int weight[KT_MAX_TENSORS];
    struct kt_op_def od;
    struct kt_dag *d, *d2;
    struct kt_buf b;
    char err[256];
    double want;
    size_t i;
    int s, t, n, o;

    (void)state;
    for (i = 0; i < KT_ARRAY_LEN(cases); i++) {
        const struct op_case *c = &cases[i];

        assert_int_equal(make_op(c, &od), KT_OK);
        d = must_build(&od);
        want = c->kind == CONV   ? conv_flops(&c->conv)
               : c->kind == POOL ? pool_flops(c)
                                 : c->flops;
        if (d->flops != want)
            fail_msg("%s: flops %.0f, want %.0f", od.name, d->flops, want);
        for (s = 0; s < d->nstages; s++)
            check_loads(d, &d->stages[s], d->stages[s].body);
        o = kt_dag_find_tensor(d, "O");
        assert_true(o >= 0);
        assert_int_equal(d->tensors[o].kind, KT_TENSOR_OUTPUT);
        for (t = 0; t < d->ntensors; t++)
            if (t != o)
                assert_int_not_equal(d->tensors[t].kind, KT_TENSOR_OUTPUT);
        /* Round trip through the printed text with the input shapes. */
        kt_buf_init(&b);
        kt_dag_print(d, &b);
        n = 0;
        for (t = 0; t < d->ntensors; t++) {
            if (d->tensors[t].kind != KT_TENSOR_INPUT)
                continue;
            sh[n] = (struct kt_shape){"", d->tensors[t].ndim, {0}};
            memcpy(sh[n].name, d->tensors[t].name, sizeof(sh[n].name));
            memcpy(sh[n].dims, d->tensors[t].shape, sizeof(sh[n].dims));
            weight[n] = d->tensors[t].is_const;
            n++;
        }
        if (kt_dag_parse_weights(b.p, sh, weight, n, &d2, err, sizeof(err)) !=
            KT_OK)
            fail_msg("%s: reparse of\n%s failed: %s", od.name, b.p, err);
        assert_string_equal(d->key, d2->key);
        assert_int_equal(d->nstages, d2->nstages);
        kt_buf_free(&b);
        kt_dag_free(d2);
        kt_dag_free(d);
    }
}

struct bad_case {
    int rc;
    const char *msg;
};

static void
test_ops_bad_params(void **state)
{
    struct kt_conv2d_params p = CONVP(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 1, 0);
    struct kt_op_def od;

    (void)state;
    assert_int_equal(kt_op_elementwise(&od, "gelu", 1, 2, 3, 4), KT_EINVAL);
    assert_non_null(strstr(od.text, "unknown kind 'gelu'"));
    assert_string_equal(od.name, "invalid");
    assert_int_equal(kt_op_dense(&od, 0, 4, 4, 0), KT_EINVAL);
    assert_non_null(strstr(od.text, "M=0"));
    assert_int_equal(kt_op_dense(&od, 4, 4, 4, 8), KT_EINVAL);
    assert_int_equal(kt_op_matmul(&od, 4, -1, 4), KT_EINVAL);
    assert_int_equal(kt_op_batch_matmul(&od, 0, 4, 4, 4, 0), KT_EINVAL);
    assert_int_equal(kt_op_softmax(&od, 4, 0), KT_EINVAL);
    assert_int_equal(kt_op_global_avg_pool(&od, 1, 0, 4, 4), KT_EINVAL);
    assert_int_equal(kt_op_pool2d(&od, 1, 1, 1, 4, 4, 3, 1, 2), KT_EINVAL);
    assert_non_null(strstr(od.text, "padding 2 must be in 0..kernel/2"));
    assert_int_equal(kt_op_pool2d(&od, 1, 1, 1, 2, 2, 5, 1, 1), KT_EINVAL);
    assert_non_null(strstr(od.text, "does not fit"));
    assert_int_equal(kt_op_pool2d(&od, 1, 1, 1, 4, 4, 3, 0, 1), KT_EINVAL);
    p.groups = 3;
    assert_int_equal(kt_op_conv2d(&od, &p), KT_EINVAL);
    assert_non_null(strstr(od.text, "groups=3 must divide C=8 and K=8"));
    p.groups = 1;
    p.R = 11;
    assert_int_equal(kt_op_conv2d(&od, &p), KT_EINVAL);
    assert_non_null(strstr(od.text, "does not fit"));
    p.R = 3;
    p.stride_h = 0;
    assert_int_equal(kt_op_conv2d(&od, &p), KT_EINVAL);
    p.stride_h = 1;
    p.pad_w = -1;
    assert_int_equal(kt_op_conv2d(&od, &p), KT_EINVAL);
    p.pad_w = 1;
    p.epilogue = 4;
    assert_int_equal(kt_op_conv2d(&od, &p), KT_EINVAL);
    p.epilogue = 0;
    assert_int_equal(kt_op_conv2d(&od, &p), KT_OK);
}

/* Fails unless tensor name of d has the shape want[0..ndim). */
static void
assert_shape(const struct kt_dag *d, const char *name, int ndim,
             const int64_t *want)
{
    int t = kt_dag_find_tensor(d, name), i;

    assert_true(t >= 0);
    assert_int_equal(d->tensors[t].ndim, ndim);
    for (i = 0; i < ndim; i++)
        if (d->tensors[t].shape[i] != want[i])
            fail_msg("%s: dim %d is %lld, want %lld", name, i,
                     (long long)d->tensors[t].shape[i], (long long)want[i]);
}

/* Layers that differ only across (a 1x7 window padded [0, 3] and one not
 * padded) have different names: the task table shows them apart. */
static void
test_ops_names_tell_height_from_width(void **state)
{
    struct kt_conv2d_params p = CONVP(1, 8, 17, 17, 8, 1, 7, 1, 0, 1, 1, 0);
    struct kt_op_def od;

    (void)state;
    assert_int_equal(kt_op_conv2d(&od, &p), KT_OK);
    assert_string_equal(od.name, "conv2d_n1_c8_h17_w17_k8_r1_s7_st1_p0_d1_g1");
    p.pad_w = 3;
    p.stride_h = 2;
    p.dilation_w = 2;
    assert_int_equal(kt_op_conv2d(&od, &p), KT_OK);
    assert_string_equal(od.name,
                        "conv2d_n1_c8_h17_w17_k8_r1_s7_st2x1_p0x3_d1x2_g1");
}

static void
test_ops_layouts(void **state)
{
    struct kt_conv2d_params p = CONVP(1, 6, 5, 5, 4, 3, 3, 1, 1, 1, 2,
                                      KT_EPI_BIAS);
    struct kt_op_def od;
    struct kt_dag *d;

    (void)state;
    assert_int_equal(kt_op_conv2d(&od, &p), KT_OK);
    d = must_build(&od);
    assert_shape(d, "I", 5, (int64_t[]){1, 2, 3, 5, 5});
    assert_shape(d, "W", 5, (int64_t[]){2, 2, 3, 3, 3});
    assert_shape(d, "B", 2, (int64_t[]){2, 2});
    assert_true(kt_dag_find_tensor(d, "T") >= 0);
    assert_shape(d, "O", 5, (int64_t[]){1, 2, 2, 5, 5});
    kt_dag_free(d);
    /* pointwise: the pixels as one axis, with and without groups */
    p = (struct kt_conv2d_params)CONVP(1, 6, 5, 7, 4, 1, 1, 1, 0, 1, 1, 0);
    assert_int_equal(kt_op_conv2d(&od, &p), KT_OK);
    assert_string_equal(od.text, "O[n,f,p] += I[n,c,p] * W[f,c]");
    d = must_build(&od);
    assert_shape(d, "I", 3, (int64_t[]){1, 6, 35});
    assert_shape(d, "W", 2, (int64_t[]){4, 6});
    assert_shape(d, "O", 3, (int64_t[]){1, 4, 35});
    kt_dag_free(d);
    p.groups = 2;
    p.epilogue = KT_EPI_BIAS;
    assert_int_equal(kt_op_conv2d(&od, &p), KT_OK);
    assert_non_null(strstr(od.text, "T[n,g,f,p] += I[n,g,c,p] * W[g,f,c]"));
    /* a 1x1 window that strides or pads keeps y and x */
    p.groups = 1;
    p.stride_w = 2;
    assert_int_equal(kt_op_conv2d(&od, &p), KT_OK);
    assert_non_null(strstr(od.text, "W[f,c,r,s]"));
    p.stride_w = 1;
    p.pad_h = 1;
    assert_int_equal(kt_op_conv2d(&od, &p), KT_OK);
    assert_non_null(strstr(od.text, "W[f,c,r,s]"));
    assert_int_equal(kt_op_dense(&od, 3, 4, 5, 0), KT_OK);
    assert_string_equal(od.text, "O[i,j] += A[i,k] * W[j,k]");
    assert_int_equal(kt_op_batch_matmul(&od, 2, 3, 4, 5, 1), KT_OK);
    assert_string_equal(od.text, "O[b,i,j] += A[b,i,k] * B[b,j,k]");
}

/* Naive NCHW grouped convolution, written independently of the DAG. */
static void
test_ops_conv_against_naive(void **state)
{
    static const struct kt_conv2d_params ps[] = {
        CONVP(1, 4, 7, 6, 6, 3, 3, 1, 1, 1, 2, KT_EPI_BIAS | KT_EPI_RELU),
        CONVP(2, 3, 6, 6, 3, 3, 3, 2, 1, 1, 3, KT_EPI_BIAS), /* depthwise */
        CONVP(1, 2, 9, 9, 2, 3, 3, 2, 2, 2, 1, KT_EPI_RELU),
        CONVP(1, 2, 5, 5, 4, 1, 1, 1, 0, 1, 1, 0),
        CONVP(2, 4, 3, 5, 6, 1, 1, 1, 0, 1, 2, KT_EPI_BIAS | KT_EPI_RELU),
        CONVP(1, 3, 5, 4, 2, 1, 1, 2, 0, 1, 1, KT_EPI_BIAS),
    };
    struct kt_op_def od;
    struct kt_dag *d;
    float **bufs, *want;
    int64_t n;
    size_t i;
    int t, o, ii, wi, bi;

    (void)state;
    for (i = 0; i < KT_ARRAY_LEN(ps); i++) {
        assert_int_equal(kt_op_conv2d(&od, &ps[i]), KT_OK);
        d = must_build(&od);
        bufs = calloc((size_t)d->ntensors, sizeof(*bufs));
        assert_non_null(bufs);
        for (t = 0; t < d->ntensors; t++) {
            n = kt_tensor_elems(&d->tensors[t]);
            bufs[t] = malloc((size_t)n * sizeof(float));
            assert_non_null(bufs[t]);
            for (int64_t e = 0; e < n; e++)
                bufs[t][e] = (float)((e * 37 + t * 11) % 17) / 8.0f - 1.0f;
        }
        ii = kt_dag_find_tensor(d, "I");
        wi = kt_dag_find_tensor(d, "W");
        bi = kt_dag_find_tensor(d, "B");
        o = kt_dag_find_tensor(d, "O");
        kt_dag_interpret(d, bufs);
        n = kt_tensor_elems(&d->tensors[o]);
        want = malloc((size_t)n * sizeof(float));
        assert_non_null(want);
        ktt_naive_conv(&ps[i], bufs[ii], bufs[wi], bi >= 0 ? bufs[bi] : NULL,
                       want);
        for (int64_t e = 0; e < n; e++)
            if (fabsf(want[e] - bufs[o][e]) > 1e-4f)
                fail_msg("%s: element %lld is %g, want %g", od.name,
                         (long long)e, (double)bufs[o][e], (double)want[e]);
        free(want);
        for (t = 0; t < d->ntensors; t++)
            free(bufs[t]);
        free(bufs);
        kt_dag_free(d);
    }
}

/* The padded extents the products choose (ir/ops.c): columns no 16-lane
 * vector divides are padded to whole vectors, one more where 2, 3 and 4
 * divide none of 5 or more (13 -> 14, 5 -> 6), rows no register tile of 2
 * to 8 divides to a multiple of 8 (else 4), each only when whole vectors
 * or rows cost at most 1/16 more; shapes that tile well are not padded.
 * Rows whose register tiles can only be one vector wide (208 columns, 13
 * vectors) take the first extent a tile of 10 to 12 rows divides
 * instead. */
static void
test_ops_padded_extents(void **state)
{
    static const struct {
        int64_t B, M, N;
        const char *want; /* in the definition text, NULL: no padding */
    } pads[] = {
        {12, 197, 197, "pad i:200, j:224"}, /* 14 vectors */
        {1, 197, 64, "pad i:200"},          /* tiles of 2 or 4 vectors */
        {1, 109, 208, "pad i:110"},
        {1, 109, 224, "pad i:112"},
        {8, 77, 77, "pad j:96"}, /* 7 divides the rows */
        {1, 1000, 1000, "pad j:1008"},
        {1, 64, 6625, "pad j:6656"}, /* 415 = 5 x 83 vectors -> 416 */
        {1, 64, 140, "pad j:144"},   /* 9 vectors: tiles of 3 */
        {1, 64, 208, NULL},
        {1, 100, 100, NULL},       /* 112 would cost 12% more */
        {1, 211, 64, "pad i:216"}, /* 211 is prime */
    };
    struct kt_op_def od;
    size_t i;
    (void)state;

    for (i = 0; i < sizeof(pads) / sizeof(pads[0]); i++) {
        assert_int_equal(kt_op_batch_matmul(&od, pads[i].B, pads[i].M,
                                            pads[i].N, 64, 1),
                         0);
        if (pads[i].want == NULL) {
            if (strstr(od.text, " pad ") != NULL)
                fail_msg("%s: padded: %s", od.name, od.text);
        } else if (strstr(od.text, pads[i].want) == NULL) {
            fail_msg("%s: want '%s' in %s", od.name, pads[i].want, od.text);
        }
    }
}

/* A matmul whose B is a weight: the same product, B constant (a schedule
 * may rewrite its layout), A not; a workload of its own. */
static void
test_ops_matmul_const_b(void **state)
{
    struct kt_op_def od, plain;
    struct kt_dag *d, *p;
    (void)state;

    assert_int_equal(kt_op_matmul_const_b(&od, 40, 6625, 120), KT_OK);
    assert_int_equal(kt_op_matmul(&plain, 40, 6625, 120), KT_OK);
    assert_string_equal(od.name, "matmul_40x6625x120_constb");
    assert_string_equal(od.text, plain.text);
    d = must_build(&od);
    p = must_build(&plain);
    assert_true(d->tensors[kt_dag_find_tensor(d, "B")].is_const);
    assert_false(d->tensors[kt_dag_find_tensor(d, "A")].is_const);
    assert_false(p->tensors[kt_dag_find_tensor(p, "B")].is_const);
    assert_string_not_equal(d->key, p->key);
    kt_dag_free(d);
    kt_dag_free(p);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_flops_bounds_roundtrip),
        cmocka_unit_test(test_ops_bad_params),
        cmocka_unit_test(test_ops_names_tell_height_from_width),
        cmocka_unit_test(test_ops_layouts),
        cmocka_unit_test(test_ops_conv_against_naive),
        cmocka_unit_test(test_ops_padded_extents),
        cmocka_unit_test(test_ops_matmul_const_b),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
