/* model.c - the per-model config loader: reads the JSON through the key
 * tables (config/keys.c), then checks what one key alone cannot (conv
 * output sizes, groups dividing channels, task shapes, name syntax). */
#include "config/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *
kt_layer_op_name(int op)
{
    if (op < 0 || op >= KT_LAYER_NOPS)
        return "?";
    return kt__layer_ops[op];
}

const char *
kt_strategy_name(int strategy)
{
    return strategy == KT_STRATEGY_ROUND_ROBIN ? "round-robin" : "gradient";
}

const char *
kt_policy_name(int policy)
{
    return policy >= KT_POLICY_SKETCH_XGB && policy <= KT_POLICY_RANDOM
               ? kt__policy_names[policy]
               : "?";
}

static int
valid_name(const char *s)
{
    size_t i;
    if (s[0] == '\0' || s[0] == '.' || strlen(s) > 128)
        return 0;
    for (i = 0; s[i] != '\0'; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

static char *
name_from_path(const char *path)
{
    const char *b = strrchr(path, '/');
    char *s = kt_xstrdup(b != NULL ? b + 1 : path);
    size_t n = strlen(s);
    if (n > 5 && strcmp(s + n - 5, ".json") == 0)
        s[n - 5] = '\0';
    else if (n > 5 && strcmp(s + n - 5, ".onnx") == 0)
        s[n - 5] = '\0';
    return s;
}

static const cJSON *
item(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* Output extent of a sliding window; < 1 means the window does not fit. */
static int64_t
out_extent(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil)
{
    int64_t span = in + 2 * pad - dil * (k - 1) - 1;
    if (span < 0)
        return 0;
    return span / stride + 1;
}

static int
check_layer(struct kt__jdoc *doc, const cJSON *obj, const char *path,
            struct kt_layer *l)
{
    const cJSON *at;
    switch (l->op) {
    case KT_LAYER_CONV2D:
        at = item(obj, "groups");
        if (l->C % l->groups != 0 || l->K % l->groups != 0)
            return kt__jerr(doc, at, path,
                            "groups (%lld) must divide C "
                            "(%lld) and K (%lld)",
                            (long long)l->groups, (long long)l->C,
                            (long long)l->K);
        if (out_extent(l->H, l->R, l->stride[0], l->pad[0], l->dilation[0]) <
                1 ||
            out_extent(l->W, l->S, l->stride[1], l->pad[1], l->dilation[1]) < 1)
            return kt__jerr(doc, obj, path,
                            "the %lldx%lld kernel (dilation "
                            "%lldx%lld) does not fit the padded %lldx%lld "
                            "input",
                            (long long)l->R, (long long)l->S,
                            (long long)l->dilation[0],
                            (long long)l->dilation[1], (long long)l->H,
                            (long long)l->W);
        if (l->pad[0] >= l->R * l->dilation[0] ||
            l->pad[1] >= l->S * l->dilation[1])
            return kt__jerr(doc, item(obj, "pad"), path,
                            "pad must be "
                            "smaller than the kernel extent");
        break;
    case KT_LAYER_MAXPOOL:
    case KT_LAYER_AVGPOOL:
        if (item(obj, "stride") == NULL)
            l->stride[0] = l->stride[1] = l->kernel;
        if (l->stride[0] != l->stride[1] || l->pad[0] != l->pad[1])
            return kt__jerr(doc,
                            item(obj, l->stride[0] != l->stride[1] ? "stride"
                                                                   : "pad"),
                            path,
                            "pools take one stride and one pad for both "
                            "dimensions");
        if (l->pad[0] >= l->kernel)
            return kt__jerr(doc, item(obj, "pad"), path,
                            "pad (%lld) must "
                            "be smaller than kernel (%lld)",
                            (long long)l->pad[0], (long long)l->kernel);
        if (out_extent(l->H, l->kernel, l->stride[0], l->pad[0], 1) < 1 ||
            out_extent(l->W, l->kernel, l->stride[0], l->pad[0], 1) < 1)
            return kt__jerr(doc, obj, path,
                            "the %lld window does not fit "
                            "the %lldx%lld input",
                            (long long)l->kernel, (long long)l->H,
                            (long long)l->W);
        break;
    default: break;
    }
    return 0;
}

static int
read_layers(struct kt__jdoc *doc, const cJSON *arr, struct kt_model_conf *m)
{
    const cJSON *obj;
    int i = 0, rc, n = cJSON_GetArraySize(arr);

    if (n > KT_CONFIG_MAX_LAYERS)
        return kt__jerr(doc, arr, "layers", "too many layers (%d > %d)", n,
                        KT_CONFIG_MAX_LAYERS);
    m->layers = kt_xcalloc((size_t)n + 1, sizeof(*m->layers));
    cJSON_ArrayForEach (obj, arr) {
        struct kt_layer *l = &m->layers[i];
        const struct kt__keytab *tabs[2];
        const cJSON *op;
        char path[64];
        int k;

        snprintf(path, sizeof(path), "layers[%d]", i);
        l->index = i;
        l->line = kt__jline(doc, obj);
        m->nlayers = ++i;
        if (!cJSON_IsObject(obj))
            return kt__jerr(doc, obj, path, "must be an object");
        op = item(obj, "op");
        if (op == NULL)
            return kt__jerr(doc, obj, path, "missing required key \"op\"");
        snprintf(path + strlen(path), sizeof(path) - strlen(path), ".op");
        l->op = -1;
        for (k = 0; k < KT_LAYER_NOPS && cJSON_IsString(op); k++)
            if (strcmp(op->valuestring, kt__layer_ops[k]) == 0)
                l->op = k;
        if (l->op < 0) {
            const char *s = cJSON_IsString(op)
                                ? kt__suggest(op->valuestring, kt__layer_ops,
                                              KT_LAYER_NOPS)
                                : NULL;
            if (!cJSON_IsString(op))
                return kt__jerr(doc, op, path, "must be a string");
            if (s != NULL)
                return kt__jerr(doc, op, path,
                                "unknown op \"%s\" (did you "
                                "mean \"%s\"?)",
                                op->valuestring, s);
            return kt__jerr(doc, op, path,
                            "unknown op \"%s\" (supported: "
                            "conv2d, dense, matmul, batch_matmul, maxpool, "
                            "avgpool, global_avg_pool, add, mul, relu, "
                            "hardswish, sigmoid, softmax)",
                            op->valuestring);
        }
        path[strlen(path) - 3] = '\0';
        tabs[0] = &kt__tab_layer_common;
        tabs[1] = &kt__tab_layer[l->op];
        kt__keys_defaults(tabs[0], l);
        kt__keys_defaults(tabs[1], l);
        rc = kt__keys_read(doc, obj, path, tabs, 2, l);
        if (rc < 0)
            return rc;
        rc = check_layer(doc, obj, path, l);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int
read_shapes(struct kt__jdoc *doc, const cJSON *obj, const char *path,
            struct kt_task_conf *t)
{
    const cJSON *c, *d;
    int i = 0;

    t->shapes = kt_xcalloc((size_t)cJSON_GetArraySize(obj) + 1,
                           sizeof(*t->shapes));
    cJSON_ArrayForEach (c, obj) {
        struct kt_task_shape *s = &t->shapes[i];
        char sub[600];
        int j = 0;
        snprintf(sub, sizeof(sub), "%s.%s", path, c->string);
        s->name = kt_xstrdup(c->string);
        t->nshapes = ++i;
        if (strlen(c->string) >= 32)
            return kt__jerr(doc, c, sub,
                            "tensor name longer than 31 "
                            "characters");
        if (!cJSON_IsArray(c) || cJSON_GetArraySize(c) < 1 ||
            cJSON_GetArraySize(c) > 8)
            return kt__jerr(doc, c, sub,
                            "must be an array of 1 to 8 "
                            "dimensions");
        cJSON_ArrayForEach (d, c) {
            char dim[640];
            snprintf(dim, sizeof(dim), "%s[%d]", sub, j);
            /* floor, not a cast: casting 1e30 to int64_t is undefined. */
            if (!cJSON_IsNumber(d) || d->valuedouble != floor(d->valuedouble))
                return kt__jerr(doc, d, dim, "must be an integer");
            if (d->valuedouble < 1 || d->valuedouble > 16777216.0)
                return kt__jerr(doc, d, dim,
                                "must be >= 1 and <= 16777216 "
                                "(got %.0f)",
                                d->valuedouble);
            s->dims[j++] = (int64_t)d->valuedouble;
        }
        s->ndim = j;
    }
    return 0;
}

static int
read_tasks(struct kt__jdoc *doc, const cJSON *arr, struct kt_model_conf *m)
{
    const struct kt__keytab *tabs[1] = {&kt__tab_task};
    const cJSON *obj;
    int i = 0, j, rc, n = cJSON_GetArraySize(arr);

    if (n > KT_CONFIG_MAX_TASKS)
        return kt__jerr(doc, arr, "tasks", "too many tasks (%d > %d)", n,
                        KT_CONFIG_MAX_TASKS);
    m->tasks = kt_xcalloc((size_t)n + 1, sizeof(*m->tasks));
    cJSON_ArrayForEach (obj, arr) {
        struct kt_task_conf *t = &m->tasks[i];
        char path[64];
        snprintf(path, sizeof(path), "tasks[%d]", i);
        t->index = i;
        m->ntasks = ++i;
        kt__keys_defaults(&kt__tab_task, t);
        rc = kt__keys_read(doc, obj, path, tabs, 1, t);
        if (rc < 0)
            return rc;
        if (!valid_name(t->name))
            return kt__jerr(doc, item(obj, "name"), path,
                            "name \"%s\" may "
                            "only use letters, digits, '_', '-' and '.'",
                            t->name);
        for (j = 0; j < t->index; j++)
            if (strcmp(m->tasks[j].name, t->name) == 0)
                return kt__jerr(doc, item(obj, "name"), path,
                                "name \"%s\" "
                                "is already used by tasks[%d]",
                                t->name, j);
        if (t->compute.n == 0)
            return kt__jerr(doc, item(obj, "compute"), path,
                            "compute has "
                            "no statements");
        snprintf(path + strlen(path), sizeof(path) - strlen(path), ".shapes");
        rc = read_shapes(doc, item(obj, "shapes"), path, t);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* "onnx" is resolved against the config's directory; "inputs" are read
 * like task shapes. */
static int
read_onnx(struct kt__jdoc *doc, struct kt_model_conf *m)
{
    const cJSON *c = item(doc->root, "inputs");
    struct kt_task_conf t;
    const char *slash;
    int rc;

    if (m->onnx != NULL && m->onnx[0] != '/' &&
        (slash = strrchr(m->path, '/')) != NULL) {
        size_t n = (size_t)(slash - m->path) + 1;
        char *p = kt_xmalloc(n + strlen(m->onnx) + 1);
        memcpy(p, m->path, n);
        strcpy(p + n, m->onnx);
        free(m->onnx);
        m->onnx = p;
    }
    if (c == NULL)
        return 0;
    if (m->onnx == NULL)
        return kt__jerr(doc, c, "inputs",
                        "input shapes need an \"onnx\" "
                        "model");
    memset(&t, 0, sizeof(t));
    rc = read_shapes(doc, c, "inputs", &t);
    m->inputs = t.shapes;
    m->ninputs = t.nshapes;
    return rc;
}

static const struct {
    const char *key;
    const struct kt__keytab *tab;
    size_t off;
} sections[] = {
    {"target", &kt__tab_target, offsetof(struct kt_model_conf, target)},
    {"tuning", &kt__tab_tuning, offsetof(struct kt_model_conf, tuning)},
    {"measure", &kt__tab_measure, offsetof(struct kt_model_conf, measure)},
};

/* The worker splits the compiler line on blanks, so a flag with a blank
 * would silently become two arguments. */
static int
check_cflags(struct kt__jdoc *doc, const struct kt_model_conf *m)
{
    const cJSON *c = item(item(doc->root, "target"), "cflags");
    char key[48];
    int i;

    for (i = 0; i < m->target.cflags.n; i++) {
        const char *f = m->target.cflags.v[i];
        if (f[0] != '\0' && strpbrk(f, " \t\n") == NULL)
            continue;
        if (cJSON_IsArray(c))
            snprintf(key, sizeof(key), "target.cflags[%d]", i);
        else /* one string stands for the whole list */
            snprintf(key, sizeof(key), "target.cflags");
        return kt__jerr(doc, cJSON_IsArray(c) ? cJSON_GetArrayItem(c, i) : c,
                        key,
                        "\"%s\": one argument per string, without blanks "
                        "(the worker splits the compiler line on blanks)",
                        f);
    }
    return 0;
}

int
kt_model_conf_parse(const char *path, const char *text,
                    struct kt_model_conf **out, char *err, size_t errlen)
{
    const struct kt__keytab *top[1] = {&kt__tab_model};
    struct kt_model_conf *m;
    struct kt__jdoc doc;
    const cJSON *c;
    size_t i;
    int rc;

    *out = NULL;
    rc = kt__jdoc_parse(&doc, path, text, err, errlen);
    if (rc < 0)
        return rc;
    m = kt_xcalloc(1, sizeof(*m));
    m->path = kt_xstrdup(path);
    kt__keys_defaults(&kt__tab_model, m);
    for (i = 0; i < KT_ARRAY_LEN(sections); i++)
        kt__keys_defaults(sections[i].tab, (char *)m + sections[i].off);
    rc = kt__keys_read(&doc, doc.root, "", top, 1, m);
    if (rc < 0)
        goto fail;
    for (i = 0; i < KT_ARRAY_LEN(sections); i++) {
        const struct kt__keytab *tabs[1] = {sections[i].tab};
        c = item(doc.root, sections[i].key);
        if (c == NULL)
            continue;
        rc = kt__keys_read(&doc, c, sections[i].key, tabs, 1,
                           (char *)m + sections[i].off);
        if (rc < 0)
            goto fail;
    }
    if (m->name == NULL)
        m->name = name_from_path(path);
    if (!valid_name(m->name)) {
        rc = kt__jerr(&doc, item(doc.root, "name"), "name",
                      "\"%s\" may only "
                      "use letters, digits, '_', '-' and '.' (and not start "
                      "with '.')",
                      m->name);
        goto fail;
    }
    if (m->target.vector_bytes != 0 && m->target.vector_bytes != 16 &&
        m->target.vector_bytes != 32 && m->target.vector_bytes != 64) {
        c = item(item(doc.root, "target"), "vector_bytes");
        rc = kt__jerr(&doc, c, "target.vector_bytes",
                      "must be 0 (detect), "
                      "16, 32 or 64 (got %lld)",
                      (long long)m->target.vector_bytes);
        goto fail;
    }
    if ((rc = check_cflags(&doc, m)) < 0)
        goto fail;
    c = item(doc.root, "layers");
    if (c != NULL && (rc = read_layers(&doc, c, m)) < 0)
        goto fail;
    c = item(doc.root, "tasks");
    if (c != NULL && (rc = read_tasks(&doc, c, m)) < 0)
        goto fail;
    if ((rc = read_onnx(&doc, m)) < 0)
        goto fail;
    if (m->nlayers + m->ntasks == 0 && m->onnx == NULL) {
        rc = kt__jerr(&doc, doc.root, "(top level)",
                      "the model has no "
                      "layers and no tasks (give \"layers\", \"tasks\" or "
                      "\"onnx\")");
        goto fail;
    }
    kt__jdoc_free(&doc);
    *out = m;
    return 0;
fail:
    kt__jdoc_free(&doc);
    kt_model_conf_free(m);
    return rc;
}

int
kt_model_conf_load(const char *path, struct kt_model_conf **out, char *err,
                   size_t errlen)
{
    char *text;
    int rc;
    *out = NULL;
    rc = kt__read_file(path, &text, err, errlen);
    if (rc < 0)
        return rc;
    rc = kt_model_conf_parse(path, text, out, err, errlen);
    free(text);
    return rc;
}

void
kt_model_conf_free(struct kt_model_conf *m)
{
    size_t s;
    int i, j;
    if (m == NULL)
        return;
    kt__keys_free(&kt__tab_model, m);
    for (s = 0; s < KT_ARRAY_LEN(sections); s++)
        kt__keys_free(sections[s].tab, (char *)m + sections[s].off);
    for (i = 0; i < m->nlayers; i++) {
        kt__keys_free(&kt__tab_layer_common, &m->layers[i]);
        kt__keys_free(&kt__tab_layer[m->layers[i].op >= 0 ? m->layers[i].op : 0],
                      &m->layers[i]);
    }
    free(m->layers);
    for (i = 0; i < m->ntasks; i++) {
        struct kt_task_conf *t = &m->tasks[i];
        kt__keys_free(&kt__tab_task, t);
        for (j = 0; j < t->nshapes; j++)
            free(t->shapes[j].name);
        free(t->shapes);
    }
    free(m->tasks);
    for (i = 0; i < m->ninputs; i++)
        free(m->inputs[i].name);
    free(m->inputs);
    free(m->path);
    free(m);
}

/* Sets or replaces one input shape from "NAME=D1,D2,...". */
static int
apply_input(struct kt_model_conf *m, const char *spec, char *err, size_t errlen)
{
    const char *eq = strchr(spec, '=');
    struct kt_task_shape sh;
    const char *p;
    char *end;
    int i;

    memset(&sh, 0, sizeof(sh));
    if (eq == NULL || eq == spec || eq - spec > 200)
        goto bad;
    for (p = eq + 1; sh.ndim < 8; p = end + 1) {
        long long d = strtoll(p, &end, 10);
        if (end == p || d < 1 || d > 16777216)
            goto bad;
        sh.dims[sh.ndim++] = d;
        if (*end != ',')
            break;
    }
    if (*end != '\0')
        goto bad;
    sh.name = kt_xstrdup(spec);
    sh.name[eq - spec] = '\0';
    for (i = 0; i < m->ninputs; i++)
        if (strcmp(m->inputs[i].name, sh.name) == 0)
            break;
    if (i == m->ninputs) {
        m->inputs = kt_xrealloc(m->inputs,
                                (size_t)(m->ninputs + 1) * sizeof(*m->inputs));
        m->ninputs++;
    } else {
        free(m->inputs[i].name);
    }
    m->inputs[i] = sh;
    return 0;
bad:
    return kt_seterr(err, errlen, KT_ECONFIG,
                     "--input '%.200s': expected "
                     "NAME=D1,D2,... (1 to 8 dims, each 1..16777216)",
                     spec);
}

int
kt_model_conf_load_cli(const char *path, const char *const *input_specs,
                       int ninputs, int partial, struct kt_model_conf **out,
                       char *err, size_t errlen)
{
    size_t n = strlen(path);
    int rc, i;

    *out = NULL;
    if (n > 5 && strcmp(path + n - 5, ".onnx") == 0) {
        /* The file itself, with every setting at its default. */
        const char *base = strrchr(path, '/');
        cJSON *o = cJSON_CreateObject();
        char *text;
        cJSON_AddStringToObject(o, "onnx", base != NULL ? base + 1 : path);
        text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        rc = kt_model_conf_parse(path, text, out, err, errlen);
        cJSON_free(text);
    } else {
        rc = kt_model_conf_load(path, out, err, errlen);
    }
    if (rc < 0)
        return rc;
    if (ninputs > 0 || partial) {
        if ((*out)->onnx == NULL) {
            kt_model_conf_free(*out);
            *out = NULL;
            return kt_seterr(err, errlen, KT_ECONFIG,
                             "%s: --input and "
                             "--partial apply to ONNX models only",
                             path);
        }
    }
    for (i = 0; i < ninputs; i++) {
        if ((rc = apply_input(*out, input_specs[i], err, errlen)) < 0) {
            kt_model_conf_free(*out);
            *out = NULL;
            return rc;
        }
    }
    if (partial)
        (*out)->onnx_partial = 1;
    return 0;
}
