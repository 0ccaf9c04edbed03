/* report_load.c - a database's jobs, tasks and trials read for `kerntune
 * status|jobs|tasks|best --db` and `kerntune report` (report.h). */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "daemon/report.h"
#include "daemon/show.h"

static char *
dup_col(sqlite3_stmt *q, int col)
{
    const unsigned char *s = sqlite3_column_text(q, col);
    return s != NULL ? kt_xstrdup((const char *)s) : NULL;
}

static int
prepare(sqlite3 *db, const char *path, const char *sql, sqlite3_stmt **q,
        char *err, size_t errlen)
{
    if (sqlite3_prepare_v2(db, sql, -1, q, NULL) == SQLITE_OK)
        return KT_OK;
    return kt_seterr(err, errlen, KT_EDB, "%s: %s", path, sqlite3_errmsg(db));
}

/* The step's result: KT_OK at the end of the rows, else an error naming
 * the file. */
static int
done(sqlite3 *db, const char *path, int rc, char *err, size_t errlen)
{
    if (rc == SQLITE_DONE)
        return KT_OK;
    return kt_seterr(err, errlen, KT_EDB, "%s: %s", path, sqlite3_errmsg(db));
}

/* The budget the model file asks for; 0 when it no longer loads. */
static int64_t
model_budget(const char *model)
{
    struct kt_model_conf *conf = NULL;
    char err[512];
    int64_t budget = 0;

    if (model == NULL || kt_model_conf_load_cli(model, NULL, 0, 0, &conf, err,
                                                sizeof(err)) != KT_OK)
        return 0;
    budget = conf->tuning.trials;
    kt_model_conf_free(conf);
    return budget;
}

static int
load_tasks(sqlite3 *db, const char *path, struct kt_rep_job *j, char *err,
           size_t errlen)
{
    static const char sql[] =
        "select t.task_name, t.workload_hash, t.weight, t.flops,"
        " (select count(*) from logs l where l.job_id = t.job_id"
        "   and l.workload_hash = t.workload_hash),"
        " (select count(*) from logs l where l.job_id = t.job_id"
        "   and l.workload_hash = t.workload_hash and l.err_no != 0),"
        " b.cost, b.config "
        "from tasks t left join (select workload_hash, target, config,"
        "   min(cost) as cost from logs where err_no = 0 and cost > 0"
        "   group by target, workload_hash) b"
        " on b.target = t.target and b.workload_hash = t.workload_hash "
        "where t.job_id = ? order by t.id";
    sqlite3_stmt *q;
    int rc, cap = 0;

    if ((rc = prepare(db, path, sql, &q, err, errlen)) != KT_OK)
        return rc;
    sqlite3_bind_int64(q, 1, j->id);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        struct kt_rep_task *t;
        if (j->ntasks == cap) {
            cap = cap ? 2 * cap : 16;
            j->tasks = kt_xrealloc(j->tasks, (size_t)cap * sizeof(*j->tasks));
        }
        t = &j->tasks[j->ntasks++];
        memset(t, 0, sizeof(*t));
        t->name = dup_col(q, 0);
        t->workload_hash = dup_col(q, 1);
        t->weight = sqlite3_column_double(q, 2);
        t->flops = sqlite3_column_double(q, 3);
        t->trials = sqlite3_column_int64(q, 4);
        t->errors = sqlite3_column_int64(q, 5);
        t->best_cost = sqlite3_column_double(q, 6);
        t->best_config = dup_col(q, 7);
        j->trials += t->trials;
        j->errors += t->errors;
    }
    rc = done(db, path, rc, err, errlen);
    sqlite3_finalize(q);
    return rc;
}

static int
task_index(const struct kt_rep_job *j, const char *hash)
{
    int i;

    for (i = 0; hash != NULL && i < j->ntasks; i++)
        if (strcmp(j->tasks[i].workload_hash, hash) == 0)
            return i;
    return -1;
}

static int
worker_index(struct kt_rep_job *j, const char *name)
{
    int i;

    if (name == NULL)
        return -1;
    for (i = 0; i < j->nworkers; i++)
        if (strcmp(j->workers[i], name) == 0)
            return i;
    j->workers = kt_xrealloc(j->workers,
                             (size_t)(j->nworkers + 1) * sizeof(char *));
    j->workers[j->nworkers] = kt_xstrdup(name);
    return j->nworkers++;
}

/* The job's trials in the order they finished (trials of workloads that
 * are not among its tasks are left out). */
static int
load_trials(sqlite3 *db, const char *path, struct kt_rep_job *j, char *err,
            size_t errlen)
{
    static const char sql[] =
        "select workload_hash, err_no, cost, started, finished, worker "
        "from logs where job_id = ? order by finished, id";
    sqlite3_stmt *q;
    int rc, cap = 0;

    if ((rc = prepare(db, path, sql, &q, err, errlen)) != KT_OK)
        return rc;
    sqlite3_bind_int64(q, 1, j->id);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        struct kt_rep_trial *t;
        int task = task_index(j, (const char *)sqlite3_column_text(q, 0));
        if (task < 0)
            continue;
        if (j->ntrials == cap) {
            cap = cap ? 2 * cap : 256;
            j->trial = kt_xrealloc(j->trial, (size_t)cap * sizeof(*j->trial));
        }
        t = &j->trial[j->ntrials++];
        t->task = task;
        t->err_no = sqlite3_column_int(q, 1);
        t->cost = sqlite3_column_double(q, 2);
        t->started = sqlite3_column_double(q, 3);
        t->finished = sqlite3_column_double(q, 4);
        t->worker = worker_index(j, (const char *)sqlite3_column_text(q, 5));
    }
    rc = done(db, path, rc, err, errlen);
    sqlite3_finalize(q);
    return rc;
}

static int
load_job(sqlite3 *db, const char *path, sqlite3_stmt *q, int flags,
         struct kt_rep_job *j, char *err, size_t errlen)
{
    int rc;

    memset(j, 0, sizeof(*j));
    j->id = sqlite3_column_int64(q, 0);
    j->name = dup_col(q, 1);
    j->model = dup_col(q, 2);
    j->target = dup_col(q, 3);
    j->state = dup_col(q, 4);
    j->created = sqlite3_column_double(q, 5);
    j->updated = sqlite3_column_double(q, 6);
    j->first_started = sqlite3_column_double(q, 7);
    j->last_finished = sqlite3_column_double(q, 8);
    j->budget = model_budget(j->model);
    rc = load_tasks(db, path, j, err, errlen);
    if (rc == KT_OK && (flags & KT_REP_TRIALS))
        rc = load_trials(db, path, j, err, errlen);
    return rc;
}

int
kt_rep_load(const char *db_path, const char *job, int flags, struct kt_rep *out,
            char *err, size_t errlen)
{
    static const char sql[] =
        "select j.id, j.name, j.model, j.target, j.state, j.created,"
        " j.updated, (select min(started) from logs where job_id = j.id),"
        " (select max(finished) from logs where job_id = j.id) "
        "from jobs j where ?1 is null or j.name = ?1 order by j.id";
    sqlite3 *db;
    sqlite3_stmt *q = NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    out->db_path = kt_xstrdup(db_path);
    if ((rc = kt_show_open_db(db_path, &db, err, errlen)) != KT_OK)
        return rc;
    rc = prepare(db, db_path, sql, &q, err, errlen);
    if (rc == KT_OK && job != NULL)
        sqlite3_bind_text(q, 1, job, -1, SQLITE_STATIC);
    while (rc == KT_OK) {
        int step = sqlite3_step(q);
        if (step != SQLITE_ROW) {
            rc = done(db, db_path, step, err, errlen);
            break;
        }
        out->jobs = kt_xrealloc(out->jobs,
                                (size_t)(out->njobs + 1) * sizeof(*out->jobs));
        rc = load_job(db, db_path, q, flags, &out->jobs[out->njobs++], err,
                      errlen);
    }
    if (rc == KT_OK && job != NULL && out->njobs == 0)
        rc = kt_seterr(err, errlen, KT_ENOENT, "%s: no job \"%s\"", db_path,
                       job);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return rc;
}

void
kt_rep_free(struct kt_rep *r)
{
    int i, k;

    for (i = 0; i < r->njobs; i++) {
        struct kt_rep_job *j = &r->jobs[i];
        for (k = 0; k < j->ntasks; k++) {
            free(j->tasks[k].name);
            free(j->tasks[k].workload_hash);
            free(j->tasks[k].best_config);
        }
        for (k = 0; k < j->nworkers; k++)
            free(j->workers[k]);
        free(j->tasks);
        free(j->trial);
        free(j->workers);
        free(j->name);
        free(j->model);
        free(j->target);
        free(j->state);
    }
    free(r->jobs);
    free(r->db_path);
    memset(r, 0, sizeof(*r));
}

void
kt_rep_curve(const struct kt_rep_job *j, double *curve)
{
    double *best = kt_xcalloc((size_t)(j->ntasks ? j->ntasks : 1),
                              sizeof(double));
    double total = 0;
    int i, missing = j->ntasks;

    for (i = 0; i < j->ntrials; i++) {
        const struct kt_rep_trial *t = &j->trial[i];
        const struct kt_rep_task *k = &j->tasks[t->task];
        if (t->err_no == 0 && t->cost > 0 &&
            (best[t->task] == 0 || t->cost < best[t->task])) {
            if (best[t->task] == 0)
                missing--;
            else
                total -= k->weight * best[t->task];
            best[t->task] = t->cost;
            total += k->weight * t->cost;
        }
        curve[i] = missing == 0 ? total * 1e3 : -1;
    }
    free(best);
}
