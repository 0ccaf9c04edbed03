/* random.c - secret random bytes from the kernel (getrandom(2)) for nonces,
 * generated tokens and session keys.  There is no fallback: a caller that
 * cannot get them fails (a predictable nonce would defeat the challenge). */
#include "common/common.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

int
kt_random_bytes(void *out, size_t n)
{
    unsigned char *p = out;

    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

int
kt_random_hex(char *out, size_t nbytes)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[64];
    size_t i;
    int rc;

    if (nbytes > sizeof(r))
        return KT_EINVAL;
    rc = kt_random_bytes(r, nbytes);
    if (rc < 0) {
        out[0] = '\0';
        return rc;
    }
    for (i = 0; i < nbytes; i++) {
        out[2 * i] = hex[r[i] >> 4];
        out[2 * i + 1] = hex[r[i] & 15];
    }
    out[2 * nbytes] = '\0';
    memset(r, 0, sizeof(r));
    return 0;
}
