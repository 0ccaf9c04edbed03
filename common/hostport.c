/* hostport.c - HOST:PORT as written on command lines and in configs, the
 * one parser for the daemon, the CLI and the worker. */
#include <ctype.h>
#include <string.h>

#include "common/common.h"

int
kt_hostport_parse(const char *s, char *host, size_t hostlen, int *port,
                  char *err, size_t errlen)
{
    const char *h = s, *colon, *p;
    size_t hl;
    long v = 0;

    if (s == NULL || s[0] == '\0')
        return kt_seterr(err, errlen, KT_EINVAL,
                         "expected HOST:PORT, got an empty string");
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (rb == NULL || rb[1] != ':')
            return kt_seterr(err, errlen, KT_EINVAL,
                             "\"%s\": expected [ADDRESS]:PORT", s);
        h = s + 1;
        hl = (size_t)(rb - h);
        colon = rb + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL)
            return kt_seterr(err, errlen, KT_EINVAL,
                             "\"%s\": expected HOST:PORT", s);
        if (strchr(s, ':') != colon)
            return kt_seterr(err, errlen, KT_EINVAL,
                             "\"%s\": an IPv6 address must be "
                             "written [ADDRESS]:PORT",
                             s);
        hl = (size_t)(colon - s);
    }
    if (hl == 0)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "\"%s\": the host is empty (use "
                         "0.0.0.0 for every interface)",
                         s);
    if (hl >= hostlen)
        return kt_seterr(err, errlen, KT_ETOOBIG,
                         "\"%s\": the host is longer than %zu "
                         "characters",
                         s, hostlen - 1);
    /* digits only: no sign, no spaces, at most 5 of them */
    for (p = colon + 1; *p != '\0' && p - colon <= 5; p++) {
        if (!isdigit((unsigned char)*p))
            break;
        v = v * 10 + (*p - '0');
    }
    if (p == colon + 1 || *p != '\0' || v > 65535)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "\"%s\": the port must be a number "
                         "from 0 to 65535",
                         s);
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)v;
    return KT_OK;
}
