/* test_onnx.c - the ONNX importer on models the test builds itself
 * (tests/support/ktt_onnx.c): every supported operator and fusion pattern,
 * shapes and FLOPs against hand computation, and the errors for bad files,
 * unknown operators and shape mismatches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "onnx/onnx.h"
#include "scheduler/scheduler.h"
#include "tests/support/ktt_onnx.h"

#define D(...) ((const int64_t[]){__VA_ARGS__})

static char err[2048];

/* Imports b; expects rc and returns the graph (NULL on error). */
static struct kt_onnx_graph *
import(struct ktt_onnx *b, const struct kt_onnx_input *in, int nin, int flags,
       int want_rc)
{
    struct kt_onnx_graph *g = NULL;
    size_t len;
    uint8_t *buf = ktt_onnx_pack(b, &len);
    int rc;

    err[0] = '\0';
    rc = kt_onnx_import_mem("t.onnx", buf, len, in, nin, flags, &g, err,
                            sizeof(err));
    free(buf);
    if (rc != want_rc)
        print_error("rc %d (want %d): %s\n", rc, want_rc, err);
    assert_int_equal(rc, want_rc);
    ktt_onnx_free(b);
    return g;
}

static void
assert_flops(double got, double want)
{
    if (got != want)
        print_error("flops %.0f, want %.0f\n", got, want);
    assert_true(got == want);
}

static const struct kt_onnx_value *
value(const struct kt_onnx_graph *g, const char *name)
{
    int i;
    for (i = 0; i < g->nvalues; i++)
        if (strcmp(g->values[i].name, name) == 0)
            return &g->values[i];
    fail_msg("no value %s", name);
    return NULL;
}

static const struct kt_onnx_node *
node(const struct kt_onnx_graph *g, const char *name)
{
    int i;
    for (i = 0; i < g->nnodes; i++)
        if (strcmp(g->nodes[i].name, name) == 0)
            return &g->nodes[i];
    fail_msg("no node %s", name);
    return NULL;
}

static void
assert_shape(const struct kt_onnx_graph *g, const char *name, int ndim,
             const int64_t *dims)
{
    const struct kt_onnx_value *v = value(g, name);
    int i;
    assert_int_equal(v->ndim, ndim);
    for (i = 0; i < ndim; i++) {
        if (v->dims[i] != dims[i])
            print_error("%s dim %d: %lld, want %lld\n", name, i,
                        (long long)v->dims[i], (long long)dims[i]);
        assert_int_equal(v->dims[i], dims[i]);
    }
}

static void
assert_role(const struct kt_onnx_graph *g, const char *name, int role,
            int kernel)
{
    const struct kt_onnx_node *n = node(g, name);
    if (n->role != role || n->kernel != kernel)
        print_error("%s: role %d kernel %d (want %d, %d)\n", name, n->role,
                    n->kernel, role, kernel);
    assert_int_equal(n->role, role);
    assert_int_equal(n->kernel, kernel);
}

/* One input of run_def: a tensor's data by name. */
struct feed {
    const char *name;
    const float *data;
    size_t n;
};

/* Builds d, interprets it with the inputs fed (others zero) and copies the
 * first n elements of its output O to out. */
static void
run_def(const struct kt_op_def *d, const struct feed *in, int nin, float *out,
        size_t n)
{
    struct kt_dag *dag = NULL;
    float *bufs[KT_MAX_TENSORS];
    int t, i;

    assert_int_equal(kt_op_build(d, &dag, err, sizeof(err)), 0);
    for (t = 0; t < dag->ntensors; t++) {
        bufs[t] = calloc((size_t)kt_tensor_elems(&dag->tensors[t]) + 1,
                         sizeof(float));
        for (i = 0; i < nin; i++)
            if (strcmp(dag->tensors[t].name, in[i].name) == 0)
                memcpy(bufs[t], in[i].data, in[i].n * sizeof(float));
    }
    kt_dag_interpret(dag, bufs);
    t = kt_dag_find_tensor(dag, "O");
    memcpy(out, bufs[t], n * sizeof(float));
    for (t = 0; t < dag->ntensors; t++)
        free(bufs[t]);
    kt_dag_free(dag);
}

/* ---- Convolutions and fusion ------------------------------------------- */

/* conv 3x3 pad 1 + batch norm (folded) + relu: one task, conv2d with the
 * builders' bias and relu bits (so the key equals a JSON conv layer's). */
static void
test_conv_bn_relu(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct ktt_onnx_node *c;
    struct kt_onnx_graph *g;
    (void)state;
    ktt_onnx_input(b, "x", 4, D(1, 3, 8, 8));
    ktt_onnx_init(b, "w", 4, D(4, 3, 3, 3), NULL);
    ktt_onnx_init(b, "s", 1, D(4), NULL);
    ktt_onnx_init(b, "bb", 1, D(4), NULL);
    ktt_onnx_init(b, "m", 1, D(4), NULL);
    ktt_onnx_init(b, "v", 1, D(4), NULL);
    c = ktt_onnx_node(b, "Conv", "conv", "x,w", "y");
    ktt_attr_ints(c, "pads", 4, D(1, 1, 1, 1));
    ktt_attr_ints(c, "kernel_shape", 2, D(3, 3));
    ktt_onnx_node(b, "BatchNormalization", "bn", "y,s,bb,m,v", "z");
    ktt_onnx_node(b, "Relu", "relu", "z", "r");
    ktt_onnx_output(b, "r");
    g = import(b, NULL, 0, 0, 0);
    assert_shape(g, "r", 4, D(1, 4, 8, 8));
    assert_int_equal(g->nkernels, 1);
    assert_int_equal(g->ntasks, 1);
    assert_true(g->kernels[0].bn_folded);
    assert_role(g, "conv", KT_ONNX_ROLE_TASK, 0);
    assert_role(g, "bn", KT_ONNX_ROLE_FUSED, 0);
    assert_role(g, "relu", KT_ONNX_ROLE_FUSED, 0);
    /* 2 per multiply-add over 4x8x8 outputs x 27 taps, then bias + relu */
    assert_flops(g->kernels[0].flops, 2.0 * 4 * 64 * 27 + 2.0 * 4 * 64);
    assert_non_null(strstr(g->kernels[0].def.name, "_bias_relu"));
    kt_onnx_free(g);
}

/* Interprets the conv + hardswish + residual + relu kernel below on small
 * integers and compares with the ONNX semantics computed here. */
static void
check_hardswish_values(const struct kt_onnx_kernel *k)
{
    float in[144], w[16], bias[4], out[144], three = 3;
    int f, c, i;

    for (i = 0; i < 144; i++)
        in[i] = (float)(i % 9) - 4;
    for (i = 0; i < 16; i++)
        w[i] = (float)(i % 5) - 2;
    for (i = 0; i < 4; i++)
        bias[i] = (float)i - 1.5f;
    run_def(&k->def,
            (const struct feed[]){{"I", in, 144},
                                  {"P0", &three, 1},
                                  {"P1", in, 144},
                                  {"W", w, 16},
                                  {"B", bias, 4}},
            5, out, 144);
    for (f = 0; f < 4; f++)
        for (i = 0; i < 36; i++) {
            float y = bias[f], hs, want;
            for (c = 0; c < 4; c++)
                y += in[c * 36 + i] * w[f * 4 + c];
            hs = y * fminf(fmaxf(y + 3, 0), 6) / 6;
            want = fmaxf(hs + in[f * 36 + i], 0);
            assert_true(fabsf(out[f * 36 + i] - want) < 1e-5f);
        }
}

/* Conv + BN + hardswish as exporters write it (x * clip(x + 3, 0, 6) / 6),
 * then a residual add and a relu: one task with a 5-stage epilogue. */
static void
test_conv_hardswish_residual(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(9);
    struct ktt_onnx_node *c;
    struct kt_onnx_graph *g;
    (void)state;
    ktt_onnx_input(b, "x", 4, D(1, 4, 6, 6));
    ktt_onnx_init(b, "w", 4, D(4, 4, 1, 1), NULL);
    ktt_onnx_init(b, "cb", 1, D(4), NULL);
    ktt_onnx_scalar(b, "three", 3);
    ktt_onnx_scalar(b, "six", 6);
    ktt_onnx_node(b, "Conv", "conv", "x,w,cb", "y");
    ktt_onnx_node(b, "Add", "a3", "y,three", "y3");
    c = ktt_onnx_node(b, "Clip", "clip", "y3", "cl");
    ktt_attr_float(c, "min", 0);
    ktt_attr_float(c, "max", 6);
    ktt_onnx_node(b, "Mul", "mul", "y,cl", "ym");
    ktt_onnx_node(b, "Div", "div", "ym,six", "hs");
    ktt_onnx_node(b, "Add", "res", "hs,x", "sum");
    ktt_onnx_node(b, "Relu", "relu", "sum", "out");
    ktt_onnx_output(b, "out");
    g = import(b, NULL, 0, 0, 0);
    assert_int_equal(g->nkernels, 1);
    assert_role(g, "clip", KT_ONNX_ROLE_FUSED, 0);
    assert_role(g, "relu", KT_ONNX_ROLE_FUSED, 0);
    assert_int_equal(g->kernels[0].nnodes, 7);
    /* the Add's 3 (an input of one element, the Div's 6 stays a number)
     * and the residual x (batch 1 dropped) */
    assert_int_equal(g->kernels[0].nextra, 2);
    assert_non_null(strstr(g->kernels[0].def.text, "+ P0[0]"));
    assert_non_null(strstr(g->kernels[0].def.text, "/ (6)"));
    /* conv 2x4x36x4 + bias 1, add 1, clip 2, mul 1, div 1, add 1, relu 1 */
    assert_flops(g->kernels[0].flops, 2.0 * 4 * 36 * 4 + 8.0 * 4 * 36);
    /* the pointwise conv's pixels are one axis (docs/compute.md) */
    if (strstr(g->kernels[0].def.text, "P1[a1,a2]") == NULL)
        print_error("%s\n", g->kernels[0].def.text);
    assert_non_null(strstr(g->kernels[0].def.text, "P1[a1,a2]"));
    check_hardswish_values(&g->kernels[0]);
    kt_onnx_free(g);
}

/* x (1x4x3x5) through a pointwise Conv and a per-channel Add, then (when
 * along_x) a Mul by an operand that varies along x only. */
static struct kt_onnx_graph *
pointwise_conv_graph(int along_x)
{
    struct ktt_onnx *b = ktt_onnx_new(13);

    ktt_onnx_input(b, "x", 4, D(1, 4, 3, 5));
    ktt_onnx_init(b, "w", 4, D(2, 4, 1, 1), NULL);
    ktt_onnx_init(b, "ch", 3, D(2, 1, 1), NULL);
    ktt_onnx_node(b, "Conv", "conv", "x,w", "y");
    ktt_onnx_node(b, "Add", "perchannel", "y,ch", along_x ? "z" : "out");
    if (along_x) {
        ktt_onnx_init(b, "col", 1, D(5), NULL);
        ktt_onnx_node(b, "Mul", "percolumn", "z,col", "out");
    }
    ktt_onnx_output(b, "out");
    return import(b, NULL, 0, 0, 0);
}

/* A pointwise conv indexes its pixels as one axis; an operand that varies
 * along x but not y does not map onto it, and the kernel is then defined
 * over y and x (still fused). */
static void
test_pointwise_conv_operand_along_x(void **state)
{
    struct kt_onnx_graph *g = pointwise_conv_graph(0);
    (void)state;

    assert_int_equal(g->nkernels, 1);
    assert_role(g, "perchannel", KT_ONNX_ROLE_FUSED, 0);
    assert_non_null(
        strstr(g->kernels[0].def.text, "Y[n,f,p] += I[n,c,p] * W[f,c]"));
    kt_onnx_free(g);
    g = pointwise_conv_graph(1);
    assert_int_equal(g->nkernels, 1);
    assert_role(g, "percolumn", KT_ONNX_ROLE_FUSED, 0);
    if (strstr(g->kernels[0].def.text, "W[f,c,r,s]") == NULL)
        print_error("%s\n", g->kernels[0].def.text);
    assert_non_null(strstr(g->kernels[0].def.text, "W[f,c,r,s]"));
    kt_onnx_free(g);
}

/* An intermediate value used outside the chain stops the fusion there. */
static void
test_fusion_stops_at_shared_value(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct kt_onnx_graph *g;
    (void)state;
    ktt_onnx_input(b, "x", 4, D(1, 2, 4, 4));
    ktt_onnx_init(b, "w", 4, D(2, 2, 1, 1), NULL);
    ktt_onnx_node(b, "Conv", "conv", "x,w", "y");
    ktt_onnx_node(b, "Sigmoid", "sig", "y", "s");
    ktt_onnx_node(b, "Tanh", "tanh", "s", "t");
    ktt_onnx_node(b, "GlobalAveragePool", "gap", "s", "p");
    ktt_onnx_output(b, "t");
    ktt_onnx_output(b, "p");
    g = import(b, NULL, 0, 0, 0);
    assert_int_equal(g->nkernels, 2);
    assert_role(g, "sig", KT_ONNX_ROLE_FUSED, 0);
    assert_role(g, "tanh", KT_ONNX_ROLE_UNTUNED, -1);
    assert_role(g, "gap", KT_ONNX_ROLE_TASK, 1);
    assert_shape(g, "p", 4, D(1, 2, 1, 1));
    kt_onnx_free(g);
}

static void
test_conv_geometry(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct ktt_onnx_node *c;
    struct kt_onnx_graph *g;
    (void)state;
    ktt_onnx_input(b, "x", 4, D(1, 8, 15, 16));
    ktt_onnx_init(b, "dw", 4, D(8, 1, 3, 3), NULL);
    ktt_onnx_init(b, "w2", 4, D(6, 4, 3, 3), NULL);
    ktt_onnx_init(b, "w3", 4, D(5, 6, 3, 3), NULL);
    /* depthwise, stride 2, SAME_UPPER: out = ceil(in / 2), pads 0/1 */
    c = ktt_onnx_node(b, "Conv", "dw", "x,dw", "y1");
    ktt_attr_int(c, "group", 8);
    ktt_attr_ints(c, "strides", 2, D(2, 2));
    ktt_attr_str(c, "auto_pad", "SAME_UPPER");
    /* grouped (2 groups), dilation 2, pads 2: out = in */
    c = ktt_onnx_node(b, "Conv", "grp", "y1,w2", "y2");
    ktt_attr_int(c, "group", 2);
    ktt_attr_ints(c, "dilations", 2, D(2, 2));
    ktt_attr_ints(c, "pads", 4, D(2, 2, 2, 2));
    /* asymmetric pads (top 1, bottom 0), VALID-like left/right */
    c = ktt_onnx_node(b, "Conv", "asym", "y2,w3", "y3");
    ktt_attr_ints(c, "pads", 4, D(1, 0, 0, 0));
    ktt_onnx_output(b, "y3");
    g = import(b, NULL, 0, 0, 0);
    assert_shape(g, "y1", 4, D(1, 8, 8, 8));
    assert_shape(g, "y2", 4, D(1, 6, 8, 8));
    assert_shape(g, "y3", 4, D(1, 5, 7, 6));
    assert_int_equal(g->nkernels, 3);
    assert_flops(g->kernels[0].flops, 2.0 * 8 * 64 * 9);
    assert_flops(g->kernels[1].flops, 2.0 * 6 * 64 * 4 * 9);
    assert_flops(g->kernels[2].flops, 2.0 * 5 * 42 * 6 * 9);
    kt_onnx_free(g);
}

/* ConvTranspose k2 s2 (a typical upsampling head) + bias + BN + sigmoid. */
static void
test_conv_transpose(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(11);
    struct ktt_onnx_node *c;
    struct kt_onnx_graph *g;
    (void)state;
    ktt_onnx_input(b, "x", 4, D(1, 4, 5, 6));
    ktt_onnx_init(b, "w", 4, D(4, 3, 2, 2), NULL);
    ktt_onnx_init(b, "w2", 4, D(3, 2, 3, 3), NULL);
    ktt_onnx_init(b, "s", 1, D(3), NULL);
    ktt_onnx_init(b, "bb", 1, D(3), NULL);
    ktt_onnx_init(b, "m", 1, D(3), NULL);
    ktt_onnx_init(b, "v", 1, D(3), NULL);
    c = ktt_onnx_node(b, "ConvTranspose", "up", "x,w", "y");
    ktt_attr_ints(c, "strides", 2, D(2, 2));
    ktt_onnx_node(b, "BatchNormalization", "bn", "y,s,bb,m,v", "z");
    ktt_onnx_node(b, "Sigmoid", "sig", "z", "o");
    /* k3 s2 pad 1 output_padding 1: out = 2 * in exactly */
    c = ktt_onnx_node(b, "ConvTranspose", "up2", "o,w2", "o2");
    ktt_attr_ints(c, "strides", 2, D(2, 2));
    ktt_attr_ints(c, "pads", 4, D(1, 1, 1, 1));
    ktt_attr_ints(c, "output_padding", 2, D(1, 1));
    ktt_onnx_output(b, "o2");
    g = import(b, NULL, 0, 0, 0);
    assert_shape(g, "y", 4, D(1, 3, 10, 12));
    assert_shape(g, "o2", 4, D(1, 2, 20, 24));
    assert_int_equal(g->nkernels, 2);
    assert_role(g, "bn", KT_ONNX_ROLE_FUSED, 0);
    assert_role(g, "sig", KT_ONNX_ROLE_FUSED, 0);
    /* each output gets exactly C = 4 products; then bias and sigmoid */
    assert_flops(g->kernels[0].flops, 2.0 * 3 * 120 * 4 + 2.0 * 3 * 120);
    /* k3 s2 p1: phase taps 2 per dim (one of them zero-weight for an odd
     * phase) */
    assert_flops(g->kernels[1].flops, 2.0 * 2 * 480 * 3 * 4);
    kt_onnx_free(g);
}

/* The phase form of ConvTranspose with the documented weight layout equals
 * the scatter definition of ONNX. */
static void
test_conv_transpose_values(void **state)
{
    const struct kt_conv_t_params p = {1, 2, 4, 5, 3, 3, 3, 2, 2, 1, 1, 8, 10};
    float in[40], w[54], want[240], out[240], *wt;
    struct kt_op_def d;
    int64_t ch, cw, k = 0, q, a, pp, b, nq, np;
    int c, f, y, x, r, s2, i;
    (void)state;
    assert_int_equal(kt_op_conv2d_transpose(&d, &p, &ch, &cw), 0);
    for (i = 0; i < 40; i++)
        in[i] = (float)((i * 7) % 11) - 5;
    for (i = 0; i < 54; i++)
        w[i] = (float)((i * 5) % 13) - 6;
    memset(want, 0, sizeof(want));
    for (c = 0; c < 2; c++)
        for (y = 0; y < 4; y++)
            for (x = 0; x < 5; x++)
                for (f = 0; f < 3; f++)
                    for (r = 0; r < 3; r++)
                        for (s2 = 0; s2 < 3; s2++) {
                            int oy = y * 2 + r - 1, ox = x * 2 + s2 - 1;
                            if (oy < 0 || oy >= 8 || ox < 0 || ox >= 10)
                                continue;
                            want[(f * 8 + oy) * 10 + ox] +=
                                in[(c * 4 + y) * 5 + x] *
                                w[((c * 3 + f) * 3 + r) * 3 + s2];
                        }
    /* W[c,f,q,a,p,b] = Wonnx[c,f,a+1+2(q-ch),b+1+2(p-cw)] (docs/onnx.md) */
    assert_string_equal(d.shapes[1].name, "W");
    nq = d.shapes[1].dims[2];
    np = d.shapes[1].dims[4];
    wt = calloc((size_t)(6 * nq * np * 4), sizeof(float));
    for (c = 0; c < 2; c++)
        for (f = 0; f < 3; f++)
            for (q = 0; q < nq; q++)
                for (a = 0; a < 2; a++)
                    for (pp = 0; pp < np; pp++)
                        for (b = 0; b < 2; b++, k++) {
                            int64_t rr = a + 1 + 2 * (q - ch);
                            int64_t ss = b + 1 + 2 * (pp - cw);
                            if (rr >= 0 && rr < 3 && ss >= 0 && ss < 3)
                                wt[k] = w[((c * 3 + f) * 3 + rr) * 3 + ss];
                        }
    run_def(&d, (const struct feed[]){{"I", in, 40}, {"W", wt, (size_t)k}}, 2,
            out, 240);
    for (i = 0; i < 240; i++)
        assert_true(fabsf(out[i] - want[i]) < 1e-4f);
    free(wt);
}

/* ---- Matrix products ------------------------------------------------------ */

static void
test_gemm_matmul(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct ktt_onnx_node *c;
    struct kt_onnx_graph *g;
    (void)state;
    ktt_onnx_input(b, "x", 2, D(4, 32));
    ktt_onnx_init(b, "w", 2, D(16, 32), NULL);
    ktt_onnx_init(b, "bias", 1, D(16), NULL);
    ktt_onnx_init(b, "w2", 2, D(16, 8), NULL);
    ktt_onnx_init(b, "c2", 2, D(4, 8), NULL);
    c = ktt_onnx_node(b, "Gemm", "fc", "x,w,bias", "y");
    ktt_attr_int(c, "transB", 1);
    ktt_onnx_node(b, "Relu", "relu", "y", "r");
    c = ktt_onnx_node(b, "Gemm", "fc2", "r,w2,c2", "y2");
    ktt_attr_float(c, "beta", 0.5f);
    ktt_onnx_output(b, "y2");
    g = import(b, NULL, 0, 0, 0);
    assert_shape(g, "y2", 2, D(4, 8));
    assert_int_equal(g->nkernels, 2);
    assert_non_null(strstr(g->kernels[0].def.name, "dense_4x16x32_bias_relu"));
    assert_flops(g->kernels[0].flops, 2.0 * 4 * 16 * 32 + 2.0 * 64);
    /* matmul + a full [4, 8] C (times beta) as an epilogue operand */
    assert_flops(g->kernels[1].flops, 2.0 * 4 * 8 * 16 + 2.0 * 32);
    assert_non_null(strstr(g->kernels[1].def.text, "P0[a0,a1] * 0.5"));
    assert_int_equal(g->kernels[1].nextra, 1);
    kt_onnx_free(g);
}

/* Attention: batched MatMul (heads), softmax over the last axis, MatMul;
 * a 3-D x 2-D MatMul folds its batch into rows. */
static void
test_attention(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct ktt_onnx_node *c;
    struct kt_onnx_graph *g;
    (void)state;
    ktt_onnx_input(b, "q", 4, D(1, 8, 40, 15));
    ktt_onnx_input(b, "k", 4, D(1, 8, 40, 15));
    ktt_onnx_input(b, "v", 4, D(1, 8, 40, 15));
    ktt_onnx_init(b, "wo", 2, D(120, 64), NULL);
    c = ktt_onnx_node(b, "Transpose", "kt", "k", "kT");
    ktt_attr_ints(c, "perm", 4, D(0, 1, 3, 2));
    ktt_onnx_node(b, "MatMul", "qk", "q,kT", "s");
    c = ktt_onnx_node(b, "Softmax", "sm", "s", "p");
    ktt_attr_int(c, "axis", -1);
    ktt_onnx_node(b, "MatMul", "pv", "p,v", "o");
    c = ktt_onnx_node(b, "Transpose", "ot", "o", "oT");
    ktt_attr_ints(c, "perm", 4, D(0, 2, 1, 3));
    ktt_onnx_init_i64(b, "shape", 3, D(1, 40, 120));
    ktt_onnx_node(b, "Reshape", "rs", "oT,shape", "flat");
    ktt_onnx_node(b, "MatMul", "proj", "flat,wo", "out");
    ktt_onnx_output(b, "out");
    g = import(b, NULL, 0, 0, 0);
    assert_shape(g, "s", 4, D(1, 8, 40, 40));
    assert_shape(g, "flat", 3, D(1, 40, 120));
    assert_shape(g, "out", 3, D(1, 40, 64));
    assert_int_equal(g->nkernels, 4);
    assert_role(g, "kt", KT_ONNX_ROLE_UNTUNED, -1);
    assert_role(g, "rs", KT_ONNX_ROLE_UNTUNED, -1);
    assert_non_null(strstr(g->kernels[0].def.name, "batch_matmul_8x40x40x15"));
    assert_non_null(strstr(g->kernels[1].def.name, "softmax_320x40"));
    assert_flops(g->kernels[1].flops, 5.0 * 320 * 40);
    /* the projection's B is an initializer: a weight of the task; the
     * products of activations keep theirs as inputs */
    assert_string_equal(g->kernels[3].def.name, "matmul_40x64x120_constb");
    assert_true(g->kernels[3].def.is_const[1]);
    assert_false(g->kernels[0].def.is_const[1]);
    kt_onnx_free(g);
}

/* A 2-D MatMul of two activations stays a product of inputs. */
static void
test_matmul_of_activations(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct kt_onnx_graph *g;
    (void)state;
    ktt_onnx_input(b, "x", 2, D(10, 32));
    ktt_onnx_input(b, "y", 2, D(32, 48));
    ktt_onnx_node(b, "MatMul", "mm", "x,y", "out");
    ktt_onnx_output(b, "out");
    g = import(b, NULL, 0, 0, 0);
    assert_int_equal(g->nkernels, 1);
    assert_string_equal(g->kernels[0].def.name, "matmul_10x48x32");
    assert_false(g->kernels[0].def.is_const[1]);
    kt_onnx_free(g);
}

/* ---- Normalization and GELU patterns ---------------------------------------- */

static void
layer_norm_nodes(struct ktt_onnx *b, const char *x, const char *out)
{
    struct ktt_onnx_node *c;
    c = ktt_onnx_node(b, "ReduceMean", "mean", x, "mu");
    ktt_attr_ints(c, "axes", 1, D(-1));
    ktt_onnx_node(b, "Sub", "sub", "h,mu", "d");
    ktt_onnx_node(b, "Pow", "pow", "d,two", "d2");
    c = ktt_onnx_node(b, "ReduceMean", "var", "d2", "va");
    ktt_attr_ints(c, "axes", 1, D(-1));
    ktt_onnx_node(b, "Add", "eps", "va,epsilon", "ve");
    ktt_onnx_node(b, "Sqrt", "sqrt", "ve", "sd");
    ktt_onnx_node(b, "Div", "norm", "d,sd", "n");
    ktt_onnx_node(b, "Mul", "gamma", "n,g", "ng");
    ktt_onnx_node(b, "Add", "beta", "ng,bt", out);
}

/* MatMul + bias + GELU (erf form) as one task, then the LayerNorm
 * pattern with scale and shift as one task. */
static void
test_gelu_layer_norm(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct kt_onnx_graph *g;
    (void)state;
    ktt_onnx_input(b, "x", 3, D(1, 10, 32));
    ktt_onnx_init(b, "w", 2, D(32, 48), NULL);
    ktt_onnx_init(b, "wb", 1, D(48), NULL);
    ktt_onnx_scalar(b, "sqrt2", 1.41421356f);
    ktt_onnx_scalar(b, "one", 1);
    ktt_onnx_scalar(b, "half", 0.5f);
    ktt_onnx_scalar(b, "two", 2);
    ktt_onnx_scalar(b, "epsilon", 1e-5f);
    ktt_onnx_init(b, "g", 1, D(48), NULL);
    ktt_onnx_init(b, "bt", 1, D(48), NULL);
    ktt_onnx_node(b, "MatMul", "mm", "x,w", "y");
    ktt_onnx_node(b, "Add", "bias", "y,wb", "yb");
    ktt_onnx_node(b, "Div", "gdiv", "yb,sqrt2", "q");
    ktt_onnx_node(b, "Erf", "erf", "q", "e");
    ktt_onnx_node(b, "Add", "gadd", "e,one", "e1");
    ktt_onnx_node(b, "Mul", "gmul", "yb,e1", "ge");
    ktt_onnx_node(b, "Mul", "ghalf", "ge,half", "h");
    layer_norm_nodes(b, "h", "out");
    ktt_onnx_output(b, "out");
    g = import(b, NULL, 0, 0, 0);
    assert_int_equal(g->nkernels, 2);
    assert_role(g, "erf", KT_ONNX_ROLE_FUSED, 0);
    assert_role(g, "ghalf", KT_ONNX_ROLE_FUSED, 0);
    assert_int_equal(g->kernels[1].kind, KT_ONNX_K_LAYER_NORM);
    assert_role(g, "mean", KT_ONNX_ROLE_TASK, 1);
    assert_role(g, "sqrt", KT_ONNX_ROLE_FUSED, 1);
    assert_role(g, "beta", KT_ONNX_ROLE_FUSED, 1);
    assert_non_null(strstr(g->kernels[1].def.name, "layer_norm_10x48"));
    /* mean 2, diff 1, var 3 (mul, mul, add), norm 3 (div, sqrt, add) per
     * element, then scale and shift */
    assert_flops(g->kernels[1].flops, 480.0 * (2 + 1 + 3 + 3) + 480.0 * 2);
    kt_onnx_free(g);
}

/* The LayerNormalization operator gives the same workload as the pattern. */
static void
test_layer_norm_op(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(17);
    struct ktt_onnx *b2 = ktt_onnx_new(13);
    struct ktt_onnx_node *c;
    struct kt_onnx_graph *g, *g2;
    (void)state;
    ktt_onnx_input(b, "h", 2, D(10, 48));
    ktt_onnx_init(b, "g", 1, D(48), NULL);
    ktt_onnx_init(b, "bt", 1, D(48), NULL);
    c = ktt_onnx_node(b, "LayerNormalization", "ln", "h,g,bt", "out");
    ktt_attr_float(c, "epsilon", 1e-5f);
    ktt_onnx_output(b, "out");
    g = import(b, NULL, 0, 0, 0);
    ktt_onnx_input(b2, "h", 2, D(10, 48));
    ktt_onnx_scalar(b2, "two", 2);
    ktt_onnx_scalar(b2, "epsilon", 1e-5f);
    ktt_onnx_init(b2, "g", 1, D(48), NULL);
    ktt_onnx_init(b2, "bt", 1, D(48), NULL);
    layer_norm_nodes(b2, "h", "out");
    ktt_onnx_output(b2, "out");
    g2 = import(b2, NULL, 0, 0, 0);
    assert_int_equal(g->nkernels, 1);
    assert_int_equal(g2->nkernels, 1);
    assert_flops(g->kernels[0].flops, g2->kernels[0].flops);
    assert_string_equal(g->kernels[0].def.text, g2->kernels[0].def.text);
    kt_onnx_free(g);
    kt_onnx_free(g2);
}

/* A GELU op and a standalone Erf become elementwise tasks whose values
 * match erf from libm (the compute language has no erf). */
static void
test_gelu_erf_values(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(20);
    struct kt_onnx_graph *g;
    float in[64], out[64];
    int i;
    (void)state;
    ktt_onnx_input(b, "x", 2, D(4, 16));
    ktt_onnx_input(b, "z", 2, D(4, 16));
    ktt_onnx_node(b, "Gelu", "gelu", "x", "y");
    ktt_onnx_node(b, "Erf", "erf", "z", "e");
    ktt_onnx_output(b, "y");
    ktt_onnx_output(b, "e");
    g = import(b, NULL, 0, 0, 0);
    assert_int_equal(g->nkernels, 2);
    assert_int_equal(g->kernels[0].kind, KT_ONNX_K_ELEMENTWISE);
    for (i = 0; i < 64; i++)
        in[i] = -4.0f + 8.0f * (float)i / 63;
    run_def(&g->kernels[0].def, (const struct feed[]){{"P0", in, 64}}, 1, out,
            64);
    for (i = 0; i < 64; i++)
        assert_true(fabs(out[i] - 0.5 * in[i] * (1 + erf(in[i] / sqrt(2.0)))) <
                    2e-6);
    run_def(&g->kernels[1].def, (const struct feed[]){{"P0", in, 64}}, 1, out,
            64);
    for (i = 0; i < 64; i++)
        assert_true(fabs(out[i] - erf(in[i])) < 2e-6);
    kt_onnx_free(g);
}

/* ---- Pools, activations, layout ---------------------------------------------- */

static void
test_pools(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct ktt_onnx_node *c;
    struct kt_onnx_graph *g;
    (void)state;
    ktt_onnx_input(b, "x", 4, D(1, 4, 9, 9));
    c = ktt_onnx_node(b, "MaxPool", "mp", "x", "m");
    ktt_attr_ints(c, "kernel_shape", 2, D(3, 3));
    ktt_attr_ints(c, "strides", 2, D(2, 2));
    ktt_attr_ints(c, "pads", 4, D(1, 1, 1, 1));
    c = ktt_onnx_node(b, "AveragePool", "ap", "m", "a");
    ktt_attr_ints(c, "kernel_shape", 2, D(2, 3));
    ktt_attr_ints(c, "strides", 2, D(2, 1));
    ktt_attr_ints(c, "pads", 4, D(0, 1, 0, 1));
    ktt_attr_int(c, "ceil_mode", 1);
    ktt_onnx_node(b, "GlobalAveragePool", "gap", "a", "p");
    ktt_onnx_output(b, "p");
    g = import(b, NULL, 0, 0, 0);
    assert_shape(g, "m", 4, D(1, 4, 5, 5));
    assert_shape(g, "a", 4, D(1, 4, 3, 5));
    assert_shape(g, "p", 4, D(1, 4, 1, 1));
    assert_int_equal(g->nkernels, 3);
    assert_flops(g->kernels[0].flops, 1.0 * 4 * 25 * 9);
    /* excluding padding: the window counts come in as Nrm[3, 5] */
    assert_non_null(strstr(g->kernels[1].def.text, "Nrm[y,x]"));
    assert_flops(g->kernels[1].flops, 2.0 * 4 * 15 * 6);
    assert_flops(g->kernels[2].flops, 2.0 * 4 * 15);
    kt_onnx_free(g);
}

/* HardSigmoid fused after Gemm (values checked), a standalone ReduceMean
 * over H and W, Softmax at opset 11 (2-D coercion), Resize nearest by
 * sizes. */
static void
test_more_ops(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(11);
    struct ktt_onnx_node *c;
    struct kt_onnx_graph *g;
    float out[8];
    int i;
    (void)state;
    ktt_onnx_input(b, "x", 2, D(2, 3));
    ktt_onnx_input(b, "img", 4, D(1, 4, 5, 6));
    ktt_onnx_init(b, "w", 2, D(3, 4),
                  (const float[]){1, 0, 0, -1, 0, 1, 0, 2, 0, 0, 1, 3});
    ktt_onnx_init_i64(b, "sz", 4, D(1, 4, 10, 3));
    ktt_onnx_node(b, "Gemm", "fc", "x,w", "y");
    c = ktt_onnx_node(b, "HardSigmoid", "hsig", "y", "h");
    ktt_attr_float(c, "alpha", 0.25f);
    c = ktt_onnx_node(b, "ReduceMean", "rm", "img", "m");
    ktt_attr_ints(c, "axes", 2, D(2, 3));
    ktt_attr_int(c, "keepdims", 0);
    ktt_onnx_node(b, "Softmax", "sm", "img", "s");
    c = ktt_onnx_node(b, "Resize", "near", "img,,,sz", "r");
    ktt_attr_str(c, "mode", "nearest");
    ktt_onnx_output(b, "h");
    ktt_onnx_output(b, "m");
    ktt_onnx_output(b, "s");
    ktt_onnx_output(b, "r");
    g = import(b, NULL, 0, 0, 0);
    assert_shape(g, "h", 2, D(2, 4));
    assert_shape(g, "m", 2, D(1, 4));
    assert_shape(g, "r", 4, D(1, 4, 10, 3));
    assert_int_equal(g->nkernels, 3);
    assert_role(g, "hsig", KT_ONNX_ROLE_FUSED, 0);
    assert_role(g, "near", KT_ONNX_ROLE_UNTUNED, -1);
    assert_non_null(strstr(g->kernels[1].def.name, "reduce_mean_4x30x1"));
    assert_flops(g->kernels[1].flops, 2.0 * 120);
    assert_non_null(strstr(g->kernels[2].def.name, "softmax_1x120"));
    /* hardsigmoid(x W) for x = [[1,2,3],[-4,0,4]] */
    run_def(&g->kernels[0].def,
            (const struct feed[]){{"A", (const float[]){1, 2, 3, -4, 0, 4}, 6},
                                  {"B",
                                   (const float[]){1, 0, 0, -1, 0, 1, 0, 2, 0,
                                                   0, 1, 3},
                                   12}},
            2, out, 8);
    for (i = 0; i < 8; i++) {
        const float y[8] = {1, 2, 3, 12, -4, 0, 4, 16};
        assert_true(fabsf(out[i] - fminf(fmaxf(y[i] * 0.25f + 0.5f, 0), 1)) <
                    1e-6f);
    }
    kt_onnx_free(g);
}

/* Cheap and layout ops run untuned; their shapes still chain. */
static void
test_layout_ops(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct ktt_onnx_node *c;
    struct kt_onnx_graph *g;
    int i;
    (void)state;
    ktt_onnx_input(b, "x", 4, D(2, 3, 4, 5));
    ktt_onnx_init_i64(b, "starts", 2, D(1, 0));
    ktt_onnx_init_i64(b, "ends", 2, D(4, -1));
    ktt_onnx_init_i64(b, "axes", 2, D(2, 3));
    ktt_onnx_init_i64(b, "ax0", 1, D(0));
    ktt_onnx_init(b, "scales", 1, D(4), (const float[]){1, 1, 2, 2});
    ktt_onnx_scalar(b, "p", 3);
    ktt_onnx_node(b, "Slice", "slice", "x,starts,ends,axes", "s");
    ktt_onnx_node(b, "Unsqueeze", "unsq", "s,ax0", "u");
    ktt_onnx_node(b, "Squeeze", "sq", "u,ax0", "q");
    c = ktt_onnx_node(b, "Concat", "cat", "q,q", "cc");
    ktt_attr_int(c, "axis", 1);
    c = ktt_onnx_node(b, "Resize", "up", "cc,,scales", "r");
    ktt_attr_str(c, "mode", "linear");
    ktt_onnx_node(b, "Identity", "id", "r", "i");
    ktt_onnx_node(b, "Dropout", "drop", "i", "dr");
    ktt_onnx_node(b, "Sqrt", "sqrt", "dr", "sq2");
    ktt_onnx_node(b, "Pow", "pow", "sq2,p", "pw");
    c = ktt_onnx_node(b, "Transpose", "tr", "pw", "t");
    ktt_attr_ints(c, "perm", 4, D(0, 2, 3, 1));
    ktt_onnx_node(b, "Flatten", "flat", "t", "f");
    ktt_onnx_node(b, "HardSwish", "hsw", "f", "h");
    ktt_onnx_output(b, "h");
    g = import(b, NULL, 0, 0, 0);
    assert_shape(g, "s", 4, D(2, 3, 3, 4));
    assert_shape(g, "u", 5, D(1, 2, 3, 3, 4));
    assert_shape(g, "cc", 4, D(2, 6, 3, 4));
    assert_shape(g, "r", 4, D(2, 6, 6, 8));
    assert_shape(g, "t", 4, D(2, 6, 8, 6));
    assert_shape(g, "f", 2, D(2, 288));
    assert_int_equal(g->nkernels, 0);
    for (i = 0; i < g->nnodes; i++)
        assert_int_equal(g->nodes[i].role, KT_ONNX_ROLE_UNTUNED);
    kt_onnx_free(g);
}

/* Exporters compute Reshape targets with Shape/Gather/Cast/Concat: folded. */
static void
test_shape_arithmetic(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct ktt_onnx_node *c;
    struct kt_onnx_graph *g;
    (void)state;
    ktt_onnx_input(b, "x", 4, D(-1, 8, 2, 2));
    ktt_onnx_init_i64(b, "i0", 1, D(0));
    ktt_onnx_init_i64(b, "minus1", 1, D(-1));
    ktt_onnx_node(b, "Shape", "shape", "x", "sh");
    c = ktt_onnx_node(b, "Gather", "gather", "sh,i0", "n");
    ktt_attr_int(c, "axis", 0);
    c = ktt_onnx_node(b, "Cast", "cast", "n", "nc");
    ktt_attr_int(c, "to", 7);
    c = ktt_onnx_node(b, "Concat", "cat", "nc,minus1", "target");
    ktt_attr_int(c, "axis", 0);
    ktt_onnx_node(b, "Reshape", "rs", "x,target", "y");
    ktt_onnx_output(b, "y");
    g = import(b, (const struct kt_onnx_input[]){{"x", 4, D(3, 8, 2, 2)}}, 1, 0,
               0);
    assert_shape(g, "y", 2, D(3, 32));
    assert_int_equal(node(g, "cat")->role, KT_ONNX_ROLE_CONSTANT);
    kt_onnx_free(g);
}

/* Equal blocks share one task. */
/* g has n kernels, kernel i of task task_of[i], and ntasks tasks. */
static void
assert_kernel_tasks(const struct kt_onnx_graph *g, int n, const int *task_of,
                    int ntasks)
{
    int i;

    assert_int_equal(g->nkernels, n);
    assert_int_equal(g->ntasks, ntasks);
    for (i = 0; i < n; i++)
        if (g->kernels[i].task != task_of[i])
            fail_msg("kernel %d is of task %d, want %d", i, g->kernels[i].task,
                     task_of[i]);
}

static void
test_dedup(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct ktt_onnx_node *c;
    struct kt_onnx_graph *g;
    (void)state;
    ktt_onnx_input(b, "x", 4, D(1, 4, 6, 6));
    ktt_onnx_init(b, "w0", 4, D(4, 4, 3, 3), NULL);
    ktt_onnx_init(b, "w1", 4, D(4, 4, 3, 3), NULL);
    ktt_onnx_init(b, "w2", 4, D(4, 4, 1, 1), NULL);
    c = ktt_onnx_node(b, "Conv", "c0", "x,w0", "y0");
    ktt_attr_ints(c, "pads", 4, D(1, 1, 1, 1));
    ktt_onnx_node(b, "Relu", "r0", "y0", "z0");
    c = ktt_onnx_node(b, "Conv", "c1", "z0,w1", "y1");
    ktt_attr_ints(c, "pads", 4, D(1, 1, 1, 1));
    ktt_onnx_node(b, "Relu", "r1", "y1", "z1");
    ktt_onnx_node(b, "Conv", "c2", "z1,w2", "y2");
    ktt_onnx_output(b, "y2");
    g = import(b, NULL, 0, 0, 0);
    assert_kernel_tasks(g, 3, (const int[]){0, 0, 1}, 2);
    kt_onnx_free(g);
}

/* Two convolutions of one shape, each followed by its own learned scalar
 * scale and shift (PP-LCNet's affine blocks): the scalars are inputs of
 * one element, and the layers one task of weight 2.  A square root after
 * the shift keeps the numbers (random inputs would make it NaN). */
static void
test_dedup_scalar_affine(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct kt_onnx_graph *g;
    (void)state;
    ktt_onnx_input(b, "x", 4, D(1, 4, 6, 6));
    ktt_onnx_conv_affine(b, 0, 4, "x", 1.25f, 0.5f, "o0");
    ktt_onnx_conv_affine(b, 1, 4, "o0", 0.75f, -0.25f, "o1");
    ktt_onnx_init(b, "w2", 4, D(4, 4, 1, 1), NULL);
    ktt_onnx_scalar(b, "eps", 1e-3f);
    ktt_onnx_node(b, "Conv", "c2", "o1,w2", "y2");
    ktt_onnx_node(b, "Mul", "m2", "y2,y2", "q2");
    ktt_onnx_node(b, "Add", "a2", "q2,eps", "e2");
    ktt_onnx_node(b, "Sqrt", "r2", "e2", "out");
    ktt_onnx_output(b, "out");
    g = import(b, NULL, 0, 0, 0);
    assert_kernel_tasks(g, 3, (const int[]){0, 0, 1}, 2);
    assert_int_equal(g->kernels[0].nextra, 2);
    assert_int_equal(g->kernels[1].nextra, 2);
    if (strstr(g->kernels[0].def.text, "P0[0]") == NULL)
        print_error("%s\n", g->kernels[0].def.text);
    assert_non_null(strstr(g->kernels[0].def.text, "* P0[0]"));
    assert_non_null(strstr(g->kernels[0].def.text, "+ P1[0]"));
    assert_string_equal(g->kernels[0].def.text, g->kernels[1].def.text);
    assert_int_equal(g->kernels[2].nextra, 0);
    assert_non_null(strstr(g->kernels[2].def.text, "+ (0.00100000005)"));
    kt_onnx_free(g);
}

/* ---- Errors ------------------------------------------------------------------ */

static struct ktt_onnx *
small_model(void)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    ktt_onnx_input(b, "x", 4, D(1, 3, 8, 8));
    ktt_onnx_init(b, "w", 4, D(4, 3, 3, 3), NULL);
    ktt_onnx_node(b, "Conv", "conv", "x,w", "y");
    ktt_onnx_output(b, "y");
    return b;
}

static void
test_malformed(void **state)
{
    struct kt_onnx_graph *g = NULL;
    struct ktt_onnx *b = small_model();
    size_t len, cut;
    uint8_t *buf = ktt_onnx_pack(b, &len);
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x12, 0x99};
    int rc;
    (void)state;
    ktt_onnx_free(b);
    /* every truncation either fails with a message or decodes a smaller
     * model; none crashes */
    for (cut = 0; cut < len; cut++) {
        rc = kt_onnx_import_mem("t.onnx", buf, cut, NULL, 0, 0, &g, err,
                                sizeof(err));
        if (rc == 0)
            kt_onnx_free(g);
        else
            assert_non_null(strstr(err, "t.onnx: "));
    }
    rc = kt_onnx_import_mem("t.onnx", buf, len / 2, NULL, 0, 0, &g, err,
                            sizeof(err));
    assert_int_equal(rc, KT_EPARSE);
    assert_non_null(strstr(err, "malformed or truncated"));
    free(buf);
    rc = kt_onnx_import_mem("junk.onnx", junk, sizeof(junk), NULL, 0, 0, &g,
                            err, sizeof(err));
    assert_int_equal(rc, KT_EPARSE);
    assert_null(g);
    rc = kt_onnx_import("/nonexistent/m.onnx", NULL, 0, 0, &g, err,
                        sizeof(err));
    assert_true(rc < 0);
    assert_non_null(strstr(err, "/nonexistent/m.onnx: cannot open"));
}

static void
test_unsupported(void **state)
{
    struct ktt_onnx *b;
    struct kt_onnx_graph *g;
    int pass;
    (void)state;
    for (pass = 0; pass < 2; pass++) {
        b = small_model();
        ktt_onnx_node(b, "NonMaxSuppression", "nms1", "y", "n1");
        ktt_onnx_node(b, "NonMaxSuppression", "nms2", "y", "n2");
        ktt_onnx_node(b, "TopK", "topk", "y", "t");
        ktt_onnx_node(b, "Relu", "after", "t", "ra");
        g = import(b, NULL, 0, pass ? KT_ONNX_PARTIAL : 0,
                   pass ? 0 : KT_EINVAL);
        if (!pass) {
            assert_non_null(strstr(err, "NonMaxSuppression x2 (operator not "
                                        "supported; nodes 'nms1', 'nms2')"));
            assert_non_null(strstr(err, "TopK x1"));
            assert_non_null(strstr(err, "1 node after them"));
            assert_non_null(strstr(err, "--partial"));
            continue;
        }
        assert_int_equal(g->nkernels, 1);
        assert_int_equal(g->nunsupported, 4);
        assert_int_equal(node(g, "topk")->role, KT_ONNX_ROLE_UNSUPPORTED);
        assert_int_equal(node(g, "after")->role, KT_ONNX_ROLE_UNSUPPORTED);
        kt_onnx_free(g);
    }
}

static void
test_shape_errors(void **state)
{
    struct ktt_onnx *b = small_model();
    struct kt_onnx_graph *g;
    (void)state;
    /* conv2 wants 8 channels, conv makes 4: both nodes are named */
    ktt_onnx_init(b, "w2", 4, D(2, 8, 1, 1), NULL);
    ktt_onnx_node(b, "Conv", "conv2", "y,w2", "y2");
    g = import(b, NULL, 0, 0, KT_ESHAPE);
    assert_null(g);
    assert_non_null(strstr(err, "node 'conv2' (Conv)"));
    assert_non_null(strstr(err, "from node 'conv' (Conv)"));
    assert_non_null(strstr(err, "expects 8 input channels, the input has 4"));

    b = small_model();
    ktt_onnx_init(b, "v", 2, D(3, 7), NULL);
    ktt_onnx_node(b, "Add", "add", "y,v", "z");
    g = import(b, NULL, 0, 0, KT_ESHAPE);
    assert_non_null(strstr(err, "node 'add' (Add): input 'y' (from node "
                                "'conv' (Conv), 1x4x6x6): does not broadcast"));

    b = ktt_onnx_new(13);
    ktt_onnx_input(b, "img", 4, D(-1, 3, 8, 8));
    ktt_onnx_node(b, "Relu", "r", "img", "o");
    g = import(b, NULL, 0, 0, KT_ESHAPE);
    assert_non_null(strstr(err, "input 'img' dim 0 is dynamic (N): give the "
                                "shape with --input img=D1,D2,..."));

    /* a dim_value out of range is dynamic too, and has no name: its value
     * is not read as one (protobuf oneof; found by fuzz_onnx) */
    b = ktt_onnx_new(13);
    ktt_onnx_input(b, "img", 4, D((int64_t)1 << 30, 3, 8, 8));
    ktt_onnx_node(b, "Relu", "r", "img", "o");
    g = import(b, NULL, 0, 0, KT_ESHAPE);
    assert_non_null(strstr(err, "input 'img' dim 0 is dynamic (unnamed)"));

    b = small_model();
    g = import(b, (const struct kt_onnx_input[]){{"x", 4, D(1, 4, 8, 8)}}, 1, 0,
               KT_ESHAPE);
    assert_non_null(strstr(err, "dim 1 is 4 but the model fixes it to 3"));

    b = small_model();
    ktt_onnx_node(b, "Relu", "r", "nowhere", "o");
    g = import(b, NULL, 0, 0, KT_EPARSE);
    assert_non_null(strstr(err, "node 'r' (Relu) reads tensor 'nowhere'"));
}

/* ReduceMean's axes as an input (opset 18) are cast to integers only when
 * they are whole numbers in range: a float tensor of NaN, an infinity or
 * 1.5 is refused by name, not cast (a NaN cast is undefined behaviour;
 * found by fuzz_onnx); a constant int input left out is refused too. */
static void
test_reduce_axes_not_integers(void **state)
{
    const float bad[] = {NAN, INFINITY, 1.5f, -1e30f};
    struct ktt_onnx *b;
    struct kt_onnx_graph *g;
    size_t i;
    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        b = ktt_onnx_new(18);
        ktt_onnx_input(b, "x", 2, D(4, 6));
        ktt_onnx_init(b, "ax", 1, D(1), &bad[i]);
        ktt_onnx_node(b, "ReduceMean", "rm", "x,ax", "m");
        ktt_onnx_output(b, "m");
        g = import(b, NULL, 0, 0, KT_EINVAL);
        assert_null(g);
        assert_non_null(strstr(err, "ReduceMean x1 (axes that are not "
                                    "constants in range; node 'rm')"));
    }
    b = ktt_onnx_new(18);
    ktt_onnx_input(b, "x", 2, D(4, 6));
    ktt_onnx_init(b, "ax", 1, D(1), (const float[]){-1.0f});
    ktt_onnx_node(b, "ReduceMean", "rm", "x,ax", "m");
    ktt_onnx_output(b, "m");
    g = import(b, NULL, 0, 0, 0);
    assert_shape(g, "m", 2, D(4, 1));
    kt_onnx_free(g);
    /* a Reshape whose shape input is left out (an empty name) is refused
     * by name: that input was read through a NULL value (fuzz_onnx) */
    b = ktt_onnx_new(13);
    ktt_onnx_input(b, "x", 2, D(4, 6));
    ktt_onnx_node(b, "Reshape", "rs", "x,", "y");
    ktt_onnx_output(b, "y");
    assert_null(import(b, NULL, 0, 0, KT_EINVAL));
    assert_non_null(strstr(err, "Reshape x1 (a target shape that is not a "
                                "constant of at most 8 dims; node 'rs')"));
}

/* ---- Config and task extraction ------------------------------------------------ */

static void
test_config_and_tasks(void **state)
{
    char dir[] = "/tmp/kt_onnx_XXXXXX", path[256], cpath[256];
    struct kt_model_conf *m = NULL;
    struct kt_tasks t;
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct ktt_onnx_node *c;
    const char *specs[1] = {"x=2,3,8,8"};
    FILE *f;
    (void)state;
    assert_non_null(mkdtemp(dir));
    ktt_onnx_input(b, "x", 4, D(-1, 3, 8, 8));
    ktt_onnx_init(b, "w", 4, D(4, 3, 3, 3), NULL);
    ktt_onnx_init(b, "w2", 4, D(4, 4, 3, 3), NULL);
    c = ktt_onnx_node(b, "Conv", "conv", "x,w", "y");
    ktt_attr_ints(c, "pads", 4, D(1, 1, 1, 1));
    ktt_onnx_node(b, "Relu", "r", "y", "z");
    c = ktt_onnx_node(b, "Conv", "conv2", "z,w2", "y2");
    ktt_attr_ints(c, "pads", 4, D(1, 1, 1, 1));
    ktt_onnx_output(b, "y2");
    snprintf(path, sizeof(path), "%s/net.onnx", dir);
    assert_int_equal(ktt_onnx_write(b, path), 0);
    ktt_onnx_free(b);

    /* a JSON config naming the file relative to itself */
    snprintf(cpath, sizeof(cpath), "%s/net.json", dir);
    f = fopen(cpath, "w");
    fputs("{\"onnx\": \"net.onnx\", \"inputs\": {\"x\": [1, 3, 8, 8]},\n"
          " \"tuning\": {\"trials\": 64}}\n",
          f);
    fclose(f);
    assert_int_equal(kt_model_conf_load(cpath, &m, err, sizeof(err)), 0);
    assert_string_equal(m->onnx, path);
    assert_int_equal(kt_tasks_extract(m, &t, err, sizeof(err)), 0);
    assert_int_equal(t.n, 2);
    assert_flops(t.v[0].flops, 2.0 * 4 * 64 * 27 + 4.0 * 64); /* relu */
    assert_flops(t.v[1].flops, 2.0 * 4 * 64 * 36);
    kt_tasks_free(&t);
    kt_model_conf_free(m);

    /* the .onnx file itself with --input (batch 2) */
    assert_int_equal(kt_model_conf_load_cli(path, specs, 1, 0, &m, err,
                                            sizeof(err)),
                     0);
    assert_string_equal(m->name, "net");
    assert_int_equal(kt_tasks_extract(m, &t, err, sizeof(err)), 0);
    assert_flops(t.v[1].flops, 2.0 * 2 * 4 * 64 * 36);
    kt_tasks_free(&t);
    kt_model_conf_free(m);

    /* without the batch size: the error names the input */
    assert_int_equal(kt_model_conf_load_cli(path, NULL, 0, 0, &m, err,
                                            sizeof(err)),
                     0);
    assert_int_equal(kt_tasks_extract(m, &t, err, sizeof(err)), KT_ESHAPE);
    assert_non_null(strstr(err, "input 'x' dim 0 is dynamic"));
    kt_model_conf_free(m);

    specs[0] = "x=2,3,,8";
    assert_int_equal(kt_model_conf_load_cli(path, specs, 1, 0, &m, err,
                                            sizeof(err)),
                     KT_ECONFIG);
    assert_non_null(strstr(err, "--input 'x=2,3,,8': expected NAME=D1,D2"));
    unlink(cpath);
    unlink(path);
    rmdir(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_bn_relu),
        cmocka_unit_test(test_conv_hardswish_residual),
        cmocka_unit_test(test_pointwise_conv_operand_along_x),
        cmocka_unit_test(test_fusion_stops_at_shared_value),
        cmocka_unit_test(test_conv_geometry),
        cmocka_unit_test(test_conv_transpose),
        cmocka_unit_test(test_conv_transpose_values),
        cmocka_unit_test(test_gemm_matmul),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_matmul_of_activations),
        cmocka_unit_test(test_gelu_layer_norm),
        cmocka_unit_test(test_layer_norm_op),
        cmocka_unit_test(test_gelu_erf_values),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_more_ops),
        cmocka_unit_test(test_layout_ops),
        cmocka_unit_test(test_shape_arithmetic),
        cmocka_unit_test(test_dedup),
        cmocka_unit_test(test_dedup_scalar_affine),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_shape_errors),
        cmocka_unit_test(test_reduce_axes_not_integers),
        cmocka_unit_test(test_config_and_tasks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
