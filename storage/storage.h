/* storage.h - durable store for every measured trial (SQLite, WAL).
 *
 * The schema keeps its first names (docs/design.md 4: logs, kvs, best_logs) so
 * the SQL recipes in docs/sql.md run verbatim against a live database, and
 * adds jobs, tasks, per-trial detail columns and a schema version with
 * forward migrations.  One struct kt_storage owns one sqlite3 connection
 * opened with SQLITE_OPEN_NOMUTEX: use it from one thread only (the daemon's
 * loop thread).  Every write of a measured batch is one transaction that is
 * committed before the call returns, so a kill -9 after a successful return
 * loses nothing.
 *
 * Error codes: 0 on success; -EBUSY when another connection held the write
 * lock for longer than busy_timeout (nothing was written, retry the same
 * call); -ENOSPC disk or database full; -EROFS the file or its directory
 * cannot be written; KT_EDB for a corrupt or foreign file, a too-new schema
 * or any other refusal; KT_EINVAL for a bad argument; KT_EPARSE for a bad
 * import line.  The message in err names the database file (and the line for
 * imports). */
#ifndef KT_STORAGE_H
#define KT_STORAGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/common.h"

/* The schema version this build writes; older files are upgraded in place
 * when opened, newer ones are refused. */
#define KT_STORAGE_SCHEMA_VERSION 2

/* logs.err_no holds enum kt_measure_errno (common/common.h). */

struct kt_storage; /* opaque; one thread only */

struct kt_storage_opts {
    int busy_timeout_ms; /* wait for another writer; 0 means 5000 */
    int synchronous;     /* 1 = NORMAL (survives a process kill, the
                          * default), 2 = FULL (also survives power loss) */
};

/* One measured trial: the measurement's result (common/common.h) with
 * what it measured.  A plain value, every pointer borrowed by the call that
 * takes it.  Optional strings may be NULL. */
struct kt_trial {
    int64_t job_id;            /* from kt_storage_job_open; 0 = no job */
    const char *task_name;     /* e.g. "conv2d_nchw" */
    const char *target;        /* target name / compiler line */
    const char *workload;      /* canonical workload key (kt_dag.key) */
    const char *workload_hash; /* 16 hex digits; NULL = hash of workload */
    const char *config;        /* canonical schedule JSON */
    const char *sched_hash;    /* 16 hex digits; NULL = hash of config */
    int64_t trial_no;          /* per workload within the job */
    struct kt_result result;   /* err_text stored as NULL when err_no == 0,
                                  cost as 0 when it is not; worker NULL = "" */
    double started, finished;  /* wall-clock Unix seconds */
};

/* A tuning task as extracted from a model (written once per job). */
struct kt_task_info {
    int64_t job_id;
    const char *task_name;
    const char *target;
    const char *workload;
    const char *workload_hash; /* NULL = hash of workload */
    const char *compute;       /* the compute definition text */
    const char *shapes;        /* shapes as JSON text */
    double weight;             /* times the task occurs in the model */
    double flops;              /* per call */
};

/* Opens or creates the database at path (WAL mode, busy_timeout), upgrades
 * an older schema, refuses a newer one.  ":memory:" gives a private
 * in-memory database (for tests of other modules).  opts may be NULL for defaults.
 * Caller closes *out with kt_storage_close. */
int kt_storage_open(struct kt_storage **out, const char *path,
                    const struct kt_storage_opts *opts, char *err,
                    size_t errlen);
/* Finalizes statements and closes; NULL is a no-op. */
void kt_storage_close(struct kt_storage *st);
/* Schema version found in the file when it was opened (before upgrade). */
int kt_storage_opened_version(const struct kt_storage *st);
/* The database's sqlite3 handle (borrowed; for tests and ad hoc queries
 * on the owning thread). */
struct sqlite3 *kt_storage_db(struct kt_storage *st);

/* Creates a new, empty database at path with an older schema version
 * (1..KT_STORAGE_SCHEMA_VERSION), exactly as that version's code did; used to
 * build migration fixtures.  Fails if path exists. */
int kt_storage_create_version(const char *path, int version, char *err,
                              size_t errlen);

/* Finds the job called name or creates it (model, target copied); *id gets
 * its id. */
int kt_storage_job_open(struct kt_storage *st, const char *name,
                        const char *model, const char *target, int64_t *id,
                        char *err, size_t errlen);
/* Records a job's state text ("running", "done", ...). */
int kt_storage_job_set_state(struct kt_storage *st, int64_t id,
                             const char *state, char *err, size_t errlen);
/* Inserts or replaces the task of (job, target, workload); copies t. */
int kt_storage_task_put(struct kt_storage *st, const struct kt_task_info *t,
                        char *err, size_t errlen);

/* Writes n trials in one transaction, committed before it returns.  On any
 * error nothing of the batch is stored and the caller still owns it, so the
 * same call can be retried (-EBUSY) or the error surfaced.  Rows get ids in
 * order; *first_id (may be NULL) receives the first. */
int kt_storage_write_batch(struct kt_storage *st, const struct kt_trial *t,
                           size_t n, int64_t *first_id, char *err,
                           size_t errlen);

/* ---- Resume ----------------------------------------------------------- */

/* Per workload state for one target, and for one job's trial numbering. */
struct kt_resume_entry {
    char workload_hash[17];
    char *workload;           /* owned by the kt_resume */
    int64_t trials;           /* all trials of this workload and target */
    int64_t ok_trials;        /* err_no = 0 */
    int64_t job_trials;       /* trials of the asked job (0 if job_id = 0) */
    int64_t job_max_trial_no; /* -1 when the job has none */
    double best_cost;         /* seconds; 0 when there is no successful trial */
    char *best_config;        /* NULL when there is none; owned */
    char best_sched_hash[17];
};
struct kt_resume {
    size_t n;
    struct kt_resume_entry *e; /* sorted by workload_hash */
};
/* Fills *out for every workload measured on target (job_id 0 = no job
 * figures).  Caller frees with kt_resume_free. */
int kt_storage_resume(struct kt_storage *st, const char *target, int64_t job_id,
                      struct kt_resume **out, char *err, size_t errlen);
void kt_resume_free(struct kt_resume *r);
/* Entry for workload_hash, or NULL. Borrowed from r. */
const struct kt_resume_entry *kt_resume_find(const struct kt_resume *r,
                                             const char *workload_hash);

/* The set of schedule hashes already measured for (target, workload_hash):
 * a sorted, duplicate-free array of the 16-hex hashes as numbers.  Caller
 * frees *hashes with free(). */
int kt_storage_measured(struct kt_storage *st, const char *target,
                        const char *workload_hash, uint64_t **hashes, size_t *n,
                        char *err, size_t errlen);
/* 1 if hex (16 hex digits) is in the sorted set, else 0. */
int kt_measured_contains(const uint64_t *hashes, size_t n, const char *hex);

/* One history row for cost-model training; all pointers borrowed and valid
 * only during the callback. */
struct kt_history_row {
    const char *workload_hash;
    const char *workload;
    const char *config;
    double cost;
    int err_no;
};
/* Return nonzero from the callback to stop early (that value is returned). */
typedef int (*kt_history_cb)(void *arg, const struct kt_history_row *row);
/* Calls cb for each trial of target, oldest first: of one workload, or of
 * all workloads when workload_hash is NULL (warm start from other jobs'
 * trials).  limit 0 = all; otherwise the newest 'limit' rows. */
int kt_storage_history(struct kt_storage *st, const char *target,
                       const char *workload_hash, size_t limit,
                       kt_history_cb cb, void *arg, char *err, size_t errlen);
/* Every target that stored trials were tuned for, one per line into b
 * (the warm start looks for siblings of its own: config.h
 * kt_target_siblings). */
int kt_storage_targets(struct kt_storage *st, struct kt_buf *b, char *err,
                       size_t errlen);

/* ---- Records exchange (JSON lines) -------------------------------------- */

/* Writes every trial (of target, or all when NULL) as one self-describing
 * JSON object per line; *count (may be NULL) gets the number written. */
int kt_storage_export(struct kt_storage *st, FILE *out, const char *target,
                      size_t *count, char *err, size_t errlen);
/* Reads JSON lines written by kt_storage_export; trials already present
 * are skipped (same uid, or a uid made by this file's own export: trials
 * measured here export as "INSTANCE-ID"), so importing twice adds nothing.  name is used in
 * messages ("name:LINE: ...").  Stops at the first bad line with KT_EPARSE;
 * lines before it stay imported. */
int kt_storage_import(struct kt_storage *st, FILE *in, const char *name,
                      size_t *added, size_t *skipped, char *err, size_t errlen);

/* ---- Read-only access (storage/reader.c) ------------------------------
 * For tools that run beside or without the daemon (`kerntune compile`):
 * the file is opened read-only, never created or upgraded, and may be in
 * use by a running daemon (WAL readers do not block it). */
struct kt_storage_reader; /* opaque; one thread only */

/* The fastest successful trial of one workload on one target. */
struct kt_best_trial {
    int64_t id;
    double cost;  /* seconds */
    char *config; /* canonical schedule JSON, owned */
};

/* Opens the database at path.  -ENOENT when there is no such file,
 * KT_EDB when it is not a kerntune database of this schema version. */
int kt_storage_reader_open(const char *path, struct kt_storage_reader **out,
                           char *err, size_t errlen);
void kt_storage_reader_close(struct kt_storage_reader *r); /* NULL: no-op */
/* *out gets the best successful trial of (target, workload_hash);
 * KT_ENOENT (and *out zeroed) when there is none.  Free with
 * kt_best_trial_free. */
int kt_storage_reader_best(struct kt_storage_reader *r, const char *target,
                           const char *workload_hash, struct kt_best_trial *out,
                           char *err, size_t errlen);
void kt_best_trial_free(struct kt_best_trial *b);
/* The targets with at least one trial of workload_hash, one per line in b
 * (nothing when there are none): for messages about a target mismatch. */
int kt_storage_reader_targets(struct kt_storage_reader *r,
                              const char *workload_hash, struct kt_buf *b,
                              char *err, size_t errlen);

#endif /* KT_STORAGE_H */
