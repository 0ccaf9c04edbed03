/* report_query.c - `kerntune status|jobs|tasks|best`: from the daemon over
 * the control socket, or with --db FILE from the database alone; printed as
 * tables or, with --json, as the response object (report.h). */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "daemon/daemon.h"
#include "daemon/report.h"

static const struct kt_rep_job *
find_job(const struct kt_rep *r, const char *name)
{
    int i;

    for (i = 0; name != NULL && i < r->njobs; i++)
        if (strcmp(r->jobs[i].name, name) == 0)
            return &r->jobs[i];
    return NULL;
}

/* Sum of weight x best cost in ms; -1 while a task has none. */
static double
total_latency_ms(const struct kt_rep_job *j)
{
    double total = 0;
    int i;

    for (i = 0; i < j->ntasks; i++) {
        if (j->tasks[i].best_cost <= 0)
            return -1;
        total += j->tasks[i].weight * j->tasks[i].best_cost * 1e3;
    }
    return j->ntasks > 0 ? total : -1;
}

static double
used_s(const struct kt_rep_job *j)
{
    return j->last_finished > j->first_started
               ? j->last_finished - j->first_started
               : 0;
}

static void
add_tasks(const struct kt_rep_job *j, cJSON *resp, int best)
{
    cJSON *arr = cJSON_AddArrayToObject(resp, best ? "best" : "tasks");
    int i;

    cJSON_AddStringToObject(resp, "job", j->name);
    for (i = 0; i < j->ntasks; i++) {
        const struct kt_rep_task *t = &j->tasks[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", i);
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddNumberToObject(o, "weight", t->weight);
        cJSON_AddNumberToObject(o, "latency_ms",
                                t->best_cost > 0 ? t->best_cost * 1e3 : -1);
        cJSON_AddNumberToObject(o, "gflops",
                                t->best_cost > 0 ? t->flops / t->best_cost / 1e9
                                                 : -1);
        cJSON_AddNumberToObject(o, "trials", (double)t->trials);
        cJSON_AddNumberToObject(o, "errors", (double)t->errors);
        if (best && t->best_config != NULL)
            cJSON_AddStringToObject(o, "config", t->best_config);
        cJSON_AddItemToArray(arr, o);
    }
    cJSON_AddNumberToObject(resp, "total_latency_ms", total_latency_ms(j));
    cJSON_AddNumberToObject(resp, "trials", (double)j->trials);
    cJSON_AddNumberToObject(resp, "used_s", used_s(j));
    /* No rate without the daemon: the ETA is unknown unless done. */
    kt_ctl_add_progress(resp, j->trials, j->budget, j->trials, used_s(j));
}

/* The worker key of a target "KIND:KEY:COMPILER LINE" (the engine's
 * jobs.target), or "-". */
static void
add_key(cJSON *o, const char *target)
{
    const char *a = target != NULL ? strchr(target, ':') : NULL;
    const char *b = a != NULL ? strchr(a + 1, ':') : NULL;
    char key[128];

    snprintf(key, sizeof(key), "%.*s", b != NULL ? (int)(b - a - 1) : 1,
             b != NULL ? a + 1 : "-");
    cJSON_AddStringToObject(o, "key", key);
}

static void
add_jobs(const struct kt_rep *r, cJSON *resp)
{
    cJSON *arr = cJSON_AddArrayToObject(resp, "jobs");
    int i;

    for (i = 0; i < r->njobs; i++) {
        const struct kt_rep_job *j = &r->jobs[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", j->name);
        cJSON_AddStringToObject(o, "state", j->state ? j->state : "-");
        cJSON_AddNumberToObject(o, "tasks", j->ntasks);
        cJSON_AddNumberToObject(o, "trials", (double)j->trials);
        kt_ctl_add_progress(o, j->trials, j->budget, j->trials, used_s(j));
        cJSON_AddNumberToObject(o, "errors", (double)j->errors);
        cJSON_AddNumberToObject(o, "total_latency_ms", total_latency_ms(j));
        cJSON_AddNumberToObject(o, "used_s", used_s(j));
        add_key(o, j->target);
        cJSON_AddStringToObject(o, "target", j->target ? j->target : "");
        cJSON_AddStringToObject(o, "file", j->model ? j->model : "");
        cJSON_AddItemToArray(arr, o);
    }
}

cJSON *
kt_rep_response(const struct kt_rep *r, const char *cmd, const char *job)
{
    cJSON *resp = cJSON_CreateObject();
    const struct kt_rep_job *j;
    int64_t trials = 0;
    int i;

    cJSON_AddBoolToObject(resp, "ok", 1);
    cJSON_AddStringToObject(resp, "cmd", cmd);
    if (strcmp(cmd, "status") == 0) {
        for (i = 0; i < r->njobs; i++)
            trials += r->jobs[i].trials;
        cJSON_AddStringToObject(resp, "database", r->db_path);
        cJSON_AddNumberToObject(resp, "jobs", r->njobs);
        cJSON_AddNumberToObject(resp, "trials", (double)trials);
        cJSON_AddStringToObject(resp, "state",
                                "offline (read from the "
                                "database)");
    } else if (strcmp(cmd, "jobs") == 0) {
        add_jobs(r, resp);
    } else if ((strcmp(cmd, "tasks") == 0 || strcmp(cmd, "best") == 0) &&
               (j = find_job(r, job)) != NULL) {
        add_tasks(j, resp, strcmp(cmd, "best") == 0);
    } else {
        kt_ctl_fail(resp, "no job \"%s\" in %s", job ? job : "", r->db_path);
    }
    return resp;
}

static void
query_usage(FILE *f)
{
    fputs("usage: kerntune status|jobs [--db FILE] [--json] [--socket PATH]\n"
          "       kerntune tasks|best JOB [--db FILE] [--json] "
          "[--socket PATH]\n",
          f);
}

/* The daemon's response to {"cmd": cmd, "job": job}; NULL after printing
 * why. */
static cJSON *
ask_daemon(const char *sock, const char *cmd, const char *job)
{
    char err[512];
    cJSON *r = kt_ctl_ask(sock, cmd, job, err, sizeof(err));

    if (r == NULL)
        fprintf(stderr, "kerntune: %s (without the daemon: --db FILE)\n", err);
    return r;
}

int
kt_query_main(const char *default_socket, int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, NULL, 'd'},
        {"json", no_argument, NULL, 'j'},
        {"socket", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = argv[0], *db = NULL, *job = NULL;
    const char *sock = getenv("KERNTUNE_SOCKET") ? getenv("KERNTUNE_SOCKET")
                                                 : default_socket;
    int c, json = 0, rc, needs_job;
    cJSON *resp;

    needs_job = strcmp(cmd, "tasks") == 0 || strcmp(cmd, "best") == 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "d:js:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': db = optarg; break;
        case 'j': json = 1; break;
        case 's': sock = optarg; break;
        case 'h': query_usage(stdout); return 0;
        default: query_usage(stderr); return 2;
        }
    }
    if (optind != argc - needs_job) {
        query_usage(stderr);
        return 2;
    }
    if (needs_job)
        job = argv[optind];
    if (db != NULL) {
        struct kt_rep r;
        char err[1024];
        if (kt_rep_load(db, job, 0, &r, err, sizeof(err)) != KT_OK) {
            fprintf(stderr, "kerntune: %s\n", err);
            kt_rep_free(&r);
            return 1;
        }
        resp = kt_rep_response(&r, cmd, job);
        kt_rep_free(&r);
    } else if ((resp = ask_daemon(sock, cmd, job)) == NULL) {
        return 1;
    }
    if (kt_ctl_error(resp) != NULL && !json) {
        fprintf(stderr, "kerntune: %s\n", kt_ctl_error(resp));
        cJSON_Delete(resp);
        return 1;
    }
    if (json) {
        char *text = cJSON_PrintUnformatted(resp);
        printf("%s\n", text);
        cJSON_free(text);
        rc = kt_ctl_error(resp) == NULL ? KT_OK : KT_EINVAL;
    } else {
        rc = kt_ctl_print(stdout, cmd, resp);
    }
    cJSON_Delete(resp);
    return rc == KT_OK ? 0 : 1;
}

static void
report_usage(FILE *f)
{
    fputs("usage: kerntune report JOB [-o report.html] [--socket PATH]\n"
          "       kerntune report --db FILE [MODEL.json|MODEL.onnx|JOB] "
          "[-o report.html]\n",
          f);
}

/* The job a positional argument names: a model file's job name, or the
 * argument itself.  Returns 0, or 1 after printing why the model file does
 * not load. */
static int
job_of(const char *arg, char *name, size_t len)
{
    size_t n = strlen(arg);
    struct kt_model_conf *conf = NULL;
    char err[1024];

    if (!(n > 5 && strcmp(arg + n - 5, ".json") == 0) &&
        !(n > 5 && strcmp(arg + n - 5, ".onnx") == 0)) {
        snprintf(name, len, "%s", arg);
        return 0;
    }
    if (kt_model_conf_load_cli(arg, NULL, 0, 0, &conf, err, sizeof(err)) !=
        KT_OK) {
        fprintf(stderr, "kerntune: %s\n", err);
        return 1;
    }
    snprintf(name, len, "%s", conf->name);
    kt_model_conf_free(conf);
    return 0;
}

/* The database file the daemon writes (its "status" response). */
static int
daemon_database(const char *sock, char *path, size_t len)
{
    cJSON *r = ask_daemon(sock, "status", NULL);
    const cJSON *db = cJSON_GetObjectItemCaseSensitive(r, "database");
    int rc = 1;

    if (cJSON_IsString(db)) {
        snprintf(path, len, "%s", db->valuestring);
        rc = 0;
    } else if (r != NULL) {
        fprintf(stderr, "kerntune: the daemon did not name its database\n");
    }
    cJSON_Delete(r);
    return rc;
}

int
kt_report_main(const char *default_socket, int argc, char **argv)
{
    static const struct option opts[] = {
        {"db", required_argument, NULL, 'd'},
        {"output", required_argument, NULL, 'o'},
        {"socket", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *sock = getenv("KERNTUNE_SOCKET") ? getenv("KERNTUNE_SOCKET")
                                                 : default_socket;
    const char *db = NULL, *output = "report.html";
    char job[256] = "", dbpath[4096], err[1024];
    struct kt_rep r;
    FILE *out;
    int c, i, ntrials = 0;

    optind = 1;
    while ((c = getopt_long(argc, argv, "d:o:s:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': db = optarg; break;
        case 'o': output = optarg; break;
        case 's': sock = optarg; break;
        case 'h': report_usage(stdout); return 0;
        default: report_usage(stderr); return 2;
        }
    }
    if (optind < argc - 1 || (db == NULL && optind != argc - 1)) {
        report_usage(stderr);
        return 2;
    }
    if (optind == argc - 1 && job_of(argv[optind], job, sizeof(job)) != 0)
        return 1;
    if (db == NULL) {
        if (daemon_database(sock, dbpath, sizeof(dbpath)) != 0)
            return 1;
        db = dbpath;
    }
    if (kt_rep_load(db, job[0] ? job : NULL, KT_REP_TRIALS, &r, err,
                    sizeof(err)) != KT_OK) {
        fprintf(stderr, "kerntune: %s\n", err);
        kt_rep_free(&r);
        return 1;
    }
    out = strcmp(output, "-") == 0 ? stdout : fopen(output, "w");
    if (out == NULL) {
        fprintf(stderr, "kerntune: %s: cannot write: %s\n", output,
                strerror(errno));
        kt_rep_free(&r);
        return 1;
    }
    kt_report_html(out, &r);
    for (i = 0; i < r.njobs; i++)
        ntrials += r.jobs[i].ntrials;
    if ((out != stdout && fclose(out) != 0) ||
        (out == stdout && fflush(out) != 0)) {
        fprintf(stderr, "kerntune: %s: write failed: %s\n", output,
                strerror(errno));
        kt_rep_free(&r);
        return 1;
    }
    if (out != stdout)
        fprintf(stderr, "kerntune: wrote %s: %d jobs, %d trials\n", output,
                r.njobs, ntrials);
    kt_rep_free(&r);
    return 0;
}
