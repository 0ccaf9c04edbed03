/* engine.h - the tuning engine shared by `kerntune tune` and kerntuned.
 *
 * A job is one model config being tuned.  Each round the job's task
 * scheduler picks a task, the search (on the libuv thread pool) proposes a
 * batch of never-measured candidates and generates their C, the tracker
 * builds and times them on workers, the batch is committed to SQLite in one
 * transaction, and only then are the results used: the task scheduler, the
 * search and the cost model (retrained on the pool) learn from them and the
 * task-table log gets a round.  While a batch is being measured the next
 * round is already searched (for the task the scheduler would pick if the
 * batch brought no gain), so the workers rarely wait.
 *
 * Everything here runs on the loop thread except the work callbacks in
 * engine_work.c, which touch only their own round or training snapshot. */
#ifndef KT_DAEMON_ENGINE_H
#define KT_DAEMON_ENGINE_H

#include <stdint.h>
#include <uv.h>

#include "config/config.h"
#include "costmodel/costmodel.h"
#include "measure/measure.h"
#include "scheduler/scheduler.h"
#include "storage/storage.h"

struct kt_engine;
struct kt_job;

/* How long the loop thread waits for a database someone else is writing:
 * short, because the engine keeps an uncommitted batch and retries it with
 * backoff, and the loop must keep serving workers meanwhile. */
#define KT_ENGINE_DB_BUSY_MS 250

enum kt_job_state {
    KT_JOB_STARTING, /* resuming from the database, warm start */
    KT_JOB_RUNNING,
    KT_JOB_PAUSED,
    KT_JOB_STOPPING, /* no new rounds; waiting for the batch in flight */
    KT_JOB_DONE,     /* budget used, or every task finished */
    KT_JOB_FAILED    /* could not go on (message in the job) */
};

/* Queues a batch for measurement with the contract of kt_tracker_submit
 * (cb runs once on the loop thread with n results, unless this fails). */
typedef int (*kt_engine_submit_fn)(void *arg, const char *key,
                                   const struct kt_candidate *c, int n,
                                   const struct kt_measure_opts *o,
                                   kt_measure_done_cb cb, void *cb_arg,
                                   char *err, size_t errlen);

struct kt_engine_opts {
    uv_loop_t *loop;
    struct kt_storage *db;      /* borrowed; loop thread only */
    struct kt_tracker *tracker; /* borrowed */
    kt_engine_submit_fn submit; /* NULL: kt_tracker_submit on tracker */
    void *submit_arg;
    const char *log_dir; /* task-table logs; NULL = none */
    int echo_log;        /* also write each round's table to stderr */
    /* The key of the workers that time kernels on this host (NULL: none):
     * a job of that key whose kernels use every CPU does no pool work
     * (search, training) while its batch is measured, since a kernel thread
     * that waits for a CPU makes every parallel region cost a scheduler
     * time slice (docs/measure.md). */
    const char *local_key;
};

/* Called when a job reaches DONE, FAILED or is stopped (state tells). */
typedef void (*kt_job_end_cb)(void *arg, struct kt_job *job);

int kt_engine_new(struct kt_engine **out, const struct kt_engine_opts *o);
/* Frees the engine; every job must have ended (kt_job_stop + its end
 * callback) first. */
void kt_engine_free(struct kt_engine *e);

/* Starts tuning conf (the engine takes ownership of it) with at most
 * 'trials' trials (0 = the config's budget).  The job resumes from the
 * database: its trial counts, best programs and measured set come back, and
 * the cost model is warm-started from every stored trial of the target. */
int kt_job_start(struct kt_engine *e, struct kt_model_conf *conf,
                 int64_t trials, kt_job_end_cb cb, void *arg,
                 struct kt_job **out, char *err, size_t errlen);
void kt_job_pause(struct kt_job *job);
void kt_job_resume(struct kt_job *job);
/* Stops starting rounds; a batch being measured is committed when its
 * results arrive, one being searched is dropped (nothing was measured).
 * The end callback runs once nothing is in flight. */
void kt_job_stop(struct kt_job *job);
/* Gives up on the batch in flight: when its results arrive (or the tracker
 * fails them on close) they are dropped, not stored, so the candidates are
 * measured again after a restart.  For a stop that cannot wait. */
void kt_job_abandon(struct kt_job *job);
/* 1 until the end callback has run. */
int kt_job_active(const struct kt_job *job);
/* Frees an ended job. */
void kt_job_free(struct kt_job *job);

const char *kt_job_name(const struct kt_job *job);
enum kt_job_state kt_job_state(const struct kt_job *job);
const char *kt_job_state_name(enum kt_job_state s);
const char *kt_job_error(const struct kt_job *job);
const struct kt_model_conf *kt_job_conf(const struct kt_job *job);

/* Progress figures for status lines, the control socket and tests. */
struct kt_job_stats {
    int ntasks;
    int64_t trials; /* measured this run (all err_no) */
    int64_t budget;
    int64_t resumed; /* of trials: found in the database at start */
    int64_t errors;
    int64_t rounds;
    double total_latency_ms; /* sum weight x best latency; -1 = unknown */
    double elapsed_s;
    double device_busy_s; /* time with a batch at the workers */
    int64_t speculation_hits, speculation_misses;
    int64_t feature_errors; /* measured programs without features */
    int64_t warm_skipped;   /* stored trials the warm start could not rebuild */
    int64_t trainings;      /* cost-model trainings that succeeded */
    int64_t trained_records; /* records the current model learnt from */
    int64_t records;         /* training records gathered */
    int64_t confirmed;       /* new bests timed again and kept */
    int64_t unconfirmed;     /* new bests whose re-timing failed (err_no 8) */
    double peak_gflops;      /* the target's FMA peak; 0 = not measured */
    double roof_gflops;      /* the scheduler's roofline: the peak, or the
                              * fastest task's speed above it */
};
void kt_job_get_stats(const struct kt_job *job, struct kt_job_stats *s);

/* Per task figures (i < ntasks). */
struct kt_job_task_info {
    const char *name;
    double weight;
    double flops;
    double best_cost;        /* seconds; 0 = none yet */
    double latency_ms;       /* best, -1 = none yet */
    double gflops;           /* at the best, -1 = none yet */
    const char *best_config; /* NULL = none yet */
    int64_t trials;
    int64_t errors;
};
void kt_job_task(const struct kt_job *job, int i, struct kt_job_task_info *out);

#endif /* KT_DAEMON_ENGINE_H */
