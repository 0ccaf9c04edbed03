/* wire.c - frames and messages of the worker protocol (docs/protocol.md).
 *
 * A frame is "KTR2", a big-endian u32 header length, a big-endian u32
 * payload length, the header text and the payload.  The header is lines
 * "key=value\n"; values are percent-escaped (%XX for '%', '\n', '\r', '=',
 * and bytes below 0x20 or 0x7f and above).  Every length is bounded. */
#include "measure/worker/worker.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

const char *
kt_measure_errname(int err_no)
{
    static const char *names[] = {"NO_ERROR",       "INSTANTIATION_ERROR",
                                  "COMPILE_HOST",   "COMPILE_DEVICE",
                                  "RUNTIME_DEVICE", "WRONG_ANSWER",
                                  "BUILD_TIMEOUT",  "RUN_TIMEOUT",
                                  "UNKNOWN_ERROR"};
    if (err_no < 0 || err_no > 8)
        return "?";
    return names[err_no];
}

void
kt_msg_init(struct kt_msg *m, const char *type)
{
    memset(m, 0, sizeof(*m));
    if (type != NULL)
        kt_msg_set(m, "type", type);
}

void
kt_msg_free(struct kt_msg *m)
{
    int i;

    if (m == NULL)
        return;
    for (i = 0; i < m->nkv; i++) {
        free(m->keys[i]);
        free(m->vals[i]);
    }
    free(m->keys);
    free(m->vals);
    free(m->payload);
    memset(m, 0, sizeof(*m));
}

static int
key_ok(const char *k, size_t n)
{
    size_t i;

    if (n == 0 || n > KT_WIRE_KEY_MAX)
        return 0;
    for (i = 0; i < n; i++) {
        char c = k[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.'))
            return 0;
    }
    return 1;
}

static void
set_owned(struct kt_msg *m, char *k, char *v)
{
    int i;

    for (i = 0; i < m->nkv; i++) {
        if (strcmp(m->keys[i], k) == 0) {
            free(k);
            free(m->vals[i]);
            m->vals[i] = v;
            return;
        }
    }
    if (m->nkv == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 16;
        m->keys = kt_xrealloc(m->keys, (size_t)m->cap * sizeof(char *));
        m->vals = kt_xrealloc(m->vals, (size_t)m->cap * sizeof(char *));
    }
    m->keys[m->nkv] = k;
    m->vals[m->nkv] = v;
    m->nkv++;
}

void
kt_msg_set(struct kt_msg *m, const char *k, const char *v)
{
    if (!key_ok(k, strlen(k)))
        kt_fatalx("wire: bad key '%s' (a bug)", k);
    set_owned(m, kt_xstrdup(k), kt_xstrdup(v ? v : ""));
}

void
kt_msg_setf(struct kt_msg *m, const char *k, const char *fmt, ...)
{
    struct kt_buf b;
    va_list ap;

    kt_buf_init(&b);
    va_start(ap, fmt);
    kt_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    kt_msg_set(m, k, b.p);
    kt_buf_free(&b);
}

void
kt_msg_set_payload(struct kt_msg *m, const void *p, size_t n)
{
    free(m->payload);
    m->payload = NULL;
    m->payload_len = 0;
    if (n > 0) {
        m->payload = kt_xmalloc(n);
        memcpy(m->payload, p, n);
        m->payload_len = n;
    }
}

const char *
kt_msg_get(const struct kt_msg *m, const char *k)
{
    int i;

    for (i = 0; i < m->nkv; i++)
        if (strcmp(m->keys[i], k) == 0)
            return m->vals[i];
    return NULL;
}

const char *
kt_msg_type(const struct kt_msg *m)
{
    const char *t = kt_msg_get(m, "type");
    return t ? t : "";
}

int
kt_msg_get_ll(const struct kt_msg *m, const char *k, int required,
              long long def, long long lo, long long hi, long long *out,
              char *err, size_t errlen)
{
    const char *v = kt_msg_get(m, k);
    char *end;
    long long x;

    if (v == NULL) {
        if (required)
            return kt_seterr(err, errlen, KT_EPROTO,
                             "message '%s': missing key '%s'", kt_msg_type(m),
                             k);
        *out = def;
        return 0;
    }
    errno = 0;
    x = strtoll(v, &end, 10);
    if (*v == '\0' || *end != '\0' || errno == ERANGE || x < lo || x > hi)
        return kt_seterr(err, errlen, KT_EPROTO,
                         "message '%s': key '%s': '%.40s' is not an integer "
                         "in [%lld, %lld]",
                         kt_msg_type(m), k, v, lo, hi);
    *out = x;
    return 0;
}

int
kt_msg_get_double(const struct kt_msg *m, const char *k, int required,
                  double def, double lo, double hi, double *out, char *err,
                  size_t errlen)
{
    const char *v = kt_msg_get(m, k);
    char *end;
    double x;

    if (v == NULL) {
        if (required)
            return kt_seterr(err, errlen, KT_EPROTO,
                             "message '%s': missing key '%s'", kt_msg_type(m),
                             k);
        *out = def;
        return 0;
    }
    errno = 0;
    x = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || errno == ERANGE || !(x >= lo) ||
        !(x <= hi))
        return kt_seterr(err, errlen, KT_EPROTO,
                         "message '%s': key '%s': '%.40s' is not a number "
                         "in [%g, %g]",
                         kt_msg_type(m), k, v, lo, hi);
    *out = x;
    return 0;
}

void
kt_put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static uint32_t
get_be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
           ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

void
kt_msg_encode(const struct kt_msg *m, struct kt_buf *out)
{
    static const char hex[] = "0123456789ABCDEF";
    struct kt_buf h;
    unsigned char pre[KT_WIRE_PREFIX];
    int i;

    kt_buf_init(&h);
    for (i = 0; i < m->nkv; i++) {
        const unsigned char *v = (const unsigned char *)m->vals[i];
        kt_buf_puts(&h, m->keys[i]);
        kt_buf_putc(&h, '=');
        for (; *v; v++) {
            if (*v == '%' || *v == '=' || *v < 0x20 || *v >= 0x7f) {
                kt_buf_putc(&h, '%');
                kt_buf_putc(&h, hex[*v >> 4]);
                kt_buf_putc(&h, hex[*v & 15]);
            } else {
                kt_buf_putc(&h, (char)*v);
            }
        }
        kt_buf_putc(&h, '\n');
    }
    memcpy(pre, KT_WIRE_MAGIC, 4);
    kt_put_be32(pre + 4, (uint32_t)h.len);
    kt_put_be32(pre + 8, (uint32_t)m->payload_len);
    kt_buf_put(out, pre, sizeof(pre));
    kt_buf_put(out, h.p, h.len);
    if (m->payload_len)
        kt_buf_put(out, m->payload, m->payload_len);
    kt_buf_free(&h);
}

int
kt_wire_prefix(const unsigned char *p, uint32_t *hlen, uint32_t *plen,
               char *err, size_t errlen)
{
    if (memcmp(p, KT_WIRE_MAGIC, 3) != 0)
        return kt_seterr(err, errlen, KT_EPROTO,
                         "bad frame magic %02x%02x%02x%02x (want \"%s\")", p[0],
                         p[1], p[2], p[3], KT_WIRE_MAGIC);
    if (p[3] != (unsigned char)KT_WIRE_MAGIC[3])
        return kt_seterr(err, errlen, KT_EPROTO,
                         "unsupported protocol version '%c' (this side "
                         "speaks '%c')",
                         p[3] >= 0x20 && p[3] < 0x7f ? p[3] : '?',
                         KT_WIRE_MAGIC[3]);
    *hlen = get_be32(p + 4);
    *plen = get_be32(p + 8);
    if (*hlen == 0 || *hlen > KT_WIRE_HDR_MAX)
        return kt_seterr(err, errlen, KT_ETOOBIG,
                         "frame header length %u outside [1, %u]", *hlen,
                         KT_WIRE_HDR_MAX);
    if (*plen > KT_WIRE_PAYLOAD_MAX)
        return kt_seterr(err, errlen, KT_ETOOBIG,
                         "frame payload length %u above the limit %u", *plen,
                         KT_WIRE_PAYLOAD_MAX);
    return 0;
}

static int
unhex(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int
kt_msg_decode(const unsigned char *hdr, size_t hlen,
              const unsigned char *payload, size_t plen, struct kt_msg *m,
              char *err, size_t errlen)
{
    size_t pos = 0;
    int line = 0;

    kt_msg_init(m, NULL);
    while (pos < hlen) {
        const unsigned char *l = hdr + pos;
        const unsigned char *nl = memchr(l, '\n', hlen - pos);
        const unsigned char *eq;
        size_t n, i, o = 0;
        char *k, *v;

        line++;
        if (nl == NULL)
            goto bad_nl;
        n = (size_t)(nl - l);
        eq = memchr(l, '=', n);
        if (eq == NULL || !key_ok((const char *)l, (size_t)(eq - l))) {
            kt_seterr(err, errlen, KT_EPROTO,
                      "header line %d: not key=value with a key of "
                      "[a-z0-9_.]{1,%d}",
                      line, KT_WIRE_KEY_MAX);
            goto fail;
        }
        if (m->nkv >= KT_WIRE_KV_MAX) {
            kt_seterr(err, errlen, KT_ETOOBIG, "header has more than %d lines",
                      KT_WIRE_KV_MAX);
            goto fail;
        }
        k = kt_xmalloc((size_t)(eq - l) + 1);
        memcpy(k, l, (size_t)(eq - l));
        k[eq - l] = '\0';
        v = kt_xmalloc(n);
        for (i = (size_t)(eq - l) + 1; i < n; i++) {
            unsigned char c = l[i];
            if (c == '%') {
                int a = i + 2 < n ? unhex(l[i + 1]) : -1;
                int b = i + 2 < n ? unhex(l[i + 2]) : -1;
                if (a < 0 || b < 0 || (a == 0 && b == 0)) {
                    free(k);
                    free(v);
                    kt_seterr(err, errlen, KT_EPROTO,
                              "header line %d: bad %%-escape", line);
                    goto fail;
                }
                c = (unsigned char)(a * 16 + b);
                i += 2;
            } else if (c < 0x20 || c >= 0x7f) {
                free(k);
                free(v);
                kt_seterr(err, errlen, KT_EPROTO,
                          "header line %d: unescaped byte 0x%02x", line, c);
                goto fail;
            }
            v[o++] = (char)c;
        }
        v[o] = '\0';
        if (kt_msg_get(m, k) != NULL) {
            kt_seterr(err, errlen, KT_EPROTO,
                      "header line %d: key '%s' repeated", line, k);
            free(k);
            free(v);
            goto fail;
        }
        set_owned(m, k, v);
        pos += n + 1;
    }
    if (kt_msg_get(m, "type") == NULL || kt_msg_type(m)[0] == '\0') {
        kt_seterr(err, errlen, KT_EPROTO, "header has no 'type' key");
        goto fail;
    }
    kt_msg_set_payload(m, payload, plen);
    return 0;
bad_nl:
    kt_seterr(err, errlen, KT_EPROTO,
              "header line %d does not end with a newline", line);
fail:
    kt_msg_free(m);
    return KT_EPROTO;
}

int
kt_wire_take(const unsigned char *buf, size_t len, size_t *used,
             struct kt_msg *m, char *err, size_t errlen)
{
    uint32_t hlen = 0, plen = 0;
    int rc;

    *used = 0;
    if (len < KT_WIRE_PREFIX) {
        /* Reject a wrong magic as soon as its bytes are there. */
        if (len > 0 && memcmp(buf, KT_WIRE_MAGIC, len < 3 ? len : 3) != 0)
            return kt_seterr(err, errlen, KT_EPROTO, "bad frame magic");
        return 0;
    }
    rc = kt_wire_prefix(buf, &hlen, &plen, err, errlen);
    if (rc < 0)
        return rc;
    if (len - KT_WIRE_PREFIX < (size_t)hlen + plen)
        return 0;
    rc = kt_msg_decode(buf + KT_WIRE_PREFIX, hlen, buf + KT_WIRE_PREFIX + hlen,
                       plen, m, err, errlen);
    if (rc < 0)
        return rc;
    *used = KT_WIRE_PREFIX + (size_t)hlen + plen;
    return 1;
}

int
kt_wire_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;

    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == ENOTSOCK)
            w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd pf = {.fd = fd, .events = POLLOUT};
                (void)poll(&pf, 1, 1000);
                continue;
            }
            return -errno;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int
kt_wire_send(int fd, const struct kt_msg *m)
{
    struct kt_buf b;
    int rc;

    kt_buf_init(&b);
    kt_msg_encode(m, &b);
    rc = kt_wire_write_all(fd, b.p, b.len);
    kt_buf_free(&b);
    return rc;
}

/* Reads exactly n bytes before the absolute deadline (kt_now seconds). */
static int
read_exact(int fd, unsigned char *p, size_t n, double deadline, char *err,
           size_t errlen)
{
    while (n > 0) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int ms = -1;
        ssize_t r;

        if (deadline > 0) {
            double left = deadline - kt_now();
            if (left <= 0)
                return kt_seterr(err, errlen, KT_ETIMEDOUT,
                                 "timed out reading a frame");
            ms = (int)(left * 1000) + 1;
        }
        r = poll(&pf, 1, ms);
        /* A signal (SIGTERM to a worker in its handshake) ends the wait:
         * the caller decides whether to go on. */
        if (r < 0 && errno == EINTR)
            return kt_seterr(err, errlen, KT_ECANCELED,
                             "interrupted by a signal");
        if (r == 0)
            continue;
        r = read(fd, p, n);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r < 0)
            return kt_seterr(err, errlen, -errno, "read: %s", strerror(errno));
        if (r == 0)
            return kt_seterr(err, errlen, KT_EIO, "connection closed by peer");
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int
kt_wire_recv_raw(int fd, unsigned char **frame, size_t *n, uint32_t hdr_max,
                 uint32_t payload_max, int timeout_ms, char *err, size_t errlen)
{
    unsigned char pre[KT_WIRE_PREFIX];
    double deadline = timeout_ms < 0 ? 0 : kt_now() + timeout_ms / 1000.0;
    uint32_t hlen, plen;
    int rc;

    *frame = NULL;
    rc = read_exact(fd, pre, sizeof(pre), deadline, err, errlen);
    if (rc < 0)
        return rc;
    rc = kt_wire_prefix(pre, &hlen, &plen, err, errlen);
    if (rc < 0)
        return rc;
    if (hlen > hdr_max || plen > payload_max)
        return kt_seterr(err, errlen, KT_ETOOBIG,
                         "frame of %u + %u bytes above this stage's limit "
                         "(%u + %u)",
                         hlen, plen, hdr_max, payload_max);
    *n = KT_WIRE_PREFIX + (size_t)hlen + plen;
    *frame = kt_xmalloc(*n);
    memcpy(*frame, pre, sizeof(pre));
    rc = read_exact(fd, *frame + KT_WIRE_PREFIX, (size_t)hlen + plen, deadline,
                    err, errlen);
    if (rc < 0) {
        free(*frame);
        *frame = NULL;
    }
    return rc;
}

int
kt_wire_recv(int fd, struct kt_msg *m, int timeout_ms, char *err, size_t errlen)
{
    unsigned char *frame;
    size_t n;
    uint32_t hlen, plen;
    int rc;

    rc = kt_wire_recv_raw(fd, &frame, &n, KT_WIRE_HDR_MAX, KT_WIRE_PAYLOAD_MAX,
                          timeout_ms, err, errlen);
    if (rc < 0)
        return rc;
    hlen = get_be32(frame + 4);
    plen = get_be32(frame + 8);
    rc = kt_msg_decode(frame + KT_WIRE_PREFIX, hlen,
                       frame + KT_WIRE_PREFIX + hlen, plen, m, err, errlen);
    free(frame);
    return rc;
}

int
kt_wire_connect(const char *host, int port, char *err, size_t errlen)
{
    struct addrinfo hints, *res = NULL, *ai;
    char ports[16];
    int fd = -1, rc, one = 1, saved = 0;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(ports, sizeof(ports), "%d", port);
    rc = getaddrinfo(host, ports, &hints, &res);
    if (rc != 0)
        return kt_seterr(err, errlen, KT_EIO, "resolve %s: %s", host,
                         gai_strerror(rc));
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        /* SOCK_CLOEXEC: compilers the worker starts must not inherit it. */
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                    ai->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return kt_seterr(err, errlen, saved ? -saved : KT_EIO,
                         "connect %s:%d: %s", host, port,
                         strerror(saved ? saved : EIO));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}
