/* session.c - the authenticated session of protocol version 2: both sides
 * prove the token over both nonces (docs/protocol.md), then every frame
 * carries an HMAC-SHA-256 under a per-direction session key over a
 * per-direction sequence number, its lengths, header and payload, so a
 * relay can neither inject, alter, replay, reorder nor drop a frame
 * unnoticed.  Also the peer (worker or client) side of the handshake. */
#include "measure/worker/worker.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAC_LINE 69 /* "mac=" + 64 hex + "\n" */

static void
frame_tag(const struct kt_seal *s, const unsigned char *hdr, uint32_t hlen,
          const unsigned char *payload, uint32_t plen, char out[65])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char pre[16], mac[32];
    const void *parts[3];
    size_t lens[3];
    int i;

    for (i = 0; i < 8; i++)
        pre[i] = (unsigned char)(s->seq >> (56 - 8 * i));
    kt_put_be32(pre + 8, hlen);
    kt_put_be32(pre + 12, plen);
    parts[0] = pre;
    lens[0] = sizeof(pre);
    parts[1] = hdr;
    lens[1] = hlen;
    parts[2] = payload;
    lens[2] = plen;
    kt_hmac_sha256_parts(s->key, sizeof(s->key), parts, lens, 3, mac);
    for (i = 0; i < 32; i++) {
        out[2 * i] = hex[mac[i] >> 4];
        out[2 * i + 1] = hex[mac[i] & 15];
    }
    out[64] = '\0';
}

void
kt_session_start(struct kt_session *s, const char *token, int is_tracker,
                 const char *tracker_nonce, const char *peer_nonce)
{
    memset(s, 0, sizeof(*s));
    kt_auth_session_key(token, is_tracker ? "tracker" : "peer", tracker_nonce,
                        peer_nonce, s->tx.key);
    kt_auth_session_key(token, is_tracker ? "peer" : "tracker", tracker_nonce,
                        peer_nonce, s->rx.key);
    s->tx.on = s->rx.on = 1;
}

void
kt_msg_encode_sealed(const struct kt_msg *m, struct kt_seal *tx,
                     struct kt_buf *out)
{
    struct kt_buf plain;
    unsigned char pre[KT_WIRE_PREFIX];
    const unsigned char *p;
    uint32_t hlen;
    char tag[65];

    if (tx == NULL || !tx->on) {
        kt_msg_encode(m, out);
        return;
    }
    kt_buf_init(&plain);
    kt_msg_encode(m, &plain);
    p = (const unsigned char *)plain.p;
    hlen = (uint32_t)(plain.len - KT_WIRE_PREFIX - m->payload_len);
    frame_tag(tx, p + KT_WIRE_PREFIX, hlen, p + KT_WIRE_PREFIX + hlen,
              (uint32_t)m->payload_len, tag);
    tx->seq++;
    memcpy(pre, p, 4);
    kt_put_be32(pre + 4, hlen + MAC_LINE);
    memcpy(pre + 8, p + 8, 4);
    kt_buf_put(out, pre, sizeof(pre));
    kt_buf_put(out, p + KT_WIRE_PREFIX, hlen);
    kt_buf_printf(out, "mac=%s\n", tag);
    kt_buf_put(out, p + KT_WIRE_PREFIX + hlen, m->payload_len);
    kt_buf_free(&plain);
}

int
kt_wire_take_sealed(const unsigned char *buf, size_t len, size_t *used,
                    struct kt_msg *m, struct kt_seal *rx, char *err,
                    size_t errlen)
{
    const unsigned char *hdr, *line, *payload;
    uint32_t hlen, plen;
    char tag[65], got[65];
    int rc;

    if (rx == NULL || !rx->on)
        return kt_wire_take(buf, len, used, m, err, errlen);
    *used = 0;
    if (len < KT_WIRE_PREFIX)
        return kt_wire_take(buf, len, used, m, err, errlen);
    rc = kt_wire_prefix(buf, &hlen, &plen, err, errlen);
    if (rc < 0)
        return rc;
    if (len - KT_WIRE_PREFIX < (size_t)hlen + plen)
        return 0;
    hdr = buf + KT_WIRE_PREFIX;
    payload = hdr + hlen;
    line = hdr + hlen - MAC_LINE;
    if (hlen <= MAC_LINE || memcmp(line, "mac=", 4) != 0 ||
        line[MAC_LINE - 1] != '\n' || line[-1] != '\n')
        return kt_seterr(err, errlen, KT_EPROTO,
                         "frame %llu has no session mac line",
                         (unsigned long long)rx->seq);
    memcpy(got, line + 4, 64);
    got[64] = '\0';
    frame_tag(rx, hdr, hlen - MAC_LINE, payload, plen, tag);
    if (!kt_auth_equal(got, tag))
        return kt_seterr(err, errlen, KT_EPROTO,
                         "frame %llu fails its session mac (altered, "
                         "injected, replayed or reordered)",
                         (unsigned long long)rx->seq);
    rc = kt_msg_decode(hdr, hlen - MAC_LINE, payload, plen, m, err, errlen);
    if (rc < 0)
        return rc;
    rx->seq++;
    *used = KT_WIRE_PREFIX + (size_t)hlen + plen;
    return 1;
}

int
kt_wire_send_sealed(int fd, const struct kt_msg *m, struct kt_seal *tx)
{
    struct kt_buf b;
    int rc;

    kt_buf_init(&b);
    kt_msg_encode_sealed(m, tx, &b);
    rc = kt_wire_write_all(fd, b.p, b.len);
    kt_buf_free(&b);
    return rc;
}

int
kt_wire_recv_sealed(int fd, struct kt_msg *m, struct kt_seal *rx,
                    int timeout_ms, char *err, size_t errlen)
{
    unsigned char *frame;
    size_t n, used;
    int rc;

    rc = kt_wire_recv_raw(fd, &frame, &n, KT_WIRE_HDR_MAX, KT_WIRE_PAYLOAD_MAX,
                          timeout_ms, err, errlen);
    if (rc < 0)
        return rc;
    rc = kt_wire_take_sealed(frame, n, &used, m, rx, err, errlen);
    free(frame);
    return rc == 1 ? 0 : rc < 0 ? rc : KT_EPROTO;
}

/* A handshake frame: small header, no payload. */
static int
recv_handshake(int fd, struct kt_msg *m, char *err, size_t errlen)
{
    unsigned char *frame;
    size_t n, used;
    int rc;

    rc = kt_wire_recv_raw(fd, &frame, &n, KT_WIRE_HELLO_HDR_MAX, 0, 10000, err,
                          errlen);
    if (rc < 0)
        return rc;
    rc = kt_wire_take(frame, n, &used, m, err, errlen);
    free(frame);
    return rc == 1 ? 0 : rc < 0 ? rc : KT_EPROTO;
}

int
kt_session_connect(int fd, const struct kt_peer_hello *ph,
                   struct kt_msg *welcome, struct kt_session *s, char *err,
                   size_t errlen)
{
    struct kt_msg m;
    char tnonce[65], pnonce[65], mac[65], role[96];
    const char *v, *token = ph->token ? ph->token : "";
    int rc;

    rc = recv_handshake(fd, &m, err, errlen);
    if (rc < 0)
        return rc;
    v = kt_msg_get(&m, "nonce");
    if (strcmp(kt_msg_type(&m), "challenge") != 0 || v == NULL ||
        !kt_auth_nonce_ok(v)) {
        kt_msg_free(&m);
        return kt_seterr(err, errlen, KT_EPROTO,
                         "the tracker did not send a valid challenge");
    }
    memcpy(tnonce, v, sizeof(tnonce));
    kt_msg_free(&m);
    if (kt_auth_nonce(pnonce) < 0)
        return kt_seterr(err, errlen, KT_EIO,
                         "no random bytes for a nonce (getrandom failed)");
    kt_auth_role(ph->kind, kt_msg_get(ph->hello, "key"), role, sizeof(role));
    kt_auth_proof(token, "peer", role, tnonce, pnonce, mac);
    kt_msg_setf(ph->hello, "proto", "%d", KT_WIRE_PROTO);
    kt_msg_set(ph->hello, "kind", ph->kind);
    kt_msg_set(ph->hello, "nonce", pnonce);
    kt_msg_set(ph->hello, "mac", mac);
    rc = kt_wire_send(fd, ph->hello);
    if (rc < 0)
        return kt_seterr(err, errlen, KT_EIO, "send hello: %s",
                         kt_strerror(rc));
    rc = recv_handshake(fd, welcome, err, errlen);
    if (rc < 0)
        return rc;
    if (strcmp(kt_msg_type(welcome), "welcome") != 0) {
        v = kt_msg_get(welcome, "reason");
        kt_seterr(err, errlen, KT_EPROTO, "tracker refused us: %s",
                  v ? v : kt_msg_type(welcome));
        kt_msg_free(welcome);
        return KT_EPROTO;
    }
    /* Until the tracker proves the token too, it may be a stranger who
     * bound the port or relays someone else's challenge. */
    kt_auth_proof(token, "tracker", role, tnonce, pnonce, mac);
    v = kt_msg_get(welcome, "mac");
    if (v == NULL || !kt_auth_equal(v, mac)) {
        kt_msg_free(welcome);
        return kt_seterr(err, errlen, KT_EAUTH,
                         "the tracker did not prove the token (a fake "
                         "tracker, or a different token); no jobs taken");
    }
    kt_session_start(s, token, 0, tnonce, pnonce);
    return 0;
}

void
kt_reader_init(struct kt_reader *r, uint32_t hdr_max, uint32_t payload_max,
               struct kt_seal *rx)
{
    memset(r, 0, sizeof(*r));
    r->hdr_max = hdr_max;
    r->payload_max = payload_max;
    r->rx = rx;
}

void
kt_reader_free(struct kt_reader *r)
{
    free(r->buf);
    r->buf = NULL;
    r->len = r->cap = 0;
}

/* The most the reader may hold: one largest frame of its stage. */
static size_t
reader_limit(const struct kt_reader *r)
{
    return KT_WIRE_PREFIX + (size_t)r->hdr_max + r->payload_max +
           (r->rx && r->rx->on ? MAC_LINE : 0);
}

int
kt_reader_room(struct kt_reader *r, unsigned char **p, size_t *n)
{
    size_t limit = reader_limit(r), want = 65536, cap;
    unsigned char *nb;

    *p = NULL;
    *n = 0;
    if (r->len >= limit)
        return KT_ETOOBIG;
    if (want > limit - r->len)
        want = limit - r->len;
    if (r->cap - r->len < want) {
        cap = r->cap ? r->cap : want;
        while (cap - r->len < want)
            cap *= 2;
        if (cap > limit)
            cap = limit;
        /* No abort on out-of-memory: the caller drops this peer. */
        nb = realloc(r->buf, cap);
        if (nb == NULL)
            return KT_ENOMEM;
        r->buf = nb;
        r->cap = cap;
    }
    *p = r->buf + r->len;
    *n = r->cap - r->len;
    return 0;
}

void
kt_reader_commit(struct kt_reader *r, size_t n)
{
    r->len += n;
}

int
kt_reader_next(struct kt_reader *r, struct kt_msg *m, char *err, size_t errlen)
{
    uint32_t hlen, plen;
    size_t used;
    int rc;

    if (r->len >= KT_WIRE_PREFIX &&
        kt_wire_prefix(r->buf, &hlen, &plen, NULL, 0) == 0 &&
        (hlen > r->hdr_max + (r->rx && r->rx->on ? MAC_LINE : 0) ||
         plen > r->payload_max))
        return kt_seterr(err, errlen, KT_ETOOBIG,
                         "frame of %u header + %u payload bytes above this "
                         "stage's limit (%u + %u)",
                         hlen, plen, r->hdr_max, r->payload_max);
    rc = kt_wire_take_sealed(r->buf, r->len, &used, m, r->rx, err, errlen);
    if (rc <= 0)
        return rc;
    memmove(r->buf, r->buf + used, r->len - used);
    r->len -= used;
    /* Keep big buffers from lingering after a large payload. */
    if (r->len == 0 && r->cap > (1u << 20))
        kt_reader_free(r);
    return 1;
}
