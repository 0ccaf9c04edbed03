/* ktt_onnx.c - a small ONNX model writer for tests (protobuf-c). */
#include "tests/support/ktt_onnx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "onnx.pb-c.h"

struct ktt_onnx {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    void **mem; /* everything allocated, freed at the end */
    size_t nmem;
};

struct ktt_onnx_node {
    struct ktt_onnx *b;
    Onnx__NodeProto proto;
};

static void *
take(struct ktt_onnx *b, void *p)
{
    b->mem = kt_xrealloc(b->mem, (b->nmem + 1) * sizeof(*b->mem));
    b->mem[b->nmem++] = p;
    return p;
}

static void *
alloc(struct ktt_onnx *b, size_t n)
{
    return take(b, kt_xcalloc(1, n));
}

static char *
dup(struct ktt_onnx *b, const char *s)
{
    return take(b, kt_xstrdup(s));
}

/* Appends p to the pointer array *arr of *n entries. */
static void
push(struct ktt_onnx *b, void ***arr, size_t *n, void *p)
{
    void **v = alloc(b, (*n + 1) * sizeof(void *));
    if (*n > 0)
        memcpy(v, *arr, *n * sizeof(void *));
    v[(*n)++] = p;
    *arr = v;
}

struct ktt_onnx *
ktt_onnx_new(int64_t opset)
{
    struct ktt_onnx *b = kt_xcalloc(1, sizeof(*b));

    onnx__model_proto__init(&b->model);
    onnx__graph_proto__init(&b->graph);
    onnx__operator_set_id_proto__init(&b->opset);
    b->model.has_ir_version = 1;
    b->model.ir_version = 8;
    b->model.graph = &b->graph;
    b->graph.name = "test";
    b->opset.domain = "";
    b->opset.has_version = 1;
    b->opset.version = opset;
    b->opsets[0] = &b->opset;
    b->model.opset_import = b->opsets;
    b->model.n_opset_import = 1;
    return b;
}

void
ktt_onnx_free(struct ktt_onnx *b)
{
    size_t i;

    if (b == NULL)
        return;
    for (i = 0; i < b->nmem; i++)
        free(b->mem[i]);
    free(b->mem);
    free(b);
}

static Onnx__ValueInfoProto *
value_info(struct ktt_onnx *b, const char *name, int ndim, const int64_t *dims)
{
    Onnx__ValueInfoProto *vi = alloc(b, sizeof(*vi));
    Onnx__TypeProto *t = alloc(b, sizeof(*t));
    Onnx__TypeProto__Tensor *tt = alloc(b, sizeof(*tt));
    Onnx__TensorShapeProto *sh = alloc(b, sizeof(*sh));
    int i;

    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(t);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    vi->name = dup(b, name);
    vi->type = t;
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = 1;
    if (ndim < 0)
        return vi;
    tt->shape = sh;
    for (i = 0; i < ndim; i++) {
        Onnx__TensorShapeProto__Dimension *d = alloc(b, sizeof(*d));
        onnx__tensor_shape_proto__dimension__init(d);
        if (dims[i] < 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = dup(b, "N");
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        }
        push(b, (void ***)&sh->dim, &sh->n_dim, d);
    }
    return vi;
}

void
ktt_onnx_input(struct ktt_onnx *b, const char *name, int ndim,
               const int64_t *dims)
{
    push(b, (void ***)&b->graph.input, &b->graph.n_input,
         value_info(b, name, ndim, dims));
}

void
ktt_onnx_output(struct ktt_onnx *b, const char *name)
{
    push(b, (void ***)&b->graph.output, &b->graph.n_output,
         value_info(b, name, -1, NULL));
}

static Onnx__TensorProto *
tensor(struct ktt_onnx *b, const char *name, int ndim, const int64_t *dims)
{
    Onnx__TensorProto *t = alloc(b, sizeof(*t));

    onnx__tensor_proto__init(t);
    t->name = dup(b, name);
    t->n_dims = (size_t)ndim;
    t->dims = alloc(b, (size_t)(ndim + 1) * sizeof(int64_t));
    if (ndim > 0)
        memcpy(t->dims, dims, (size_t)ndim * sizeof(int64_t));
    push(b, (void ***)&b->graph.initializer, &b->graph.n_initializer, t);
    return t;
}

float
ktt_onnx_fill(int64_t i)
{
    return 0.01f * (float)(i % 100) + 0.5f;
}

void
ktt_onnx_init(struct ktt_onnx *b, const char *name, int ndim,
              const int64_t *dims, const float *data)
{
    Onnx__TensorProto *t = tensor(b, name, ndim, dims);
    size_t n = 1, i;
    float *v;

    for (i = 0; i < (size_t)ndim; i++)
        n *= (size_t)dims[i];
    v = alloc(b, (n + 1) * sizeof(float));
    for (i = 0; i < n; i++)
        v[i] = data != NULL ? data[i] : ktt_onnx_fill((int64_t)i);
    t->has_data_type = 1;
    t->data_type = 1;
    t->has_raw_data = 1;
    t->raw_data.len = n * sizeof(float);
    t->raw_data.data = (uint8_t *)v;
}

void
ktt_onnx_init_i64(struct ktt_onnx *b, const char *name, int n,
                  const int64_t *vals)
{
    int64_t dims[1] = {n};
    Onnx__TensorProto *t = tensor(b, name, 1, dims);
    int64_t *v = alloc(b, (size_t)(n + 1) * sizeof(int64_t));

    memcpy(v, vals, (size_t)n * sizeof(int64_t));
    t->has_data_type = 1;
    t->data_type = 7;
    t->n_int64_data = (size_t)n;
    t->int64_data = v;
}

void
ktt_onnx_scalar(struct ktt_onnx *b, const char *name, float v)
{
    ktt_onnx_init(b, name, 0, NULL, &v);
}

/* Splits "a,b,,c" into strings (empty entries kept). */
static void
names(struct ktt_onnx *b, const char *list, char ***out, size_t *n)
{
    char *s = dup(b, list), *p = s;

    *n = 0;
    *out = NULL;
    if (*s == '\0')
        return;
    for (;;) {
        char *c = strchr(p, ',');
        if (c != NULL)
            *c = '\0';
        push(b, (void ***)out, n, p);
        if (c == NULL)
            break;
        p = c + 1;
    }
}

struct ktt_onnx_node *
ktt_onnx_node(struct ktt_onnx *b, const char *op, const char *name,
              const char *inputs, const char *outputs)
{
    struct ktt_onnx_node *n = alloc(b, sizeof(*n));

    n->b = b;
    onnx__node_proto__init(&n->proto);
    n->proto.op_type = dup(b, op);
    n->proto.name = dup(b, name);
    names(b, inputs, &n->proto.input, &n->proto.n_input);
    names(b, outputs, &n->proto.output, &n->proto.n_output);
    push(b, (void ***)&b->graph.node, &b->graph.n_node, &n->proto);
    return n;
}

void
ktt_onnx_conv_affine(struct ktt_onnx *b, int l, int channels, const char *in,
                     float scale, float shift, const char *out)
{
    char name[3][16], io[3][96], res[2][16];
    int64_t dims[4] = {channels, channels, 1, 1};

    snprintf(name[0], sizeof(name[0]), "w%d", l);
    snprintf(name[1], sizeof(name[1]), "s%d", l);
    snprintf(name[2], sizeof(name[2]), "t%d", l);
    ktt_onnx_init(b, name[0], 4, dims, NULL);
    ktt_onnx_scalar(b, name[1], scale);
    ktt_onnx_scalar(b, name[2], shift);
    snprintf(res[0], sizeof(res[0]), "y%d", l);
    snprintf(res[1], sizeof(res[1]), "z%d", l);
    snprintf(io[0], sizeof(io[0]), "%s,%s", in, name[0]);
    snprintf(io[1], sizeof(io[1]), "%s,%s", res[0], name[1]);
    snprintf(io[2], sizeof(io[2]), "%s,%s", res[1], name[2]);
    snprintf(name[0], sizeof(name[0]), "c%d", l);
    snprintf(name[1], sizeof(name[1]), "m%d", l);
    snprintf(name[2], sizeof(name[2]), "a%d", l);
    ktt_onnx_node(b, "Conv", name[0], io[0], res[0]);
    ktt_onnx_node(b, "Mul", name[1], io[1], res[1]);
    ktt_onnx_node(b, "Add", name[2], io[2], out);
}

static Onnx__AttributeProto *
attr(struct ktt_onnx_node *n, const char *name, int type)
{
    Onnx__AttributeProto *a = alloc(n->b, sizeof(*a));

    onnx__attribute_proto__init(a);
    a->name = dup(n->b, name);
    a->has_type = 1;
    a->type = type;
    push(n->b, (void ***)&n->proto.attribute, &n->proto.n_attribute, a);
    return a;
}

void
ktt_attr_int(struct ktt_onnx_node *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr(n, name, 2);
    a->has_i = 1;
    a->i = v;
}

void
ktt_attr_ints(struct ktt_onnx_node *n, const char *name, int count,
              const int64_t *v)
{
    Onnx__AttributeProto *a = attr(n, name, 7);
    a->ints = alloc(n->b, (size_t)(count + 1) * sizeof(int64_t));
    memcpy(a->ints, v, (size_t)count * sizeof(int64_t));
    a->n_ints = (size_t)count;
}

void
ktt_attr_float(struct ktt_onnx_node *n, const char *name, float v)
{
    Onnx__AttributeProto *a = attr(n, name, 1);
    a->has_f = 1;
    a->f = v;
}

void
ktt_attr_str(struct ktt_onnx_node *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a = attr(n, name, 3);
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)dup(n->b, v);
}

uint8_t *
ktt_onnx_pack(struct ktt_onnx *b, size_t *len)
{
    size_t n = onnx__model_proto__get_packed_size(&b->model);
    uint8_t *buf = kt_xmalloc(n + 1);

    *len = onnx__model_proto__pack(&b->model, buf);
    return buf;
}

int
ktt_onnx_write(struct ktt_onnx *b, const char *path)
{
    size_t len;
    uint8_t *buf = ktt_onnx_pack(b, &len);
    FILE *f = fopen(path, "wb");
    int rc = -1;

    if (f != NULL) {
        rc = fwrite(buf, 1, len, f) == len ? 0 : -1;
        if (fclose(f) != 0)
            rc = -1;
    }
    free(buf);
    return rc;
}
