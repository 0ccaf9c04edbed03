/* records.c - export and import of trials as JSON lines, one self-describing
 * object per trial, so results move between machines.  A trial's uid makes
 * import idempotent. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "storage/storage_int.h"

#define RECORD_VERSION 1
#define IMPORT_CHUNK 1000 /* trials per transaction */

static const char *const err_names[KT_MERR_COUNT] =
    {"NO_ERROR",       "INSTANTIATION_ERROR", "COMPILE_HOST",
     "COMPILE_DEVICE", "RUNTIME_DEVICE",      "WRONG_ANSWER",
     "BUILD_TIMEOUT",  "RUN_TIMEOUT",         "UNKNOWN_ERROR"};

static const char export_sql[] =
    "SELECT l.id, coalesce(l.uid, ?2 || '-' || l.id), j.name, j.model, "
    "l.task_name, l.target, l.workload,"
    " l.workload_hash, l.config, l.sched_hash, l.err_no, l.err_text,"
    " l.trial_no, l.cost, l.costs, l.worker, l.build_s, l.run_s, l.started,"
    " l.finished FROM logs l LEFT JOIN jobs j ON j.id=l.job_id"
    " WHERE ?1 IS NULL OR l.target=?1 ORDER BY l.id";

static void
add_text(cJSON *o, const char *name, sqlite3_stmt *s, int col)
{
    if (sqlite3_column_type(s, col) == SQLITE_NULL)
        return;
    cJSON_AddStringToObject(o, name, (const char *)sqlite3_column_text(s, col));
}

/* Builds the JSON object of the current row of s; kv reads its kvs. */
static int
row_json(struct kt_storage *st, sqlite3_stmt *s, sqlite3_stmt *kv, cJSON **out,
         char *err, size_t errlen)
{
    cJSON *o = cJSON_CreateObject(), *costs, *kvs, *pair;
    const char *ctext;
    int rc, e;

    cJSON_AddNumberToObject(o, "kerntune_record", RECORD_VERSION);
    add_text(o, "uid", s, 1);
    add_text(o, "job", s, 2);
    add_text(o, "model", s, 3);
    add_text(o, "task_name", s, 4);
    add_text(o, "target", s, 5);
    add_text(o, "workload", s, 6);
    add_text(o, "workload_hash", s, 7);
    add_text(o, "config", s, 8);
    add_text(o, "sched_hash", s, 9);
    e = sqlite3_column_int(s, 10);
    cJSON_AddNumberToObject(o, "err_no", e);
    if (e >= 0 && e < KT_MERR_COUNT)
        cJSON_AddStringToObject(o, "err_name", err_names[e]);
    add_text(o, "err_text", s, 11);
    cJSON_AddNumberToObject(o, "trial_no", sqlite3_column_double(s, 12));
    cJSON_AddNumberToObject(o, "cost", sqlite3_column_double(s, 13));
    ctext = (const char *)sqlite3_column_text(s, 14);
    if (ctext != NULL) {
        costs = cJSON_Parse(ctext);
        if (costs == NULL || !cJSON_IsArray(costs)) {
            cJSON_Delete(costs);
            cJSON_Delete(o);
            return kt_seterr(err, errlen, KT_EDB,
                             "storage: %s: logs.costs of id %lld is not a "
                             "JSON array",
                             st->path, (long long)sqlite3_column_int64(s, 0));
        }
        cJSON_AddItemToObject(o, "costs", costs);
    }
    add_text(o, "worker", s, 15);
    cJSON_AddNumberToObject(o, "build_s", sqlite3_column_double(s, 16));
    cJSON_AddNumberToObject(o, "run_s", sqlite3_column_double(s, 17));
    cJSON_AddNumberToObject(o, "started", sqlite3_column_double(s, 18));
    cJSON_AddNumberToObject(o, "finished", sqlite3_column_double(s, 19));
    kvs = cJSON_AddArrayToObject(o, "kvs");
    sqlite3_bind_int64(kv, 1, sqlite3_column_int64(s, 0));
    for (;;) {
        rc = sqlite3_step(kv);
        if (rc != SQLITE_ROW)
            break;
        pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair,
                             cJSON_CreateString(
                                 (const char *)sqlite3_column_text(kv, 0)));
        if (sqlite3_column_type(kv, 1) == SQLITE_NULL)
            cJSON_AddItemToArray(pair, cJSON_CreateNull());
        else
            cJSON_AddItemToArray(pair,
                                 cJSON_CreateString(
                                     (const char *)sqlite3_column_text(kv, 1)));
        cJSON_AddItemToArray(kvs, pair);
    }
    sqlite3_reset(kv);
    if (rc != SQLITE_DONE) {
        cJSON_Delete(o);
        return kt__dberr(st->db, rc, st->path, st->busy_timeout_ms,
                         "reading kvs", err, errlen);
    }
    *out = o;
    return 0;
}

int
kt_storage_export(struct kt_storage *st, FILE *out, const char *target,
                  size_t *count, char *err, size_t errlen)
{
    sqlite3_stmt *s = NULL, *kv = NULL;
    cJSON *o = NULL;
    char *line;
    size_t n = 0;
    int rc;

    rc = sqlite3_prepare_v2(st->db, export_sql, -1, &s, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(st->db,
                                "SELECT k, v FROM kvs WHERE log_id=?1"
                                " ORDER BY id",
                                -1, &kv, NULL);
    if (rc != SQLITE_OK) {
        rc = kt__dberr(st->db, rc, st->path, st->busy_timeout_ms,
                       "preparing the export", err, errlen);
        goto done;
    }
    if (target != NULL)
        sqlite3_bind_text(s, 1, target, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, st->instance, -1, SQLITE_STATIC);
    for (;;) {
        rc = sqlite3_step(s);
        if (rc != SQLITE_ROW)
            break;
        rc = row_json(st, s, kv, &o, err, errlen);
        if (rc < 0)
            goto done;
        line = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (line == NULL) {
            rc = kt_seterr(err, errlen, KT_ENOMEM,
                           "storage: export: cannot print a record");
            goto done;
        }
        if (fputs(line, out) == EOF || fputc('\n', out) == EOF) {
            cJSON_free(line);
            rc = kt_seterr(err, errlen, KT_EIO,
                           "storage: export: write failed: %s",
                           strerror(errno));
            goto done;
        }
        cJSON_free(line);
        n++;
    }
    if (rc != SQLITE_DONE) {
        rc = kt__dberr(st->db, rc, st->path, st->busy_timeout_ms,
                       "reading trials to export", err, errlen);
        goto done;
    }
    rc = 0;
    if (fflush(out) != 0)
        rc = kt_seterr(err, errlen, KT_EIO, "storage: export: write failed: %s",
                       strerror(errno));
done:
    sqlite3_finalize(kv);
    sqlite3_finalize(s);
    if (count != NULL)
        *count = n;
    return rc;
}

/* ---- Import ----------------------------------------------------------- */

struct import_ctx {
    struct kt_storage *st;
    const char *name;
    size_t lineno;
    char *job; /* last job name looked up */
    int64_t job_id;
    struct kt_kv *kvs;
    int kvcap;
};
_Static_assert(KT_MAX_REPEAT == 64, "parse_record's message names 64");
_Static_assert(KT_MERR_COUNT == 9, "parse_record's message names 0..8");

static int
bad(struct import_ctx *c, char *err, size_t errlen, const char *what,
    const char *key)
{
    return kt_seterr(err, errlen, KT_EPARSE, "%s:%zu: %s '%s'", c->name,
                     c->lineno, what, key);
}

static const char *
get_str(cJSON *o, const char *key, int required, int *ok)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    if (v == NULL || cJSON_IsNull(v)) {
        if (required)
            *ok = 0;
        return NULL;
    }
    if (!cJSON_IsString(v)) {
        *ok = 0;
        return NULL;
    }
    return v->valuestring;
}

/* A number at key (0 when absent) that is finite and at least 0: a JSON
 * number can still be 1e999, and a negative or infinite time or cost
 * would rank first among a task's trials. */
static double
get_num(cJSON *o, const char *key, int *ok)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    if (v == NULL)
        return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0) {
        *ok = 0;
        return 0;
    }
    return v->valuedouble;
}

/* 1 if v is a whole number in lo..hi; tested on the double, before any
 * conversion (converting one out of range is undefined behaviour). */
static int
whole_in(const cJSON *v, double lo, double hi)
{
    return cJSON_IsNumber(v) && v->valuedouble >= lo && v->valuedouble <= hi &&
           v->valuedouble == floor(v->valuedouble);
}

/* A 16-hex-digit hash given with a record must be that of its text:
 * trials are found by these hashes (a task's best, the schedules already
 * measured), so a wrong one would file the trial under another task. */
static int
hash_matches(const char *given, const char *text)
{
    char want[17];

    if (given == NULL)
        return 1;
    kt_hash_hex(kt_hash64(text, strlen(text)), want);
    return strcmp(given, want) == 0;
}

/* Fills t (pointers into o and c) from one record. */
static int
parse_record(struct import_ctx *c, cJSON *o, struct kt_trial *t,
             const char **uid, char *err, size_t errlen)
{
    static const char *const strs[] = {"uid", "task_name", "target", "workload",
                                       "config"};
    const char *job, *model;
    cJSON *v, *it;
    int ok = 1, i, n;

    memset(t, 0, sizeof(*t));
    v = cJSON_GetObjectItemCaseSensitive(o, "kerntune_record");
    if (!cJSON_IsNumber(v) || v->valueint != RECORD_VERSION)
        return bad(c, err, errlen, "not a kerntune record version 1: key",
                   "kerntune_record");
    for (i = 0; i < (int)KT_ARRAY_LEN(strs); i++) {
        get_str(o, strs[i], 1, &ok);
        if (!ok)
            return bad(c, err, errlen, "missing or non-string key", strs[i]);
    }
    *uid = get_str(o, "uid", 1, &ok);
    t->task_name = get_str(o, "task_name", 1, &ok);
    t->target = get_str(o, "target", 1, &ok);
    t->workload = get_str(o, "workload", 1, &ok);
    t->config = get_str(o, "config", 1, &ok);
#define OPT_STR(field, key)                                                    \
    do {                                                                       \
        t->field = get_str(o, key, 0, &ok);                                    \
        if (!ok)                                                               \
            return bad(c, err, errlen, "non-string key", key);                 \
    } while (0)
#define NUM(dst, key)                                                          \
    do {                                                                       \
        dst = get_num(o, key, &ok);                                            \
        if (!ok)                                                               \
            return bad(c, err, errlen, "not a finite number >= 0: key", key);  \
    } while (0)
    OPT_STR(workload_hash, "workload_hash");
    OPT_STR(sched_hash, "sched_hash");
    OPT_STR(result.err_text, "err_text");
    OPT_STR(result.worker, "worker");
    if (!hash_matches(t->workload_hash, t->workload))
        return bad(c, err, errlen, "not the hash of the workload: key",
                   "workload_hash");
    if (!hash_matches(t->sched_hash, t->config))
        return bad(c, err, errlen, "not the hash of the config: key",
                   "sched_hash");
    v = cJSON_GetObjectItemCaseSensitive(o, "err_no");
    if (!whole_in(v, 0, KT_MERR_COUNT - 1))
        return bad(c, err, errlen, "missing or not a whole number 0..8: key",
                   "err_no");
    t->result.err_no = (int)v->valuedouble;
    v = cJSON_GetObjectItemCaseSensitive(o, "trial_no");
    if (v != NULL && !whole_in(v, 0, 9007199254740992.0))
        return bad(c, err, errlen, "not a whole number 0..2^53: key",
                   "trial_no");
    t->trial_no = v != NULL ? (int64_t)v->valuedouble : 0;
    NUM(t->result.cost, "cost");
    NUM(t->result.build_s, "build_s");
    NUM(t->result.run_s, "run_s");
    NUM(t->started, "started");
    NUM(t->finished, "finished");
#undef OPT_STR
#undef NUM
    v = cJSON_GetObjectItemCaseSensitive(o, "costs");
    if (v != NULL && !cJSON_IsNull(v)) {
        if (!cJSON_IsArray(v))
            return bad(c, err, errlen, "non-array key", "costs");
        n = cJSON_GetArraySize(v);
        if (n > KT_MAX_REPEAT)
            return bad(c, err, errlen, "more than 64 repeats in key", "costs");
        i = 0;
        cJSON_ArrayForEach (it, v) {
            if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) ||
                it->valuedouble < 0)
                return bad(c, err, errlen,
                           "element not a finite number >= 0 in key", "costs");
            t->result.costs[i++] = it->valuedouble;
        }
        t->result.ncosts = n;
    }
    v = cJSON_GetObjectItemCaseSensitive(o, "kvs");
    if (v != NULL && !cJSON_IsNull(v)) {
        if (!cJSON_IsArray(v))
            return bad(c, err, errlen, "non-array key", "kvs");
        n = cJSON_GetArraySize(v);
        if (n > c->kvcap) {
            c->kvcap = n;
            c->kvs = kt_xrealloc(c->kvs, (size_t)n * sizeof(*c->kvs));
        }
        i = 0;
        cJSON_ArrayForEach (it, v) {
            cJSON *k = cJSON_GetArrayItem(it, 0), *val;

            val = cJSON_GetArrayItem(it, 1);
            if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 ||
                !cJSON_IsString(k) ||
                !(cJSON_IsString(val) || cJSON_IsNull(val)))
                return bad(c, err, errlen,
                           "element is not a [\"k\", \"v\"] pair in key",
                           "kvs");
            c->kvs[i].k = k->valuestring;
            c->kvs[i].v = cJSON_IsString(val) ? val->valuestring : NULL;
            i++;
        }
        t->result.kvs = c->kvs;
        t->result.nkvs = n;
    }
    job = get_str(o, "job", 0, &ok);
    model = get_str(o, "model", 0, &ok);
    if (!ok)
        return bad(c, err, errlen, "non-string key", "job or model");
    if (job != NULL) {
        if (c->job == NULL || strcmp(c->job, job) != 0) {
            i = kt_storage_job_open(c->st, job, model, t->target, &c->job_id,
                                    err, errlen);
            if (i < 0)
                return i;
            free(c->job);
            c->job = kt_xstrdup(job);
        }
        t->job_id = c->job_id;
    }
    return 0;
}

/* A uid made by this database's export: the trial is already here. */
static int
own_uid(const struct kt_storage *st, const char *uid)
{
    size_t n = strlen(st->instance);

    return strncmp(uid, st->instance, n) == 0 && uid[n] == '-';
}

int
kt_storage_import(struct kt_storage *st, FILE *in, const char *name,
                  size_t *added, size_t *skipped, char *err, size_t errlen)
{
    struct import_ctx c;
    struct kt_trial t;
    const char *uid = NULL, *end = NULL;
    char *line = NULL;
    size_t cap = 0, n_add = 0, n_skip = 0, pend_add = 0, pend_skip = 0;
    ssize_t len;
    cJSON *o;
    int64_t id;
    int rc = 0, in_txn = 0, was_added = 0;

    memset(&c, 0, sizeof(c));
    c.st = st;
    c.name = name != NULL ? name : "<import>";
    for (;;) {
        len = getline(&line, &cap, in);
        if (len < 0)
            break;
        c.lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0)
            continue;
        o = cJSON_ParseWithOpts(line, &end, 1);
        if (o == NULL) {
            rc = kt_seterr(err, errlen, KT_EPARSE,
                           "%s:%zu: column %zu: malformed JSON", c.name,
                           c.lineno, (size_t)(end - line) + 1);
            break;
        }
        if (!in_txn) {
            rc = kt__begin(st, err, errlen);
            if (rc < 0) {
                cJSON_Delete(o);
                break;
            }
            in_txn = 1;
        }
        rc = parse_record(&c, o, &t, &uid, err, errlen);
        if (rc == 0)
            rc = kt__trial_check(&t, 0, err, errlen);
        was_added = 0;
        if (rc == 0 && !own_uid(st, uid))
            rc = kt__insert_trial(st, &t, uid, &id, &was_added, err, errlen);
        cJSON_Delete(o);
        if (rc == KT_EINVAL || rc == KT_EPARSE) {
            /* A bad line: keep the lines before it, as documented. */
            if (rc == KT_EINVAL) {
                char msg[256];

                snprintf(msg, sizeof(msg), "%s", err != NULL ? err : "");
                rc = kt_seterr(err, errlen, KT_EPARSE, "%s:%zu: %s", c.name,
                               c.lineno, msg);
            }
            break;
        }
        if (rc < 0) {
            kt__rollback(st);
            in_txn = 0;
            pend_add = pend_skip = 0;
            goto done;
        }
        if (was_added)
            pend_add++;
        else
            pend_skip++;
        if (pend_add + pend_skip >= IMPORT_CHUNK) {
            int crc = kt__commit(st, err, errlen);

            if (crc < 0) {
                kt__rollback(st);
                in_txn = 0;
                rc = crc;
                goto done;
            }
            in_txn = 0;
            n_add += pend_add;
            n_skip += pend_skip;
            pend_add = pend_skip = 0;
        }
    }
    if (in_txn) {
        /* Commit the lines before a bad one too; a failed commit wins. */
        int crc = kt__commit(st, rc == 0 ? err : NULL, rc == 0 ? errlen : 0);

        if (crc < 0) {
            kt__rollback(st);
            pend_add = pend_skip = 0;
            if (rc == 0)
                rc = crc;
        }
        n_add += pend_add;
        n_skip += pend_skip;
    }
    if (rc == 0 && ferror(in))
        rc = kt_seterr(err, errlen, KT_EIO, "%s:%zu: read error: %s", c.name,
                       c.lineno, strerror(errno));
done:
    free(line);
    free(c.job);
    free(c.kvs);
    if (added != NULL)
        *added = n_add;
    if (skipped != NULL)
        *skipped = n_skip;
    return rc;
}
