/* measure.h - the daemon side of measurement: the tracker that RPC workers
 * (kerntune-rpc) connect to, batches of candidates built and timed on those
 * workers, local worker processes, and the rpc-status query.
 *
 * Everything here runs on the libuv loop thread and only does I/O:
 * compiling and timing happen in the worker processes.  The wire protocol is
 * specified in docs/protocol.md, the measurement rules in docs/measure.md. */
#ifndef KT_MEASURE_H
#define KT_MEASURE_H

#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "measure/worker/worker.h" /* kt_measure_errno, kt_measure_errname */


/* How each candidate is built and timed (TVM's runner options). */
struct kt_measure_opts {
    int number;           /* calls per repeat (raised for min_repeat_ms) */
    int repeat;           /* repeats; cost drops min and max when >= 3 */
    int min_repeat_ms;    /* a repeat lasts at least this long */
    int cooldown_ms;      /* sleep between repeats */
    int flush_cache;      /* write 64 MiB before each repeat */
    int build_timeout_ms; /* the compiler's deadline (BUILD_TIMEOUT) */
    int run_timeout_ms;   /* load + check + timing deadline (RUN_TIMEOUT) */
    int threads;          /* kt_set_threads(n); 0 leaves the default */
    long long mem_mb;     /* runner address-space limit; 0 = none */
    double tolerance;     /* relative L2 error bound (WRONG_ANSWER) */
    uint64_t seed;        /* input data seed */
    double stop_above_s;  /* early stop: a candidate whose first repeat is
                           * slower per call than this gets no more
                           * repeats; 0 = off (docs/measure.md) */
    double stop_ratio;    /* early stop also above this many times the best
                           * cost measured so far in the batch; 0 = off */
    double settle;        /* repeat 3: the first two repeats this close
                           * (relative) end the timing; 0 = off */
    /* Runs held at most this long per spell of the host's CPUs apart; 0:
     * none, results marked contended (docs/measure.md, "Thread
     * placement"). */
    double placement_wait_s;
};
/* number 1, repeat 3, min_repeat_ms 100, timeouts 15 s / 10 s, threads 0,
 * mem_mb 2048, tolerance 1e-4, seed 1. */
void kt_measure_default_opts(struct kt_measure_opts *o);

/* One candidate of a batch.  Strings are copied by kt_tracker_submit. */
struct kt_candidate {
    const char *source; /* C text with the kernel ABI (ir/ir.h) */
    const char *cc;     /* compiler command, e.g. "gcc -O3 -fopenmp";
                             "-shared -fPIC -o out.so src.c" is appended */
    int preset_err_no;  /* non-zero: report this error without building
                             (INSTANTIATION_ERROR from lowering) */
    const char *preset_err_text;
    const char *avoid_worker; /* NULL, or a worker's name: run on another
                                 worker of the key when one is connected
                                 (re-timing a result of that worker) */
};

struct kt_tracker;
/* Called once per batch on the loop thread with n results in submission
 * order (struct kt_result, common/common.h); results, their strings and
 * notes are borrowed until it returns. */
typedef void (*kt_measure_done_cb)(void *arg, const struct kt_result *res,
                                   int n);

/* A token that is the only one accepted for workers of key. */
struct kt_key_token {
    const char *key;
    const char *token;
};

/* Workers of build_key may also build what workers of key run (a shared
 * build host for several boards).  Without such an entry an object is
 * built by a worker of the key that runs it. */
struct kt_key_builder {
    const char *key;
    const char *build_key;
};

struct kt_tracker_opts {
    const char *host;  /* listen address, e.g. "127.0.0.1" */
    int port;          /* 0 = ephemeral (see kt_tracker_port) */
    const char *token; /* shared token, accepted for every key that
                               has no token of its own; NULL = a random
                               one that no worker knows */
    const struct kt_key_token *key_tokens; /* copied; at most 32 */
    int nkey_tokens;
    const struct kt_key_builder *key_builders; /* copied; at most 32 */
    int nkey_builders;
    int heartbeat_lost_ms;  /* a silent worker is lost after this (10000) */
    int max_retries;        /* re-queues of a lost worker's job (2) */
    int serialize_hosts;    /* 1: one timing run at a time per host and no
                               builds beside it (default 1) */
    int hello_timeout_ms;   /* an unauthenticated peer has this long to
                               prove the token (10000) */
    int max_pending;        /* unauthenticated connections at once; more
                               are closed at accept (64) */
    size_t write_queue_max; /* bytes queued to a peer that is not reading
                               before it is dropped (8 MiB) */
    int client_idle_ms;     /* an authenticated client (rpc-status) that
                               sends nothing this long is closed (30000) */
    /* built objects kept for candidates submitted again (64 MiB) */
    size_t object_cache_bytes;
};
void kt_tracker_default_opts(struct kt_tracker_opts *o);

/* Creates a tracker listening on o->host:o->port on loop.  Copies o.
 * Free with kt_tracker_close. */
int kt_tracker_new(struct kt_tracker **out, uv_loop_t *loop,
                   const struct kt_tracker_opts *o, char *err, size_t errlen);
/* The bound port (useful with port 0). */
int kt_tracker_port(const struct kt_tracker *t);
/* The token workers must prove (borrowed; valid until close). */
const char *kt_tracker_token(const struct kt_tracker *t);
/* Authenticated workers for key (all keys when NULL). */
int kt_tracker_nworkers(const struct kt_tracker *t, const char *key);
/* Counters for tests and status (any pointer may be NULL): connections
 * refused by authentication or a mismatched ABI, connections closed for malformed frames,
 * workers lost, job results received. */
void kt_tracker_counters(const struct kt_tracker *t, unsigned *refused,
                         unsigned *bad_frames, unsigned *lost,
                         unsigned *results);
/* Candidates that went to their run with an object built earlier (the
 * same key, compiler line and source), without a build. */
unsigned kt_tracker_builds_reused(const struct kt_tracker *t);

/* The target triple of key's jobs ("aarch64-linux-gnu", kt_abi_of_compiler
 * of their compiler): from now on a worker of key with the run role must
 * match it (kt_abi_match) or it is refused at registration, and one
 * already registered is dropped; each refusal is logged with both triples.
 * KT_EINVAL when key already has a different triple (logged; the first
 * stays) or the table is full. */
int kt_tracker_set_key_abi(struct kt_tracker *t, const char *key,
                           const char *abi);

/* Queues n candidates for the workers of key; cb runs once all have a
 * result (before this returns when every candidate has a preset error).
 * Copies everything.  KT_EINVAL for an empty key or bad opts; after an
 * error cb is never called. */
int kt_tracker_submit(struct kt_tracker *t, const char *key,
                      const struct kt_candidate *c, int n,
                      const struct kt_measure_opts *o, kt_measure_done_cb cb,
                      void *arg, char *err, size_t errlen);

/* Starts n kerntune-rpc processes (rpc_path; NULL = kt_measure_find_rpc)
 * with --key=key that connect back over 127.0.0.1 with a token of their
 * own in their environment: a random one bound to key (unless key already
 * has a configured token, which they then get), so a holder of the shared
 * token cannot register as a local worker.  Their stderr is the daemon's.
 * Local workers that exit are started again with backoff. */
int kt_tracker_spawn_local(struct kt_tracker *t, int n, const char *rpc_path,
                           const char *key, const char *roles, char *err,
                           size_t errlen);
/* Pids of the local workers (for tests); returns how many were written. */
int kt_tracker_local_pids(const struct kt_tracker *t, int *pids, int max);

/* Stops listening, fails every unfinished candidate with UNKNOWN_ERROR
 * ("tracker closed"; batch callbacks run), closes every connection,
 * stops local workers (SIGTERM, SIGKILL after 3 s) and frees t once all
 * handles are closed: run the loop until it is empty, after which
 * uv_loop_close returns 0.  NULL is a no-op. */
void kt_tracker_close(struct kt_tracker *t);

/* Finds kerntune-rpc: $KERNTUNE_RPC, then next to the running executable,
 * then "kerntune-rpc" (PATH). */
void kt_measure_find_rpc(char *out, size_t len);

/* `kerntune rpc-status`: connects to the tracker at host:port, proves the
 * token (may be NULL or "" for a tracker without one), sends status_req and
 * prints the workers by key with their state, then the queues, like TVM's
 * query_rpc_tracker.  Blocking; for the CLI, not the loop thread. */
int kt_rpc_status(const char *host, int port, const char *token, FILE *out,
                  char *err, size_t errlen);

#endif /* KT_MEASURE_H */
