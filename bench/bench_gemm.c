/* bench_gemm.c - 1024^3 float32 GEMM in one run: OpenBLAS cblas_sgemm,
 * oneDNN dnnl_sgemm, a naive triple loop, and kerntune schedules
 * (generated C) on 1 and 2 threads; prints GFLOPS and the ratio to the
 * better library.  Also times code generation (lowering + printing C) of
 * one GEMM candidate.
 *
 *   build/bench/bench_gemm [--rounds N] [--only-schedules] [SCHEDULE ...]
 *
 * SCHEDULE: a schedule of the matmul_1024x1024x1024 task as JSON (the
 * "schedule:" line of `kerntune show`), given inline or as a file; timed
 * next to the hand-written tiles below (--only-schedules: without them).
 * Every implementation is timed in N interleaved rounds (default 3) and
 * keeps its best: a shared machine's load then hits all of them alike,
 * and more rounds let each catch a quiet moment. */
#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/baseline.h"
#include "tests/support/ktt.h"

#define N 1024
#define MAX_KERNELS 32

void openblas_set_num_threads(int);

typedef void (*kfn)(float *const *);

static float *A, *B, *C;

static void
print_openblas(void)
{
    char cpu[256], blas[256];

    kt_bench_cpu_model(cpu, sizeof(cpu));
    kt_bench_openblas_describe(blas, sizeof(blas));
    printf("CPU: %s\n%s\n", cpu, blas);
}

static void
run_blas(void *arg)
{
    (void)arg;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, A, N,
                B, N, 0.0f, C, N);
}

static void
run_dnnl(void *arg)
{
    (void)arg;
    dnnl_sgemm('N', 'N', N, N, N, 1.0f, A, N, B, N, 0.0f, C, N);
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

/* One kerntune kernel: its name, module and best time per thread count. */
struct kernel {
    char name[64];
    void *h;
    kfn fn;
    double t[3];
};

static int
build_kernel(struct kernel *k, const struct kt_dag *dag, struct kt_state *st)
{
    struct kt_codegen_opts o;
    struct kt_buf b;
    char err[4096];

    kt_codegen_default_opts(&o);
    kt_buf_init(&b);
    if (kt_codegen_module(st, dag, &o, &b, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "%s: codegen: %s\n", k->name, err);
        kt_buf_free(&b);
        return -1;
    }
    k->h = ktt_build(b.p, err, sizeof(err));
    kt_buf_free(&b);
    if (k->h == NULL) {
        fprintf(stderr, "%s: build: %.2000s\n", k->name, err);
        return -1;
    }
    k->fn = (kfn)dlsym(k->h, "kt_kernel");
    k->t[1] = k->t[2] = 1e30;
    return 0;
}

/* A schedule given on the command line: JSON inline or in a file. */
static struct kt_state *
schedule_arg(const struct kt_dag *dag, const char *arg)
{
    struct kt_step *steps;
    struct kt_state *st = NULL;
    char err[1024], *json = NULL;
    int n;

    if (arg[0] != '{') {
        FILE *f = fopen(arg, "r");
        long len;
        if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
            fseek(f, 0, SEEK_SET) != 0) {
            fprintf(stderr, "%s: cannot read\n", arg);
            if (f != NULL)
                fclose(f);
            return NULL;
        }
        json = calloc(1, (size_t)len + 1);
        if (json == NULL || fread(json, 1, (size_t)len, f) != (size_t)len) {
            fprintf(stderr, "%s: cannot read\n", arg);
            fclose(f);
            free(json);
            return NULL;
        }
        fclose(f);
    }
    if (kt_steps_from_json(json ? json : arg, &steps, &n, err, sizeof(err)) !=
            KT_OK ||
        kt_state_replay(dag, steps, n, &st, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "%s: %s\n", arg, err);
        st = NULL;
    } else {
        free(steps);
    }
    free(json);
    return st;
}

#define WHOLE_K_PACKED                                                         \
    "{\"v\":1,\"steps\":[[\"CHR\",0,1],[\"SP\",1,0,[8]],[\"SP\",1,2,[1,32]],"  \
    "[\"RE\",1,[2,0,3,5,1,4]],[\"CA\",0,1,0],[\"AN\",0,1,\"vectorize\"],"      \
    "[\"AN\",1,4,\"unroll\"],[\"AN\",1,5,\"vectorize\"],[\"AN\",1,0,"          \
    "\"parallel\"]]}"

static void
codegen_time(const struct kt_dag *dag)
{
    struct kt_codegen_opts o;
    struct kt_state *st = kt_state_new(dag);
    struct kt_buf b;
    char err[4096];
    int reps = 2000, i;
    double t0;

    kt_codegen_default_opts(&o);
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

int
main(int argc, char **argv)
{
    static const int tiles[][3] = {{8, 32, 256},  {4, 64, 512}, {8, 64, 256},
                                   {16, 32, 256}, {8, 32, 512}, {8, 64, 64},
                                   {8, 32, 64},   {4, 64, 64}};
    static struct kernel ks[MAX_KERNELS];
    double flops = 2.0 * N * N * N, tb[3], td[3], tn;
    struct kt_op_def d;
    struct kt_dag *dag;
    char err[4096];
    int threads, t, i, r, nk = 0, best[3], rounds = 3, tiles_too = 1;

    kt_bench_openblas_widest(argv); /* runs again with the same argv */
    for (i = 1; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc &&
            (rounds = atoi(argv[i + 1])) > 0) {
            i++;
        } else if (strcmp(argv[i], "--only-schedules") == 0) {
            tiles_too = 0;
        } else {
            fprintf(stderr, "usage: bench_gemm [--rounds N] "
                            "[--only-schedules] [SCHEDULE ...]\n");
            return 2;
        }
    }
    argv += i - 1;
    argc -= i - 1;
    print_openblas();
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
    codegen_time(dag);

    for (t = 0; t < (int)KT_ARRAY_LEN(tiles) * tiles_too; t++) {
        struct kt_state *st = kt_state_new(dag);
        snprintf(ks[nk].name, sizeof(ks[nk].name), "tile i%d j%d k%d",
                 tiles[t][0], tiles[t][1], tiles[t][2]);
        if (gemm_schedule(st, tiles[t][0], tiles[t][1], tiles[t][2], 1) != 0 ||
            build_kernel(&ks[nk], dag, st) != 0)
            return 1;
        kt_state_free(st);
        nk++;
    }
    /* All of k inside the 8 x 32 tile (no k-blocking), B packed per 32
     * columns at the column loop: the form that matched oneDNN on 1 and
     * 2 threads (docs/performance.md). */
    snprintf(ks[nk].name, sizeof(ks[nk].name), "i8 j32 k1024 B packed");
    if (tiles_too) {
        struct kt_state *st = schedule_arg(dag, WHOLE_K_PACKED);
        if (st == NULL || build_kernel(&ks[nk], dag, st) != 0)
            return 1;
        kt_state_free(st);
        nk++;
    }
    for (i = 1; i < argc; i++) {
        struct kt_state *st = schedule_arg(dag, argv[i]);
        if (nk == MAX_KERNELS) {
            fprintf(stderr, "at most %d schedules\n",
                    MAX_KERNELS - (int)KT_ARRAY_LEN(tiles) - 1);
            return 2;
        }
        snprintf(ks[nk].name, sizeof(ks[nk].name), "schedule %d", i);
        if (st == NULL || build_kernel(&ks[nk], dag, st) != 0)
            return 1;
        kt_state_free(st);
        nk++;
    }

    if (nk == 0) {
        fprintf(stderr, "bench_gemm: --only-schedules and no SCHEDULE\n");
        return 2;
    }
    for (threads = 1; threads <= 2; threads++) {
        openblas_set_num_threads(threads);
        omp_set_num_threads(threads);
        for (t = 0; t < nk; t++)
            ((void (*)(int))dlsym(ks[t].h, "kt_set_threads"))(threads);
        tb[threads] = td[threads] = 1e30;
        for (r = 0; r < rounds; r++) {
            double x = kt_bench_time(run_blas, NULL, 3);
            tb[threads] = x < tb[threads] ? x : tb[threads];
            x = kt_bench_time(run_dnnl, NULL, 3);
            td[threads] = x < td[threads] ? x : td[threads];
            for (t = 0; t < nk; t++) {
                cur_kernel = ks[t].fn;
                x = kt_bench_time(run_kernel, NULL, 3);
                ks[t].t[threads] = x < ks[t].t[threads] ? x : ks[t].t[threads];
            }
        }
        best[threads] = 0;
        for (t = 0; t < nk; t++) {
            printf("  %dT kerntune %-20s %6.1f GFLOPS\n", threads, ks[t].name,
                   flops / ks[t].t[threads] / 1e9);
            if (ks[t].t[threads] < ks[best[threads]].t[threads])
                best[threads] = t;
        }
    }
    tn = kt_bench_time(run_naive, NULL, 1);
    printf("\n1024x1024x1024 fp32 GEMM (best of %d interleaved rounds of 3 "
           "timed batches each, measured in this run)\n",
           rounds);
    printf("%-40s %10s %12s\n", "", "GFLOPS", "vs better lib");
    for (threads = 1; threads <= 2; threads++) {
        double lib = tb[threads] < td[threads] ? tb[threads] : td[threads];
        printf("%dT OpenBLAS cblas_sgemm                  %10.1f %11.2fx\n",
               threads, flops / tb[threads] / 1e9, lib / tb[threads]);
        printf("%dT oneDNN dnnl_sgemm                     %10.1f %11.2fx\n",
               threads, flops / td[threads] / 1e9, lib / td[threads]);
        printf("%dT kerntune best (%-20s) %10.1f %11.2fx\n", threads,
               ks[best[threads]].name,
               flops / ks[best[threads]].t[threads] / 1e9,
               lib / ks[best[threads]].t[threads]);
    }
    printf("1T naive triple loop                     %10.1f %11.2fx\n",
           flops / tn / 1e9, tb[1] / tn);
    for (t = 0; t < nk; t++)
        dlclose(ks[t].h);
    kt_dag_free(dag);
    return 0;
}
