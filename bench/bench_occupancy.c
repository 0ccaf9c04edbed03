/* bench_occupancy.c - what the worker's occupancy (process CPU time /
 * (wall x kernel threads), docs/measure.md "Timing on a shared machine")
 * shows for undisturbed and disturbed repeats.  Each kernel is timed by
 * the runner child, forked as the worker does (repeat 8, min_repeat_ms
 * 100, re-timing off so every raw repeat is seen):
 *   - as the machine is now;
 *   - with --fifo, under SCHED_FIFO priority 1 (needs root): other
 *     processes cannot take its CPUs, which stands in for a quiet machine
 *     (the kernel's throttling takes 5 % of each second back, so a repeat
 *     near the end of a second may still be disturbed);
 *   - beside a busy loop, both pinned to the first CPU we may use (1
 *     thread only; a 2-thread kernel on one CPU is contended by itself).
 *
 *   bench_occupancy [--fifo] [SO THREADS ...]
 * Without SO: builds a 1-thread arithmetic kernel and the same with an
 * OpenMP loop (2 threads), with cc -O2 [-fopenmp].
 *
 *   bench_occupancy --short N
 * Short repeats as a network's tuning times them (repeat 8, min_repeat_ms
 * 5) of a kernel of about 0.5 ms: N forked runner children time it on
 * every CPU.  The runner binds their threads one per CPU unless the
 * environment sets OMP_PROC_BIND: run it once more with
 * OMP_PROC_BIND=false to see them unbound (docs/measure.md). */
#define _GNU_SOURCE /* sched_setaffinity */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/baseline.h"
#include "measure/worker/worker.h"

static const char *source =
    "#ifdef SHORT\n#define ITERS 10\n#define HASH \"benchoccshort000\"\n"
    "#else\n#define ITERS 400\n#define HASH \"benchoccupancy00\"\n#endif\n"
    "const char kt_workload_hash[17] = HASH;\n"
    "const int kt_nbufs = 2;\n"
    "const long long kt_buf_elems[] = {65536, 65536};\n"
    "const unsigned char kt_buf_is_output[] = {0, 1};\n"
    "const double kt_flops = 65536.0 * ITERS;\n"
    "#ifdef _OPENMP\n#include <omp.h>\n#endif\n"
    "void kt_set_threads(int n) {\n#ifdef _OPENMP\n"
    "  if (n > 0) omp_set_num_threads(n);\n#endif\n  (void)n; }\n"
    "void kt_reference(float *const *b) {\n"
    "#pragma omp parallel for\n"
    "  for (int i = 0; i < 65536; i++) { float s = b[0][i];\n"
    "    for (int r = 0; r < ITERS; r++) s = s * 0.999f + 0.001f;\n"
    "    b[1][i] = s; } }\n"
    "void kt_kernel(float *const *b) { kt_reference(b); }\n";

static int short_repeats; /* --short: repeat 8, min_repeat_ms 5 */

/* The runner child's result for so on threads, printed on one line. */
static void
run(const char *label, const char *so, int threads, int fifo)
{
    int pfd[2], status;
    char buf[8192];
    ssize_t n;
    pid_t p;

    if (pipe(pfd) < 0)
        exit(1);
    p = fork();
    if (p == 0) {
        struct kt_run_req r;
        struct kt_msg m;
        struct sched_param sp = {1};
        static const char *const keys[] = {"cost",           "cpu_cost",
                                           "occupancy",      "occupancies",
                                           "kernel_threads", "threads_bound",
                                           "err_text"};
        size_t i;

        if (fifo && sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
            perror("SCHED_FIFO");
            _exit(1);
        }
        memset(&r, 0, sizeof(r));
        r.so_path = so;
        r.cache_dir = "/tmp";
        r.number = 1;
        r.repeat = 8;
        r.min_repeat_ms = short_repeats ? 5 : 100;
        r.threads = threads;
        r.seed = 1;
        r.tol = 1e-3;
        r.timeout_ms = 60000;
        kt_run_child(&r, &m);
        n = snprintf(buf, sizeof(buf), "%-28s", label);
        for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
            if (kt_msg_get(&m, keys[i]) != NULL)
                n += snprintf(buf + n, sizeof(buf) - (size_t)n, " %s=%s",
                              keys[i], kt_msg_get(&m, keys[i]));
        (void)!write(pfd[1], buf, (size_t)n);
        _exit(0);
    }
    close(pfd[1]);
    n = read(pfd[0], buf, sizeof(buf) - 1);
    close(pfd[0]);
    waitpid(p, &status, 0);
    printf("%s\n", n > 0 ? (buf[n] = '\0', buf) : "(no result)");
    fflush(stdout);
}

/* so on threads beside a busy loop, both pinned to one CPU. */
static void
run_beside_hog(const char *label, const char *so, int threads)
{
    cpu_set_t saved, one;
    int cpu, status;
    pid_t hog, parent;

    sched_getaffinity(0, sizeof(saved), &saved);
    for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &saved); cpu++)
        ;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(0, sizeof(one), &one);
    parent = getpid();
    hog = fork();
    if (hog == 0) {
        /* Dies with the benchmark however that ends (a timeout kills the
         * parent alone): a hog left spinning skews every timing after. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0);
        for (volatile unsigned long spin = 0;; spin++)
            ;
    }
    run(label, so, threads, 0);
    kill(hog, SIGKILL);
    waitpid(hog, &status, 0);
    sched_setaffinity(0, sizeof(saved), &saved);
}

static void
measure(const char *so, int threads, int fifo)
{
    char label[64];

    snprintf(label, sizeof(label), "%d thread(s), as is", threads);
    run(label, so, threads, 0);
    if (fifo) {
        snprintf(label, sizeof(label), "%d thread(s), SCHED_FIFO", threads);
        run(label, so, threads, 1);
    }
    if (threads == 1) {
        snprintf(label, sizeof(label), "%d thread, hog on its CPU", threads);
        run_beside_hog(label, so, threads);
    }
}

/* --short N: N runs of so on every CPU with short repeats. */
static void
measure_short(const char *so, int runs)
{
    long cpus = kt_usable_cpus();
    char label[64];
    int i;

    short_repeats = 1;
    printf("OMP_PROC_BIND=%s; %ld CPUs\n",
           getenv("OMP_PROC_BIND") ? getenv("OMP_PROC_BIND") : "(unset)", cpus);
    for (i = 0; i < runs; i++) {
        snprintf(label, sizeof(label), "run %d, %ld threads", i + 1, cpus);
        run(label, so, (int)cpus, 0);
    }
}

static int
build(const char *dir, const char *flags, char *so, size_t len)
{
    char src[300], cmd[900];
    FILE *f;

    snprintf(src, sizeof(src), "%s/k.c", dir);
    snprintf(so, len, "%s/k%zu.so", dir, strlen(flags));
    f = fopen(src, "w");
    if (f == NULL)
        return -1;
    fputs(source, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "cc -O2 %s -shared -fPIC -o %s %s", flags, so,
             src);
    return system(cmd) == 0 ? 0 : -1;
}

int
main(int argc, char **argv)
{
    char dir[] = "/tmp/kt-bench-occ.XXXXXX", so1[300], so2[300], cmd[340];
    int i = 1, fifo = 0, short_runs = 0;
    char cpu[256];

    kt_bench_cpu_model(cpu, sizeof(cpu));
    printf("CPU: %s\n", cpu);
    if (i < argc && strcmp(argv[i], "--fifo") == 0) {
        fifo = 1;
        i++;
    } else if (i + 1 < argc && strcmp(argv[i], "--short") == 0) {
        short_runs = atoi(argv[i + 1]);
        i += 2;
    }
    if (i < argc) {
        for (; i + 1 < argc; i += 2)
            measure(argv[i], atoi(argv[i + 1]), fifo);
        return 0;
    }
    if (mkdtemp(dir) == NULL || build(dir, "", so1, sizeof(so1)) < 0 ||
        build(dir, "-fopenmp", so2, sizeof(so2)) < 0) {
        fprintf(stderr, "bench_occupancy: cannot build the kernels in %s\n",
                dir);
        return 1;
    }
    if (short_runs > 0) {
        /* 0.5 ms calls, as a network's small layers */
        if (build(dir, "-fopenmp -DSHORT", so2, sizeof(so2)) < 0)
            return 1;
        measure_short(so2, short_runs);
    } else {
        measure(so1, 1, fifo);
        measure(so2, 2, fifo);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}
