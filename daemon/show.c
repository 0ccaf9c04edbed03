/* show.c - `kerntune show` (see show.h and docs/daemon.md). */
#include "daemon/show.h"

#include <getopt.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "scheduler/scheduler.h"

#define SHOW_COLUMNS                                                           \
    "select l.id, l.task_name, j.name, l.target, l.workload, "                 \
    "l.workload_hash, "                                                        \
    "l.config, l.err_text, l.err_no, l.trial_no, l.cost "                      \
    "from logs l left join jobs j on j.id = l.job_id "

int
kt_show_open_db(const char *path, struct sqlite3 **out, char *err,
                size_t errlen)
{
    *out = NULL;
    if (access(path, R_OK) != 0)
        return kt_seterr(err, errlen, KT_ENOENT,
                         "%s: no such database (or not readable)", path);
    if (sqlite3_open_v2(path, out, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        kt_seterr(err, errlen, KT_EDB, "%s: %s", path,
                  *out ? sqlite3_errmsg(*out) : "cannot open");
        sqlite3_close(*out);
        *out = NULL;
        return KT_EDB;
    }
    sqlite3_busy_timeout(*out, 5000);
    return KT_OK;
}

static char *
column_dup(sqlite3_stmt *q, int col)
{
    const unsigned char *s = sqlite3_column_text(q, col);
    return s ? kt_xstrdup((const char *)s) : NULL;
}

/* Runs a SHOW_COLUMNS query with one bound argument and reads its first row. */
static int
load_one(sqlite3 *db, const char *path, const char *where, int64_t id,
         const char *text, struct kt_shown *out, char *err, size_t errlen)
{
    char sql[512];
    sqlite3_stmt *q = NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    snprintf(sql, sizeof(sql), "%s%s", SHOW_COLUMNS, where);
    if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
        return kt_seterr(err, errlen, KT_EDB,
                         "%s: %s (not a kerntune database?)", path,
                         sqlite3_errmsg(db));
    if (text != NULL)
        sqlite3_bind_text(q, 1, text, -1, SQLITE_STATIC);
    else
        sqlite3_bind_int64(q, 1, id);
    rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) {
        out->id = sqlite3_column_int64(q, 0);
        out->task_name = column_dup(q, 1);
        out->job_name = column_dup(q, 2);
        out->target = column_dup(q, 3);
        out->workload = column_dup(q, 4);
        out->workload_hash = column_dup(q, 5);
        out->config = column_dup(q, 6);
        out->err_text = column_dup(q, 7);
        out->err_no = sqlite3_column_int(q, 8);
        out->trial_no = sqlite3_column_int64(q, 9);
        out->cost = sqlite3_column_double(q, 10);
        rc = out->workload && out->config
                 ? KT_OK
                 : kt_seterr(err, errlen, KT_EDB,
                             "%s: trial %lld has no workload or schedule", path,
                             (long long)out->id);
    } else if (rc == SQLITE_DONE) {
        rc = KT_ENOENT;
    } else {
        rc = kt_seterr(err, errlen, KT_EDB, "%s: %s", path, sqlite3_errmsg(db));
    }
    sqlite3_finalize(q);
    if (rc != KT_OK && rc != KT_ENOENT)
        kt_shown_free(out);
    return rc;
}

int
kt_show_load_trial(sqlite3 *db, const char *path, int64_t id,
                   struct kt_shown *out, char *err, size_t errlen)
{
    int rc = load_one(db, path, "where l.id = ?", id, NULL, out, err, errlen);

    if (rc == KT_ENOENT)
        kt_seterr(err, errlen, rc, "%s: no trial with id %lld", path,
                  (long long)id);
    return rc;
}

int
kt_show_load_best(sqlite3 *db, const char *path, const char *workload_hash,
                  struct kt_shown *out, char *err, size_t errlen)
{
    int rc =
        load_one(db, path,
                 "where l.workload_hash = ? and l.err_no = 0 and l.cost > 0 "
                 "order by l.cost, l.id limit 1",
                 0, workload_hash, out, err, errlen);

    if (rc == KT_ENOENT)
        kt_seterr(err, errlen, rc, "%s: no successful trial of workload %s",
                  path, workload_hash);
    return rc;
}

void
kt_shown_free(struct kt_shown *t)
{
    if (t == NULL)
        return;
    free(t->task_name);
    free(t->job_name);
    free(t->target);
    free(t->workload);
    free(t->workload_hash);
    free(t->config);
    free(t->err_text);
    memset(t, 0, sizeof(*t));
}

int
kt_show_replay(const struct kt_shown *t, struct kt_dag **dag,
               struct kt_state **st, char *err, size_t errlen)
{
    struct kt_step *steps = NULL;
    int nsteps = 0, rc;
    char why[512];

    *dag = NULL;
    *st = NULL;
    rc = kt_dag_from_key(t->workload, dag, why, sizeof(why));
    if (rc != KT_OK)
        return kt_seterr(err, errlen, rc,
                         "trial %lld: the workload does not rebuild: %s",
                         (long long)t->id, why);
    rc = kt_steps_from_json(t->config, &steps, &nsteps, why, sizeof(why));
    if (rc == KT_OK)
        rc = kt_state_replay(*dag, steps, nsteps, st, why, sizeof(why));
    free(steps);
    if (rc != KT_OK) {
        kt_dag_free(*dag);
        *dag = NULL;
        return kt_seterr(err, errlen, rc,
                         "trial %lld: the schedule does not replay: %s",
                         (long long)t->id, why);
    }
    return KT_OK;
}

int
kt_show_module(const struct kt_shown *t, const struct kt_codegen_opts *o,
               char **src, char *err, size_t errlen)
{
    struct kt_dag *dag;
    struct kt_state *st;
    struct kt_buf b;
    int rc;

    *src = NULL;
    rc = kt_show_replay(t, &dag, &st, err, errlen);
    if (rc != KT_OK)
        return rc;
    kt_buf_init(&b);
    rc = kt_codegen_module(st, dag, o, &b, err, errlen);
    if (rc == KT_OK)
        *src = kt_buf_take(&b);
    else
        kt_buf_free(&b);
    kt_state_free(st);
    kt_dag_free(dag);
    return rc;
}

/* ---- the command ---------------------------------------------------------- */

struct show_opts {
    const char *db_path;
    int module; /* print the whole build unit */
    int tree;   /* print the loop tree */
    struct kt_codegen_opts cg;
};

/* Writes s with every line prefixed (for text inside a C comment). */
static void
put_prefixed(FILE *out, const char *prefix, const char *s)
{
    while (*s) {
        const char *nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        fprintf(out, "%s%.*s\n", prefix, (int)n, s);
        s += n + (nl != NULL);
    }
}

static void
print_header(FILE *out, const struct kt_shown *t, const struct kt_dag *dag)
{
    fprintf(out, "/* trial %lld: task %s, job %s, trial_no %lld\n",
            (long long)t->id, t->task_name ? t->task_name : "?",
            t->job_name ? t->job_name : "(none)", (long long)t->trial_no);
    if (t->err_no == 0 && t->cost > 0)
        fprintf(out,
                " * measured: %.6f ms, %.2f GFLOPS (%.4g MFLOP per call)\n",
                t->cost * 1e3, dag->flops / t->cost / 1e9, dag->flops / 1e6);
    else
        fprintf(out, " * failed: err_no %d%s%s\n", t->err_no,
                t->err_text ? ": " : "", t->err_text ? t->err_text : "");
    fprintf(out, " * target: %s\n * workload %s: %s\n * schedule: %s\n",
            t->target ? t->target : "?", dag->hash, t->workload, t->config);
}

/* Prints one trial; returns an exit status. */
static int
show_trial(const struct show_opts *so, const struct kt_shown *t, FILE *out)
{
    struct kt_dag *dag;
    struct kt_state *st;
    struct kt_looptree *lt = NULL;
    struct kt_buf b;
    char err[1024];
    int rc;

    if (kt_show_replay(t, &dag, &st, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "kerntune: %s: %s\n", so->db_path, err);
        return 1;
    }
    kt_buf_init(&b);
    rc = kt_lower(st, &lt, err, sizeof(err));
    if (rc == KT_OK) {
        print_header(out, t, dag);
        if (so->tree) {
            kt_looptree_print(lt, &b);
            fputs(" *\n * loop tree:\n", out);
            put_prefixed(out, " *   ", b.p ? b.p : "");
            kt_buf_reset(&b);
        }
        fputs(" */\n", out);
        rc = so->module
                 ? kt_codegen_module(st, dag, &so->cg, &b, err, sizeof(err))
                 : kt_codegen_function(lt, &so->cg, "kt_kernel", &b, err,
                                       sizeof(err));
    }
    if (rc == KT_OK)
        fputs(b.p ? b.p : "", out);
    else
        fprintf(stderr, "kerntune: %s: trial %lld: %s\n", so->db_path,
                (long long)t->id, err);
    kt_buf_free(&b);
    kt_looptree_free(lt);
    kt_state_free(st);
    kt_dag_free(dag);
    return rc == KT_OK ? 0 : 1;
}

/* 1 if task i of the model is the one 'which' names: its index as printed by
 * `kerntune check`, its name, or its workload hash. */
static int
task_matches(const struct kt_tasks *tasks, int i, const char *which)
{
    char *end;
    long n = strtol(which, &end, 10);

    if (*which != '\0' && *end == '\0')
        return n == i;
    return strcmp(tasks->v[i].name, which) == 0 ||
           strcmp(tasks->v[i].dag->hash, which) == 0;
}

static int
show_model(const struct show_opts *so, sqlite3 *db, const char *model,
           const char *which)
{
    struct kt_model_conf *conf = NULL;
    struct kt_tasks tasks = {0};
    char err[1024];
    int i, found = 0, status = 0;

    if (kt_model_conf_load(model, &conf, err, sizeof(err)) != KT_OK ||
        kt_tasks_extract(conf, &tasks, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "kerntune: %s\n", err);
        kt_model_conf_free(conf);
        return 1;
    }
    for (i = 0; i < tasks.n; i++) {
        struct kt_shown t;
        int rc;

        if (which != NULL && !task_matches(&tasks, i, which))
            continue;
        found++;
        rc = kt_show_load_best(db, so->db_path, tasks.v[i].dag->hash, &t, err,
                               sizeof(err));
        if (rc != KT_OK) {
            fprintf(stderr, "kerntune: task %d (%s): %s\n", i, tasks.v[i].name,
                    err);
            status = 1;
            continue;
        }
        if (found > 1)
            fputc('\n', stdout);
        if (show_trial(so, &t, stdout) != 0)
            status = 1;
        kt_shown_free(&t);
    }
    if (which != NULL && found == 0) {
        fprintf(stderr,
                "kerntune: %s has no task \"%s\" (an index, name or workload "
                "hash from `kerntune check %s`)\n",
                model, which, model);
        status = 1;
    }
    kt_tasks_free(&tasks);
    kt_model_conf_free(conf);
    return status;
}

static void
show_usage(FILE *f)
{
    fputs("usage: kerntune show --db FILE MODEL.json [TASK] [options]\n"
          "       kerntune show --db FILE --trial ID [options]\n"
          "  TASK                 index, name or workload hash (see `kerntune "
          "check`);\n"
          "                       default: every task of the model\n"
          "  --module             the whole build unit a worker compiles\n"
          "  --no-tree            leave out the loop tree\n"
          "  --vector-bytes N     16, 32 or 64 (default: this machine's)\n",
          f);
}

int
kt_show_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, NULL, 'd'},
        {"trial", required_argument, NULL, 't'},
        {"module", no_argument, NULL, 'm'},
        {"no-tree", no_argument, NULL, 'n'},
        {"vector-bytes", required_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct show_opts so = {.db_path = NULL, .module = 0, .tree = 1};
    const char *trial = NULL;
    sqlite3 *db = NULL;
    char err[1024], *end;
    long long id = 0;
    int c, status;

    kt_codegen_default_opts(&so.cg);
    optind = 1;
    while ((c = getopt_long(argc, argv, "d:t:mnv:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': so.db_path = optarg; break;
        case 't': trial = optarg; break;
        case 'm': so.module = 1; break;
        case 'n': so.tree = 0; break;
        case 'v':
            so.cg.vector_bytes = atoi(optarg);
            if (so.cg.vector_bytes != 16 && so.cg.vector_bytes != 32 &&
                so.cg.vector_bytes != 64) {
                fprintf(stderr,
                        "kerntune: --vector-bytes must be 16, 32 or 64, got "
                        "\"%s\"\n",
                        optarg);
                return 2;
            }
            break;
        case 'h': show_usage(stdout); return 0;
        default: show_usage(stderr); return 2;
        }
    }
    if (so.db_path == NULL || (trial != NULL) == (optind < argc) ||
        argc - optind > 2) {
        show_usage(stderr);
        return 2;
    }
    if (trial != NULL) {
        id = strtoll(trial, &end, 10);
        if (*trial == '\0' || *end != '\0' || id <= 0) {
            fprintf(stderr, "kerntune: --trial wants a trial id (logs.id), got \"%s\"\n",
                    trial);
            return 2;
        }
    }
    if (kt_show_open_db(so.db_path, &db, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "kerntune: %s\n", err);
        return 1;
    }
    if (trial != NULL) {
        struct kt_shown t;
        status = 1;
        if (kt_show_load_trial(db, so.db_path, id, &t, err, sizeof(err)) !=
            KT_OK)
            fprintf(stderr, "kerntune: %s\n", err);
        else
            status = show_trial(&so, &t, stdout);
        kt_shown_free(&t);
    } else {
        status = show_model(&so, db, argv[optind],
                            optind + 1 < argc ? argv[optind + 1] : NULL);
    }
    sqlite3_close(db);
    return status;
}
