/* kerntune_main.c - the kerntune command line.
 *
 *   kerntune tune MODEL.json|MODEL.onnx [--trials N] [--db FILE]
 *                 [--log-dir DIR] [--workers N] [--quiet]
 *                 [--input NAME=D1,D2,...] [--partial]
 *   kerntune check MODEL.json|MODEL.onnx [--input NAME=D1,...] [--partial]
 *                  [--graph]
 *   kerntune status|jobs [--db FILE] [--json] [--socket PATH]
 *   kerntune tasks|best JOB [--db FILE] [--json] [--socket PATH]
 *   kerntune pause|resume JOB [--socket PATH]
 *   kerntune report [JOB | --db FILE [MODEL.json|JOB]] [-o report.html]
 *   kerntune rpc-status [--tracker HOST:PORT] [--token-file F] [--socket PATH]
 *   kerntune export --db FILE [--target T]      (JSON lines on stdout)
 *   kerntune import --db FILE RECORDS.jsonl
 *   kerntune show --db FILE (MODEL.json [TASK] | --trial ID)   (daemon/show.h)
 *   kerntune compile MODEL -o DIR [--db FILE] [--require-tuned]  (compile.h)
 *   kerntune run DIR [--input FILE] [--repeat N] [--threads N] [--check]
 *
 * `tune` runs one job in the foreground with local workers and the same
 * engine as kerntuned: it is the one-command way to tune a model. */
#include <cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include "compile/compile.h"
#include "config/config.h"
#include "daemon/daemon.h"
#include "daemon/engine.h"
#include "daemon/report.h"
#include "daemon/show.h"
#include "measure/measure.h"
#include "scheduler/scheduler.h"
#include "storage/storage.h"

#define DEFAULT_SOCKET "/run/kerntune/control.sock"

static void
usage(FILE *f)
{
    fputs("usage:\n"
          "  kerntune tune MODEL.json|MODEL.onnx [--trials N] [--db FILE] "
          "[--log-dir DIR]\n"
          "                [--workers N] [--quiet] [--input NAME=D1,D2,...] "
          "[--partial]\n"
          "  kerntune check MODEL.json|MODEL.onnx [--input NAME=D1,D2,...] "
          "[--partial]\n"
          "                 [--graph]\n"
          "  kerntune status|jobs [--db FILE] [--json] [--socket PATH]\n"
          "  kerntune tasks|best JOB [--db FILE] [--json] [--socket PATH]\n"
          "  kerntune pause|resume JOB [--socket PATH]\n"
          "  kerntune report [JOB | --db FILE [MODEL.json|JOB]] "
          "[-o report.html]\n"
          "  kerntune rpc-status [--tracker HOST:PORT [--token-file F]] "
          "[--socket PATH]\n"
          "  kerntune export --db FILE [--target T]\n"
          "  kerntune import --db FILE RECORDS.jsonl\n"
          "  kerntune show --db FILE (MODEL.json [TASK] | --trial ID) "
          "[--module] [--no-tree]\n"
          "  kerntune compile MODEL.json|MODEL.onnx -o DIR [--db FILE] "
          "[--require-tuned]\n"
          "  kerntune run DIR [--input FILE] [--repeat N] [--threads N] "
          "[--check]\n"
          "  kerntune --help | --version\n"
          "Exit status: 0 success, 1 failure, 2 bad usage, 130 tune "
          "interrupted (kerntune(1)).\n",
          f);
}

/* A bad option value: says which and what was expected; exit status 2. */
static int
bad_value(const char *opt, const char *value, const char *expected)
{
    fprintf(stderr, "kerntune: %s \"%s\": expected %s\n", opt, value, expected);
    return 2;
}

/* ---- tune ------------------------------------------------------------- */

struct tune {
    uv_loop_t loop;
    uv_signal_t sigint, sigterm;
    struct kt_tracker *tracker;
    struct kt_engine *engine;
    struct kt_job *job;
    int stopping;
    int interrupted;
};

static void
tune_close_all(struct tune *t)
{
    if (!uv_is_closing((uv_handle_t *)&t->sigint))
        uv_close((uv_handle_t *)&t->sigint, NULL);
    if (!uv_is_closing((uv_handle_t *)&t->sigterm))
        uv_close((uv_handle_t *)&t->sigterm, NULL);
    kt_tracker_close(t->tracker);
    t->tracker = NULL;
}

static void
tune_ended(void *arg, struct kt_job *job)
{
    struct tune *t = arg;

    (void)job;
    t->stopping = 1;
    tune_close_all(t);
}

static void
on_signal(uv_signal_t *s, int signum)
{
    struct tune *t = s->data;

    if (t->stopping) {
        log_warnx("kerntune: second signal: abandoning the batch in flight "
                  "(not stored; measured again next time)");
        kt_job_abandon(t->job);
        tune_close_all(t);
        return;
    }
    log_info("kerntune: %s: stopping after the batch in flight (again to "
             "abandon it)",
             signum == SIGINT ? "interrupt" : "terminate");
    t->interrupted = 1;
    t->stopping = 1;
    kt_job_stop(t->job);
}

static void
print_summary(const struct kt_job *job, FILE *out)
{
    struct kt_job_stats s;
    int i;

    kt_job_get_stats(job, &s);
    fprintf(out, "\n%-40s %8s %12s %10s %8s %6s\n", "task", "weight",
            "latency(ms)", "GFLOPS", "trials", "peak");
    for (i = 0; i < s.ntasks; i++) {
        struct kt_job_task_info ti;
        kt_job_task(job, i, &ti);
        if (ti.latency_ms > 0 && s.roof_gflops > 0)
            fprintf(out, "%-40.40s %8.0f %12.4f %10.2f %8lld %5.0f%%\n",
                    ti.name, ti.weight, ti.latency_ms, ti.gflops,
                    (long long)ti.trials, 100 * ti.gflops / s.roof_gflops);
        else if (ti.latency_ms > 0)
            fprintf(out, "%-40.40s %8.0f %12.4f %10.2f %8lld %6s\n", ti.name,
                    ti.weight, ti.latency_ms, ti.gflops, (long long)ti.trials,
                    "-");
        else
            fprintf(out, "%-40.40s %8.0f %12s %10s %8lld %6s\n", ti.name,
                    ti.weight, "-", "-", (long long)ti.trials, "-");
    }
    fprintf(out, "\njob %s: %s", kt_job_name(job),
            kt_job_state_name(kt_job_state(job)));
    if (kt_job_error(job)[0])
        fprintf(out, " (%s)", kt_job_error(job));
    fprintf(out, "\nestimated total latency: ");
    if (s.total_latency_ms >= 0)
        fprintf(out, "%.4f ms", s.total_latency_ms);
    else
        fprintf(out, "- (some task has no valid program yet)");
    fprintf(out,
            "\ntrials: %lld (%lld errors), %lld rounds; wall time %.1f s; "
            "workers busy %.0f%% of it; look-ahead searches used %lld of "
            "%lld\n",
            (long long)s.trials, (long long)s.errors, (long long)s.rounds,
            s.elapsed_s,
            s.elapsed_s > 0 ? 100.0 * s.device_busy_s / s.elapsed_s : 0.0,
            (long long)s.speculation_hits,
            (long long)(s.speculation_hits + s.speculation_misses));
    if (s.roof_gflops > s.peak_gflops)
        fprintf(out,
                "FMA peak of the target: %.1f GFLOPS measured, below the "
                "fastest task's %.1f GFLOPS (column peak: each task's share "
                "of the faster, the task scheduler's roofline)\n",
                s.peak_gflops, s.roof_gflops);
    else if (s.peak_gflops > 0)
        fprintf(out,
                "FMA peak of the target: %.1f GFLOPS (column peak: each "
                "task's share of it)\n",
                s.peak_gflops);
    else
        fprintf(out, "FMA peak of the target: not measured (see the log)\n");
    if (s.feature_errors > 0 || s.warm_skipped > 0)
        fprintf(out,
                "not trained on: %lld measured programs without features, "
                "%lld stored trials that could not be rebuilt (see the log)\n",
                (long long)s.feature_errors, (long long)s.warm_skipped);
}

/* Local workers run on this host: a cross compiler's kernels cannot. */
static int
local_workers_can_run(const struct kt_model_conf *conf)
{
    char abi[64];

    if (kt_abi_of_compiler(conf->target.cc, abi, sizeof(abi)) != 0 ||
        kt_abi_match(abi, kt_abi_self()))
        return 1;
    fprintf(stderr,
            "kerntune: %s: target cc \"%s\" builds %s code, but tune times "
            "kernels on local workers (%s): tune for a board with kerntuned "
            "and kerntune-rpc on the board (docs/boards.md)\n",
            conf->path ? conf->path : conf->name, conf->target.cc, abi,
            kt_abi_self());
    return 0;
}

/* --log-dir is created when missing: the task table is what users follow
 * with tail -f, and a run must not go on without it. */
static int
log_dir_ready(const char *dir)
{
    struct stat st;

    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "kerntune: --log-dir %s: %s\n", dir, strerror(errno));
        return 0;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "kerntune: --log-dir %s: not a directory\n", dir);
        return 0;
    }
    return 1;
}

struct tune_args {
    const char *inputs[16];
    int ninputs, partial, quiet;
    const char *db_path, *log_dir;
    int64_t trials, workers;
};

/* The options of `kerntune tune`; -1 to go on, else the exit status. */
static int
tune_parse_args(int argc, char **argv, struct tune_args *a)
{
    static const struct option opts[] = {
        {"trials", required_argument, NULL, 't'},
        {"db", required_argument, NULL, 'd'},
        {"log-dir", required_argument, NULL, 'l'},
        {"workers", required_argument, NULL, 'w'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"input", required_argument, NULL, 'I'},
        {"partial", no_argument, NULL, 'P'},
        {NULL, 0, NULL, 0},
    };
    int c;

    memset(a, 0, sizeof(*a));
    a->db_path = "kerntune.db";
    a->workers = 1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "t:d:l:w:qh", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            if (kt_parse_int64(optarg, 1, INT64_MAX, &a->trials) != KT_OK)
                return bad_value("--trials", optarg, "a number of trials >= 1");
            break;
        case 'd': a->db_path = optarg; break;
        case 'l': a->log_dir = optarg; break;
        case 'w':
            if (kt_parse_int64(optarg, 1, 64, &a->workers) != KT_OK)
                return bad_value("--workers", optarg, "a number from 1 to 64");
            break;
        case 'q': a->quiet = 1; break;
        case 'I':
            if (a->ninputs == 16)
                return usage(stderr), 2;
            a->inputs[a->ninputs++] = optarg;
            break;
        case 'P': a->partial = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* Tunes conf (taken) on db with local workers until the job ends or a
 * signal stops it; the exit status. */
static int
tune_run(struct kt_model_conf *conf, struct kt_storage *db,
         const struct tune_args *a)
{
    struct kt_tracker_opts to;
    struct kt_engine_opts eo;
    struct tune t;
    char err[1024];
    int status = 1;

    memset(&t, 0, sizeof(t));
    uv_loop_init(&t.loop);
    kt_tracker_default_opts(&to);
    to.host = "127.0.0.1";
    to.port = 0;
    if (kt_tracker_new(&t.tracker, &t.loop, &to, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "kerntune: tracker: %s\n", err);
        goto out;
    }
    if (kt_tracker_spawn_local(t.tracker, (int)a->workers, NULL,
                               conf->target.key, "build,run", err,
                               sizeof(err)) != KT_OK) {
        fprintf(stderr, "kerntune: local workers: %s\n", err);
        kt_tracker_close(t.tracker);
        uv_run(&t.loop, UV_RUN_DEFAULT);
        goto out;
    }
    memset(&eo, 0, sizeof(eo));
    eo.loop = &t.loop;
    eo.db = db;
    eo.tracker = t.tracker;
    eo.log_dir = a->log_dir;
    eo.echo_log = !a->quiet;
    eo.local_key = conf->target.key;
    kt_engine_new(&t.engine, &eo);
    if (kt_job_start(t.engine, conf, a->trials, tune_ended, &t, &t.job, err,
                     sizeof(err)) != KT_OK) {
        fprintf(stderr, "kerntune: %s\n", err);
        kt_tracker_close(t.tracker);
        uv_run(&t.loop, UV_RUN_DEFAULT);
        goto out;
    }
    conf = NULL; /* the job owns it */
    uv_signal_init(&t.loop, &t.sigint);
    uv_signal_init(&t.loop, &t.sigterm);
    t.sigint.data = t.sigterm.data = &t;
    uv_signal_start(&t.sigint, on_signal, SIGINT);
    uv_signal_start(&t.sigterm, on_signal, SIGTERM);
    uv_run(&t.loop, UV_RUN_DEFAULT);
    print_summary(t.job, stdout);
    status = kt_job_state(t.job) == KT_JOB_DONE || t.interrupted ? 0 : 1;
    if (t.interrupted)
        status = 130;
    kt_job_free(t.job);
out:
    kt_engine_free(t.engine);
    if (uv_loop_close(&t.loop) != 0)
        log_warnx("kerntune: event loop still had handles at exit");
    kt_model_conf_free(conf);
    return status;
}

static int
cmd_tune(const char *cmd, int argc, char **argv)
{
    struct tune_args a;
    struct kt_model_conf *conf = NULL;
    struct kt_storage *db = NULL;
    struct kt_storage_opts so;
    char err[1024];
    int rc, status;

    (void)cmd;
    status = tune_parse_args(argc, argv, &a);
    if (status >= 0)
        return status;
    if (a.log_dir != NULL && !log_dir_ready(a.log_dir))
        return 1;
    rc = kt_model_conf_load_cli(argv[optind], a.inputs, a.ninputs, a.partial,
                                &conf, err, sizeof(err));
    if (rc != KT_OK) {
        fprintf(stderr, "kerntune: %s\n", err);
        return 1;
    }
    if (!local_workers_can_run(conf)) {
        kt_model_conf_free(conf);
        return 1;
    }
    memset(&so, 0, sizeof(so));
    so.busy_timeout_ms = KT_ENGINE_DB_BUSY_MS;
    if (kt_storage_open(&db, a.db_path, &so, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "kerntune: %s\n", err);
        kt_model_conf_free(conf);
        return 1;
    }
    status = tune_run(conf, db, &a);
    kt_storage_close(db);
    return status;
}

/* ---- check ------------------------------------------------------------ */

static int
cmd_check(const char *cmd, int argc, char **argv)
{
    static const struct option opts[] = {
        {"input", required_argument, NULL, 'I'},
        {"partial", no_argument, NULL, 'P'},
        {"graph", no_argument, NULL, 'g'},
        {NULL, 0, NULL, 0},
    };
    struct kt_model_conf *conf = NULL;
    const char *inputs[16];
    struct kt_tasks tasks;
    char err[1024];
    int i, c, rc, ninputs = 0, partial = 0, graph = 0;

    (void)cmd;
    optind = 1;
    while ((c = getopt_long(argc, argv, "I:Pg", opts, NULL)) != -1) {
        if (c == 'I' && ninputs < 16)
            inputs[ninputs++] = optarg;
        else if (c == 'P' || c == 'g')
            *(c == 'P' ? &partial : &graph) = 1;
        else
            return usage(stderr), 2;
    }
    if (optind != argc - 1)
        return usage(stderr), 2;
    rc = kt_model_conf_load_cli(argv[optind], inputs, ninputs, partial, &conf,
                                err, sizeof(err));
    if (rc != KT_OK) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (kt_tasks_extract(conf, &tasks, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "%s\n", err);
        kt_model_conf_free(conf);
        return 1;
    }
    printf("%s: configuration OK: model %s, %d tasks, %.3f GFLOP per "
           "inference, "
           "%lld trials, target %s %s\n",
           argv[optind], conf->name, tasks.n,
           kt_tasks_total_flops(&tasks) / 1e9, (long long)conf->tuning.trials,
           conf->target.kind, conf->target.key);
    for (i = 0; i < tasks.n; i++)
        printf("  %3d  %-44s weight %3.0f  %10.2f MFLOP  %s\n", i,
               tasks.v[i].name, tasks.v[i].weight, tasks.v[i].flops / 1e6,
               tasks.v[i].dag->hash);
    if (graph && kt_tasks_print_graph(conf, stdout, err, sizeof(err)) != KT_OK)
        fprintf(stderr, "%s\n", err);
    kt_tasks_free(&tasks);
    kt_model_conf_free(conf);
    return 0;
}

/* ---- control-socket commands -------------------------------------------- */

static int
cmd_ctl(const char *cmd, int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {NULL, 0, NULL, 0},
    };
    const char *sock = getenv("KERNTUNE_SOCKET") ? getenv("KERNTUNE_SOCKET")
                                                 : DEFAULT_SOCKET;
    const char *job = NULL;
    char err[512];
    cJSON *r;
    int c, rc;

    optind = 1;
    while ((c = getopt_long(argc, argv, "s:", opts, NULL)) != -1) {
        if (c != 's') {
            usage(stderr);
            return 2;
        }
        sock = optarg;
    }
    if (strcmp(cmd, "status") != 0 && strcmp(cmd, "jobs") != 0 &&
        strcmp(cmd, "rpc-status") != 0) {
        if (optind != argc - 1) {
            usage(stderr);
            return 2;
        }
        job = argv[optind];
    }
    r = kt_ctl_ask(sock, cmd, job, err, sizeof(err));
    if (r == NULL || kt_ctl_error(r) != NULL) {
        fprintf(stderr, "kerntune: %s\n", r ? kt_ctl_error(r) : err);
        cJSON_Delete(r);
        return 1;
    }
    rc = kt_ctl_print(stdout, cmd, r);
    cJSON_Delete(r);
    return rc == KT_OK ? 0 : 1;
}

static int
cmd_rpc_status(const char *cmd, int argc, char **argv)
{
    static const struct option opts[] = {
        {"tracker", required_argument, NULL, 'r'},
        {"token-file", required_argument, NULL, 'k'},
        {"socket", required_argument, NULL, 's'},
        {NULL, 0, NULL, 0},
    };
    const char *tracker = NULL, *token_file = NULL;
    char host[256], token[512] = "", err[512];
    int c, port;

    optind = 1;
    while ((c = getopt_long(argc, argv, "r:k:s:", opts, NULL)) != -1) {
        switch (c) {
        case 'r': tracker = optarg; break;
        case 'k': token_file = optarg; break;
        case 's': break; /* for the daemon's view, below */
        default: usage(stderr); return 2;
        }
    }
    if (tracker == NULL)
        return cmd_ctl(cmd, argc, argv);
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    if (kt_hostport_parse(tracker, host, sizeof(host), &port, err,
                          sizeof(err)) != KT_OK) {
        fprintf(stderr, "kerntune: --tracker: %s\n", err);
        return 2;
    }
    if (token_file != NULL &&
        kt_token_read(token_file, token, sizeof(token), err, sizeof(err)) < 0) {
        fprintf(stderr, "kerntune: %s\n", err);
        return 1;
    }
    if (kt_rpc_status(host, port, token, stdout, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "kerntune: rpc-status: %s\n", err);
        return 1;
    }
    return 0;
}

static int
cmd_show(const char *cmd, int argc, char **argv)
{
    (void)cmd;
    return kt_show_main(argc, argv);
}

static int
cmd_compile(const char *cmd, int argc, char **argv)
{
    return strcmp(cmd, "run") == 0 ? kt_run_main(argc, argv)
                                   : kt_compile_main(argc, argv);
}

static int
cmd_query(const char *cmd, int argc, char **argv)
{
    (void)cmd;
    return kt_query_main(DEFAULT_SOCKET, argc, argv);
}

static int
cmd_report(const char *cmd, int argc, char **argv)
{
    (void)cmd;
    return kt_report_main(DEFAULT_SOCKET, argc, argv);
}

/* The subcommands: one entry each; run gets argv from the command name. */
static const struct command {
    const char *name;
    int (*run)(const char *cmd, int argc, char **argv);
} commands[] = {
    {"tune", cmd_tune},
    {"check", cmd_check},
    {"rpc-status", cmd_rpc_status},
    {"export", kt_records_main},
    {"import", kt_records_main},
    {"show", cmd_show},
    {"compile", cmd_compile},
    {"run", cmd_compile},
    {"status", cmd_query},
    {"jobs", cmd_query},
    {"tasks", cmd_query},
    {"best", cmd_query},
    {"report", cmd_report},
    {"pause", cmd_ctl},
    {"resume", cmd_ctl},
};

int
main(int argc, char **argv)
{
    const char *cmd;
    size_t i;

    kt_log_init(getenv("KERNTUNE_DEBUG") ? LOG_DEBUG : LOG_INFO);
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    cmd = argv[1];
    for (i = 0; i < KT_ARRAY_LEN(commands); i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].run(cmd, argc - 1, argv + 1);
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 ||
        strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        printf("kerntune %s\n", KT_VERSION);
        return 0;
    }
    fprintf(stderr, "kerntune: unknown command \"%s\"\n", cmd);
    usage(stderr);
    return 2;
}
