/* test_compile_pack.c - weights packed by kerntune compile: an ONNX conv
 * tuned (in a real database) with a schedule that rewrites its weight's
 * layout compiles into a network whose weights file holds the packed copy,
 * bit for bit what the library's own pack routine makes of the ONNX
 * weight, and not the original; the network (built with the real
 * compiler) matches plain loops, with the conv on the calling thread
 * (below --serial-below) or on all threads; a weights file of the previous
 * format is refused by name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ktt.h"
#include "tests/support/ktt_compile.h"
#include "tests/support/ktt_onnx.h"
#include "tests/unit/test_storage_util.h"
#include "tests/unit/test_compile_conv.h"

#define D(...) ((const int64_t[]){__VA_ARGS__})

#define PACK_ELEMS 288

struct fx {
    char dir[4096];
    char out[4200];
    char parallel[4200];
};

/* x[1,4,8,8] -> Conv(w[8,4,3,3], b[8], pads 1) -> Relu -> y, tuned in
 * dir/t.db, compiled into dir/lib (the conv, 0.037 MFLOP, under the
 * default --serial-below) and into dir/parallel with --serial-below 0. */
static void
compile_tuned(struct fx *f)
{
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct ktt_onnx_node *n;
    const char *out[2] = {f->out, f->parallel};
    const double serial_below[2] = {0, -1};
    char text[4400], db[4200], err[1024];

    ktt_onnx_input(b, "x", 4, D(1, 4, 8, 8));
    ktt_onnx_init(b, "w", 4, D(8, 4, 3, 3), NULL);
    ktt_onnx_init(b, "b", 1, D(8), NULL);
    n = ktt_onnx_node(b, "Conv", "conv", "x,w,b", "c");
    ktt_attr_ints(n, "pads", 4, D(1, 1, 1, 1));
    ktt_attr_ints(n, "kernel_shape", 2, D(3, 3));
    ktt_onnx_node(b, "Relu", "relu", "c", "y");
    ktt_onnx_output(b, "y");
    snprintf(text, sizeof(text), "%s/m.onnx", f->dir);
    assert_int_equal(ktt_onnx_write(b, text), 0);
    ktt_onnx_free(b);
    snprintf(text, sizeof(text),
             "{\"name\": \"m\", \"onnx\": \"%s/m.onnx\", \"target\": "
             "{\"cflags\": [\"-O2\", \"-fopenmp\"]}}",
             f->dir);
    snprintf(db, sizeof(db), "%s/t.db", f->dir);
    if (ktt_compile_tuned(text, db, CONV_SCHEDULE, out, serial_below, 2, err,
                          sizeof(err)) != KT_OK)
        fail_msg("%s", err);
}

static int
setup(void **state)
{
    struct fx *f = kt_xcalloc(1, sizeof(*f));

    ts_tmpdir(f->dir, sizeof(f->dir));
    snprintf(f->out, sizeof(f->out), "%s/lib", f->dir);
    snprintf(f->parallel, sizeof(f->parallel), "%s/parallel", f->dir);
    compile_tuned(f);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    ts_rmrf(f->dir);
    free(f);
    return 0;
}

static void
test_packed_weights_in_file(void **state)
{
    struct fx *f = *state;
    char *man, *wf, *mine, log[9000];
    double off, bytes;
    size_t wlen, mlen;

    man = ktt_slurp(f->out, "manifest.json", NULL);
    assert_non_null(man);
    off = ktt_json_number(man, "offset_bytes");
    bytes = ktt_json_number(man, "weight_bytes");
    assert_true(off >= 64);
    assert_int_equal((int)ktt_json_number(man, "elems"), 8 * 4 * 3 * 3);
    /* the packed copy and the bias (64-byte aligned), not the original */
    assert_true(bytes > 0 && bytes < 2 * PACK_ELEMS * 4);
    free(man);
    if (ktt_library_pack(f->out, PACK_ELEMS, PACK_ELEMS, log, sizeof(log)) != 0)
        fail_msg("%s", log);
    wf = ktt_slurp(f->out, "m.weights", &wlen);
    mine = ktt_slurp(f->out, "mine.bin", &mlen);
    assert_non_null(wf);
    assert_non_null(mine);
    assert_int_equal(mlen, PACK_ELEMS * 4);
    assert_true((size_t)off + mlen <= wlen);
    assert_int_equal(memcmp(wf + (size_t)off, mine, mlen), 0);
    assert_int_equal(wlen, 64 + (size_t)bytes);
    free(wf);
    free(mine);
}

/* relu(conv(x, w) + b) with pads 1, in double. */
static void
reference(const float *x, float *y)
{
    int k, c, i, j, r, s;

    for (k = 0; k < 8; k++)
        for (i = 0; i < 8; i++)
            for (j = 0; j < 8; j++) {
                double acc = ktt_onnx_fill(k);
                for (c = 0; c < 4; c++)
                    for (r = 0; r < 3; r++)
                        for (s = 0; s < 3; s++) {
                            int yi = i + r - 1, xj = j + s - 1;
                            if (yi >= 0 && yi < 8 && xj >= 0 && xj < 8)
                                acc += (double)x[(c * 8 + yi) * 8 + xj] *
                                       ktt_onnx_fill(((k * 4 + c) * 3 + r) * 3 +
                                                     s);
                        }
                y[(k * 8 + i) * 8 + j] = (float)(acc > 0 ? acc : 0);
            }
}

/* The network in dir on x against reference loops. */
static void
network_matches(const char *dir, const float *x, const float *want)
{
    char path[4300], *got;
    size_t len;
    FILE *fp;
    int i;

    snprintf(path, sizeof(path), "%s/in.bin", dir);
    fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(x, 4, 256, fp), 256);
    fclose(fp);
    KTT_RUN_OR_FAIL(dir, "make -s infer && ./m_infer -i in.bin -o out.bin -n 2 "
                         "-t 2");
    got = ktt_slurp(dir, "out.bin", &len);
    assert_non_null(got);
    assert_int_equal(len, 512 * 4);
    for (i = 0; i < 512; i++) {
        float g;
        memcpy(&g, got + 4 * i, 4);
        if (fabsf(g - want[i]) > 1e-5f * (1 + fabsf(want[i])))
            fail_msg("%s: y[%d] = %g, want %g", dir, i, g, want[i]);
    }
    free(got);
}

static void
test_network_with_packed_weights(void **state)
{
    struct fx *f = *state;
    float x[256], want[512];
    int i;

    for (i = 0; i < 256; i++)
        x[i] = (float)((i * 37 % 256) / 128.0 - 1);
    reference(x, want);
    network_matches(f->out, x, want);
}

/* The conv is below --serial-below: the network runs it on the calling
 * thread (threads_set(1) before it, the caller's threads back after it);
 * with --serial-below 0 on all threads; the same outputs. */
static void
test_serial_below(void **state)
{
    struct fx *f = *state;
    float x[256], want[512];
    char *net, *man;
    const char *one, *call, *back;
    int i;

    for (i = 0; i < 256; i++)
        x[i] = (float)((i * 37 % 256) / 128.0 - 1);
    reference(x, want);
    net = ktt_slurp(f->out, "m_net.c", NULL);
    man = ktt_slurp(f->out, "manifest.json", NULL);
    assert_non_null(net);
    assert_non_null(man);
    assert_true(ktt_json_number(man, "serial_below_mflop") == 0.1);
    one = strstr(net, "    threads_set(1);");
    assert_non_null(one);
    call = strstr(one, "    m_conv2d_");
    back = strstr(one, "    threads_set(threads);");
    assert_non_null(call);
    assert_non_null(back);
    assert_true(call < back);
    free(net);
    free(man);
    net = ktt_slurp(f->parallel, "m_net.c", NULL);
    man = ktt_slurp(f->parallel, "manifest.json", NULL);
    assert_non_null(net);
    assert_non_null(man);
    assert_null(strstr(net, "threads_set(1);"));
    assert_true(ktt_json_number(man, "serial_below_mflop") == 0);
    free(net);
    free(man);
    network_matches(f->parallel, x, want);
}

/* A weights file of format 1 (packed at init) is refused by name. */
static void
test_old_weights_refused(void **state)
{
    struct fx *f = *state;
    char path[4300], *log;
    FILE *fp;

    KTT_RUN_OR_FAIL(f->out, "make -s infer && cp m.weights old.weights");
    snprintf(path, sizeof(path), "%s/old.weights", f->out);
    fp = fopen(path, "r+b");
    assert_non_null(fp);
    assert_int_equal(fwrite("KTWGT001", 1, 8, fp), 8);
    fclose(fp);
    snprintf(path, sizeof(path),
             "cd '%s' && ./m_infer -w old.weights -n 1 >old.out 2>&1", f->out);
    assert_int_not_equal(system(path), 0);
    log = ktt_slurp(f->out, "old.out", NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, "weights format KTWGT001, this library reads "
                                "KTWGT002"));
    free(log);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packed_weights_in_file),
        cmocka_unit_test(test_network_with_packed_weights),
        cmocka_unit_test(test_serial_below),
        cmocka_unit_test(test_old_weights_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
