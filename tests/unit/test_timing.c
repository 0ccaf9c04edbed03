/* test_timing.c - timing on a shared machine (docs/measure.md): a real
 * kernel built and timed by a real kerntune-rpc worker through the tracker
 * on 127.0.0.1, once beside a busy loop pinned to the worker's CPU (the
 * disturbance is certain: both are pinned to one CPU), once without it.
 * No timing is asserted: only what the worker reports about its repeats. */
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "measure/measure.h"
#include "measure/worker/worker.h"

/* One thread of pure arithmetic, a few ms per call: its occupancy is ~1
 * when it owns its CPU. */
static const char
    *kernel = "const char kt_workload_hash[17] = \"timingbusy000000\";\n"
              "const int kt_nbufs = 2;\n"
              "const long long kt_buf_elems[] = {4096, 4096};\n"
              "const unsigned char kt_buf_is_output[] = {0, 1};\n"
              "const double kt_flops = 4096.0 * 400;\n"
              "void kt_set_threads(int n) { (void)n; }\n"
              "static void f(float *const *b) {\n"
              "  for (int i = 0; i < 4096; i++) { float s = b[0][i];\n"
              "    for (int r = 0; r < 400; r++) s = s * 0.999f + 0.001f;\n"
              "    b[1][i] = s; } }\n"
              "void kt_reference(float *const *b) { f(b); }\n"
              "void kt_kernel(float *const *b) { f(b); }\n";

/* What the one result of a batch said. */
struct outcome {
    int done, err_no, ncosts;
    double cost, costs[KT_MAX_REPEAT];
    char err_text[256], occupancy[32], retimed[32], contended[8], threads[32],
        occupancies[160], cpu_cost[32];
};

static void
copy_kv(const struct kt_result *r, const char *k, char *dst, size_t len)
{
    const char *v = kt_result_kv(r, k);

    snprintf(dst, len, "%s", v != NULL ? v : "");
}

static void
on_result(void *arg, const struct kt_result *res, int n)
{
    struct outcome *o = arg;

    assert_int_equal(n, 1);
    o->done = 1;
    o->err_no = res->err_no;
    snprintf(o->err_text, sizeof(o->err_text), "%s", res->err_text);
    o->ncosts = res->ncosts;
    o->cost = res->cost;
    memcpy(o->costs, res->costs, sizeof(o->costs));
    copy_kv(res, "occupancy", o->occupancy, sizeof(o->occupancy));
    copy_kv(res, "occupancies", o->occupancies, sizeof(o->occupancies));
    copy_kv(res, "retimed", o->retimed, sizeof(o->retimed));
    copy_kv(res, "contended", o->contended, sizeof(o->contended));
    copy_kv(res, "kernel_threads", o->threads, sizeof(o->threads));
    copy_kv(res, "cpu_cost", o->cpu_cost, sizeof(o->cpu_cost));
}

/* Builds and times source on one local worker (started now, so it
 * inherits this process's CPU affinity) and fills o. */
static void
measure_once(struct outcome *o, const char *source, int min_repeat_ms)
{
    struct kt_tracker_opts to;
    struct kt_measure_opts mo;
    struct kt_candidate c;
    struct kt_tracker *t;
    uv_loop_t loop;
    const char *b = getenv("KT_BIN_DIR");
    char rpc[512], err[256];
    double end;

    if (b == NULL)
        b = getenv("BUILD");
    snprintf(rpc, sizeof(rpc), "%s/kerntune-rpc", b ? b : "build");
    memset(o, 0, sizeof(*o));
    assert_int_equal(uv_loop_init(&loop), 0);
    kt_tracker_default_opts(&to);
    to.port = 0;
    to.token = "timing-token";
    if (kt_tracker_new(&t, &loop, &to, err, sizeof(err)) < 0 ||
        kt_tracker_spawn_local(t, 1, rpc, "local", "build,run", err,
                               sizeof(err)) < 0)
        fail_msg("%s", err);
    kt_measure_default_opts(&mo);
    mo.repeat = 3;
    mo.min_repeat_ms = min_repeat_ms;
    mo.run_timeout_ms = 30000;
    mo.build_timeout_ms = 30000;
    memset(&c, 0, sizeof(c));
    c.source = source;
    c.cc = "cc -O2";
    if (kt_tracker_submit(t, "local", &c, 1, &mo, on_result, o, err,
                          sizeof(err)) < 0)
        fail_msg("submit: %s", err);
    end = kt_now() + 120;
    while (!o->done && kt_now() < end)
        uv_run(&loop, UV_RUN_ONCE);
    kt_tracker_close(t);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    assert_true(o->done);
    if (o->err_no != 0)
        fail_msg("err_no %d: %s", o->err_no, o->err_text);
}

/* Every result carries the notes, and the cost is still AutoTVM's rule
 * over the `repeat` kept costs. */
static void
check_notes_and_cost(const struct outcome *o)
{
    double cost, cv;

    assert_int_equal(o->ncosts, 3);
    kt_run_summarize(o->costs, o->ncosts, &cost, &cv);
    assert_true(fabs(cost - o->cost) <= 1e-12 * cost);
    assert_true(o->occupancy[0] != '\0');
    assert_true(o->occupancies[0] != '\0');
    assert_true(o->retimed[0] != '\0');
    assert_string_equal(o->threads, "1");
    /* the cost at the repeats' CPU time: never above the cost (both go
     * over the wire with 9 significant digits, so equal values may differ
     * in the last one) */
    assert_true(atof(o->cpu_cost) > 0 &&
                atof(o->cpu_cost) <= o->cost * (1 + 1e-8));
    assert_in_range(atoi(o->retimed), 0, 3);
    assert_true(strcmp(o->contended, "") == 0 ||
                strcmp(o->contended, "1") == 0);
}

static void
test_timing_quiet_path_notes(void **state)
{
    struct outcome o;

    (void)state;
    measure_once(&o, kernel, 40);
    check_notes_and_cost(&o);
    print_message("quiet: occupancy %s (%s), retimed %s, contended '%s'\n",
                  o.occupancy, o.occupancies, o.retimed, o.contended);
}

/* A busy loop on the worker's only CPU takes about half of it from every
 * repeat: each one is seen as disturbed (occupancy below the threshold),
 * timed again within the budget and, when no repeat ran clean, the result
 * is marked contended. */
static void
test_timing_hog_on_the_same_cpu(void **state)
{
    cpu_set_t saved, one;
    struct outcome o;
    pid_t hog;
    int cpu, status;

    (void)state;
    assert_int_equal(sched_getaffinity(0, sizeof(saved), &saved), 0);
    for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &saved); cpu++)
        ;
    assert_true(cpu < CPU_SETSIZE);
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
    hog = fork();
    assert_true(hog >= 0);
    if (hog == 0) {
        volatile unsigned long spin = 0;
        for (;;)
            spin++;
    }
    measure_once(&o, kernel, 40);
    kill(hog, SIGKILL);
    assert_int_equal(waitpid(hog, &status, 0), hog);
    assert_int_equal(sched_setaffinity(0, sizeof(saved), &saved), 0);
    print_message("hog: occupancy %s (%s), retimed %s, contended '%s'\n",
                  o.occupancy, o.occupancies, o.retimed, o.contended);
    check_notes_and_cost(&o);
    assert_true(atof(o.occupancy) < KT_OCCUPANCY_MIN);
    assert_true(atoi(o.retimed) > 0 || strcmp(o.contended, "1") == 0);
}

/* A spike that hits one repeat: a kernel whose second call also sleeps
 * 40 ms, timed through the worker with its checked call (call 1) as
 * repeat 0, so repeat 1 is slower with a low occupancy.  When another
 * repeat ran clean, it is timed again; when the machine is so loaded that
 * none did, the result is marked contended instead. */
static void
test_timing_spike_is_timed_again(void **state)
{
    static const char
        *spike = "#include <time.h>\n"
                 "const char kt_workload_hash[17] = \"timingspike00000\";\n"
                 "const int kt_nbufs = 2;\n"
                 "const long long kt_buf_elems[] = {32768, 32768};\n"
                 "const unsigned char kt_buf_is_output[] = {0, 1};\n"
                 "const double kt_flops = 32768.0 * 400;\n"
                 "void kt_set_threads(int n) { (void)n; }\n"
                 "static void f(float *const *b) {\n"
                 "  for (int i = 0; i < 32768; i++) { float s = b[0][i];\n"
                 "    for (int r = 0; r < 400; r++) s = s * 0.999f + 0.001f;\n"
                 "    b[1][i] = s; } }\n"
                 "void kt_reference(float *const *b) { f(b); }\n"
                 "void kt_kernel(float *const *b) { static int calls;\n"
                 "  f(b);\n"
                 "  if (++calls == 2) { struct timespec ts = {0, 40000000};\n"
                 "    nanosleep(&ts, 0); } }\n";
    struct outcome o;
    double occ[3];

    (void)state;
    measure_once(&o, spike, 1);
    print_message("spike: occupancies %s, retimed %s, contended '%s'\n",
                  o.occupancies, o.retimed, o.contended);
    check_notes_and_cost(&o);
    assert_int_equal(sscanf(o.occupancies, "%lf,%lf,%lf", &occ[0], &occ[1],
                            &occ[2]),
                     3);
    if (occ[0] >= KT_OCCUPANCY_MIN || occ[2] >= KT_OCCUPANCY_MIN)
        assert_true(atoi(o.retimed) >= 1); /* the slept-in repeat */
    else
        assert_string_equal(o.contended, "1");
}

/* The rule itself: low occupancy alone (a kernel that waits, not load) is
 * not a disturbance unless the repeat is also slower than the fastest. */
static void
test_timing_disturbed_rule(void **state)
{
    (void)state;
    assert_true(fabs(kt_occupancy(1.0, 1.0, 1) - 1.0) < 1e-12);
    assert_true(fabs(kt_occupancy(1.0, 1.0, 2) - 0.5) < 1e-12);
    assert_true(kt_occupancy(1.0, 0.0, 1) == 0);
    assert_true(kt_repeat_disturbed(2.0, 0.5, 1.0));
    assert_false(kt_repeat_disturbed(1.01, 0.5, 1.0));
    assert_false(kt_repeat_disturbed(2.0, 0.99, 1.0));
    assert_in_range(kt_kernel_threads(0, kt_usable_cpus()), 1, 4096);
}

static void *
idle_thread(void *arg)
{
    (void)arg;
    pause();
    return NULL;
}

/* A worker pinned to one CPU runs a two-thread kernel's threads on that
 * CPU: its occupancy is measured against one CPU, not two, or every
 * repeat would look disturbed.  Checked in a child (pinned, with a
 * second thread as the OpenMP pool would start), which exits with the
 * thread count it would use. */
static void
test_timing_threads_capped_by_affinity(void **state)
{
    pid_t pid;
    int st = 0;
    (void)state;

    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        cpu_set_t one;
        pthread_t t;
        CPU_ZERO(&one);
        CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
        if (sched_setaffinity(0, sizeof(one), &one) != 0 ||
            pthread_create(&t, NULL, idle_thread, NULL) != 0)
            _exit(99);
        _exit(kt_kernel_threads(2, kt_usable_cpus()));
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timing_disturbed_rule),
        cmocka_unit_test(test_timing_threads_capped_by_affinity),
        cmocka_unit_test(test_timing_quiet_path_notes),
        cmocka_unit_test(test_timing_spike_is_timed_again),
        cmocka_unit_test(test_timing_hog_on_the_same_cpu),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
