/* fuzz_reader.c - libFuzzer target for the incremental frame reader that
 * the tracker (one per connection) and the worker use: the input's first
 * byte picks the stage (before authentication: 4 KiB header, no payload;
 * after it: full limits, plain or sealed under a fixed session), the rest is
 * fed in chunks whose sizes come from the input, the way reads arrive.  The
 * reader must never hold more than one frame of its stage, never crash, and
 * every message it yields must have a type. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "measure/worker/worker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kt_session sess;
    struct kt_reader r;
    struct kt_msg m;
    char err[300];
    size_t off = 1, limit;
    int mode, rc = 0;

    if (size < 1)
        return 0;
    mode = data[0] % 3;
    kt_session_start(&sess, "fuzz-token", 1,
                     "0000000000000000000000000000000000000000000000000000000"
                     "000000000",
                     "1111111111111111111111111111111111111111111111111111111"
                     "111111111");
    if (mode != 2)
        sess.rx.on = 0;
    if (mode == 0)
        kt_reader_init(&r, KT_WIRE_HELLO_HDR_MAX, 0, &sess.rx);
    else
        kt_reader_init(&r, KT_WIRE_HDR_MAX, KT_WIRE_PAYLOAD_MAX, &sess.rx);
    limit = KT_WIRE_PREFIX + (size_t)r.hdr_max + r.payload_max + 69;
    while (off < size && rc >= 0) {
        size_t chunk = (size_t)data[off++] % 64 + 1, room;
        unsigned char *p;
        if (chunk > size - off)
            chunk = size - off;
        if (kt_reader_room(&r, &p, &room) < 0)
            break;
        if (chunk > room)
            chunk = room;
        memcpy(p, data + off, chunk);
        off += chunk;
        kt_reader_commit(&r, chunk);
        if (r.len > limit)
            abort();
        while ((rc = kt_reader_next(&r, &m, err, sizeof(err))) == 1) {
            if (kt_msg_type(&m) == NULL || kt_msg_type(&m)[0] == '\0')
                abort();
            kt_msg_free(&m);
        }
    }
    kt_reader_free(&r);
    return 0;
}
