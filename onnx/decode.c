/* decode.c - from ONNX bytes to the graph: protobuf-c decodes the
 * ModelProto (code generated from Debian's onnx.proto at build time); this
 * file turns it into values and nodes, reads constant data and checks that
 * every node reads tensors produced before it. */
#include "onnx/int.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* protobuf-c leaves absent strings NULL. */
static const char *
str(const char *s)
{
    return s != NULL ? s : "";
}

static uint64_t
name_hash(const char *s)
{
    return kt_hash64(s, strlen(s));
}

int
kt__ox_find(struct kt__ox *x, const char *name)
{
    size_t i;

    if (x->hashcap == 0)
        return -1;
    for (i = name_hash(name) & (size_t)(x->hashcap - 1);;
         i = (i + 1) & (size_t)(x->hashcap - 1)) {
        int v = x->hash[i];
        if (v < 0)
            return -1;
        if (strcmp(x->g->values[v].name, name) == 0)
            return v;
    }
}

static void
rehash(struct kt__ox *x)
{
    int i;

    free(x->hash);
    x->hashcap = x->hashcap ? 2 * x->hashcap : 256;
    x->hash = kt_xmalloc((size_t)x->hashcap * sizeof(*x->hash));
    memset(x->hash, 0xff, (size_t)x->hashcap * sizeof(*x->hash));
    for (i = 0; i < x->g->nvalues; i++) {
        size_t h = name_hash(x->g->values[i].name) & (size_t)(x->hashcap - 1);
        while (x->hash[h] >= 0)
            h = (h + 1) & (size_t)(x->hashcap - 1);
        x->hash[h] = i;
    }
}

int
kt__ox_add_value(struct kt__ox *x, const char *name)
{
    struct kt_onnx_graph *g = x->g;
    struct kt_onnx_value *v;

    if (kt__ox_find(x, name) >= 0)
        return kt_seterr(x->err, x->errlen, KT_EPARSE,
                         "%s: tensor '%.200s' "
                         "is defined twice",
                         g->path, name),
               -1;
    if (g->nvalues == x->capvalues) {
        x->capvalues = x->capvalues ? 2 * x->capvalues : 256;
        g->values = kt_xrealloc(g->values,
                                (size_t)x->capvalues * sizeof(*g->values));
    }
    v = &g->values[g->nvalues++];
    memset(v, 0, sizeof(*v));
    v->name = kt_xstrdup(name);
    v->ndim = -1;
    v->producer = -1;
    if (2 * g->nvalues > x->hashcap)
        rehash(x);
    else {
        size_t h = name_hash(name) & (size_t)(x->hashcap - 1);
        while (x->hash[h] >= 0)
            h = (h + 1) & (size_t)(x->hashcap - 1);
        x->hash[h] = g->nvalues - 1;
    }
    return g->nvalues - 1;
}

size_t
kt__ox_dtype_size(int dtype)
{
    switch (dtype) {
    case KT_ONNX_FLOAT:
    case KT_ONNX_INT32: return 4;
    case KT_ONNX_INT64:
    case KT_ONNX_DOUBLE: return 8;
    case KT_ONNX_UINT8:
    case KT_ONNX_INT8:
    case KT_ONNX_BOOL: return 1;
    default: return 0;
    }
}

void
kt__ox_set_owned(struct kt_onnx_value *v, int dtype, void *data, size_t nbytes)
{
    if (v->owned)
        free((void *)v->data);
    v->dtype = dtype;
    v->data = data;
    v->nbytes = nbytes;
    v->owned = 1;
}

int64_t
kt_onnx_value_elems(const struct kt_onnx_value *v)
{
    int64_t n = 1;
    int i;

    if (v->ndim < 0)
        return -1;
    for (i = 0; i < v->ndim; i++)
        n *= v->dims[i];
    return n;
}

double
kt_onnx_value_get(const struct kt_onnx_value *v, int64_t i)
{
    const unsigned char *p = v->data;
    size_t es = kt__ox_dtype_size(v->dtype);

    if (p == NULL || es == 0 || i < 0 || (size_t)(i + 1) * es > v->nbytes)
        return 0;
    p += (size_t)i * es;
    switch (v->dtype) {
    case KT_ONNX_FLOAT: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    case KT_ONNX_DOUBLE: {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    case KT_ONNX_INT32: {
        int32_t k;
        memcpy(&k, p, 4);
        return k;
    }
    case KT_ONNX_INT64: {
        int64_t k;
        memcpy(&k, p, 8);
        return (double)k;
    }
    case KT_ONNX_INT8: return (int8_t)*p;
    default: return *p;
    }
}

/* Copies a typed repeated field into an owned buffer of dtype. */
static void *
typed_copy(const Onnx__TensorProto *t, int dtype, size_t n, size_t *nbytes)
{
    size_t es = kt__ox_dtype_size(dtype), i;
    unsigned char *b = kt_xcalloc(n + 1, es);

    *nbytes = n * es;
    for (i = 0; i < n; i++) {
        switch (dtype) {
        case KT_ONNX_FLOAT: memcpy(b + 4 * i, &t->float_data[i], 4); break;
        case KT_ONNX_DOUBLE: memcpy(b + 8 * i, &t->double_data[i], 8); break;
        case KT_ONNX_INT64: memcpy(b + 8 * i, &t->int64_data[i], 8); break;
        case KT_ONNX_INT32: memcpy(b + 4 * i, &t->int32_data[i], 4); break;
        default: b[i] = (unsigned char)t->int32_data[i]; break;
        }
    }
    return b;
}

static size_t
typed_count(const Onnx__TensorProto *t, int dtype)
{
    switch (dtype) {
    case KT_ONNX_FLOAT: return t->n_float_data;
    case KT_ONNX_DOUBLE: return t->n_double_data;
    case KT_ONNX_INT64: return t->n_int64_data;
    default: return t->n_int32_data;
    }
}

int
kt__ox_tensor(struct kt__ox *x, struct kt_onnx_value *v,
              const Onnx__TensorProto *t, const char *what)
{
    const char *path = x->g->path;
    int64_t n = 1;
    size_t es, i;

    if (t->n_dims > KT_ONNX_MAX_DIMS)
        return kt_seterr(x->err, x->errlen, KT_EPARSE,
                         "%s: %s '%.200s' has "
                         "%zu dims (at most %d)",
                         path, what, v->name, t->n_dims, KT_ONNX_MAX_DIMS);
    for (i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || t->dims[i] > ((int64_t)1 << 40) ||
            (t->dims[i] > 0 && n > ((int64_t)1 << 40) / t->dims[i]))
            return kt_seterr(x->err, x->errlen, KT_EPARSE,
                             "%s: %s '%.200s' "
                             "has a bad dim %lld",
                             path, what, v->name, (long long)t->dims[i]);
        v->dims[i] = t->dims[i];
        n *= t->dims[i];
    }
    v->ndim = (int)t->n_dims;
    if (t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return kt_seterr(x->err, x->errlen, KT_EPARSE,
                         "%s: %s '%.200s' keeps "
                         "its data in an external file, which the importer "
                         "does not read",
                         path, what, v->name);
    es = kt__ox_dtype_size(t->data_type);
    if (es == 0)
        return kt_seterr(x->err, x->errlen, KT_EPARSE,
                         "%s: %s '%.200s' has "
                         "data type %d (the importer reads float, double, "
                         "int8/32/64, uint8, bool)",
                         path, what, v->name, (int)t->data_type);
    v->dtype = t->data_type;
    if (t->has_raw_data) {
        if (t->raw_data.len != (size_t)n * es)
            return kt_seterr(x->err, x->errlen, KT_EPARSE,
                             "%s: %s '%.200s': "
                             "%zu bytes of data for %lld elements of %zu "
                             "bytes",
                             path, what, v->name, t->raw_data.len, (long long)n,
                             es);
        v->data = t->raw_data.data;
        v->nbytes = t->raw_data.len;
        return KT_OK;
    }
    if (typed_count(t, t->data_type) != (size_t)n)
        return kt_seterr(x->err, x->errlen, KT_EPARSE,
                         "%s: %s '%.200s': %zu "
                         "values for %lld elements",
                         path, what, v->name, typed_count(t, t->data_type),
                         (long long)n);
    v->data = typed_copy(t, t->data_type, (size_t)n, &v->nbytes);
    v->owned = 1;
    return KT_OK;
}

const char *
kt__ox_node_label(const struct kt_onnx_node *n, char *buf, size_t len)
{
    snprintf(buf, len, "node '%.120s' (%.40s)", n->name, n->op);
    return buf;
}

const char *
kt__ox_shape_str(const struct kt_onnx_value *v, char *buf, size_t len)
{
    size_t o = 0;
    int i;

    if (v->ndim < 0) {
        snprintf(buf, len, "?");
        return buf;
    }
    buf[0] = '\0';
    if (v->ndim == 0)
        snprintf(buf, len, "scalar");
    for (i = 0; i < v->ndim && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? "x" : "",
                              (long long)v->dims[i]);
    return buf;
}

/* ---- Attributes ---------------------------------------------------------- */

static const Onnx__AttributeProto *
attr(const struct kt_onnx_node *n, const char *name)
{
    const Onnx__NodeProto *p = n->proto;
    size_t i;

    for (i = 0; p != NULL && i < p->n_attribute; i++)
        if (p->attribute[i]->name != NULL &&
            strcmp(p->attribute[i]->name, name) == 0)
            return p->attribute[i];
    return NULL;
}

int64_t
kt_onnx_attr_int(const struct kt_onnx_node *n, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = attr(n, name);
    return a != NULL && a->has_i ? a->i : def;
}

double
kt_onnx_attr_float(const struct kt_onnx_node *n, const char *name, double def)
{
    const Onnx__AttributeProto *a = attr(n, name);
    return a != NULL && a->has_f ? a->f : def;
}

int
kt_onnx_attr_ints(const struct kt_onnx_node *n, const char *name, int64_t *v,
                  int max)
{
    const Onnx__AttributeProto *a = attr(n, name);
    size_t i;

    if (a == NULL)
        return 0;
    if (a->n_ints > (size_t)max)
        return -1;
    for (i = 0; i < a->n_ints; i++)
        v[i] = a->ints[i];
    return (int)a->n_ints;
}

const char *
kt_onnx_attr_str(const struct kt_onnx_node *n, const char *name,
                 const char *def, char *buf, size_t len)
{
    const Onnx__AttributeProto *a = attr(n, name);

    if (a == NULL || !a->has_s || len == 0)
        return def;
    /* Attribute strings are bytes, not NUL terminated. */
    snprintf(buf, len, "%.*s", (int)(a->s.len < len ? a->s.len : len - 1),
             (const char *)a->s.data);
    return buf;
}

/* ---- Graph ---------------------------------------------------------------- */

/* A graph input's declared shape; dynamic dims are -1. */
static void
declared_shape(struct kt_onnx_value *v, const Onnx__ValueInfoProto *vi)
{
    const Onnx__TypeProto__Tensor *tt;
    size_t i;

    if (vi->type == NULL ||
        vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return;
    tt = vi->type->tensor_type;
    v->dtype = tt->has_elem_type ? tt->elem_type : 0;
    if (tt->shape == NULL || tt->shape->n_dim > KT_ONNX_MAX_DIMS)
        return;
    v->ndim = (int)tt->shape->n_dim;
    for (i = 0; i < tt->shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        v->dims[i] =
            d->value_case ==
                        ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                    d->dim_value > 0 && d->dim_value <= 16777216
                ? d->dim_value
                : -1;
    }
}

/* The name of dim j of a graph input's declared shape ("" when it has
 * none).  The type and the dim are protobuf oneofs: a member is read only
 * under its case (a dim_value read as dim_param is a wild pointer). */
static const char *
dim_param(const Onnx__ValueInfoProto *vi, int j)
{
    const Onnx__TypeProto__Tensor *tt;
    const Onnx__TensorShapeProto__Dimension *d;

    if (vi->type == NULL ||
        vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
        return "";
    tt = vi->type->tensor_type;
    if (tt->shape == NULL || j < 0 || (size_t)j >= tt->shape->n_dim)
        return "";
    d = tt->shape->dim[j];
    if (d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
        return "";
    return str(d->dim_param);
}

/* Applies the user's --input shapes and checks every input dim is known. */
static int
input_shapes(struct kt__ox *x, const Onnx__GraphProto *gp,
             const struct kt_onnx_input *in, int nin)
{
    struct kt_onnx_graph *g = x->g;
    int i, j, k;

    for (k = 0; k < nin; k++) {
        int v = kt__ox_find(x, in[k].name);
        if (v < 0 || !g->values[v].is_input)
            return kt_seterr(x->err, x->errlen, KT_ESHAPE,
                             "%s: --input "
                             "'%s': the model has no input of that name",
                             g->path, in[k].name);
        if (in[k].ndim < 1 || in[k].ndim > KT_ONNX_MAX_DIMS)
            return kt_seterr(x->err, x->errlen, KT_ESHAPE,
                             "%s: --input "
                             "'%s': 1 to %d dims",
                             g->path, in[k].name, KT_ONNX_MAX_DIMS);
        if (g->values[v].ndim >= 0 && g->values[v].ndim != in[k].ndim)
            return kt_seterr(x->err, x->errlen, KT_ESHAPE,
                             "%s: --input "
                             "'%s' has %d dims but the model declares %d",
                             g->path, in[k].name, in[k].ndim,
                             g->values[v].ndim);
        for (j = 0; j < in[k].ndim; j++) {
            int64_t d = g->values[v].ndim >= 0 ? g->values[v].dims[j] : -1;
            if (in[k].dims[j] < 1 || (d > 0 && d != in[k].dims[j]))
                return kt_seterr(x->err, x->errlen, KT_ESHAPE,
                                 "%s: --input "
                                 "'%s' dim %d is %lld but the model fixes it "
                                 "to %lld",
                                 g->path, in[k].name, j,
                                 (long long)in[k].dims[j], (long long)d);
            g->values[v].dims[j] = in[k].dims[j];
        }
        g->values[v].ndim = in[k].ndim;
    }
    for (i = 0; i < g->ninputs; i++) {
        struct kt_onnx_value *v = &g->values[g->inputs[i]];
        const char *param = "";
        for (j = 0; j < v->ndim && v->dims[j] > 0; j++)
            ;
        if (v->ndim >= 0 && j == v->ndim)
            continue;
        for (k = 0; k < (int)gp->n_input && v->ndim >= 0; k++)
            if (strcmp(str(gp->input[k]->name), v->name) == 0)
                param = dim_param(gp->input[k], j);
        if (v->ndim < 0)
            return kt_seterr(x->err, x->errlen, KT_ESHAPE,
                             "%s: input '%s' "
                             "has no declared shape: give it with --input "
                             "%s=D1,D2,... (or \"inputs\" in the config)",
                             g->path, v->name, v->name);
        return kt_seterr(x->err, x->errlen, KT_ESHAPE,
                         "%s: input '%s' dim %d "
                         "is dynamic (%.60s): give the shape with --input "
                         "%s=D1,D2,... (or \"inputs\" in the config)",
                         g->path, v->name, j, param[0] ? param : "unnamed",
                         v->name);
    }
    return KT_OK;
}

static int
read_node(struct kt__ox *x, const Onnx__NodeProto *p, int index)
{
    struct kt_onnx_graph *g = x->g;
    struct kt_onnx_node *n = &g->nodes[index];
    char label[200];
    size_t i;

    n->op = p->op_type != NULL ? p->op_type : "";
    n->name = p->name != NULL ? p->name : "";
    n->domain = p->domain != NULL ? p->domain : "";
    n->proto = p;
    n->kernel = -1;
    n->role = KT_ONNX_ROLE_UNTUNED;
    n->nin = (int)p->n_input;
    n->nout = (int)p->n_output;
    n->in = kt_xcalloc(p->n_input + 1, sizeof(int));
    n->out = kt_xcalloc(p->n_output + 1, sizeof(int));
    for (i = 0; i < p->n_input; i++) {
        if (str(p->input[i])[0] == '\0') {
            n->in[i] = -1;
            continue;
        }
        n->in[i] = kt__ox_find(x, p->input[i]);
        if (n->in[i] < 0)
            return kt_seterr(x->err, x->errlen, KT_EPARSE,
                             "%s: %s reads "
                             "tensor '%.200s', which is no graph input, no "
                             "initializer and no output of an earlier node",
                             g->path,
                             kt__ox_node_label(n, label, sizeof(label)),
                             p->input[i]);
        g->values[n->in[i]].nconsumers++;
    }
    for (i = 0; i < p->n_output; i++) {
        if (str(p->output[i])[0] == '\0') {
            n->out[i] = -1;
            continue;
        }
        n->out[i] = kt__ox_add_value(x, p->output[i]);
        if (n->out[i] < 0)
            return KT_EPARSE;
        g->values[n->out[i]].producer = index;
    }
    return KT_OK;
}

static int64_t
model_opset(const Onnx__ModelProto *m)
{
    size_t i;

    for (i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain;
        if (d == NULL || d[0] == '\0' || strcmp(d, "ai.onnx") == 0)
            return m->opset_import[i]->version;
    }
    return 1;
}

static int
build_graph(struct kt__ox *x, const Onnx__ModelProto *m,
            const struct kt_onnx_input *in, int nin)
{
    const Onnx__GraphProto *gp = m->graph;
    struct kt_onnx_graph *g = x->g;
    size_t i;
    int rc, v;

    if (gp == NULL)
        return kt_seterr(x->err, x->errlen, KT_EPARSE,
                         "%s: the model has no "
                         "graph",
                         g->path);
    g->opset = model_opset(m);
    for (i = 0; i < gp->n_initializer; i++) {
        const char *name = gp->initializer[i]->name;
        if ((v = kt__ox_add_value(x, str(name))) < 0)
            return KT_EPARSE;
        rc = kt__ox_tensor(x, &g->values[v], gp->initializer[i], "initializer");
        if (rc < 0)
            return rc;
    }
    g->inputs = kt_xcalloc(gp->n_input + 1, sizeof(int));
    for (i = 0; i < gp->n_input; i++) {
        if (kt__ox_find(x, str(gp->input[i]->name)) >= 0)
            continue; /* an initializer listed as an input (old models) */
        if ((v = kt__ox_add_value(x, str(gp->input[i]->name))) < 0)
            return KT_EPARSE;
        g->values[v].is_input = 1;
        declared_shape(&g->values[v], gp->input[i]);
        g->inputs[g->ninputs++] = v;
    }
    if ((rc = input_shapes(x, gp, in, nin)) < 0)
        return rc;
    if (gp->n_node > 1000000)
        return kt_seterr(x->err, x->errlen, KT_EPARSE,
                         "%s: %zu nodes (more "
                         "than 1000000)",
                         g->path, gp->n_node);
    g->nodes = kt_xcalloc(gp->n_node + 1, sizeof(*g->nodes));
    for (i = 0; i < gp->n_node; i++) {
        g->nnodes = (int)i + 1;
        if ((rc = read_node(x, gp->node[i], (int)i)) < 0)
            return rc;
    }
    g->outputs = kt_xcalloc(gp->n_output + 1, sizeof(int));
    for (i = 0; i < gp->n_output; i++) {
        v = kt__ox_find(x, str(gp->output[i]->name));
        if (v < 0)
            return kt_seterr(x->err, x->errlen, KT_EPARSE,
                             "%s: graph output "
                             "'%.200s' is produced by no node",
                             g->path, str(gp->output[i]->name));
        g->values[v].is_output = 1;
        g->values[v].nconsumers++;
        g->outputs[g->noutputs++] = v;
    }
    if (g->nnodes == 0)
        return kt_seterr(x->err, x->errlen, KT_EPARSE,
                         "%s: the graph has no "
                         "nodes",
                         g->path);
    return KT_OK;
}

int
kt_onnx_import_mem(const char *path, const void *data, size_t len,
                   const struct kt_onnx_input *inputs, int ninputs, int flags,
                   struct kt_onnx_graph **out, char *err, size_t errlen)
{
    struct kt__ox x;
    Onnx__ModelProto *m;
    int rc;

    *out = NULL;
    memset(&x, 0, sizeof(x));
    x.err = err;
    x.errlen = errlen;
    x.flags = flags;
    m = onnx__model_proto__unpack(NULL, len, data);
    if (m == NULL)
        return kt_seterr(err, errlen, KT_EPARSE,
                         "%s: not an ONNX model "
                         "(the protobuf is malformed or truncated; %zu bytes)",
                         path, len);
    x.g = kt_xcalloc(1, sizeof(*x.g));
    x.g->path = kt_xstrdup(path);
    x.g->model = m;
    rc = build_graph(&x, m, inputs, ninputs);
    if (rc == 0)
        rc = kt__ox_infer(&x);
    if (rc == 0)
        rc = kt__ox_partition(&x);
    free(x.hash);
    if (rc < 0) {
        kt_onnx_free(x.g);
        return rc;
    }
    *out = x.g;
    return KT_OK;
}

int
kt_onnx_import(const char *path, const struct kt_onnx_input *inputs,
               int ninputs, int flags, struct kt_onnx_graph **out, char *err,
               size_t errlen)
{
    struct stat st;
    unsigned char *buf;
    size_t got = 0;
    int fd, rc;

    *out = NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kt_seterr(err, errlen, -errno, "%s: cannot open: %s", path,
                         strerror(errno));
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        (size_t)st.st_size > KT_ONNX_MAX_BYTES) {
        close(fd);
        return kt_seterr(err, errlen, KT_ETOOBIG,
                         "%s: not a regular file of "
                         "at most 2 GiB",
                         path);
    }
    buf = kt_xmalloc((size_t)st.st_size + 1);
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r <= 0) {
            rc = r < 0 ? -errno : KT_EIO;
            close(fd);
            free(buf);
            return kt_seterr(err, errlen, rc, "%s: read failed", path);
        }
        got += (size_t)r;
    }
    close(fd);
    rc = kt_onnx_import_mem(path, buf, got, inputs, ninputs, flags, out, err,
                            errlen);
    free(buf);
    return rc;
}

void
kt_onnx_free(struct kt_onnx_graph *g)
{
    int i;

    if (g == NULL)
        return;
    for (i = 0; i < g->nvalues; i++) {
        free(g->values[i].name);
        if (g->values[i].owned)
            free((void *)g->values[i].data);
    }
    for (i = 0; i < g->nnodes; i++) {
        free(g->nodes[i].in);
        free(g->nodes[i].out);
        free(g->nodes[i].note);
    }
    for (i = 0; i < g->nkernels; i++)
        free(g->kernels[i].nodes);
    free(g->kernels);
    free(g->values);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    if (g->model != NULL)
        onnx__model_proto__free_unpacked(g->model, NULL);
    free(g->path);
    free(g);
}
