/* test_codegen_options.c - generated kernels turn gcc's -O3 passes
 * unroll-and-jam and loop distribution off (ir/codegen.c: they cost up to
 * 60% of a kernel's compile time, docs/measure.md), and the functions
 * after a kernel in its file are compiled under the same options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "tests/support/ktt.h"
#include "tests/unit/test_storage_util.h"

/* A random-schedule trial of the suite's 1024^3 GEMM: a scalar 4 x 4
 * register tile whose four zero stores gcc -O3 distributes into two
 * loops. */
#define GEMM_SCALAR_TILE                                                       \
    "{\"v\":1,\"steps\":[[\"CHR\",0,1],[\"CHR\",1,0],[\"CHW\",2],"             \
    "[\"SP\",3,1,[32]],[\"SP\",3,0,[512]],[\"RE\",3,[0,2,1,3]],"               \
    "[\"FU\",3,0,2],[\"SP\",2,2,[4]],[\"SP\",2,1,[8,4,1]],"                    \
    "[\"SP\",2,0,[1,128,4]],[\"RE\",2,[0,4,1,5,8,2,6,9,3,7]],"                 \
    "[\"CA\",2,3,0],[\"CI\",1],[\"CI\",0],[\"AN\",2,8,\"unroll\"],"            \
    "[\"PR\",2,0,16],[\"AN\",3,0,\"parallel\"],[\"AN\",3,2,\"vectorize\"]]}"

#define KERNEL_OPTIONS                                                         \
    "#pragma GCC optimize(\"no-loop-unroll-and-jam\", "                        \
    "\"no-tree-loop-distribution\")\n"

/* Compiles src with gcc -O3 and returns how many loops one of the two
 * passes transformed, by gcc's own report.  Distributions into library
 * calls alone (a loop become memset) are -O2's pattern pass: not counted. */
static int
passes_applied(const char *src)
{
    char dir[4096], cmd[9000], *info;
    FILE *f;
    int n;

    ts_tmpdir(dir, sizeof(dir));
    snprintf(cmd, sizeof(cmd), "%s/k.c", dir);
    f = fopen(cmd, "w");
    assert_non_null(f);
    fputs(src, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && gcc -O3 -march=native -fopenmp -c k.c -o k.o "
             "-fopt-info-loop-optimized=info.txt",
             dir);
    if (system(cmd) != 0)
        fail_msg("%s", cmd);
    info = ktt_slurp(dir, "info.txt", NULL);
    assert_non_null(info);
    n = ktt_count(info, "unroll and jam") +
        ktt_count(info, "distributed: split to ") -
        ktt_count(info, "distributed: split to 0 loops");
    free(info);
    ts_rmrf(dir);
    return n;
}

static void
test_kernels_compile_without_two_o3_passes(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_state *st;
    struct kt_looptree *lt = NULL;
    struct kt_codegen_opts o;
    struct kt_buf src;
    char err[512], *at;
    (void)state;

    assert_int_equal(kt_op_matmul(&d, 1024, 1024, 1024), KT_OK);
    assert_int_equal(kt_op_build(&d, &dag, err, sizeof(err)), KT_OK);
    st = ktt_replay_json(dag, GEMM_SCALAR_TILE);
    assert_non_null(st);
    assert_int_equal(kt_lower(st, &lt, err, sizeof(err)), KT_OK);
    kt_codegen_default_opts(&o);
    kt_buf_init(&src);
    kt_codegen_prelude(&src);
    assert_int_equal(kt_codegen_function(lt, &o, "k", &src, err, sizeof(err)),
                     KT_OK);
    /* A wrapper after the kernel, as in a module or a library. */
    kt_buf_puts(&src, "void k_call(float *const *a) { k(a); }\n");
    assert_int_equal(ktt_count(src.p, KERNEL_OPTIONS), 1);
    assert_int_equal(passes_applied(src.p), 0);

    /* The same kernel without the pragma: gcc does transform it, so the
     * check above can see the passes run. */
    at = strstr(src.p, KERNEL_OPTIONS);
    memset(at, ' ', strlen(KERNEL_OPTIONS) - 1);
    assert_true(passes_applied(src.p) > 0);

    kt_buf_free(&src);
    kt_looptree_free(lt);
    kt_state_free(st);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_compile_without_two_o3_passes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
