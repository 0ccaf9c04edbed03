/* keys_read.c - the generic reader of the key tables (keys.c): defaults,
 * every value type read and range-checked with the file, line and key
 * path of a bad value, unknown keys refused with a suggestion, and the
 * values freed again. */
#include "config/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the generic reader ------------------------------------------------ */

static void
set_default(const struct kt__key *k, void *base)
{
    char *f = (char *)base + k->off;
    cJSON *v;
    if (k->def == NULL || k->type == KT_K_IGNORED || k->type == KT_K_OBJECT ||
        k->type == KT_K_ARRAY)
        return;
    v = cJSON_Parse(k->def);
    if (v == NULL)
        return; /* descriptive default, filled by the loader */
    switch (k->type) {
    case KT_K_INT: *(int64_t *)(void *)f = (int64_t)v->valuedouble; break;
    case KT_K_NUM: *(double *)(void *)f = v->valuedouble; break;
    case KT_K_BOOL: /* a null default: unset, -1 */
        *(int *)(void *)f = cJSON_IsNull(v) ? -1 : cJSON_IsTrue(v);
        break;
    case KT_K_STR:
        *(char **)(void *)f = cJSON_IsString(v) ? kt_xstrdup(v->valuestring)
                                                : NULL;
        break;
    case KT_K_ENUM: {
        int i;
        for (i = 0; k->enums[i] != NULL; i++)
            if (strcmp(k->enums[i], v->valuestring) == 0)
                *(int *)(void *)f = i;
        break;
    }
    case KT_K_STRLIST: {
        struct kt_strlist *l = (struct kt_strlist *)(void *)f;
        const cJSON *c;
        int i = 0;
        l->n = cJSON_GetArraySize(v);
        l->v = kt_xcalloc((size_t)l->n + 1, sizeof(char *));
        cJSON_ArrayForEach (c, v)
            l->v[i++] = kt_xstrdup(c->valuestring);
        break;
    }
    case KT_K_PAIR:
        ((int64_t *)(void *)f)[0] = (int64_t)v->valuedouble;
        ((int64_t *)(void *)f)[1] = (int64_t)v->valuedouble;
        break;
    case KT_K_EPILOGUE: *(int *)(void *)f = 0; break;
    default: break;
    }
    cJSON_Delete(v);
}

void
kt__keys_defaults(const struct kt__keytab *tab, void *base)
{
    int i;
    for (i = 0; i < tab->nkeys; i++)
        set_default(&tab->keys[i], base);
}

static const char *
type_name(const cJSON *v)
{
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsArray(v))
        return "an array";
    return "an object";
}

void
kt__fmt_num(double x, char *out, size_t n)
{
    if (x == floor(x) && fabs(x) < 1e15)
        snprintf(out, n, "%.0f", x);
    else
        snprintf(out, n, "%g", x);
}

/* Checks one number against the key's type and range. */
static int
check_num(struct kt__jdoc *doc, const struct kt__key *k, const cJSON *v,
          const char *path, int integral)
{
    char lo[32], hi[32], got[32];
    double x;
    if (!cJSON_IsNumber(v))
        return kt__jerr(doc, v, path, "must be %s (got %s)",
                        integral ? "an integer" : "a number", type_name(v));
    x = v->valuedouble;
    kt__fmt_num(x, got, sizeof(got));
    if (integral && x != floor(x))
        return kt__jerr(doc, v, path, "must be an integer (got %s)", got);
    if (k->min < k->max) {
        kt__fmt_num(k->min, lo, sizeof(lo));
        kt__fmt_num(k->max, hi, sizeof(hi));
        if (x < k->min && k->min > 0 && k->min < 1e-6)
            return kt__jerr(doc, v, path, "must be > 0 (got %s)", got);
        if (x < k->min)
            return kt__jerr(doc, v, path, "must be >= %s (got %s)", lo, got);
        if (x > k->max)
            return kt__jerr(doc, v, path, "must be <= %s (got %s)", hi, got);
    }
    return 0;
}

static int
read_enum(struct kt__jdoc *doc, const struct kt__key *k, const cJSON *v,
          const char *path, int *out)
{
    struct kt_buf b;
    const char *s;
    int i, n;
    if (cJSON_IsString(v)) {
        for (i = 0; k->enums[i] != NULL; i++) {
            if (strcmp(k->enums[i], v->valuestring) == 0) {
                *out = i;
                return 0;
            }
        }
    }
    kt_buf_init(&b);
    for (n = 0; k->enums[n] != NULL; n++)
        kt_buf_printf(&b, "%s\"%s\"", n ? ", " : "", k->enums[n]);
    s = cJSON_IsString(v) ? kt__suggest(v->valuestring, k->enums, n) : NULL;
    if (!cJSON_IsString(v))
        kt__jerr(doc, v, path, "must be one of %s (got %s)", b.p, type_name(v));
    else if (s != NULL)
        kt__jerr(doc, v, path, "unknown value \"%s\" (did you mean \"%s\"?)",
                 v->valuestring, s);
    else
        kt__jerr(doc, v, path, "unknown value \"%s\" (expected one of %s)",
                 v->valuestring, b.p);
    kt_buf_free(&b);
    return KT_ECONFIG;
}

static int
read_str(struct kt__jdoc *doc, const struct kt__key *k, const cJSON *v,
         const char *path, char **f)
{
    if (cJSON_IsNull(v) && k->def != NULL && strcmp(k->def, "null") == 0)
        return 0;
    if (!cJSON_IsString(v))
        return kt__jerr(doc, v, path, "must be a string (got %s)",
                        type_name(v));
    if (v->valuestring[0] == '\0')
        return kt__jerr(doc, v, path, "must not be empty");
    if (k->enums != NULL) {
        int dummy, rc = read_enum(doc, k, v, path, &dummy);
        if (rc < 0)
            return rc;
    }
    free(*f);
    *f = kt_xstrdup(v->valuestring);
    return 0;
}

/* A string or an array of strings. */
static int
read_strlist(struct kt__jdoc *doc, const cJSON *v, const char *path,
             struct kt_strlist *l)
{
    char sub[700];
    const cJSON *c;
    int i = 0;

    if (!cJSON_IsString(v) && !cJSON_IsArray(v))
        return kt__jerr(doc, v, path,
                        "must be an array of strings (got "
                        "%s)",
                        type_name(v));
    if (cJSON_IsArray(v)) {
        cJSON_ArrayForEach (c, v) {
            if (!cJSON_IsString(c)) {
                snprintf(sub, sizeof(sub), "%s[%d]", path, i);
                return kt__jerr(doc, c, sub, "must be a string (got %s)",
                                type_name(c));
            }
            i++;
        }
    }
    for (i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    if (cJSON_IsString(v)) {
        l->n = 1;
        l->v = kt_xcalloc(2, sizeof(char *));
        l->v[0] = kt_xstrdup(v->valuestring);
        return 0;
    }
    l->n = cJSON_GetArraySize(v);
    l->v = kt_xcalloc((size_t)l->n + 1, sizeof(char *));
    i = 0;
    cJSON_ArrayForEach (c, v)
        l->v[i++] = kt_xstrdup(c->valuestring);
    return 0;
}

/* The elements of array v, each an integer in k's range, into out. */
static int
read_ints(struct kt__jdoc *doc, const struct kt__key *k, const cJSON *v,
          const char *path, int64_t *out)
{
    char sub[700];
    const cJSON *c;
    int rc, i = 0;

    cJSON_ArrayForEach (c, v) {
        snprintf(sub, sizeof(sub), "%s[%d]", path, i);
        rc = check_num(doc, k, c, sub, 1);
        if (rc < 0)
            return rc;
        out[i++] = (int64_t)c->valuedouble;
    }
    return 0;
}

/* An integer for both directions, or [h, w]. */
static int
read_pair(struct kt__jdoc *doc, const struct kt__key *k, const cJSON *v,
          const char *path, int64_t *p)
{
    int rc;

    if (cJSON_IsNumber(v)) {
        rc = check_num(doc, k, v, path, 1);
        if (rc == 0)
            p[0] = p[1] = (int64_t)v->valuedouble;
        return rc;
    }
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2)
        return kt__jerr(doc, v, path,
                        "must be an integer or [h, w] "
                        "(got %s)",
                        type_name(v));
    return read_ints(doc, k, v, path, p);
}

/* ["bias"], ["relu"] or ["bias", "relu"] as bits 1 and 2. */
static int
read_epilogue(struct kt__jdoc *doc, const cJSON *v, const char *path, int *out)
{
    char sub[700];
    const cJSON *c;
    int bits = 0, i = 0;

    if (!cJSON_IsArray(v))
        return kt__jerr(doc, v, path,
                        "must be an array such as "
                        "[\"bias\", \"relu\"] (got %s)",
                        type_name(v));
    cJSON_ArrayForEach (c, v) {
        snprintf(sub, sizeof(sub), "%s[%d]", path, i++);
        if (!cJSON_IsString(c))
            return kt__jerr(doc, c, sub,
                            "must be \"bias\" or \"relu\" "
                            "(got %s)",
                            type_name(c));
        if (strcmp(c->valuestring, "bias") == 0) {
            if (bits != 0)
                return kt__jerr(doc, c, sub,
                                "\"bias\" must come first "
                                "and only once");
            bits |= 1;
        } else if (strcmp(c->valuestring, "relu") == 0) {
            if (bits & 2)
                return kt__jerr(doc, c, sub, "\"relu\" given twice");
            bits |= 2;
        } else {
            return kt__jerr(doc, c, sub,
                            "unknown epilogue \"%s\" "
                            "(supported: \"bias\", \"relu\")",
                            c->valuestring);
        }
    }
    *out = bits;
    return 0;
}

/* A layer's shape: 1 to 4 dimensions into kt_layer.shape, the count in n. */
static int
read_shape(struct kt__jdoc *doc, const struct kt__key *k, const cJSON *v,
           const char *path, void *base, int *n)
{
    int64_t *d = (int64_t *)(void *)((char *)base +
                                     offsetof(struct kt_layer, shape));
    int cnt = cJSON_GetArraySize(v), rc;

    if (!cJSON_IsArray(v) || cnt < 1 || cnt > 4) {
        if (cJSON_IsArray(v))
            return kt__jerr(doc, v, path,
                            "must have 1 to 4 dimensions "
                            "(got %d)",
                            cnt);
        return kt__jerr(doc, v, path,
                        "must be an array of 1 to 4 "
                        "dimensions (got %s)",
                        type_name(v));
    }
    rc = read_ints(doc, k, v, path, d);
    if (rc == 0)
        *n = cnt;
    return rc;
}

static int
read_value(struct kt__jdoc *doc, const struct kt__key *k, const cJSON *v,
           const char *path, void *base)
{
    char *f = (char *)base + k->off;
    int rc;

    switch (k->type) {
    case KT_K_INT:
        rc = check_num(doc, k, v, path, 1);
        if (rc == 0)
            *(int64_t *)(void *)f = (int64_t)v->valuedouble;
        return rc;
    case KT_K_NUM:
        rc = check_num(doc, k, v, path, 0);
        if (rc == 0)
            *(double *)(void *)f = v->valuedouble;
        return rc;
    case KT_K_BOOL:
        if (!cJSON_IsBool(v))
            return kt__jerr(doc, v, path, "must be true or false (got %s)",
                            type_name(v));
        *(int *)(void *)f = cJSON_IsTrue(v);
        return 0;
    case KT_K_STR: return read_str(doc, k, v, path, (char **)(void *)f);
    case KT_K_ENUM: return read_enum(doc, k, v, path, (int *)(void *)f);
    case KT_K_STRLIST:
        return read_strlist(doc, v, path, (struct kt_strlist *)(void *)f);
    case KT_K_PAIR: return read_pair(doc, k, v, path, (int64_t *)(void *)f);
    case KT_K_EPILOGUE: return read_epilogue(doc, v, path, (int *)(void *)f);
    case KT_K_SHAPE: return read_shape(doc, k, v, path, base, (int *)(void *)f);
    case KT_K_OBJECT:
        if (!cJSON_IsObject(v))
            return kt__jerr(doc, v, path, "must be an object (got %s)",
                            type_name(v));
        return 0;
    case KT_K_ARRAY:
        if (!cJSON_IsArray(v))
            return kt__jerr(doc, v, path, "must be an array (got %s)",
                            type_name(v));
        return 0;
    case KT_K_IGNORED: return 0;
    }
    return 0;
}

static const struct kt__key *
find_key(const struct kt__keytab *const *tabs, int ntabs, const char *name)
{
    int t, i;
    for (t = 0; t < ntabs; t++)
        for (i = 0; i < tabs[t]->nkeys; i++)
            if (strcmp(tabs[t]->keys[i].name, name) == 0)
                return &tabs[t]->keys[i];
    return NULL;
}

int
kt__keys_read(struct kt__jdoc *doc, const cJSON *obj, const char *path,
              const struct kt__keytab *const *tabs, int ntabs, void *base)
{
    const char *names[64];
    const cJSON *c;
    char sub[600];
    int t, i, n = 0, rc;

    if (!cJSON_IsObject(obj))
        return kt__jerr(doc, obj, path[0] ? path : "(top level)",
                        "must be an object (got %s)", type_name(obj));
    for (t = 0; t < ntabs; t++)
        for (i = 0; i < tabs[t]->nkeys && n < 64; i++)
            names[n++] = tabs[t]->keys[i].name;
    cJSON_ArrayForEach (c, obj) {
        const struct kt__key *k = find_key(tabs, ntabs, c->string);
        if (k == NULL) {
            const char *s = kt__suggest(c->string, names, n);
            if (s != NULL)
                return kt__jerr_key(doc, c, path,
                                    "unknown key \"%s\" (did "
                                    "you mean \"%s\"?)",
                                    c->string, s);
            return kt__jerr_key(doc, c, path, "unknown key \"%s\"", c->string);
        }
        snprintf(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "",
                 c->string);
        rc = read_value(doc, k, c, sub, base);
        if (rc < 0)
            return rc;
    }
    for (t = 0; t < ntabs; t++) {
        for (i = 0; i < tabs[t]->nkeys; i++) {
            const struct kt__key *k = &tabs[t]->keys[i];
            if (k->def == NULL &&
                cJSON_GetObjectItemCaseSensitive(obj, k->name) == NULL)
                return kt__jerr(doc, obj, path[0] ? path : "(top level)",
                                "missing required key \"%s\"", k->name);
        }
    }
    return 0;
}

void
kt__keys_free(const struct kt__keytab *tab, void *base)
{
    int i, j;
    for (i = 0; i < tab->nkeys; i++) {
        const struct kt__key *k = &tab->keys[i];
        char *f = (char *)base + k->off;
        if (k->type == KT_K_STR) {
            free(*(char **)(void *)f);
            *(char **)(void *)f = NULL;
        } else if (k->type == KT_K_STRLIST) {
            struct kt_strlist *l = (struct kt_strlist *)(void *)f;
            for (j = 0; j < l->n; j++)
                free(l->v[j]);
            free(l->v);
            l->v = NULL;
            l->n = 0;
        }
    }
}
