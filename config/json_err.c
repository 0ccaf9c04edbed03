/* json_err.c - JSON documents with positions: parse with cJSON, then walk
 * the text in step with the tree to learn the line:column of every value,
 * so that semantic errors can point at the offending value.  Also the error
 * formatter and the "did you mean" helper. */
#include "config/internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

struct walk {
    const char *t;
    size_t i;
    struct kt__jdoc *doc;
    size_t *offs;  /* offset of each recorded value */
    size_t *koffs; /* offset of its key */
    size_t key;    /* offset of the key just read */
    int cap;
    char dup[600]; /* duplicate-key message */
};

static void
skip_ws(struct walk *w)
{
    while (w->t[w->i] != '\0' && (unsigned char)w->t[w->i] <= ' ')
        w->i++;
}

static void
skip_string(struct walk *w)
{
    if (w->t[w->i] != '"')
        return;
    w->i++;
    while (w->t[w->i] != '\0' && w->t[w->i] != '"') {
        if (w->t[w->i] == '\\' && w->t[w->i + 1] != '\0')
            w->i++;
        w->i++;
    }
    if (w->t[w->i] == '"')
        w->i++;
}

static void
record(struct walk *w, const cJSON *item)
{
    struct kt__jdoc *d = w->doc;
    if (d->npos == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        d->pos = kt_xrealloc(d->pos, (size_t)w->cap * sizeof(*d->pos));
        w->offs = kt_xrealloc(w->offs, (size_t)w->cap * sizeof(*w->offs));
        w->koffs = kt_xrealloc(w->koffs, (size_t)w->cap * sizeof(*w->koffs));
    }
    d->pos[d->npos].item = item;
    w->offs[d->npos] = w->i;
    w->koffs[d->npos] = w->key != (size_t)-1 ? w->key : w->i;
    w->key = (size_t)-1;
    d->npos++;
}

/* Walks one value of the (already validated) text together with item.
 * Returns KT_ECONFIG for a duplicate key (message written). */
static int
walk_value(struct walk *w, const cJSON *item, const char *path)
{
    int rc;
    skip_ws(w);
    record(w, item);
    if (cJSON_IsObject(item) || cJSON_IsArray(item)) {
        int is_obj = cJSON_IsObject(item);
        const cJSON *c;
        int idx = 0;
        w->i++; /* '{' or '[' */
        for (c = item->child; c != NULL; c = c->next, idx++) {
            char sub[512];
            skip_ws(w);
            if (is_obj) {
                const cJSON *p;
                for (p = item->child; p != c; p = p->next) {
                    if (strcmp(p->string, c->string) == 0) {
                        w->key = w->i;
                        record(w, c); /* at the repeated key */
                        snprintf(w->dup, sizeof(w->dup),
                                 "%s%s\"%s\": "
                                 "duplicate key",
                                 path, path[0] ? ": " : "", c->string);
                        return KT_ECONFIG;
                    }
                }
                snprintf(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "",
                         c->string);
                w->key = w->i;
                skip_string(w);
                skip_ws(w);
                if (w->t[w->i] == ':')
                    w->i++;
            } else {
                snprintf(sub, sizeof(sub), "%s[%d]", path, idx);
            }
            rc = walk_value(w, c, sub);
            if (rc < 0)
                return rc;
            skip_ws(w);
            if (w->t[w->i] == ',')
                w->i++;
        }
        skip_ws(w);
        if (w->t[w->i] != '\0')
            w->i++; /* '}' or ']' */
    } else if (cJSON_IsString(item)) {
        skip_string(w);
    } else {
        while (w->t[w->i] != '\0' && strchr(",]} \t\r\n", w->t[w->i]) == NULL)
            w->i++;
    }
    return 0;
}

static int
cmp_pos(const void *a, const void *b)
{
    const struct kt__jpos *x = a, *y = b;
    if ((uintptr_t)x->item < (uintptr_t)y->item)
        return -1;
    return (uintptr_t)x->item > (uintptr_t)y->item;
}

static void
offset_linecol(const char *t, size_t off, int *line, int *col)
{
    size_t i;
    *line = 1;
    *col = 1;
    for (i = 0; i < off && t[i] != '\0'; i++) {
        if (t[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

/* Refuses nesting deeper than KT_CONFIG_MAX_DEPTH before anything is
 * parsed (the parser and the position walk recurse per level). */
static int
check_depth(const char *text, const char *file, char *err, size_t errlen)
{
    int depth = 0, in_string = 0, line, col;
    size_t i;

    for (i = 0; text[i] != '\0'; i++) {
        char ch = text[i];
        if (in_string) {
            if (ch == '\\' && text[i + 1] != '\0')
                i++;
            else if (ch == '"')
                in_string = 0;
        } else if (ch == '"') {
            in_string = 1;
        } else if (ch == '[' || ch == '{') {
            if (++depth > KT_CONFIG_MAX_DEPTH) {
                offset_linecol(text, i, &line, &col);
                return kt_seterr(err, errlen, KT_EPARSE,
                                 "%s:%d:%d: nesting deeper than %d levels",
                                 file, line, col, KT_CONFIG_MAX_DEPTH);
            }
        } else if (ch == ']' || ch == '}') {
            depth--;
        }
    }
    return 0;
}

int
kt__jdoc_parse(struct kt__jdoc *doc, const char *file, const char *text,
               char *err, size_t errlen)
{
    const char *end = NULL;
    struct walk w;
    size_t start = 0;
    int i, line = 1, col = 1, rc;
    size_t last = 0;

    memset(doc, 0, sizeof(*doc));
    doc->file = file;
    doc->err = err;
    doc->errlen = errlen;
    if (strlen(text) > KT_CONFIG_MAX_BYTES)
        return kt_seterr(err, errlen, KT_ETOOBIG,
                         "%s: file larger than %u "
                         "bytes",
                         file, KT_CONFIG_MAX_BYTES);
    if (check_depth(text, file, err, errlen) < 0)
        return KT_EPARSE;
    if ((unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB &&
        (unsigned char)text[2] == 0xBF)
        start = 3;
    doc->root = cJSON_ParseWithOpts(text, &end, 1);
    if (doc->root == NULL) {
        size_t off = end != NULL ? (size_t)(end - text) : 0;
        char near[24];
        size_t k;
        offset_linecol(text, off, &line, &col);
        for (k = 0; k + 1 < sizeof(near) && text[off + k] != '\0' &&
                    text[off + k] != '\n';
             k++)
            near[k] = text[off + k];
        near[k] = '\0';
        if (near[0] == '\0')
            return kt_seterr(err, errlen, KT_EPARSE,
                             "%s:%d:%d: JSON syntax "
                             "error: unexpected end of input",
                             file, line, col);
        return kt_seterr(err, errlen, KT_EPARSE,
                         "%s:%d:%d: JSON syntax "
                         "error near '%s'",
                         file, line, col, near);
    }
    memset(&w, 0, sizeof(w));
    w.t = text;
    w.i = start;
    w.key = (size_t)-1;
    w.doc = doc;
    rc = walk_value(&w, doc->root, "");
    if (rc < 0) {
        /* The duplicate key's position is the last one recorded. */
        offset_linecol(text, w.offs[doc->npos - 1], &line, &col);
        kt_seterr(err, errlen, KT_ECONFIG, "%s:%d:%d: %s", file, line, col,
                  w.dup);
        free(w.offs);
        free(w.koffs);
        kt__jdoc_free(doc);
        return KT_ECONFIG;
    }
    /* Offsets were recorded in increasing order (each key lies between
     * the previous value and its own value): one pass gives lines. */
    for (i = 0; i < doc->npos; i++) {
        int pass;
        for (pass = 0; pass < 2; pass++) {
            size_t to = pass == 0 ? w.koffs[i] : w.offs[i], k;
            for (k = last; k < to; k++) {
                if (text[k] == '\n') {
                    line++;
                    col = 1;
                } else {
                    col++;
                }
            }
            last = to;
            if (pass == 0) {
                doc->pos[i].kline = line;
                doc->pos[i].kcol = col;
            } else {
                doc->pos[i].line = line;
                doc->pos[i].col = col;
            }
        }
    }
    free(w.offs);
    free(w.koffs);
    qsort(doc->pos, (size_t)doc->npos, sizeof(*doc->pos), cmp_pos);
    return 0;
}

void
kt__jdoc_free(struct kt__jdoc *doc)
{
    if (doc == NULL)
        return;
    cJSON_Delete(doc->root);
    free(doc->pos);
    doc->root = NULL;
    doc->pos = NULL;
    doc->npos = 0;
}

static const struct kt__jpos *
find_pos(const struct kt__jdoc *doc, const cJSON *item)
{
    struct kt__jpos key;
    if (item == NULL || doc->pos == NULL)
        return NULL;
    key.item = item;
    return bsearch(&key, doc->pos, (size_t)doc->npos, sizeof(*doc->pos),
                   cmp_pos);
}

int
kt__jline(const struct kt__jdoc *doc, const cJSON *item)
{
    const struct kt__jpos *p = find_pos(doc, item);
    return p != NULL ? p->line : 0;
}

static int vjerr(struct kt__jdoc *doc, const cJSON *item, int at_key,
                 const char *path, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));

static int
vjerr(struct kt__jdoc *doc, const cJSON *item, int at_key, const char *path,
      const char *fmt, va_list ap)
{
    char msg[768];
    char where[600];
    const struct kt__jpos *p = find_pos(doc, item);

    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (p != NULL)
        snprintf(where, sizeof(where), "%s:%d:%d: ", doc->file,
                 at_key ? p->kline : p->line, at_key ? p->kcol : p->col);
    else
        snprintf(where, sizeof(where), "%s: ", doc->file);
    if (path != NULL && path[0] != '\0')
        kt_seterr(doc->err, doc->errlen, KT_ECONFIG, "%s%s: %s", where, path,
                  msg);
    else
        kt_seterr(doc->err, doc->errlen, KT_ECONFIG, "%s%s", where, msg);
    return KT_ECONFIG;
}

int
kt__jerr(struct kt__jdoc *doc, const cJSON *item, const char *path,
         const char *fmt, ...)
{
    va_list ap;
    int rc;
    va_start(ap, fmt);
    rc = vjerr(doc, item, 0, path, fmt, ap);
    va_end(ap);
    return rc;
}

int
kt__jerr_key(struct kt__jdoc *doc, const cJSON *item, const char *path,
             const char *fmt, ...)
{
    va_list ap;
    int rc;
    va_start(ap, fmt);
    rc = vjerr(doc, item, 1, path, fmt, ap);
    va_end(ap);
    return rc;
}

static int
edit_distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b);
    int prev[64], cur[64];
    int i, j;
    if (la >= 63 || lb >= 63)
        return 99;
    for (j = 0; j <= lb; j++)
        prev[j] = j;
    for (i = 1; i <= la; i++) {
        cur[0] = i;
        for (j = 1; j <= lb; j++) {
            int d = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < d)
                d = prev[j] + 1;
            if (cur[j - 1] + 1 < d)
                d = cur[j - 1] + 1;
            cur[j] = d;
        }
        memcpy(prev, cur, sizeof(int) * (size_t)(lb + 1));
    }
    return prev[lb];
}

const char *
kt__suggest(const char *word, const char *const *cands, int n)
{
    const char *best = NULL;
    int bestd = 3, i;
    for (i = 0; i < n; i++) {
        int d;
        if (strcasecmp(word, cands[i]) == 0)
            return cands[i];
        d = edit_distance(word, cands[i]);
        /* Short words need a closer match to be a plausible typo. */
        if (d < bestd && d <= ((int)strlen(cands[i]) > 3 ? 2 : 1)) {
            bestd = d;
            best = cands[i];
        }
    }
    return best;
}

int
kt__read_file(const char *path, char **out, char *err, size_t errlen)
{
    struct stat st;
    char *buf;
    size_t got = 0;
    int fd, rc;

    *out = NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        return kt_seterr(err, errlen, rc, "%s: cannot open: %s", path,
                         strerror(-rc));
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return kt_seterr(err, errlen, KT_EINVAL, "%s: not a regular file",
                         path);
    }
    if ((uintmax_t)st.st_size > KT_CONFIG_MAX_BYTES) {
        close(fd);
        return kt_seterr(err, errlen, KT_ETOOBIG,
                         "%s: file larger than %u "
                         "bytes",
                         path, KT_CONFIG_MAX_BYTES);
    }
    buf = kt_xmalloc((size_t)st.st_size + 1);
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -errno : KT_EIO;
            free(buf);
            close(fd);
            return kt_seterr(err, errlen, rc, "%s: read failed: %s", path,
                             kt_strerror(rc));
        }
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    if (strlen(buf) != got) {
        free(buf);
        return kt_seterr(err, errlen, KT_EPARSE, "%s: contains a NUL byte",
                         path);
    }
    *out = buf;
    return 0;
}
