/* test_compile_net.c - the whole network kt_compile writes for an ONNX
 * model, built with the real compiler and run by its inference program:
 * untuned nodes (a batch norm that is not folded, sigmoid, a broadcast
 * multiply, transpose, concat), a conv + relu + broadcast add kernel and
 * two graph outputs; ConvTranspose, Slice with steps, nearest and linear
 * Resize; each against plain loops written here; a graph with a node
 * the network has no C for is compiled without its network and says why. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/compile.h"
#include "tests/support/ktt_onnx.h"
#include "tests/unit/test_storage_util.h"
#include "tests/support/ktt.h"

#define D(...) ((const int64_t[]){__VA_ARGS__})

/* ktt_onnx_init's fill for initializers without data. */
static double
fill(int i)
{
    return 0.01 * (i % 100) + 0.5;
}

/* Writes model b to dir/m.onnx (and frees b), compiles it untuned into
 * dir/lib; fails the test on an error. */
static void
compile_model(struct ktt_onnx *b, const char *dir)
{
    struct kt_model_conf *m = NULL;
    struct kt_compile_opts o = {.db_path = "(none)"};
    char text[4400], out[4400], err[1024];
    int rc;

    snprintf(text, sizeof(text), "%s/m.onnx", dir);
    assert_int_equal(ktt_onnx_write(b, text), 0);
    ktt_onnx_free(b);
    snprintf(text, sizeof(text),
             "{\"name\": \"m\", \"onnx\": \"%s/m.onnx\", \"target\": "
             "{\"cflags\": [\"-O1\", \"-fopenmp\"]}}",
             dir);
    snprintf(out, sizeof(out), "%s/lib", dir);
    o.out_dir = out;
    o.untuned = 1;
    rc = kt_model_conf_parse("m.json", text, &m, err, sizeof(err));
    if (rc == KT_OK)
        rc = kt_compile(m, &o, NULL, err, sizeof(err));
    kt_model_conf_free(m);
    if (rc != KT_OK)
        fail_msg("%s", err);
}

/* x -> BN -> sigmoid (output 1) -> * c[2,1,1] -> transpose(0,1,3,2) ->
 * concat(t, t, axis 1) -> conv 1x1 (3 filters, bias) -> relu -> + d[3]
 * (output 0). */
static void
reference(const float *x, float *out, float *sg)
{
    float t[2][4][3];
    int c, h, w, f, k;

    for (c = 0; c < 2; c++)
        for (h = 0; h < 3; h++)
            for (w = 0; w < 4; w++) {
                double v = x[c * 12 + h * 4 + w];
                double b = (v - fill(c)) / sqrt(fill(c) + 1e-5) * fill(c) +
                           fill(c);
                sg[c * 12 + h * 4 + w] = (float)(1 / (1 + exp(-b)));
                t[c][w][h] = (float)(sg[c * 12 + h * 4 + w] * fill(c));
            }
    for (f = 0; f < 3; f++)
        for (w = 0; w < 4; w++)
            for (h = 0; h < 3; h++) {
                double y = fill(f);
                for (k = 0; k < 4; k++)
                    y += fill(f * 4 + k) * t[k % 2][w][h];
                out[f * 12 + w * 3 + h] = (float)((y > 0 ? y : 0) + fill(h));
            }
}

/* Builds dir/lib's inference program and runs it on dir/lib/in.bin;
 * fails the test with the build or run output. */
static void
run_infer(const char *dir)
{
    char cmd[9000], *make_out, *run_out;

    snprintf(cmd, sizeof(cmd),
             "cd '%s/lib' && make -s infer >make.out 2>&1 && ./m_infer -i "
             "in.bin -o out.bin -n 2 >run.out 2>&1",
             dir);
    if (system(cmd) == 0)
        return;
    make_out = ktt_slurp(dir, "lib/make.out", NULL);
    run_out = ktt_slurp(dir, "lib/run.out", NULL);
    fail_msg("%s\nmake: %.2000s\nrun: %.2000s", cmd, make_out ? make_out : "",
             run_out ? run_out : "");
}

/* Writes x (nx floats) to dir/lib/in.bin, runs the inference program on
 * it and reads its nout outputs into out. */
static void
infer_once(const char *dir, const float *x, size_t nx, float *out, size_t nout)
{
    char path[4200], *text;
    size_t len;
    FILE *f;

    snprintf(path, sizeof(path), "%s/lib/in.bin", dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(x, 4, nx, f), nx);
    fclose(f);
    run_infer(dir);
    text = ktt_slurp(dir, "lib/out.bin", &len);
    assert_non_null(text);
    assert_int_equal(len, nout * 4);
    memcpy(out, text, nout * 4);
    free(text);
}

/* dir/lib/manifest.json (caller frees). */
static char *
manifest(const char *dir)
{
    char *text = ktt_slurp(dir, "lib/manifest.json", NULL);

    assert_non_null(text);
    return text;
}

/* dir/lib/manifest.json counts these untuned nodes, run in these steps
 * (steps < 0: not checked). */
static void
assert_untuned(const char *dir, int nodes, int steps)
{
    char *text = manifest(dir), want[64];

    snprintf(want, sizeof(want), "\"untuned_nodes\":\t%d,", nodes);
    assert_non_null(strstr(text, want));
    snprintf(want, sizeof(want), "\"untuned_steps\":\t%d,", steps);
    if (steps >= 0)
        assert_non_null(strstr(text, want));
    free(text);
}

/* got[i] within 1e-5 relative (plus 1e-5) of want[i], i < n. */
static void
assert_near(const float *got, const float *want, int n)
{
    int i;

    for (i = 0; i < n; i++)
        if (fabsf(got[i] - want[i]) > 1e-5f * (1 + fabsf(want[i])))
            fail_msg("out[%d] = %g, want %g", i, got[i], want[i]);
}

static void
test_network_matches_loops(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct ktt_onnx_node *n;
    char dir[4096], *text;
    float x[24], want[36], want_sg[24], got[60];
    int i;
    (void)state;

    ts_tmpdir(dir, sizeof(dir));
    ktt_onnx_input(b, "x", 4, D(1, 2, 3, 4));
    ktt_onnx_init(b, "s", 1, D(2), NULL);
    ktt_onnx_init(b, "bb", 1, D(2), NULL);
    ktt_onnx_init(b, "mean", 1, D(2), NULL);
    ktt_onnx_init(b, "var", 1, D(2), NULL);
    ktt_onnx_init(b, "c", 3, D(2, 1, 1), NULL);
    ktt_onnx_init(b, "w", 4, D(3, 4, 1, 1), NULL);
    ktt_onnx_init(b, "cb", 1, D(3), NULL);
    ktt_onnx_init(b, "d", 1, D(3), NULL);
    ktt_onnx_node(b, "BatchNormalization", "bn", "x,s,bb,mean,var", "b");
    ktt_onnx_node(b, "Sigmoid", "sig", "b", "sg");
    ktt_onnx_node(b, "Mul", "mul", "sg,c", "mu");
    n = ktt_onnx_node(b, "Transpose", "tr", "mu", "t");
    ktt_attr_ints(n, "perm", 4, D(0, 1, 3, 2));
    n = ktt_onnx_node(b, "Concat", "cat", "t,t", "cc");
    ktt_attr_int(n, "axis", 1);
    ktt_onnx_node(b, "Conv", "conv", "cc,w,cb", "y");
    ktt_onnx_node(b, "Relu", "relu", "y", "r");
    ktt_onnx_node(b, "Add", "add", "r,d", "out");
    ktt_onnx_output(b, "out");
    ktt_onnx_output(b, "sg");
    compile_model(b, dir);
    text = manifest(dir);
    assert_non_null(strstr(text, "\"peak_activation_bytes\""));
    free(text);
    assert_untuned(dir, 5, -1);

    for (i = 0; i < 24; i++)
        x[i] = (float)((i * 7 % 24) / 12.0 - 1);
    reference(x, want, want_sg);
    infer_once(dir, x, 24, got, sizeof(got) / sizeof(got[0]));
    assert_near(got, want, 36);
    for (i = 0; i < 24; i++)
        if (fabsf(got[36 + i] - want_sg[i]) > 1e-6f)
            fail_msg("sg[%d] = %g, want %g", i, got[36 + i], want_sg[i]);
    ts_rmrf(dir);
}

/* ktt_onnx_init's fill of element i of a tensor. */
#define F(i) ((float)fill(i))

/* Two 1x1 convolutions of one shape, each with its own scalar scale and
 * shift: one task (the scalars are its inputs, docs/onnx.md), run by the
 * network with each layer's own numbers. */
static void
test_network_scalar_inputs(void **state)
{
    static const float scale[2] = {1.25f, -0.75f}, shift[2] = {0.5f, 2};
    struct ktt_onnx *b = ktt_onnx_new(13);
    char dir[4096], *text;
    float x[18], h[2][18], got[18];
    int i, l, f, c;
    (void)state;

    ts_tmpdir(dir, sizeof(dir));
    ktt_onnx_input(b, "x", 4, D(1, 2, 3, 3));
    ktt_onnx_conv_affine(b, 0, 2, "x", scale[0], shift[0], "o0");
    ktt_onnx_conv_affine(b, 1, 2, "o0", scale[1], shift[1], "out");
    ktt_onnx_output(b, "out");
    compile_model(b, dir);
    text = manifest(dir);
    assert_non_null(strstr(text, "\"weight\":\t2"));
    assert_null(strstr(text, "\"index\":\t1"));
    free(text);

    for (i = 0; i < 18; i++)
        x[i] = (float)((i * 5 % 18) / 9.0 - 1);
    for (l = 0; l < 2; l++)
        for (f = 0; f < 2; f++)
            for (i = 0; i < 9; i++) {
                const float *in = l == 0 ? x : h[0];
                double y = 0;
                for (c = 0; c < 2; c++)
                    y += F(f * 2 + c) * in[c * 9 + i];
                h[l][f * 9 + i] = (float)(y * scale[l] + shift[l]);
            }
    infer_once(dir, x, 18, got, 18);
    assert_near(got, h[1], 18);
    ts_rmrf(dir);
}

/* ConvTranspose x[1,2,4,4] * w[2,3,3,3] + b, stride 2, pads 1,
 * output_padding 1 -> y[1,3,8,8]; Slice of columns 1, 3, 5 -> s[1,3,8,3];
 * Resize nearest (asymmetric, floor) by 0.5 x 2 -> out0[1,3,4,6]; Resize
 * linear (half_pixel) by 2 x 2 -> out1[1,3,16,6]. */
static void
reference_layout(const float *x, float *out0, float *out1)
{
    float y[3][8][8], sl[3][8][3];
    int f, c, i, j, r, t;

    for (f = 0; f < 3; f++)
        for (i = 0; i < 8; i++)
            for (j = 0; j < 8; j++)
                y[f][i][j] = F(f);
    for (c = 0; c < 2; c++)
        for (i = 0; i < 4; i++)
            for (j = 0; j < 4; j++)
                for (f = 0; f < 3; f++)
                    for (r = 0; r < 3; r++)
                        for (t = 0; t < 3; t++) {
                            int oy = i * 2 - 1 + r, ox = j * 2 - 1 + t;
                            if (oy >= 0 && oy < 8 && ox >= 0 && ox < 8)
                                y[f][oy][ox] += x[(c * 4 + i) * 4 + j] *
                                                F(((c * 3 + f) * 3 + r) * 3 + t);
                        }
    for (f = 0; f < 3; f++)
        for (i = 0; i < 8; i++)
            for (j = 0; j < 3; j++)
                sl[f][i][j] = y[f][i][1 + 2 * j];
    for (f = 0; f < 3; f++)
        for (i = 0; i < 4; i++)
            for (j = 0; j < 6; j++)
                out0[(f * 4 + i) * 6 + j] = sl[f][2 * i][j / 2];
    for (f = 0; f < 3; f++)
        for (i = 0; i < 16; i++)
            for (j = 0; j < 6; j++) {
                double sy = fmin(fmax((i + 0.5) / 2 - 0.5, 0), 7);
                double sx = fmin(fmax((j + 0.5) / 2 - 0.5, 0), 2);
                int y0 = (int)sy, x0 = (int)sx;
                int y1 = y0 + 1 < 8 ? y0 + 1 : 7, x1 = x0 + 1 < 3 ? x0 + 1 : 2;
                double wy = sy - y0, wx = sx - x0;
                double a = sl[f][y0][x0] * (1 - wx) + sl[f][y0][x1] * wx;
                double b = sl[f][y1][x0] * (1 - wx) + sl[f][y1][x1] * wx;
                out1[(f * 16 + i) * 6 + j] = (float)(a * (1 - wy) + b * wy);
            }
}

static void
test_network_layout_ops(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct ktt_onnx_node *n;
    char dir[4096];
    float x[32], want[72 + 288], got[72 + 288];
    int i;
    (void)state;

    ts_tmpdir(dir, sizeof(dir));
    ktt_onnx_input(b, "x", 4, D(1, 2, 4, 4));
    ktt_onnx_init(b, "w", 4, D(2, 3, 3, 3), NULL);
    ktt_onnx_init(b, "b", 1, D(3), NULL);
    ktt_onnx_init_i64(b, "st", 1, D(1));
    ktt_onnx_init_i64(b, "en", 1, D(7));
    ktt_onnx_init_i64(b, "ax", 1, D(3));
    ktt_onnx_init_i64(b, "sp", 1, D(2));
    ktt_onnx_init(b, "sc0", 1, D(4), (const float[]){1, 1, 0.5f, 2});
    ktt_onnx_init(b, "sc1", 1, D(4), (const float[]){1, 1, 2, 2});
    n = ktt_onnx_node(b, "ConvTranspose", "ct", "x,w,b", "y");
    ktt_attr_ints(n, "strides", 2, D(2, 2));
    ktt_attr_ints(n, "pads", 4, D(1, 1, 1, 1));
    ktt_attr_ints(n, "output_padding", 2, D(1, 1));
    ktt_onnx_node(b, "Slice", "sl", "y,st,en,ax,sp", "s");
    n = ktt_onnx_node(b, "Resize", "near", "s,,sc0", "out0");
    ktt_attr_str(n, "coordinate_transformation_mode", "asymmetric");
    ktt_attr_str(n, "nearest_mode", "floor");
    n = ktt_onnx_node(b, "Resize", "lin", "s,,sc1", "out1");
    ktt_attr_str(n, "mode", "linear");
    ktt_onnx_output(b, "out0");
    ktt_onnx_output(b, "out1");
    compile_model(b, dir);

    for (i = 0; i < 32; i++)
        x[i] = (float)((i * 5 % 32) / 16.0 - 1);
    reference_layout(x, want, want + 72);
    infer_once(dir, x, 32, got, sizeof(got) / sizeof(got[0]));
    for (i = 0; i < 72 + 288; i++)
        if (fabsf(got[i] - want[i]) > 1e-5f * (1 + fabsf(want[i])))
            fail_msg("out%d[%d] = %g, want %g", i >= 72, i < 72 ? i : i - 72,
                     got[i], want[i]);
    ts_rmrf(dir);
}

/* x[1,4,H,W], z[1,4,H/2,W/2] -> a = x + x * s[1,4,1,1] (output 1);
 * out = conv1x1(sigmoid(clip(BN(a + resize2x(z)), -1, 1.5))) (output 0,
 * 2 filters): two elementwise steps, the Mul inlined into the first, the
 * Resize, Add, BN and Clip into the second. */
static void
reference_chains(int H, int W, const float *x, const float *z, float *out,
                 float *a)
{
    float *sg = malloc(sizeof(float) * 4 * H * W);
    int c, h, w, f;

    for (c = 0; c < 4; c++)
        for (h = 0; h < H; h++)
            for (w = 0; w < W; w++) {
                int i = (c * H + h) * W + w;
                double b, k;
                a[i] = x[i] + x[i] * F(c);
                b = a[i] + z[(c * H / 2 + h / 2) * W / 2 + w / 2];
                b = (b - F(c)) / sqrt(F(c) + 1e-5) * F(c) + F(c);
                k = b < -1 ? -1 : b > 1.5 ? 1.5 : b;
                sg[i] = (float)(1 / (1 + exp(-k)));
            }
    for (f = 0; f < 2; f++)
        for (h = 0; h < H * W; h++) {
            double y = 0;
            for (c = 0; c < 4; c++)
                y += F(f * 4 + c) * sg[c * H * W + h];
            out[f * H * W + h] = (float)y;
        }
    free(sg);
}

static void
check_chains(int H, int W)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct ktt_onnx_node *n;
    int nx = 4 * H * W, nz = nx / 4, nout = 2 * H * W + nx, i;
    float *in = malloc(sizeof(float) * (size_t)(nx + nz));
    float *want = malloc(sizeof(float) * (size_t)nout);
    float *got = malloc(sizeof(float) * (size_t)nout);
    char dir[4096], *text;

    ts_tmpdir(dir, sizeof(dir));
    ktt_onnx_input(b, "x", 4, D(1, 4, H, W));
    ktt_onnx_input(b, "z", 4, D(1, 4, H / 2, W / 2));
    ktt_onnx_init(b, "s", 4, D(1, 4, 1, 1), NULL);
    ktt_onnx_init(b, "sc", 1, D(4), (const float[]){1, 1, 2, 2});
    ktt_onnx_init(b, "g", 1, D(4), NULL);
    ktt_onnx_init(b, "bb", 1, D(4), NULL);
    ktt_onnx_init(b, "mean", 1, D(4), NULL);
    ktt_onnx_init(b, "var", 1, D(4), NULL);
    ktt_onnx_scalar(b, "lo", -1);
    ktt_onnx_scalar(b, "hi", 1.5f);
    ktt_onnx_init(b, "w", 4, D(2, 4, 1, 1), NULL);
    ktt_onnx_node(b, "Mul", "se", "x,s", "m");
    ktt_onnx_node(b, "Add", "res", "x,m", "a");
    n = ktt_onnx_node(b, "Resize", "up", "z,,sc", "r");
    ktt_attr_str(n, "coordinate_transformation_mode", "asymmetric");
    ktt_attr_str(n, "nearest_mode", "floor");
    ktt_onnx_node(b, "Add", "lat", "a,r", "ab");
    ktt_onnx_node(b, "BatchNormalization", "bn", "ab,g,bb,mean,var", "c");
    ktt_onnx_node(b, "Clip", "clip", "c,lo,hi", "k");
    ktt_onnx_node(b, "Sigmoid", "sig", "k", "sg");
    ktt_onnx_node(b, "Conv", "conv", "sg,w", "out");
    ktt_onnx_output(b, "out");
    ktt_onnx_output(b, "a");
    compile_model(b, dir);
    assert_untuned(dir, 7, 2);
    text = ktt_slurp(dir, "lib/m_net.c", NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "/* Add 'res' + Mul 'se' */"));
    assert_non_null(strstr(text, "/* Sigmoid 'sig' + Clip 'clip' + "
                                 "BatchNormalization 'bn' + Add 'lat' + "
                                 "Resize 'up' */"));
    /* 32768 outputs and more run on all the run's threads */
    assert_int_equal(strstr(text, "#pragma omp parallel") != NULL, nx >= 32768);
    free(text);

    for (i = 0; i < nx + nz; i++)
        in[i] = (float)((i * 7 % 120) / 60.0 - 1);
    reference_chains(H, W, in, in + nx, want, want + 2 * H * W);
    infer_once(dir, in, (size_t)(nx + nz), got, (size_t)nout);
    assert_near(got, want, nout);
    ts_rmrf(dir);
    free(in);
    free(want);
    free(got);
}

static void
test_network_elementwise_chains(void **state)
{
    (void)state;
    check_chains(4, 6);
    check_chains(64, 128);
}

/* c = concat(x, relu(x), sigmoid(x)) on channels (output 0), conv 1x1
 * of it (output 1): relu and sigmoid write their parts of c in place, the
 * graph input x is copied (one rt_rows). */
static void
test_network_concat_in_place(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    char dir[4096], *text, *p;
    float x[32], want[96 + 32], got[96 + 32];
    int i, f, c, copies = 0;
    (void)state;

    ts_tmpdir(dir, sizeof(dir));
    ktt_onnx_input(b, "x", 4, D(1, 2, 4, 4));
    ktt_onnx_init(b, "w", 4, D(2, 6, 1, 1), NULL);
    ktt_onnx_node(b, "Relu", "relu", "x", "r");
    ktt_onnx_node(b, "Sigmoid", "sig", "x", "s");
    ktt_attr_int(ktt_onnx_node(b, "Concat", "cat", "x,r,s", "c"), "axis", 1);
    ktt_onnx_node(b, "Conv", "conv", "c,w", "y");
    ktt_onnx_output(b, "c");
    ktt_onnx_output(b, "y");
    compile_model(b, dir);
    text = ktt_slurp(dir, "lib/m_net.c", NULL);
    assert_non_null(text);
    for (p = strstr(text, "    rt_rows("); p != NULL;
         p = strstr(p + 1, "    rt_rows("))
        copies++;
    assert_int_equal(copies, 1);
    free(text);

    for (i = 0; i < 32; i++) {
        x[i] = (float)((i * 5 % 32) / 16.0 - 1);
        want[i] = x[i];
        want[32 + i] = x[i] > 0 ? x[i] : 0;
        want[64 + i] = (float)(1 / (1 + exp(-(double)x[i])));
    }
    for (f = 0; f < 2; f++)
        for (i = 0; i < 16; i++) {
            double y = 0;
            for (c = 0; c < 6; c++)
                y += F(f * 6 + c) * want[c * 16 + i];
            want[96 + f * 16 + i] = (float)y;
        }
    infer_once(dir, x, 32, got, 96 + 32);
    assert_near(got, want, 96 + 32);
    ts_rmrf(dir);
}

/* out = x + c0 + c1 + ... + c59 (each c a [1,2,2,2] initializer): more
 * operands than one step takes, so the chain runs a step per node. */
static void
test_network_long_chain(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    char dir[4096];
    float x[8], want[8], got[8];
    int i, k;
    (void)state;

    ts_tmpdir(dir, sizeof(dir));
    ktt_onnx_input(b, "x", 4, D(1, 2, 2, 2));
    for (k = 0; k < 60; k++) {
        char c[16], in[40], out[16];
        snprintf(c, sizeof(c), "c%d", k);
        ktt_onnx_init(b, c, 4, D(1, 2, 2, 2), NULL);
        if (k == 0)
            snprintf(in, sizeof(in), "x,%s", c);
        else
            snprintf(in, sizeof(in), "s%d,%s", k - 1, c);
        snprintf(out, sizeof(out), "s%d", k);
        if (k == 59)
            strcpy(out, "out");
        ktt_onnx_node(b, "Add", out, in, out);
    }
    ktt_onnx_output(b, "out");
    compile_model(b, dir);
    assert_untuned(dir, 60, 60);

    for (i = 0; i < 8; i++) {
        x[i] = (float)(i - 3);
        want[i] = x[i];
        for (k = 0; k < 60; k++)
            want[i] += F(i);
    }
    infer_once(dir, x, 8, got, 8);
    assert_near(got, want, 8);
    ts_rmrf(dir);
}

/* x [1,64,40,40] -> conv 3x3 pad 1 (bias) -> batch norm -> relu -> + x:
 * the conv (118 MFLOP) of an ONNX model is F(4,3) along the rows by
 * default, its weights transformed with the batch norm folded in
 * (docs/compute.md). */
static void
test_network_winograd(void **state)
{
    enum { C = 64, H = 40, N = C * H * H, NW = C * C * 9 };
    struct kt_conv2d_params p = {1, C, H, H, C, 3, 3,          1,
                                 1, 1, 1, 1, 1, 1, KT_EPI_BIAS};
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct ktt_onnx_node *n;
    static float x[N], w[NW], cb[C], want[N], got[N];
    char dir[4096], *text;
    int i, c;
    (void)state;

    for (i = 0; i < NW; i++)
        w[i] = (float)((i * 37) % 19) / 9.0f - 1.0f;
    for (i = 0; i < C; i++)
        cb[i] = (float)(i % 5) * 0.25f - 0.5f;
    for (i = 0; i < N; i++)
        x[i] = (float)((i * 13) % 23) / 11.0f - 1.0f;
    ts_tmpdir(dir, sizeof(dir));
    ktt_onnx_input(b, "x", 4, D(1, C, H, H));
    ktt_onnx_init(b, "w", 4, D(C, C, 3, 3), w);
    ktt_onnx_init(b, "cb", 1, D(C), cb);
    ktt_onnx_init(b, "s", 1, D(C), NULL);
    ktt_onnx_init(b, "bb", 1, D(C), NULL);
    ktt_onnx_init(b, "mean", 1, D(C), NULL);
    ktt_onnx_init(b, "var", 1, D(C), NULL);
    n = ktt_onnx_node(b, "Conv", "conv", "x,w,cb", "y");
    ktt_attr_ints(n, "pads", 4, D(1, 1, 1, 1));
    ktt_onnx_node(b, "BatchNormalization", "bn", "y,s,bb,mean,var", "z");
    ktt_onnx_node(b, "Relu", "relu", "z", "r");
    ktt_onnx_node(b, "Add", "add", "r,x", "out");
    ktt_onnx_output(b, "out");
    compile_model(b, dir);
    text = ktt_slurp(dir, "lib/m_kernels.c", NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "_wino4"));
    free(text);

    ktt_naive_conv(&p, x, w, cb, want);
    for (i = 0; i < N; i++) {
        double v;
        c = i / (H * H);
        v = (want[i] - fill(c)) / sqrt(fill(c) + 1e-5) * fill(c) + fill(c);
        want[i] = (float)((v > 0 ? v : 0) + x[i]);
    }
    infer_once(dir, x, N, got, N);
    /* the transforms round otherwise than the direct sums (docs/compute.md):
     * the error is relative to the whole output, not to each element */
    if (ktt_rel_l2(got, want, N) > 1e-5)
        fail_msg("relative L2 error %g", ktt_rel_l2(got, want, N));
    ts_rmrf(dir);
}

static void
test_network_skipped(void **state)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    char dir[4096], *text;
    (void)state;

    ts_tmpdir(dir, sizeof(dir));
    ktt_onnx_input(b, "x", 4, D(1, 2, 4, 4));
    ktt_onnx_init(b, "w", 4, D(2, 2, 1, 1), NULL);
    ktt_onnx_init_i64(b, "idx", 1, (const int64_t[]){1});
    ktt_onnx_node(b, "Conv", "conv", "x,w", "y");
    ktt_onnx_node(b, "Gather", "ga", "y,idx", "out");
    ktt_onnx_output(b, "out");
    compile_model(b, dir);
    text = manifest(dir);
    assert_non_null(strstr(text, "\"network_skipped\":\t\"node 'ga' (Gather) "
                                 "has no plain C version"));
    free(text);
    assert_null(ktt_slurp(dir, "lib/m_net.c", NULL));
    text = ktt_slurp(dir, "lib/m.h", NULL);
    assert_non_null(strstr(text, "void m_conv2d_"));
    assert_null(strstr(text, "m_run("));
    free(text);
    ts_rmrf(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_network_matches_loops),
        cmocka_unit_test(test_network_layout_ops),
        cmocka_unit_test(test_network_scalar_inputs),
        cmocka_unit_test(test_network_elementwise_chains),
        cmocka_unit_test(test_network_concat_in_place),
        cmocka_unit_test(test_network_long_chain),
        cmocka_unit_test(test_network_winograd),
        cmocka_unit_test(test_network_skipped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
