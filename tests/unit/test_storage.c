/* test_storage.c - storage on real database files: the seed's SQL recipes
 * verbatim, resume, export/import, migration from the v1 fixture, and the
 * clear errors for read-only, corrupt, locked, too-new and full databases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/test_storage_util.h"
#include "tests/support/ktt.h"

#define NW 3      /* workloads of job 1 */
#define NPER 200  /* trials per workload of job 1 */
#define NJOB2 100 /* trials of workload 0 by job 2 */

struct fx {
    char dir[4096];
    char db[4200];
    struct kt_storage *st;
    int64_t job1, job2;
};

static int
setup(void **state)
{
    struct fx *f = kt_xcalloc(1, sizeof(*f));
    char err[512];

    ts_tmpdir(f->dir, sizeof(f->dir));
    snprintf(f->db, sizeof(f->db), "%s/tune.db", f->dir);
    if (kt_storage_open(&f->st, f->db, NULL, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;
    char tiny[4200];

    kt_storage_close(f->st);
    snprintf(tiny, sizeof(tiny), "%s/tiny", f->dir);
    umount2(tiny, MNT_DETACH); /* only mounted by the disk-full test */
    ts_rmrf(f->dir);
    free(f);
    return 0;
}

/* Job 1: NW workloads x NPER trials in batches of 50; job 2: NJOB2 trials
 * of workload 0. */
static void
fill(struct fx *f)
{
    char err[512];
    int w, i;

    assert_int_equal(kt_storage_job_open(f->st, "resnet-1", "resnet18",
                                         TS_TARGET, &f->job1, err, sizeof(err)),
                     0);
    assert_int_equal(kt_storage_job_open(f->st, "resnet-2", "resnet18",
                                         TS_TARGET, &f->job2, err, sizeof(err)),
                     0);
    for (w = 0; w < NW; w++) {
        char key[160];
        struct kt_task_info ti = {.job_id = f->job1,
                                  .task_name = "matmul",
                                  .target = TS_TARGET,
                                  .workload = key,
                                  .compute = "C[i, j] += A[i, k] * B[k, j]",
                                  .shapes = "{}",
                                  .weight = 2,
                                  .flops = 2.0 * 64 * (w + 1) * 256 * (128 + w)};

        ts_workload(w, key, sizeof(key));
        assert_int_equal(kt_storage_task_put(f->st, &ti, err, sizeof(err)), 0);
        for (i = 0; i < NPER; i += 50)
            assert_int_equal(ts_write(f->st, f->job1, w, i, 50, err,
                                      sizeof(err)),
                             0);
    }
    assert_int_equal(ts_write(f->st, f->job2, 0, 0, NJOB2, err, sizeof(err)),
                     0);
}

static int
expected_errcount(int e)
{
    int n = 0, i;

    for (i = 0; i < NPER; i++)
        n += (ts_errno(i) == e) * NW;
    for (i = 0; i < NJOB2; i++)
        n += ts_errno(i) == e;
    return n;
}

static void
test_storage_seed_queries(void **state)
{
    struct fx *f = *state;
    sqlite3 *db;
    sqlite3_stmt *s;
    int rows = 0, seen[KT_MERR_COUNT] = {0}, failed_kvs = 0, e;
    double prev = 0;

    fill(f);
    db = kt_storage_db(f->st);
    /* Recipe 1, verbatim. */
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "select err_no, count(*) as count "
                                        "from logs group by err_no;",
                                        -1, &s, NULL),
                     SQLITE_OK);
    while (sqlite3_step(s) == SQLITE_ROW) {
        e = sqlite3_column_int(s, 0);
        assert_true(e >= 0 && e < KT_MERR_COUNT);
        assert_string_equal(sqlite3_column_name(s, 1), "count");
        assert_int_equal(sqlite3_column_int(s, 1), expected_errcount(e));
        seen[e] = 1;
    }
    sqlite3_finalize(s);
    for (e = 0; e < KT_MERR_COUNT; e++)
        assert_int_equal(seen[e], expected_errcount(e) > 0);
    assert_true(seen[0] && seen[1] && seen[4] && seen[6]);

    /* Recipe 2, verbatim: the seed's columns first, fastest first. */
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "select * from logs where err_no=0 "
                                        "order by cost limit 10;",
                                        -1, &s, NULL),
                     SQLITE_OK);
    {
        static const char *const cols[] = {"id",       "task_name", "target",
                                           "workload", "config",    "err_no",
                                           "trial_no", "cost",      "err_text"};
        int c;

        for (c = 0; c < 9; c++)
            assert_string_equal(sqlite3_column_name(s, c), cols[c]);
    }
    while (sqlite3_step(s) == SQLITE_ROW) {
        assert_int_equal(sqlite3_column_int(s, 5), 0);
        assert_true(sqlite3_column_double(s, 7) >= prev);
        assert_true(sqlite3_column_double(s, 7) > 0);
        prev = sqlite3_column_double(s, 7);
        rows++;
    }
    sqlite3_finalize(s);
    assert_int_equal(rows, 10);
    assert_true(prev > 0);
    assert_int_equal(ts_q1(db, "select count(*) from logs where err_no=0 "
                               "and cost < (select min(cost) from logs "
                               "where err_no=0)"),
                     0);

    /* Recipe 3, verbatim: every kv of every failed trial. */
    assert_int_equal(
        sqlite3_prepare_v2(db,
                           "select logs.id, err_no, err_text, kvs.k, kvs.v "
                           "from logs join kvs where logs.err_no!=0 and "
                           "logs.id=kvs.log_id and "
                           "logs.workload=kvs.log_workload;",
                           -1, &s, NULL),
        SQLITE_OK);
    while (sqlite3_step(s) == SQLITE_ROW) {
        assert_int_not_equal(sqlite3_column_int(s, 1), 0);
        assert_non_null(
            strstr((const char *)sqlite3_column_text(s, 2), "error"));
        failed_kvs++;
    }
    sqlite3_finalize(s);
    assert_int_equal(failed_kvs,
                     3 * (NW * NPER + NJOB2 - expected_errcount(0)));

    /* best_logs: one row per workload, the minimum cost. */
    assert_int_equal(ts_q1(db, "select count(*) from best_logs"), NW);
    assert_int_equal(ts_q1(db, "select count(*) from best_logs b where b.cost "
                               "> (select "
                               "min(cost) from logs l where l.err_no=0 and "
                               "l.workload=b.workload)"),
                     0);
    /* The GFLOPS recipe of docs/sql.md joins tasks. */
    assert_int_equal(
        ts_q1(db, "select count(*) from best_logs b join tasks t on "
                  "t.workload_hash=b.workload_hash and t.target=b.target "
                  "where t.flops / b.cost / 1e9 > 0"),
        NW);
}

/* A reader holding a snapshot open never blocks the writer (WAL), and sees
 * the new rows once it starts a new transaction. */
static void
test_storage_reader_does_not_block(void **state)
{
    struct fx *f = *state;
    sqlite3 *rd;
    sqlite3_stmt *s;
    char err[512];

    assert_int_equal(ts_write(f->st, 0, 0, 0, 10, err, sizeof(err)), 0);
    assert_int_equal(sqlite3_open(f->db, &rd), SQLITE_OK);
    assert_int_equal(sqlite3_exec(rd, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(rd, "select count(*) from logs", -1, &s,
                                        NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(s, 0), 10);
    sqlite3_reset(s);
    assert_int_equal(ts_write(f->st, 0, 0, 10, 64, err, sizeof(err)), 0);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(s, 0), 10); /* same snapshot */
    sqlite3_reset(s);
    assert_int_equal(sqlite3_exec(rd, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(s, 0), 74);
    sqlite3_finalize(s);
    sqlite3_close(rd);
}

struct hist {
    int n, per_w[NW];
    double last_started;
    char first_config[160];
};

static int
hist_cb(void *arg, const struct kt_history_row *r)
{
    struct hist *h = arg;
    int w;

    for (w = 0; w < NW; w++) {
        char key[160];

        ts_workload(w, key, sizeof(key));
        if (strcmp(key, r->workload) == 0)
            h->per_w[w]++;
    }
    if (h->n == 0)
        snprintf(h->first_config, sizeof(h->first_config), "%s", r->config);
    if (r->err_no != 0 && r->cost != 0)
        return 99;
    h->n++;
    return 0;
}

static void
check_resume(struct kt_storage *st, int64_t job1, int64_t job2)
{
    struct kt_resume *r = NULL;
    const struct kt_resume_entry *e;
    char err[512], key[160], hash[17];
    double best;
    int w, i, ok;

    assert_int_equal(kt_storage_resume(st, TS_TARGET, job1, &r, err,
                                       sizeof(err)),
                     0);
    assert_int_equal((int)r->n, NW);
    for (w = 0; w < NW; w++) {
        ts_workload(w, key, sizeof(key));
        kt_hash_hex(kt_hash64(key, strlen(key)), hash);
        e = kt_resume_find(r, hash);
        assert_non_null(e);
        assert_string_equal(e->workload, key);
        assert_int_equal(e->job_trials, NPER);
        assert_int_equal(e->job_max_trial_no, NPER - 1);
        assert_int_equal(e->trials, NPER + (w == 0 ? NJOB2 : 0));
        best = 1e9;
        ok = 0;
        for (i = 0; i < NPER; i++) {
            if (ts_errno(i) != 0)
                continue;
            ok++;
            if (ts_cost(i, w) < best)
                best = ts_cost(i, w);
        }
        if (w == 0)
            for (i = 0; i < NJOB2; i++)
                ok += ts_errno(i) == 0; /* same costs as job 1's trials */
        assert_int_equal(e->ok_trials, ok);
        assert_true(e->best_cost == best);
        assert_non_null(e->best_config);
        kt_hash_hex(kt_hash64(e->best_config, strlen(e->best_config)), hash);
        assert_string_equal(e->best_sched_hash, hash);
    }
    assert_null(kt_resume_find(r, "0000000000000000"));
    kt_resume_free(r);
    /* Job 2 only touched workload 0. */
    assert_int_equal(kt_storage_resume(st, TS_TARGET, job2, &r, err,
                                       sizeof(err)),
                     0);
    for (w = 0; w < NW; w++) {
        ts_workload(w, key, sizeof(key));
        kt_hash_hex(kt_hash64(key, strlen(key)), hash);
        e = kt_resume_find(r, hash);
        assert_int_equal(e->job_trials, w == 0 ? NJOB2 : 0);
        assert_int_equal(e->job_max_trial_no, w == 0 ? NJOB2 - 1 : -1);
    }
    kt_resume_free(r);
    /* Another target has nothing. */
    assert_int_equal(kt_storage_resume(st, "cuda", job1, &r, err, sizeof(err)),
                     0);
    assert_int_equal((int)r->n, 0);
    kt_resume_free(r);
}

static void
test_storage_resume(void **state)
{
    struct fx *f = *state;
    struct ts_trial g;
    struct hist h;
    uint64_t *set = NULL;
    size_t n = 0;
    char err[512], hash[17];
    int i;

    fill(f);
    kt_storage_close(f->st);
    f->st = NULL;
    assert_int_equal(kt_storage_open(&f->st, f->db, NULL, err, sizeof(err)), 0);
    assert_int_equal(kt_storage_opened_version(f->st),
                     KT_STORAGE_SCHEMA_VERSION);
    check_resume(f->st, f->job1, f->job2);

    /* Measured set of workload 0: the 200 configs of job 1 (job 2 repeated
     * 100 of them), and nothing else. */
    ts_make(&g, 0, 0, 0);
    kt_hash_hex(kt_hash64(g.workload, strlen(g.workload)), hash);
    assert_int_equal(kt_storage_measured(f->st, TS_TARGET, hash, &set, &n, err,
                                         sizeof(err)),
                     0);
    assert_int_equal((int)n, NPER);
    for (i = 0; i < NPER + 5; i++) {
        char sh[17];

        ts_make(&g, 0, 0, i);
        kt_hash_hex(kt_hash64(g.config, strlen(g.config)), sh);
        assert_int_equal(kt_measured_contains(set, n, sh), i < NPER);
    }
    free(set);

    /* History: per workload, all, and the newest 'limit' rows. */
    memset(&h, 0, sizeof(h));
    assert_int_equal(kt_storage_history(f->st, TS_TARGET, hash, 0, hist_cb, &h,
                                        err, sizeof(err)),
                     0);
    assert_int_equal(h.n, NPER + NJOB2);
    assert_int_equal(h.per_w[0], NPER + NJOB2);
    memset(&h, 0, sizeof(h));
    assert_int_equal(kt_storage_history(f->st, TS_TARGET, NULL, 0, hist_cb, &h,
                                        err, sizeof(err)),
                     0);
    assert_int_equal(h.n, NW * NPER + NJOB2);
    for (i = 0; i < NW; i++)
        assert_int_equal(h.per_w[i], NPER + (i == 0 ? NJOB2 : 0));
    memset(&h, 0, sizeof(h));
    assert_int_equal(kt_storage_history(f->st, TS_TARGET, NULL, 10, hist_cb, &h,
                                        err, sizeof(err)),
                     0);
    assert_int_equal(h.n, 10);
    ts_make(&g, 0, 0, NJOB2 - 10); /* the oldest of the newest ten */
    assert_string_equal(h.first_config, g.config);
    memset(&h, 0, sizeof(h));
    assert_int_equal(kt_storage_history(f->st, "cuda", NULL, 0, hist_cb, &h,
                                        err, sizeof(err)),
                     0);
    assert_int_equal(h.n, 0);
}

static void
export_to(struct kt_storage *st, const char *path, size_t *n)
{
    char err[512];
    FILE *fp = fopen(path, "w");

    assert_non_null(fp);
    assert_int_equal(kt_storage_export(st, fp, NULL, n, err, sizeof(err)), 0);
    fclose(fp);
}

static void
test_storage_export_import(void **state)
{
    struct fx *f = *state;
    struct kt_storage *b = NULL;
    char err[512], p1[4300], p2[4300], db2[4300], *a1, *a2;
    size_t n1 = 0, n2 = 0, added = 0, skipped = 0;
    FILE *fp;
    int64_t j1, j2;

    fill(f);
    snprintf(p1, sizeof(p1), "%s/a.jsonl", f->dir);
    snprintf(p2, sizeof(p2), "%s/b.jsonl", f->dir);
    snprintf(db2, sizeof(db2), "%s/other.db", f->dir);
    export_to(f->st, p1, &n1);
    assert_int_equal((int)n1, NW * NPER + NJOB2);

    assert_int_equal(kt_storage_open(&b, db2, NULL, err, sizeof(err)), 0);
    fp = fopen(p1, "r");
    assert_int_equal(kt_storage_import(b, fp, p1, &added, &skipped, err,
                                       sizeof(err)),
                     0);
    fclose(fp);
    assert_int_equal((int)added, NW * NPER + NJOB2);
    assert_int_equal((int)skipped, 0);
    /* Twice: nothing new. */
    fp = fopen(p1, "r");
    assert_int_equal(kt_storage_import(b, fp, p1, &added, &skipped, err,
                                       sizeof(err)),
                     0);
    fclose(fp);
    assert_int_equal((int)added, 0);
    assert_int_equal((int)skipped, NW * NPER + NJOB2);
    assert_int_equal(ts_q1(kt_storage_db(b), "select count(*) from logs"),
                     NW * NPER + NJOB2);
    assert_int_equal(ts_q1(kt_storage_db(b), "select count(*) from kvs"),
                     ts_q1(kt_storage_db(f->st), "select count(*) from kvs"));
    /* Same resume answers; re-export is byte-identical. */
    assert_int_equal(kt_storage_job_open(b, "resnet-1", NULL, NULL, &j1, err,
                                         sizeof(err)),
                     0);
    assert_int_equal(kt_storage_job_open(b, "resnet-2", NULL, NULL, &j2, err,
                                         sizeof(err)),
                     0);
    check_resume(b, j1, j2);
    export_to(b, p2, &n2);
    a1 = ktt_slurp(NULL, p1, NULL);
    assert_non_null(a1);
    a2 = ktt_slurp(NULL, p2, NULL);
    assert_non_null(a2);
    assert_string_equal(a1, a2);
    free(a1);
    free(a2);
    /* Importing our own export into the source adds nothing either. */
    fp = fopen(p1, "r");
    assert_int_equal(kt_storage_import(f->st, fp, p1, &added, &skipped, err,
                                       sizeof(err)),
                     0);
    fclose(fp);
    assert_int_equal((int)added, 0);
    kt_storage_close(b);
}

static void
test_storage_import_bad_lines(void **state)
{
    static const struct {
        const char *line2;
        const char *expect;
    } cases[] = {
        {"{\"kerntune_record\":1,\"uid\":", ":2: column"},
        {"{\"kerntune_record\":2}", ":2: not a kerntune record"},
        {"{\"kerntune_record\":1,\"uid\":\"x\",\"task_name\":\"t\","
         "\"target\":\"c\",\"workload\":\"w\"}",
         ":2: missing or non-string key 'config'"},
        {"{\"kerntune_record\":1,\"uid\":\"x\",\"task_name\":\"t\","
         "\"target\":\"c\",\"workload\":\"w\",\"config\":\"{}\","
         "\"err_no\":12}",
         ":2: missing or not a whole number 0..8: key 'err_no'"},
        /* Out of int's range: converting it was undefined behaviour. */
        {"{\"kerntune_record\":1,\"uid\":\"x\",\"task_name\":\"t\","
         "\"target\":\"c\",\"workload\":\"w\",\"config\":\"{}\","
         "\"err_no\":1e300}",
         ":2: missing or not a whole number 0..8: key 'err_no'"},
        {"{\"kerntune_record\":1,\"uid\":\"x\",\"task_name\":\"t\","
         "\"target\":\"c\",\"workload\":\"w\",\"config\":\"{}\","
         "\"err_no\":0.5}",
         ":2: missing or not a whole number 0..8: key 'err_no'"},
        {"{\"kerntune_record\":1,\"uid\":\"x\",\"task_name\":\"t\","
         "\"target\":\"c\",\"workload\":\"w\",\"config\":\"{}\","
         "\"err_no\":0,\"trial_no\":1e300}",
         ":2: not a whole number 0..2^53: key 'trial_no'"},
        {"{\"kerntune_record\":1,\"uid\":\"x\",\"task_name\":\"t\","
         "\"target\":\"c\",\"workload\":\"w\",\"config\":\"{}\","
         "\"err_no\":0,\"cost\":\"fast\"}",
         ":2: not a finite number >= 0: key 'cost'"},
        /* A negative or infinite cost would be the task's best. */
        {"{\"kerntune_record\":1,\"uid\":\"x\",\"task_name\":\"t\","
         "\"target\":\"c\",\"workload\":\"w\",\"config\":\"{}\","
         "\"err_no\":0,\"cost\":-1e-3}",
         ":2: not a finite number >= 0: key 'cost'"},
        {"{\"kerntune_record\":1,\"uid\":\"x\",\"task_name\":\"t\","
         "\"target\":\"c\",\"workload\":\"w\",\"config\":\"{}\","
         "\"err_no\":0,\"cost\":1,\"costs\":[1,1e999]}",
         ":2: element not a finite number >= 0 in key 'costs'"},
        {"{\"kerntune_record\":1,\"uid\":\"x\",\"task_name\":\"t\","
         "\"target\":\"c\",\"workload\":\"w\",\"config\":\"{}\","
         "\"err_no\":0,\"started\":-1}",
         ":2: not a finite number >= 0: key 'started'"},
        /* Trials are found by these hashes: they must be their texts'. */
        {"{\"kerntune_record\":1,\"uid\":\"x\",\"task_name\":\"t\","
         "\"target\":\"c\",\"workload\":\"w\",\"config\":\"{}\","
         "\"workload_hash\":\"0123456789abcdef\",\"err_no\":0}",
         ":2: not the hash of the workload: key 'workload_hash'"},
        {"{\"kerntune_record\":1,\"uid\":\"x\",\"task_name\":\"t\","
         "\"target\":\"c\",\"workload\":\"w\",\"config\":\"{}\","
         "\"sched_hash\":\"\",\"err_no\":0}",
         ":2: not the hash of the config: key 'sched_hash'"},
        {"{\"kerntune_record\":1,\"uid\":\"x\",\"task_name\":\"t\","
         "\"target\":\"c\",\"workload\":\"w\",\"config\":\"{}\","
         "\"err_no\":0,\"costs\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
         "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
         "1,1,1,1,1,1,1,1,1,1]}",
         ":2: more than 64 repeats in key 'costs'"},
    };
    struct fx *f = *state;
    char err[512], path[4300], *good;
    size_t i, added, skipped;
    FILE *fp;

    assert_int_equal(ts_write(f->st, 0, 0, 0, 1, err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/x.jsonl", f->dir);
    export_to(f->st, path, NULL);
    good = ktt_slurp(NULL, path, NULL);
    assert_non_null(good);
    for (i = 0; i < KT_ARRAY_LEN(cases); i++) {
        struct kt_storage *b = NULL;
        char db2[4400];

        snprintf(db2, sizeof(db2), "%s/bad%zu.db", f->dir, i);
        fp = fopen(path, "w");
        fprintf(fp, "%s%s\n", good, cases[i].line2);
        fclose(fp);
        assert_int_equal(kt_storage_open(&b, db2, NULL, err, sizeof(err)), 0);
        fp = fopen(path, "r");
        assert_int_equal(kt_storage_import(b, fp, "x.jsonl", &added, &skipped,
                                           err, sizeof(err)),
                         KT_EPARSE);
        fclose(fp);
        if (strstr(err, cases[i].expect) == NULL ||
            strncmp(err, "x.jsonl:2:", 10) != 0)
            fail_msg("case %zu: '%s' lacks '%s'", i, err, cases[i].expect);
        /* The good line before the bad one is kept. */
        assert_int_equal((int)added, 1);
        assert_int_equal(ts_q1(kt_storage_db(b), "select count(*) from logs"),
                         1);
        kt_storage_close(b);
    }
    free(good);
}

static void
test_storage_bad_trial(void **state)
{
    struct fx *f = *state;
    struct ts_trial g[2];
    struct kt_trial t[2];
    char err[512];

    ts_make(&g[0], 0, 0, 0);
    ts_make(&g[1], 0, 0, 1);
    t[0] = g[0].t;
    t[1] = g[1].t;
    t[1].config = NULL;
    assert_int_equal(kt_storage_write_batch(f->st, t, 2, NULL, err, sizeof(err)),
                     KT_EINVAL);
    assert_non_null(strstr(err, "trial 1 of the batch has no config"));
    t[1] = g[1].t;
    t[1].result.err_no = 9;
    assert_int_equal(kt_storage_write_batch(f->st, t, 2, NULL, err, sizeof(err)),
                     KT_EINVAL);
    assert_non_null(strstr(err, "err_no 9"));
    t[1] = g[1].t;
    t[1].result.ncosts = KT_MAX_REPEAT + 1;
    assert_int_equal(kt_storage_write_batch(f->st, t, 2, NULL, err, sizeof(err)),
                     KT_EINVAL);
    assert_non_null(strstr(err, "trial 1 of the batch has a bad costs"));
    assert_int_equal(ts_q1(kt_storage_db(f->st), "select count(*) from logs"),
                     0);
}

/* The tracker spells a success's error text ""; the database has none. */
static void
test_storage_success_has_no_err_text(void **state)
{
    struct fx *f = *state;
    struct ts_trial g;
    char err[512];
    int64_t id, i = 0;

    do
        ts_make(&g, 0, 0, i++);
    while (g.t.result.err_no != 0);
    g.t.result.err_text = "";
    assert_int_equal(kt_storage_write_batch(f->st, &g.t, 1, &id, err,
                                            sizeof(err)),
                     KT_OK);
    assert_int_equal(ts_q1(kt_storage_db(f->st), "select count(*) from logs "
                                                 "where err_text is null"),
                     1);
}

static void
copy_file(const char *from, const char *to)
{
    char cmd[9000];

    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

/* Fixture: tests/fixtures/storage_v1.db, made by the v1 DDL.  Rebuilt with
 * KT_REGEN_FIXTURE=1 build/tests/test_storage. */
static void
fixture_path(char *out, size_t len)
{
    const char *env = getenv("KT_FIXTURES");

    snprintf(out, len, "%s/storage_v1.db",
             env != NULL ? env : "tests/fixtures");
}

#define FIX_ROWS 40

static void
make_v1(const char *path)
{
    char err[512], sql[1024];
    sqlite3 *db;
    sqlite3_stmt *ins;
    long long id;
    int i, k;

    assert_int_equal(kt_storage_create_version(path, 1, err, sizeof(err)), 0);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), SQLITE_OK);
    for (i = 0; i < FIX_ROWS; i++) {
        struct ts_trial g;
        char *q;

        ts_make(&g, 0, i % 2, i);
        /* Bound, not printed: the cost must round-trip exactly. */
        assert_int_equal(
            sqlite3_prepare_v2(db,
                               "insert into logs(task_name, target, workload,"
                               " config, err_no, trial_no, cost, err_text)"
                               " values(?,'llvm',?,?,?,?,?,?)",
                               -1, &ins, NULL),
            SQLITE_OK);
        sqlite3_bind_text(ins, 1, g.task_name, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 2, g.workload, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 3, g.config, -1, SQLITE_STATIC);
        sqlite3_bind_int(ins, 4, g.t.result.err_no);
        sqlite3_bind_int(ins, 5, i);
        sqlite3_bind_double(ins, 6,
                            g.t.result.err_no == 0 ? g.t.result.cost : 0.0);
        sqlite3_bind_text(ins, 7, g.t.result.err_text, -1, SQLITE_STATIC);
        assert_int_equal(sqlite3_step(ins), SQLITE_DONE);
        sqlite3_finalize(ins);
        id = sqlite3_last_insert_rowid(db);
        for (k = 0; k < g.t.result.nkvs; k++) {
            q = sqlite3_mprintf("insert into kvs(log_id, log_workload, k, v)"
                                " values(%lld, %Q, %Q, %Q)",
                                id, g.workload, g.kvs[k].k, g.kvs[k].v);
            assert_int_equal(sqlite3_exec(db, q, NULL, NULL, NULL), SQLITE_OK);
            sqlite3_free(q);
        }
    }
    assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    snprintf(sql, sizeof(sql), "PRAGMA journal_mode=DELETE");
    sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
}

static void
check_migrated(const char *path)
{
    struct kt_storage *st = NULL;
    struct kt_resume *r = NULL;
    char err[512], wh[17], got[64];
    sqlite3 *db;
    int i, w;
    uint64_t *set;
    size_t n;

    assert_int_equal(kt_storage_open(&st, path, NULL, err, sizeof(err)), 0);
    assert_int_equal(kt_storage_opened_version(st), 1);
    db = kt_storage_db(st);
    assert_int_equal(ts_q1(db, "PRAGMA user_version"),
                     KT_STORAGE_SCHEMA_VERSION);
    assert_int_equal(ts_q1(db, "select max(version) from schema_version"),
                     KT_STORAGE_SCHEMA_VERSION);
    assert_int_equal(ts_q1(db, "select count(*) from logs"), FIX_ROWS);
    assert_int_equal(ts_q1(db, "select count(*) from logs where "
                               "workload_hash is null or sched_hash is null "
                               "or uid is not null"),
                     0);
    assert_int_equal(ts_q1(db, "select count(*) from best_logs"), 2);
    assert_int_equal(ts_q1(db, "select count(*) from logs join kvs where "
                               "logs.err_no!=0 and logs.id=kvs.log_id and "
                               "logs.workload=kvs.log_workload"),
                     ts_q1(db, "select 3 * count(*) from logs where "
                               "err_no!=0"));
    /* Hashes computed by the migration equal the writer's. */
    for (w = 0; w < 2; w++) {
        struct ts_trial g;
        const struct kt_resume_entry *e;
        double best = 1e9;

        ts_make(&g, 0, w, w);
        kt_hash_hex(kt_hash64(g.workload, strlen(g.workload)), wh);
        assert_int_equal(kt_storage_resume(st, "llvm", 0, &r, err, sizeof(err)),
                         0);
        e = kt_resume_find(r, wh);
        assert_non_null(e);
        assert_int_equal(e->trials, FIX_ROWS / 2);
        for (i = w; i < FIX_ROWS; i += 2)
            if (ts_errno(i) == 0 && ts_cost(i, w) < best)
                best = ts_cost(i, w);
        assert_true(e->best_cost == best);
        kt_resume_free(r);
        assert_int_equal(kt_storage_measured(st, "llvm", wh, &set, &n, err,
                                             sizeof(err)),
                         0);
        kt_hash_hex(kt_hash64(g.config, strlen(g.config)), got);
        assert_true(kt_measured_contains(set, n, got));
        assert_int_equal((int)n, FIX_ROWS / 2);
        free(set);
    }
    /* New trials go in after the old ones. */
    assert_int_equal(ts_write(st, 0, 0, 1000, 64, err, sizeof(err)), 0);
    assert_int_equal(ts_q1(db, "select count(*) from logs"), FIX_ROWS + 64);
    ts_qs(db, "PRAGMA integrity_check", got, sizeof(got));
    assert_string_equal(got, "ok");
    kt_storage_close(st);
}

static void
test_storage_migrate_v1_fixture(void **state)
{
    struct fx *f = *state;
    char fix[4200], copy[4300];

    fixture_path(fix, sizeof(fix));
    if (getenv("KT_REGEN_FIXTURE") != NULL) {
        unlink(fix);
        make_v1(fix);
        fprintf(stderr, "wrote %s\n", fix);
    }
    if (access(fix, R_OK) != 0)
        fail_msg("fixture %s missing (run from the repository root or set "
                 "KT_FIXTURES)",
                 fix);
    snprintf(copy, sizeof(copy), "%s/v1.db", f->dir);
    copy_file(fix, copy);
    check_migrated(copy);
    /* And a v1 file made just now by the v1 code, not only the fixture. */
    snprintf(copy, sizeof(copy), "%s/v1new.db", f->dir);
    make_v1(copy);
    check_migrated(copy);
}

static void
test_storage_newer_refused(void **state)
{
    struct fx *f = *state;
    struct kt_storage *st = NULL;
    char err[512];

    assert_int_equal(sqlite3_exec(kt_storage_db(f->st), "PRAGMA user_version=7",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(kt_storage_open(&st, f->db, NULL, err, sizeof(err)),
                     KT_EDB);
    assert_null(st);
    assert_non_null(strstr(err, "schema version 7 is newer"));
    assert_non_null(strstr(err, f->db));
}

static void
test_storage_corrupt_and_foreign(void **state)
{
    struct fx *f = *state;
    struct kt_storage *st = NULL;
    char err[512], path[4300], buf[8192];
    sqlite3 *db;
    FILE *fp;
    size_t i;

    snprintf(path, sizeof(path), "%s/garbage.db", f->dir);
    for (i = 0; i < sizeof(buf); i++)
        buf[i] = (char)("kerntune garbage "[i % 17]);
    fp = fopen(path, "w");
    fwrite(buf, 1, sizeof(buf), fp);
    fclose(fp);
    assert_int_equal(kt_storage_open(&st, path, NULL, err, sizeof(err)),
                     KT_EDB);
    assert_non_null(strstr(err, "corrupt or not an SQLite database"));
    assert_non_null(strstr(err, path));
    /* Someone else's SQLite database. */
    snprintf(path, sizeof(path), "%s/foreign.db", f->dir);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "create table t(x)", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(kt_storage_open(&st, path, NULL, err, sizeof(err)),
                     KT_EDB);
    assert_non_null(strstr(err, "not a kerntune database"));
}

static void
test_storage_readonly(void **state)
{
    struct fx *f = *state;
    char path[4300];
    int pfd[2], status;
    pid_t pid;

    assert_int_equal(ts_write(f->st, 0, 0, 0, 5, NULL, 0), 0);
    kt_storage_close(f->st);
    f->st = NULL;
    snprintf(path, sizeof(path), "%s/ro.db", f->dir);
    copy_file(f->db, path);
    assert_int_equal(chmod(path, 0444), 0);
    assert_int_equal(chmod(f->dir, 0755), 0);
    assert_int_equal(pipe(pfd), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct kt_storage *st = NULL;
        char err[512] = "";
        int rc;

        /* root ignores file modes: be somebody else. */
        if (getuid() == 0 && setuid(65534) != 0)
            _exit(3);
        rc = kt_storage_open(&st, path, NULL, err, sizeof(err));
        if (write(pfd[1], err, strlen(err) + 1) < 0)
            _exit(4);
        kt_storage_close(st);
        _exit(rc == -EROFS ? 0 : 1);
    }
    close(pfd[1]);
    {
        char msg[512] = "";
        ssize_t k = read(pfd[0], msg, sizeof(msg) - 1);

        close(pfd[0]);
        assert_true(k > 0);
        msg[k] = '\0';
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("read-only open: status %d, message '%s'", status, msg);
        assert_non_null(strstr(msg, "read-only"));
        assert_non_null(strstr(msg, path));
    }
}

static void
test_storage_locked(void **state)
{
    struct fx *f = *state;
    struct kt_storage_opts o = {.busy_timeout_ms = 100};
    struct kt_storage *st = NULL;
    char err[512];
    sqlite3 *other;
    int rc;

    kt_storage_close(f->st);
    f->st = NULL;
    assert_int_equal(kt_storage_open(&st, f->db, &o, err, sizeof(err)), 0);
    f->st = st;
    assert_int_equal(sqlite3_open(f->db, &other), SQLITE_OK);
    assert_int_equal(sqlite3_exec(other,
                                  "BEGIN IMMEDIATE; insert into "
                                  "jobs(name, created, updated) "
                                  "values('x', 0, 0)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    rc = ts_write(st, 0, 0, 0, 64, err, sizeof(err));
    assert_int_equal(rc, -EBUSY);
    assert_non_null(strstr(err, "locked by another connection"));
    assert_non_null(strstr(err, "retry"));
    assert_int_equal(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(other);
    /* The caller still has the batch: the retry stores it exactly once. */
    assert_int_equal(ts_write(st, 0, 0, 0, 64, err, sizeof(err)), 0);
    assert_int_equal(ts_q1(kt_storage_db(st), "select count(*) from logs"), 64);
}

static void
test_storage_disk_full(void **state)
{
    struct fx *f = *state;
    struct kt_storage *st = NULL;
    char mnt[4300], path[4400], err[512], got[64];
    int rc = 0, batches = 0;

    snprintf(mnt, sizeof(mnt), "%s/tiny", f->dir);
    assert_int_equal(mkdir(mnt, 0700), 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=256k") != 0) {
        fprintf(stderr, "SKIP disk full: cannot mount a tmpfs (%s)\n",
                strerror(errno));
        skip();
    }
    snprintf(path, sizeof(path), "%s/full.db", mnt);
    rc = kt_storage_open(&st, path, NULL, err, sizeof(err));
    assert_int_equal(rc, 0);
    while (batches < 1000) {
        rc = ts_write(st, 0, 0, (int64_t)batches * 64, 64, err, sizeof(err));
        if (rc < 0)
            break;
        batches++;
    }
    assert_int_equal(rc, -ENOSPC);
    assert_non_null(strstr(err, "full"));
    assert_non_null(strstr(err, path));
    assert_true(batches > 0);
    kt_storage_close(st);
    st = NULL;
    /* Every committed batch is still there and the file is sound. */
    rc = kt_storage_open(&st, path, NULL, err, sizeof(err));
    if (rc == 0) {
        assert_int_equal(ts_q1(kt_storage_db(st), "select count(*) from logs"),
                         batches * 64);
        ts_qs(kt_storage_db(st), "PRAGMA integrity_check", got, sizeof(got));
        assert_string_equal(got, "ok");
        kt_storage_close(st);
    } else {
        assert_int_equal(rc, -ENOSPC); /* no room even for the -shm file */
    }
    assert_int_equal(umount(mnt), 0);
}

static void
test_storage_memory(void **state)
{
    struct kt_storage *st = NULL;
    struct kt_resume *r = NULL;
    char err[512];

    (void)state;
    assert_int_equal(kt_storage_open(&st, ":memory:", NULL, err, sizeof(err)),
                     0);
    assert_int_equal(ts_write(st, 0, 1, 0, 64, err, sizeof(err)), 0);
    assert_int_equal(kt_storage_resume(st, TS_TARGET, 0, &r, err, sizeof(err)),
                     0);
    assert_int_equal((int)r->n, 1);
    assert_int_equal(r->e[0].trials, 64);
    kt_resume_free(r);
    kt_storage_close(st);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_storage_seed_queries, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_reader_does_not_block,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_export_import, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_import_bad_lines, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_success_has_no_err_text,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_bad_trial, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_migrate_v1_fixture, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_newer_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_corrupt_and_foreign, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_storage_readonly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_locked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_storage_disk_full, setup, teardown),
        cmocka_unit_test(test_storage_memory),
    };

    kt_log_init(LOG_WARNING);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
