/* fuzz_wire.c - libFuzzer target for the worker protocol's decoder: the
 * input is a byte stream as a tracker or worker would read it.  Frames are
 * taken one after another until the stream is malformed or incomplete;
 * every decoded message must re-encode to a frame that decodes to the same
 * keys, values and payload.  The input is also decoded as bare header text
 * and its first 12 bytes as a prefix. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "measure/worker/worker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
roundtrip(const struct kt_msg *m)
{
    struct kt_buf b;
    struct kt_msg d;
    char err[256];
    size_t used;
    int i;

    kt_buf_init(&b);
    kt_msg_encode(m, &b);
    if (kt_wire_take((const unsigned char *)b.p, b.len, &used, &d, err,
                     sizeof(err)) != 1 ||
        used != b.len)
        abort();
    if (d.nkv != m->nkv || d.payload_len != m->payload_len ||
        (m->payload_len && memcmp(d.payload, m->payload, m->payload_len)))
        abort();
    for (i = 0; i < m->nkv; i++)
        if (strcmp(d.keys[i], m->keys[i]) || strcmp(d.vals[i], m->vals[i]))
            abort();
    kt_msg_free(&d);
    kt_buf_free(&b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kt_msg m;
    char err[256];
    size_t off = 0, used;
    uint32_t h, p;

    while (off < size) {
        int rc = kt_wire_take(data + off, size - off, &used, &m, err,
                              sizeof(err));
        if (rc <= 0)
            break;
        if (used == 0 || used > size - off)
            abort();
        roundtrip(&m);
        kt_msg_free(&m);
        off += used;
    }
    if (size <= KT_WIRE_HDR_MAX &&
        kt_msg_decode(data, size, NULL, 0, &m, err, sizeof(err)) == 0) {
        roundtrip(&m);
        kt_msg_free(&m);
    }
    if (size >= KT_WIRE_PREFIX)
        (void)kt_wire_prefix(data, &h, &p, err, sizeof(err));
    return 0;
}
