/* common.h - shared plain-POSIX helpers: error codes, allocation, string
 * buffers, hashing, time and logging.  Used by every module and by the
 * kerntune-rpc worker, so nothing here may depend on libuv, SQLite, cJSON or
 * XGBoost. */
#ifndef KT_COMMON_H
#define KT_COMMON_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <syslog.h>

/* Error codes: 0 is success, OS-like errors are -errno (as libuv does), and
 * kerntune's own errors sit below -1000. */
enum kt_err {
    KT_OK = 0,
    KT_ENOMEM = -ENOMEM,
    KT_EINVAL = -EINVAL,
    KT_EIO = -EIO,
    KT_ENOENT = -ENOENT,
    KT_EPARSE = -1001,    /* malformed input text */
    KT_ESCHEDULE = -1002, /* a schedule cannot be applied or lowered */
    KT_ESHAPE = -1003,    /* tensor shapes disagree */
    KT_ECONFIG = -1004,   /* a bad configuration value */
    KT_EDB = -1005,       /* the database refused an operation */
    KT_EPROTO = -1006,    /* a peer broke the wire protocol */
    KT_ETOOBIG = -1007,   /* a bounded buffer or queue would overflow */
    KT_ETIMEDOUT = -ETIMEDOUT,
    KT_ECANCELED = -ECANCELED,
};

/* A trial's error number: TVM's MeasureErrorNo, shared by the worker, the
 * tracker and storage (logs.err_no). */
enum kt_measure_errno {
    KT_MERR_NO_ERROR = 0,
    KT_MERR_INSTANTIATION = 1, /* the schedule cannot be lowered */
    KT_MERR_COMPILE_HOST = 2,  /* the compiler failed */
    KT_MERR_COMPILE_DEVICE = 3,
    KT_MERR_RUNTIME_DEVICE = 4, /* crashed (signal) or would not load */
    KT_MERR_WRONG_ANSWER = 5,
    KT_MERR_BUILD_TIMEOUT = 6,
    KT_MERR_RUN_TIMEOUT = 7,
    KT_MERR_UNKNOWN = 8, /* e.g. a worker lost for good */
    KT_MERR_COUNT = 9
};

/* A build's timeout limits the compiler's CPU time (RLIMIT_CPU), so a
 * loaded machine does not turn slow builds into timeouts; wall time is
 * only a backstop against a compiler that hangs without using the CPU. */
#define KT_BUILD_WALL_FACTOR 4

/* Text for any kt_err or -errno value; never NULL. */
const char *kt_strerror(int err);

/* Allocation that never returns NULL: out of memory logs and aborts. */
void *kt_xmalloc(size_t n);
void *kt_xcalloc(size_t n, size_t size);
void *kt_xrealloc(void *p, size_t n);
char *kt_xstrdup(const char *s);
/* Allocation aligned to 'align' bytes (a power of two); free with free(). */
void *kt_xaligned(size_t align, size_t n);

/* Growable string.  Always NUL terminated once initialised.  'cap_limit'
 * (0 = none) is a hard maximum: appends past it set 'overflow' and stop. */
struct kt_buf {
    char *p;
    size_t len;
    size_t cap;
    size_t cap_limit;
    int overflow;
};
void kt_buf_init(struct kt_buf *b);
void kt_buf_free(struct kt_buf *b);
void kt_buf_reset(struct kt_buf *b);
void kt_buf_putc(struct kt_buf *b, char c);
void kt_buf_puts(struct kt_buf *b, const char *s);
void kt_buf_put(struct kt_buf *b, const void *s, size_t n);
void kt_buf_printf(struct kt_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void kt_buf_vprintf(struct kt_buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Transfers ownership of the text to the caller (free()); resets b. */
char *kt_buf_take(struct kt_buf *b);

/* A candidate module (ir/module.c) is one C file in three parts: the
 * prelude, the part every candidate of a workload shares (its metadata and
 * reference kernel), then the candidate's kernel, each of the first two ended
 * by its marker line.  A builder may compile prelude + shared part once per
 * workload and prelude + kernel per candidate (docs/protocol.md, "build"). */
#define KT_MODULE_PRELUDE_END "/* kt:prelude-end */\n"
#define KT_MODULE_SHARED_END "/* kt:shared-end */\n"

/* Stable 64-bit FNV-1a hash; kt_hash_hex writes 16 hex digits + NUL. */
uint64_t kt_hash64(const void *data, size_t n);
void kt_hash_hex(uint64_t h, char out[17]);

/* Monotonic seconds (CLOCK_MONOTONIC) and wall-clock seconds. */
double kt_now(void);
double kt_wall_now(void);

/* Deterministic random numbers (xoshiro256**), seeded explicitly. */
struct kt_rng {
    uint64_t s[4];
};
void kt_rng_seed(struct kt_rng *r, uint64_t seed);
uint64_t kt_rng_next(struct kt_rng *r);
/* Uniform in [0, n); n > 0. */
uint64_t kt_rng_below(struct kt_rng *r, uint64_t n);
/* Uniform in [0, 1). */
double kt_rng_unit(struct kt_rng *r);

/* Secret random bytes from getrandom(2); -errno when the kernel has none to
 * give (callers fail closed, there is no fallback).  kt_random_hex writes
 * 2 * nbytes hex digits and a NUL (nbytes <= 64). */
int kt_random_bytes(void *out, size_t n);
int kt_random_hex(char *out, size_t nbytes);

/* Reads a secret token file the way ssh reads a private key: a regular file
 * owned by the caller (or root), not readable or writable by group or
 * others; the first line with trailing blanks (space, tab, CR) removed; not
 * empty.  Errors name the file. */
int kt_token_read(const char *path, char *buf, size_t len, char *err,
                  size_t errlen);

/* Logging to stderr, one write(2) per line so threads may log.  Under
 * journald (JOURNAL_STREAM set) lines start with "<N>"; otherwise with an
 * ISO-8601 timestamp and the level name. */
extern int kt_log_level;
void kt_log_init(int level);
void kt_log(int prio, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define KT_LOG(p, ...)                                                         \
    do {                                                                       \
        if ((p) <= kt_log_level)                                               \
            kt_log((p), __VA_ARGS__);                                          \
    } while (0)
#define log_err(...) KT_LOG(LOG_ERR, __VA_ARGS__)
#define log_warnx(...) KT_LOG(LOG_WARNING, __VA_ARGS__)
#define log_info(...) KT_LOG(LOG_INFO, __VA_ARGS__)
#define log_debug(...) KT_LOG(LOG_DEBUG, __VA_ARGS__)
_Noreturn void kt_fatalx(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* Formats into a caller-supplied error buffer (may be NULL); returns 'code'
 * so callers can write: return kt_seterr(err, len, KT_EPARSE, "..."). */
int kt_seterr(char *err, size_t len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* HOST:PORT (common/hostport.c): "host:port" or "[v6addr]:port"; the host
 * non-empty and shorter than hostlen, the port decimal digits in
 * [0, 65535].  KT_EINVAL / KT_ETOOBIG with a message quoting s. */
int kt_hostport_parse(const char *s, char *host, size_t hostlen, int *port,
                      char *err, size_t errlen);

/* Strict decimal integer: the whole of s (an optional '-' then digits, no
 * spaces) in [min, max].  KT_EINVAL otherwise, *out untouched. */
int kt_parse_int64(const char *s, int64_t min, int64_t max, int64_t *out);

/* The one conversion of a schedule or workload hash: exactly 16 hex digits
 * (as kt_hash_hex writes them) to its value.  KT_EINVAL otherwise. */
int kt_hash_parse(const char *hex, uint64_t *out);

/* Scrambles the bits of k (murmur3's finaliser): a slot index for open
 * addressing from a value whose low bits may repeat. */
uint64_t kt_hash_mix(uint64_t k);

/* A set of 64-bit values (hashes): open addressing, grows as needed; the
 * value 0 is kept aside.  Zero-initialised (or kt_u64set_init) is empty. */
struct kt_u64set {
    uint64_t *v;
    size_t cap, n;
    int has_zero;
};
void kt_u64set_init(struct kt_u64set *s);
void kt_u64set_free(struct kt_u64set *s);
int kt_u64set_has(const struct kt_u64set *s, uint64_t k);
/* 1 if k was added, 0 if it was there. */
int kt_u64set_add(struct kt_u64set *s, uint64_t k);
/* Number of values held. */
size_t kt_u64set_count(const struct kt_u64set *s);

/* One note of a result (compiler output, signal, worker, spread...). */
struct kt_kv {
    const char *k;
    const char *v;
};

/* Repeats of one timing at most (the worker's cap, checked on the wire). */
#define KT_MAX_REPEAT 64

/* What measuring one candidate gave: one value from the tracker through
 * the engine (which adds its notes) to the database.  A plain value: its
 * strings and notes are borrowed from whoever hands it out. */
struct kt_result {
    int err_no;           /* enum kt_measure_errno; 0 = measured */
    const char *err_text; /* NULL or "" when err_no == 0 */
    int ncosts;
    double costs[KT_MAX_REPEAT]; /* seconds per call, per repeat */
    double cost;    /* mean without min and max if ncosts >= 3; 0 if failed */
    double cv;      /* coefficient of variation of costs */
    double build_s; /* compiler wall time on the worker */
    double run_s;   /* load + check + timing on the worker */
    const char *worker; /* the run (or last) worker's name */
    int attempts;       /* dispatches, including re-queues */
    const struct kt_kv *kvs;
    int nkvs;
};

/* The value of r's note key, or NULL. */
const char *kt_result_kv(const struct kt_result *r, const char *key);

/* The release, printed by --version of all three programs. */
#define KT_VERSION "0.1.0"

#define KT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif /* KT_COMMON_H */
