/* auth.c - SHA-256 (FIPS 180-4), HMAC-SHA-256 (RFC 2104) and the token
 * challenge used by the worker protocol.  The worker cross-compiles with a
 * bare toolchain and no crypto library, so the 100 lines live here; they
 * are checked against the FIPS/RFC 4231 test vectors in test_rpc. */
#include "measure/worker/worker.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const uint32_t K[64] =
    {0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
     0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
     0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
     0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
     0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
     0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
     0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
     0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
     0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
     0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
     0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void
block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64], a, b, c, d, e, f, g, hh, t1, t2;
    int i;

    for (i = 0; i < 16; i++)
        w[i] = ((uint32_t)p[4 * i] << 24) | ((uint32_t)p[4 * i + 1] << 16) |
               ((uint32_t)p[4 * i + 2] << 8) | p[4 * i + 3];
    for (i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = h[0], b = h[1], c = h[2], d = h[3];
    e = h[4], f = h[5], g = h[6], hh = h[7];
    for (i = 0; i < 64; i++) {
        t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) +
             K[i] + w[i];
        t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) +
             ((a & b) ^ (a & c) ^ (b & c));
        hh = g, g = f, f = e, e = d + t1;
        d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d;
    h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

struct sha {
    uint32_t h[8];
    unsigned char buf[64];
    size_t n;
    uint64_t total;
};

static void
sha_init(struct sha *s)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                   0xa54ff53a, 0x510e527f, 0x9b05688c,
                                   0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof(iv));
    s->n = 0;
    s->total = 0;
}

static void
sha_update(struct sha *s, const void *data, size_t n)
{
    const unsigned char *p = data;

    s->total += n;
    while (n > 0) {
        size_t take = 64 - s->n < n ? 64 - s->n : n;
        memcpy(s->buf + s->n, p, take);
        s->n += take;
        p += take;
        n -= take;
        if (s->n == 64) {
            block(s->h, s->buf);
            s->n = 0;
        }
    }
}

static void
sha_final(struct sha *s, unsigned char out[32])
{
    uint64_t bits = s->total * 8;
    unsigned char pad = 0x80, len[8];
    int i;

    sha_update(s, &pad, 1);
    pad = 0;
    while (s->n != 56)
        sha_update(s, &pad, 1);
    for (i = 0; i < 8; i++)
        len[i] = (unsigned char)(bits >> (56 - 8 * i));
    sha_update(s, len, 8);
    for (i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(s->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)s->h[i];
    }
}

void
kt_sha256(const void *data, size_t n, unsigned char out[32])
{
    struct sha s;

    sha_init(&s);
    sha_update(&s, data, n);
    sha_final(&s, out);
}

void
kt_hmac_sha256_parts(const void *key, size_t klen, const void *const *parts,
                     const size_t *lens, int n, unsigned char out[32])
{
    unsigned char k[64], ipad[64], opad[64], inner[32];
    struct sha s;
    int i;

    memset(k, 0, sizeof(k));
    if (klen > 64)
        kt_sha256(key, klen, k);
    else
        memcpy(k, key, klen);
    for (i = 0; i < 64; i++) {
        ipad[i] = k[i] ^ 0x36;
        opad[i] = k[i] ^ 0x5c;
    }
    sha_init(&s);
    sha_update(&s, ipad, 64);
    for (i = 0; i < n; i++)
        sha_update(&s, parts[i], lens[i]);
    sha_final(&s, inner);
    sha_init(&s);
    sha_update(&s, opad, 64);
    sha_update(&s, inner, 32);
    sha_final(&s, out);
}

void
kt_hmac_sha256(const void *key, size_t klen, const void *msg, size_t n,
               unsigned char out[32])
{
    kt_hmac_sha256_parts(key, klen, &msg, &n, 1, out);
}

static void
to_hex(const unsigned char *p, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    size_t i;

    for (i = 0; i < n; i++) {
        out[2 * i] = hex[p[i] >> 4];
        out[2 * i + 1] = hex[p[i] & 15];
    }
    out[2 * n] = '\0';
}

void
kt_auth_proof(const char *token, const char *from, const char *kind,
              const char *tracker_nonce, const char *peer_nonce, char out[65])
{
    struct kt_buf m;
    unsigned char mac[32];

    kt_buf_init(&m);
    kt_buf_printf(&m, "kerntune-rpc-v%d proof from %s, %s:%s:%s", KT_WIRE_PROTO,
                  from, kind, tracker_nonce, peer_nonce);
    kt_hmac_sha256(token, strlen(token), m.p, m.len, mac);
    to_hex(mac, 32, out);
    kt_buf_free(&m);
}

void
kt_auth_session_key(const char *token, const char *from,
                    const char *tracker_nonce, const char *peer_nonce,
                    unsigned char key[32])
{
    struct kt_buf m;

    kt_buf_init(&m);
    kt_buf_printf(&m, "kerntune-rpc-v%d session from %s:%s:%s", KT_WIRE_PROTO,
                  from, tracker_nonce, peer_nonce);
    kt_hmac_sha256(token, strlen(token), m.p, m.len, key);
    kt_buf_free(&m);
}

void
kt_auth_role(const char *kind, const char *key, char *out, size_t len)
{
    if (strcmp(kind, "worker") == 0)
        snprintf(out, len, "worker:%s", key ? key : "");
    else
        snprintf(out, len, "%s", kind);
}

int
kt_auth_nonce(char out[65])
{
    return kt_random_hex(out, 32);
}

int
kt_auth_nonce_ok(const char *s)
{
    size_t i;

    for (i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return s[64] == '\0';
}

int
kt_auth_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), i;
    unsigned char d = la != lb;

    for (i = 0; i < la && i < lb; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}
