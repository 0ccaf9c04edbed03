/* test_measure.c - the tracker in-process on 127.0.0.1 with real
 * kerntune-rpc worker processes ($BUILD/kerntune-rpc) building and timing
 * hand-written kernels that follow the kernel ABI of ir/ir.h:
 *   (a) 32 GEMM candidates via two workers;
 *   (b) a worker killed with SIGKILL mid-batch;
 *   (c) segfault, hang, 100 GiB allocation, SIGFPE, abort, wrong answer,
 *       NaN on one worker that survives them all;
 *   (d) a wrong token and garbage streams beside a good worker;
 *   (e) compiler error and build timeout;
 *   (f) the FMA peak probe on 1 and 2 threads;
 *   (g) a candidate submitted again runs the object built the first time;
 * plus rpc-status.  Every wait is bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ir/ir.h"
#include "measure/measure.h"

#define CC "cc -O2"
#define WAIT_S 60.0

/* ---- kernels ------------------------------------------------------------ */

/* A 32x32x32 GEMM whose kt_kernel is a tiled nest in loop order 'order'
 * (a permutation of "ijk") with tile size 'tile'; 'body' replaces the
 * kernel body when not NULL (broken kernels). */
static char *
gemm_source(const char *order, int tile, const char *body)
{
    struct kt_buf b;
    int l;

    kt_buf_init(&b);
    kt_buf_puts(&b,
                "#include <stdlib.h>\n#include <string.h>\n"
                "#define M 32\n#define N 32\n#define K 32\n"
                "const char kt_workload_hash[17] = \"0123456789abcdef\";\n"
                "const int kt_nbufs = 3;\n"
                "const long long kt_buf_elems[] = {M * K, K * N, M * N};\n"
                "const unsigned char kt_buf_is_output[] = {0, 0, 1};\n"
                "const double kt_flops = 2.0 * M * N * K;\n"
                "void kt_set_threads(int n) { (void)n; }\n"
                "void kt_reference(float *const *b) {\n"
                "  for (int i = 0; i < M; i++) for (int j = 0; j < N; j++) {\n"
                "    float s = 0;\n"
                "    for (int k = 0; k < K; k++) s += b[0][i*K+k] * "
                "b[1][k*N+j];\n"
                "    b[2][i*N+j] = s; } }\n"
                "void kt_kernel(float *const *b) {\n"
                "  float *A = b[0], *B = b[1], *C = b[2];\n");
    if (body != NULL) {
        kt_buf_printf(&b, "  (void)A; (void)B; (void)C;\n%s\n}\n", body);
        return kt_buf_take(&b);
    }
    kt_buf_puts(&b, "  memset(C, 0, sizeof(float) * M * N);\n");
    for (l = 0; l < 3; l++)
        kt_buf_printf(&b, "  for (int %c0 = 0; %c0 < %c; %c0 += %d)\n",
                      order[l], order[l],
                      order[l] == 'i'   ? 'M'
                      : order[l] == 'j' ? 'N'
                                        : 'K',
                      order[l], tile);
    for (l = 0; l < 3; l++)
        kt_buf_printf(&b, "  for (int %c = %c0; %c < %c0 + %d; %c++)\n",
                      order[l], order[l], order[l], order[l], tile, order[l]);
    kt_buf_puts(&b, "    C[i*N+j] += A[i*K+k] * B[k*N+j];\n}\n");
    return kt_buf_take(&b);
}

static const char *const bodies[] = {
    /* 0 segfault */ "  *(volatile int *)0 = 1;",
    /* 1 hang */ "  for (;;) __asm__ volatile(\"\");",
    /* 2 100 GiB */
    ("  size_t n = (size_t)100 << 30; char *p = malloc(n);\n"
     "  for (size_t i = 0; i < n; i += 4096) p[i] = 1;\n"
     "  C[0] = p[1];"),
    /* 3 SIGFPE (integer division; float division does not trap) */
    "  volatile int a = 100, z = 0; volatile int x = a / z; (void)x;",
    /* 4 abort */ "  abort();",
    /* 5 wrong */
    ("  for (int i = 0; i < M; i++) for (int j = 0; j < N; j++) {\n"
     "    float s = 0; for (int k = 0; k < K; k++) s += A[i*K+k]*B[k*N+j];\n"
     "    C[i*N+j] = s; }\n  C[5] += 1.0f;"),
    /* 6 NaN */
    ("  for (int i = 0; i < M * N; i++) C[i] = 0; volatile float z = 0;\n"
     "  C[7] = z / z;"),
};

/* ---- environment -------------------------------------------------------- */

struct env {
    uv_loop_t loop;
    struct kt_tracker *t;
    char rpc[512];
    char tmp[256];
    /* The last batch. */
    int done;
    int n;
    int calls;
    int err_no[64];
    char err_text[64][512];
    char worker[64][96];
    char build_worker[64][96];
    char build_reused[64][4];
    char kv_signal[64][32];
    char requeued[64][96];
    char build_cpu_s[64][32];
    char kernel_threads[64][16];
    char threads_bound[64][8];
    char xcpu_ns[64][16];
    double cost[64];
    double cv[64];
    int ncosts[64];
};

static const char *
kv(const struct kt_result *r, const char *k)
{
    const char *v = kt_result_kv(r, k);
    return v != NULL ? v : "";
}

static void
on_done(void *arg, const struct kt_result *res, int n)
{
    struct env *e = arg;
    int i;

    e->calls++;
    e->done = 1;
    e->n = n;
    for (i = 0; i < n && i < 64; i++) {
        e->err_no[i] = res[i].err_no;
        snprintf(e->err_text[i], sizeof(e->err_text[i]), "%s", res[i].err_text);
        snprintf(e->worker[i], sizeof(e->worker[i]), "%s",
                 res[i].worker ? res[i].worker : "");
        snprintf(e->build_worker[i], sizeof(e->build_worker[i]), "%s",
                 kv(&res[i], "build_worker"));
        snprintf(e->build_reused[i], sizeof(e->build_reused[i]), "%s",
                 kv(&res[i], "build_reused"));
        snprintf(e->kv_signal[i], sizeof(e->kv_signal[i]), "%s",
                 kv(&res[i], "signal"));
        snprintf(e->requeued[i], sizeof(e->requeued[i]), "%s",
                 kv(&res[i], "requeued_from"));
        snprintf(e->build_cpu_s[i], sizeof(e->build_cpu_s[i]), "%s",
                 kv(&res[i], "build_cpu_s"));
        snprintf(e->kernel_threads[i], sizeof(e->kernel_threads[i]), "%s",
                 kv(&res[i], "kernel_threads"));
        snprintf(e->threads_bound[i], sizeof(e->threads_bound[i]), "%s",
                 kv(&res[i], "threads_bound"));
        snprintf(e->xcpu_ns[i], sizeof(e->xcpu_ns[i]), "%s",
                 kv(&res[i], "xcpu_ns"));
        e->cost[i] = res[i].cost;
        e->cv[i] = res[i].cv;
        e->ncosts[i] = res[i].ncosts;
    }
}

typedef int (*pred_fn)(struct env *e, void *arg);

static int
run_until(struct env *e, pred_fn p, void *arg, double timeout_s)
{
    double end = kt_now() + timeout_s;

    while (!p(e, arg)) {
        if (kt_now() > end)
            return -1;
        uv_run(&e->loop, UV_RUN_ONCE);
    }
    return 0;
}

static int
p_workers(struct env *e, void *arg)
{
    return kt_tracker_nworkers(e->t, NULL) >= *(int *)arg;
}

static int
p_refused(struct env *e, void *arg)
{
    unsigned refused = 0;

    kt_tracker_counters(e->t, &refused, NULL, NULL, NULL);
    return refused >= *(unsigned *)arg;
}

static int
p_done(struct env *e, void *arg)
{
    (void)arg;
    return e->done;
}

static int
p_results(struct env *e, void *arg)
{
    unsigned r;
    kt_tracker_counters(e->t, NULL, NULL, NULL, &r);
    return (int)r >= *(int *)arg;
}

static int
p_bad(struct env *e, void *arg)
{
    unsigned refused, bad;
    kt_tracker_counters(e->t, &refused, &bad, NULL, NULL);
    return (int)(refused + bad) >= *(int *)arg;
}

static struct env *
env_new_cache(int serialize, size_t object_cache_bytes)
{
    struct env *e = kt_xcalloc(1, sizeof(*e));
    struct kt_tracker_opts o;
    const char *b = getenv("KT_BIN_DIR");
    char err[256];

    if (b == NULL)
        b = getenv("BUILD");
    snprintf(e->rpc, sizeof(e->rpc), "%s/kerntune-rpc", b ? b : "build");
    snprintf(e->tmp, sizeof(e->tmp), "/tmp/kt-test-measure.XXXXXX");
    assert_non_null(mkdtemp(e->tmp));
    /* Workers (even SIGKILLed ones) leave their temp dirs in e->tmp. */
    setenv("TMPDIR", e->tmp, 1);
    assert_int_equal(uv_loop_init(&e->loop), 0);
    kt_tracker_default_opts(&o);
    o.port = 0;
    o.token = "s3cret-token";
    o.serialize_hosts = serialize;
    o.object_cache_bytes = object_cache_bytes;
    if (kt_tracker_new(&e->t, &e->loop, &o, err, sizeof(err)) < 0)
        fail_msg("tracker: %s", err);
    return e;
}

static struct env *
env_new(int serialize)
{
    return env_new_cache(serialize, 0);
}

static void
spawn(struct env *e, int n, const char *roles)
{
    char err[256];
    int want = kt_tracker_nworkers(e->t, NULL) + n;

    if (kt_tracker_spawn_local(e->t, n, e->rpc, "local", roles, err,
                               sizeof(err)) < 0)
        fail_msg("%s", err);
    assert_int_equal(run_until(e, p_workers, &want, WAIT_S), 0);
}

static void
env_free(struct env *e)
{
    char cmd[300];

    kt_tracker_close(e->t);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&e->loop), 0);
    unsetenv("TMPDIR");
    snprintf(cmd, sizeof(cmd), "rm -rf %s", e->tmp);
    assert_int_equal(system(cmd), 0);
    free(e);
}

static void
submit(struct env *e, struct kt_candidate *c, int n,
       const struct kt_measure_opts *o)
{
    char err[256];

    e->done = 0;
    e->calls = 0;
    if (kt_tracker_submit(e->t, "local", c, n, o, on_done, e, err,
                          sizeof(err)) < 0)
        fail_msg("submit: %s", err);
}

static void
test_opts(struct kt_measure_opts *o)
{
    kt_measure_default_opts(o);
    o->repeat = 3;
    o->min_repeat_ms = 2;
    o->run_timeout_ms = 5000;
    o->build_timeout_ms = 20000;
}

/* ---- (a) ---------------------------------------------------------------- */

static void
test_measure_gemm_batch_two_workers(void **state)
{
    static const char *orders[] = {"ijk", "ikj", "jik", "jki", "kij", "kji"};
    static const int tiles[] = {1, 2, 4, 8, 16, 32};
    struct env *e = env_new(1);
    struct kt_candidate c[32];
    struct kt_measure_opts o;
    char *src[32];
    int i, used_a = 0, used_b = 0;
    char first[96] = "";

    (void)state;
    spawn(e, 2, "build,run");
    for (i = 0; i < 32; i++) {
        memset(&c[i], 0, sizeof(c[i]));
        src[i] = gemm_source(orders[i % 6], tiles[(i / 6 + i) % 6], NULL);
        c[i].source = src[i];
        c[i].cc = CC;
    }
    test_opts(&o);
    submit(e, c, 32, &o);
    assert_int_equal(run_until(e, p_done, NULL, WAIT_S * 2), 0);
    assert_int_equal(e->calls, 1);
    assert_int_equal(e->n, 32);
    for (i = 0; i < 32; i++) {
        if (e->err_no[i] != 0)
            fail_msg("candidate %d: err_no %d: %s", i, e->err_no[i],
                     e->err_text[i]);
        assert_int_equal(e->ncosts[i], 3);
        assert_true(e->cost[i] > 0 && e->cost[i] < 1.0);
        assert_true(e->cv[i] >= 0);
        if (first[0] == '\0')
            snprintf(first, sizeof(first), "%s", e->build_worker[i]);
        if (strcmp(e->build_worker[i], first) == 0 ||
            strcmp(e->worker[i], first) == 0)
            used_a++;
        if (strcmp(e->build_worker[i], first) != 0 ||
            strcmp(e->worker[i], first) != 0)
            used_b++;
        free(src[i]);
    }
    /* Both workers took jobs. */
    assert_true(used_a > 0 && used_b > 0);
    /* Re-timings that avoid one worker run on the other. */
    snprintf(first, sizeof(first), "%s", e->worker[0]);
    for (i = 0; i < 4; i++) {
        memset(&c[i], 0, sizeof(c[i]));
        src[i] = gemm_source(orders[i], 4, NULL);
        c[i].source = src[i];
        c[i].cc = CC;
        c[i].avoid_worker = first;
    }
    submit(e, c, 4, &o);
    assert_int_equal(run_until(e, p_done, NULL, WAIT_S * 2), 0);
    for (i = 0; i < 4; i++) {
        assert_int_equal(e->err_no[i], 0);
        assert_string_not_equal(e->worker[i], first);
        free(src[i]);
    }
    env_free(e);
}

/* ---- (b) ---------------------------------------------------------------- */

static void
test_measure_worker_killed_mid_batch(void **state)
{
    struct env *e = env_new(0);
    struct kt_candidate c[16];
    struct kt_measure_opts o;
    char *src[16];
    int pids[4], i, n, two = 2, four = 4, requeued = 0;
    unsigned lost;

    (void)state;
    spawn(e, 2, "build,run");
    for (i = 0; i < 16; i++) {
        memset(&c[i], 0, sizeof(c[i]));
        src[i] = gemm_source(i % 2 ? "ikj" : "ijk", 1 << (i % 6), NULL);
        c[i].source = src[i];
        c[i].cc = CC;
    }
    test_opts(&o);
    o.min_repeat_ms = 20;
    submit(e, c, 16, &o);
    assert_int_equal(run_until(e, p_results, &four, WAIT_S), 0);
    n = kt_tracker_local_pids(e->t, pids, 4);
    assert_int_equal(n, 2);
    assert_int_equal(kill(pids[0], SIGKILL), 0);
    assert_int_equal(run_until(e, p_done, NULL, WAIT_S * 2), 0);
    assert_int_equal(e->calls, 1); /* none duplicated */
    assert_int_equal(e->n, 16);
    for (i = 0; i < 16; i++) {
        if (e->err_no[i] != 0) /* none lost */
            fail_msg("candidate %d: err_no %d: %s", i, e->err_no[i],
                     e->err_text[i]);
        requeued += e->requeued[i][0] != '\0';
        free(src[i]);
    }
    kt_tracker_counters(e->t, NULL, NULL, &lost, NULL);
    assert_int_equal(lost, 1);
    /* The killed local worker is started again. */
    assert_int_equal(run_until(e, p_workers, &two, WAIT_S), 0);
    n = kt_tracker_local_pids(e->t, pids + 2, 2);
    assert_int_equal(n, 2);
    assert_true(pids[2] != pids[0] && pids[3] != pids[0]);
    print_message("worker killed: %d of 16 candidates re-queued\n", requeued);
    env_free(e);
}

/* ---- (c) ---------------------------------------------------------------- */

static void
test_measure_crashing_kernels(void **state)
{
    struct env *e = env_new(1);
    struct kt_candidate c[8];
    struct kt_measure_opts o;
    char *src[8];
    int i, pids[2];
    unsigned lost;
    static const int want[8] = {4, 7, 4, 4, 4, 5, 5, 0};
    static const char *sig[8] = {"SIGSEGV", "", "", "SIGFPE",
                                 "SIGABRT", "", "", ""};

    (void)state;
    spawn(e, 1, "build,run");
    for (i = 0; i < 8; i++) {
        memset(&c[i], 0, sizeof(c[i]));
        src[i] = gemm_source("ijk", 4, i < 7 ? bodies[i] : NULL);
        c[i].source = src[i];
        c[i].cc = CC;
    }
    test_opts(&o);
    o.run_timeout_ms = 1500;
    o.mem_mb = 1024;
    submit(e, c, 8, &o);
    assert_int_equal(run_until(e, p_done, NULL, WAIT_S), 0);
    for (i = 0; i < 8; i++) {
        if (e->err_no[i] != want[i])
            fail_msg("kernel %d: err_no %d (want %d): %s", i, e->err_no[i],
                     want[i], e->err_text[i]);
        if (sig[i][0] != '\0' && strcmp(e->kv_signal[i], sig[i]) != 0)
            fail_msg("kernel %d: signal '%s' (want %s): %s", i, e->kv_signal[i],
                     sig[i], e->err_text[i]);
        /* The same worker took every job, the last one included. */
        assert_string_equal(e->worker[i], e->worker[0]);
        free(src[i]);
    }
    assert_non_null(strstr(e->err_text[1], "deadline"));
    assert_non_null(strstr(e->err_text[5], "relative L2 error"));
    assert_non_null(strstr(e->err_text[6], "NaN"));
    kt_tracker_counters(e->t, NULL, NULL, &lost, NULL);
    assert_int_equal(lost, 0);
    assert_int_equal(kt_tracker_local_pids(e->t, pids, 2), 1);
    assert_int_equal(kill(pids[0], 0), 0);
    env_free(e);
}

/* ---- (d) ---------------------------------------------------------------- */

static int
raw_connect(struct env *e)
{
    char err[256];
    int fd = kt_wire_connect("127.0.0.1", kt_tracker_port(e->t), err,
                             sizeof(err));
    if (fd < 0)
        fail_msg("%s", err);
    return fd;
}

/* Runs the loop until fd reads EOF (the tracker closed it). */
static int
p_eof(struct env *e, void *arg)
{
    char buf[4096];
    int fd = *(int *)arg;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    ssize_t n;

    (void)e;
    while (poll(&pf, 1, 0) > 0) {
        n = read(fd, buf, sizeof(buf));
        if (n <= 0)
            return 1;
    }
    return 0;
}

static void
test_measure_bad_peers_refused(void **state)
{
    struct env *e = env_new(1);
    struct kt_candidate c[6];
    struct kt_measure_opts o;
    char *src[6], tokfile[300], port[64];
    unsigned char junk[4096];
    unsigned refused, bad;
    int i, fd1, fd2, fd3, status, two = 2, four = 4;
    pid_t p;
    FILE *f;

    (void)state;
    spawn(e, 1, "build,run");
    for (i = 0; i < 6; i++) {
        memset(&c[i], 0, sizeof(c[i]));
        src[i] = gemm_source("ikj", 8, NULL);
        c[i].source = src[i];
        c[i].cc = CC;
    }
    test_opts(&o);
    submit(e, c, 6, &o);
    /* A worker with the wrong token. */
    snprintf(tokfile, sizeof(tokfile), "%s/wrong", e->tmp);
    f = fopen(tokfile, "w");
    assert_non_null(f);
    fputs("not-the-token\n", f);
    fclose(f);
    assert_int_equal(chmod(tokfile, 0600), 0);
    snprintf(port, sizeof(port), "--tracker=127.0.0.1:%d",
             kt_tracker_port(e->t));
    p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        execl(e->rpc, e->rpc, "server", port, "--key=local", "--token-file",
              tokfile, "--once", (char *)NULL);
        _exit(99);
    }
    /* Garbage, an oversized frame and a truncated one. */
    for (i = 0; i < (int)sizeof(junk); i++)
        junk[i] = (unsigned char)(i * 131 + 7);
    fd1 = raw_connect(e);
    assert_int_equal(kt_wire_write_all(fd1, junk, sizeof(junk)), 0);
    fd2 = raw_connect(e);
    {
        unsigned char big[12] = {'K', 'T', 'R', '2', 0x10, 0, 0, 0, 0, 0, 0, 0};
        assert_int_equal(kt_wire_write_all(fd2, big, sizeof(big)), 0);
    }
    fd3 = raw_connect(e);
    {
        unsigned char part[20] = {'K', 'T', 'R', '2', 0,   0,   0,   100, 0,
                                  0,   0,   0,   't', 'y', 'p', 'e', '=', 'h'};
        assert_int_equal(kt_wire_write_all(fd3, part, 18), 0);
        close(fd3);
    }
    assert_int_equal(run_until(e, p_eof, &fd1, WAIT_S), 0);
    assert_int_equal(run_until(e, p_eof, &fd2, WAIT_S), 0);
    assert_int_equal(run_until(e, p_bad, &four, WAIT_S), 0);
    close(fd1);
    close(fd2);
    /* The wrong-token worker was refused and gave up. */
    for (i = 0; i < 600 && waitpid(p, &status, WNOHANG) == 0; i++)
        uv_run(&e->loop, UV_RUN_ONCE);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    kt_tracker_counters(e->t, &refused, &bad, NULL, NULL);
    assert_int_equal(refused, 1);
    assert_true(bad >= 3);
    /* The good worker was not disturbed. */
    assert_int_equal(run_until(e, p_done, NULL, WAIT_S), 0);
    for (i = 0; i < 6; i++) {
        if (e->err_no[i] != 0)
            fail_msg("candidate %d: err_no %d: %s", i, e->err_no[i],
                     e->err_text[i]);
        free(src[i]);
    }
    assert_int_equal(kt_tracker_nworkers(e->t, NULL), 1);
    (void)two;
    env_free(e);
}

/* ---- (e) ---------------------------------------------------------------- */

static void
test_measure_build_errors(void **state)
{
    struct env *e = env_new(1);
    struct kt_candidate c[4];
    struct kt_measure_opts o;
    char slowcc[300], slowcmd[320];
    char *good = gemm_source("ijk", 2, NULL);
    FILE *f;

    (void)state;
    spawn(e, 1, "build,run");
    snprintf(slowcc, sizeof(slowcc), "%s/slowcc.sh", e->tmp);
    f = fopen(slowcc, "w");
    assert_non_null(f);
    fputs("#!/bin/sh\nsleep 30\n", f);
    fclose(f);
    assert_int_equal(chmod(slowcc, 0755), 0);
    snprintf(slowcmd, sizeof(slowcmd), "%s", slowcc);
    memset(c, 0, sizeof(c));
    c[0].source = "int kt_kernel(void) { this is not C; }\n";
    c[0].cc = CC;
    c[1].source = good;
    c[1].cc = slowcmd;
    c[2].preset_err_no = KT_MERR_INSTANTIATION;
    c[2].preset_err_text = "split factor 3 does not divide 32";
    c[3].source = good;
    c[3].cc = "/nonexistent/compiler -O2";
    test_opts(&o);
    o.build_timeout_ms = 700;
    submit(e, c, 4, &o);
    assert_int_equal(run_until(e, p_done, NULL, WAIT_S), 0);
    assert_int_equal(e->err_no[0], KT_MERR_COMPILE_HOST);
    assert_non_null(strstr(e->err_text[0], "error"));
    assert_non_null(strstr(e->err_text[0], "kernel.c"));
    assert_int_equal(e->err_no[1], KT_MERR_BUILD_TIMEOUT);
    assert_int_equal(e->err_no[2], KT_MERR_INSTANTIATION);
    assert_string_equal(e->err_text[2], "split factor 3 does not divide 32");
    assert_int_equal(e->err_no[3], KT_MERR_COMPILE_HOST);
    assert_non_null(strstr(e->err_text[3], "/nonexistent/compiler"));
    free(good);
    env_free(e);
}

/* ---- (f) ---------------------------------------------------------------- */

/* The engine's FMA peak probe (ir/peak_probe.c) builds with OpenMP and
 * without, passes the runner's check against its reference on 1 and 2
 * threads, and the runner says how many threads ran it. */
static void
test_measure_peak_probe(void **state)
{
    struct env *e = env_new(1);
    struct kt_codegen_opts cg;
    struct kt_candidate c[2];
    struct kt_measure_opts o;
    struct kt_buf src;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads;

    (void)state;
    spawn(e, 1, "build,run");
    kt_codegen_default_opts(&cg);
    kt_buf_init(&src);
    kt_codegen_peak_probe(&cg, &src);
    assert_non_null(strstr(src.p, KT_MODULE_SHARED_END));
    memset(c, 0, sizeof(c));
    c[0].source = src.p;
    c[0].cc = "cc -O2 -fopenmp";
    c[1].source = src.p;
    c[1].cc = CC;
    for (threads = 1; threads <= 2; threads++) {
        char want[24];
        test_opts(&o);
        o.threads = threads;
        submit(e, c, 2, &o);
        assert_int_equal(run_until(e, p_done, NULL, WAIT_S), 0);
        snprintf(want, sizeof(want), "%ld", threads < cpus ? threads : cpus);
        if (e->err_no[0] != 0 || e->err_no[1] != 0)
            fail_msg("probe: err_no %d (%s) / %d (%s)", e->err_no[0],
                     e->err_text[0], e->err_no[1], e->err_text[1]);
        assert_string_equal(e->kernel_threads[0], want);
        assert_true(e->cost[0] > 0 && e->cost[1] > 0);
        /* the placement probe runs for kernels on two threads or more
         * (docs/measure.md, "Thread placement"); a loaded machine may
         * leave one run without a moment for both probe threads (no
         * note), so one of the two runs must have it; how long the round
         * trip took depends on the machine's load, so only its presence
         * is checked */
        if (threads == 1 || cpus < 2) {
            assert_string_equal(e->xcpu_ns[0], "");
            assert_string_equal(e->xcpu_ns[1], "");
        } else if (!(atof(e->xcpu_ns[0]) > 0) && !(atof(e->xcpu_ns[1]) > 0)) {
            fail_msg("xcpu_ns '%s', '%s' on %d threads", e->xcpu_ns[0],
                     e->xcpu_ns[1], threads);
        }
    }
    kt_buf_free(&src);
    env_free(e);
}

/* A kernel whose output is the widest CPU mask any of its OpenMP threads
 * may run on: 1 when the runner bound them one per CPU. */
static const char bound_probe_source[] =
    "#define _GNU_SOURCE\n#include <sched.h>\n#include <omp.h>\n"
    "const char kt_workload_hash[17] = \"0123456789abcdef\";\n"
    "const int kt_nbufs = 2;\n"
    "const long long kt_buf_elems[] = {1, 1};\n"
    "const unsigned char kt_buf_is_output[] = {0, 1};\n"
    "const double kt_flops = 1;\n"
    "void kt_set_threads(int n) { omp_set_num_threads(n); }\n"
    "void kt_reference(float *const *b) { b[1][0] = 1; }\n"
    "void kt_kernel(float *const *b) {\n"
    "  int widest = 0;\n"
    "  #pragma omp parallel reduction(max: widest)\n"
    "  { cpu_set_t s;\n"
    "    if (sched_getaffinity(0, sizeof(s), &s) == 0) widest = CPU_COUNT(&s); "
    "}\n"
    "  b[1][0] = (float)widest;\n}\n";

/* One run of bound_probe_source on `threads` threads by e's worker. */
static void
run_bound_probe(struct env *e, int threads)
{
    struct kt_candidate c;
    struct kt_measure_opts o;

    memset(&c, 0, sizeof(c));
    c.source = bound_probe_source;
    c.cc = "cc -O2 -fopenmp";
    test_opts(&o);
    o.threads = threads;
    submit(e, &c, 1, &o);
    assert_int_equal(run_until(e, p_done, NULL, WAIT_S), 0);
}

/* A kernel that uses every CPU of the runner gets its OpenMP threads bound
 * one per CPU (measure/worker/runner.c); one on fewer threads, or under a
 * worker whose environment sets its own binding, is left alone. */
static void
test_measure_whole_machine_team_bound(void **state)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    char want[24];
    struct env *e;

    (void)state;
    if (cpus < 2)
        skip();
    unsetenv("OMP_PROC_BIND");
    unsetenv("OMP_PLACES");
    unsetenv("GOMP_CPU_AFFINITY");
    snprintf(want, sizeof(want), "%ld", cpus);
    e = env_new(1);
    spawn(e, 1, "build,run");
    run_bound_probe(e, (int)cpus);
    if (e->err_no[0] != 0)
        fail_msg("bound team: err_no %d (%s)", e->err_no[0], e->err_text[0]);
    assert_string_equal(e->threads_bound[0], "1");
    /* counted from the CPUs before the binding, not the master's one */
    assert_string_equal(e->kernel_threads[0], want);
    run_bound_probe(e, 1);
    assert_int_equal(e->err_no[0], KT_MERR_WRONG_ANSWER);
    assert_string_equal(e->threads_bound[0], "");
    env_free(e);

    setenv("OMP_PROC_BIND", "false", 1);
    e = env_new(1);
    spawn(e, 1, "build,run");
    unsetenv("OMP_PROC_BIND");
    run_bound_probe(e, (int)cpus);
    assert_int_equal(e->err_no[0], KT_MERR_WRONG_ANSWER);
    assert_string_equal(e->threads_bound[0], "");
    env_free(e);
}

static void
write_script(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
}

/* The build budget is the compiler's CPU time: a compiler that waits (as
 * on a loaded machine) longer than the budget still builds, one that
 * burns the CPU is stopped. */
static void
test_measure_build_budget_is_cpu_time(void **state)
{
    struct env *e = env_new(1);
    struct kt_candidate c[2];
    struct kt_measure_opts o;
    char waitcc[300], burncc[300], waitcmd[512];
    char *good = gemm_source("ijk", 2, NULL);

    (void)state;
    spawn(e, 1, "build,run");
    snprintf(waitcc, sizeof(waitcc), "%s/waitcc.sh", e->tmp);
    snprintf(burncc, sizeof(burncc), "%s/burncc.sh", e->tmp);
    write_script(waitcc, "#!/bin/sh\nsleep 3\nexec \"$@\"\n");
    write_script(burncc, "#!/bin/sh\nwhile :; do :; done\n");
    snprintf(waitcmd, sizeof(waitcmd), "%s %s", waitcc, CC);
    memset(c, 0, sizeof(c));
    c[0].source = good;
    c[0].cc = waitcmd;
    c[1].source = good;
    c[1].cc = burncc;
    test_opts(&o);
    o.build_timeout_ms = 2000;
    submit(e, c, 2, &o);
    assert_int_equal(run_until(e, p_done, NULL, WAIT_S), 0);
    print_message("waiting compiler: err_no %d, %s s of CPU; burning "
                  "compiler: err_no %d (%s)\n",
                  e->err_no[0], e->build_cpu_s[0], e->err_no[1],
                  e->err_text[1]);
    assert_int_equal(e->err_no[0], 0);
    assert_true(e->build_cpu_s[0][0] != '\0' && atof(e->build_cpu_s[0]) < 2.0);
    assert_int_equal(e->err_no[1], KT_MERR_BUILD_TIMEOUT);
    free(good);
    env_free(e);
}

/* ---- rpc-status --------------------------------------------------------- */

struct status_job {
    int port;
    const char *token;
    char out[8192];
    int rc;
    char err[256];
    volatile int finished;
};

static void *
status_thread(void *arg)
{
    struct status_job *j = arg;
    FILE *f = fmemopen(j->out, sizeof(j->out) - 1, "w");

    j->rc = kt_rpc_status("127.0.0.1", j->port, j->token, f, j->err,
                          sizeof(j->err));
    fclose(f);
    j->finished = 1;
    return NULL;
}

static int
p_status(struct env *e, void *arg)
{
    (void)e;
    return ((struct status_job *)arg)->finished;
}

static void
test_measure_rpc_status(void **state)
{
    struct env *e = env_new(1);
    struct status_job j;
    pthread_t th;

    (void)state;
    spawn(e, 2, "build,run");
    memset(&j, 0, sizeof(j));
    j.port = kt_tracker_port(e->t);
    j.token = "s3cret-token";
    assert_int_equal(pthread_create(&th, NULL, status_thread, &j), 0);
    assert_int_equal(run_until(e, p_status, &j, WAIT_S), 0);
    pthread_join(th, NULL);
    if (j.rc != 0)
        fail_msg("rpc-status: %s", j.err);
    assert_non_null(strstr(j.out, "local-0"));
    assert_non_null(strstr(j.out, "local-1"));
    assert_non_null(strstr(j.out, "idle"));
    assert_non_null(strstr(j.out, "Queue Status"));
    /* A wrong token is refused. */
    memset(&j, 0, sizeof(j));
    j.port = kt_tracker_port(e->t);
    j.token = "wrong";
    assert_int_equal(pthread_create(&th, NULL, status_thread, &j), 0);
    assert_int_equal(run_until(e, p_status, &j, WAIT_S), 0);
    pthread_join(th, NULL);
    assert_true(j.rc < 0);
    assert_non_null(strstr(j.err, "authentication failed"));
    env_free(e);
}


/* ---- edge board: aarch64 worker under qemu-user ------------------------- */

static int
have_tool(const char *name)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
    return system(cmd) == 0;
}

static pid_t
start_worker(const char *const *argv, const char *token)
{
    pid_t p = fork();

    assert_true(p >= 0);
    if (p == 0) {
        setenv("KERNTUNE_TOKEN", token, 1);
        execvp(argv[0], (char *const *)argv);
        _exit(99);
    }
    return p;
}

static void
stop_worker(pid_t p)
{
    int status;

    kill(p, SIGTERM);
    assert_int_equal(waitpid(p, &status, 0), p);
}

/* Seed 001's workflow: a cross-compiled kerntune-rpc on the "board"
 * (qemu-aarch64) registers with a key and only runs; a host worker with the
 * same key builds with the aarch64 cross compiler. */
static void
test_measure_aarch64_board_under_qemu(void **state)
{
    struct env *e;
    struct kt_candidate c[2];
    struct kt_measure_opts o;
    char cross[400], cmd[1200], tracker[64];
    char *src = gemm_source("ikj", 4, NULL);
    char *bad = gemm_source("ijk", 4, bodies[0]);
    pid_t pb, pr, px;
    int two = 2, three = 3;
    unsigned refusals = 2;

    (void)state;
    if (!have_tool("aarch64-linux-gnu-gcc") || !have_tool("qemu-aarch64") ||
        access("/usr/aarch64-linux-gnu/lib", R_OK) != 0 ||
        access("measure/worker/server.c", R_OK) != 0) {
        free(src);
        free(bad);
        skip(); /* needs gcc-aarch64-linux-gnu, qemu-user, run from the
                   source tree (make test does) */
    }
    e = env_new(1);
    /* The documented command (docs/boards.md). */
    snprintf(cross, sizeof(cross), "%s/aarch64-linux-gnu/kerntune-rpc", e->tmp);
    snprintf(cmd, sizeof(cmd),
             "make -s rpc-cross CROSS=aarch64-linux-gnu- BUILD=%s >/dev/null",
             e->tmp);
    assert_int_equal(system(cmd), 0);
    snprintf(tracker, sizeof(tracker), "--tracker=127.0.0.1:%d",
             kt_tracker_port(e->t));
    {
        const char *bargv[] = {e->rpc,
                               "server",
                               tracker,
                               "--key=board",
                               "--roles=build",
                               "--name=host-builder",
                               NULL};
        const char *rargv[] = {"qemu-aarch64",
                               "-L",
                               "/usr/aarch64-linux-gnu",
                               cross,
                               "server",
                               tracker,
                               "--key=board",
                               "--roles=run",
                               "--name=sa8155",
                               NULL};
        /* A host (x86) worker under the board's key with the run role:
         * it cannot load aarch64 kernels. */
        const char *xargv[] = {e->rpc,        "server",
                               tracker,       "--key=board",
                               "--roles=run", "--name=wrong-arch",
                               NULL};
        pb = start_worker(bargv, "s3cret-token");
        pr = start_worker(rargv, "s3cret-token");
        px = start_worker(xargv, "s3cret-token");
    }
    assert_int_equal(run_until(e, p_workers, &three, WAIT_S), 0);
    /* The job's target becomes known: the x86 run worker is dropped, and
     * refused when it registers again; the builder and the board stay. */
    assert_int_equal(kt_tracker_set_key_abi(e->t, "board", "aarch64-linux-gnu"),
                     0);
    assert_int_equal(kt_tracker_nworkers(e->t, "board"), 2);
    assert_int_equal(run_until(e, p_refused, &refusals, WAIT_S), 0);
    assert_int_equal(kt_tracker_nworkers(e->t, "board"), 2);
    assert_int_equal(kt_tracker_set_key_abi(e->t, "board", "x86_64-linux-gnu"),
                     KT_EINVAL);
    assert_int_equal(run_until(e, p_workers, &two, WAIT_S), 0);
    memset(c, 0, sizeof(c));
    c[0].source = src;
    c[0].cc = "aarch64-linux-gnu-gcc -O2";
    c[1].source = bad;
    c[1].cc = "aarch64-linux-gnu-gcc -O2";
    test_opts(&o);
    o.run_timeout_ms = 20000;
    e->done = 0;
    {
        char err[256];
        if (kt_tracker_submit(e->t, "board", c, 2, &o, on_done, e, err,
                              sizeof(err)) < 0)
            fail_msg("submit: %s", err);
    }
    assert_int_equal(run_until(e, p_done, NULL, WAIT_S * 2), 0);
    if (e->err_no[0] != 0)
        fail_msg("aarch64 kernel: err_no %d: %s", e->err_no[0], e->err_text[0]);
    assert_string_equal(e->worker[0], "sa8155");
    assert_string_equal(e->build_worker[0], "host-builder");
    assert_true(e->cost[0] > 0);
    assert_int_equal(e->err_no[1], KT_MERR_RUNTIME_DEVICE);
    assert_string_equal(e->kv_signal[1], "SIGSEGV");
    print_message("aarch64 under qemu: cost %.3g s, cv %.3f\n", e->cost[0],
                  e->cv[0]);
    stop_worker(pb);
    stop_worker(pr);
    stop_worker(px);
    free(src);
    free(bad);
    env_free(e);
}

/* ---- (g) ---------------------------------------------------------------- */

static void
submit_wait(struct env *e, struct kt_candidate *c, int n,
            const struct kt_measure_opts *o)
{
    submit(e, c, n, o);
    assert_int_equal(run_until(e, p_done, NULL, WAIT_S), 0);
    assert_int_equal(e->n, n);
}

/* A good program and a wrong one, then both again away from the first
 * run's worker: the good one runs the object its first build made (same
 * builder, no build), the wrong one's object was dropped with its failed
 * run and is built again; another compiler line is another object; a
 * cache too small for any object keeps none. */
static void
test_measure_objects_built_once(void **state)
{
    struct env *e = env_new(1);
    struct kt_candidate c[2];
    struct kt_measure_opts o;
    char *good = gemm_source("ikj", 4, NULL);
    char *wrong = gemm_source("ijk", 1, bodies[5]);
    char builder[96], ran_on[96];

    (void)state;
    spawn(e, 2, "build,run");
    memset(c, 0, sizeof(c));
    c[0].source = good;
    c[0].cc = CC;
    c[1].source = wrong;
    c[1].cc = CC;
    test_opts(&o);
    submit_wait(e, c, 2, &o);
    assert_int_equal(e->err_no[0], 0);
    assert_int_equal(e->err_no[1], KT_MERR_WRONG_ANSWER);
    assert_string_equal(e->build_reused[0], "");
    assert_int_equal(kt_tracker_builds_reused(e->t), 0);
    snprintf(builder, sizeof(builder), "%s", e->build_worker[0]);
    snprintf(ran_on, sizeof(ran_on), "%s", e->worker[0]);
    c[0].avoid_worker = ran_on;
    submit_wait(e, c, 2, &o);
    assert_int_equal(e->err_no[0], 0);
    assert_string_equal(e->build_reused[0], "1");
    assert_string_equal(e->build_worker[0], builder);
    assert_string_not_equal(e->worker[0], ran_on);
    assert_int_equal(e->err_no[1], KT_MERR_WRONG_ANSWER);
    assert_string_equal(e->build_reused[1], "");
    assert_int_equal(kt_tracker_builds_reused(e->t), 1);
    c[0].cc = CC " -DKT_ANOTHER_LINE";
    submit_wait(e, c, 1, &o);
    assert_int_equal(e->err_no[0], 0);
    assert_string_equal(e->build_reused[0], "");
    assert_int_equal(kt_tracker_builds_reused(e->t), 1);
    env_free(e);

    e = env_new_cache(1, 1024);
    spawn(e, 1, "build,run");
    c[0].cc = CC;
    c[0].avoid_worker = NULL;
    submit_wait(e, c, 1, &o);
    submit_wait(e, c, 1, &o);
    assert_int_equal(e->err_no[0], 0);
    assert_string_equal(e->build_reused[0], "");
    assert_int_equal(kt_tracker_builds_reused(e->t), 0);
    free(good);
    free(wrong);
    env_free(e);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_measure_gemm_batch_two_workers),
        cmocka_unit_test(test_measure_worker_killed_mid_batch),
        cmocka_unit_test(test_measure_crashing_kernels),
        cmocka_unit_test(test_measure_bad_peers_refused),
        cmocka_unit_test(test_measure_build_errors),
        cmocka_unit_test(test_measure_objects_built_once),
        cmocka_unit_test(test_measure_peak_probe),
        cmocka_unit_test(test_measure_whole_machine_team_bound),
        cmocka_unit_test(test_measure_build_budget_is_cpu_time),
        cmocka_unit_test(test_measure_rpc_status),
        cmocka_unit_test(test_measure_aarch64_board_under_qemu),
    };
    signal(SIGPIPE, SIG_IGN);
    kt_log_init(getenv("KT_TEST_VERBOSE") ? LOG_DEBUG : LOG_WARNING);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
