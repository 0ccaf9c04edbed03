/* bench_modules.c - two or more generated modules of one workload timed
 * side by side: a change to the code generator measured on one stored
 * schedule, the module printed by `kerntune show --module` before and
 * after it.
 *
 *   build/bench/bench_modules [--rounds N] [--threads T] [--cc LINE]
 *                             [--no-check] MODULE.c MODULE.c ...
 *
 * Each module is built with LINE (default "gcc -O3 -march=native
 * -fopenmp", the local target's) into a shared object, its kernel checked
 * against its own reference on the same seeded inputs, and all kernels
 * are timed in N interleaved rounds (default 20) on T threads (default 1,
 * then 2), each keeping its best batch: a shared machine's load hits all
 * of them alike.  Prints GFLOPS and the ratio to the first module.
 * --no-check times a module that fails its check too (a hand-edited
 * module that leaves a part out: what that part costs). */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/baseline.h"
#include "common/common.h"
#include "tests/support/ktt.h"

#define MAX_MODULES 16
#define MAX_BUFS 16

typedef void (*call_fn)(float *const *);

struct module {
    const char *path;
    void *h;
    call_fn kernel, reference, pack;
    void (*set_threads)(int);
    const char *hash;
    int nbufs;
    const long long *elems;
    const unsigned char *is_output;
    double flops;
    double best[3]; /* seconds per call on 1 and 2 threads */
};

static float *bufs[MAX_BUFS];
static struct module *current;

static void *
symbol(struct module *m, const char *name, int required)
{
    void *p = dlsym(m->h, name);

    if (p == NULL && required) {
        fprintf(stderr, "bench_modules: %s: no %s (not a kerntune module)\n",
                m->path, name);
        exit(2);
    }
    return p;
}

static void
load(struct module *m, const char *cc)
{
    char err[8192];
    char *src = ktt_slurp(NULL, m->path, NULL);

    if (src == NULL) {
        fprintf(stderr, "bench_modules: cannot read %s\n", m->path);
        exit(2);
    }
    m->h = ktt_build_cc(src, cc, err, sizeof(err));
    free(src);
    if (m->h == NULL) {
        fprintf(stderr, "bench_modules: %s does not build:\n%.4000s\n", m->path,
                err);
        exit(2);
    }
    *(void **)&m->kernel = symbol(m, "kt_kernel", 1);
    *(void **)&m->reference = symbol(m, "kt_reference", 1);
    *(void **)&m->pack = symbol(m, "kt_pack", 0);
    *(void **)&m->set_threads = symbol(m, "kt_set_threads", 1);
    m->hash = symbol(m, "kt_workload_hash", 1);
    m->nbufs = *(const int *)symbol(m, "kt_nbufs", 1);
    m->elems = symbol(m, "kt_buf_elems", 1);
    m->is_output = symbol(m, "kt_buf_is_output", 1);
    m->flops = *(const double *)symbol(m, "kt_flops", 1);
    if (m->nbufs < 1 || m->nbufs > MAX_BUFS) {
        fprintf(stderr, "bench_modules: %s: %d buffers\n", m->path, m->nbufs);
        exit(2);
    }
}

/* Whether module m has the workload (buffers) of module first. */
static int
same_workload(const struct module *m, const struct module *first)
{
    int i;

    if (strcmp(m->hash, first->hash) != 0 || m->nbufs != first->nbufs)
        return 0;
    for (i = 0; i < m->nbufs; i++)
        if (m->elems[i] != first->elems[i] ||
            m->is_output[i] != first->is_output[i])
            return 0;
    return 1;
}

/* Fills the inputs from a fixed seed and the outputs with NaN. */
static void
fill(const struct module *m)
{
    struct kt_rng r;
    int i;
    long long j;

    kt_rng_seed(&r, 1);
    for (i = 0; i < m->nbufs; i++)
        for (j = 0; j < m->elems[i]; j++)
            bufs[i][j] = m->is_output[i] ? NAN
                                         : (float)(kt_rng_unit(&r) * 2.0 - 1.0);
}

/* The largest error of m's kernel against its reference, relative to the
 * largest reference value. */
static double
check(struct module *m)
{
    float *want[MAX_BUFS];
    double worst = 0, scale = 1e-30;
    int i;
    long long j;

    fill(m);
    m->reference(bufs);
    for (i = 0; i < m->nbufs; i++) {
        want[i] = NULL;
        if (!m->is_output[i])
            continue;
        want[i] = kt_xmalloc((size_t)m->elems[i] * sizeof(float));
        memcpy(want[i], bufs[i], (size_t)m->elems[i] * sizeof(float));
    }
    fill(m);
    if (m->pack != NULL)
        m->pack(bufs);
    m->kernel(bufs);
    for (i = 0; i < m->nbufs; i++) {
        if (want[i] == NULL)
            continue;
        for (j = 0; j < m->elems[i]; j++) {
            double e = fabs((double)bufs[i][j] - (double)want[i][j]);
            if (fabs((double)want[i][j]) > scale)
                scale = fabs((double)want[i][j]);
            if (!(e <= worst)) /* NaN too */
                worst = isnan(e) ? INFINITY : e;
        }
        free(want[i]);
    }
    return worst / scale;
}

static void
run_current(void *arg)
{
    (void)arg;
    current->kernel(bufs);
}

static void
usage(void)
{
    fprintf(stderr, "usage: bench_modules [--rounds N] [--threads T] "
                    "[--cc LINE] [--no-check] MODULE.c MODULE.c ...\n");
    exit(2);
}

int
main(int argc, char **argv)
{
    struct module m[MAX_MODULES];
    const char *cc = "gcc -O3 -march=native -fopenmp";
    int n = 0, rounds = 20, threads = 0, checked = 1, i, r, t, a;
    char cpu[256];

    if (argc < 2) { /* `make bench` runs every bench program bare */
        printf("bench_modules: skipped (pass the modules to time: "
               "`kerntune show --db DB --trial ID --module`)\n");
        return 0;
    }
    memset(m, 0, sizeof(m));
    for (a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--rounds") == 0 && a + 1 < argc)
            rounds = atoi(argv[++a]);
        else if (strcmp(argv[a], "--threads") == 0 && a + 1 < argc)
            threads = atoi(argv[++a]);
        else if (strcmp(argv[a], "--cc") == 0 && a + 1 < argc)
            cc = argv[++a];
        else if (strcmp(argv[a], "--no-check") == 0)
            checked = 0;
        else if (argv[a][0] == '-' || n == MAX_MODULES)
            usage();
        else
            m[n++].path = argv[a];
    }
    if (n < 1 || rounds < 1 || threads < 0 || threads > 2)
        usage();
    for (i = 0; i < n; i++) {
        load(&m[i], cc);
        if (i > 0 && !same_workload(&m[i], &m[0])) {
            fprintf(stderr, "bench_modules: %s is not the workload of %s\n",
                    m[i].path, m[0].path);
            return 2;
        }
    }
    for (i = 0; i < m[0].nbufs; i++)
        bufs[i] = kt_xaligned(64, (size_t)m[0].elems[i] * sizeof(float) + 64);
    kt_bench_cpu_model(cpu, sizeof(cpu));
    printf("CPU: %s\ncompiler: %s\n", cpu, cc);
    for (i = 0; i < n; i++) {
        double e = check(&m[i]);
        printf("module %d: %s (max error %.2g of the largest output)\n", i + 1,
               m[i].path, e);
        if (!(e < 1e-3)) {
            fprintf(stderr, "bench_modules: %s is wrong%s\n", m[i].path,
                    checked ? "" : " (timed anyway: --no-check)");
            if (checked)
                return 1;
        }
        m[i].best[1] = m[i].best[2] = INFINITY;
    }
    /* the packs ran in check(); the inputs stay as they are */
    /* one thread count after the other: switching the count between
     * kernels made the 1-thread ratio of two modules swing by 5% (the
     * other CPU's pool thread still spinning down) */
    for (t = 1; t <= 2; t++)
        for (r = 0; r < rounds; r++) {
            if (threads != 0 && t != threads)
                continue;
            for (i = 0; i < n; i++) {
                double s;
                current = &m[i];
                m[i].set_threads(t);
                s = kt_bench_time(run_current, NULL, 3);
                if (s < m[i].best[t])
                    m[i].best[t] = s;
            }
        }
    printf("\nGFLOPS, best of %d interleaved rounds of 3 timed batches each "
           "(%.1f MFLOP per call)\n",
           rounds, m[0].flops * 1e-6);
    for (t = 1; t <= 2; t++) {
        if (threads != 0 && t != threads)
            continue;
        for (i = 0; i < n; i++)
            printf("%dT module %-3d %9.1f   %.3fx of module 1\n", t, i + 1,
                   m[i].flops / m[i].best[t] * 1e-9,
                   m[0].best[t] / m[i].best[t]);
    }
    for (i = 0; i < m[0].nbufs; i++)
        free(bufs[i]);
    for (i = 0; i < n; i++)
        dlclose(m[i].h);
    return 0;
}
