/* steps_json.c - canonical JSON form of a schedule and its hash.
 *
 *   {"v":1,"steps":[["SP",0,1,[8,16]],["RE",0,[0,2,1]],["FU",0,0,2],
 *                   ["CA",0,1,3],["CI",2],["CR",2],["CHW",0],
 *                   ["AN",0,3,"vectorize"],["PR",0,0,64],["CHR",1,2],
 *                   ["LR",1]]}
 *
 * The writer emits no spaces and fixed field orders, so equal schedules give
 * byte-equal text; the hash of that text identifies a candidate. */
#include "ir/ir.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ann_names[] = {"none", "parallel", "vectorize",
                                        "unroll"};

/* Appends sep (unless 0) and v in decimal, as printf's %lld does: the
 * search hashes the text of every candidate, and vsnprintf took most of
 * that time. */
static void
put_num(struct kt_buf *b, char sep, int64_t v)
{
    char d[24];
    int n = (int)sizeof(d);
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;

    do {
        d[--n] = (char)('0' + u % 10);
        u /= 10;
    } while (u > 0);
    if (v < 0)
        d[--n] = '-';
    if (sep)
        d[--n] = sep;
    kt_buf_put(b, d + n, sizeof(d) - (size_t)n);
}

void
kt_steps_to_json(const struct kt_step *steps, int nsteps, struct kt_buf *b)
{
    int i, j;

    kt_buf_puts(b, "{\"v\":1,\"steps\":[");
    for (i = 0; i < nsteps; i++) {
        const struct kt_step *s = &steps[i];
        if (i)
            kt_buf_putc(b, ',');
        kt_buf_puts(b, "[\"");
        kt_buf_puts(b, kt_step_name(s->kind));
        kt_buf_putc(b, '"');
        put_num(b, ',', s->stage);
        switch (s->kind) {
        case KT_STEP_SPLIT:
        case KT_STEP_REORDER:
            if (s->kind == KT_STEP_SPLIT)
                put_num(b, ',', s->iter);
            kt_buf_puts(b, ",[");
            for (j = 0; j < s->n; j++)
                put_num(b, j ? ',' : 0, s->v[j]);
            kt_buf_putc(b, ']');
            break;
        case KT_STEP_FUSE:
            put_num(b, ',', s->iter);
            put_num(b, ',', s->n);
            break;
        case KT_STEP_COMPUTE_AT:
            put_num(b, ',', s->v[0]);
            put_num(b, ',', s->v[1]);
            break;
        case KT_STEP_ANNOTATE:
            put_num(b, ',', s->iter);
            kt_buf_puts(b, ",\"");
            kt_buf_puts(b,
                        s->v[0] >= 0 && s->v[0] < 4 ? ann_names[s->v[0]] : "?");
            kt_buf_putc(b, '"');
            break;
        case KT_STEP_PRAGMA:
            put_num(b, ',', s->iter);
            put_num(b, ',', s->v[0]);
            break;
        case KT_STEP_CACHE_READ: put_num(b, ',', s->v[0]); break;
        default: break;
        }
        kt_buf_putc(b, ']');
    }
    kt_buf_puts(b, "]}");
}

void
kt_steps_hash(const struct kt_step *steps, int nsteps, char out[17])
{
    struct kt_buf b;

    kt_buf_init(&b);
    kt_steps_to_json(steps, nsteps, &b);
    kt_hash_hex(kt_hash64(b.p, b.len), out);
    kt_buf_free(&b);
}

/* Reads item as an int in [lo, hi]. */
static int
get_int(const cJSON *item, int64_t lo, int64_t hi, int64_t *out)
{
    double d;

    if (!cJSON_IsNumber(item))
        return -1;
    d = item->valuedouble;
    /* Range first: converting an out-of-range double is undefined. */
    if (!(d >= (double)lo && d <= (double)hi) || d != (double)(int64_t)d)
        return -1;
    *out = (int64_t)d;
    return 0;
}

static int
parse_step(const cJSON *a, struct kt_step *s, char *what, size_t wlen)
{
    const cJSON *kind = cJSON_GetArrayItem(a, 0);
    int n = cJSON_GetArraySize(a), k;
    int64_t v;
    const cJSON *list;

    memset(s, 0, sizeof(*s));
    if (!cJSON_IsArray(a) || !cJSON_IsString(kind)) {
        snprintf(what, wlen, "a step must be [\"KIND\", ...]");
        return -1;
    }
    for (k = 0; k < KT_STEP_NKINDS; k++)
        if (strcmp(kind->valuestring, kt_step_name((enum kt_step_kind)k)) == 0)
            break;
    if (k == KT_STEP_NKINDS) {
        snprintf(what, wlen, "unknown step kind \"%.16s\"", kind->valuestring);
        return -1;
    }
    s->kind = (enum kt_step_kind)k;
    if (n < 2 || get_int(cJSON_GetArrayItem(a, 1), 0, KT_MAX_STAGES - 1, &v)) {
        snprintf(what, wlen, "%s: bad stage number", kind->valuestring);
        return -1;
    }
    s->stage = (int)v;
    switch (s->kind) {
    case KT_STEP_SPLIT:
    case KT_STEP_REORDER:
        k = s->kind == KT_STEP_SPLIT ? 3 : 2;
        if (n != k + 1)
            goto arity;
        if (s->kind == KT_STEP_SPLIT) {
            if (get_int(cJSON_GetArrayItem(a, 2), 0, KT_MAX_ITERS - 1, &v))
                goto bad;
            s->iter = (int)v;
        }
        list = cJSON_GetArrayItem(a, k);
        if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) > KT_MAX_STEP_ARGS)
            goto bad;
        s->n = cJSON_GetArraySize(list);
        for (k = 0; k < s->n; k++)
            if (get_int(cJSON_GetArrayItem(list, k), 0, INT32_MAX, &s->v[k]))
                goto bad;
        return 0;
    case KT_STEP_FUSE:
    case KT_STEP_PRAGMA:
    case KT_STEP_COMPUTE_AT:
        if (n != 4)
            goto arity;
        if (get_int(cJSON_GetArrayItem(a, 2), 0, INT32_MAX, &v))
            goto bad;
        if (s->kind == KT_STEP_COMPUTE_AT)
            s->v[0] = v;
        else
            s->iter = (int)v;
        if (get_int(cJSON_GetArrayItem(a, 3), 0, INT32_MAX, &v))
            goto bad;
        if (s->kind == KT_STEP_FUSE)
            s->n = (int)v;
        else if (s->kind == KT_STEP_PRAGMA)
            s->v[0] = v;
        else
            s->v[1] = v;
        return 0;
    case KT_STEP_ANNOTATE:
        if (n != 4)
            goto arity;
        if (get_int(cJSON_GetArrayItem(a, 2), 0, INT32_MAX, &v))
            goto bad;
        s->iter = (int)v;
        list = cJSON_GetArrayItem(a, 3);
        if (!cJSON_IsString(list))
            goto bad;
        for (k = 0; k < 4; k++)
            if (strcmp(list->valuestring, ann_names[k]) == 0)
                break;
        if (k == 4)
            goto bad;
        s->v[0] = k;
        return 0;
    case KT_STEP_CACHE_READ:
        if (n != 3)
            goto arity;
        if (get_int(cJSON_GetArrayItem(a, 2), 0, KT_MAX_TENSORS - 1, &s->v[0]))
            goto bad;
        return 0;
    default:
        if (n != 2)
            goto arity;
        return 0;
    }
arity:
    snprintf(what, wlen, "%s: wrong number of fields (%d)", kind->valuestring,
             n);
    return -1;
bad:
    snprintf(what, wlen, "%s: malformed field", kind->valuestring);
    return -1;
}

int
kt_steps_from_json(const char *json, struct kt_step **steps, int *nsteps,
                   char *err, size_t errlen)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(json, &end, 1);
    const cJSON *v, *list;
    struct kt_step *out = NULL;
    char what[128];
    int i, n;

    *steps = NULL;
    *nsteps = 0;
    if (root == NULL)
        return kt_seterr(err, errlen, KT_EPARSE,
                         "schedule JSON: syntax error at offset %ld",
                         end ? (long)(end - json) : 0L);
    v = cJSON_GetObjectItemCaseSensitive(root, "v");
    list = cJSON_GetObjectItemCaseSensitive(root, "steps");
    if (!cJSON_IsNumber(v) || v->valueint != 1 || !cJSON_IsArray(list)) {
        cJSON_Delete(root);
        return kt_seterr(err, errlen, KT_EPARSE,
                         "schedule JSON: expected {\"v\":1,\"steps\":[...]}");
    }
    n = cJSON_GetArraySize(list);
    out = kt_xcalloc((size_t)(n ? n : 1), sizeof(*out));
    for (i = 0; i < n; i++) {
        if (parse_step(cJSON_GetArrayItem(list, i), &out[i], what,
                       sizeof(what))) {
            free(out);
            cJSON_Delete(root);
            return kt_seterr(err, errlen, KT_EPARSE,
                             "schedule JSON: step %d: %s", i, what);
        }
    }
    cJSON_Delete(root);
    *steps = out;
    *nsteps = n;
    return KT_OK;
}
