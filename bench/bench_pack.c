/* bench_pack.c - the GEMM-like workloads of the packing work (GEMM 1024^3
 * NN and dense layers 1024 -> 1024 with weights stored [out, in] at batch
 * 1 and 128), kerntune's best stored schedule against OpenBLAS cblas_sgemm
 * and oneDNN dnnl_sgemm, measured in one run on this machine:
 *
 *   build/bench/bench_pack THREADS:DB [THREADS:DB ...]
 *
 * (DB "hand": the hand-written packed schedules below instead).
 * For each database (tuned with THREADS threads) and each workload it
 * holds, the best trial's schedule is rebuilt, its pack routine (a layout
 * rewrite of the weights) is run once and timed apart, the output is
 * checked against OpenBLAS, then kernel and libraries are timed
 * interleaved (best of 30 calls each).  Prints a table and one JSON line
 * per row. */
#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/baseline.h"
#include "tests/support/ktt.h"

void openblas_set_num_threads(int);

struct workload {
    const char *name;
    int64_t M, N, K;
    int dense;        /* B is W[N, K] (transposed), else B[K, N] */
    const char *hand; /* a packed schedule written by hand */
};

/* Hand schedules (THREADS:hand): tiles i 8, j 32, k 256 in the order
 * j0 k0 i1 k1 i2 j2 (bench_gemm's), the B or W panel packed at k0 (GEMM:
 * in the kernel; dense: layout rewrite), all reachable by the sketches. */
#define HAND(LR)                                                               \
    "{\"v\":1,\"steps\":[[\"CHR\",0,1],[\"SP\",1,0,[8]],[\"SP\",1,2,[32]],"    \
    "[\"SP\",1,4,[256]],[\"RE\",1,[2,4,0,5,1,3]],[\"CA\",0,1,1]," LR           \
    "[\"AN\",1,4,\"unroll\"],[\"AN\",1,5,\"vectorize\"],[\"AN\",1,0,"          \
    "\"parallel\"],"                                                           \
    "[\"AN\",0,1,\"vectorize\"]]}"

static const struct workload workloads[] = {
    {"gemm 1024^3 NN", 1024, 1024, 1024, 0, HAND("")},
    {"dense b1 1024->1024 W[out,in]", 1, 1024, 1024, 1, NULL},
    {"dense b128 1024->1024 W[out,in]", 128, 1024, 1024, 1, HAND("[\"LR\",0],")},
};

typedef void (*kfn)(float *const *);

/* The key a build that did not mark weights constant gives dag. */
static char *
key_without_weights(const char *key)
{
    char *k = strdup(key), *p;

    while ((p = strstr(k, ":const")) != NULL)
        memmove(p, p + 6, strlen(p + 6) + 1);
    return k;
}

/* The best successful schedule of dag stored in db, or NULL.  Trials
 * stored under the key without ":const" (tuned by a build that did not
 * know weights) count too. */
static char *
best_config(const char *db, const struct kt_dag *dag, double *cost)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *q = NULL;
    char *cfg = NULL, *plain = key_without_weights(dag->key);

    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h,
                           "select config, cost from logs where err_no = 0 "
                           "and workload in (?, ?) order by cost limit 1",
                           -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_text(q, 1, dag->key, -1, SQLITE_STATIC);
        sqlite3_bind_text(q, 2, plain, -1, SQLITE_STATIC);
        if (sqlite3_step(q) == SQLITE_ROW) {
            cfg = strdup((const char *)sqlite3_column_text(q, 0));
            *cost = sqlite3_column_double(q, 1);
        }
    }
    sqlite3_finalize(q);
    sqlite3_close(h);
    free(plain);
    return cfg;
}

static void *
build(const struct kt_dag *dag, const char *cfg)
{
    struct kt_codegen_opts o;
    struct kt_step *steps;
    struct kt_state *st;
    struct kt_buf b;
    char err[4096];
    void *h = NULL;
    int n;

    if (kt_steps_from_json(cfg, &steps, &n, err, sizeof(err)) != KT_OK ||
        kt_state_replay(dag, steps, n, &st, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "schedule: %s\n", err);
        return NULL;
    }
    free(steps);
    kt_codegen_default_opts(&o);
    kt_buf_init(&b);
    if (kt_codegen_module(st, dag, &o, &b, err, sizeof(err)) == KT_OK)
        h = ktt_build(b.p, err, sizeof(err));
    if (h == NULL)
        fprintf(stderr, "build: %.2000s\n", err);
    kt_buf_free(&b);
    kt_state_free(st);
    return h;
}

static void
run_one(const struct workload *w, int threads, const char *db)
{
    struct kt_op_def d;
    struct kt_dag *dag;
    char err[512], *cfg;
    double stored = 0, flops = 2.0 * w->M * w->N * w->K, tk = 1e30, tb = 1e30,
           td = 1e30, tp = 0, num = 0, den = 0, t0, best_lib;
    float *A, *B, *C, *R, *args[3];
    void *h;
    kfn kernel, pack;
    int64_t i;
    int rep;

    if (w->dense) {
        kt_op_dense(&d, w->M, w->N, w->K, 0);
    } else { /* as bench/gemm1024.json writes it */
        memset(&d, 0, sizeof(d));
        snprintf(d.text, sizeof(d.text), "C[i,j] += A[i,k] * B[k,j]");
        d.nshapes = 2;
        d.shapes[0] = (struct kt_shape){"A", 2, {w->M, w->K}};
        d.shapes[1] = (struct kt_shape){"B", 2, {w->K, w->N}};
    }
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    if (strcmp(db, "hand") == 0) {
        if (w->hand == NULL) {
            kt_dag_free(dag);
            return;
        }
        cfg = strdup(w->hand);
        stored = 0;
    } else {
        cfg = best_config(db, dag, &stored);
    }
    if (cfg == NULL || (h = build(dag, cfg)) == NULL) {
        free(cfg);
        kt_dag_free(dag);
        return;
    }
    A = kt_xaligned(64, sizeof(float) * (size_t)(w->M * w->K));
    B = kt_xaligned(64, sizeof(float) * (size_t)(w->K * w->N));
    C = kt_xaligned(64, sizeof(float) * (size_t)(w->M * w->N));
    R = kt_xaligned(64, sizeof(float) * (size_t)(w->M * w->N));
    for (i = 0; i < w->M * w->K; i++)
        A[i] = (float)((i * 7 % 13) - 6) / 7.0f;
    for (i = 0; i < w->K * w->N; i++)
        B[i] = (float)((i * 5 % 11) - 5) / 5.0f;
    args[0] = A;
    args[1] = B;
    args[2] = C;
    ((void (*)(int))dlsym(h, "kt_set_threads"))(threads);
    openblas_set_num_threads(threads);
    omp_set_num_threads(threads);
    *(void **)&kernel = dlsym(h, "kt_kernel");
    *(void **)&pack = dlsym(h, "kt_pack");
    if (pack != NULL) {
        t0 = kt_now();
        pack(args);
        tp = kt_now() - t0;
    }
    for (rep = 0; rep < 30; rep++) {
        t0 = kt_now();
        kernel(args);
        tk = fmin(tk, kt_now() - t0);
        t0 = kt_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans,
                    w->dense ? CblasTrans : CblasNoTrans, (int)w->M, (int)w->N,
                    (int)w->K, 1.0f, A, (int)w->K, B,
                    (int)(w->dense ? w->K : w->N), 0.0f, R, (int)w->N);
        tb = fmin(tb, kt_now() - t0);
        t0 = kt_now();
        dnnl_sgemm('N', w->dense ? 'T' : 'N', w->M, w->N, w->K, 1.0f, A, w->K,
                   B, w->dense ? w->K : w->N, 0.0f, R, w->N);
        td = fmin(td, kt_now() - t0);
    }
    for (i = 0; i < w->M * w->N; i++) {
        num += ((double)C[i] - R[i]) * ((double)C[i] - R[i]);
        den += (double)R[i] * R[i];
    }
    best_lib = fmin(tb, td);
    printf("%-32s %dT %8.1f %8.1f %8.1f %7.2fx %7.2fx %8.3f %8.1f %s\n",
           w->name, threads, flops / tk / 1e9, flops / tb / 1e9,
           flops / td / 1e9, best_lib / tk, stored > 0 ? best_lib / stored : 0,
           tp * 1e3, stored > 0 ? flops / stored / 1e9 : 0,
           sqrt(num / den) < 1e-4 ? "ok" : "WRONG");
    fprintf(stderr,
            "{\"workload\":\"%s\",\"threads\":%d,\"kerntune_gflops\":%.2f,"
            "\"openblas_gflops\":%.2f,\"onednn_gflops\":%.2f,\"ratio\":%.3f,"
            "\"pack_ms\":%.3f,\"tuner_gflops\":%.2f,\"rel_err\":%.3g,"
            "\"schedule\":%s}\n",
            w->name, threads, flops / tk / 1e9, flops / tb / 1e9,
            flops / td / 1e9, best_lib / tk, tp * 1e3,
            stored > 0 ? flops / stored / 1e9 : 0, sqrt(num / den), cfg);
    free(A);
    free(B);
    free(C);
    free(R);
    free(cfg);
    kt_dag_free(dag);
    /* h stays loaded: its pack storage is the module's */
}

int
main(int argc, char **argv)
{
    int a, k;

    kt_bench_openblas_widest(argv);
    if (argc < 2) { /* `make bench` runs every bench program bare */
        printf("bench_pack: skipped (pass THREADS:DB ... of GEMM-like "
               "tunings, or THREADS:hand)\n");
        return 0;
    }
    printf("%-32s %2s %8s %8s %8s %8s %8s %8s %8s\n", "workload (GFLOPS)", "",
           "kerntune", "OpenBLAS", "oneDNN", "vs best", "(tuner)", "pack ms",
           "tuner");
    for (a = 1; a < argc; a++) {
        int threads = atoi(argv[a]);
        const char *db = strchr(argv[a], ':');
        if (threads < 1 || db == NULL) {
            fprintf(stderr, "%s: expected THREADS:DB\n", argv[a]);
            return 2;
        }
        for (k = 0; k < (int)KT_ARRAY_LEN(workloads); k++)
            run_one(&workloads[k], threads, db + 1);
    }
    return 0;
}
