/* schema.c - the DDL of every schema version and the forward migrations,
 * keyed by PRAGMA user_version (mirrored in the schema_version table for
 * people reading the file). */
#include <string.h>
#include <unistd.h>

#include "storage/storage_int.h"

/* Version 1: the original tables (docs/design.md section 4).  Kept verbatim:
 * kt_storage_create_version(1) uses it to rebuild the migration fixture. */
static const char schema_v1[] =
    "CREATE TABLE logs(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  task_name TEXT NOT NULL,\n"
    "  target TEXT NOT NULL,\n"
    "  workload TEXT NOT NULL,\n"
    "  config TEXT NOT NULL,\n"
    "  err_no INTEGER NOT NULL,\n"
    "  trial_no INTEGER NOT NULL,\n"
    "  cost REAL NOT NULL,\n"
    "  err_text TEXT);\n"
    "CREATE TABLE kvs(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  log_id INTEGER NOT NULL REFERENCES logs(id),\n"
    "  log_workload TEXT NOT NULL,\n"
    "  k TEXT NOT NULL,\n"
    "  v TEXT);\n"
    "CREATE INDEX logs_workload ON logs(workload, err_no, cost);\n"
    "CREATE VIEW best_logs AS SELECT * FROM logs WHERE id IN (\n"
    "  SELECT id FROM (SELECT id, min(cost) FROM logs WHERE err_no=0\n"
    "                  GROUP BY workload));\n"
    "CREATE TABLE schema_version(version INTEGER NOT NULL,\n"
    "  applied REAL NOT NULL);\n"
    "INSERT INTO schema_version VALUES(1,\n"
    "  (julianday('now') - 2440587.5) * 86400.0);\n"
    "PRAGMA user_version=1;\n";

/* Version 2: jobs, tasks, error names, per-trial detail columns, hashes,
 * a database instance id and an import uid (NULL for trials measured here:
 * their uid is "INSTANCE-ID", made on export), and only indexes that grow
 * at their end, so a batch dirties few pages.  best_logs becomes per
 * (target, workload). */
static const char migrate_v1_v2[] =
    "ALTER TABLE logs ADD COLUMN job_id INTEGER REFERENCES jobs(id);\n"
    "ALTER TABLE logs ADD COLUMN workload_hash TEXT;\n"
    "ALTER TABLE logs ADD COLUMN sched_hash TEXT;\n"
    "ALTER TABLE logs ADD COLUMN costs TEXT;\n"
    "ALTER TABLE logs ADD COLUMN worker TEXT;\n"
    "ALTER TABLE logs ADD COLUMN build_s REAL;\n"
    "ALTER TABLE logs ADD COLUMN run_s REAL;\n"
    "ALTER TABLE logs ADD COLUMN started REAL;\n"
    "ALTER TABLE logs ADD COLUMN finished REAL;\n"
    "ALTER TABLE logs ADD COLUMN uid TEXT;\n"
    "UPDATE logs SET workload_hash=kt_hash(workload),\n"
    "  sched_hash=kt_hash(config);\n"
    "CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);\n"
    "INSERT INTO meta VALUES('instance', lower(hex(randomblob(8))));\n"
    "CREATE TABLE jobs(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  name TEXT NOT NULL UNIQUE,\n"
    "  model TEXT,\n"
    "  target TEXT,\n"
    "  state TEXT NOT NULL DEFAULT 'created',\n"
    "  created REAL NOT NULL,\n"
    "  updated REAL NOT NULL);\n"
    "CREATE TABLE tasks(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  job_id INTEGER NOT NULL DEFAULT 0,\n"
    "  task_name TEXT NOT NULL,\n"
    "  target TEXT NOT NULL,\n"
    "  workload TEXT NOT NULL,\n"
    "  workload_hash TEXT NOT NULL,\n"
    "  compute TEXT,\n"
    "  shapes TEXT,\n"
    "  weight REAL NOT NULL DEFAULT 1,\n"
    "  flops REAL NOT NULL DEFAULT 0,\n"
    "  UNIQUE(job_id, target, workload_hash));\n"
    "CREATE TABLE err_names(err_no INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"
    "INSERT INTO err_names VALUES(0,'NO_ERROR'),(1,'INSTANTIATION_ERROR'),\n"
    "  (2,'COMPILE_HOST'),(3,'COMPILE_DEVICE'),(4,'RUNTIME_DEVICE'),\n"
    "  (5,'WRONG_ANSWER'),(6,'BUILD_TIMEOUT'),(7,'RUN_TIMEOUT'),\n"
    "  (8,'UNKNOWN_ERROR');\n"
    "DROP INDEX logs_workload;\n"
    "CREATE INDEX logs_wl ON logs(target, workload_hash);\n"
    "CREATE UNIQUE INDEX logs_uid ON logs(uid) WHERE uid IS NOT NULL;\n"
    "CREATE INDEX kvs_log ON kvs(log_id);\n"
    "DROP VIEW best_logs;\n"
    "CREATE VIEW best_logs AS SELECT * FROM logs WHERE id IN (\n"
    "  SELECT id FROM (SELECT id, min(cost) FROM logs WHERE err_no=0\n"
    "                  GROUP BY target, workload_hash));\n"
    "INSERT INTO schema_version VALUES(2,\n"
    "  (julianday('now') - 2440587.5) * 86400.0);\n"
    "PRAGMA user_version=2;\n";

/* migrations[i] takes a file from version i to i + 1 (0: empty file). */
static const char *const migrations[] = {schema_v1, migrate_v1_v2};

static void
sql_kt_hash(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    const unsigned char *s;
    char hex[17];

    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
        sqlite3_result_null(ctx);
        return;
    }
    s = sqlite3_value_text(argv[0]);
    kt_hash_hex(kt_hash64(s, (size_t)sqlite3_value_bytes(argv[0])), hex);
    sqlite3_result_text(ctx, hex, 16, SQLITE_TRANSIENT);
}

int
kt__register_functions(sqlite3 *db)
{
    return sqlite3_create_function(db, "kt_hash", 1,
                                   SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                                   sql_kt_hash, NULL, NULL);
}

static int
read_version(sqlite3 *db, const char *path, int *v, char *err, size_t errlen)
{
    sqlite3_stmt *s = NULL;
    int rc;

    rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        rc = kt__dberr(db, rc, path, 0, "reading the schema version", err,
                       errlen);
        sqlite3_finalize(s);
        return rc;
    }
    *v = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    return 0;
}

/* Applies migrations from..to-1, each in its own transaction. */
static int
migrate(sqlite3 *db, const char *path, int from, int to, char *err,
        size_t errlen)
{
    char what[64];
    int rc, v;

    for (v = from; v < to; v++) {
        rc = kt__exec(db, path, "BEGIN IMMEDIATE", err, errlen);
        if (rc < 0)
            return rc;
        rc = kt__exec(db, path, migrations[v], err, errlen);
        if (rc == 0)
            rc = kt__exec(db, path, "COMMIT", err, errlen);
        if (rc < 0) {
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            snprintf(what, sizeof(what), " (migrating schema %d to %d)", v,
                     v + 1);
            if (err != NULL && strlen(err) + strlen(what) < errlen)
                strcat(err, what);
            return rc;
        }
    }
    /* A new database is created through every migration: not an upgrade. */
    if (from > 0 && from < to)
        log_info("storage: %s: schema upgraded from version %d to %d", path,
                 from, to);
    return 0;
}

int
kt__schema_upgrade(sqlite3 *db, const char *path, int *found, char *err,
                   size_t errlen)
{
    int rc, v = 0, ntables = 0;
    sqlite3_stmt *s = NULL;

    rc = read_version(db, path, &v, err, errlen);
    if (rc < 0)
        return rc;
    *found = v;
    if (v > KT_STORAGE_SCHEMA_VERSION)
        return kt_seterr(err, errlen, KT_EDB,
                         "storage: %s: schema version %d is newer than this "
                         "kerntune supports (%d); use a newer kerntune or "
                         "another database file",
                         path, v, KT_STORAGE_SCHEMA_VERSION);
    if (v == 0) {
        /* Version 0 must be an empty file, not someone else's database. */
        rc = sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1,
                                &s, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_step(s);
        if (rc != SQLITE_ROW) {
            rc = kt__dberr(db, rc, path, 0, "reading the schema", err, errlen);
            sqlite3_finalize(s);
            return rc;
        }
        ntables = sqlite3_column_int(s, 0);
        sqlite3_finalize(s);
        if (ntables > 0)
            return kt_seterr(err, errlen, KT_EDB,
                             "storage: %s: not a kerntune database (it has "
                             "%d schema objects but no schema version)",
                             path, ntables);
    }
    return migrate(db, path, v, KT_STORAGE_SCHEMA_VERSION, err, errlen);
}

int
kt_storage_create_version(const char *path, int version, char *err,
                          size_t errlen)
{
    sqlite3 *db = NULL;
    int rc;

    if (version < 1 || version > KT_STORAGE_SCHEMA_VERSION)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "storage: no schema version %d", version);
    if (access(path, F_OK) == 0)
        return kt_seterr(err, errlen, KT_EINVAL, "storage: %s: already exists",
                         path);
    rc = sqlite3_open_v2(path, &db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                             SQLITE_OPEN_NOMUTEX,
                         NULL);
    if (rc != SQLITE_OK) {
        rc = kt__dberr(db, rc, path, 0, "creating", err, errlen);
        goto done;
    }
    rc = kt__register_functions(db);
    if (rc != SQLITE_OK) {
        rc = kt__dberr(db, rc, path, 0, "registering functions", err, errlen);
        goto done;
    }
    rc = migrate(db, path, 0, version, err, errlen);
done:
    sqlite3_close(db);
    return rc;
}
