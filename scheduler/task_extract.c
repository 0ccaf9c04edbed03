/* task_extract.c - from a model config to tuning tasks.  Layers are
 * expanded by "repeat", elementwise tails are fused into their producer's
 * epilogue, every layer becomes a DAG through the IR operator library, and
 * equal workloads (equal keys) merge into one task weighted by the count.
 *
 * Similarity tags (for the gradient scheduler's groups, docs/design.md 2.4):
 * Ansor's tag is an operator tag plus int(log_1.618(flops + 1)); no TVM
 * operator sets the tag, so the groups never form there.  Ours is the op
 * class and the structural parameters that change the loop nest (kernel
 * size, stride, depthwise/grouped, transpose; not the epilogue), then the
 * same log_1.618 FLOP bucket: "conv2d_3x3_s1_g1_37".  Tasks with equal tags
 * have the same structure and similar work, so their best speeds are
 * comparable. */
#include "scheduler/scheduler.h"

#include "onnx/onnx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct inst {
    const struct kt_layer *l;
    int epilogue;
    int fused; /* folded into the previous producer */
};

/* The output shape of a layer as 4 dims (trailing 1s), or 0 if not a
 * producer that can take an epilogue. */
static int
producer_shape(const struct kt_layer *l, int64_t out[4])
{
    if (l->op == KT_LAYER_CONV2D) {
        out[0] = l->N;
        out[1] = l->K;
        out[2] = (l->H + 2 * l->pad[0] - l->dilation[0] * (l->R - 1) - 1) /
                     l->stride[0] +
                 1;
        out[3] = (l->W + 2 * l->pad[1] - l->dilation[1] * (l->S - 1) - 1) /
                     l->stride[1] +
                 1;
        return 1;
    }
    if (l->op == KT_LAYER_DENSE) {
        out[0] = l->M;
        out[1] = l->N;
        out[2] = out[3] = 1;
        return 1;
    }
    return 0;
}

static void
shape4(const struct kt_layer *l, int64_t out[4])
{
    int i;
    for (i = 0; i < 4; i++)
        out[i] = i < l->nshape ? l->shape[i] : 1;
}

/* Fuses elementwise layers into the producer at position p; returns how
 * many following instances were folded. */
static void
fuse_after(struct inst *v, int n, int p)
{
    int64_t ps[4], es[4];
    int j = p + 1;
    if (!producer_shape(v[p].l, ps))
        return;
    for (; j < n; j++) {
        const struct kt_layer *e = v[j].l;
        if (e->op != KT_LAYER_RELU &&
            !(e->op == KT_LAYER_ADD && e->bias_operand))
            return;
        shape4(e, es);
        if (memcmp(ps, es, sizeof(ps)) != 0)
            return;
        if (e->op == KT_LAYER_ADD) {
            if (v[p].epilogue != 0)
                return; /* bias after bias or after relu: not expressible */
            v[p].epilogue |= KT_EPI_BIAS;
        } else {
            if (v[p].epilogue & KT_EPI_RELU)
                return;
            v[p].epilogue |= KT_EPI_RELU;
        }
        v[j].fused = 1;
    }
}

static int
make_def(const struct kt_layer *l, int epi, int winograd, struct kt_op_def *d)
{
    struct kt_conv2d_params c;
    int64_t s[4];
    int m;
    switch (l->op) {
    case KT_LAYER_CONV2D:
        memset(&c, 0, sizeof(c));
        c.N = l->N;
        c.C = l->C;
        c.H = l->H;
        c.W = l->W;
        c.K = l->K;
        c.R = l->R;
        c.S = l->S;
        c.stride_h = l->stride[0];
        c.stride_w = l->stride[1];
        c.pad_h = l->pad[0];
        c.pad_w = l->pad[1];
        c.dilation_h = l->dilation[0];
        c.dilation_w = l->dilation[1];
        c.groups = l->groups;
        c.epilogue = epi;
        m = winograd ? kt_winograd_choose(&c) : 0;
        return m > 0 ? kt_op_conv2d_winograd(d, &c, m) : kt_op_conv2d(d, &c);
    case KT_LAYER_DENSE: return kt_op_dense(d, l->M, l->N, l->K, epi);
    case KT_LAYER_MATMUL:
        return l->const_b ? kt_op_matmul_const_b(d, l->M, l->N, l->K)
                          : kt_op_matmul(d, l->M, l->N, l->K);
    case KT_LAYER_BATCH_MATMUL:
        return kt_op_batch_matmul(d, l->B, l->M, l->N, l->K, l->transpose_b);
    case KT_LAYER_MAXPOOL:
    case KT_LAYER_AVGPOOL:
        return kt_op_pool2d(d, l->op == KT_LAYER_MAXPOOL, l->N, l->C, l->H,
                            l->W, l->kernel, l->stride[0], l->pad[0]);
    case KT_LAYER_GLOBAL_AVG_POOL:
        return kt_op_global_avg_pool(d, l->N, l->C, l->H, l->W);
    case KT_LAYER_SOFTMAX: return kt_op_softmax(d, l->rows, l->cols);
    default:
        shape4(l, s);
        return kt_op_elementwise(d, kt_layer_op_name(l->op), s[0], s[1], s[2],
                                 s[3]);
    }
}

/* A convolution's or dense layer's epilogue (bias, relu: a few operations
 * per output) is left out: with and without one, the same product runs at
 * the same speed (PP-OCRv4 det's 80x80 3x3 96 -> 24 layer: 0.77 and 0.79
 * ms tuned), so each tells the gradient what the other can reach. */
static void
layer_tag(const struct kt_layer *l, double flops, char *out, size_t n)
{
    int bucket = (int)(log(flops + 1) / log(1.618));
    const char *op = kt_layer_op_name(l->op);
    if (l->op == KT_LAYER_CONV2D)
        snprintf(out, n, "conv2d_%lldx%lld_s%lld_%s_%d", (long long)l->R,
                 (long long)l->S, (long long)l->stride[0],
                 l->groups == 1
                     ? "g1"
                     : (l->groups == l->C && l->groups == l->K ? "dw" : "g"),
                 bucket);
    else if (l->op == KT_LAYER_DENSE)
        snprintf(out, n, "dense_%d", bucket);
    else if (l->op == KT_LAYER_BATCH_MATMUL)
        snprintf(out, n, "batch_matmul_t%d_%d", l->transpose_b, bucket);
    else
        snprintf(out, n, "%s_%d", op, bucket);
}

/* Adds dag as a task or merges it into an equal one (takes dag). */
static void
add_task(struct kt_tasks *t, int *cap, struct kt_dag *dag, double weight,
         const char *name, const char *tag, int layer,
         const struct kt_op_def *def)
{
    int i, k;
    for (i = 0; i < t->n; i++) {
        if (strcmp(t->v[i].dag->hash, dag->hash) == 0 &&
            strcmp(t->v[i].dag->key, dag->key) == 0) {
            t->v[i].weight += weight;
            kt_dag_free(dag);
            return;
        }
    }
    if (t->n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        t->v = kt_xrealloc(t->v, (size_t)*cap * sizeof(*t->v));
    }
    memset(&t->v[t->n], 0, sizeof(t->v[t->n]));
    snprintf(t->v[t->n].name, sizeof(t->v[t->n].name), "%s", name);
    /* Names stay unique: a clash gets the task number appended. */
    for (k = 0; k < t->n; k++) {
        if (strcmp(t->v[k].name, t->v[t->n].name) == 0) {
            char buf[sizeof(t->v[0].name)];
            snprintf(buf, sizeof(buf), "%.80s_%d", name, t->n);
            memcpy(t->v[t->n].name, buf, sizeof(buf));
            break;
        }
    }
    snprintf(t->v[t->n].tag, sizeof(t->v[t->n].tag), "%s", tag);
    t->v[t->n].dag = dag;
    t->v[t->n].weight = weight;
    t->v[t->n].flops = dag->flops;
    t->v[t->n].first_layer = layer;
    if (def != NULL) {
        t->v[t->n].wino_m = def->wino_m;
        t->v[t->n].wino_r = def->wino_r;
    }
    t->n++;
}

static int
extract_layers(const struct kt_model_conf *m, struct kt_tasks *out, int *cap,
               char *err, size_t errlen)
{
    struct inst *v;
    int64_t total = 0, r;
    int i, n = 0, rc = 0;

    for (i = 0; i < m->nlayers; i++)
        total += m->layers[i].repeat;
    if (total > 1000000)
        return kt_seterr(err, errlen, KT_ECONFIG,
                         "%s: the layers expand to "
                         "%lld instances (more than 1000000)",
                         m->path, (long long)total);
    v = kt_xcalloc((size_t)total + 1, sizeof(*v));
    for (i = 0; i < m->nlayers; i++) {
        for (r = 0; r < m->layers[i].repeat; r++) {
            v[n].l = &m->layers[i];
            v[n].epilogue = m->layers[i].epilogue;
            n++;
        }
    }
    for (i = 0; i < n; i++)
        if (!v[i].fused)
            fuse_after(v, n, i);
    for (i = 0; i < n; i++) {
        struct kt_op_def *d;
        struct kt_dag *dag = NULL;
        char tag[64], msg[1100];
        if (v[i].fused)
            continue;
        d = kt_xmalloc(sizeof(*d));
        rc = make_def(v[i].l, v[i].epilogue, m->winograd == 1, d);
        if (rc == 0)
            rc = kt_op_build(d, &dag, msg, sizeof(msg));
        else
            snprintf(msg, sizeof(msg), "%.1000s", d->text);
        if (rc < 0) {
            kt_seterr(err, errlen, rc, "%s:%d: layers[%d] (%s): %s", m->path,
                      v[i].l->line, v[i].l->index, kt_layer_op_name(v[i].l->op),
                      msg);
            free(d);
            break;
        }
        layer_tag(v[i].l, dag->flops, tag, sizeof(tag));
        add_task(out, cap, dag, 1.0,
                 v[i].l->name != NULL && v[i].l->repeat == 1 ? v[i].l->name
                                                             : d->name,
                 tag, v[i].l->index, d);
        free(d);
    }
    free(v);
    return rc;
}

int
kt_tasks_import_onnx(const struct kt_model_conf *m, struct kt_onnx_graph **g,
                     char *err, size_t errlen)
{
    struct kt_onnx_input *in = kt_xcalloc((size_t)m->ninputs + 1, sizeof(*in));
    int i, rc;

    for (i = 0; i < m->ninputs; i++) {
        in[i].name = m->inputs[i].name;
        in[i].ndim = m->inputs[i].ndim;
        in[i].dims = m->inputs[i].dims;
    }
    rc = kt_onnx_import(m->onnx, in, m->ninputs,
                        (m->onnx_partial ? KT_ONNX_PARTIAL : 0) |
                            (m->winograd != 0 ? KT_ONNX_WINOGRAD : 0),
                        g, err, errlen);
    free(in);
    return rc;
}

int
kt_tasks_print_graph(const struct kt_model_conf *m, FILE *f, char *err,
                     size_t errlen)
{
    struct kt_onnx_graph *g = NULL;
    int rc;

    if (m->onnx == NULL)
        return KT_OK;
    rc = kt_tasks_import_onnx(m, &g, err, errlen);
    if (rc == KT_OK)
        kt_onnx_print_graph(g, f);
    kt_onnx_free(g);
    return rc;
}

/* The kernels of an ONNX model, in graph order (docs/onnx.md); equal
 * kernels merge like equal layers, so kernel k's task is g->kernels[k].task
 * as long as the ONNX kernels come first. */
static int
extract_onnx(const struct kt_model_conf *m, struct kt_tasks *out, int *cap,
             char *err, size_t errlen)
{
    struct kt_onnx_graph *g = NULL;
    int i, rc = kt_tasks_import_onnx(m, &g, err, errlen);
    for (i = 0; rc == 0 && i < g->nkernels; i++) {
        struct kt_dag *dag = NULL;
        char msg[512];
        rc = kt_op_build(&g->kernels[i].def, &dag, msg, sizeof(msg));
        if (rc < 0) {
            kt_seterr(err, errlen, rc, "%s: kernel %s: %s", m->onnx,
                      g->kernels[i].name, msg);
            break;
        }
        add_task(out, cap, dag, 1.0, g->kernels[i].name, g->kernels[i].tag, -1,
                 &g->kernels[i].def);
    }
    kt_onnx_free(g);
    return rc;
}

static int
extract_tasks(const struct kt_model_conf *m, struct kt_tasks *out, int *cap,
              char *err, size_t errlen)
{
    int i, j, rc;
    for (i = 0; i < m->ntasks; i++) {
        const struct kt_task_conf *tc = &m->tasks[i];
        struct kt_shape *sh = kt_xcalloc((size_t)tc->nshapes + 1, sizeof(*sh));
        struct kt_dag *dag = NULL;
        struct kt_buf text;
        char msg[512];

        for (j = 0; j < tc->nshapes; j++) {
            snprintf(sh[j].name, sizeof(sh[j].name), "%s", tc->shapes[j].name);
            sh[j].ndim = tc->shapes[j].ndim;
            memcpy(sh[j].dims, tc->shapes[j].dims, sizeof(sh[j].dims));
        }
        kt_buf_init(&text);
        for (j = 0; j < tc->compute.n; j++)
            kt_buf_printf(&text, "%s\n", tc->compute.v[j]);
        rc = kt_dag_parse(text.p, sh, tc->nshapes, &dag, msg, sizeof(msg));
        kt_buf_free(&text);
        free(sh);
        if (rc < 0)
            return kt_seterr(err, errlen, rc,
                             "%s: tasks[%d] (%s): compute: "
                             "%s",
                             m->path, i, tc->name, msg);
        add_task(out, cap, dag, tc->weight, tc->name,
                 tc->group != NULL ? tc->group : "", -1, NULL);
    }
    return 0;
}

int
kt_tasks_extract(const struct kt_model_conf *m, struct kt_tasks *out, char *err,
                 size_t errlen)
{
    int cap = 0, rc;
    memset(out, 0, sizeof(*out));
    rc = m->onnx != NULL ? extract_onnx(m, out, &cap, err, errlen) : 0;
    if (rc == 0)
        rc = extract_layers(m, out, &cap, err, errlen);
    if (rc == 0)
        rc = extract_tasks(m, out, &cap, err, errlen);
    if (rc < 0)
        kt_tasks_free(out);
    return rc;
}

void
kt_tasks_free(struct kt_tasks *t)
{
    int i;
    if (t == NULL)
        return;
    for (i = 0; i < t->n; i++)
        kt_dag_free(t->v[i].dag);
    free(t->v);
    t->v = NULL;
    t->n = 0;
}

double
kt_tasks_total_flops(const struct kt_tasks *t)
{
    double f = 0;
    int i;
    for (i = 0; i < t->n; i++)
        f += t->v[i].weight * t->v[i].flops;
    return f;
}
