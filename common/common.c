/* common.c - allocation, string buffers, hashing, clocks, random numbers
 * and error text.  See common.h. */
#include "common/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *
kt_strerror(int err)
{
    switch (err) {
    case KT_OK: return "ok";
    case KT_EPARSE: return "parse error";
    case KT_ESCHEDULE: return "invalid schedule";
    case KT_ESHAPE: return "shape mismatch";
    case KT_ECONFIG: return "configuration error";
    case KT_EDB: return "database error";
    case KT_EPROTO: return "protocol error";
    case KT_ETOOBIG: return "too large";
    default: break;
    }
    if (err < 0 && err > -1000)
        return strerror(-err);
    return "unknown error";
}

void *
kt_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        kt_fatalx("out of memory (%zu bytes)", n);
    return p;
}

void *
kt_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        kt_fatalx("out of memory (%zu x %zu bytes)", n, size);
    return p;
}

void *
kt_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        kt_fatalx("out of memory (%zu bytes)", n);
    return q;
}

char *
kt_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = kt_xmalloc(n);
    memcpy(p, s, n);
    return p;
}

void *
kt_xaligned(size_t align, size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, align, n ? n : 1) != 0)
        kt_fatalx("out of memory (%zu bytes aligned to %zu)", n, align);
    return p;
}

void
kt_buf_init(struct kt_buf *b)
{
    memset(b, 0, sizeof(*b));
    b->cap = 64;
    b->p = kt_xmalloc(b->cap);
    b->p[0] = '\0';
}

void
kt_buf_free(struct kt_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

void
kt_buf_reset(struct kt_buf *b)
{
    b->len = 0;
    b->overflow = 0;
    if (b->p != NULL)
        b->p[0] = '\0';
}

/* Makes room for n more bytes plus the NUL; 0 if the limit forbids it. */
static int
reserve(struct kt_buf *b, size_t n)
{
    size_t need;

    if (b->overflow)
        return 0;
    need = b->len + n + 1;
    if (b->cap_limit && need > b->cap_limit) {
        b->overflow = 1;
        return 0;
    }
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < need)
            cap *= 2;
        if (b->cap_limit && cap > b->cap_limit)
            cap = b->cap_limit;
        b->p = kt_xrealloc(b->p, cap);
        b->cap = cap;
    }
    return 1;
}

void
kt_buf_put(struct kt_buf *b, const void *s, size_t n)
{
    if (!reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void
kt_buf_putc(struct kt_buf *b, char c)
{
    kt_buf_put(b, &c, 1);
}

void
kt_buf_puts(struct kt_buf *b, const char *s)
{
    kt_buf_put(b, s, strlen(s));
}

void
kt_buf_vprintf(struct kt_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    int n;

    va_copy(ap2, ap);
    n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !reserve(b, (size_t)n))
        return;
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void
kt_buf_printf(struct kt_buf *b, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    kt_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

char *
kt_buf_take(struct kt_buf *b)
{
    char *p = b->p;

    if (p == NULL)
        p = kt_xstrdup("");
    memset(b, 0, sizeof(*b));
    return p;
}

uint64_t
kt_hash64(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t i;

    for (i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

void
kt_hash_hex(uint64_t h, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

double
kt_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double
kt_wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t
splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void
kt_rng_seed(struct kt_rng *r, uint64_t seed)
{
    int i;

    for (i = 0; i < 4; i++)
        r->s[i] = splitmix(&seed);
}

static uint64_t
rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t
kt_rng_next(struct kt_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t
kt_rng_below(struct kt_rng *r, uint64_t n)
{
    /* Rejection sampling keeps the distribution exact. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;

    do {
        x = kt_rng_next(r);
    } while (x >= limit);
    return x % n;
}

double
kt_rng_unit(struct kt_rng *r)
{
    return (double)(kt_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

int
kt_seterr(char *err, size_t len, int code, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL && len > 0) {
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
    }
    return code;
}

int
kt_parse_int64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    const char *p = s;
    int neg = 0;
    uint64_t v = 0, limit;

    if (s == NULL)
        return KT_EINVAL;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (*p == '\0')
        return KT_EINVAL;
    limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; *p != '\0'; p++) {
        unsigned d;
        if (*p < '0' || *p > '9')
            return KT_EINVAL;
        d = (unsigned)(*p - '0');
        if (v > (limit - d) / 10)
            return KT_EINVAL;
        v = v * 10 + d;
    }
    {
        int64_t x = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN
                                                        : -(int64_t)v)
                        : (int64_t)v;
        if (x < min || x > max)
            return KT_EINVAL;
        *out = x;
    }
    return KT_OK;
}

int
kt_hash_parse(const char *hex, uint64_t *out)
{
    uint64_t v = 0;
    int i;

    if (hex == NULL)
        return KT_EINVAL;
    for (i = 0; i < 16; i++) {
        char c = hex[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            return KT_EINVAL;
        v = v << 4 | d;
    }
    if (hex[16] != '\0')
        return KT_EINVAL;
    *out = v;
    return KT_OK;
}

const char *
kt_result_kv(const struct kt_result *r, const char *key)
{
    int i;

    for (i = 0; i < r->nkvs; i++)
        if (r->kvs[i].k != NULL && strcmp(r->kvs[i].k, key) == 0)
            return r->kvs[i].v;
    return NULL;
}
