/* bench_storage.c - insert throughput (trials/s in batches of 64) and resume
 * time for a database of 100,000 trials, on a real file.
 *
 *   build/bench/bench_storage [ntrials]      (default 100000)
 *   KT_BENCH_DB=path keeps the database (for docs/sql.md) instead of a
 *   temporary file.  Prints one line per figure. */
#include <sys/stat.h>

#include "tests/unit/test_storage_util.h"

#define BATCH 64
#define NWORKLOADS 50

struct count {
    size_t rows;
};

static int
count_cb(void *arg, const struct kt_history_row *row)
{
    struct count *c = arg;

    c->rows += row->config[0] != '\0';
    return 0;
}

static int
fail(const char *what, const char *err)
{
    fprintf(stderr, "bench_storage: %s: %s\n", what, err);
    return 1;
}

/* Writes n trials in batches; returns seconds spent inside write_batch. */
static int
insert(const char *path, int sync, long n, double *secs, char *err,
       size_t errlen)
{
    struct kt_storage_opts o = {.synchronous = sync};
    struct kt_storage *st = NULL;
    struct ts_trial *g = kt_xcalloc(BATCH, sizeof(*g));
    struct kt_trial t[BATCH];
    int64_t job;
    long i, k;
    double t0;
    int rc;

    *secs = 0;
    rc = kt_storage_open(&st, path, &o, err, errlen);
    if (rc == 0)
        rc = kt_storage_job_open(st, "bench", "resnet18", TS_TARGET, &job, err,
                                 errlen);
    for (i = 0; rc == 0 && i < NWORKLOADS; i++) {
        char key[160];
        struct kt_task_info ti = {.job_id = job,
                                  .task_name = "matmul",
                                  .target = TS_TARGET,
                                  .workload = key,
                                  .compute = "C[i, j] += A[i, k] * B[k, j]",
                                  .weight = 1,
                                  /* ts_workload's shapes: M x 256 x N */
                                  .flops = 2.0 * 64 * (double)(i + 1) * 256 *
                                           (double)(128 + i)};

        ts_workload((int)i, key, sizeof(key));
        rc = kt_storage_task_put(st, &ti, err, errlen);
    }
    for (i = 0; rc == 0 && i < n; i += BATCH) {
        for (k = 0; k < BATCH && i + k < n; k++) {
            /* As the daemon measures: one batch is one task's candidates;
             * batches go round the 50 workloads. */
            ts_make(&g[k], job, (int)((i / BATCH) % NWORKLOADS), i + k);
            t[k] = g[k].t;
        }
        t0 = kt_now();
        rc = kt_storage_write_batch(st, t, (size_t)k, NULL, err, errlen);
        *secs += kt_now() - t0;
    }
    kt_storage_close(st);
    free(g);
    return rc;
}

int
main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
    const char *keep = getenv("KT_BENCH_DB");
    char dir[4096] = "", path[4200], err[512];
    struct kt_storage *st = NULL;
    struct kt_resume *r = NULL;
    struct count c = {0};
    uint64_t *set;
    size_t nset, measured = 0, i;
    double secs, t0, t_open, t_resume, t_measured, t_hist;
    int sync;

    kt_log_init(LOG_WARNING);
    if (n < BATCH)
        n = BATCH;
    ts_tmpdir(dir, sizeof(dir));
    for (sync = 1; sync <= 2; sync++) {
        snprintf(path, sizeof(path), "%s/bench%d.db", dir, sync);
        if (insert(path, sync, n, &secs, err, sizeof(err)) < 0)
            return fail("insert", err);
        printf("insert: %ld trials in batches of %d, synchronous=%s: %.3f s "
               "in write_batch = %.0f trials/s\n",
               n, BATCH, sync == 2 ? "FULL" : "NORMAL", secs, (double)n / secs);
    }
    snprintf(path, sizeof(path), "%s/bench1.db", dir);
    {
        struct stat sb;

        if (stat(path, &sb) == 0)
            printf("file: %.1f MB for %ld trials\n", (double)sb.st_size / 1e6,
                   n);
    }

    /* Resume: open (schema check), per-workload best and counts, every
     * workload's measured set, and the whole history for the cost model. */
    t0 = kt_now();
    if (kt_storage_open(&st, path, NULL, err, sizeof(err)) < 0)
        return fail("open", err);
    t_open = kt_now() - t0;
    t0 = kt_now();
    if (kt_storage_resume(st, TS_TARGET, 1, &r, err, sizeof(err)) < 0)
        return fail("resume", err);
    t_resume = kt_now() - t0;
    t0 = kt_now();
    for (i = 0; i < r->n; i++) {
        if (kt_storage_measured(st, TS_TARGET, r->e[i].workload_hash, &set,
                                &nset, err, sizeof(err)) < 0)
            return fail("measured", err);
        measured += nset;
        free(set);
    }
    t_measured = kt_now() - t0;
    t0 = kt_now();
    if (kt_storage_history(st, TS_TARGET, NULL, 0, count_cb, &c, err,
                           sizeof(err)) < 0)
        return fail("history", err);
    t_hist = kt_now() - t0;
    printf("resume of %ld trials: open %.4f s, best+counts of %zu workloads "
           "%.4f s, measured sets (%zu hashes) %.4f s, history (%zu rows) "
           "%.4f s; total %.4f s\n",
           n, t_open, r->n, t_resume, measured, t_measured, c.rows, t_hist,
           t_open + t_resume + t_measured + t_hist);
    kt_resume_free(r);
    kt_storage_close(st);
    if (keep != NULL) {
        char cmd[8400];

        snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path, keep);
        if (system(cmd) != 0)
            return fail("keep", keep);
        printf("kept: %s\n", keep);
    }
    ts_rmrf(dir);
    return 0;
}
