/* daemon.h - the pieces of kerntuned around the tuning engine: systemd
 * notification (sd_notify), the control socket (a line-oriented JSON
 * protocol on a Unix socket, server and blocking client) and the task-table
 * log that people `tail -f`.  Operations are described in docs/daemon.md.
 *
 * Threading: everything except the control client runs on the libuv loop
 * thread.  kt_ctl_request and kt_ctl_print are blocking helpers for the
 * `kerntune` CLI.  The notify functions may be called from any thread. */
#ifndef KT_DAEMON_H
#define KT_DAEMON_H

#include <stdint.h>
#include <stdio.h>

#include <cJSON.h>
#include <uv.h>

#include "common/common.h"

/* ---- systemd notification ---------------------------------------------- */

/* Each function sends one datagram to $NOTIFY_SOCKET (a path, or an
 * abstract socket when it starts with '@').  They return 1 when the message
 * was sent, 0 when NOTIFY_SOCKET is unset (not supervised: a no-op), and a
 * negative kt_err (-errno) when sending failed.  Built with libsystemd
 * (KT_HAVE_SYSTEMD) they go through sd_notify(3); otherwise through
 * kt_notify_send_raw.  The environment is never modified. */
int kt_notify_ready(void);    /* "READY=1" */
int kt_notify_stopping(void); /* "STOPPING=1" */
int kt_notify_watchdog(void); /* "WATCHDOG=1" */
/* "RELOADING=1\nMONOTONIC_USEC=<CLOCK_MONOTONIC in us>" (systemd 252 wants
 * READY=1 once the reload is done, whether it succeeded or not). */
int kt_notify_reloading(void);
/* "STATUS=<text>"; the text is cut at the first newline and to 1 KiB. */
int kt_notify_status(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* The watchdog interval in microseconds from $WATCHDOG_USEC (when
 * $WATCHDOG_PID is unset or names this process), else 0.  Ping with
 * kt_notify_watchdog at least every usec/2 (a uv_timer_t on the loop). */
uint64_t kt_notify_watchdog_usec(void);
/* Sends msg verbatim to $NOTIFY_SOCKET with a plain AF_UNIX SOCK_DGRAM
 * socket (no libsystemd).  Same return values.  Used when libsystemd is
 * absent; exported so the tests cover it in every build. */
int kt_notify_send_raw(const char *msg);

/* ---- control socket: server -------------------------------------------- */

/* Protocol (docs/daemon.md): the client writes one JSON object per line,
 * {"cmd":"status"} or {"cmd":"tasks","job":"resnet50"}, and reads one JSON
 * object per line back, in order.  Every response carries "ok" (true or
 * false) and "cmd"; failures carry "error" (a sentence).  Requests longer
 * than KT_CTL_MAX_LINE bytes get an error response and the connection is
 * closed; malformed JSON gets an error response and the connection stays. */
#define KT_CTL_MAX_LINE (64 * 1024)
/* Responses larger than this are replaced by an error response. */
#define KT_CTL_MAX_RESPONSE (16 * 1024 * 1024)
/* A client whose unread responses exceed this is disconnected. */
#define KT_CTL_MAX_BACKLOG (4 * 1024 * 1024)
/* Default timeout of kt_ctl_request. */
#define KT_CTL_TIMEOUT_MS 10000

struct kt_ctl;

/* Fills response for request, synchronously, on the loop thread.  request
 * is a JSON object with a non-empty string "cmd" (borrowed; valid during
 * the call).  response (owned by the server) arrives holding "ok": true,
 * "cmd" and the request's "id" if it had one; the handler adds its fields,
 * and to fail calls kt_ctl_fail (an "error" member alone also makes "ok"
 * false).  Unknown commands are the handler's to refuse. */
typedef void (*kt_ctl_handler_fn)(void *arg, const cJSON *request,
                                  cJSON *response);

/* Creates the control socket at path (mode 0600, whatever the umask) and
 * starts accepting clients on loop.  An existing socket file is removed only
 * when nothing answers on it; if a process is listening, returns
 * -EADDRINUSE ("another kerntuned is listening on PATH").  Any other kind
 * of file at path is left alone (-EEXIST).  Free with kt_ctl_close.  On
 * failure *out is NULL and err says why; in the rare case of a libuv error
 * after the handle was created, the loop holds a closing handle (run it
 * before uv_loop_close).  Changes the process umask for the bind, so call
 * it before starting threads that create files.  The process must ignore
 * SIGPIPE (kerntuned does): responses are written to clients that may have
 * gone away. */
int kt_ctl_new(struct kt_ctl **out, uv_loop_t *loop, const char *path,
               kt_ctl_handler_fn fn, void *arg, char *err, size_t errlen);
/* Stops listening, closes every client connection (unsent responses are
 * dropped), removes the socket file and frees c once its handles are
 * closed: run the loop until it is empty, after which uv_loop_close
 * returns 0.  NULL is a no-op. */
void kt_ctl_close(struct kt_ctl *c);
/* Counters for tests and status (any pointer may be NULL): clients now
 * connected, requests answered, requests rejected (malformed, oversize). */
void kt_ctl_counters(const struct kt_ctl *c, unsigned *clients,
                     unsigned *requests, unsigned *rejected);
/* Marks response as failed: sets "ok": false and "error": the message. */
void kt_ctl_fail(cJSON *response, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- control socket: client (the kerntune CLI) -------------------------- */

/* Connects to the control socket at path, sends request_json (one JSON
 * object; re-printed on one line) and reads one response line within
 * KT_CTL_TIMEOUT_MS.  On success *response_json is the response text
 * (caller frees with free()).  Errors: -ENOENT / -ECONNREFUSED (no daemon),
 * KT_ETIMEDOUT, KT_EPARSE (request is not a JSON object), KT_EPROTO
 * (connection closed without a full line), KT_ETOOBIG; err says which. */
int kt_ctl_request(const char *path, const char *request_json,
                   char **response_json, char *err, size_t errlen);
/* As kt_ctl_request with an explicit timeout in milliseconds (> 0). */
int kt_ctl_request_timeout(const char *path, const char *request_json,
                           int timeout_ms, char **response_json, char *err,
                           size_t errlen);
/* Sends {"cmd": cmd, "job": job} (job may be NULL) with kt_ctl_request
 * and returns the parsed response (caller frees with cJSON_Delete), or NULL
 * with err saying why (no daemon, timeout, malformed JSON). */
cJSON *kt_ctl_ask(const char *path, const char *cmd, const char *job, char *err,
                  size_t errlen);
/* NULL when response says "ok": true, else its "error" (or a generic
 * sentence); borrowed from response. */
const char *kt_ctl_error(const cJSON *response);
/* Renders the response to cmd ("status", "jobs", "tasks", "best", "pause",
 * "resume", "rpc-status") as readable text: tables for lists, key: value
 * lines otherwise; unknown commands and fields are printed as JSON.
 * Returns 0, or KT_EINVAL when the response says "ok": false (the error is
 * printed as "error: ..."), or KT_EPROTO when it is not an object. */
int kt_ctl_print(FILE *out, const char *cmd, const cJSON *response);

/* Adds a job's "trials_target", "percent" and "eta_s" (kt_progress; -1
 * unknown, 0 done) to a control response object o. */
void kt_ctl_add_progress(cJSON *o, int64_t trials, int64_t budget,
                         int64_t resumed, double elapsed_s);

/* ---- task-table log ------------------------------------------------------ */

/* One row of the task table (the task scheduler's view of a task). */
struct kt_tasklog_task {
    int id;
    const char *name; /* NULL or "" prints "-" */
    double weight;
    double latency_ms; /* best measured cost; < 0: none yet ("-") */
    double gflops;     /* at the best cost; < 0: none yet ("-") */
    int64_t trials;    /* measured trials of this task */
    int64_t errors;    /* trials that failed (any err_no) */
};

/* The "[ Task Scheduler ]" block. */
struct kt_tasklog_table {
    int ntasks;
    const struct kt_tasklog_task *tasks;
    double total_latency_ms; /* weighted sum; < 0 until every task has a
                                valid cost ("-") */
    int64_t trials;          /* total measured trials of the job */
    double used_s;           /* tuning time so far */
    int next_id;             /* the task tuned next; -1 when none */
    int64_t budget;          /* the job's trial budget; <= 0: unknown (no
                                "Progress:" line) */
    double eta_s;            /* kt_progress's eta_s */
};

/* One pass of the evolutionary search ("GA Iter" line). */
struct kt_tasklog_ga_iter {
    int iter;
    double max_score;
    double min_score; /* the worst score kept in the output heap */
    int64_t pop;
    int64_t mut_ok;   /* #M+: successful mutations per pass */
    int64_t mut_fail; /* #M-: invalid mutations per pass */
};

/* The "[ Search ]" block. */
struct kt_tasklog_search {
    int64_t sketches;     /* > 0 prints "Generate Sketches\t\t#s: N" */
    int64_t init_samples; /* initial population size */
    int64_t init_fail;    /* fail_ct while sampling it */
    double init_s;
    int niters;
    const struct kt_tasklog_ga_iter *iters;
    int64_t out_states; /* states returned by the search */
    double time_s;      /* the whole evolutionary search */
    double best_score;  /* best predicted score of the output */
};

/* Outcome of one step of one candidate, for the "[ Measure ]" marks. */
enum kt_tasklog_mark {
    KT_MARK_NONE = 0, /* the step did not happen (run after a
                                failed build): prints nothing */
    KT_MARK_OK,       /* '.' for build, '*' for run */
    KT_MARK_ERROR,    /* ".E" / "*E" */
    KT_MARK_TIMEOUT   /* ".T" / "*T" */
};
struct kt_tasklog_cand {
    int build; /* enum kt_tasklog_mark */
    int run;   /* enum kt_tasklog_mark */
};

/* The "[ Measure ]" block: Ansor's progress marks.  Candidates go in
 * batches; each batch prints its build marks, then its run marks, then a
 * newline (Ansor's LocalBuilder then RPCRunner). */
struct kt_tasklog_measure {
    int ncand;
    const struct kt_tasklog_cand *cand;
    int batch; /* candidates per batch; <= 0: one batch */
    double time_s;
};

/* The "[ Train cost model ]" block. */
struct kt_tasklog_train {
    double time_s;
    int64_t records; /* training records (all tasks) */
};

/* One round of a job.  Optional blocks are NULL when the round had none. */
struct kt_tasklog_round {
    const char *job;
    int64_t round;    /* 1-based round number of the job */
    double wall_time; /* seconds since the epoch (kt_wall_now) */
    struct kt_tasklog_table table;
    const struct kt_tasklog_search *search;
    const struct kt_tasklog_measure *measure;
    const struct kt_tasklog_train *train;
};

/* A job's way to its trial budget.  The rate is this run's: trials found
 * in the database at start (resumed) took no time now. */
struct kt_progress {
    int64_t trials, budget;
    double percent; /* of the budget, 0..100; < 0 when the budget is unknown */
    double eta_s;   /* seconds left at this run's rate; 0 when done; < 0
                       unknown (nothing measured yet in this run) */
};
void kt_progress_compute(struct kt_progress *p, int64_t trials, int64_t budget,
                         int64_t resumed, double elapsed_s);
/* "2999/20000 trials (15.0%), ETA 1h02m" ("ETA -" unknown, "done"). */
void kt_progress_format(struct kt_buf *b, const struct kt_progress *p);
/* A duration as "45s", "12m05s", "3h07m" or "2d04h". */
void kt_duration_format(char *out, size_t len, double s);

/* Options of the task table layout. */
#define KT_TASKLOG_ANSOR 1 /* only Ansor's four columns */

/* Appends the task table (header, rows, the "Estimated total latency"
 * line) to b, in Ansor's layout plus the Errors, Weight and Task columns on
 * the right and, when the budget is known, a "Progress:" line (trials /
 * budget, percent, ETA) unless flags has KT_TASKLOG_ANSOR. */
void kt_tasklog_format_table(struct kt_buf *b, const struct kt_tasklog_table *t,
                             int flags);
/* Appends a whole round block (round line, task table, search, measure and
 * train sections) to b. */
void kt_tasklog_format_round(struct kt_buf *b, const struct kt_tasklog_round *r,
                             int flags);
/* Appends one line of total_latency.tsv for the round to b (Ansor's
 * LogEstimatedLatency: "ElapsedTime(s)\t%.0f\tEstimatedLatency(ms)\t%s\t
 * Trials\t%d"). */
void kt_tasklog_format_tsv(struct kt_buf *b, const struct kt_tasklog_table *t);
/* Appends the round block to <log_dir>/<job>.log and its line to
 * <log_dir>/<job>.total_latency.tsv, each with one write(2) on a file
 * opened O_APPEND for this call (so log rotation needs no signal).  Files
 * are created with mode 0640 (less the umask).  KT_EINVAL for a job name
 * that is empty, starts with '.' or holds '/'; -errno when a file cannot
 * be opened or written; err names the file. */
int kt_tasklog_write(const char *log_dir, const struct kt_tasklog_round *r,
                     int flags, char *err, size_t errlen);

#endif /* KT_DAEMON_H */
