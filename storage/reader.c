/* reader.c - read-only access to a tuning database (see storage.h). */
#include "storage/storage.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct kt_storage_reader {
    sqlite3 *db;
    char *path;
};

static int
reader_err(struct kt_storage_reader *r, char *err, size_t errlen)
{
    return kt_seterr(err, errlen, KT_EDB, "%s: %s", r->path,
                     sqlite3_errmsg(r->db));
}

int
kt_storage_reader_open(const char *path, struct kt_storage_reader **out,
                       char *err, size_t errlen)
{
    struct kt_storage_reader *r;
    sqlite3_stmt *q = NULL;
    int version = -1;

    *out = NULL;
    if (access(path, F_OK) != 0)
        return kt_seterr(err, errlen, -ENOENT, "%s: no such database", path);
    r = kt_xcalloc(1, sizeof(*r));
    r->path = kt_xstrdup(path);
    if (sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        sqlite3_busy_timeout(r->db, 5000) != SQLITE_OK ||
        sqlite3_prepare_v2(r->db, "PRAGMA user_version", -1, &q, NULL) !=
            SQLITE_OK) {
        int rc = r->db
                     ? reader_err(r, err, errlen)
                     : kt_seterr(err, errlen, KT_EDB, "%s: cannot open", path);
        kt_storage_reader_close(r);
        return rc;
    }
    if (sqlite3_step(q) == SQLITE_ROW)
        version = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    if (version != KT_STORAGE_SCHEMA_VERSION) {
        kt_storage_reader_close(r);
        return kt_seterr(
            err, errlen, KT_EDB,
            "%s: not a kerntune database of schema version %d (found %d; an "
            "older one is upgraded by any command that writes it, e.g. "
            "`kerntune import --db %s /dev/null`)",
            path, KT_STORAGE_SCHEMA_VERSION, version, path);
    }
    *out = r;
    return KT_OK;
}

void
kt_storage_reader_close(struct kt_storage_reader *r)
{
    if (r == NULL)
        return;
    sqlite3_close(r->db);
    free(r->path);
    free(r);
}

void
kt_best_trial_free(struct kt_best_trial *b)
{
    if (b == NULL)
        return;
    free(b->config);
    memset(b, 0, sizeof(*b));
}

int
kt_storage_reader_best(struct kt_storage_reader *r, const char *target,
                       const char *workload_hash, struct kt_best_trial *out,
                       char *err, size_t errlen)
{
    static const char sql[] =
        "SELECT id, cost, config FROM logs WHERE workload_hash = ?1 AND "
        "target = ?2 AND err_no = 0 AND cost > 0 ORDER BY cost, id LIMIT 1";
    sqlite3_stmt *q = NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    if (sqlite3_prepare_v2(r->db, sql, -1, &q, NULL) != SQLITE_OK)
        return reader_err(r, err, errlen);
    sqlite3_bind_text(q, 1, workload_hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, target, -1, SQLITE_STATIC);
    rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        out->id = sqlite3_column_int64(q, 0);
        out->cost = sqlite3_column_double(q, 1);
        out->config = kt_xstrdup((const char *)sqlite3_column_text(q, 2));
        rc = KT_OK;
    } else if (rc == SQLITE_DONE) {
        rc = KT_ENOENT;
    } else {
        rc = reader_err(r, err, errlen);
    }
    sqlite3_finalize(q);
    return rc;
}

int
kt_storage_reader_targets(struct kt_storage_reader *r,
                          const char *workload_hash, struct kt_buf *b,
                          char *err, size_t errlen)
{
    static const char sql[] = "SELECT DISTINCT target FROM logs WHERE "
                              "workload_hash = ?1 ORDER BY target";
    sqlite3_stmt *q = NULL;
    int rc;

    if (sqlite3_prepare_v2(r->db, sql, -1, &q, NULL) != SQLITE_OK)
        return reader_err(r, err, errlen);
    sqlite3_bind_text(q, 1, workload_hash, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW)
        kt_buf_printf(b, "%s\n", (const char *)sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    return rc == SQLITE_DONE ? KT_OK : reader_err(r, err, errlen);
}
