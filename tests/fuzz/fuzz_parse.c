/* fuzz_parse.c - libFuzzer target for the compute-language parser and DAG
 * builder.  Input: an optional first line "@NAME:D1xD2... NAME:..." giving
 * input shapes (dims 1..64), then a definition.  For every definition that
 * parses it checks that print/parse gives the same key, and interprets
 * small DAGs (the interpreter aborts on an unguarded out-of-bounds read,
 * so a wrong padding stage is a crash). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Parses "@A:3x4 B:4" into sh; returns the count or -1 when malformed. */
static int
parse_shapes(const char *line, struct kt_shape *sh)
{
    const char *p = line;
    int n = 0, len;
    long v;
    char *end;

    while (*p == ' ')
        p++;
    while (*p != '\0') {
        if (n == KT_MAX_TENSORS)
            return -1;
        memset(&sh[n], 0, sizeof(sh[n]));
        for (len = 0; p[len] != ':' && p[len] != '\0' && p[len] != ' '; len++)
            ;
        if (p[len] != ':' || len == 0 || len >= KT_MAX_NAME)
            return -1;
        memcpy(sh[n].name, p, (size_t)len);
        p += len + 1;
        for (;;) {
            if (sh[n].ndim == KT_MAX_DIMS)
                return -1;
            v = strtol(p, &end, 10);
            if (end == p || v < 1 || v > 64)
                return -1;
            sh[n].dims[sh[n].ndim++] = v;
            p = end;
            if (*p != 'x')
                break;
            p++;
        }
        n++;
        while (*p == ' ')
            p++;
    }
    return n;
}

static void
interpret_small(const struct kt_dag *d)
{
    float *bufs[KT_MAX_TENSORS];
    double work = 0, iters;
    int64_t n, e;
    int s, a, t;

    for (s = 0; s < d->nstages; s++) {
        iters = 1;
        for (a = 0; a < d->stages[s].naxes; a++)
            iters *= (double)d->stages[s].axes[a].extent;
        work += iters;
    }
    for (t = 0; t < d->ntensors; t++)
        work += (double)kt_tensor_elems(&d->tensors[t]);
    if (work > 200000)
        return;
    for (t = 0; t < d->ntensors; t++) {
        n = kt_tensor_elems(&d->tensors[t]);
        bufs[t] = kt_xmalloc((size_t)n * sizeof(float));
        for (e = 0; e < n; e++)
            bufs[t][e] = (float)((e * 7 + t) % 13) - 6.0f;
    }
    kt_dag_interpret(d, bufs);
    for (t = 0; t < d->ntensors; t++)
        free(bufs[t]);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kt_shape sh[KT_MAX_TENSORS];
    struct kt_dag *d = NULL, *d2 = NULL;
    struct kt_buf b;
    char *text, *def, err[256];
    int nsh = 0;

    if (size > 4096)
        return 0;
    text = kt_xmalloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    def = text;
    if (text[0] == '@') {
        def = strchr(text, '\n');
        if (def == NULL)
            goto out;
        *def++ = '\0';
        nsh = parse_shapes(text + 1, sh);
        if (nsh < 0)
            goto out;
    }
    if (kt_dag_parse(def, sh, nsh, &d, err, sizeof(err)) != KT_OK) {
        if (d != NULL || strlen(err) == 0)
            abort(); /* errors must leave no DAG and a message */
        goto out;
    }
    kt_buf_init(&b);
    kt_dag_print(d, &b);
    if (kt_dag_parse(b.p, sh, nsh, &d2, err, sizeof(err)) != KT_OK) {
        /* A shape of a written tensor was given: the print leaves it out
         * only when the reads fix the same extent, so reparse must work
         * without it.  Drop such shapes and retry. */
        struct kt_shape in[KT_MAX_TENSORS];
        int i, m = 0;

        for (i = 0; i < nsh; i++) {
            int t = kt_dag_find_tensor(d, sh[i].name);
            if (t >= 0 && d->tensors[t].kind == KT_TENSOR_INPUT)
                in[m++] = sh[i];
        }
        if (kt_dag_parse(b.p, in, m, &d2, err, sizeof(err)) != KT_OK) {
            fprintf(stderr, "reparse failed: %s\n%s", err, b.p);
            abort();
        }
    }
    if (strcmp(d->key, d2->key) != 0) {
        fprintf(stderr, "key mismatch:\n%s\n%s\n", d->key, d2->key);
        abort();
    }
    kt_buf_free(&b);
    interpret_small(d);
out:
    kt_dag_free(d);
    kt_dag_free(d2);
    free(text);
    return 0;
}
