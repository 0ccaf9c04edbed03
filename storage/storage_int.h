/* storage_int.h - private to storage/: the connection object, the cached
 * statements and helpers shared by the storage sources. */
#ifndef KT_STORAGE_INT_H
#define KT_STORAGE_INT_H

#include <sqlite3.h>

#include "common/common.h"
#include "storage/storage.h"

/* Cached prepared statements, prepared on first use and reused. */
enum kt__stmt {
    KT__ST_BEGIN,
    KT__ST_COMMIT,
    KT__ST_ROLLBACK,
    KT__ST_INSERT_LOG,
    KT__ST_INSERT_LOG_IGNORE,
    KT__ST_INSERT_KV,
    KT__ST_JOB_FIND,
    KT__ST_JOB_INSERT,
    KT__ST_JOB_STATE,
    KT__ST_TASK_PUT,
    KT__ST_RESUME_COUNTS,
    KT__ST_RESUME_BEST,
    KT__ST_MEASURED,
    KT__ST_HISTORY_ONE,
    KT__ST_HISTORY_ALL,
    KT__ST_HISTORY_ONE_LIMIT,
    KT__ST_HISTORY_ALL_LIMIT,
    KT__ST_TARGETS,
    KT__ST_COUNT
};

struct kt_storage {
    sqlite3 *db;
    char *path;
    int opened_version;
    int busy_timeout_ms;
    char instance[17]; /* meta 'instance': prefix of exported uids */
    sqlite3_stmt *st[KT__ST_COUNT];
    struct kt_buf scratch; /* reused for the costs JSON */
    struct kt__ckpt *ckpt; /* background checkpointer */
};

/* Returns the cached statement i (preparing it on first use) or NULL with
 * err filled. */
sqlite3_stmt *kt__stmt(struct kt_storage *st, enum kt__stmt i, char *err,
                       size_t errlen);

/* Maps a failed SQLite call to a kt error code (-EBUSY, -ENOSPC, -EROFS,
 * KT_EIO or KT_EDB) and writes "storage: PATH: WHAT: detail" to err. */
int kt__dberr(sqlite3 *db, int rc, const char *path, int busy_ms,
              const char *what, char *err, size_t errlen);

/* Runs a statement list; error mapped as kt__dberr. */
int kt__exec(sqlite3 *db, const char *path, const char *sql, char *err,
             size_t errlen);

/* Reads the schema version (0 for an empty file), refuses newer ones and
 * applies forward migrations up to KT_STORAGE_SCHEMA_VERSION. */
int kt__schema_upgrade(sqlite3 *db, const char *path, int *found, char *err,
                       size_t errlen);
/* Registers the kt_hash(text) SQL function (16 hex digits of kt_hash64). */
int kt__register_functions(sqlite3 *db);

/* Inserts one trial (no transaction handling).  uid is NULL for a trial
 * measured here, else the imported uid: a trial whose uid is present is
 * then skipped and *added is 0. */
int kt__insert_trial(struct kt_storage *st, const struct kt_trial *t,
                     const char *uid, int64_t *id, int *added, char *err,
                     size_t errlen);
/* Checks the required fields of t; KT_EINVAL with the field named. */
int kt__trial_check(const struct kt_trial *t, size_t idx, char *err,
                    size_t errlen);
/* Starts / stops the background WAL checkpointer (checkpoint.c); stop
 * accepts a storage without one. */
int kt__ckpt_start(struct kt_storage *st, char *err, size_t errlen);
void kt__ckpt_stop(struct kt_storage *st);

/* BEGIN IMMEDIATE / COMMIT / ROLLBACK through cached statements. */
int kt__begin(struct kt_storage *st, char *err, size_t errlen);
int kt__commit(struct kt_storage *st, char *err, size_t errlen);
void kt__rollback(struct kt_storage *st);

#endif /* KT_STORAGE_INT_H */
