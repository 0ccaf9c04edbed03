/* tracker_auth.c - the tracker's side of the handshake: the peer proves
 * a token over both nonces (bound to its key when the key has tokens of its
 * own), the tracker proves it back in `welcome`, and a worker registers
 * its identity. */
#include "measure/tracker_int.h"

#include <string.h>

static void
send_refused(struct kt__conn *c, const char *reason)
{
    struct kt_msg m;

    kt_msg_init(&m, "refused");
    kt_msg_set(&m, "reason", reason);
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

int
kt__on_hello(struct kt__conn *c, const struct kt_msg *m, char *err,
             size_t errlen)
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
