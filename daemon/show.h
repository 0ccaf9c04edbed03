/* show.h - `kerntune show`: a stored trial's schedule rebuilt from the
 * tuning database and printed as the loop tree and the C it generates, with
 * what was measured.  Reads the database file directly (read-only, no
 * daemon needed); also used by the benchmark suite to rebuild the best
 * kernel of a task. */
#ifndef KT_SHOW_H
#define KT_SHOW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/common.h"
#include "ir/ir.h"

struct sqlite3;

/* One row of logs (docs/sql.md); strings owned, freed by kt_shown_free. */
struct kt_shown {
    int64_t id;
    char *task_name;
    char *job_name; /* NULL for a trial without a job */
    char *target;
    char *workload;
    char *workload_hash;
    char *config;   /* the schedule's canonical JSON */
    char *err_text; /* NULL on success */
    int err_no;
    int64_t trial_no;
    double cost; /* seconds; 0 for failed trials */
};

/* Opens the database at path read-only (it must exist; it is never created
 * or upgraded).  Close with sqlite3_close. */
int kt_show_open_db(const char *path, struct sqlite3 **out, char *err,
                    size_t errlen);
/* Reads trial id.  KT_ENOENT when there is no such trial. */
int kt_show_load_trial(struct sqlite3 *db, const char *path, int64_t id,
                       struct kt_shown *out, char *err, size_t errlen);
/* Reads the fastest successful trial of workload_hash (any target).
 * KT_ENOENT when it has none. */
int kt_show_load_best(struct sqlite3 *db, const char *path,
                      const char *workload_hash, struct kt_shown *out,
                      char *err, size_t errlen);
void kt_shown_free(struct kt_shown *t);

/* Rebuilds t's DAG from its workload key and replays its schedule.  The
 * caller frees *dag and *st (kt_dag_free, kt_state_free). */
int kt_show_replay(const struct kt_shown *t, struct kt_dag **dag,
                   struct kt_state **st, char *err, size_t errlen);
/* The complete build unit a worker compiles for t (ABI of
 * kt_codegen_module).  Caller frees *src. */
int kt_show_module(const struct kt_shown *t, const struct kt_codegen_opts *o,
                   char **src, char *err, size_t errlen);

/* `kerntune show`; argv[0] is "show".  Returns the exit status. */
int kt_show_main(int argc, char **argv);

/* `kerntune export` / `kerntune import` (records_cli.c); cmd is "export"
 * or "import", argv[0] the command.  Returns the exit status. */
int kt_records_main(const char *cmd, int argc, char **argv);

#endif /* KT_SHOW_H */
