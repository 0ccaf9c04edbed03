/* bench_baselines.c - the baselines of docs/design.md section 6 measured on this machine
 * in one run, for comparison with what kerntune finds:
 *   conv2d 3x3, 64->64, 56x56, pad 1, +bias+relu: im2col + OpenBLAS sgemm
 *   dense 1x2048 -> 1000 +bias (a GEMV): OpenBLAS sgemv
 * on 1 and 2 threads.  With a tuning database argument it also prints the
 * best kerntune result stored for each of these workloads and the ratio:
 *
 *   build/bench/bench_baselines [DB]
 */
#include <cblas.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/baseline.h"
#include "ir/ir.h"
#include "storage/storage.h"

void openblas_set_num_threads(int);

enum { C = 64, K = 64, H = 56, W = 56, R = 3, P = 1 };
enum { DN = 1000, DK = 2048 };

static float *in, *wt, *bias, *col, *out, *x, *dw, *y;
static struct kt_conv2d_params cp = {.N = 1,
                                     .C = C,
                                     .H = H,
                                     .W = W,
                                     .K = K,
                                     .R = R,
                                     .S = R,
                                     .stride_h = 1,
                                     .stride_w = 1,
                                     .pad_h = P,
                                     .pad_w = P,
                                     .dilation_h = 1,
                                     .dilation_w = 1,
                                     .groups = 1,
                                     .epilogue = KT_EPI_BIAS | KT_EPI_RELU};

static void
conv_im2col(void *arg)
{
    (void)arg;
    kt_bench_conv_im2col(&cp, in, wt, bias, col, out);
}

static void
dense_gemv(void *arg)
{
    (void)arg;
    cblas_sgemv(CblasRowMajor, CblasNoTrans, DN, DK, 1.0f, dw, DK, x, 1, 0.0f,
                y, 1);
    kt_bench_epilogue(y, 1, DN, bias, 0, 0);
}

/* Best stored cost (seconds) of the workload of d, or 0. */
static double
stored_best(const char *db, const struct kt_op_def *d)
{
    struct kt_dag *dag = NULL;
    sqlite3 *h = NULL;
    sqlite3_stmt *q = NULL;
    char err[256];
    double cost = 0;

    if (db == NULL || kt_op_build(d, &dag, err, sizeof(err)) != KT_OK)
        return 0;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h,
                           "select min(cost) from logs where err_no = 0 and "
                           "workload = ?",
                           -1, &q, NULL) == SQLITE_OK) {
        sqlite3_bind_text(q, 1, dag->key, -1, SQLITE_STATIC);
        if (sqlite3_step(q) == SQLITE_ROW)
            cost = sqlite3_column_double(q, 0);
    }
    sqlite3_finalize(q);
    sqlite3_close(h);
    kt_dag_free(dag);
    return cost;
}

int
main(int argc, char **argv)
{
    const double conv_flops = 2.0 * K * H * W * C * R * R,
                 gemv_flops = 2.0 * DN * DK;
    struct kt_op_def conv_def, dense_def;
    const char *db = argc > 1 ? argv[1] : NULL;
    double tc[3], tg[3], kc, kg;
    int i, t;

    kt_bench_openblas_widest(argv);
    in = kt_xaligned(64, sizeof(float) * C * H * W);
    wt = kt_xaligned(64, sizeof(float) * K * C * R * R);
    bias = kt_xaligned(64, sizeof(float) * DN);
    col = kt_xaligned(64, sizeof(float) * C * R * R * H * W);
    out = kt_xaligned(64, sizeof(float) * K * H * W);
    x = kt_xaligned(64, sizeof(float) * DK);
    dw = kt_xaligned(64, sizeof(float) * DN * DK);
    y = kt_xaligned(64, sizeof(float) * DN);
    for (i = 0; i < C * H * W; i++)
        in[i] = (float)(i % 17) / 17.0f - 0.5f;
    for (i = 0; i < K * C * R * R; i++)
        wt[i] = (float)(i % 13) / 13.0f - 0.5f;
    for (i = 0; i < DN; i++)
        bias[i] = 0.01f * (float)(i % 7);
    for (i = 0; i < DK; i++)
        x[i] = (float)(i % 5) / 5.0f;
    for (i = 0; i < DN * DK; i++)
        dw[i] = (float)(i % 11) / 11.0f - 0.5f;
    for (t = 1; t <= 2; t++) {
        openblas_set_num_threads(t);
        tc[t] = kt_bench_time(conv_im2col, NULL, 20);
        tg[t] = kt_bench_time(dense_gemv, NULL, 20);
    }
    printf("baselines (best of 20 timed batches, this machine, this run)\n");
    for (t = 1; t <= 2; t++) {
        printf("%dT conv2d 3x3 64->64 56x56 +bias+relu, im2col + OpenBLAS "
               "sgemm: %7.1f GFLOPS (%.3f ms)\n",
               t, conv_flops / tc[t] / 1e9, tc[t] * 1e3);
        printf("%dT dense 1x2048->1000 +bias, OpenBLAS sgemv:                  "
               "  %7.1f GFLOPS (%.4f ms)\n",
               t, gemv_flops / tg[t] / 1e9, tg[t] * 1e3);
    }
    kt_op_conv2d(&conv_def, &cp);
    kt_op_dense(&dense_def, 1, DN, DK, KT_EPI_BIAS);
    kc = stored_best(db, &conv_def);
    kg = stored_best(db, &dense_def);
    if (kc > 0)
        printf("kerntune best stored conv2d: %.1f GFLOPS = %.2fx "
               "im2col+OpenBLAS (2T)\n",
               conv_flops / kc / 1e9, tc[2] / kc);
    if (kg > 0)
        printf("kerntune best stored dense:  %.1f GFLOPS = %.2fx OpenBLAS "
               "sgemv (2T)\n",
               gemv_flops / kg / 1e9, tg[2] / kg);
    if (db != NULL && kc <= 0 && kg <= 0)
        printf("%s holds no successful trial of these workloads\n", db);
    return 0;
}
