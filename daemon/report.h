/* report.h - what the tuning database says about its jobs, without the
 * daemon: `kerntune status|jobs|tasks|best --db FILE` (the control
 * socket's responses built from the file) and `kerntune report`, one
 * self-contained HTML page with inline SVG plots (docs/daemon.md).
 *
 * Everything here reads the database read-only (kt_show_open_db), so it runs
 * beside a tuning daemon: WAL readers never block its writes. */
#ifndef KT_REPORT_H
#define KT_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cJSON.h>

#include "common/common.h"

struct sqlite3;

/* One task of a job (tasks table) and its results. */
struct kt_rep_task {
    char *name;
    char *workload_hash;
    double weight, flops;
    double best_cost;  /* seconds, fastest err_no=0 trial of the workload on
                          the job's target (any job); 0 = none */
    char *best_config; /* NULL = none */
    int64_t trials;    /* this job's trials of the task */
    int64_t errors;    /* of which failed */
};

/* One trial of a job, in the order it finished. */
struct kt_rep_trial {
    int task; /* index into tasks */
    int err_no;
    int worker; /* index into workers; -1 = unknown */
    double cost;
    double started, finished; /* Unix seconds */
};

struct kt_rep_job {
    int64_t id;
    char *name, *model, *target, *state;
    double created, updated;
    int64_t budget; /* from the model file when it still loads, else 0 */
    int ntasks;
    struct kt_rep_task *tasks;
    int64_t trials, errors; /* of this job */
    double first_started, last_finished;
    /* Filled when loaded with KT_REP_TRIALS: */
    int ntrials;
    struct kt_rep_trial *trial;
    int nworkers;
    char **workers;
};

struct kt_rep {
    char *db_path;
    int njobs;
    struct kt_rep_job *jobs;
};

#define KT_REP_TRIALS 1 /* load every trial (the report's plots) */

/* Reads the jobs of the database at db_path (opened read-only): all of them
 * when job is NULL, else the one called job (KT_ENOENT "no job" when there
 * is none).  Free with kt_rep_free. */
int kt_rep_load(const char *db_path, const char *job, int flags,
                struct kt_rep *out, char *err, size_t errlen);
void kt_rep_free(struct kt_rep *r);

/* The response the daemon gives to cmd ("status", "jobs", "tasks" or
 * "best"; daemon.h's control protocol) built from r, so kt_ctl_print and
 * --json treat both the same.  tasks and best need job (a name in r). */
cJSON *kt_rep_response(const struct kt_rep *r, const char *cmd,
                       const char *job);

/* Estimated total latency of a job (sum of weight x best cost of every
 * task, in ms) after each of its trials: curve[i] after trial i, -1 while a
 * task has no valid program.  curve has ntrials entries. */
void kt_rep_curve(const struct kt_rep_job *j, double *curve);

/* Writes the HTML report of r (loaded with KT_REP_TRIALS) to out. */
void kt_report_html(FILE *out, const struct kt_rep *r);

/* `kerntune status|jobs|tasks|best [--db FILE] [--json] [--socket PATH]`
 * and `kerntune report`; argv[0] is the command.  Return the exit
 * status. */
int kt_query_main(const char *default_socket, int argc, char **argv);
int kt_report_main(const char *default_socket, int argc, char **argv);

#endif /* KT_REPORT_H */
