/* tracker.c - the tracker: options, message dispatch after the
 * handshake, heartbeats and timeouts, the status query, and shutdown.
 * Connections and framing are in tracker_conn.c, the handshake in
 * tracker_auth.c, jobs and dispatch in jobs.c. */
#include "measure/tracker_int.h"

#include <stdlib.h>
#include <string.h>

#define TICK_MS 50
#define STATUS_PAGE 64

void
kt_tracker_default_opts(struct kt_tracker_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->host = "127.0.0.1";
    o->heartbeat_lost_ms = 10000;
    o->max_retries = 2;
    o->serialize_hosts = 1;
    o->hello_timeout_ms = 10000;
    o->client_idle_ms = 30000;
    o->max_pending = 64;
    o->write_queue_max = 8u << 20;
    o->object_cache_bytes = (size_t)64 << 20;
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
/* Returns <0 to close the connection (err says why). */
int
kt__on_msg(struct kt__conn *c, const struct kt_msg *m, char *err, size_t errlen)
{
    const char *ty = kt_msg_type(m);

    if (c->state == KT__CONN_AUTH)
        return kt__on_hello(c, m, err, errlen);
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
                   (now - c->last_rx) * 1000 > t->o.client_idle_ms) {
            kt__conn_drop(c, "client idle");
        } else if (c->state == KT__CONN_WORKER &&
                   (now - c->last_rx) * 1000 > t->o.heartbeat_lost_ms) {
            kt__conn_drop(c, "heartbeat lost");
        }
    }
    kt__check_deadlines(t, now);
    kt__local_tick(t, now);
    if (kt__place_release(t, now))
        kt__dispatch(t);
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
    for (i = 0; i < o->nkey_builders; i++) {
        const struct kt_key_builder *kb = &o->key_builders[i];
        struct kt__key_builder *dst = &t->keybuild[t->nkeybuild];
        if (i >= KT__MAX_KEY_TOKENS || kb->key == NULL ||
            kb->build_key == NULL || kb->key[0] == '\0' ||
            kb->build_key[0] == '\0' || strlen(kb->key) >= sizeof(dst->key) ||
            strlen(kb->build_key) >= sizeof(dst->build_key)) {
            free(t);
            return kt_seterr(err, errlen, KT_EINVAL,
                             "tracker: key builder %d is invalid (1..63-byte "
                             "keys, at most %d)",
                             i, KT__MAX_KEY_TOKENS);
        }
        snprintf(dst->key, sizeof(dst->key), "%s", kb->key);
        snprintf(dst->build_key, sizeof(dst->build_key), "%s", kb->build_key);
        t->nkeybuild++;
    }
    t->o.key_builders = NULL; /* copied above */
    t->o.key_tokens = NULL;
    if (t->o.heartbeat_lost_ms <= 0)
        t->o.heartbeat_lost_ms = 10000;
    if (t->o.max_retries < 0)
        t->o.max_retries = 0;
    if (t->o.hello_timeout_ms <= 0)
        t->o.hello_timeout_ms = 10000;
    if (t->o.client_idle_ms <= 0)
        t->o.client_idle_ms = 30000;
    if (t->o.max_pending <= 0)
        t->o.max_pending = 64;
    if (t->o.write_queue_max == 0)
        t->o.write_queue_max = 8u << 20;
    if (t->o.object_cache_bytes == 0)
        t->o.object_cache_bytes = (size_t)64 << 20;
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
        rc = uv_listen((uv_stream_t *)&t->listener, 64, kt__on_connection);
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
    kt__obj_clear(t);
    while (t->conns != NULL)
        kt__conn_drop(t->conns, "tracker closing");
    uv_timer_stop(&t->tick);
    uv_close((uv_handle_t *)&t->listener, kt__handle_closed);
    uv_close((uv_handle_t *)&t->tick, kt__handle_closed);
    kt__local_stop(t); /* closes the killer timer when done */
}
