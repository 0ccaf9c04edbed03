/* resume.c - what a restarted daemon reads back: per workload best and trial
 * counts, the measured set, and the cost model's training history. */
#include <stdlib.h>
#include <string.h>

#include "storage/storage_int.h"

static const char *
col_text(sqlite3_stmt *s, int i)
{
    const unsigned char *p = sqlite3_column_text(s, i);

    return p != NULL ? (const char *)p : "";
}

static int
step_err(struct kt_storage *st, int rc, const char *what, char *err,
         size_t errlen)
{
    return kt__dberr(st->db, rc, st->path, st->busy_timeout_ms, what, err,
                     errlen);
}

static int
cmp_entry(const void *a, const void *b)
{
    const struct kt_resume_entry *x = a, *y = b;

    return strcmp(x->workload_hash, y->workload_hash);
}

/* Fills the best trial of every entry (one scan of the target's rows). */
static int
resume_best(struct kt_storage *st, const char *target, struct kt_resume *r,
            char *err, size_t errlen)
{
    struct kt_resume_entry *e;
    sqlite3_stmt *s;
    int rc;

    s = kt__stmt(st, KT__ST_RESUME_BEST, err, errlen);
    if (s == NULL)
        return KT_EDB;
    sqlite3_bind_text(s, 1, target, -1, SQLITE_STATIC);
    for (;;) {
        rc = sqlite3_step(s);
        if (rc != SQLITE_ROW)
            break;
        e = (struct kt_resume_entry *)kt_resume_find(r, col_text(s, 0));
        if (e == NULL)
            continue; /* written between the two reads; next resume */
        e->best_cost = sqlite3_column_double(s, 1);
        e->best_config = kt_xstrdup(col_text(s, 2));
        snprintf(e->best_sched_hash, sizeof(e->best_sched_hash), "%s",
                 col_text(s, 3));
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return step_err(st, rc, "reading the best trials", err, errlen);
    return 0;
}

int
kt_storage_resume(struct kt_storage *st, const char *target, int64_t job_id,
                  struct kt_resume **out, char *err, size_t errlen)
{
    struct kt_resume *r;
    struct kt_resume_entry *e;
    sqlite3_stmt *s;
    size_t cap = 0;
    int rc;

    *out = NULL;
    if (target == NULL)
        return kt_seterr(err, errlen, KT_EINVAL, "storage: resume: no target");
    r = kt_xcalloc(1, sizeof(*r));
    s = kt__stmt(st, KT__ST_RESUME_COUNTS, err, errlen);
    if (s == NULL) {
        rc = KT_EDB;
        goto fail;
    }
    sqlite3_bind_text(s, 1, target, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, job_id > 0 ? job_id : -1);
    for (;;) {
        rc = sqlite3_step(s);
        if (rc != SQLITE_ROW)
            break;
        if (r->n == cap) {
            cap = cap ? cap * 2 : 16;
            r->e = kt_xrealloc(r->e, cap * sizeof(*r->e));
        }
        e = &r->e[r->n++];
        memset(e, 0, sizeof(*e));
        snprintf(e->workload_hash, sizeof(e->workload_hash), "%s",
                 col_text(s, 0));
        e->trials = sqlite3_column_int64(s, 1);
        e->ok_trials = sqlite3_column_int64(s, 2);
        e->job_trials = sqlite3_column_int64(s, 3);
        e->job_max_trial_no = sqlite3_column_type(s, 4) == SQLITE_NULL
                                  ? -1
                                  : sqlite3_column_int64(s, 4);
        e->workload = kt_xstrdup(col_text(s, 5));
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        rc = step_err(st, rc, "reading trial counts", err, errlen);
        goto fail;
    }
    /* Sorted here, not by SQL collation, for kt_resume_find. */
    if (r->n > 1)
        qsort(r->e, r->n, sizeof(*r->e), cmp_entry);
    rc = resume_best(st, target, r, err, errlen);
    if (rc < 0)
        goto fail;
    *out = r;
    return 0;
fail:
    kt_resume_free(r);
    return rc;
}

void
kt_resume_free(struct kt_resume *r)
{
    size_t i;

    if (r == NULL)
        return;
    for (i = 0; i < r->n; i++) {
        free(r->e[i].workload);
        free(r->e[i].best_config);
    }
    free(r->e);
    free(r);
}

const struct kt_resume_entry *
kt_resume_find(const struct kt_resume *r, const char *workload_hash)
{
    struct kt_resume_entry key;

    if (r == NULL || r->n == 0)
        return NULL;
    memset(&key, 0, sizeof(key));
    snprintf(key.workload_hash, sizeof(key.workload_hash), "%s", workload_hash);
    return bsearch(&key, r->e, r->n, sizeof(*r->e), cmp_entry);
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

int
kt_storage_measured(struct kt_storage *st, const char *target,
                    const char *workload_hash, uint64_t **hashes, size_t *n,
                    char *err, size_t errlen)
{
    sqlite3_stmt *s;
    uint64_t *h = NULL, v;
    size_t cnt = 0, cap = 0, i, j;
    int rc;

    *hashes = NULL;
    *n = 0;
    s = kt__stmt(st, KT__ST_MEASURED, err, errlen);
    if (s == NULL)
        return KT_EDB;
    sqlite3_bind_text(s, 1, target, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, workload_hash, -1, SQLITE_STATIC);
    for (;;) {
        rc = sqlite3_step(s);
        if (rc != SQLITE_ROW)
            break;
        if (kt_hash_parse(col_text(s, 0), &v) != KT_OK) {
            rc = kt_seterr(err, errlen, KT_EDB,
                           "storage: %s: logs.sched_hash '%s' is not 16 hex "
                           "digits",
                           st->path, col_text(s, 0));
            sqlite3_reset(s);
            free(h);
            return rc;
        }
        if (cnt == cap) {
            cap = cap ? cap * 2 : 64;
            h = kt_xrealloc(h, cap * sizeof(*h));
        }
        h[cnt++] = v;
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        free(h);
        return step_err(st, rc, "reading the measured set", err, errlen);
    }
    if (cnt > 1)
        qsort(h, cnt, sizeof(*h), cmp_u64);
    for (i = j = 0; i < cnt; i++)
        if (j == 0 || h[j - 1] != h[i])
            h[j++] = h[i];
    *hashes = h;
    *n = j;
    return 0;
}

int
kt_measured_contains(const uint64_t *hashes, size_t n, const char *hex)
{
    uint64_t v;

    if (hashes == NULL || n == 0 || kt_hash_parse(hex, &v) != KT_OK)
        return 0;
    return bsearch(&v, hashes, n, sizeof(v), cmp_u64) != NULL;
}

int
kt_storage_history(struct kt_storage *st, const char *target,
                   const char *workload_hash, size_t limit, kt_history_cb cb,
                   void *arg, char *err, size_t errlen)
{
    struct kt_history_row row;
    enum kt__stmt which;
    sqlite3_stmt *s;
    int rc, ret = 0, off;

    if (workload_hash != NULL)
        which = limit ? KT__ST_HISTORY_ONE_LIMIT : KT__ST_HISTORY_ONE;
    else
        which = limit ? KT__ST_HISTORY_ALL_LIMIT : KT__ST_HISTORY_ALL;
    off = limit ? 1 : 0; /* the limited forms select id first */
    s = kt__stmt(st, which, err, errlen);
    if (s == NULL)
        return KT_EDB;
    sqlite3_bind_text(s, 1, target, -1, SQLITE_STATIC);
    if (workload_hash != NULL)
        sqlite3_bind_text(s, 2, workload_hash, -1, SQLITE_STATIC);
    if (limit)
        sqlite3_bind_int64(s, 3, (sqlite3_int64)limit);
    for (;;) {
        rc = sqlite3_step(s);
        if (rc != SQLITE_ROW)
            break;
        row.workload_hash = col_text(s, off + 0);
        row.workload = col_text(s, off + 1);
        row.config = col_text(s, off + 2);
        row.cost = sqlite3_column_double(s, off + 3);
        row.err_no = sqlite3_column_int(s, off + 4);
        ret = cb(arg, &row);
        if (ret != 0)
            break;
    }
    sqlite3_reset(s);
    if (ret != 0)
        return ret;
    if (rc != SQLITE_DONE)
        return step_err(st, rc, "reading the history", err, errlen);
    return 0;
}

int
kt_storage_targets(struct kt_storage *st, struct kt_buf *b, char *err,
                   size_t errlen)
{
    sqlite3_stmt *s = kt__stmt(st, KT__ST_TARGETS, err, errlen);
    int rc;

    if (s == NULL)
        return KT_EDB;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        kt_buf_printf(b, "%s\n", col_text(s, 0));
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return step_err(st, rc, "listing the targets", err, errlen);
    return 0;
}
