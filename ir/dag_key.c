/* dag_key.c - rebuilding a DAG from its workload key (kt_dag_from_key).
 *
 * A key is the canonical statements followed by the input shapes, all
 * separated by ';' (docs/compute.md):  C[a0,a1]+=A[a0,a2]*B[a2,a1];A:4x8;B:8x4
 * (a constant weight's shape ends in ":const")
 * so stored trials of any workload can be lowered again: for the cost
 * model's warm start, for reports and for exports. */
#include "ir/ir.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "NAME:D1xD2x...[:const]" with no brackets: a shape entry. */
static int
parse_shape(const char *tok, size_t len, struct kt_shape *s, int *is_const)
{
    size_t i = 0, n = 0;

    if (len == 0 || memchr(tok, '[', len) != NULL)
        return 0;
    while (i < len && (isalnum((unsigned char)tok[i]) || tok[i] == '_'))
        i++;
    if (i == 0 || i >= len || tok[i] != ':' || i >= sizeof(s->name))
        return 0;
    memset(s, 0, sizeof(*s));
    memcpy(s->name, tok, i);
    i++;
    *is_const = len > 6 && memcmp(tok + len - 6, ":const", 6) == 0;
    if (*is_const)
        len -= 6;
    while (i < len) {
        char *end;
        long long v = strtoll(tok + i, &end, 10);
        if (end == tok + i || v <= 0 || n == KT_MAX_DIMS)
            return 0;
        s->dims[n++] = v;
        i = (size_t)(end - tok);
        if (i < len && tok[i] != 'x')
            return 0;
        if (i < len)
            i++;
    }
    s->ndim = (int)n;
    return n > 0;
}

int
kt_dag_from_key(const char *key, struct kt_dag **out, char *err, size_t errlen)
{
    struct kt_shape shapes[KT_MAX_TENSORS];
    int is_const[KT_MAX_TENSORS];
    struct kt_buf text;
    const char *p = key;
    int nshapes = 0, rc;

    *out = NULL;
    kt_buf_init(&text);
    while (*p) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (nshapes < KT_MAX_TENSORS &&
            parse_shape(p, len, &shapes[nshapes], &is_const[nshapes])) {
            nshapes++;
        } else {
            kt_buf_put(&text, p, len);
            kt_buf_putc(&text, '\n');
        }
        p += len;
        if (*p == ';')
            p++;
    }
    rc = kt_dag_parse_weights(text.p, shapes, is_const, nshapes, out, err,
                              errlen);
    kt_buf_free(&text);
    if (rc == KT_OK && strcmp((*out)->key, key) != 0) {
        kt_dag_free(*out);
        *out = NULL;
        return kt_seterr(err, errlen, KT_EPARSE,
                         "workload key does not rebuild to itself");
    }
    return rc;
}
