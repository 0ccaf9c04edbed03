/* test_compile_wino.c - the library of a config layer in Winograd form:
 * kerntune compile emits <task>_winograd(), which makes the kernel's U, BT
 * and AT from the convolution's own weights (U the same bits as the
 * compiled networks' kt_winograd_weights); a program built with the real
 * compiler against the library, calling only what its header declares,
 * computes the convolution (bias, relu) as plain loops do, also after its
 * scratch memory was freed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/compile.h"
#include "config/config.h"
#include "ir/ir.h"
#include "tests/support/ktt.h"
#include "tests/support/ktt_compile.h"
#include "tests/unit/test_storage_util.h"

enum { C = 64, H = 40, K = 64, NI = C * H * H, NW = K * C * 9, NO = K * H * H };
#define NU (K * C * 6 * 3)
#define FN "wm_conv2d_n1_c64_h40_w40_k64_r3_s3_st1_p1_d1_g1_bias_relu_wino4"

static const char model_text[] =
    "{\"name\": \"wm\", \"winograd\": true,\n"
    " \"target\": {\"cflags\": [\"-O2\", \"-fopenmp\"]},\n"
    " \"layers\": [{\"op\": \"conv2d\", \"C\": 64, \"H\": 40, \"W\": 40, "
    "\"K\": 64, \"R\": 3, \"S\": 3, \"pad\": 1,\n"
    "              \"epilogue\": [\"bias\", \"relu\"]}]}\n";

/* Reads I, W and B, makes U, BT and AT with the library, runs the kernel,
 * writes U and O. */
static const char driver[] =
    "#include <stdio.h>\n#include <stdlib.h>\n#include \"wm.h\"\n"
    "static float *\nbuf(long long n)\n{\n"
    "    float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));\n"
    "    if (p == NULL) exit(2);\n    return p;\n}\n"
    "static float *\nload(const char *path, long long n)\n{\n"
    "    float *p = buf(n);\n    FILE *f = fopen(path, \"rb\");\n"
    "    if (f == NULL || fread(p, 4, (size_t)n, f) != (size_t)n) exit(3);\n"
    "    fclose(f);\n    return p;\n}\n"
    "static void\nsave(const char *path, const float *p, long long n)\n{\n"
    "    FILE *f = fopen(path, \"wb\");\n"
    "    if (f == NULL || fwrite(p, 4, (size_t)n, f) != (size_t)n ||\n"
    "        fclose(f) != 0) exit(4);\n}\n"
    "int\nmain(void)\n{\n"
    "    float *I = load(\"I.bin\", NI), *B = load(\"B.bin\", NK);\n"
    "    float *W = load(\"W.bin\", FN_W_ELEMS);\n"
    "    float *U = buf(NU), *BT = buf(36), *AT = buf(24), *O = buf(NO);\n"
    "    FN_winograd(W, U, BT, AT);\n"
    "    FN(I, BT, U, AT, B, O);\n"
    /* the scratch pool returned, a kernel call fills it again */
    "    wm_free_scratch();\n"
    "    for (long long i = 0; i < NO; i++) O[i] = __builtin_nanf(\"\");\n"
    "    FN(I, BT, U, AT, B, O);\n"
    "    save(\"U.bin\", U, NU);\n    save(\"O.bin\", O, NO);\n"
    "    return 0;\n}\n";

static void
write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[8400];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* dir/name, which must hold n floats. */
static float *
read_floats(const char *dir, const char *name, size_t n)
{
    size_t len = 0;
    char *p = ktt_slurp(dir, name, &len);

    assert_non_null(p);
    assert_int_equal(len, n * sizeof(float));
    return (float *)p;
}

static void
compile_library(const char *dir, char *out, size_t outlen)
{
    struct kt_model_conf *m = NULL;
    struct kt_compile_opts o = {.db_path = "(none)", .untuned = 1};
    char err[1024];

    snprintf(out, outlen, "%s/lib", dir);
    o.out_dir = out;
    assert_int_equal(kt_model_conf_parse("wm.json", model_text, &m, err,
                                         sizeof(err)),
                     KT_OK);
    if (kt_compile(m, &o, NULL, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    kt_model_conf_free(m);
}

static void
test_library_winograd(void **state)
{
    const struct kt_conv2d_params p = ktt_square_conv(C, H, K, 3, 1, 1, 1, 1,
                                                      KT_EPI_BIAS | KT_EPI_RELU);
    static float in[NI], w[NW], bias[K], want[NO], u_net[NU];
    struct kt_winograd wg;
    char dir[4096], lib[4200], cmd[1024], *h;
    float *u, *o;
    int i;
    (void)state;

    ts_tmpdir(dir, sizeof(dir));
    compile_library(dir, lib, sizeof(lib));
    h = ktt_slurp(lib, "wm.h", NULL);
    assert_non_null(h);
    /* the kernel's arguments in the definition's order, U in W's place */
    assert_non_null(strstr(h, "void " FN "(const float *I, const float *BT, "
                              "const float *U, const float *AT, const float "
                              "*B, float *O);"));
    assert_non_null(strstr(h, "void " FN "_winograd(const float *W, float "
                              "*U, float *BT, float *AT);"));
    assert_non_null(strstr(h, "_W_ELEMS 36864LL"));
    assert_non_null(strstr(h, "W [64 x 64 x 3 x 3] (OIHW"));
    free(h);

    for (i = 0; i < NW; i++)
        w[i] = (float)((i * 37) % 19) / 9.0f - 1.0f;
    for (i = 0; i < K; i++)
        bias[i] = (float)(i % 5) * 0.25f - 0.5f;
    for (i = 0; i < NI; i++)
        in[i] = (float)((i * 13) % 23) / 11.0f - 1.0f;
    write_file(lib, "I.bin", in, sizeof(in));
    write_file(lib, "W.bin", w, sizeof(w));
    write_file(lib, "B.bin", bias, sizeof(bias));
    write_file(lib, "driver.c", driver, strlen(driver));
    snprintf(cmd, sizeof(cmd),
             "make -s && cc -O1 -DFN=" FN " -DFN_winograd=" FN "_winograd "
             "-DFN_W_ELEMS=%lldLL -DNI=%d -DNK=%d -DNU=%d -DNO=%d driver.c "
             "-I. libwm.a -fopenmp -lm -o driver && ./driver",
             (long long)NW, NI, K, NU, NO);
    KTT_RUN_OR_FAIL(lib, cmd);

    /* the library's U is the compiled networks' U, bit for bit */
    assert_int_equal(kt_winograd_matrices(4, 3, &wg), KT_OK);
    kt_winograd_weights(&wg, K, C, 3, w, u_net);
    u = read_floats(lib, "U.bin", NU);
    assert_memory_equal(u, u_net, sizeof(u_net));
    free(u);

    ktt_naive_conv(&p, in, w, bias, want);
    o = read_floats(lib, "O.bin", NO);
    /* the transforms round otherwise than the direct sums (docs/compute.md):
     * the error is relative to the whole output */
    if (ktt_rel_l2(o, want, NO) > 1e-5)
        fail_msg("relative L2 error %g", ktt_rel_l2(o, want, NO));
    free(o);
    ts_rmrf(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_library_winograd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
