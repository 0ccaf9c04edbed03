/* test_prelude.c - the vector helpers every generated module starts with
 * (ir/module.c): kt_vmax / kt_vmin of each width compute a > b ? a : b
 * (a < b ? a : b) lane by lane, NaN and signed zeros included, and on an
 * x86 compiler with AVX a max-reduction chain is one max instruction per
 * step, not a compare and a blend. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/ir.h"
#include "tests/support/ktt.h"

static const char lanes_src[] =
    "#define KT_LANES(W) \\\n"
    "void kt_lanes##W(const float *a, const float *b, float *mx, float *mn) "
    "\\\n"
    "{ kt_st##W(mx, kt_vmax##W(kt_ld##W(a), kt_ld##W(b))); \\\n"
    "  kt_st##W(mn, kt_vmin##W(kt_ld##W(a), kt_ld##W(b))); }\n"
    "KT_LANES(4)\nKT_LANES(8)\nKT_LANES(16)\n";

static char *
with_prelude(const char *body)
{
    struct kt_buf b;

    kt_buf_init(&b);
    kt_codegen_prelude(&b);
    kt_buf_puts(&b, body);
    return kt_buf_take(&b);
}

static int
same_bits(float x, float y)
{
    return memcmp(&x, &y, sizeof(x)) == 0;
}

static void
test_prelude_max_min_lanes(void **state)
{
    static const float v[] = {1.0f, -1.0f, 0.0f, -0.0f, INFINITY, -INFINITY};
    float a[16], b[16], mx[16], mn[16];
    char err[4096], name[32];
    char *src = with_prelude(lanes_src);
    void *h = ktt_build(src, err, sizeof(err));
    int w, i, round;
    (void)state;

    free(src);
    if (h == NULL)
        fail_msg("%s", err);
    for (w = 4; w <= 16; w *= 2) {
        void (*fn)(const float *, const float *, float *, float *);
        snprintf(name, sizeof(name), "kt_lanes%d", w);
        *(void **)&fn = dlsym(h, name);
        assert_non_null(fn);
        for (round = 0; round < 8; round++) {
            for (i = 0; i < w; i++) {
                a[i] = (i + round) % 7 == 6 ? NAN : v[(i + round) % 6];
                b[i] = (i * 5 + round) % 7 == 6 ? NAN : v[(i * 5 + round) % 6];
            }
            fn(a, b, mx, mn);
            for (i = 0; i < w; i++)
                if (!same_bits(mx[i], a[i] > b[i] ? a[i] : b[i]) ||
                    !same_bits(mn[i], a[i] < b[i] ? a[i] : b[i]))
                    fail_msg("width %d lane %d: max(%g, %g) = %g, min = %g", w,
                             i, (double)a[i], (double)b[i], (double)mx[i],
                             (double)mn[i]);
        }
    }
    dlclose(h);
}

/* The assembly of a max-reduction over 8-lane vectors: with AVX the chain
 * is vmaxps (one instruction of two cycles) where the mask form of the
 * helper compiled to vcmpps + a blend (maxpool 1.5x slower). */
static void
test_prelude_max_is_one_instruction(void **state)
{
    static const char body[] =
        "void kt_chain(const float *a, float *o, long n)\n"
        "{ kt_v8 r = kt_ld8(a);\n"
        "  for (long i = 1; i < n; i++) r = kt_vmax8(r, kt_ld8(a + 8 * i));\n"
        "  kt_st8(o, r); }\n"
        "void kt_chain4(const float *a, float *o, long n)\n"
        "{ kt_v4 r = kt_ld4(a);\n"
        "  for (long i = 1; i < n; i++) r = kt_vmin4(r, kt_ld4(a + 4 * i));\n"
        "  kt_st4(o, r); }\n"
        "#ifdef __AVX512F__\n"
        "void kt_chain16(const float *a, float *o, long n)\n"
        "{ kt_v16 r = kt_ld16(a);\n"
        "  for (long i = 1; i < n; i++) r = kt_vmin16(r, kt_ld16(a + 16 * "
        "i));\n"
        "  kt_st16(o, r); }\n"
        "#endif\n";
    const char *cc = getenv("KT_TEST_CC") ? getenv("KT_TEST_CC") : "gcc";
    const char *cflags = getenv("KT_TEST_CFLAGS")
                             ? getenv("KT_TEST_CFLAGS")
                             : "-O3 -march=native -fopenmp";
    char dir[] = "/tmp/ktprelude.XXXXXX", path[64], cmd[1024], line[512];
    char *src = with_prelude(body);
    int avx = 0, vmax = 0, vmin = 0, cmp = 0;
    FILE *f;
    (void)state;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/k.c", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(src, f);
    fputs("#ifdef __AVX__\nint kt_has_avx;\n#endif\n", f);
    fclose(f);
    free(src);
    snprintf(cmd, sizeof(cmd), "%s %s -S -o - %s 2>&1", cc, cflags, path);
    f = popen(cmd, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        avx |= strstr(line, "kt_has_avx") != NULL;
        vmax += strstr(line, "vmaxps") != NULL;
        vmin += strstr(line, "vminps") != NULL;
        cmp += strstr(line, "vcmpps") != NULL || strstr(line, "blend") != NULL;
    }
    assert_int_equal(pclose(f), 0);
    unlink(path);
    rmdir(dir);
    if (!avx)
        skip(); /* not an x86 compiler with AVX: the portable form */
    if (vmax == 0 || vmin == 0 || cmp != 0)
        fail_msg("max/min chains: %d vmaxps, %d vminps, %d compares or blends",
                 vmax, vmin, cmp);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prelude_max_min_lanes),
        cmocka_unit_test(test_prelude_max_is_one_instruction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
