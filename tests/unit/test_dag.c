/* test_dag.c - DAG construction: tensor order, kinds, extents, padding
 * stages, and the reference interpreter on hand-computed cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static struct kt_dag *
must_parse(const char *text, const struct kt_shape *sh, int n)
{
    struct kt_dag *d = NULL;
    char err[256] = "";

    if (kt_dag_parse(text, sh, n, &d, err, sizeof(err)) != KT_OK)
        fail_msg("parse of \"%s\" failed: %s", text, err);
    return d;
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

/* Buffers for every tensor of d; inputs get values from fill(). */
static float **
alloc_bufs(const struct kt_dag *d)
{
    float **b = calloc((size_t)d->ntensors, sizeof(*b));
    int t;

    assert_non_null(b);
    for (t = 0; t < d->ntensors; t++) {
        b[t] = calloc((size_t)kt_tensor_elems(&d->tensors[t]), sizeof(float));
        assert_non_null(b[t]);
    }
    return b;
}

static void
free_bufs(const struct kt_dag *d, float **b)
{
    int t;

    for (t = 0; t < d->ntensors; t++)
        free(b[t]);
    free(b);
}

static void
test_dag_order_kinds_extents(void **state)
{
    struct kt_op_def od;
    struct kt_dag *d;
    const struct kt_stage *s;

    (void)state;
    assert_int_equal(kt_op_dense(&od, 4, 5, 6, KT_EPI_BIAS | KT_EPI_RELU),
                     KT_OK);
    d = must_build(&od);
    assert_int_equal(d->ntensors, 5);
    assert_string_equal(d->tensors[0].name, "A");
    assert_string_equal(d->tensors[1].name, "W");
    assert_string_equal(d->tensors[2].name, "B");
    assert_string_equal(d->tensors[3].name, "T");
    assert_string_equal(d->tensors[4].name, "O");
    assert_int_equal(d->tensors[0].kind, KT_TENSOR_INPUT);
    assert_int_equal(d->tensors[2].kind, KT_TENSOR_INPUT);
    assert_int_equal(d->tensors[3].kind, KT_TENSOR_INTERMEDIATE);
    assert_int_equal(d->tensors[4].kind, KT_TENSOR_OUTPUT);
    assert_int_equal(d->tensors[0].producer, -1);
    assert_int_equal(d->tensors[3].producer, 0);
    assert_int_equal(d->tensors[4].producer, 1);
    assert_int_equal(d->tensors[3].ndim, 2);
    assert_int_equal(d->tensors[3].shape[0], 4);
    assert_int_equal(d->tensors[3].shape[1], 5);
    assert_int_equal(kt_tensor_elems(&d->tensors[1]), 30);
    assert_int_equal(kt_dag_find_tensor(d, "B"), 2);
    assert_int_equal(kt_dag_find_tensor(d, "Q"), -1);
    assert_int_equal(d->nstages, 2);
    s = &d->stages[0];
    assert_int_equal(s->out, 3);
    assert_int_equal(s->op, KT_SUM);
    assert_int_equal(s->naxes, 3);
    assert_int_equal(s->nspatial, 2);
    assert_string_equal(s->axes[2].name, "k");
    assert_int_equal(s->axes[2].extent, 6);
    assert_int_equal(s->axes[2].reduce, 1);
    assert_int_equal(s->axes[1].reduce, 0);
    assert_int_equal(s->is_pad, 0);
    /* W[j,k]: the load's indexes are axis numbers 1 and 2. */
    assert_int_equal(s->body->b->src, 1);
    assert_int_equal(kt_aff_coef(&s->body->b->idx[0], 1), 1);
    assert_int_equal(kt_aff_coef(&s->body->b->idx[1], 2), 1);
    assert_int_equal(d->stages[1].op, KT_ASSIGN);
    assert_int_equal(d->stages[1].body->op, KT_X_MAX);
    assert_true(d->flops == 2.0 * 4 * 5 * 6 + 2.0 * 4 * 5);
    kt_dag_free(d);

    /* Reduction axes follow their first appearance on the right. */
    {
        struct kt_shape sh[2] = {{"X", 3, {2, 3, 4}}, {"Y", 2, {4, 3}}};

        d = must_parse("O[i] += X[i,q,p] * Y[p,q]", sh, 2);
        assert_string_equal(d->stages[0].axes[1].name, "q");
        assert_int_equal(d->stages[0].axes[1].extent, 3);
        assert_string_equal(d->stages[0].axes[2].name, "p");
        assert_int_equal(d->stages[0].axes[2].extent, 4);
        kt_dag_free(d);
    }
}

struct pad_case {
    int64_t H, R, stride, pad, dil;
    int64_t pad_rows; /* rows of I_pad, 0 = no padding stage */
    int64_t lo;       /* first padded row (<= 0) */
};

static const struct pad_case pad_cases[] = {
    {5, 3, 1, 0, 1, 0, 0},   /* valid conv: no pad */
    {5, 3, 1, 1, 1, 7, -1},  /* same conv */
    {5, 3, 1, 3, 1, 11, -3}, /* pad larger than the window reach */
    {6, 3, 2, 1, 1, 7, -1},  /* stride 2: the last row is never read */
    {5, 3, 1, 2, 2, 9, -2},  /* dilation 2 */
    {7, 1, 2, 0, 1, 0, 0},   /* 1x1 stride 2 */
};

static void
test_dag_conv_padding(void **state)
{
    struct kt_conv2d_params p;
    struct kt_op_def od;
    const struct kt_stage *ps, *cs;
    const struct kt_expr *g, *l;
    struct kt_dag *d;
    size_t i;
    int ip;

    (void)state;
    for (i = 0; i < KT_ARRAY_LEN(pad_cases); i++) {
        const struct pad_case *c = &pad_cases[i];

        memset(&p, 0, sizeof(p));
        p.N = 1;
        p.C = 2;
        p.K = 3;
        p.H = c->H;
        p.W = c->H;
        p.R = c->R;
        p.S = c->R;
        p.stride_h = p.stride_w = c->stride;
        p.pad_h = p.pad_w = c->pad;
        p.dilation_h = p.dilation_w = c->dil;
        p.groups = 1;
        assert_int_equal(kt_op_conv2d(&od, &p), KT_OK);
        d = must_build(&od);
        ip = kt_dag_find_tensor(d, "I_pad");
        if (c->pad_rows == 0) {
            assert_int_equal(ip, -1);
            assert_int_equal(d->nstages, 1);
            kt_dag_free(d);
            continue;
        }
        assert_int_equal(ip, 2); /* after the inputs I, W */
        assert_int_equal(d->nstages, 2);
        assert_int_equal(d->tensors[ip].kind, KT_TENSOR_INTERMEDIATE);
        assert_int_equal(d->tensors[ip].shape[0], 1);
        assert_int_equal(d->tensors[ip].shape[1], 2);
        if (d->tensors[ip].shape[2] != c->pad_rows ||
            d->tensors[ip].shape[3] != c->pad_rows)
            fail_msg("case %zu: I_pad is %lldx%lld, want %lld rows", i,
                     (long long)d->tensors[ip].shape[2],
                     (long long)d->tensors[ip].shape[3],
                     (long long)c->pad_rows);
        ps = &d->stages[0];
        assert_int_equal(ps->is_pad, 1);
        assert_int_equal(ps->out, ip);
        assert_int_equal(ps->op, KT_ASSIGN);
        assert_int_equal(ps->naxes, 4);
        assert_int_equal(ps->nspatial, 4);
        g = ps->body;
        assert_int_equal(g->op, KT_X_LOAD);
        assert_int_equal(g->guarded, 1);
        assert_true(g->pad_value == 0.0f);
        assert_int_equal(g->src, 0);
        assert_int_equal(g->idx[1].c, 0);
        assert_int_equal(g->idx[2].c, c->lo);
        assert_int_equal(kt_aff_coef(&g->idx[2], 2), 1);
        /* The conv now reads I_pad at y*S + r*D (offset removed). */
        cs = &d->stages[1];
        l = cs->body->a;
        assert_int_equal(l->src, ip);
        assert_int_equal(l->guarded, 0);
        assert_int_equal(l->idx[2].c, -c->pad - c->lo);
        assert_int_equal(kt_aff_coef(&l->idx[2], 2), c->stride);
        assert_int_equal(kt_aff_coef(&l->idx[2], 5), c->dil);
        /* Pad stages cost nothing. */
        assert_true(d->flops == 2.0 * (double)(kt_tensor_elems(&d->tensors[3]) *
                                               2 * c->R * c->R));
        kt_dag_free(d);
    }
}

static void
test_dag_pad_values_and_names(void **state)
{
    struct kt_shape sh[2] = {{"I", 1, {6}}, {"I_pad", 1, {6}}};
    struct kt_op_def od;
    struct kt_dag *d;
    int t;

    (void)state;
    assert_int_equal(kt_op_pool2d(&od, 1, 1, 1, 4, 4, 3, 1, 1), KT_OK);
    d = must_build(&od);
    assert_int_equal(d->stages[0].is_pad, 1);
    assert_true(isinf(d->stages[0].body->pad_value) &&
                d->stages[0].body->pad_value < 0);
    assert_true(d->flops == 1.0 * 16 * 9); /* one max per window point */
    kt_dag_free(d);

    d = must_parse("O[i] min= I[i+r-2] where r:3, i:6", sh, 1);
    assert_true(isinf(d->stages[0].body->pad_value) &&
                d->stages[0].body->pad_value > 0);
    /* Only the low side is out of bounds: pad covers [-2, 5]. */
    assert_int_equal(d->tensors[1].shape[0], 8);
    kt_dag_free(d);

    /* Two stages reading I out of bounds get one pad each; an existing
     * tensor named I_pad pushes the names along. */
    d = must_parse("O[i] = I[i-1] + I_pad[i]\nP[i] += I[i+r] where r:2, i:6",
                   sh, 2);
    assert_int_equal(d->nstages, 4);
    t = kt_dag_find_tensor(d, "I_pad1");
    assert_true(t >= 0);
    assert_int_equal(d->tensors[t].producer, 0);
    assert_int_equal(d->tensors[t].shape[0], 7); /* [-1, 5] */
    t = kt_dag_find_tensor(d, "I_pad2");
    assert_true(t >= 0);
    assert_int_equal(d->tensors[t].producer, 2);
    assert_int_equal(d->tensors[t].shape[0], 7); /* [0, 6] */
    assert_int_equal(d->stages[2].body->idx[0].c, 0);
    /* The printed form hides the pads. */
    assert_string_equal(d->key, "O[a0]=I[a0-1]+I_pad[a0];P[a0]+=I[a0+a1] where "
                                "a0:6,a1:2;I:6;I_pad:6");
    kt_dag_free(d);
}

static void
test_dag_interpret_matmul(void **state)
{
    static const float A[6] = {1, 2, 3, 4, 5, 6};
    static const float B[6] = {7, 8, 9, 10, 11, 12};
    static const float want[4] = {58, 64, 139, 154};
    struct kt_op_def od;
    struct kt_dag *d;
    float **b;

    (void)state;
    assert_int_equal(kt_op_matmul(&od, 2, 2, 3), KT_OK);
    d = must_build(&od);
    b = alloc_bufs(d);
    memcpy(b[0], A, sizeof(A));
    memcpy(b[1], B, sizeof(B));
    kt_dag_interpret(d, b);
    assert_memory_equal(b[2], want, sizeof(want));
    free_bufs(d, b);
    kt_dag_free(d);
}

static void
test_dag_interpret_conv_pad(void **state)
{
    static const float want[9] = {12, 21, 16, 27, 45, 33, 24, 39, 28};
    struct kt_conv2d_params p = {0};
    struct kt_op_def od;
    struct kt_dag *d;
    float **b;
    int i, o;

    (void)state;
    p.N = p.C = p.K = 1;
    p.H = p.W = p.R = p.S = 3;
    p.stride_h = p.stride_w = p.dilation_h = p.dilation_w = 1;
    p.pad_h = p.pad_w = 1;
    p.groups = 1;
    assert_int_equal(kt_op_conv2d(&od, &p), KT_OK);
    d = must_build(&od);
    b = alloc_bufs(d);
    for (i = 0; i < 9; i++) {
        b[0][i] = (float)(i + 1);
        b[1][i] = 1;
    }
    kt_dag_interpret(d, b);
    o = kt_dag_find_tensor(d, "O");
    assert_memory_equal(b[o], want, sizeof(want));
    free_bufs(d, b);
    kt_dag_free(d);
}

static void
test_dag_interpret_softmax_pool(void **state)
{
    struct kt_op_def od;
    struct kt_dag *d;
    double sum;
    float **b;
    int i, j, o;

    (void)state;
    assert_int_equal(kt_op_softmax(&od, 3, 5), KT_OK);
    d = must_build(&od);
    b = alloc_bufs(d);
    for (i = 0; i < 15; i++)
        b[0][i] = (float)((i * 7) % 11) - 5.0f + (float)i * 40.0f;
    kt_dag_interpret(d, b);
    o = kt_dag_find_tensor(d, "O");
    for (i = 0; i < 3; i++) {
        sum = 0;
        for (j = 0; j < 5; j++) {
            assert_true(b[o][i * 5 + j] >= 0 && b[o][i * 5 + j] <= 1);
            sum += b[o][i * 5 + j];
        }
        assert_true(fabs(sum - 1.0) < 1e-5);
        /* The largest input of each row wins almost everything. */
        assert_true(b[o][i * 5 + 4] > 0.99f);
    }
    free_bufs(d, b);
    kt_dag_free(d);

    /* Max pool over negative numbers: padding must not win. */
    assert_int_equal(kt_op_pool2d(&od, 1, 1, 1, 2, 2, 3, 1, 1), KT_OK);
    d = must_build(&od);
    b = alloc_bufs(d);
    b[0][0] = -4;
    b[0][1] = -3;
    b[0][2] = -2;
    b[0][3] = -1;
    kt_dag_interpret(d, b);
    o = kt_dag_find_tensor(d, "O");
    for (i = 0; i < 4; i++)
        assert_true(b[o][i] == -1.0f);
    free_bufs(d, b);
    kt_dag_free(d);

    /* Average pool counts the padded zeros (count_include_pad). */
    assert_int_equal(kt_op_pool2d(&od, 0, 1, 1, 2, 2, 3, 1, 1), KT_OK);
    d = must_build(&od);
    b = alloc_bufs(d);
    for (i = 0; i < 4; i++)
        b[0][i] = 9;
    kt_dag_interpret(d, b);
    o = kt_dag_find_tensor(d, "O");
    for (i = 0; i < 4; i++)
        assert_true(fabsf(b[o][i] - 4.0f) < 1e-5f);
    free_bufs(d, b);
    kt_dag_free(d);
}

static void
test_dag_interpret_dense_epilogue(void **state)
{
    struct kt_op_def od;
    struct kt_dag *d;
    float **b;
    int o;

    (void)state;
    /* A = [1 2; -3 -4], W = [1 1; 2 0], B = [0.5, -1]:
     * T = [3 2; -7 -6], O = relu(T + B) = [3.5 1; 0 0]. */
    assert_int_equal(kt_op_dense(&od, 2, 2, 2, KT_EPI_BIAS | KT_EPI_RELU),
                     KT_OK);
    d = must_build(&od);
    b = alloc_bufs(d);
    memcpy(b[0], (float[]){1, 2, -3, -4}, 4 * sizeof(float));
    memcpy(b[1], (float[]){1, 1, 2, 0}, 4 * sizeof(float));
    memcpy(b[2], (float[]){0.5f, -1}, 2 * sizeof(float));
    kt_dag_interpret(d, b);
    o = kt_dag_find_tensor(d, "O");
    assert_memory_equal(b[o], ((float[]){3.5f, 1, 0, 0}), 4 * sizeof(float));
    assert_memory_equal(b[3], ((float[]){3, 2, -7, -6}), 4 * sizeof(float));
    free_bufs(d, b);
    kt_dag_free(d);
}

/* Same terms in any order, constants aside; a term that cancels to 0 is
 * gone, not kept as a 0 coefficient that would make the counts differ. */
static void
test_aff_same_terms(void **state)
{
    struct kt_affine a, b;

    (void)state;
    kt_aff_const(&a, 5);
    kt_aff_add_term(&a, 1, 3);
    kt_aff_add_term(&a, 4, -2);
    kt_aff_const(&b, -7);
    kt_aff_add_term(&b, 4, -2);
    kt_aff_add_term(&b, 1, 3);
    assert_true(kt_aff_same_terms(&a, &b));
    assert_true(kt_aff_same_terms(&b, &a));
    kt_aff_add_term(&b, 2, 1);
    assert_false(kt_aff_same_terms(&a, &b));
    kt_aff_add_term(&b, 2, -1);
    assert_true(kt_aff_same_terms(&a, &b));
    kt_aff_add_term(&b, 1, 1); /* same variables, another coefficient */
    assert_false(kt_aff_same_terms(&a, &b));
    kt_aff_add_term(&b, 1, -1);
    kt_aff_add_term(&b, 4, 2);  /* b drops variable 4 ... */
    kt_aff_add_term(&b, 6, -2); /* ... and takes 6: same count */
    assert_false(kt_aff_same_terms(&a, &b));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dag_order_kinds_extents),
        cmocka_unit_test(test_dag_conv_padding),
        cmocka_unit_test(test_dag_pad_values_and_names),
        cmocka_unit_test(test_dag_interpret_matmul),
        cmocka_unit_test(test_dag_interpret_conv_pad),
        cmocka_unit_test(test_dag_interpret_softmax_pool),
        cmocka_unit_test(test_dag_interpret_dense_epilogue),
        cmocka_unit_test(test_aff_same_terms),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
