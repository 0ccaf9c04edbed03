/* engine_int.h - private structures shared by engine.c (loop thread) and
 * engine_work.c (thread-pool work).  Not part of the daemon API. */
#ifndef KT_DAEMON_ENGINE_INT_H
#define KT_DAEMON_ENGINE_INT_H

#include "daemon/daemon.h"
#include "daemon/engine.h"

#define KT_ENGINE_MAX_ITERS 16
/* Notes engine_confirm.c may add to a trial: timed_contended (at most one
 * re-timing of a contended trial), timed_also (one confirmation) and
 * timed_beside (that confirmation's timing of the best beside it). */
#define KT_CONFIRM_NOTES 3
/* The fastest programs of each task kept in the cost model's training
 * window (tuning.train_window; costmodel.h kt_train_keep). */
#define KT_ENGINE_TRAIN_PER_TASK 16

/* One candidate of a round: produced on the pool, read on the loop. */
struct kt_cand {
    struct kt_step *steps; /* as the search proposed them */
    int nsteps;
    char *config; /* canonical schedule JSON */
    char hash[17];
    char *source;   /* generated C; NULL when preset_err != 0 */
    int preset_err; /* INSTANTIATION_ERROR found before build */
    char *preset_text;
    float *rows; /* cost-model features, nrows x KT_FEATURE_LEN */
    int nrows;
    char seed_of[17]; /* kt_search_cand.seed_of, stored as a kvs note */
    int transfer;     /* ... named transfer_of instead */
    int revisit;      /* ... revisit_of: seed_of is the trial_no timed apart */
};

/* A program timed while its host's CPUs sat apart that could be its
 * task's best timed close (engine_revisit.c). */
#define KT_MAX_REVISITS 8
struct kt_revisit {
    char *config; /* canonical schedule JSON, owned */
    int64_t trial_no;
};

struct kt_round {
    uv_work_t work;
    struct kt_job *job;
    int task;
    int speculative; /* searched before the previous batch's result */
    int dropped;     /* discard when the work returns */
    int want;        /* candidates asked for */
    /* inputs owned by the work while it runs */
    void *search;               /* the task's struct kt_search (exclusive) */
    struct kt_xgb_model *model; /* NULL: untrained, use random scores */
    const uint64_t *measured;   /* the task's resumed measured set, borrowed */
    size_t nmeasured;
    struct kt_codegen_opts cg;
    struct kt_feedback *feedback; /* measured results the search learns
                                    * first (moved from the task state) */
    int nfeedback;
    struct kt_revisit *revisit; /* timed again as extra candidates */
    int nrevisit;
    /* outputs */
    int rc;
    int feature_errors;    /* candidates whose features failed */
    char feature_err[256]; /* the first such message */
    char err[512];
    int ncand;
    struct kt_cand *c;
    struct kt_tasklog_search stats;
    struct kt_tasklog_ga_iter iters[KT_ENGINE_MAX_ITERS];
    double search_s;
    /* measurement */
    double submitted;
    double measured_s;
    /* The results as the database takes them: the tracker's strings are
     * borrowed during its callback and copied when the batch must wait,
     * for a re-timing or for the database ('owned'). */
    struct kt_trial *trials;
    int nres;
    struct kt_kv *kvs; /* each trial's, plus KT_CONFIRM_NOTES free slots */
    unsigned char *confirmed; /* per trial: timed again (engine_confirm.c) */
    int confirming;           /* the trial being timed again */
    int beside;               /* ... with the best in its batch */
    char beside_hash[17];     /* ... that best's schedule hash */
    double beside_cost;       /* ... and stored cost */
    char *best_config;        /* in: the task's best, as C for it to be */
    char *best_source;        /* timed beside (resumed: out, built here) */
    char best_err[512];       /* ... or why it did not build */
    int owned;
    uv_timer_t *retry; /* storage retry while the database is busy */
    int retries;
};

/* One training example: features of a measured program. */
struct kt_record {
    float *rows;
    int nrows;
    int task;
    double cost; /* seconds; <= 0 for failed trials */
    int refs;    /* the job's window and training snapshots (loop thread) */
};

struct kt_train_job {
    uv_work_t work;
    struct kt_job *job;
    struct kt_record **recs; /* snapshot of pointers (records immutable) */
    int nrecs;
    int rc;
    char err[512];
    double time_s;
};

/* Warm start: features of stored trials, computed on the pool. */
struct kt_warm_job {
    uv_work_t work;
    struct kt_job *job;
    int nrows_in;
    struct {
        int task;       /* ours, or a label group for another workload */
        char *workload; /* key of another job's workload; NULL = ours */
        char *config;
        double cost;
        int sibling; /* tuned for a sibling target (kt_target_siblings):
                      * seeds like another workload's, never as measured */
    } * in;
    struct kt_record *out; /* nout records, rows owned */
    int nout;
    /* the job's own successful stored trials, as feedback that seeds
     * each task's search (steps owned); seed_task -1: the best successful
     * trials of other workloads, offered to every task's search */
    struct kt_feedback *seeds;
    int *seed_task; /* a sibling target's record of task i: i, other set */
    int nseeds;
    int nsibling;       /* rows of sibling targets among in[] */
    int skipped;        /* stored trials that could not be rebuilt */
    char skip_err[256]; /* why the first one was skipped */
    double time_s;
};

/* A measured result a task's search has not learnt yet.  The loop thread
 * never calls into a search (a look-ahead search of the same task may hold
 * it for its whole run): the next search work of the task records these
 * before it searches. */
struct kt_feedback {
    struct kt_step *steps;
    int nsteps;
    double cost;
    int other; /* a schedule of another workload: cost is its seconds per
                * FLOP there (kt_search_seed_other) */
    const struct kt_dag *from; /* other: that workload's DAG when it is a
                                * task of the job (kt__job_dag), else NULL */
};

struct kt_task_state {
    uint64_t *measured; /* hashes stored before this run, until the
                                * task's first search has taken them */
    size_t nmeasured;
    int64_t next_trial_no;
    char *best_config; /* of the task scheduler's best cost */
    char *best_source; /* its C: measured or rebuilt by this run */
    char best_hash[17];
    int best_unbuilt; /* best_config no longer builds: not rebuilt again */
    int64_t errors;   /* (best cost and trials: the scheduler's) */
    void *search;     /* struct kt_search *, created lazily */
    struct kt_feedback *pending; /* for the task's next search work */
    int npending, cappending;
    struct kt_revisit revisit[KT_MAX_REVISITS]; /* oldest first */
    int nrevisit;
};

struct kt_engine {
    struct kt_engine_opts o;
    char *log_dir;
    int njobs;
};

struct kt_job {
    struct kt_engine *e;
    struct kt_model_conf *conf;
    char *name;   /* the config's name */
    char *target; /* kind:key:compiler line (storage's target) */
    char *cc;     /* compiler line for the workers */
    int64_t job_id;
    int64_t budget;
    enum kt_job_state state;
    char error[512];
    struct kt_tasks tasks;
    struct kt_task_state *ts;
    struct kt_task_sched *sched;
    struct kt_xgb_model *model;
    int model_ready;
    struct kt_codegen_opts cg;
    struct kt_measure_opts mo;
    /* training records in arrival order, each immutable: a window that
     * is compacted (kt_train_keep) when it reaches recs_limit */
    struct kt_record **recs;
    int nrecs, caprecs, recs_limit;
    int64_t released_recs; /* left the window or freed with the job */
    /* in flight */
    struct kt_round *searching, *ready, *measuring;
    struct kt_train_job *training;
    int train_again;
    int quiet_measure; /* kt_engine_opts.local_workers applies to it */
    struct kt_warm_job *warming;
    struct kt_peak_probe *probe; /* out (engine_peak.c); only a quiet
                                  * job's rounds wait for it */
    int peak_probed;             /* the probe was submitted (or cannot be) */
    /* figures */
    double started;
    int64_t trials, errors, rounds;
    int64_t resumed_trials; /* trials found in the database at start */
    double device_busy_s;
    int64_t spec_hits, spec_misses;
    int64_t feature_errors, warm_skipped, trainings;
    int64_t confirmed, unconfirmed;
    double peak_flops; /* the target's FMA peak, FLOP/s; 0 = not measured */
    struct kt_tasklog_train last_train;
    kt_job_end_cb end_cb;
    void *end_arg;
    int ended;
    int abandoned;  /* results still to come are not stored */
    int cpus_apart; /* most of the last round's results were timed apart */
};

/* Shared between engine.c (rounds), engine_results.c (measured batches),
 * engine_start.c (jobs) and engine_log.c (the task table); loop thread
 * only. */
void kt__job_kick(struct kt_job *job);
void kt__job_maybe_end(struct kt_job *job);
/* Frees what only tuning needs (searches, training records, the model,
 * results not yet learnt); an ended job keeps its figures and best
 * configs for the control socket. */
void kt__job_release_tuning(struct kt_job *job);
void kt__job_start_training(struct kt_job *job);
void kt__job_add_record(struct kt_job *job, float *rows, int nrows, int task,
                        double cost);
int kt__job_uses_model(const struct kt_job *job);
void kt__job_round_free(struct kt_round *r);
void kt__job_log_round(struct kt_job *job, struct kt_round *r, int next_id);
/* The tracker's callback for a round's batch (engine_results.c). */
void kt__job_measure_done(void *arg, const struct kt_result *res, int n);
/* Stores the measured round (retried while the database refuses) and then
 * applies it (engine_results.c). */
void kt__job_commit_round(struct kt_job *job, struct kt_round *r);
/* Drops a measured round of an abandoned job: its n results not stored. */
void kt__job_round_abandon(struct kt_job *job, struct kt_round *r, int n);
/* Times again, one at a time, the results of round r that would become the
 * task's best; 1 while a re-timing is out (the round is committed when the
 * last one returns), 0 when nothing is left to time (engine_confirm.c). */
int kt__job_confirm_next(struct kt_job *job, struct kt_round *r);
/* Times the target's FMA peak on a worker of the job's key; the result
 * goes to the task scheduler (engine_peak.c). */
void kt__job_probe_peak(struct kt_job *job);
/* The probe's result, if it still comes, is dropped (kt_job_free). */
void kt__job_probe_detach(struct kt_job *job);
/* The cost the search and the cost model learn from trial t: its cpu_cost
 * when the worker marked it contended (docs/measure.md), else its cost. */
double kt__trial_learning_cost(const struct kt_trial *t);

/* engine_revisit.c (loop thread): notes where round r's results were
 * timed and keeps its programs worth timing again once the CPUs are
 * close (best: the task's best after r); moves some into the task's next
 * round r while they are close (its search work appends them to its
 * candidates, engine_work.c); frees n of them. */
void kt__revisit_collect(struct kt_job *job, struct kt_round *r, double best);
void kt__revisit_take(struct kt_job *job, struct kt_round *r);
void kt__revisit_free(struct kt_revisit *v, int n);

/* Work callbacks (engine_work.c); they touch only their own struct. */
void kt__engine_search_work(uv_work_t *w);
void kt__engine_train_work(uv_work_t *w);
void kt__engine_warm_work(uv_work_t *w);
/* Creates the search object for task i of job (loop thread). */
void *kt__engine_search_new(struct kt_job *job, int task, char *err,
                            size_t errlen);
void kt__engine_search_free(void *search);
/* uv_queue_work on the job's loop; on failure the libuv error with a
 * message in err (the caller frees what it meant to queue and fails the
 * job: the work never runs, so nothing may wait for it). */
int kt__job_queue_work(struct kt_job *job, uv_work_t *w, uv_work_cb work,
                       uv_after_work_cb after, char *err, size_t errlen);
void kt__job_fail(struct kt_job *job, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void kt__feedback_free(struct kt_feedback *f, int n);
/* Queues a result for the task's next search work (takes steps). */
void kt__task_queue_feedback(struct kt_task_state *ts, struct kt_step *steps,
                             int nsteps, double cost);
/* Queues a copy of another workload's schedule (f->other) for the task's
 * next search work. */
void kt__task_queue_other(struct kt_task_state *ts,
                          const struct kt_feedback *f);
/* Read-only view the work callbacks need. */
const struct kt_dag *kt__job_dag(const struct kt_job *job, int task);
const struct kt_model_conf *kt__job_conf(const struct kt_job *job);
struct kt_xgb_model *kt__job_model(const struct kt_job *job);
int kt__job_vector_bytes(const struct kt_job *job);
/* A job that times its batches with nothing beside them (quiet_measure)
 * searches alone too, on every core; others score on one thread, beside
 * the timing of their batches. */
int kt__job_search_threads(const struct kt_job *job);

#endif /* KT_DAEMON_ENGINE_INT_H */
