/* tracker.c - the tracker's connections: accept, read frames, the token
 * challenge, worker registration, heartbeats, the status query and
 * shutdown.  Jobs and dispatch are in jobs.c.  A malformed, oversized or
 * truncated frame closes that connection with a log line naming the peer;
 * everything else keeps going. */
#include "measure/tracker_int.h"

#include <stdlib.h>
#include <string.h>

#define TICK_MS 50
#define CLIENT_IDLE_S 30.0
#define STATUS_PAGE 64

struct wreq {
    uv_write_t req;
    char *buf;
};

void
kt_tracker_default_opts(struct kt_tracker_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->host = "127.0.0.1";
    o->heartbeat_lost_ms = 10000;
    o->max_retries = 2;
    o->serialize_hosts = 1;
    o->hello_timeout_ms = 10000;
    o->max_pending = 64;
    o->write_queue_max = 8u << 20;
}

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
        log_warnx("tracker: worker %s (key=%s peer=%s) gone: %s", c->name,
                  c->key, c->peer, why);
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
send_refused(struct kt__conn *c, const char *reason)
{
    struct kt_msg m;

    kt_msg_init(&m, "refused");
    kt_msg_set(&m, "reason", reason);
    kt__conn_send(c, &m);
    kt_msg_free(&m);
}

/* One page of the status: workers [from, from + STATUS_PAGE) with 11 keys
 * each, the queues, and the total, so a reply stays far below the
 * decoder's 1024 lines however many workers there are. */
static void
send_status(struct kt__conn *c, const struct kt_msg *req)
{
    struct kt_tracker *t = c->t;
    struct kt__conn *w;
    struct kt_msg m;
    char k[32];
    long long from = 0;
    int i = 0, seen = 0;
    double now = kt_now();

    (void)kt_msg_get_ll(req, "from", 0, 0, 0, 1 << 30, &from, NULL, 0);
    kt_msg_init(&m, "status");
    for (w = t->conns; w != NULL; w = w->next) {
        if (w->state != KT__CONN_WORKER)
            continue;
        if (seen++ < from || i >= STATUS_PAGE)
            continue;
#define SETK(field, ...)                                                       \
    do {                                                                       \
        snprintf(k, sizeof(k), "w.%d." field, i);                              \
        kt_msg_setf(&m, k, __VA_ARGS__);                                       \
    } while (0)
        SETK("name", "%s", w->name);
        SETK("key", "%s", w->key);
        SETK("peer", "%s", w->peer);
        SETK("host", "%s", w->host);
        SETK("arch", "%s", w->arch);
        SETK("cores", "%d", w->cores);
        SETK("roles", "%s%s%s", (w->roles & KT_ROLE_BUILD) ? "build" : "",
             w->roles == (KT_ROLE_BUILD | KT_ROLE_RUN) ? "," : "",
             (w->roles & KT_ROLE_RUN) ? "run" : "");
        if (w->nrun)
            SETK("state", "running");
        else if (w->nbuild)
            SETK("state", "building %d/%d", w->nbuild, w->jobs);
        else
            SETK("state", "idle");
        SETK("done", "%lu", w->done);
        SETK("up_s", "%.0f", now - w->since);
#undef SETK
        i++;
    }
    kt_msg_setf(&m, "workers", "%d", i);
    kt_msg_setf(&m, "from", "%lld", from);
    kt_msg_setf(&m, "total", "%d", seen);
    kt__status_queues(t, &m);
    kt__conn_send(c, &m);
    kt_msg_free(&m);
}

static void
unique_name(struct kt_tracker *t, struct kt__conn *c, const char *want)
{
    struct kt__conn *o;
    int n = 1, clash;

    snprintf(c->name, sizeof(c->name), "%.80s", want);
    do {
        clash = 0;
        for (o = t->conns; o != NULL; o = o->next)
            if (o != c && o->state == KT__CONN_WORKER &&
                strcmp(o->name, c->name) == 0)
                clash = 1;
        if (clash)
            snprintf(c->name, sizeof(c->name), "%.80s#%d", want, ++n);
    } while (clash);
}

static int
copy_field(const struct kt_msg *m, const char *k, char *out, size_t len,
           int required, char *err, size_t errlen)
{
    const char *v = kt_msg_get(m, k);

    if (v == NULL || v[0] == '\0') {
        if (required)
            return kt_seterr(err, errlen, KT_EPROTO, "hello: missing '%s'", k);
        v = "?";
    }
    if (strlen(v) >= len)
        return kt_seterr(err, errlen, KT_EPROTO,
                         "hello: '%s' longer than %zu bytes", k, len - 1);
    memcpy(out, v, strlen(v) + 1);
    return 0;
}

static int
on_worker_hello(struct kt__conn *c, const struct kt_msg *m, char *err,
                size_t errlen)
{
    char name[96];
    long long v;

    if (copy_field(m, "name", name, sizeof(name) - 8, 1, err, errlen) < 0 ||
        copy_field(m, "key", c->key, sizeof(c->key), 1, err, errlen) < 0 ||
        copy_field(m, "host", c->host, sizeof(c->host), 0, err, errlen) < 0 ||
        copy_field(m, "arch", c->arch, sizeof(c->arch), 0, err, errlen) < 0 ||
        copy_field(m, "abi", c->abi, sizeof(c->abi), 0, err, errlen) < 0 ||
        kt_roles_parse(kt_msg_get(m, "roles") ? kt_msg_get(m, "roles") : "",
                       &c->roles, err, errlen) < 0 ||
        kt_msg_get_ll(m, "jobs", 0, 1, 1, 64, &v, err, errlen) < 0)
        return KT_EPROTO;
    c->jobs = (int)v;
    if (kt_msg_get_ll(m, "cores", 0, 0, 0, 1 << 20, &v, err, errlen) < 0)
        return KT_EPROTO;
    c->cores = (int)v;
    if (kt_msg_get_ll(m, "pid", 0, 0, 0, 1LL << 40, &v, err, errlen) < 0)
        return KT_EPROTO;
    c->pid = (long)v;
    unique_name(c->t, c, name);
    return 0;
}

static int
proof_matches(const char *token, const char *role, const char *tnonce,
              const char *pnonce, const char *mac)
{
    char want[65];

    kt_auth_proof(token, "peer", role, tnonce, pnonce, want);
    return mac != NULL && kt_auth_equal(mac, want);
}

/* The token the peer proved, or NULL.  A worker's key decides which tokens
 * count: the ones bound to that key (the local workers' own, configured
 * key tokens) if there are any, else the shared token.  So the shared
 * token can't claim a bound key, and a key token claims only its key.  A
 * client (rpc-status) may prove any of them. */
static const char *
proven_token(const struct kt_tracker *t, const char *kind, const char *key,
             const char *role, const char *tnonce, const char *pnonce,
             const char *mac)
{
    int i, bound = 0, client = strcmp(kind, "client") == 0;

    for (i = 0; i < t->nkeytok; i++) {
        if (!client && (key == NULL || strcmp(t->keytok[i].key, key) != 0))
            continue;
        bound = 1;
        if (proof_matches(t->keytok[i].token, role, tnonce, pnonce, mac))
            return t->keytok[i].token;
    }
    if ((client || !bound) && t->token[0] != '\0' &&
        proof_matches(t->token, role, tnonce, pnonce, mac))
        return t->token;
    return NULL;
}

int
kt__bind_key_token(struct kt_tracker *t, const char *key, const char *token)
{
    struct kt__key_token *k;

    if (t->nkeytok == KT__MAX_KEY_TOKENS || strlen(key) >= sizeof(k->key) ||
        key[0] == '\0' || token[0] == '\0' || strlen(token) >= sizeof(k->token))
        return KT_EINVAL;
    k = &t->keytok[t->nkeytok++];
    snprintf(k->key, sizeof(k->key), "%s", key);
    snprintf(k->token, sizeof(k->token), "%s", token);
    return 0;
}

static int
on_hello(struct kt__conn *c, const struct kt_msg *m, char *err, size_t errlen)
{
    struct kt_tracker *t = c->t;
    const char *mac = kt_msg_get(m, "mac"), *kind = kt_msg_get(m, "kind");
    const char *pnonce = kt_msg_get(m, "nonce"), *token;
    char want[65], role[96];
    struct kt_msg w;
    long long v;

    if (strcmp(kt_msg_type(m), "hello") != 0)
        return kt_seterr(err, errlen, KT_EPROTO, "expected 'hello', got '%s'",
                         kt_msg_type(m));
    if (kt_msg_get_ll(m, "proto", 1, 0, 1, 1000, &v, err, errlen) < 0)
        return KT_EPROTO;
    if (v != KT_WIRE_PROTO) {
        send_refused(c, "unsupported protocol version");
        return kt_seterr(err, errlen, KT_EPROTO,
                         "protocol version %lld, this tracker speaks %d", v,
                         KT_WIRE_PROTO);
    }
    if (kind == NULL)
        kind = "worker";
    if (strcmp(kind, "worker") != 0 && strcmp(kind, "client") != 0)
        return kt_seterr(err, errlen, KT_EPROTO,
                         "hello: kind must be worker or client");
    /* A peer nonce equal to ours would let a relay reflect proofs. */
    if (pnonce == NULL || !kt_auth_nonce_ok(pnonce) ||
        strcmp(pnonce, c->nonce) == 0)
        return kt_seterr(err, errlen, KT_EPROTO,
                         "hello: 'nonce' must be 64 hex digits of its own");
    kt_auth_role(kind, kt_msg_get(m, "key"), role, sizeof(role));
    token = proven_token(t, kind, kt_msg_get(m, "key"), role, c->nonce, pnonce,
                         mac);
    if (token == NULL) {
        t->refused++;
        log_warnx("tracker: peer %s: wrong token (bad challenge response%s),"
                  " refused",
                  c->peer, strcmp(kind, "worker") == 0 ? " for its key" : "");
        send_refused(c, "authentication failed");
        c->state = KT__CONN_CLIENT; /* no jobs; closed below */
        return kt_seterr(err, errlen, KT_EPROTO, "authentication failed");
    }
    if (strcmp(kind, "worker") == 0 && on_worker_hello(c, m, err, errlen) < 0)
        return KT_EPROTO;
    if (strcmp(kind, "worker") == 0 && kt__abi_check(c, err, errlen)) {
        t->refused++;
        send_refused(c, err);
        c->state = KT__CONN_CLIENT; /* no jobs; closed below */
        return KT_EPROTO;
    }
    kt_msg_init(&w, "welcome");
    kt_auth_proof(token, "tracker", role, c->nonce, pnonce, want);
    kt_msg_set(&w, "mac", want);
    if (strcmp(kind, "worker") == 0)
        kt_msg_set(&w, "name", c->name);
    kt__conn_send(c, &w);
    kt_msg_free(&w);
    kt_session_start(&c->sess, token, 1, c->nonce, pnonce);
    c->rd.hdr_max = KT_WIRE_HDR_MAX;
    c->rd.payload_max = KT_WIRE_PAYLOAD_MAX;
    c->since = c->last_rx = kt_now();
    if (strcmp(kind, "client") == 0) {
        c->state = KT__CONN_CLIENT;
        return 0;
    }
    c->state = KT__CONN_WORKER;
    log_info("tracker: worker %s joined key=%s roles=%d arch=%s abi=%s "
             "cores=%d host=%s peer=%s",
             c->name, c->key, c->roles, c->arch, c->abi, c->cores, c->host,
             c->peer);
    kt__dispatch(t);
    return 0;
}

/* Returns <0 to close the connection (err says why). */
static int
on_msg(struct kt__conn *c, const struct kt_msg *m, char *err, size_t errlen)
{
    const char *ty = kt_msg_type(m);

    if (c->state == KT__CONN_AUTH)
        return on_hello(c, m, err, errlen);
    if (strcmp(ty, "ping") == 0) {
        struct kt_msg p;
        kt_msg_init(&p, "pong");
        kt__conn_send(c, &p);
        kt_msg_free(&p);
        return 0;
    }
    if (strcmp(ty, "status_req") == 0) {
        send_status(c, m);
        return 0;
    }
    if (c->state == KT__CONN_WORKER && strcmp(ty, "result") == 0) {
        kt__on_result(c, m);
        return 0;
    }
    return kt_seterr(err, errlen, KT_EPROTO, "unexpected message '%s'", ty);
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
        rc = on_msg(c, &m, err, sizeof(err));
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

static void
on_connection(uv_stream_t *server, int status)
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

static void
on_tick(uv_timer_t *h)
{
    struct kt_tracker *t = h->data;
    struct kt__conn *c, *next;
    double now = kt_now();

    for (c = t->conns; c != NULL; c = next) {
        next = c->next;
        if (c->state == KT__CONN_AUTH &&
            (now - c->since) * 1000 > t->o.hello_timeout_ms) {
            log_warnx("tracker: peer %s: no hello within %d ms; closing",
                      c->peer, t->o.hello_timeout_ms);
            kt__conn_drop(c, "no hello in time");
        } else if (c->state == KT__CONN_CLIENT &&
                   now - c->last_rx > CLIENT_IDLE_S) {
            kt__conn_drop(c, "client idle");
        } else if (c->state == KT__CONN_WORKER &&
                   (now - c->last_rx) * 1000 > t->o.heartbeat_lost_ms) {
            kt__conn_drop(c, "heartbeat lost");
        }
    }
    kt__check_deadlines(t, now);
    kt__local_tick(t, now);
}

int
kt_tracker_new(struct kt_tracker **out, uv_loop_t *loop,
               const struct kt_tracker_opts *o, char *err, size_t errlen)
{
    struct kt_tracker *t;
    struct sockaddr_storage ss;
    int rc, i, len = sizeof(ss);

    *out = NULL;
    if (o->token != NULL && (o->token[0] == '\0' || strlen(o->token) >= 256))
        return kt_seterr(err, errlen, KT_EINVAL,
                         "tracker token must be 1..255 bytes");
    t = kt_xcalloc(1, sizeof(*t));
    t->loop = loop;
    t->o = *o;
    snprintf(t->host, sizeof(t->host), "%s", o->host ? o->host : "127.0.0.1");
    t->o.host = t->host;
    if (o->token != NULL)
        snprintf(t->token, sizeof(t->token), "%s", o->token);
    else if (kt_auth_nonce(t->token) < 0) {
        free(t);
        return kt_seterr(err, errlen, KT_EIO,
                         "tracker: no random bytes for a token (getrandom "
                         "failed)");
    }
    t->o.token = t->token;
    for (i = 0; i < o->nkey_tokens; i++) {
        if (kt__bind_key_token(t, o->key_tokens[i].key,
                               o->key_tokens[i].token) < 0) {
            free(t);
            return kt_seterr(err, errlen, KT_EINVAL,
                             "tracker: key token %d (key '%s') is invalid "
                             "(1..63-byte key, 1..255-byte token, at most "
                             "%d)",
                             i, o->key_tokens[i].key, KT__MAX_KEY_TOKENS);
        }
    }
    if (t->o.heartbeat_lost_ms <= 0)
        t->o.heartbeat_lost_ms = 10000;
    if (t->o.max_retries < 0)
        t->o.max_retries = 0;
    if (t->o.hello_timeout_ms <= 0)
        t->o.hello_timeout_ms = 10000;
    if (t->o.max_pending <= 0)
        t->o.max_pending = 64;
    if (t->o.write_queue_max == 0)
        t->o.write_queue_max = 8u << 20;
    rc = uv_ip4_addr(t->host, o->port, (struct sockaddr_in *)&ss);
    if (rc < 0)
        rc = uv_ip6_addr(t->host, o->port, (struct sockaddr_in6 *)&ss);
    if (rc < 0) {
        free(t);
        return kt_seterr(err, errlen, rc, "tracker: bad listen address '%s'",
                         o->host);
    }
    uv_tcp_init(loop, &t->listener);
    t->listener.data = t;
    t->open_handles++;
    rc = uv_tcp_bind(&t->listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&t->listener, 64, on_connection);
    if (rc < 0) {
        kt_seterr(err, errlen, rc, "tracker: listen on %s:%d: %s", t->host,
                  o->port, uv_strerror(rc));
        t->closing = 1;
        uv_close((uv_handle_t *)&t->listener, kt__handle_closed);
        return rc;
    }
    uv_tcp_getsockname(&t->listener, (struct sockaddr *)&ss, &len);
    t->port = ss.ss_family == AF_INET
                  ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                  : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    uv_timer_init(loop, &t->tick);
    t->tick.data = t;
    t->open_handles++;
    uv_timer_start(&t->tick, on_tick, TICK_MS, TICK_MS);
    uv_timer_init(loop, &t->killer);
    t->killer.data = t;
    t->open_handles++;
    log_info("tracker: listening on %s:%d", t->host, t->port);
    *out = t;
    return 0;
}

int
kt_tracker_port(const struct kt_tracker *t)
{
    return t->port;
}

const char *
kt_tracker_token(const struct kt_tracker *t)
{
    return t->token;
}

int
kt_tracker_nworkers(const struct kt_tracker *t, const char *key)
{
    const struct kt__conn *c;
    int n = 0;

    for (c = t->conns; c != NULL; c = c->next)
        if (c->state == KT__CONN_WORKER &&
            (key == NULL || strcmp(c->key, key) == 0))
            n++;
    return n;
}

void
kt_tracker_counters(const struct kt_tracker *t, unsigned *refused,
                    unsigned *bad_frames, unsigned *lost, unsigned *results)
{
    if (results)
        *results = t->results;
    if (refused)
        *refused = t->refused;
    if (bad_frames)
        *bad_frames = t->bad_frames;
    if (lost)
        *lost = t->lost;
}

void
kt_tracker_close(struct kt_tracker *t)
{
    if (t == NULL || t->closing)
        return;
    t->closing = 1;
    kt__fail_all(t, "tracker closed");
    while (t->conns != NULL)
        kt__conn_drop(t->conns, "tracker closing");
    uv_timer_stop(&t->tick);
    uv_close((uv_handle_t *)&t->listener, kt__handle_closed);
    uv_close((uv_handle_t *)&t->tick, kt__handle_closed);
    kt__local_stop(t); /* closes the killer timer when done */
}
