/* test_prelude.c - the vector helpers every generated module starts with
 * (ir/module.c): kt_vmax / kt_vmin of each width compute a > b ? a : b
 * (a < b ? a : b) lane by lane, NaN and signed zeros included, and on an
 * x86 compiler with AVX a max-reduction chain is one max instruction per
 * step, not a compare and a blend; the masked loads and stores of a
 * guarded vector's edges touch exactly the lanes inside. */
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
#include <sys/mman.h>
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

static const char masked_src[] =
    "#define KT_MASKED_TEST(W) \\\n"
    "unsigned kt_t_span##W(long a, long n) { return kt_span(a, n, W); } \\\n"
    "unsigned kt_t_lanes##W(long a, long s, long n) "
    "{ return kt_lanes(a, s, n, W); } \\\n"
    "void kt_t_ldm##W(const float *p, unsigned m, float *out) "
    "{ kt_st##W(out, kt_ldm##W(p, m, kt_bc##W(-7.0f))); } \\\n"
    "void kt_t_stm##W(float *p, const float *v, unsigned m) "
    "{ kt_stm##W(p, kt_ld##W(v), m); }\n"
    "KT_MASKED_TEST(4)\nKT_MASKED_TEST(8)\nKT_MASKED_TEST(16)\n";

struct masked_fns {
    unsigned (*span)(long, long);
    unsigned (*lanes)(long, long, long);
    void (*ldm)(const float *, unsigned, float *);
    void (*stm)(float *, const float *, unsigned);
};

static void
masked_fns(void *h, int w, struct masked_fns *f)
{
    char name[32];

    snprintf(name, sizeof(name), "kt_t_span%d", w);
    *(void **)&f->span = dlsym(h, name);
    snprintf(name, sizeof(name), "kt_t_lanes%d", w);
    *(void **)&f->lanes = dlsym(h, name);
    snprintf(name, sizeof(name), "kt_t_ldm%d", w);
    *(void **)&f->ldm = dlsym(h, name);
    snprintf(name, sizeof(name), "kt_t_stm%d", w);
    *(void **)&f->stm = dlsym(h, name);
    assert_true(f->span && f->lanes && f->ldm && f->stm);
}

static unsigned
lanes_inside(long a, long s, long n, int w)
{
    unsigned m = 0;
    int l;

    for (l = 0; l < w; l++)
        if (a + s * l >= 0 && a + s * l < n)
            m |= 1u << l;
    return m;
}

/* The masks of every start a and extent n near a vector's width. */
static void
check_masks(const struct masked_fns *f, int w, const char *line)
{
    static const long steps[] = {-2, -1, 0, 1, 2, 3};
    long a, n;
    size_t s;

    for (a = -40; a <= 40; a++)
        for (n = 0; n <= 40; n++) {
            if (f->span(a, n) != lanes_inside(a, 1, n, w))
                fail_msg("%s: kt_span(%ld, %ld, %d) = %#x", line, a, n, w,
                         f->span(a, n));
            for (s = 0; s < sizeof(steps) / sizeof(steps[0]); s++)
                if (f->lanes(a, steps[s], n) != lanes_inside(a, steps[s], n, w))
                    fail_msg("%s: kt_lanes(%ld, %ld, %ld, %d) = %#x", line, a,
                             steps[s], n, w, f->lanes(a, steps[s], n));
        }
}

/* Masked loads and stores at p read and write exactly the lanes of m:
 * the others read the padding and keep what p held. */
static void
check_masked_at(const struct masked_fns *f, int w, float *p, unsigned m,
                const char *line)
{
    float v[16], out[16], before[16];
    int l;

    for (l = 0; l < w; l++) {
        v[l] = (float)(100 + l);
        if (m >> l & 1) {
            before[l] = p[l];
            p[l] = (float)(l + 1);
        }
    }
    f->ldm(p, m, out);
    for (l = 0; l < w; l++)
        if (out[l] != ((m >> l & 1) ? (float)(l + 1) : -7.0f))
            fail_msg("%s: kt_ldm%d mask %#x lane %d read %g", line, w, m, l,
                     (double)out[l]);
    f->stm(p, v, m);
    for (l = 0; l < w; l++)
        if ((m >> l & 1) && p[l] != v[l])
            fail_msg("%s: kt_stm%d mask %#x lane %d not written", line, w, m,
                     l);
    for (l = 0; l < w; l++)
        if (m >> l & 1)
            p[l] = before[l];
}

/* Vectors that run past the end of a page into an inaccessible one (or
 * start in the one before) are read and written under masks of the lanes
 * inside, without a fault, and every element the masks leave out keeps
 * its value. */
static void
check_masked_edges(const struct masked_fns *f, int w, const char *line)
{
    long page = sysconf(_SC_PAGESIZE);
    char *map = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    float *data;
    long i, nf = page / (long)sizeof(float);
    int k;

    assert_true(map != MAP_FAILED);
    assert_int_equal(mprotect(map, page, PROT_NONE), 0);
    assert_int_equal(mprotect(map + 2 * page, page, PROT_NONE), 0);
    data = (float *)(map + page);
    for (i = 0; i < nf; i++)
        data[i] = -1.0f;
    for (k = 1; k <= w; k++) {
        /* k lanes on the page's last floats, then k - 1 on its first */
        check_masked_at(f, w, data + nf - k, f->span(0, k), line);
        check_masked_at(f, w, (float *)(map + page - (w - k + 1) * 4),
                        f->span(-(w - k + 1), nf), line);
    }
    for (k = 0; k < 64; k++) /* scattered masks inside */
        check_masked_at(f, w, data + 3 * k, (unsigned)(k * 2654435761u) >> 7,
                        line);
    for (i = 0; i < nf; i++)
        if (data[i] != -1.0f)
            fail_msg("%s: width %d: element %ld changed to %g", line, w, i,
                     (double)data[i]);
    munmap(map, 3 * page);
}

/* The edges of guarded vectors (ir/codegen_regs.c, ir/codegen_load.c,
 * ir/codegen_store.c): kt_span and kt_lanes give the lanes inside, and
 * the masked loads and stores touch exactly those, as built natively
 * (AVX-512's masked instructions where the CPU has them) and for x86
 * targets without AVX-512 or AVX (the loop over the mask's lanes). */
static void
test_prelude_masked_edges(void **state)
{
    const char *lines[] =
    { NULL, /* ktt_build: $KT_TEST_CC / $KT_TEST_CFLAGS or native */
#if defined(__x86_64__)
      "gcc -O3 -march=x86-64-v3 -std=gnu11",
      "gcc -O3 -march=x86-64 -std=gnu11",
      /* not where $KT_TEST_CFLAGS chose the target (valgrind: AVX2) */
      "clang -O3 -march=native -std=gnu11",
#endif
    };
    char *src = with_prelude(masked_src), err[4096];
    size_t i, n = sizeof(lines) / sizeof(lines[0]);
    int w;
    (void)state;

    if (getenv("KT_TEST_CFLAGS") != NULL && n > 1)
        n--;
    for (i = 0; i < n; i++) {
        const char *line = lines[i] != NULL ? lines[i] : "native";
        void *h = lines[i] != NULL
                      ? ktt_build_cc(src, lines[i], err, sizeof(err))
                      : ktt_build(src, err, sizeof(err));
        if (h == NULL)
            fail_msg("%s: %s", line, err);
        for (w = 4; w <= 16; w *= 2) {
            struct masked_fns f;
            masked_fns(h, w, &f);
            check_masks(&f, w, line);
            check_masked_edges(&f, w, line);
        }
        dlclose(h);
    }
    free(src);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prelude_max_min_lanes),
        cmocka_unit_test(test_prelude_max_is_one_instruction),
        cmocka_unit_test(test_prelude_masked_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
