/* placement_time.c - stored kernels timed in turns, each sample tagged
 * with where the two threads sat (docs/measure.md, "Thread placement").
 *
 *   build/bench/placement_time [--seconds S] DB[:TRIAL] ...
 *
 * Rebuilds each database's fastest trial (or the trial given) as the
 * worker would, then for S seconds (default 120) times every kernel in
 * turn: a cache line's round trip between the first two CPUs, the best of
 * 10 calls on 2 threads, the round trip again.  Samples whose two round
 * trips are both under CLOSE_NS count as "close", both over APART_NS as
 * "apart", the rest are dropped.  Prints per kernel the fastest and the
 * median sample of each kind and their ratio to the first kernel's: on a
 * VM whose host moves a vCPU to another CCX now and then, one run gives
 * both figures of every kernel under the same conditions. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "bench/baseline.h"
#include "daemon/show.h"
#include "measure/worker/worker.h"
#include "tests/support/ktt.h"

#define MAX_KERNELS 8
#define MAX_SAMPLES 20000
#define CALLS 10
#define CLOSE_NS 150.0
#define APART_NS 200.0
#define CC "gcc -O3 -march=native -fopenmp"

struct kernel {
    char label[300];
    long long trial;
    double stored_ms;
    void (*fn)(float *const *);
    float *buf[KT_MAX_TENSORS];
    double *close, *apart;
    int nclose, napart;
};

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The trial to rebuild: the one named after ':' or the fastest. */
static long long
pick_trial(sqlite3 *db, const char *spec)
{
    const char *colon = strrchr(spec, ':');
    sqlite3_stmt *q = NULL;
    long long id = -1;

    if (colon != NULL)
        return atoll(colon + 1);
    if (sqlite3_prepare_v2(db,
                           "SELECT id FROM logs WHERE err_no = 0 "
                           "ORDER BY cost LIMIT 1",
                           -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        id = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return id;
}

static int
load_kernel(const char *spec, struct kernel *k)
{
    char path[256], err[4096], *src = NULL;
    struct kt_codegen_opts cg;
    struct kt_shown t;
    sqlite3 *db = NULL;
    void *h = NULL;
    const long long *elems;
    const int *nbufs;
    void (*pack)(float *const *), (*threads)(int);
    int i, rc = -1;

    memset(&t, 0, sizeof(t));
    snprintf(path, sizeof(path), "%s", spec);
    if (strrchr(path, ':') != NULL)
        *strrchr(path, ':') = '\0';
    kt_codegen_default_opts(&cg);
    if (kt_show_open_db(path, &db, err, sizeof(err)) != KT_OK)
        goto done;
    k->trial = pick_trial(db, spec);
    if (kt_show_load_trial(db, path, k->trial, &t, err, sizeof(err)) != KT_OK ||
        kt_show_module(&t, &cg, &src, err, sizeof(err)) != KT_OK ||
        (h = ktt_build_cc(src, CC, err, sizeof(err))) == NULL)
        goto done;
    nbufs = dlsym(h, "kt_nbufs");
    elems = dlsym(h, "kt_buf_elems");
    *(void **)&k->fn = dlsym(h, "kt_kernel");
    *(void **)&pack = dlsym(h, "kt_pack");
    *(void **)&threads = dlsym(h, "kt_set_threads");
    if (nbufs == NULL || elems == NULL || k->fn == NULL ||
        *nbufs > KT_MAX_TENSORS) {
        snprintf(err, sizeof(err), "trial %lld: not a kernel module", k->trial);
        goto done;
    }
    for (i = 0; i < *nbufs; i++) {
        size_t bytes = ((size_t)elems[i] * sizeof(float) + 63) / 64 * 64;
        long long e;
        k->buf[i] = aligned_alloc(64, bytes);
        for (e = 0; e < elems[i]; e++)
            k->buf[i][e] = (float)(e * 7 % 13 - 6) / 13.0f;
    }
    if (threads != NULL)
        threads(2);
    if (pack != NULL)
        pack(k->buf);
    k->fn(k->buf); /* warm */
    k->stored_ms = t.cost * 1e3;
    snprintf(k->label, sizeof(k->label), "%s trial %lld", path, k->trial);
    k->close = calloc(MAX_SAMPLES, sizeof(double));
    k->apart = calloc(MAX_SAMPLES, sizeof(double));
    rc = 0;
done:
    if (rc != 0)
        fprintf(stderr, "placement_time: %s: %s\n", spec, err);
    free(src);
    kt_shown_free(&t);
    sqlite3_close(db);
    return rc;
}

static void
sample(struct kernel *k, const int cpu[2])
{
    double before = kt_xcpu_round_trip_ns(cpu), best = 1e30, after;
    int i;

    for (i = 0; i < CALLS; i++) {
        double t0 = kt_now(), d;
        k->fn(k->buf);
        d = kt_now() - t0;
        if (d < best)
            best = d;
    }
    after = kt_xcpu_round_trip_ns(cpu);
    if (before > 0 && before < CLOSE_NS && after > 0 && after < CLOSE_NS &&
        k->nclose < MAX_SAMPLES)
        k->close[k->nclose++] = best * 1e3;
    else if (before > APART_NS && after > APART_NS && k->napart < MAX_SAMPLES)
        k->apart[k->napart++] = best * 1e3;
}

static double
median(double *v, int n)
{
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return v[n / 2];
}

int
main(int argc, char **argv)
{
    struct kernel k[MAX_KERNELS];
    double seconds = 120, t0, med_close[MAX_KERNELS], med_apart[MAX_KERNELS];
    int cpu[2], n = 0, i, a = 1;
    char model[256];

    if (argc > 2 && strcmp(argv[1], "--seconds") == 0) {
        seconds = atof(argv[2]);
        a = 3;
    }
    if (a >= argc || argc - a > MAX_KERNELS || !(seconds > 0)) {
        fprintf(stderr, "usage: placement_time [--seconds S] DB[:TRIAL] ... "
                        "(at most 8)\n");
        return 2;
    }
    /* as the worker's runner binds a team (docs/measure.md) */
    setenv("OMP_PROC_BIND", "close", 0);
    setenv("OMP_PLACES", "threads", 0);
    if (!kt_first_two_cpus(cpu)) {
        fprintf(stderr, "placement_time: needs two CPUs\n");
        return 1;
    }
    memset(k, 0, sizeof(k));
    kt_bench_cpu_model(model, sizeof(model));
    printf("CPU: %s; %g s, the kernels taking turns on 2 threads\n", model,
           seconds);
    for (i = a; i < argc; i++)
        if (load_kernel(argv[i], &k[n]) == 0)
            n++;
        else
            return 1;
    t0 = kt_now();
    while (kt_now() - t0 < seconds)
        for (i = 0; i < n; i++)
            sample(&k[i], cpu);
    printf("%-44s %9s | %5s %9s %9s %6s | %5s %9s %9s %6s\n", "kernel",
           "stored ms", "close", "best ms", "median", "ratio", "apart",
           "best ms", "median", "ratio");
    for (i = 0; i < n; i++) {
        med_close[i] = median(k[i].close, k[i].nclose);
        med_apart[i] = median(k[i].apart, k[i].napart);
        printf("%-44.44s %9.4f | %5d %9.4f %9.4f %5.2fx | %5d %9.4f %9.4f "
               "%5.2fx\n",
               k[i].label, k[i].stored_ms, k[i].nclose,
               k[i].nclose ? k[i].close[0] : 0, med_close[i],
               med_close[i] > 0 ? med_close[0] / med_close[i] : 0, k[i].napart,
               k[i].napart ? k[i].apart[0] : 0, med_apart[i],
               med_apart[i] > 0 ? med_apart[0] / med_apart[i] : 0);
    }
    printf("(ratio: the first kernel's median over this one's, per kind; "
           "close: round trips under %.0f ns, apart: over %.0f ns)\n",
           CLOSE_NS, APART_NS);
    return 0;
}
