/* worker.h - the plain-POSIX half of measurement, shared by the
 * kerntune-rpc worker program and the daemon's tracker: the wire protocol
 * (frames of a key=value header plus a binary payload, see docs/protocol.md),
 * HMAC-SHA-256 for the token challenge, the builder (compiler child with a
 * deadline) and the runner (a forked child that loads a kernel .so, checks it
 * against the reference and times it), and the worker's event loop.
 *
 * Nothing here may use libuv, SQLite, cJSON or XGBoost: this code
 * cross-compiles with a bare toolchain. */
#ifndef KT_WORKER_H
#define KT_WORKER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/common.h"

/* ---- error numbers (TVM's MeasureErrorNo) ------------------------------ */
/* enum kt_measure_errno lives in common/common.h. */
/* "NO_ERROR", "COMPILE_HOST", ...; "?" outside 0..8. */
const char *kt_measure_errname(int err_no);

/* ---- architecture and ABI (abi.c) ------------------------------------- */
/* The target triple this program was compiled for, e.g. "x86_64-linux-gnu",
 * "aarch64-linux-gnu", "arm-linux-gnueabihf": a worker's kernels must be
 * built for it. */
const char *kt_abi_self(void);
/* 1 when triples (or `uname -m` names) a and b run the same code: same
 * architecture (amd64 = x86_64, arm64 = aarch64, armv7l = arm, i686 =
 * i386) and, when both name one, the same environment (gnu, gnueabihf,
 * musl...).  The vendor and OS parts are ignored. */
int kt_abi_match(const char *a, const char *b);
/* The triple compiler cc produces: `cc -dumpmachine`, or when cc cannot be
 * run here, the triple its name starts with ("aarch64-linux-gnu-gcc").
 * 0, or -1 when unknown. */
int kt_abi_of_compiler(const char *cc, char *out, size_t len);

/* ---- frames and messages ----------------------------------------------- */
#define KT_WIRE_MAGIC "KTR2" /* 3 letters + protocol version */
#define KT_WIRE_PROTO 2
#define KT_WIRE_PREFIX 12               /* magic, u32 hlen, u32 plen (BE) */
#define KT_WIRE_HDR_MAX (64u * 1024)    /* header text limit */
#define KT_WIRE_PAYLOAD_MAX (64u << 20) /* payload limit: 64 MiB */
#define KT_WIRE_KEY_MAX 64              /* bytes of one key */
#define KT_WIRE_KV_MAX 1024             /* key=value lines per header */
/* Before authentication (challenge, hello, welcome): a small header and
 * no payload, so a stranger cannot make either side buffer much. */
#define KT_WIRE_HELLO_HDR_MAX 4096u

/* A decoded message: ordered key/value strings plus an owned payload.  The
 * "type" key is always present in a valid message. */
struct kt_msg {
    int nkv;
    int cap;
    char **keys;
    char **vals;
    unsigned char *payload;
    size_t payload_len;
};
void kt_msg_init(struct kt_msg *m, const char *type);
void kt_msg_free(struct kt_msg *m); /* NULL-safe; leaves m empty */
/* Sets (replaces) key k to a copy of v.  Keys must match [a-z0-9_.]+. */
void kt_msg_set(struct kt_msg *m, const char *k, const char *v);
void kt_msg_setf(struct kt_msg *m, const char *k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Copies n bytes as the payload (replacing any previous one). */
void kt_msg_set_payload(struct kt_msg *m, const void *p, size_t n);
/* Borrowed value of key k, or NULL. */
const char *kt_msg_get(const struct kt_msg *m, const char *k);
const char *kt_msg_type(const struct kt_msg *m);
/* Strict integer/real field parsing with a range; a missing key gives 'def'
 * when required == 0.  Errors name the key. */
int kt_msg_get_ll(const struct kt_msg *m, const char *k, int required,
                  long long def, long long lo, long long hi, long long *out,
                  char *err, size_t errlen);
int kt_msg_get_double(const struct kt_msg *m, const char *k, int required,
                      double def, double lo, double hi, double *out, char *err,
                      size_t errlen);

/* Writes v big-endian into p[0..3]. */
void kt_put_be32(unsigned char *p, uint32_t v);
/* Appends the whole frame (prefix, header, payload) to out. */
void kt_msg_encode(const struct kt_msg *m, struct kt_buf *out);
/* Validates a 12-byte prefix: magic and both limits.  KT_EPROTO/KT_ETOOBIG
 * with a message otherwise. */
int kt_wire_prefix(const unsigned char *p, uint32_t *hlen, uint32_t *plen,
                   char *err, size_t errlen);
/* Decodes header text and payload (both copied) into m (initialised here).
 * KT_EPROTO with a message on any malformed line. */
int kt_msg_decode(const unsigned char *hdr, size_t hlen,
                  const unsigned char *payload, size_t plen, struct kt_msg *m,
                  char *err, size_t errlen);
/* Decodes one whole frame from buf; *used is the frame's size.  Returns 1
 * when a message was decoded, 0 when more bytes are needed, <0 on a
 * malformed frame. */
int kt_wire_take(const unsigned char *buf, size_t len, size_t *used,
                 struct kt_msg *m, char *err, size_t errlen);

/* Blocking helpers for the worker and the rpc-status client. */
int kt_wire_write_all(int fd, const void *p, size_t n);
int kt_wire_send(int fd, const struct kt_msg *m);
/* Reads one frame within timeout_ms (-1 = forever). */
int kt_wire_recv(int fd, struct kt_msg *m, int timeout_ms, char *err,
                 size_t errlen);
/* Reads one whole frame (prefix included) into *frame (free()) within
 * timeout_ms, refusing a header above hdr_max or a payload above
 * payload_max before reading them. */
int kt_wire_recv_raw(int fd, unsigned char **frame, size_t *n, uint32_t hdr_max,
                     uint32_t payload_max, int timeout_ms, char *err,
                     size_t errlen);
/* TCP connect to host:port; returns the fd or <0 with a message. */
int kt_wire_connect(const char *host, int port, char *err, size_t errlen);

/* ---- authentication and the session (session.c, auth.c) ------------- */
/* A peer's or tracker's proof of the token failed (not fatal for a worker:
 * the real tracker may be back soon). */
#define KT_EAUTH (-1100)
void kt_sha256(const void *data, size_t n, unsigned char out[32]);
void kt_hmac_sha256(const void *key, size_t klen, const void *msg, size_t n,
                    unsigned char out[32]);
/* HMAC over the concatenation of n parts. */
void kt_hmac_sha256_parts(const void *key, size_t klen,
                          const void *const *parts, const size_t *lens, int n,
                          unsigned char out[32]);
/* hex(HMAC-SHA256(token, "kerntune-rpc-v2 proof from FROM, ROLE:TN:PN")):
 * from is "peer" (in hello) or "tracker" (in welcome), role what
 * kt_auth_role makes; distinct labels so no proof can be reflected as
 * another, and a worker's key is bound to its proof. */
void kt_auth_proof(const char *token, const char *from, const char *role,
                   const char *tracker_nonce, const char *peer_nonce,
                   char out[65]);
/* "client", or "worker:KEY" for a worker of key KEY. */
void kt_auth_role(const char *kind, const char *key, char *out, size_t len);
/* The session key of frames sent by 'from' ("peer" or "tracker"). */
void kt_auth_session_key(const char *token, const char *from,
                         const char *tracker_nonce, const char *peer_nonce,
                         unsigned char key[32]);
/* 32 random bytes as 64 lowercase hex digits; <0 (and no nonce) when the
 * kernel has no random bytes. */
int kt_auth_nonce(char out[65]);
/* 1 when s is exactly 64 lowercase hex digits. */
int kt_auth_nonce_ok(const char *s);
/* Constant-time comparison of two NUL-terminated strings. */
int kt_auth_equal(const char *a, const char *b);

/* One direction of a session: frames are sealed with a mac line under key
 * over sequence number seq.  'on' is 0 before the handshake ends. */
struct kt_seal {
    unsigned char key[32];
    uint64_t seq;
    int on;
};
struct kt_session {
    struct kt_seal tx, rx;
};
void kt_session_start(struct kt_session *s, const char *token, int is_tracker,
                      const char *tracker_nonce, const char *peer_nonce);
/* kt_msg_encode plus the mac line when tx is on (NULL or off: plain). */
void kt_msg_encode_sealed(const struct kt_msg *m, struct kt_seal *tx,
                          struct kt_buf *out);
/* kt_wire_take that checks and strips the mac line when rx is on. */
int kt_wire_take_sealed(const unsigned char *buf, size_t len, size_t *used,
                        struct kt_msg *m, struct kt_seal *rx, char *err,
                        size_t errlen);
int kt_wire_send_sealed(int fd, const struct kt_msg *m, struct kt_seal *tx);
int kt_wire_recv_sealed(int fd, struct kt_msg *m, struct kt_seal *rx,
                        int timeout_ms, char *err, size_t errlen);
/* The incremental frame reader of both sides (and of the fuzz target):
 * bytes are appended as they arrive and frames are taken once complete.
 * A frame over the stage's limits (hdr_max, payload_max; before
 * authentication 4 KiB and 0) is refused on its prefix, before any more of
 * it is buffered, and the buffer never holds more than one such frame. */
struct kt_reader {
    unsigned char *buf;
    size_t len, cap;
    uint32_t hdr_max, payload_max;
    struct kt_seal *rx; /* frames are opened with it once it is on */
};
void kt_reader_init(struct kt_reader *r, uint32_t hdr_max, uint32_t payload_max,
                    struct kt_seal *rx);
void kt_reader_free(struct kt_reader *r);
/* Space for the next read at *p (*n bytes); KT_ENOMEM when it cannot grow
 * (no abort), KT_ETOOBIG when already full. */
int kt_reader_room(struct kt_reader *r, unsigned char **p, size_t *n);
void kt_reader_commit(struct kt_reader *r, size_t n);
/* 1 with the next message in m, 0 when more bytes are needed, <0 on a
 * malformed, oversized or unauthentic frame (err says which). */
int kt_reader_next(struct kt_reader *r, struct kt_msg *m, char *err,
                   size_t errlen);

/* The peer side of the handshake on a connected fd: answers the challenge
 * with 'hello' (the caller's fields plus proto, kind, nonce and mac), and
 * accepts only a 'welcome' that proves the token.  Returns 0 with the
 * welcome in *welcome and the session started; KT_EPROTO when the tracker
 * refused us or broke the protocol; KT_EAUTH when it did not prove the
 * token; other <0 on I/O errors. */
struct kt_peer_hello {
    const char *token;
    const char *kind; /* "worker" or "client" */
    struct kt_msg *hello;
};
int kt_session_connect(int fd, const struct kt_peer_hello *ph,
                       struct kt_msg *welcome, struct kt_session *s, char *err,
                       size_t errlen);

/* ---- builder ----------------------------------------------------------- */
#define KT_BUILD_STDERR_MAX 8192
/* Writes src to dir/kernel.c and starts "cc... -shared -fPIC -o dir/kernel.so
 * dir/kernel.c" in its own process group with stdout+stderr on a pipe and
 * every process of it limited to cpu_ms of CPU time (rounded up to whole
 * seconds).  cc is split on blanks.  A module in parts (common.h,
 * KT_MODULE_SHARED_END) has its shared part compiled once into an object
 * kept in cache_dir ("ref-obj-*", trimmed with the reference outputs) and
 * linked into each candidate's; cache_dir NULL builds every module whole.
 * *pid and *fd (non-blocking read end) are OUT. */
int kt_build_start(const char *dir, const char *cache_dir, const char *cc,
                   const void *src, size_t srclen, int cpu_ms, pid_t *pid,
                   int *fd, char *err, size_t errlen);
/* 1 when a build that ended with status and printed out was stopped by its
 * CPU-time limit (the compiler, or a program it ran, got SIGXCPU). */
int kt_build_cpu_limited(int status, const char *out);

/* ---- runner ------------------------------------------------------------ */
struct kt_run_req {
    const char *so_path;
    const char *cache_dir; /* reference outputs are cached here */
    int number;
    int repeat;
    int min_repeat_ms;
    int cooldown_ms;
    int flush;
    int threads;
    uint64_t seed;
    double tol;        /* relative L2 error bound */
    long long mem_mb;  /* address-space limit above the current size; 0 off */
    double stop_above; /* seconds per call: a first repeat slower than this
                        * ends the timing (early_stop=1); 0 off */
    double settle;     /* repeat 3: first two repeats this close (relative)
                        * end the timing (settled=1); 0 off */
    int timeout_ms;    /* the run deadline: re-timing stays within half */
    int retime;        /* disturbed repeats timed again at most; -1: repeat */
};
#define KT_RUN_MAX_REPEAT KT_MAX_REPEAT
/* Runs in a forked child: limits, load, verify, time.  Fills out with a
 * "result" message (err_no, err_text, costs, cost, cv, ...). */
void kt_run_child(const struct kt_run_req *r, struct kt_msg *out);
/* cost = mean without the fastest and slowest when n >= 3; cv of all. */
void kt_run_summarize(const double *costs, int n, double *cost, double *cv);
/* "SIGSEGV" and so on. */
const char *kt_signame(int sig);

/* ---- placement (placement.c, docs/measure.md) ------------------------- */
/* The first two CPUs of the calling thread's affinity mask (where a team
 * bound one thread per CPU puts its first two threads): 1, or 0 with
 * fewer than two or where threads cannot be pinned.  Read it before
 * OpenMP binds the thread to one CPU. */
int kt_first_two_cpus(int cpu[2]);
/* Nanoseconds for one cache line to go from CPU cpu[0] to cpu[1] and back
 * (the fastest of up to 1000 between two threads pinned there); 0 where
 * it cannot be measured. */
double kt_xcpu_round_trip_ns(const int cpu[2]);

/* ---- occupancy (occupancy.c, docs/measure.md) ------------------------- */
/* Below this occupancy a repeat may have been disturbed by other
 * processes; it is if it is also KT_DISTURBED_SLOWER x the fastest. */
#define KT_OCCUPANCY_MIN 0.9
#define KT_DISTURBED_SLOWER 1.05
/* CPU time of all the process's threads, in seconds (each thread's own
 * clock where /proc lists them: up to date for threads on other CPUs). */
double kt_cpu_now(void);
/* CPUs this process may run on (its affinity mask), else those online. */
long kt_usable_cpus(void);
/* The threads the kernel runs on in this process (counted after its first
 * call; requested when they cannot be counted), at most cpus (the
 * process's kt_usable_cpus before its threads were bound). */
int kt_kernel_threads(int requested, long cpus);
/* cpu_s / (wall_s x threads): 1 while the kernel's threads own their CPUs;
 * 0 for a wall time of 0. */
double kt_occupancy(double cpu_s, double wall_s, int threads);
/* 1 when a repeat of cost and occupancy occ was disturbed, given the
 * fastest kept repeat. */
int kt_repeat_disturbed(double cost, double occ, double fastest);

/* ---- job directories and limits (jobdir.c) ----------------------------- */
/* Removes dir and everything under it (symlinks are not followed). */
void kt_rm_tree(const char *dir);
/* Keeps the cache files ("ref-*": reference outputs and the builder's
 * shared objects) in dir at or below max_bytes by removing the least
 * recently used; returns how many. */
int kt_ref_cache_trim(const char *dir, unsigned long long max_bytes);
#define KT_REF_CACHE_MAX (256ULL << 20)
/* RLIMIT_NPROC for a kernel process: the tasks our user runs now plus room
 * for 'threads' (or the CPU count) OpenMP threads; -1 when unknown.  Not
 * enforced for root. */
long kt_kernel_nproc_limit(int threads);
/* Makes this process the subreaper of its descendants (Linux), so what a
 * kernel forks and orphans becomes our child; KT_EINVAL elsewhere. */
int kt_adopt_orphans(void);
/* Kills and reaps every child of ours not in keep (from /proc/self/task/
 * PID/children; nothing where that file is missing); returns how many. */
int kt_kill_strays(const pid_t *keep, int nkeep);

/* ---- the worker program ------------------------------------------------ */
struct kt_server_opts {
    const char *host;
    int port;
    const char *key;
    const char *token;
    const char *name; /* NULL: hostname-pid */
    int roles;        /* KT_ROLE_* bits */
    int jobs;         /* concurrent builds */
    int heartbeat_ms;
    int max_backoff_ms;
    int once; /* exit instead of reconnecting */
    /* a local worker (--exit-with-parent): its tracker is in the parent,
     * which closes the connection at every normal end */
    int exit_with_parent;
};
#define KT_ROLE_BUILD 1
#define KT_ROLE_RUN 2
/* Parses "build,run" into KT_ROLE_* bits. */
int kt_roles_parse(const char *s, int *roles, char *err, size_t errlen);
/* Connects, authenticates and serves jobs until SIGTERM/SIGINT; reconnects
 * with exponential backoff.  Returns 0 on a signal, <0 on fatal errors. */
int kt_server_run(const struct kt_server_opts *o);

#endif /* KT_WORKER_H */
