/* test_scratch_pool.c - the scratch pool of generated kernels (ir/module.c
 * prelude, docs/schedule.md): built with the real compiler from the
 * prelude kerntune puts in every module, its functions reuse a returned
 * block for any request it fits (the smallest such), keep the 8 largest
 * of more returned blocks, hand each block to one thread at a time under
 * OpenMP, and drain to empty. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dlfcn.h>
#include <stdlib.h>

#include "common/common.h"
#include "ir/ir.h"
#include "tests/support/ktt.h"

/* Each returns 0 when the pool behaved, else the number of the check that
 * failed. */
static const char pool_tests[] =
    "int\nt_reuse(void)\n{\n"
    "    char *a = kt_scratch(8192), *b, *c;\n"
    "    if (a == NULL || ((unsigned long)a & 63) != 0) return 1;\n"
    "    kt_scratch_free(a);\n"
    "    b = kt_scratch(64);\n" /* a's block fits */
    "    if (b != a) return 2;\n"
    "    c = kt_scratch(8192 + 64);\n" /* nothing pooled fits: new */
    "    if (c == NULL || c == b) return 3;\n"
    "    kt_scratch_free(c);\n    kt_scratch_free(b);\n"
    "    a = kt_scratch(4096);\n" /* the smaller of the two that fit */
    "    if (a != b) return 4;\n"
    "    kt_scratch_free(a);\n    kt_pool_drain();\n    return 0;\n}\n"
    "int\nt_keep_largest(void)\n{\n"
    "    char *p[10];\n"
    "    for (int i = 0; i < 10; i++) p[i] = kt_scratch((size_t)(i + 1) * "
    "4096);\n"
    "    for (int i = 0; i < 10; i++) kt_scratch_free(p[i]);\n"
    "    for (int i = 0; i < KT_POOL_SLOTS; i++)\n"
    "        if (kt_pool[i] == NULL || kt_pool_size(kt_pool[i]) < 3 * 4096)\n"
    "            return 1;\n"
    "    char *q = kt_scratch(64);\n" /* the smallest kept: 3 x 4096 */
    "    if (q != p[2]) return 2;\n"
    "    kt_scratch_free(q);\n    kt_pool_drain();\n"
    "    for (int i = 0; i < KT_POOL_SLOTS; i++)\n"
    "        if (kt_pool[i] != NULL) return 3;\n"
    "    return 0;\n}\n"
    /* two threads take, fill, check and return blocks of sizes that
     * overlap: a block handed to both at once shows as the other's mark */
    "int\nt_threads(void)\n{\n"
    "    int bad = 0;\n"
    "#pragma omp parallel num_threads(2) reduction(+ : bad)\n"
    "    {\n"
    "#ifdef _OPENMP\n        int me = omp_get_thread_num() + 1;\n"
    "#else\n        int me = 1;\n#endif\n"
    "        for (int k = 0; k < 20000; k++) {\n"
    "            size_t n = (size_t)(1 + (k * 7 + me) % 5) * 1024;\n"
    "            int *v = kt_scratch(n);\n"
    "            for (size_t i = 0; i < n / sizeof(int); i++) v[i] = me;\n"
    "            for (size_t i = 0; i < n / sizeof(int); i++) bad += v[i] != "
    "me;\n"
    "            kt_scratch_free(v);\n"
    "        }\n"
    "    }\n"
    "    kt_pool_drain();\n    return bad;\n}\n";

static void *
build_pool(void)
{
    struct kt_buf src;
    char err[4096];
    void *h;

    kt_buf_init(&src);
    kt_codegen_prelude(&src);
    kt_buf_puts(&src, pool_tests);
    h = ktt_build(src.p, err, sizeof(err));
    kt_buf_free(&src);
    if (h == NULL)
        fail_msg("%s", err);
    return h;
}

static int
run(void *h, const char *name)
{
    int (*fn)(void) = (int (*)(void))dlsym(h, name);

    assert_non_null(fn);
    return fn();
}

static void
test_pool(void **state)
{
    void *h = build_pool();
    (void)state;

    assert_int_equal(run(h, "t_reuse"), 0);
    assert_int_equal(run(h, "t_keep_largest"), 0);
    assert_int_equal(run(h, "t_threads"), 0);
    dlclose(h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
