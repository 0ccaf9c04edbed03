/* bench_measure.c - measurement overhead and timing noise, through the real
 * path: the tracker on 127.0.0.1, one local kerntune-rpc worker
 * ($KT_BIN_DIR, $BUILD or build/), the real compiler.
 *
 * 1. Overhead per trial: 30 trials of a tiny kernel (1000-float add,
 *    number=1 repeat=1 min_repeat_ms=0), so the kernel's own time is
 *    microseconds.  Reported: the end-to-end wall per trial, the compiler's
 *    share (build_s), the worker-side run job (fork + dlopen + inputs +
 *    reference + check + timing: run_s) minus the kernel's timed calls, and
 *    the rest (dispatch, framing, .so transfer, scheduling) = wall - build
 *    - run.
 * 2. Noise: one fixed 128^3 GEMM measured as 20 separate trials with
 *    repeat=5, min_repeat_ms=50: the mean coefficient of variation of the
 *    repeats inside a trial, and the CV of the 20 trial costs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "measure/measure.h"

#define NT 30
#define NN 20

static const char
    *tiny = "const char kt_workload_hash[17] = \"benchadd00000000\";\n"
            "const int kt_nbufs = 3;\n"
            "const long long kt_buf_elems[] = {1000, 1000, 1000};\n"
            "const unsigned char kt_buf_is_output[] = {0, 0, 1};\n"
            "const double kt_flops = 1000;\n"
            "void kt_set_threads(int n) { (void)n; }\n"
            "void kt_reference(float *const *b) {\n"
            "  for (int i = 0; i < 1000; i++) b[2][i] = b[0][i] + b[1][i]; }\n"
            "void kt_kernel(float *const *b) {\n"
            "  for (int i = 0; i < 1000; i++) b[2][i] = b[0][i] + b[1][i]; }\n";

static const char *gemm =
    "#include <string.h>\n#define S 128\n"
    "const char kt_workload_hash[17] = \"benchgemm1280000\";\n"
    "const int kt_nbufs = 3;\n"
    "const long long kt_buf_elems[] = {S * S, S * S, S * S};\n"
    "const unsigned char kt_buf_is_output[] = {0, 0, 1};\n"
    "const double kt_flops = 2.0 * S * S * S;\n"
    "void kt_set_threads(int n) { (void)n; }\n"
    "void kt_reference(float *const *b) {\n"
    "  for (int i = 0; i < S; i++) for (int j = 0; j < S; j++) {\n"
    "    float s = 0; for (int k = 0; k < S; k++) s += b[0][i*S+k] * "
    "b[1][k*S+j];\n    b[2][i*S+j] = s; } }\n"
    "void kt_kernel(float *const *b) {\n"
    "  float *restrict A = b[0], *restrict B = b[1], *restrict C = b[2];\n"
    "  memset(C, 0, sizeof(float) * S * S);\n"
    "  for (int i = 0; i < S; i++) for (int k = 0; k < S; k++)\n"
    "    for (int j = 0; j < S; j++) C[i*S+j] += A[i*S+k] * B[k*S+j]; }\n";

struct state {
    int done;
    int n;
    int fails;
    double build_s, run_s, kernel_s;
    double cost[NN], cv[NN];
};

static void
on_done(void *arg, const struct kt_measure_result *r, int n)
{
    struct state *s = arg;
    int i, j;

    s->done = 1;
    s->n = n;
    for (i = 0; i < n; i++) {
        if (r[i].err_no != 0) {
            fprintf(stderr, "trial %d: %s: %s\n", i,
                    kt_measure_errname(r[i].err_no), r[i].err_text);
            s->fails++;
            continue;
        }
        s->build_s += r[i].build_s;
        s->run_s += r[i].run_s;
        for (j = 0; j < r[i].ncosts; j++)
            s->kernel_s += r[i].costs[j]; /* number == 1 in part 1 */
        if (i < NN) {
            s->cost[i] = r[i].cost;
            s->cv[i] = r[i].cv;
        }
    }
}

static int
run_batch(uv_loop_t *loop, struct kt_tracker *t, const char *src, int n,
          const struct kt_measure_opts *o, struct state *s, double *wall)
{
    struct kt_candidate c[NT];
    char err[256];
    double t0;
    int i;

    memset(s, 0, sizeof(*s));
    for (i = 0; i < n; i++) {
        memset(&c[i], 0, sizeof(c[i]));
        c[i].source = src;
        c[i].cc = "cc -O3 -march=native";
    }
    t0 = kt_now();
    if (kt_tracker_submit(t, "local", c, n, o, on_done, s, err, sizeof(err)) <
        0) {
        fprintf(stderr, "submit: %s\n", err);
        return -1;
    }
    while (!s->done && kt_now() - t0 < 300)
        uv_run(loop, UV_RUN_ONCE);
    *wall = kt_now() - t0;
    return s->done && s->fails == 0 ? 0 : -1;
}

int
main(void)
{
    uv_loop_t loop;
    struct kt_tracker *t;
    struct kt_tracker_opts to;
    struct kt_measure_opts o;
    struct state s;
    char rpc[512], err[256];
    const char *dir = getenv("KT_BIN_DIR");
    double wall, t0, mean = 0, sd = 0, cvin = 0;
    int i, rc = 1;

    if (dir == NULL)
        dir = getenv("BUILD");
    snprintf(rpc, sizeof(rpc), "%s/kerntune-rpc", dir ? dir : "build");
    kt_log_init(LOG_WARNING);
    uv_loop_init(&loop);
    kt_tracker_default_opts(&to);
    if (kt_tracker_new(&t, &loop, &to, err, sizeof(err)) < 0 ||
        kt_tracker_spawn_local(t, 1, rpc, "local", "build,run", err,
                               sizeof(err)) < 0) {
        fprintf(stderr, "bench_measure: %s\n", err);
        return 1;
    }
    t0 = kt_now();
    while (kt_tracker_nworkers(t, "local") < 1 && kt_now() - t0 < 30)
        uv_run(&loop, UV_RUN_ONCE);

    kt_measure_default_opts(&o);
    o.number = 1;
    o.repeat = 1;
    o.min_repeat_ms = 0;
    if (run_batch(&loop, t, tiny, NT, &o, &s, &wall) < 0)
        goto out;
    printf("measure overhead, %d trials of a 1000-float add, one local "
           "worker:\n",
           NT);
    printf("  end-to-end wall per trial         %8.2f ms\n", wall / NT * 1e3);
    printf("  compiler (build_s)                %8.2f ms\n",
           s.build_s / NT * 1e3);
    printf("  run job minus kernel time         %8.2f ms  (fork, dlopen, "
           "inputs, reference, check)\n",
           (s.run_s - s.kernel_s) / NT * 1e3);
    printf("  dispatch + transfer (wall-build-run) %5.2f ms\n",
           (wall - s.build_s - s.run_s) / NT * 1e3);
    printf("  overhead excluding build and kernel %6.2f ms\n",
           (wall - s.build_s - s.kernel_s) / NT * 1e3);

    o.repeat = 5;
    o.min_repeat_ms = 50;
    if (run_batch(&loop, t, gemm, NN, &o, &s, &wall) < 0)
        goto out;
    for (i = 0; i < NN; i++) {
        mean += s.cost[i] / NN;
        cvin += s.cv[i] / NN;
    }
    for (i = 0; i < NN; i++)
        sd += (s.cost[i] - mean) * (s.cost[i] - mean) / (NN - 1);
    printf("timing noise, 128^3 GEMM, %d trials x repeat 5 x >=50 ms:\n", NN);
    printf("  mean cost                          %8.4f ms (%.2f GFLOPS)\n",
           mean * 1e3, 2.0 * 128 * 128 * 128 / mean / 1e9);
    printf("  CV of repeats within a trial (mean) %7.4f\n", cvin);
    printf("  CV of trial costs across trials     %7.4f\n", sqrt(sd) / mean);
    rc = 0;
out:
    kt_tracker_close(t);
    uv_run(&loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&loop) != 0) {
        fprintf(stderr, "bench_measure: loop not closed\n");
        rc = 1;
    }
    return rc;
}
