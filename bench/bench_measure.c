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
 *    repeats inside a trial, and the CV of the 20 trial costs.
 *
 * bench_measure --cc "CC A" --cc "CC B" MODULE.c...  instead compares two
 * compiler lines on the same generated modules (`kerntune show --db DB
 * --trial ID --module`, without its leading comment): each module is
 * built and timed with both, twice
 * (A B, then B A), all in one batch on two local workers with the default
 * measure settings (repeat 3, min_repeat_ms 100; $KT_BENCH_THREADS and
 * $KT_BENCH_RUN_TIMEOUT_MS override threads and run_timeout_ms).  With
 * KT_BENCH_CLOCK=cpu the kernels run on one thread and each is scored by its
 * process CPU time per call (the worker's cpu_cost), which other processes
 * on a loaded machine barely change; the compiler's CPU time never depends
 * on the load.  Reported: the compiler's CPU time per module (build_cpu_s),
 * the kernels' speed ratio (geometric mean, and of the best module of
 * each line), and how well the two lines rank the modules alike: pairwise
 * agreement of A's and B's costs against that of A's two runs with each
 * other (the timing noise), and per line the run job's and the timing
 * stage's wall time per candidate (run_s, time_s).
 *
 * bench_measure --rpc OLD/kerntune-rpc --rpc NEW/kerntune-rpc MODULE.c...
 * compares two worker binaries the same way (one local worker each, keys
 * "a" and "b", compiler line $KT_BENCH_CC or cc -O3 -march=native
 * -fopenmp): a change of the timing rules, by the same figures.
 * KT_BENCH_VERBOSE=1 prints each module's four costs.
 *
 * bench_measure --pairs [--reps N] [--runs K] C.c B.c [C.c B.c ...] times
 * each pair of modules of one workload (a confirmed trial and the best it
 * was timed beside: `kerntune show --db DB --trial ID --module`) the way
 * a confirmation does (docs/measure.md, "Timing on a shared machine"):
 * one batch of the two on two local workers with the default measure
 * settings, N batches (default 10), the order swapped every batch.  With
 * K > 1 each batch holds K runs of each, interleaved (C B C B ...), and a
 * module's cost in the batch is the median of its K.  Reported per pair:
 * each batch's cost ratio C/B, their geometric mean, the geometric mean
 * with C timed first and with B first (an order bias), and the RMS of
 * the log ratios around their mean (the noise of one batch's verdict);
 * compare with `build/bench/bench_modules --rounds 8 --threads 2 C.c B.c`
 * (one process, interleaved rounds).  $KT_BENCH_THREADS sets threads
 * (default 0: all CPUs), $KT_BENCH_REPEAT the repeats per run (3). */
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
on_done(void *arg, const struct kt_result *r, int n)
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

#define MAXF 256

static int
env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v != NULL && *v ? atoi(v) : def;
}

struct cmp {
    int done, n;
    int cpu_clock; /* score by cpu_cost (one thread) instead of cost */
    double cost[2][2][MAXF]; /* [run][line][module]; 0 = failed */
    double cpu[2][2][MAXF];
    double time_s[2], run_s[2]; /* per line, over successful candidates */
    int nok[2];
};

/* One batch: the modules of one run under one line. */
struct cmp_batch {
    struct cmp *s;
    int run, line;
};

static void
on_cmp(void *arg, const struct kt_result *r, int n)
{
    struct cmp_batch *b = arg;
    struct cmp *s = b->s;
    int m;

    s->done++;
    for (m = 0; m < n; m++) {
        const char *v;
        if (r[m].err_no != 0) {
            fprintf(stderr, "module %d line %c: %s\n", m, 'A' + b->line,
                    kt_measure_errname(r[m].err_no));
            continue;
        }
        s->cost[b->run][b->line][m] = r[m].cost;
        if ((v = kt_result_kv(&r[m], "build_cpu_s")) != NULL)
            s->cpu[b->run][b->line][m] = atof(v);
        if (s->cpu_clock && (v = kt_result_kv(&r[m], "cpu_cost")) != NULL)
            s->cost[b->run][b->line][m] = atof(v);
        if ((v = kt_result_kv(&r[m], "time_s")) != NULL)
            s->time_s[b->line] += atof(v);
        s->run_s[b->line] += r[m].run_s;
        s->nok[b->line]++;
    }
}

/* Share of module pairs that a and b order the same way (both valid). */
static double
pair_agreement(const double *a, const double *b, int n)
{
    long same = 0, all = 0;
    int i, j;

    for (i = 0; i < n; i++)
        for (j = i + 1; j < n; j++) {
            if (a[i] <= 0 || a[j] <= 0 || b[i] <= 0 || b[j] <= 0)
                continue;
            all++;
            same += (a[i] < a[j]) == (b[i] < b[j]);
        }
    return all ? (double)same / all : 0;
}

static char *
slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    struct kt_buf b;
    char chunk[4096];
    size_t k;

    if (f == NULL)
        return NULL;
    kt_buf_init(&b);
    while ((k = fread(chunk, 1, sizeof(chunk), f)) > 0)
        kt_buf_put(&b, chunk, k);
    fclose(f);
    return kt_buf_take(&b);
}

/* A compared line: the compiler line and the key of the workers that run
 * it (the --rpc mode starts one worker binary per key). */
struct line {
    const char *cc, *key, *name;
};

static int
compare(uv_loop_t *loop, struct kt_tracker *t, const struct line ln[2],
        char **files, int nfiles)
{
    static struct cmp s;
    struct kt_candidate *c;
    struct kt_measure_opts o;
    struct cmp_batch batch[4];
    char *src[MAXF], err[256];
    double cpu[2] = {0, 0}, lratio = 0, best[2] = {1e30, 1e30}, t0;
    int i, f, run, nboth = 0, nbuilt[2] = {0, 0};

    memset(&s, 0, sizeof(s));
    s.n = nfiles < MAXF ? nfiles : MAXF;
    s.cpu_clock = getenv("KT_BENCH_CLOCK") != NULL &&
                  strcmp(getenv("KT_BENCH_CLOCK"), "cpu") == 0;
    kt_measure_default_opts(&o);
    /* on a loaded machine: one thread (OpenMP's barriers spin against the
     * load) and a longer run deadline */
    o.threads = env_int("KT_BENCH_THREADS", s.cpu_clock ? 1 : 0);
    if (s.cpu_clock && o.threads != 1) {
        fprintf(stderr, "bench_measure: KT_BENCH_CLOCK=cpu needs one thread "
                        "(KT_BENCH_THREADS=1)\n");
        return -1;
    }
    o.run_timeout_ms = env_int("KT_BENCH_RUN_TIMEOUT_MS", o.run_timeout_ms);
    for (i = 0; i < s.n; i++)
        if ((src[i] = slurp(files[i])) == NULL) {
            fprintf(stderr, "bench_measure: cannot read %s\n", files[i]);
            return -1;
        }
    c = kt_xcalloc((size_t)4 * s.n, sizeof(*c));
    t0 = kt_now();
    /* run 0: A then B, run 1: B then A */
    for (run = 0; run < 2; run++)
        for (f = 0; f < 2; f++) {
            struct cmp_batch *b = &batch[2 * run + f];
            struct kt_candidate *cb = c + (size_t)(2 * run + f) * s.n;
            b->s = &s;
            b->run = run;
            b->line = run == 0 ? f : 1 - f;
            for (i = 0; i < s.n; i++) {
                cb[i].source = src[i];
                cb[i].cc = ln[b->line].cc;
            }
            if (kt_tracker_submit(t, ln[b->line].key, cb, s.n, &o, on_cmp, b,
                                  err, sizeof(err)) < 0) {
                fprintf(stderr, "submit: %s\n", err);
                return -1;
            }
        }
    while (s.done < 4)
        uv_run(loop, UV_RUN_ONCE);
    if (getenv("KT_BENCH_VERBOSE") != NULL) /* per module: A1 A2 B1 B2 */
        for (i = 0; i < s.n; i++)
            printf("  %-40s %.4g %.4g %.4g %.4g ms\n", files[i],
                   s.cost[0][0][i] * 1e3, s.cost[1][0][i] * 1e3,
                   s.cost[0][1][i] * 1e3, s.cost[1][1][i] * 1e3);
    for (i = 0; i < s.n; i++) {
        double a = 0, b = 0;
        for (f = 0; f < 2; f++)
            for (run = 0; run < 2; run++) {
                cpu[f] += s.cpu[run][f][i];
                nbuilt[f] += s.cpu[run][f][i] > 0;
                if (s.cost[run][f][i] > 0 && s.cost[run][f][i] < best[f])
                    best[f] = s.cost[run][f][i];
            }
        for (run = 0; run < 2; run++) {
            a += s.cost[run][0][i];
            b += s.cost[run][1][i];
        }
        if (s.cost[0][0][i] > 0 && s.cost[1][0][i] > 0 && s.cost[0][1][i] > 0 &&
            s.cost[1][1][i] > 0) {
            lratio += log(a / b);
            nboth++;
        }
        free(src[i]);
    }
    free(c);
    printf("%d modules, each built and timed twice per line "
           "(%.0f s, %s clock, %d thread(s))\n",
           s.n, kt_now() - t0, s.cpu_clock ? "process CPU" : "wall", o.threads);
    for (f = 0; f < 2; f++)
        printf("  %c: %-40s compiler CPU %.3f s/module (%d builds), best "
               "%.3f ms\n     run_s %.3f s, timing stage (time_s) %.3f s "
               "per candidate\n",
               'A' + f, ln[f].name, nbuilt[f] ? cpu[f] / nbuilt[f] : 0,
               nbuilt[f], best[f] * 1e3, s.nok[f] ? s.run_s[f] / s.nok[f] : 0,
               s.nok[f] ? s.time_s[f] / s.nok[f] : 0);
    printf("  speed B/A, geometric mean over %d modules: %.3f, of the best "
           "module: %.3f\n",
           nboth, nboth ? exp(lratio / nboth) : 0, best[0] / best[1]);
    printf("  pairwise order agreement: A run1 vs A run2 %.3f, B run1 vs B "
           "run2 %.3f,\n    A vs B (run1) %.3f, A vs B (run2) %.3f\n",
           pair_agreement(s.cost[0][0], s.cost[1][0], s.n),
           pair_agreement(s.cost[0][1], s.cost[1][1], s.n),
           pair_agreement(s.cost[0][0], s.cost[0][1], s.n),
           pair_agreement(s.cost[1][0], s.cost[1][1], s.n));
    return 0;
}

#define PAIR_MAX_RUNS 8

/* One batch of a pair: K runs of each module, interleaved. */
struct pair_batch {
    int done, failed;
    int c_first, runs;
    double c[PAIR_MAX_RUNS], b[PAIR_MAX_RUNS];
};

static void
on_pair(void *arg, const struct kt_result *r, int n)
{
    struct pair_batch *pb = arg;
    int i;

    pb->done = 1;
    for (i = 0; i < n && i < 2 * pb->runs; i++) {
        int is_c = (i % 2 == 0) == pb->c_first;
        if (r[i].err_no != 0) {
            fprintf(stderr, "run %d: %s: %s\n", i,
                    kt_measure_errname(r[i].err_no), r[i].err_text);
            pb->failed = 1;
            continue;
        }
        (is_c ? pb->c : pb->b)[i / 2] = r[i].cost;
    }
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The --pairs mode (top of the file): each pair's verdicts, batch by
 * batch, and how much they scatter. */
static int
time_pairs(uv_loop_t *loop, struct kt_tracker *t, int reps, int runs,
           char **files, int nfiles)
{
    const char *cc = getenv("KT_BENCH_CC") != NULL
                         ? getenv("KT_BENCH_CC")
                         : "cc -O3 -march=native -fopenmp";
    struct kt_measure_opts o;
    int p, k, j;

    kt_measure_default_opts(&o);
    o.threads = env_int("KT_BENCH_THREADS", 0);
    o.repeat = env_int("KT_BENCH_REPEAT", o.repeat);
    printf("pairs timed as a confirmation: %d batches each, %d run(s) of "
           "each module per batch, repeat %d, min_repeat_ms %d, threads "
           "%d\n",
           reps, runs, o.repeat, o.min_repeat_ms, o.threads);
    for (p = 0; p + 1 < nfiles; p += 2) {
        char *src[2] = {slurp(files[p]), slurp(files[p + 1])};
        double lr, sum = 0, sum2 = 0, by_order[2] = {0, 0};
        int n = 0, n_order[2] = {0, 0};

        if (src[0] == NULL || src[1] == NULL) {
            fprintf(stderr, "bench_measure: cannot read %s or %s\n", files[p],
                    files[p + 1]);
            free(src[0]);
            free(src[1]);
            return -1;
        }
        printf("%s / %s:\n ", files[p], files[p + 1]);
        for (k = 0; k < reps; k++) {
            struct kt_candidate c[2 * PAIR_MAX_RUNS];
            struct pair_batch pb;
            char err[256];

            memset(c, 0, sizeof(c));
            memset(&pb, 0, sizeof(pb));
            pb.c_first = k % 2 == 0;
            pb.runs = runs;
            for (j = 0; j < 2 * runs; j++) {
                c[j].source = src[(j % 2 == 0) == pb.c_first ? 0 : 1];
                c[j].cc = cc;
            }
            if (kt_tracker_submit(t, "local", c, 2 * runs, &o, on_pair, &pb,
                                  err, sizeof(err)) < 0) {
                fprintf(stderr, "submit: %s\n", err);
                free(src[0]);
                free(src[1]);
                return -1;
            }
            while (!pb.done)
                uv_run(loop, UV_RUN_ONCE);
            if (pb.failed) {
                printf(" failed");
                continue;
            }
            lr = log(median(pb.c, runs) / median(pb.b, runs));
            printf(" %s%.3f", pb.c_first ? "" : "b:", exp(lr));
            fflush(stdout);
            sum += lr;
            sum2 += lr * lr;
            by_order[pb.c_first] += lr;
            n_order[pb.c_first]++;
            n++;
        }
        if (n > 0)
            printf("\n  C/B geometric mean %.3f (C first %.3f, B first %.3f),"
                   " RMS of log ratios around it %.3f\n",
                   exp(sum / n), n_order[1] ? exp(by_order[1] / n_order[1]) : 0,
                   n_order[0] ? exp(by_order[0] / n_order[0]) : 0,
                   sqrt(fmax(sum2 / n - (sum / n) * (sum / n), 0)));
        else
            printf("\n  every batch failed\n");
        free(src[0]);
        free(src[1]);
    }
    return 0;
}

int
main(int argc, char **argv)
{
    uv_loop_t loop;
    struct kt_tracker *t;
    struct kt_tracker_opts to;
    struct kt_measure_opts o;
    struct state s;
    char rpc[512], err[256];
    const char *dir = getenv("KT_BIN_DIR");
    double wall, t0, mean = 0, sd = 0, cvin = 0;
    const char *mode;
    int i, rc = 1;

    if (dir == NULL)
        dir = getenv("BUILD");
    snprintf(rpc, sizeof(rpc), "%s/kerntune-rpc", dir ? dir : "build");
    kt_log_init(LOG_WARNING);
    uv_loop_init(&loop);
    kt_tracker_default_opts(&to);
    mode = argc > 5 ? argv[1] : "";
    if (argc > 1 && strcmp(argv[1], "--pairs") == 0) {
        int reps = 10, runs = 1, a = 2;

        for (; a + 1 < argc && strncmp(argv[a], "--", 2) == 0; a += 2) {
            if (strcmp(argv[a], "--reps") == 0)
                reps = atoi(argv[a + 1]);
            else if (strcmp(argv[a], "--runs") == 0)
                runs = atoi(argv[a + 1]);
            else
                break;
        }
        if (reps < 1 || runs < 1 || runs > PAIR_MAX_RUNS || a >= argc ||
            (argc - a) % 2 != 0) {
            fprintf(stderr,
                    "usage: bench_measure --pairs [--reps N] [--runs "
                    "K (1-%d)] C.c B.c [C.c B.c ...]\n",
                    PAIR_MAX_RUNS);
            return 2;
        }
        if (kt_tracker_new(&t, &loop, &to, err, sizeof(err)) < 0) {
            fprintf(stderr, "bench_measure: %s\n", err);
            return 1;
        }
        if (kt_tracker_spawn_local(t, 2, rpc, "local", "build,run", err,
                                   sizeof(err)) < 0) {
            fprintf(stderr, "bench_measure: %s\n", err);
            goto out;
        }
        t0 = kt_now();
        while (kt_tracker_nworkers(t, "local") < 2 && kt_now() - t0 < 30)
            uv_run(&loop, UV_RUN_ONCE);
        rc = time_pairs(&loop, t, reps, runs, argv + a, argc - a) < 0;
        goto out;
    }
    if (strcmp(mode, "--cc") == 0 || strcmp(mode, "--rpc") == 0) {
        /* two lines: compilers on two workers of one key, or worker
         * binaries on one worker each, under keys "a" and "b" */
        int by_rpc = strcmp(mode, "--rpc") == 0;
        const char *cc = getenv("KT_BENCH_CC") != NULL
                             ? getenv("KT_BENCH_CC")
                             : "cc -O3 -march=native -fopenmp";
        struct line ln[2] = {{by_rpc ? cc : argv[2], by_rpc ? "a" : "local",
                              argv[2]},
                             {by_rpc ? cc : argv[4], by_rpc ? "b" : "local",
                              argv[4]}};
        if (strcmp(argv[3], mode) != 0 ||
            kt_tracker_new(&t, &loop, &to, err, sizeof(err)) < 0) {
            fprintf(stderr, "bench_measure: %s\n",
                    strcmp(argv[3], mode) != 0 ? "two lines needed" : err);
            return 1;
        }
        for (i = 0; i < 2; i++)
            if ((by_rpc || i == 0) &&
                kt_tracker_spawn_local(t, by_rpc ? 1 : 2,
                                       by_rpc ? argv[2 + 2 * i] : rpc, ln[i].key,
                                       "build,run", err, sizeof(err)) < 0) {
                fprintf(stderr, "bench_measure: %s\n", err);
                goto out;
            }
        t0 = kt_now();
        while ((kt_tracker_nworkers(t, ln[0].key) < 1 + !by_rpc ||
                kt_tracker_nworkers(t, ln[1].key) < 1 + !by_rpc) &&
               kt_now() - t0 < 30)
            uv_run(&loop, UV_RUN_ONCE);
        rc = compare(&loop, t, ln, argv + 5, argc - 5) < 0;
        goto out;
    }
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
