/* test_compile_rows.c - a dense layer whose rewritten weights have rows
 * vectors do not fill (40 outputs per tile: padded to 48 on AVX-512),
 * compiled by kerntune compile: the weights file holds the packed copy in
 * the padded layout the kernel reads (compile evaluates the pack routine
 * itself, ir/ir.h kt_lbuf_pitch), bit for bit what the library's own pack
 * routine makes of the ONNX weight in a buffer that was NaN (so it writes
 * the padding too), and the network (built with the real compiler)
 * matches plain loops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "tests/support/ktt.h"
#include "tests/support/ktt_compile.h"
#include "tests/support/ktt_onnx.h"
#include "tests/unit/test_dense_rows40.h"
#include "tests/unit/test_storage_util.h"

#define D(...) ((const int64_t[]){__VA_ARGS__})

#define M 8
#define N 80
#define K 64

struct fx {
    char dir[4096];
    char out[4200];
};

/* x[8,64] -> Gemm(w[80,64] transposed, b[80]) -> y, tuned in dir/t.db,
 * compiled into dir/lib. */
static int
setup(void **state)
{
    struct fx *f = kt_xcalloc(1, sizeof(*f));
    struct ktt_onnx *b = ktt_onnx_new(13);
    struct ktt_onnx_node *n;
    const char *out[1] = {f->out};
    const double serial_below[1] = {-1};
    char text[4400], db[4200], err[1024];

    ts_tmpdir(f->dir, sizeof(f->dir));
    snprintf(f->out, sizeof(f->out), "%s/lib", f->dir);
    ktt_onnx_input(b, "x", 2, D(M, K));
    ktt_onnx_init(b, "w", 2, D(N, K), NULL);
    ktt_onnx_init(b, "b", 1, D(N), NULL);
    n = ktt_onnx_node(b, "Gemm", "fc", "x,w,b", "y");
    ktt_attr_int(n, "transB", 1);
    ktt_onnx_output(b, "y");
    snprintf(text, sizeof(text), "%s/m.onnx", f->dir);
    assert_int_equal(ktt_onnx_write(b, text), 0);
    ktt_onnx_free(b);
    snprintf(text, sizeof(text),
             "{\"name\": \"m\", \"onnx\": \"%s/m.onnx\", \"target\": "
             "{\"cflags\": [\"-O2\", \"-fopenmp\"]}}",
             f->dir);
    snprintf(db, sizeof(db), "%s/t.db", f->dir);
    if (ktt_compile_tuned(text, db, DENSE_ROWS40_SCHEDULE, out, serial_below, 1,
                          err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
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

/* The floats the kernel's layout of the packed weight takes here: rows of
 * 40 padded to whole vectors of this machine's width. */
static int
packed_floats(void)
{
    struct kt_codegen_opts o;

    kt_codegen_default_opts(&o);
    return o.vector_bytes >= 64 ? N * K / 40 * 48 : N * K;
}

static void
test_padded_rows_in_file(void **state)
{
    struct fx *f = *state;
    char *man, *wf, *mine, log[9000];
    double off;
    size_t wlen, mlen, want = (size_t)packed_floats() * 4;

    man = ktt_slurp(f->out, "manifest.json", NULL);
    assert_non_null(man);
    off = ktt_json_number(man, "offset_bytes");
    assert_true(off >= 64);
    free(man);
    if (ktt_library_pack(f->out, N * K, packed_floats(), log, sizeof(log)) != 0)
        fail_msg("%s", log);
    wf = ktt_slurp(f->out, "m.weights", &wlen);
    mine = ktt_slurp(f->out, "mine.bin", &mlen);
    assert_non_null(wf);
    assert_non_null(mine);
    assert_int_equal(mlen, want);
    assert_true((size_t)off + mlen <= wlen);
    assert_int_equal(memcmp(wf + (size_t)off, mine, mlen), 0);
    free(wf);
    free(mine);
}

static void
test_network_matches(void **state)
{
    struct fx *f = *state;
    float x[M * K], want[M * N];
    char path[4300], *got;
    size_t len;
    FILE *fp;
    int i, j, k;

    for (i = 0; i < M * K; i++)
        x[i] = (float)((i * 37 % 256) / 128.0 - 1);
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            double acc = ktt_onnx_fill(j);
            for (k = 0; k < K; k++)
                acc += (double)x[i * K + k] * ktt_onnx_fill(j * K + k);
            want[i * N + j] = (float)acc;
        }
    snprintf(path, sizeof(path), "%s/in.bin", f->out);
    fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(x, 4, M * K, fp), M * K);
    fclose(fp);
    KTT_RUN_OR_FAIL(f->out, "make -s infer && ./m_infer -i in.bin -o out.bin "
                            "-n 2 -t 2");
    got = ktt_slurp(f->out, "out.bin", &len);
    assert_non_null(got);
    assert_int_equal(len, M * N * 4);
    for (i = 0; i < M * N; i++) {
        float g;
        memcpy(&g, got + 4 * i, 4);
        if (fabsf(g - want[i]) > 1e-4f * (1 + fabsf(want[i])))
            fail_msg("y[%d] = %g, want %g", i, g, want[i]);
    }
    free(got);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_padded_rows_in_file),
        cmocka_unit_test(test_network_matches),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
