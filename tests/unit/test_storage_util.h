/* test_storage_util.h - deterministic trial generator shared by the storage
 * tests and bench (header-only; static functions). */
#ifndef KT_TEST_STORAGE_UTIL_H
#define KT_TEST_STORAGE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/common.h"
#include "storage/storage.h"

#define TS_TARGET "llvm -mcpu=native cc=gcc"

/* Owns the strings one generated trial points at. */
struct ts_trial {
    struct kt_trial t;
    char workload[160];
    char config[160];
    char task_name[32];
    char err_text[96];
    char worker[32];
    char kv_v[3][64];
    struct kt_kv kvs[3];
    double costs[5];
};

/* Cost of trial i of workload w: a deterministic value in (0.5, 1.5) ms. */
static inline double
ts_cost(int64_t i, int w)
{
    uint64_t h = kt_hash64(&i, sizeof(i)) ^ (uint64_t)w * 0x9e3779b97f4a7c15ULL;

    return 1e-3 * (0.5 + (double)(h % 1000003) / 1000003.0);
}

/* err_no of trial i: mostly successes, some errors of kinds 1, 4, 6. */
static inline int
ts_errno(int64_t i)
{
    static const int e[16] = {0, 0, 0, 1, 0, 0, 4, 0, 0, 0, 0, 6, 0, 1, 0, 0};

    return e[(kt_hash64(&i, sizeof(i)) >> 7) % 16];
}

static inline void
ts_workload(int w, char *buf, size_t len)
{
    snprintf(buf, len,
             "C[i, j] += A[i, k] * B[k, j];A=float32[%d,256];B=float32[256,"
             "%d]",
             64 * (w + 1), 128 + w);
}

/* Fills g with trial number i (unique per workload w and job). */
static inline void
ts_make(struct ts_trial *g, int64_t job, int w, int64_t i)
{
    int e = ts_errno(i), k;

    memset(&g->t, 0, sizeof(g->t));
    ts_workload(w, g->workload, sizeof(g->workload));
    snprintf(g->config, sizeof(g->config),
             "{\"v\":1,\"steps\":[[\"SP\",0,1,1024,[%lld,16],1],[\"RE\",0,"
             "[0,2,1]]]}",
             (long long)i);
    snprintf(g->task_name, sizeof(g->task_name), "matmul_%d", w);
    snprintf(g->worker, sizeof(g->worker), "127.0.0.1:9190/w%lld",
             (long long)(i % 4));
    g->t.job_id = job;
    g->t.task_name = g->task_name;
    g->t.target = TS_TARGET;
    g->t.workload = g->workload;
    g->t.config = g->config;
    g->t.result.err_no = e;
    g->t.trial_no = i;
    g->t.result.worker = g->worker;
    g->t.result.build_s = 0.25;
    g->t.result.run_s = e == 0 ? 0.01 : 0;
    g->t.started = 1.7e9 + (double)i;
    g->t.finished = 1.7e9 + (double)i + 0.5;
    if (e == 0) {
        for (k = 0; k < 5; k++)
            g->costs[k] = ts_cost(i, w) * (1.0 + 0.01 * (k - 2));
        g->t.result.cost = ts_cost(i, w);
        memcpy(g->t.result.costs, g->costs, sizeof(double) * 5);
        g->t.result.ncosts = 5;
        snprintf(g->kv_v[0], sizeof(g->kv_v[0]), "%.3f", 0.04);
        g->kvs[0].k = "spread";
        g->kvs[0].v = g->kv_v[0];
        g->t.result.kvs = g->kvs;
        g->t.result.nkvs = 1;
    } else {
        snprintf(g->err_text, sizeof(g->err_text), "error %d on trial %lld", e,
                 (long long)i);
        g->t.result.err_text = g->err_text;
        snprintf(g->kv_v[0], sizeof(g->kv_v[0]), "kernel.c:%lld: error: x",
                 (long long)i);
        snprintf(g->kv_v[1], sizeof(g->kv_v[1]), "%s", g->worker);
        snprintf(g->kv_v[2], sizeof(g->kv_v[2]), "%d", e == 4 ? 11 : 0);
        g->kvs[0].k = "compiler_stderr";
        g->kvs[1].k = "worker";
        g->kvs[2].k = "signal";
        for (k = 0; k < 3; k++)
            g->kvs[k].v = g->kv_v[k];
        g->t.result.kvs = g->kvs;
        g->t.result.nkvs = 3;
    }
}

/* Writes trials [from, from+n) of workload w in one batch. */
static inline int
ts_write(struct kt_storage *st, int64_t job, int w, int64_t from, int n,
         char *err, size_t errlen)
{
    struct ts_trial *g = kt_xcalloc((size_t)n, sizeof(*g));
    struct kt_trial *t = kt_xcalloc((size_t)n, sizeof(*t));
    int i, rc;

    for (i = 0; i < n; i++) {
        ts_make(&g[i], job, w, from + i);
        t[i] = g[i].t;
    }
    rc = kt_storage_write_batch(st, t, (size_t)n, NULL, err, errlen);
    free(t);
    free(g);
    return rc;
}

/* Makes a fresh temporary directory; path in out (PATH_MAX). */
static inline void
ts_tmpdir(char *out, size_t len)
{
    const char *base = getenv("TMPDIR");

    snprintf(out, len, "%s/kt_storage_XXXXXX", base ? base : "/tmp");
    if (mkdtemp(out) == NULL)
        kt_fatalx("mkdtemp %s: %s", out, strerror(errno));
}

static inline void
ts_rmrf(const char *dir)
{
    char cmd[4200];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
}

/* One integer from a query (first column of the first row); -1 on error. */
static inline long long
ts_q1(struct sqlite3 *db, const char *sql)
{
    sqlite3_stmt *s = NULL;
    long long v = -1;

    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* Text of the first column of the first row into out; "" on error. */
static inline void
ts_qs(struct sqlite3 *db, const char *sql, char *out, size_t len)
{
    sqlite3_stmt *s = NULL;

    out[0] = '\0';
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0) != NULL)
        snprintf(out, len, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
}

#endif /* KT_TEST_STORAGE_UTIL_H */
