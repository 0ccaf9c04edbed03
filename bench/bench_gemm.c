/* bench_gemm.c - 1024^3 float32 GEMM in one run: OpenBLAS cblas_sgemm, a
 * naive triple loop, and hand-written kerntune schedules (generated C),
 * on 1 and 2 threads; prints GFLOPS and the ratio to OpenBLAS.  Also times
 * code generation (lowering + printing C) of one GEMM candidate. */
#include <cblas.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/baseline.h"
#include "tests/support/ktt.h"

#define N 1024

void openblas_set_num_threads(int);

typedef void (*kfn)(float *const *);

static float *A, *B, *C;

static void
run_blas(void *arg)
{
    (void)arg;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, A, N,
                B, N, 0.0f, C, N);
}

static void
run_naive(void *arg)
{
    int i, j, k;

    (void)arg;
    for (i = 0; i < N; i++)
        for (j = 0; j < N; j++) {
            float s = 0;
            for (k = 0; k < N; k++)
                s += A[i * N + k] * B[k * N + j];
            C[i * N + j] = s;
        }
}

static kfn cur_kernel;
static void
run_kernel(void *arg)
{
    float *args[3] = {A, B, C};
    (void)arg;
    cur_kernel(args);
}

/* j-tile / k-tile / i-tile with an (ti x tj) register tile, j vectorized. */
static int
gemm_schedule(struct kt_state *st, int ti, int tj, int tk, int parallel)
{
    char err[256];
    struct kt_step steps[] = {
        {KT_STEP_SPLIT, 0, 0, 1, {ti}},
        {KT_STEP_SPLIT, 0, 2, 1, {tj}},
        {KT_STEP_SPLIT, 0, 4, 1, {tk}},
        {KT_STEP_REORDER, 0, 0, 6, {2, 4, 0, 5, 1, 3}}, /* j0 k0 i0 k1 i1 j1 */
        {KT_STEP_ANNOTATE, 0, 4, 0, {KT_ANN_UNROLL}},
        {KT_STEP_ANNOTATE, 0, 5, 0, {KT_ANN_VECTORIZE}},
        {KT_STEP_ANNOTATE, 0, 0, 0, {parallel ? KT_ANN_PARALLEL : KT_ANN_NONE}},
    };
    unsigned i;

    for (i = 0; i < KT_ARRAY_LEN(steps); i++)
        if (kt_state_apply(st, &steps[i], err, sizeof(err)) != KT_OK) {
            fprintf(stderr, "schedule: %s\n", err);
            return -1;
        }
    return 0;
}

int
main(void)
{
    static const int tiles[][3] = {{8, 32, 256},  {4, 64, 512}, {8, 64, 256},
                                   {16, 32, 256}, {8, 32, 512}, {8, 64, 64},
                                   {8, 32, 64},   {4, 64, 64}};
    double flops = 2.0 * N * N * N, tb[3], tn, tk[3] = {1e30, 1e30, 1e30};
    struct kt_op_def d;
    struct kt_dag *dag;
    struct kt_codegen_opts o;
    char err[4096], best[3][64] = {"", "", ""};
    int threads, t, i;

    A = kt_xaligned(64, sizeof(float) * N * N);
    B = kt_xaligned(64, sizeof(float) * N * N);
    C = kt_xaligned(64, sizeof(float) * N * N);
    for (i = 0; i < N * N; i++) {
        A[i] = (float)((i * 7 % 13) - 6) / 7.0f;
        B[i] = (float)((i * 5 % 11) - 5) / 5.0f;
    }
    kt_op_matmul(&d, N, N, N);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    kt_codegen_default_opts(&o);

    /* Code generation time of one candidate: lower + print C. */
    {
        struct kt_state *st = kt_state_new(dag);
        struct kt_buf b;
        int reps = 2000;
        double t0;
        gemm_schedule(st, 8, 32, 256, 1);
        kt_buf_init(&b);
        t0 = kt_now();
        for (i = 0; i < reps; i++) {
            struct kt_looptree *lt;
            kt_buf_reset(&b);
            kt_lower(st, &lt, err, sizeof(err));
            kt_codegen_function(lt, &o, "k", &b, err, sizeof(err));
            kt_looptree_free(lt);
        }
        printf("codegen (lower + print C) of one GEMM candidate: %.1f us\n",
               (kt_now() - t0) / reps * 1e6);
        kt_buf_free(&b);
        kt_state_free(st);
    }

    for (threads = 1; threads <= 2; threads++) {
        openblas_set_num_threads(threads);
        tb[threads] = kt_bench_time(run_blas, NULL, 10);
        for (t = 0; t < (int)KT_ARRAY_LEN(tiles); t++) {
            struct kt_state *st = kt_state_new(dag);
            struct kt_buf b;
            void *h;
            double tt;
            gemm_schedule(st, tiles[t][0], tiles[t][1], tiles[t][2], 1);
            kt_buf_init(&b);
            if (kt_codegen_module(st, dag, &o, &b, err, sizeof(err)) != KT_OK) {
                fprintf(stderr, "codegen: %s\n", err);
                return 1;
            }
            h = ktt_build(b.p, err, sizeof(err));
            kt_buf_free(&b);
            kt_state_free(st);
            if (h == NULL) {
                fprintf(stderr, "build: %s\n", err);
                return 1;
            }
            ((void (*)(int))dlsym(h, "kt_set_threads"))(threads);
            cur_kernel = (kfn)dlsym(h, "kt_kernel");
            tt = kt_bench_time(run_kernel, NULL, 10);
            printf("  %dT kerntune tile i%d j%d k%d: %6.1f GFLOPS\n", threads,
                   tiles[t][0], tiles[t][1], tiles[t][2], flops / tt / 1e9);
            if (tt < tk[threads]) {
                tk[threads] = tt;
                snprintf(best[threads], sizeof(best[threads]), "i%d j%d k%d",
                         tiles[t][0], tiles[t][1], tiles[t][2]);
            }
        }
    }
    tn = kt_bench_time(run_naive, NULL, 1);
    printf("\n1024x1024x1024 fp32 GEMM (best of 10 timed batches each, "
           "measured in this run)\n");
    printf("%-28s %10s %10s\n", "", "GFLOPS", "vs OpenBLAS");
    for (threads = 1; threads <= 2; threads++) {
        printf("%dT OpenBLAS cblas_sgemm     %10.1f %10.2fx\n", threads,
               flops / tb[threads] / 1e9, 1.0);
        printf("%dT kerntune best (%s) %6.1f %10.2fx\n", threads, best[threads],
               flops / tk[threads] / 1e9, tb[threads] / tk[threads]);
    }
    printf("1T naive triple loop         %10.1f %10.2fx\n", flops / tn / 1e9,
           tb[1] / tn);
    kt_dag_free(dag);
    return 0;
}
