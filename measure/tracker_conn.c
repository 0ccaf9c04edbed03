/* tracker_conn.c - the tracker's connections: accept (with the cap on
 * unauthenticated ones), the incremental frame reader, sealed writes with
 * the write-queue cap, and dropping a peer.  A malformed, oversized or
 * truncated frame closes that connection with a log line naming the peer;
 * everything else keeps going. */
#include "measure/tracker_int.h"

#include <stdlib.h>
#include <string.h>

struct wreq {
    uv_write_t req;
    char *buf;
};

void
kt__handle_closed(uv_handle_t *h)
{
    struct kt_tracker *t = h->data;

    if (--t->open_handles == 0 && t->closing)
        free(t);
}

static void
conn_closed(uv_handle_t *h)
{
    struct kt__conn *c = h->data;
    struct kt_tracker *t = c->t;

    kt_reader_free(&c->rd);
    free(c);
    if (--t->open_handles == 0 && t->closing)
        free(t);
}

static void
unlink_conn(struct kt__conn *c)
{
    struct kt__conn **p;

    for (p = &c->t->conns; *p != NULL; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            return;
        }
    }
}

void
kt__conn_drop(struct kt__conn *c, const char *why)
{
    if (c->state == KT__CONN_CLOSING)
        return;
    if (c->state == KT__CONN_WORKER) {
        /* every worker goes when the tracker closes: no warning then */
        KT_LOG(c->t->closing ? LOG_INFO : LOG_WARNING,
               "tracker: worker %s (key=%s peer=%s) gone: %s", c->name, c->key,
               c->peer, why);
        c->state = KT__CONN_CLOSING;
        if (!c->t->closing)
            c->t->lost++;
        kt__worker_lost(c, why);
    } else {
        log_info("tracker: closing peer %s: %s", c->peer, why);
    }
    c->state = KT__CONN_CLOSING;
    unlink_conn(c);
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
    if (!c->t->closing)
        kt__dispatch(c->t);
}

static void
write_done(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;
    struct kt__conn *c = req->handle->data;

    free(w->buf);
    free(w);
    if (status < 0 && status != UV_ECANCELED)
        kt__conn_drop(c, uv_strerror(status));
}

void
kt__conn_send(struct kt__conn *c, const struct kt_msg *m)
{
    struct kt_buf b;
    struct wreq *w;
    uv_buf_t ub;
    size_t queued;
    int rc;

    if (c->state == KT__CONN_CLOSING)
        return;
    queued = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
    kt_buf_init(&b);
    kt_msg_encode_sealed(m, &c->sess.tx, &b);
    if (queued > 0 && queued + b.len > c->t->o.write_queue_max) {
        char why[120];
        kt_buf_free(&b);
        snprintf(why, sizeof(why),
                 "more than %zu bytes queued to it "
                 "(not reading)",
                 c->t->o.write_queue_max);
        log_warnx("tracker: peer %s: %s; closing", c->peer, why);
        kt__conn_drop(c, why);
        return;
    }
    ub.base = b.p;
    ub.len = b.len;
    /* Small frames usually go out at once, so even a connection closed
     * right after (a refusal) delivers them. */
    if (queued == 0) {
        rc = uv_try_write((uv_stream_t *)&c->tcp, &ub, 1);
        if (rc > 0 && (size_t)rc == b.len) {
            kt_buf_free(&b);
            return;
        }
        if (rc > 0) {
            memmove(b.p, b.p + rc, b.len - (size_t)rc);
            b.len -= (size_t)rc;
        }
    }
    w = kt_xmalloc(sizeof(*w));
    ub.len = b.len;
    w->buf = kt_buf_take(&b);
    ub.base = w->buf;
    rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &ub, 1, write_done);
    if (rc < 0) {
        free(w->buf);
        free(w);
        kt__conn_drop(c, uv_strerror(rc));
    }
}

static void
alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct kt__conn *c = h->data;
    unsigned char *p;
    size_t n;

    (void)suggested;
    /* On failure len 0: read_cb then sees UV_ENOBUFS and drops the peer. */
    (void)kt_reader_room(&c->rd, &p, &n);
    buf->base = (char *)p;
    buf->len = n;
}

static void
read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct kt__conn *c = s->data;
    char err[300];
    int rc;

    (void)buf;
    if (c->state == KT__CONN_CLOSING)
        return;
    if (nread == UV_ENOBUFS) {
        log_warnx("tracker: peer %s: no memory for its input; closing",
                  c->peer);
        kt__conn_drop(c, "out of memory");
        return;
    }
    if (nread < 0) {
        if (c->rd.len > 0) {
            c->t->bad_frames++;
            log_warnx("tracker: peer %s: connection ended inside a frame "
                      "(%zu bytes pending)",
                      c->peer, c->rd.len);
        }
        kt__conn_drop(c, nread == UV_EOF ? "connection closed"
                                         : uv_strerror((int)nread));
        return;
    }
    kt_reader_commit(&c->rd, (size_t)nread);
    c->last_rx = kt_now();
    for (;;) {
        struct kt_msg m;
        rc = kt_reader_next(&c->rd, &m, err, sizeof(err));
        if (rc == 0)
            break;
        if (rc < 0) {
            c->t->bad_frames++;
            log_warnx("tracker: peer %s: malformed frame: %s%s; closing",
                      c->peer, err,
                      c->state == KT__CONN_AUTH ? " (before authentication)"
                                                : "");
            kt__conn_drop(c, "malformed frame");
            return;
        }
        rc = kt__on_msg(c, &m, err, sizeof(err));
        kt_msg_free(&m);
        if (rc < 0) {
            if (c->state == KT__CONN_AUTH)
                c->t->bad_frames++;
            log_warnx("tracker: peer %s: %s; closing", c->peer, err);
            kt__conn_drop(c, err);
            return;
        }
        if (c->state == KT__CONN_CLOSING)
            return;
    }
}

static int
count_pending(const struct kt_tracker *t)
{
    const struct kt__conn *c;
    int n = 0;

    for (c = t->conns; c != NULL; c = c->next)
        n += c->state == KT__CONN_AUTH;
    return n;
}

/* A flood is logged once a second, not once per connection. */
static void
refuse_pending(struct kt_tracker *t)
{
    double now = kt_now();

    t->pending_refused++;
    if (now - t->pending_logged >= 1.0) {
        log_warnx("tracker: %u connection(s) closed at accept so far: %d "
                  "unauthenticated connections already open",
                  t->pending_refused, t->o.max_pending);
        t->pending_logged = now;
    }
}

void
kt__on_connection(uv_stream_t *server, int status)
{
    struct kt_tracker *t = server->data;
    struct kt__conn *c;
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    struct kt_msg m;

    if (status < 0) {
        log_warnx("tracker: accept: %s", uv_strerror(status));
        return;
    }
    c = kt_xcalloc(1, sizeof(*c));
    c->t = t;
    uv_tcp_init(t->loop, &c->tcp);
    c->tcp.data = c;
    t->open_handles++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        uv_close((uv_handle_t *)&c->tcp, conn_closed);
        return;
    }
    if (count_pending(t) >= t->o.max_pending) {
        refuse_pending(t);
        uv_close((uv_handle_t *)&c->tcp, conn_closed);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    snprintf(c->peer, sizeof(c->peer), "?");
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
        char ip[64] = "?";
        int port = 0;
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            uv_ip4_name(a, ip, sizeof(ip));
            port = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            uv_ip6_name(a, ip, sizeof(ip));
            port = ntohs(a->sin6_port);
        }
        snprintf(c->peer, sizeof(c->peer), "%s:%d", ip, port);
    }
    c->state = KT__CONN_AUTH;
    kt_reader_init(&c->rd, KT_WIRE_HELLO_HDR_MAX, 0, &c->sess.rx);
    c->since = c->last_rx = kt_now();
    c->next = t->conns;
    t->conns = c;
    if (kt_auth_nonce(c->nonce) < 0) {
        kt__conn_drop(c, "no random bytes for a nonce (getrandom failed)");
        return;
    }
    kt_msg_init(&m, "challenge");
    kt_msg_setf(&m, "proto", "%d", KT_WIRE_PROTO);
    kt_msg_set(&m, "nonce", c->nonce);
    kt__conn_send(c, &m);
    kt_msg_free(&m);
    uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
}
