/* fuse.c - the partition of the graph into kernels, as TVM fuses: each
 * anchor (Conv, ConvTranspose, Gemm, MatMul, pools, Softmax, ReduceMean,
 * LayerNormalization, and the LayerNorm pattern) takes the elementwise
 * nodes after it whose result has the anchor's shape (bias, batch norm,
 * activation, residual add, activation) as its epilogue, as long as only
 * the last fused value is used outside the kernel.  A batch norm right
 * after a convolution or Gemm is folded into its weights and bias.  An Erf
 * or Gelu that no anchor took starts an elementwise kernel (the GELU
 * pattern).  Other nodes run untuned. */
#include "onnx/int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct part {
    struct kt__ox *x;
    struct kt_onnx_graph *g;
    int **cons; /* consumers (node indices) of each value */
    int *ncons;
    int capkernels;
};

static const char *const anchor_ops[] = {"Conv",
                                         "ConvTranspose",
                                         "Gemm",
                                         "MatMul",
                                         "MaxPool",
                                         "AveragePool",
                                         "GlobalAveragePool",
                                         "GlobalMaxPool",
                                         "Softmax",
                                         "ReduceMean",
                                         "LayerNormalization",
                                         NULL};

static int
is_op(const struct kt_onnx_node *n, const char *op)
{
    return strcmp(n->op, op) == 0;
}

static int
is_anchor(const struct kt_onnx_node *n)
{
    int i;
    for (i = 0; anchor_ops[i] != NULL; i++)
        if (is_op(n, anchor_ops[i]))
            return 1;
    return 0;
}

static int
free_node(struct part *p, int i)
{
    return i >= 0 && p->g->nodes[i].role == KT_ONNX_ROLE_UNTUNED &&
           p->g->nodes[i].kernel < 0;
}

static struct kt_onnx_value *
vin(struct part *p, const struct kt_onnx_node *n, int i)
{
    return i < n->nin && n->in[i] >= 0 ? &p->g->values[n->in[i]] : NULL;
}

static int
same_shape(const struct kt_onnx_value *a, const struct kt_onnx_value *b)
{
    return a->ndim == b->ndim &&
           memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof(a->dims[0])) == 0;
}

static int
in_nodes(const int *nodes, int n, int i)
{
    int k;
    for (k = 0; k < n; k++)
        if (nodes[k] == i)
            return 1;
    return 0;
}

static int
prefix_valid(struct part *p, const struct kt_onnx_kernel *k, const int *m,
             int n)
{
    int all[KT__OX_MAX_MEMBERS + 8], na = 0, i, j, c, fin;

    for (i = 0; i < k->nnodes; i++)
        all[na++] = k->nodes[i];
    for (i = 0; i < n; i++)
        all[na++] = m[i];
    fin = n > 0 ? p->g->nodes[m[n - 1]].out[0] : k->output;
    for (i = 0; i < na; i++) {
        const struct kt_onnx_node *nd = &p->g->nodes[all[i]];
        for (j = 0; j < nd->nout; j++) {
            int v = nd->out[j];
            if (v < 0 || v == fin)
                continue;
            if (p->g->values[v].is_output)
                return 0;
            for (c = 0; c < p->ncons[v]; c++)
                if (!in_nodes(all, na, p->cons[v][c]))
                    return 0;
        }
    }
    return 1;
}

/* Elementwise nodes after node 'first' that may join the kernel, in
 * order, appended to m[0..n); valid[i] says whether the first i members
 * leave only the last value visible.  Returns the new count. */
static int
grow(struct part *p, struct kt_onnx_kernel *k, struct kt__ox_group *gr,
     int first, int *m, int n, int *valid)
{
    const struct kt_onnx_value *out = &p->g->values[k->output];
    int j, i, reads, ok, horizon = first;

    for (i = 0; i < gr->nvals; i++)
        for (j = 0; j < p->ncons[gr->val[i]]; j++)
            if (p->cons[gr->val[i]][j] > horizon)
                horizon = p->cons[gr->val[i]][j];
    valid[n] = prefix_valid(p, k, m, n);
    for (j = first + 1;
         j <= horizon && j < p->g->nnodes && n < KT__OX_MAX_MEMBERS; j++) {
        const struct kt_onnx_node *nd = &p->g->nodes[j];
        if (!free_node(p, j) || in_nodes(k->nodes, k->nnodes, j) ||
            !kt__ox_is_elementwise(nd->op) || nd->nout < 1 || nd->out[0] < 0 ||
            !same_shape(&p->g->values[nd->out[0]], out))
            continue;
        reads = 0;
        ok = 1;
        for (i = 0; i < nd->nin; i++) {
            int v = nd->in[i];
            if (v < 0)
                continue;
            if (kt__ox_group_stage(gr, v) >= 0)
                reads = 1;
        }
        if (!reads || !ok)
            continue;
        m[n++] = j;
        kt__ox_group_add(gr, nd->out[0], 0);
        for (i = 0; i < p->ncons[nd->out[0]]; i++)
            if (p->cons[nd->out[0]][i] > horizon)
                horizon = p->cons[nd->out[0]][i];
        valid[n] = prefix_valid(p, k, m, n);
    }
    return n;
}

/* The only consumer of value v when it is a free node of type op with
 * nin inputs (all present) and an output; else -1. */
static int
only_consumer(struct part *p, int v, const char *op, int nin)
{
    const struct kt_onnx_node *n;
    int c, i;

    if (v < 0 || p->ncons[v] != 1)
        return -1;
    c = p->cons[v][0];
    n = &p->g->nodes[c];
    if (!free_node(p, c) || !is_op(n, op) || n->nin < nin)
        return -1;
    for (i = 0; i < nin; i++)
        if (n->in[i] < 0)
            return -1;
    return c;
}

/* The LayerNorm pattern at ReduceMean node i: mean, x - mean, squared,
 * mean again, + eps, sqrt, divide.  Fills nodes[7] and returns 1. */
static int
match_layer_norm(struct part *p, int i, int *nodes)
{
    const struct kt_onnx_graph *g = p->g;
    const struct kt_onnx_node *r1 = &g->nodes[i], *nd;
    int x = r1->in[0], d, k, sq = -1, dv = -1, c, axes;

    nodes[0] = i;
    if ((nodes[1] = only_consumer(p, r1->out[0], "Sub", 2)) < 0)
        return 0;
    nd = &g->nodes[nodes[1]];
    if (nd->in[0] != x || nd->in[1] != r1->out[0])
        return 0;
    d = nd->out[0];
    if (p->ncons[d] != 2)
        return 0;
    for (k = 0; k < 2; k++) {
        c = p->cons[d][k];
        nd = &g->nodes[c];
        if (!free_node(p, c) || nd->nin < 2 || nd->in[0] != d || nd->in[1] < 0)
            continue;
        if ((is_op(nd, "Pow") && vin(p, nd, 1)->data != NULL &&
             kt_onnx_value_get(vin(p, nd, 1), 0) == 2) ||
            (is_op(nd, "Mul") && nd->in[1] == d))
            sq = c;
        else if (is_op(nd, "Div"))
            dv = c;
    }
    if (sq < 0 || dv < 0)
        return 0;
    nodes[2] = sq;
    axes = kt__ox_reduce_axes(p->x, r1);
    if ((nodes[3] = only_consumer(p, g->nodes[sq].out[0], "ReduceMean", 1)) <
            0 ||
        kt__ox_reduce_axes(p->x, &g->nodes[nodes[3]]) != axes)
        return 0;
    if ((nodes[4] = only_consumer(p, g->nodes[nodes[3]].out[0], "Add", 2)) < 0)
        return 0;
    nd = &g->nodes[nodes[4]];
    if (vin(p, nd, 1)->data == NULL && vin(p, nd, 0)->data == NULL)
        return 0;
    if ((nodes[5] = only_consumer(p, nd->out[0], "Sqrt", 1)) < 0 ||
        only_consumer(p, g->nodes[nodes[5]].out[0], "Div", 2) != dv ||
        g->nodes[dv].in[1] != g->nodes[nodes[5]].out[0])
        return 0;
    nodes[6] = dv;
    for (k = 1; k < 7; k++)
        if (nodes[k] < nodes[k - 1])
            return 0;
    /* The reduced axes must be the trailing ones (rows x cols). */
    return axes > 0 && ((axes + (axes & -axes)) == 1 << g->values[x].ndim);
}

static struct kt_onnx_kernel *
new_kernel(struct part *p, int kind, int anchor)
{
    struct kt_onnx_graph *g = p->g;
    struct kt_onnx_kernel *k;

    if (g->nkernels == p->capkernels) {
        p->capkernels = p->capkernels ? 2 * p->capkernels : 32;
        g->kernels = kt_xrealloc(g->kernels,
                                 (size_t)p->capkernels * sizeof(*g->kernels));
    }
    k = &g->kernels[g->nkernels];
    memset(k, 0, sizeof(*k));
    k->kind = kind;
    k->anchor = anchor;
    k->nodes = kt_xcalloc(KT__OX_MAX_MEMBERS + 16, sizeof(int));
    k->nodes[k->nnodes++] = anchor;
    k->output = g->nodes[anchor].out[0];
    return k;
}

/* Folds a batch norm that is the only consumer of a Conv/ConvTranspose/
 * Gemm into it. */
static void
fold_batch_norm(struct part *p, struct kt_onnx_kernel *k,
                struct kt__ox_group *gr)
{
    const struct kt_onnx_node *a = &p->g->nodes[k->anchor];
    int v = a->out[0], c;

    if (!(is_op(a, "Conv") || is_op(a, "ConvTranspose") || is_op(a, "Gemm")) ||
        p->ncons[v] != 1 || p->g->values[v].is_output)
        return;
    c = p->cons[v][0];
    if (!free_node(p, c) || !is_op(&p->g->nodes[c], "BatchNormalization") ||
        p->g->nodes[c].in[0] != v)
        return;
    k->nodes[k->nnodes++] = c;
    k->bn_folded = 1;
    k->output = p->g->nodes[c].out[0];
    kt__ox_group_add(gr, k->output, -1);
}

/* Builds the kernel at node i (kind, pattern nodes), grows the epilogue
 * and takes the longest fusion whose definition builds. */
static int
make_kernel(struct part *p, int i, int kind, const int *pattern, int npat)
{
    struct kt_onnx_kernel *k = new_kernel(p, kind, i);
    struct kt__ox_group gr, base;
    int m[KT__OX_MAX_MEMBERS], valid[KT__OX_MAX_MEMBERS + 1], n = 0, len, j,
                                                              rc = -1;
    char err[512] = "";

    memset(&gr, 0, sizeof(gr));
    memset(valid, 0, sizeof(valid));
    for (j = 1; j < npat; j++)
        k->nodes[k->nnodes++] = pattern[j];
    k->output = p->g->nodes[k->nodes[k->nnodes - 1]].out[0];
    if (kind == KT_ONNX_K_ELEMENTWISE) {
        k->nnodes = 0; /* the start node is the first member */
        m[n++] = i;
        base = gr;
        kt__ox_group_add(&gr, k->output, 0);
    } else {
        kt__ox_group_add(&gr, k->output, -1);
        if (kind == KT_ONNX_K_OP)
            fold_batch_norm(p, k, &gr);
        base = gr;
    }
    n = grow(p, k, &gr, pattern != NULL ? pattern[npat - 1] : i, m, n, valid);
    for (len = n; len >= 0; len--) {
        if (!valid[len] || (kind == KT_ONNX_K_ELEMENTWISE && len == 0))
            continue;
        rc = kt__ox_gen_kernel(p->x, k, &base, m, len, err, sizeof(err));
        if (rc == 0)
            break;
    }
    if (rc != 0) {
        struct kt_onnx_node *a = &p->g->nodes[i];
        free(k->nodes);
        if (kind == KT_ONNX_K_ELEMENTWISE)
            return 0; /* stays untuned */
        a->role = KT_ONNX_ROLE_UNSUPPORTED;
        a->note = kt_xstrdup(err);
        p->g->nunsupported++;
        return 0;
    }
    for (j = 0; j < len; j++)
        k->nodes[k->nnodes++] = m[j];
    if (len > 0)
        k->output = p->g->nodes[m[len - 1]].out[0];
    for (j = 0; j < k->nnodes; j++) {
        p->g->nodes[k->nodes[j]].kernel = p->g->nkernels;
        p->g->nodes[k->nodes[j]].role = j == 0 ? KT_ONNX_ROLE_TASK
                                               : KT_ONNX_ROLE_FUSED;
    }
    k->anchor = k->nodes[0];
    p->g->nkernels++;
    return 0;
}

/* An Erf/Gelu left over starts an elementwise kernel at the node that
 * scales its input (x / sqrt 2) when that node feeds only it. */
static int
gelu_start(struct part *p, int i)
{
    const struct kt_onnx_node *n = &p->g->nodes[i];
    int v = n->in[0], pr = p->g->values[v].producer;

    if (pr >= 0 && free_node(p, pr) && p->ncons[v] == 1 &&
        (is_op(&p->g->nodes[pr], "Div") || is_op(&p->g->nodes[pr], "Mul")))
        return pr;
    return i;
}

static void
build_consumers(struct part *p)
{
    struct kt_onnx_graph *g = p->g;
    int i, j;

    p->ncons = kt_xcalloc((size_t)g->nvalues + 1, sizeof(int));
    p->cons = kt_xcalloc((size_t)g->nvalues + 1, sizeof(int *));
    for (i = 0; i < g->nnodes; i++)
        for (j = 0; j < g->nodes[i].nin; j++) {
            int v = g->nodes[i].in[j];
            if (v < 0)
                continue;
            p->cons[v] = kt_xrealloc(p->cons[v],
                                     (size_t)(p->ncons[v] + 1) * sizeof(int));
            p->cons[v][p->ncons[v]++] = i;
        }
}

/* Names, tags and the task numbering (equal workload keys share a task). */
static void
finish_kernels(struct part *p)
{
    struct kt_onnx_graph *g = p->g;
    char **keys = kt_xcalloc((size_t)g->nkernels + 1, sizeof(*keys));
    int i, j;

    for (i = 0; i < g->nkernels; i++) {
        struct kt_onnx_kernel *k = &g->kernels[i];
        const struct kt_onnx_node *a = &g->nodes[k->anchor];
        struct kt_dag *d = NULL;
        char err[256];
        int bucket = (int)(log(k->flops + 1) / log(1.618));

        snprintf(k->name, sizeof(k->name), "%.60s", k->def.name);
        if (is_op(a, "Conv")) {
            const struct kt_onnx_value *w = &g->values[a->in[1]];
            int64_t grp = kt_onnx_attr_int(a, "group", 1), s[2] = {1, 1};
            kt_onnx_attr_ints(a, "strides", s, 2);
            /* the nodes fused after it left out, as for layers
             * (scheduler/task_extract.c) */
            snprintf(k->tag, sizeof(k->tag), "conv2d_%lldx%lld_s%lld_%s_%d",
                     (long long)w->dims[2], (long long)w->dims[3],
                     (long long)s[0],
                     grp == 1                             ? "g1"
                     : grp == g->values[a->in[0]].dims[1] ? "dw"
                                                          : "g",
                     bucket);
        } else {
            snprintf(k->tag, sizeof(k->tag), "%.30s_e%d_%d",
                     k->kind == KT_ONNX_K_LAYER_NORM    ? "layer_norm"
                     : k->kind == KT_ONNX_K_ELEMENTWISE ? "elementwise"
                                                        : a->op,
                     k->nnodes - 1, bucket);
        }
        k->task = g->ntasks;
        keys[i] = NULL;
        if (kt_op_build(&k->def, &d, err, sizeof(err)) == 0) {
            keys[i] = kt_xstrdup(d->key);
            kt_dag_free(d);
        }
        for (j = 0; j < i && keys[i] != NULL; j++) {
            if (keys[j] != NULL && strcmp(keys[j], keys[i]) == 0) {
                k->task = g->kernels[j].task;
                break;
            }
        }
        if (k->task == g->ntasks)
            g->ntasks++;
    }
    for (i = 0; i < g->nkernels; i++)
        free(keys[i]);
    free(keys);
}

int
kt__ox_partition(struct kt__ox *x)
{
    struct kt_onnx_graph *g = x->g;
    struct part p;
    int i, pat[8], rc = 0;

    memset(&p, 0, sizeof(p));
    p.x = x;
    p.g = g;
    build_consumers(&p);
    for (i = 0; i < g->nnodes && rc == 0; i++) {
        const struct kt_onnx_node *n = &g->nodes[i];
        if (!free_node(&p, i))
            continue;
        if (is_op(n, "ReduceMean") && match_layer_norm(&p, i, pat))
            rc = make_kernel(&p, i, KT_ONNX_K_LAYER_NORM, pat, 7);
        else if (is_anchor(n))
            rc = make_kernel(&p, i, KT_ONNX_K_OP, NULL, 0);
    }
    for (i = 0; i < g->nnodes && rc == 0; i++)
        if (free_node(&p, i) &&
            (is_op(&g->nodes[i], "Erf") || is_op(&g->nodes[i], "Gelu")))
            rc = make_kernel(&p, gelu_start(&p, i), KT_ONNX_K_ELEMENTWISE, NULL,
                             0);
    finish_kernels(&p);
    for (i = 0; i < g->nvalues; i++)
        free(p.cons[i]);
    free(p.cons);
    free(p.ncons);
    return rc < 0 ? rc : kt__ox_check_unsupported(x);
}
