/* storage.c - opening the database (pragmas, schema), error mapping, cached
 * statements, jobs, tasks and the batch writer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/storage_int.h"

static const char *const stmt_sql[KT__ST_COUNT] = {
    [KT__ST_BEGIN] = "BEGIN IMMEDIATE",
    [KT__ST_COMMIT] = "COMMIT",
    [KT__ST_ROLLBACK] = "ROLLBACK",
    [KT__ST_INSERT_LOG] =
        "INSERT INTO logs(task_name, target, workload, config, err_no,"
        " trial_no, cost, err_text, job_id, workload_hash, sched_hash,"
        " costs, worker, build_s, run_s, started, finished, uid)"
        " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,"
        "?17,?18)",
    [KT__ST_INSERT_LOG_IGNORE] =
        "INSERT OR IGNORE INTO logs(task_name, target, workload, config,"
        " err_no, trial_no, cost, err_text, job_id, workload_hash,"
        " sched_hash, costs, worker, build_s, run_s, started, finished, uid)"
        " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,"
        "?17,?18)",
    [KT__ST_INSERT_KV] =
        "INSERT INTO kvs(log_id, log_workload, k, v) VALUES(?1,?2,?3,?4)",
    [KT__ST_JOB_FIND] = "SELECT id FROM jobs WHERE name=?1",
    [KT__ST_JOB_INSERT] =
        "INSERT INTO jobs(name, model, target, created, updated)"
        " VALUES(?1,?2,?3,?4,?4)",
    [KT__ST_JOB_STATE] = "UPDATE jobs SET state=?2, updated=?3 WHERE id=?1",
    [KT__ST_TASK_PUT] =
        "INSERT INTO tasks(job_id, task_name, target, workload,"
        " workload_hash, compute, shapes, weight, flops)"
        " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9)"
        " ON CONFLICT(job_id, target, workload_hash) DO UPDATE SET"
        " task_name=excluded.task_name, workload=excluded.workload,"
        " compute=excluded.compute, shapes=excluded.shapes,"
        " weight=excluded.weight, flops=excluded.flops",
    [KT__ST_RESUME_COUNTS] =
        "SELECT workload_hash, count(*), sum(err_no=0), sum(job_id=?2),"
        " max(CASE WHEN job_id=?2 THEN trial_no END), workload FROM logs"
        " WHERE +target=?1 GROUP BY workload_hash",
    /* The bare columns come from the row holding min(cost).  Resume reads
     * scan the table in id order (+target keeps the index out): sequential
     * pages beat an index walk with a row lookup per trial. */
    [KT__ST_RESUME_BEST] =
        "SELECT workload_hash, min(cost), config, sched_hash FROM logs"
        " WHERE +target=?1 AND err_no=0 GROUP BY workload_hash",
    [KT__ST_MEASURED] =
        "SELECT sched_hash FROM logs WHERE target=?1 AND workload_hash=?2",
    [KT__ST_HISTORY_ONE] =
        "SELECT workload_hash, workload, config, cost, err_no FROM logs"
        " WHERE target=?1 AND workload_hash=?2 ORDER BY id",
    /* +target: scan the table in id order rather than sort. */
    [KT__ST_HISTORY_ALL] =
        "SELECT workload_hash, workload, config, cost, err_no FROM logs"
        " WHERE +target=?1 ORDER BY id",
    [KT__ST_HISTORY_ONE_LIMIT] =
        "SELECT * FROM (SELECT id, workload_hash, workload, config, cost,"
        " err_no FROM logs WHERE target=?1 AND workload_hash=?2"
        " ORDER BY id DESC LIMIT ?3) ORDER BY id",
    [KT__ST_HISTORY_ALL_LIMIT] =
        "SELECT * FROM (SELECT id, workload_hash, workload, config, cost,"
        " err_no FROM logs WHERE +target=?1 ORDER BY id DESC LIMIT ?3)"
        " ORDER BY id",
    [KT__ST_TARGETS] = "SELECT DISTINCT target FROM logs ORDER BY target",
};

int
kt__dberr(sqlite3 *db, int rc, const char *path, int busy_ms, const char *what,
          char *err, size_t errlen)
{
    const char *msg = db != NULL ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    int sys = db != NULL ? sqlite3_system_errno(db) : 0;

    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return kt_seterr(err, errlen, -EBUSY,
                         "storage: %s: %s: database is locked by another "
                         "connection (waited %d ms): %s; nothing was "
                         "written, retry later",
                         path, what, busy_ms, msg);
    case SQLITE_FULL:
        return kt_seterr(err, errlen, -ENOSPC,
                         "storage: %s: %s: disk or database is full: %s", path,
                         what, msg);
    case SQLITE_READONLY:
        return kt_seterr(err, errlen, -EROFS,
                         "storage: %s: %s: the database is read-only (check "
                         "the permissions of the file, its -wal/-shm files "
                         "and its directory): %s",
                         path, what, msg);
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
        return kt_seterr(err, errlen, KT_EDB,
                         "storage: %s: %s: the file is corrupt or not an "
                         "SQLite database: %s",
                         path, what, msg);
    case SQLITE_IOERR:
        if (sys == ENOSPC || sys == EDQUOT)
            return kt_seterr(err, errlen, -ENOSPC,
                             "storage: %s: %s: disk is full: %s (%s)", path,
                             what, msg, strerror(sys));
        if (sys == EROFS || sys == EACCES || sys == EPERM)
            return kt_seterr(err, errlen, -EROFS,
                             "storage: %s: %s: cannot write: %s (%s)", path,
                             what, msg, strerror(sys));
        return kt_seterr(err, errlen, KT_EIO,
                         "storage: %s: %s: I/O error: %s (%s)", path, what, msg,
                         sys != 0 ? strerror(sys) : "no errno");
    case SQLITE_CANTOPEN:
        return kt_seterr(err, errlen, KT_EDB,
                         "storage: %s: %s: cannot open the file: %s (%s)", path,
                         what, msg, sys != 0 ? strerror(sys) : "no errno");
    default:
        return kt_seterr(err, errlen, KT_EDB, "storage: %s: %s: %s", path, what,
                         msg);
    }
}

int
kt__exec(sqlite3 *db, const char *path, const char *sql, char *err,
         size_t errlen)
{
    int rc;

    rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        return 0;
    return kt__dberr(db, rc, path, 0, "executing schema statements", err,
                     errlen);
}

sqlite3_stmt *
kt__stmt(struct kt_storage *st, enum kt__stmt i, char *err, size_t errlen)
{
    int rc;

    if (st->st[i] != NULL) {
        sqlite3_reset(st->st[i]);
        sqlite3_clear_bindings(st->st[i]);
        return st->st[i];
    }
    rc = sqlite3_prepare_v3(st->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                            &st->st[i], NULL);
    if (rc != SQLITE_OK) {
        kt__dberr(st->db, rc, st->path, st->busy_timeout_ms,
                  "preparing a statement", err, errlen);
        return NULL;
    }
    return st->st[i];
}

/* Runs a pragma and returns its first text column in out (may be NULL). */
static int
pragma(struct kt_storage *st, const char *sql, char *out, size_t outlen,
       char *err, size_t errlen)
{
    sqlite3_stmt *s = NULL;
    int rc;

    rc = sqlite3_prepare_v2(st->db, sql, -1, &s, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW && out != NULL)
            snprintf(out, outlen, "%s",
                     (const char *)sqlite3_column_text(s, 0));
        if (rc == SQLITE_ROW || rc == SQLITE_DONE)
            rc = SQLITE_OK;
    }
    if (rc != SQLITE_OK)
        rc = kt__dberr(st->db, rc, st->path, st->busy_timeout_ms, sql, err,
                       errlen);
    sqlite3_finalize(s);
    return rc;
}

int
kt_storage_open(struct kt_storage **out, const char *path,
                const struct kt_storage_opts *opts, char *err, size_t errlen)
{
    struct kt_storage *st;
    char mode[32] = "";
    int rc, sync = 1, mem;

    *out = NULL;
    if (path == NULL || path[0] == '\0')
        return kt_seterr(err, errlen, KT_EINVAL, "storage: empty path");
    st = kt_xcalloc(1, sizeof(*st));
    st->path = kt_xstrdup(path);
    kt_buf_init(&st->scratch);
    st->busy_timeout_ms = 5000;
    if (opts != NULL && opts->busy_timeout_ms > 0)
        st->busy_timeout_ms = opts->busy_timeout_ms;
    if (opts != NULL && opts->synchronous == 2)
        sync = 2;
    rc = sqlite3_open_v2(path, &st->db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                             SQLITE_OPEN_NOMUTEX,
                         NULL);
    if (rc != SQLITE_OK) {
        rc = kt__dberr(st->db, rc, path, 0, "opening", err, errlen);
        goto fail;
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, st->busy_timeout_ms);
    if (sqlite3_db_readonly(st->db, "main") == 1) {
        rc = kt_seterr(err, errlen, -EROFS,
                       "storage: %s: the file is read-only (SQLite could "
                       "only open it for reading); kerntune must write it",
                       path);
        goto fail;
    }
    rc = kt__register_functions(st->db);
    if (rc != SQLITE_OK) {
        rc = kt__dberr(st->db, rc, path, 0, "registering functions", err,
                       errlen);
        goto fail;
    }
    rc = pragma(st, "PRAGMA journal_mode=WAL", mode, sizeof(mode), err, errlen);
    if (rc < 0)
        goto fail;
    mem = strcmp(path, ":memory:") == 0;
    if (strcmp(mode, mem ? "memory" : "wal") != 0) {
        rc = kt_seterr(err, errlen, KT_EDB,
                       "storage: %s: cannot switch to WAL mode (journal mode "
                       "is '%s')",
                       path, mode);
        goto fail;
    }
    rc = pragma(st,
                sync == 2 ? "PRAGMA synchronous=FULL"
                          : "PRAGMA synchronous=NORMAL",
                NULL, 0, err, errlen);
    /* A 32 MB page cache; checkpoints run on their own thread (below). */
    if (rc == 0)
        rc = pragma(st, "PRAGMA cache_size=-32768", NULL, 0, err, errlen);
    if (rc < 0)
        goto fail;
    rc = kt__schema_upgrade(st->db, path, &st->opened_version, err, errlen);
    if (rc < 0)
        goto fail;
    rc = pragma(st, "SELECT v FROM meta WHERE k='instance'", st->instance,
                sizeof(st->instance), err, errlen);
    if (rc < 0)
        goto fail;
    if (strlen(st->instance) != 16) {
        rc = kt_seterr(err, errlen, KT_EDB,
                       "storage: %s: meta table has no 16-digit instance id",
                       path);
        goto fail;
    }
    if (!mem) {
        rc = kt__ckpt_start(st, err, errlen);
        if (rc < 0)
            goto fail;
    }
    *out = st;
    return 0;
fail:
    kt_storage_close(st);
    return rc;
}

void
kt_storage_close(struct kt_storage *st)
{
    int i;

    if (st == NULL)
        return;
    kt__ckpt_stop(st);
    for (i = 0; i < KT__ST_COUNT; i++)
        sqlite3_finalize(st->st[i]);
    if (st->db != NULL && sqlite3_close(st->db) != SQLITE_OK)
        log_warnx("storage: %s: close: %s", st->path, sqlite3_errmsg(st->db));
    kt_buf_free(&st->scratch);
    free(st->path);
    free(st);
}

int
kt_storage_opened_version(const struct kt_storage *st)
{
    return st->opened_version;
}

struct sqlite3 *
kt_storage_db(struct kt_storage *st)
{
    return st->db;
}

/* Steps a write statement to SQLITE_DONE. */
static int
step_done(struct kt_storage *st, sqlite3_stmt *s, const char *what, char *err,
          size_t errlen)
{
    int rc = sqlite3_step(s);

    if (rc == SQLITE_DONE || rc == SQLITE_ROW) {
        sqlite3_reset(s);
        return 0;
    }
    rc = kt__dberr(st->db, rc, st->path, st->busy_timeout_ms, what, err,
                   errlen);
    sqlite3_reset(s);
    return rc;
}

int
kt__begin(struct kt_storage *st, char *err, size_t errlen)
{
    sqlite3_stmt *s = kt__stmt(st, KT__ST_BEGIN, err, errlen);

    if (s == NULL)
        return KT_EDB;
    return step_done(st, s, "starting a write transaction", err, errlen);
}

int
kt__commit(struct kt_storage *st, char *err, size_t errlen)
{
    sqlite3_stmt *s = kt__stmt(st, KT__ST_COMMIT, err, errlen);

    if (s == NULL)
        return KT_EDB;
    return step_done(st, s, "committing", err, errlen);
}

void
kt__rollback(struct kt_storage *st)
{
    sqlite3_stmt *s;

    if (sqlite3_get_autocommit(st->db))
        return;
    s = kt__stmt(st, KT__ST_ROLLBACK, NULL, 0);
    if (s == NULL || sqlite3_step(s) != SQLITE_DONE) {
        if (s != NULL)
            sqlite3_reset(s);
        /* A statement may still be active; the plain form always works. */
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        return;
    }
    sqlite3_reset(s);
}

int
kt_storage_job_open(struct kt_storage *st, const char *name, const char *model,
                    const char *target, int64_t *id, char *err, size_t errlen)
{
    sqlite3_stmt *s;
    int rc;

    if (name == NULL || name[0] == '\0')
        return kt_seterr(err, errlen, KT_EINVAL, "storage: %s: empty job name",
                         st->path);
    s = kt__stmt(st, KT__ST_JOB_FIND, err, errlen);
    if (s == NULL)
        return KT_EDB;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *id = sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
        return 0;
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return kt__dberr(st->db, rc, st->path, st->busy_timeout_ms,
                         "looking up a job", err, errlen);
    s = kt__stmt(st, KT__ST_JOB_INSERT, err, errlen);
    if (s == NULL)
        return KT_EDB;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, model, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, target, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 4, kt_wall_now());
    rc = step_done(st, s, "creating a job", err, errlen);
    if (rc < 0)
        return rc;
    *id = sqlite3_last_insert_rowid(st->db);
    return 0;
}

int
kt_storage_job_set_state(struct kt_storage *st, int64_t id, const char *state,
                         char *err, size_t errlen)
{
    sqlite3_stmt *s = kt__stmt(st, KT__ST_JOB_STATE, err, errlen);
    int rc;

    if (s == NULL)
        return KT_EDB;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_text(s, 2, state, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 3, kt_wall_now());
    rc = step_done(st, s, "updating a job", err, errlen);
    if (rc == 0 && sqlite3_changes(st->db) == 0)
        return kt_seterr(err, errlen, KT_ENOENT, "storage: %s: no job id %lld",
                         st->path, (long long)id);
    return rc;
}

int
kt_storage_task_put(struct kt_storage *st, const struct kt_task_info *t,
                    char *err, size_t errlen)
{
    sqlite3_stmt *s;
    char hash[17];
    const char *wh = t->workload_hash;

    if (t->task_name == NULL || t->target == NULL || t->workload == NULL)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "storage: %s: task needs task_name, target and "
                         "workload",
                         st->path);
    if (wh == NULL) {
        kt_hash_hex(kt_hash64(t->workload, strlen(t->workload)), hash);
        wh = hash;
    }
    s = kt__stmt(st, KT__ST_TASK_PUT, err, errlen);
    if (s == NULL)
        return KT_EDB;
    sqlite3_bind_int64(s, 1, t->job_id);
    sqlite3_bind_text(s, 2, t->task_name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, t->target, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, t->workload, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, wh, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, t->compute, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 7, t->shapes, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 8, t->weight);
    sqlite3_bind_double(s, 9, t->flops);
    return step_done(st, s, "writing a task", err, errlen);
}

int
kt__trial_check(const struct kt_trial *t, size_t idx, char *err, size_t errlen)
{
    const char *miss = NULL;

    if (t->task_name == NULL)
        miss = "task_name";
    else if (t->target == NULL)
        miss = "target";
    else if (t->workload == NULL)
        miss = "workload";
    else if (t->config == NULL)
        miss = "config";
    if (miss != NULL)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "storage: trial %zu of the batch has no %s", idx,
                         miss);
    if (t->result.err_no < 0 || t->result.err_no >= KT_MERR_COUNT)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "storage: trial %zu of the batch has err_no %d "
                         "(expected 0..%d)",
                         idx, t->result.err_no, KT_MERR_COUNT - 1);
    if (t->result.ncosts < 0 || t->result.ncosts > KT_MAX_REPEAT ||
        t->result.nkvs < 0 || (t->result.nkvs > 0 && t->result.kvs == NULL))
        return kt_seterr(err, errlen, KT_EINVAL,
                         "storage: trial %zu of the batch has a bad costs "
                         "or kvs array",
                         idx);
    return 0;
}

int
kt__insert_trial(struct kt_storage *st, const struct kt_trial *t,
                 const char *uid, int64_t *id, int *added, char *err,
                 size_t errlen)
{
    const struct kt_result *r = &t->result;
    sqlite3_stmt *s;
    char wh[17], sh[17];
    const char *whp = t->workload_hash, *shp = t->sched_hash;
    int rc, i;

    *added = 0;
    if (whp == NULL) {
        kt_hash_hex(kt_hash64(t->workload, strlen(t->workload)), wh);
        whp = wh;
    }
    if (shp == NULL) {
        kt_hash_hex(kt_hash64(t->config, strlen(t->config)), sh);
        shp = sh;
    }
    s = kt__stmt(st, uid != NULL ? KT__ST_INSERT_LOG_IGNORE : KT__ST_INSERT_LOG,
                 err, errlen);
    if (s == NULL)
        return KT_EDB;
    sqlite3_bind_text(s, 1, t->task_name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, t->target, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, t->workload, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, t->config, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 5, r->err_no);
    sqlite3_bind_int64(s, 6, t->trial_no);
    sqlite3_bind_double(s, 7, r->err_no == 0 ? r->cost : 0.0);
    /* success has no error text, however the result spells it */
    sqlite3_bind_text(s, 8, r->err_no != 0 ? r->err_text : NULL, -1,
                      SQLITE_STATIC);
    if (t->job_id > 0)
        sqlite3_bind_int64(s, 9, t->job_id);
    sqlite3_bind_text(s, 10, whp, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 11, shp, -1, SQLITE_STATIC);
    kt_buf_reset(&st->scratch);
    if (r->ncosts > 0) {
        /* Nine significant digits: far below timer noise, and %.17g would
         * cost a third of the insert time.  logs.cost itself is exact. */
        kt_buf_putc(&st->scratch, '[');
        for (i = 0; i < r->ncosts; i++)
            kt_buf_printf(&st->scratch, "%s%.9g", i > 0 ? "," : "",
                          r->costs[i]);
        kt_buf_putc(&st->scratch, ']');
        sqlite3_bind_text(s, 12, st->scratch.p, (int)st->scratch.len,
                          SQLITE_STATIC);
    }
    sqlite3_bind_text(s, 13, r->worker, -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 14, r->build_s);
    sqlite3_bind_double(s, 15, r->run_s);
    sqlite3_bind_double(s, 16, t->started);
    sqlite3_bind_double(s, 17, t->finished);
    sqlite3_bind_text(s, 18, uid, -1, SQLITE_STATIC);
    rc = step_done(st, s, "writing a trial", err, errlen);
    if (rc < 0)
        return rc;
    if (sqlite3_changes(st->db) == 0)
        return 0; /* duplicate uid, ignored */
    *added = 1;
    *id = sqlite3_last_insert_rowid(st->db);
    if (r->nkvs == 0)
        return 0;
    s = kt__stmt(st, KT__ST_INSERT_KV, err, errlen);
    if (s == NULL)
        return KT_EDB;
    for (i = 0; i < r->nkvs; i++) {
        sqlite3_bind_int64(s, 1, *id);
        sqlite3_bind_text(s, 2, t->workload, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, r->kvs[i].k != NULL ? r->kvs[i].k : "", -1,
                          SQLITE_STATIC);
        sqlite3_bind_text(s, 4, r->kvs[i].v, -1, SQLITE_STATIC);
        rc = step_done(st, s, "writing a trial's kvs", err, errlen);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int
kt_storage_write_batch(struct kt_storage *st, const struct kt_trial *t,
                       size_t n, int64_t *first_id, char *err, size_t errlen)
{
    int64_t id = 0;
    size_t i;
    int rc, added;

    for (i = 0; i < n; i++) {
        rc = kt__trial_check(&t[i], i, err, errlen);
        if (rc < 0)
            return rc;
    }
    if (n == 0)
        return 0;
    rc = kt__begin(st, err, errlen);
    if (rc < 0)
        return rc;
    for (i = 0; i < n; i++) {
        rc = kt__insert_trial(st, &t[i], NULL, &id, &added, err, errlen);
        if (rc < 0)
            goto fail;
        if (i == 0 && first_id != NULL)
            *first_id = id;
    }
    rc = kt__commit(st, err, errlen);
    if (rc < 0)
        goto fail;
    return 0;
fail:
    kt__rollback(st);
    return rc;
}
