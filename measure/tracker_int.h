/* tracker_int.h - private to measure/: the tracker's state, shared by
 * tracker.c (dispatch of messages, timeouts, status), tracker_conn.c
 * (connections, framing), tracker_auth.c (the handshake), dispatch.c
 * (which worker takes a job), jobs.c
 * (batches, queues, results), objcache.c (objects built before) and
 * local.c (local workers). */
#ifndef KT_TRACKER_INT_H
#define KT_TRACKER_INT_H

#include "measure/measure.h"

#define KT__MAX_LOCAL 16
#define KT__MAX_KEY_TOKENS 32
#define KT__MAX_KEY_ABIS 64
#define KT__LOCAL_BACKOFF_MIN_MS 500
#define KT__LOCAL_BACKOFF_MAX_MS 60000
#define KT__LOCAL_STABLE_S 60.0 /* a worker up this long resets backoff */

enum { KT__CONN_AUTH, KT__CONN_WORKER, KT__CONN_CLIENT, KT__CONN_CLOSING };
enum { KT__JOB_QUEUED, KT__JOB_ACTIVE, KT__JOB_DONE };
enum { KT__STAGE_BUILD, KT__STAGE_RUN };

struct kt__conn {
    uv_tcp_t tcp; /* tcp.data = this */
    struct kt_tracker *t;
    struct kt__conn *next;
    int state;
    char peer[80];
    char nonce[65];
    struct kt_session sess; /* sealed frames after welcome */
    struct kt_reader rd;    /* frames in; small until hello */
    double last_rx;
    double since;
    /* Worker identity (after hello). */
    char name[96];
    char key[64];
    char host[64];
    char arch[32];
    char abi[64]; /* target triple of the worker binary; "?" unknown */
    int roles;
    int jobs;
    int cores;
    long pid;
    int nbuild;
    int nrun;
    unsigned long done;
};

/* Where a host's kernels' threads sit (hold.c, docs/measure.md, "Thread
 * placement"): the cache line round trip between its first two CPUs
 * while quiet, and the hold on its runs while they are far apart. */
#define KT__MAX_HOSTS 64
#define KT__XCPU_WINDOW_S 300.0 /* the quiet level forgets after 2 windows */
#define KT__XCPU_APART 2.0      /* this many times the quiet level: apart */
#define KT__HOLD_MIN_MS 500
#define KT__HOLD_MAX_MS 2000

struct kt__host_place {
    char host[64];
    double quiet_ns[2]; /* lowest round trip of this window, the last one */
    double window_start;
    double apart_since; /* > 0: the threads' CPUs are apart since then */
    double hold_until;  /* > 0: no run is sent to the host before then */
    int hold_ms;        /* the next hold's length (doubles) */
};

struct kt__batch;

struct kt__cand {
    struct kt__batch *b;
    char *source;
    char *cc;
    unsigned char *so; /* the built object, between the stages */
    size_t solen;
    int stage;
    int state;
    int attempts; /* dispatches of the current stage */
    struct kt__conn *w;
    char avoid[96]; /* run on another worker than this one if there is one */
    char id[24];
    double deadline;
    double stop_above; /* the early-stop bound its run was sent; 0 none */
    /* The result: res's strings and notes point into these when the batch
     * completes. */
    struct kt_result res;
    char *err_text;
    char worker[96];
    struct kt_msg kvs;
};

struct kt__batch {
    struct kt_tracker *t;
    struct kt__batch *next;
    char key[64];
    struct kt_measure_opts o;
    kt_measure_done_cb cb;
    void *arg;
    int n;
    int remaining;
    double best_s; /* the lowest cost of its runs so far; 0 none yet */
    struct kt__cand *c;
};

struct kt__local {
    uv_process_t proc;
    int running;
    int closing;
    int closed; /* proc's handle closed: may be reused */
    int backoff_ms;
    double started;
    double restart_at; /* > 0: restart due then (kt__local_tick) */
    struct kt_tracker *t;
};

struct kt__key_token {
    char key[64];
    char token[256];
};

struct kt__key_abi {
    char key[64];
    char abi[64];
};

struct kt__key_builder {
    char key[64];
    char build_key[64];
};

struct kt_tracker {
    uv_loop_t *loop;
    struct kt_tracker_opts o;
    char host[64];
    char token[256];
    uv_tcp_t listener;
    uv_timer_t tick;
    uv_timer_t killer;
    int port;
    int closing;
    int open_handles;
    struct kt__conn *conns;
    struct kt__batch *batches;
    unsigned long next_id;
    unsigned refused, bad_frames, lost, results;
    unsigned pending_refused; /* connections over max_pending */
    double pending_logged;    /* last log line about them */
    struct kt__local local[KT__MAX_LOCAL];
    int nlocal;
    char local_path[4096]; /* how local workers are (re)started */
    char local_key[96];
    char local_roles[64];
    char local_token[65]; /* local workers' own, bound to their key */
    struct kt__key_token keytok[KT__MAX_KEY_TOKENS];
    int nkeytok;
    struct kt__key_abi keyabi[KT__MAX_KEY_ABIS];
    int nkeyabi;
    struct kt__key_builder keybuild[KT__MAX_KEY_TOKENS];
    int nkeybuild;
    struct kt__host_place place[KT__MAX_HOSTS];
    int nplace;
    struct kt__obj *objs, *objs_tail; /* objcache.c */
    size_t obj_bytes;
    unsigned builds_reused;
};

/* tracker.c: <0 closes the connection (err says why) */
int kt__on_msg(struct kt__conn *c, const struct kt_msg *m, char *err,
               size_t errlen);
/* tracker_conn.c */
void kt__on_connection(uv_stream_t *server, int status);
void kt__conn_send(struct kt__conn *c, const struct kt_msg *m);
void kt__conn_drop(struct kt__conn *c, const char *why);
void kt__handle_closed(uv_handle_t *h);
/* tracker_abi.c: -1 with reason (logged) when c may not register. */
int kt__abi_check(struct kt__conn *c, char *reason, size_t len);
/* tracker_auth.c */
int kt__bind_key_token(struct kt_tracker *t, const char *key,
                       const char *token);
int kt__on_hello(struct kt__conn *c, const struct kt_msg *m, char *err,
                 size_t errlen);
/* dispatch.c */
void kt__dispatch(struct kt_tracker *t);
/* objcache.c: the object built from (key, cc, source), or NULL; *builder
 * names the worker that built it.  Borrowed until the next put or drop. */
struct kt__obj;
const unsigned char *kt__obj_find(struct kt_tracker *t, const char *key,
                                  const char *cc, const char *source,
                                  size_t *solen, const char **builder);
void kt__obj_put(struct kt_tracker *t, const char *key, const char *cc,
                 const char *source, const unsigned char *so, size_t solen,
                 const char *builder);
void kt__obj_drop(struct kt_tracker *t, const char *key, const char *cc,
                  const char *source);
void kt__obj_clear(struct kt_tracker *t);
/* hold.c: a successful run's round trip xcpu_ns on host: NEAR (take it),
 * HOLD (time it again later: the host's runs are held a while) or APART
 * (take it, marked contended: wait_s is 0 or spent for this spell, or the
 * run may not be held again, may_hold 0, which leaves the host's hold as
 * it was); quiet_ns is the host's quiet level when not NEAR. */
enum { KT__PLACE_NEAR, KT__PLACE_HOLD, KT__PLACE_APART };
int kt__place_judge(struct kt_tracker *t, const char *host, double xcpu_ns,
                    double wait_s, int may_hold, double now, double *quiet_ns);
/* 1 while no run may be sent to host. */
int kt__place_held(struct kt_tracker *t, const char *host, double now);
/* Ends the holds that are over: 1 when one did (runs may be sent). */
int kt__place_release(struct kt_tracker *t, double now);
/* jobs.c */
void kt__on_result(struct kt__conn *c, const struct kt_msg *m);
void kt__worker_lost(struct kt__conn *c, const char *why);
void kt__check_deadlines(struct kt_tracker *t, double now);
void kt__fail_all(struct kt_tracker *t, const char *why);
void kt__status_queues(struct kt_tracker *t, struct kt_msg *m);
/* local.c */
void kt__local_stop(struct kt_tracker *t);
void kt__local_tick(struct kt_tracker *t, double now);

#endif /* KT_TRACKER_INT_H */
