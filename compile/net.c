/* net.c - the whole network of a model imported from ONNX: its steps in
 * execution order (a kernel call per kernel of the graph, plain C for the
 * untuned nodes) and the plan that also holds the weights file's contents
 * (net_weights.c) and the activations' arena (net_arena.c)
 * (docs/compile.md). */
#include "compile/compile_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx.h"

/* Untuned nodes the generated runtime runs (net_emit.c, net_layout.c). */
static const char *const untuned_ops[] =
    {"Add",       "Sub",        "Mul",
     "Div",       "Pow",        "Relu",
     "Clip",      "Sigmoid",    "HardSigmoid",
     "HardSwish", "Tanh",       "Sqrt",
     "Exp",       "Log",        "Abs",
     "Neg",       "Reciprocal", "BatchNormalization",
     "Reshape",   "Flatten",    "Squeeze",
     "Unsqueeze", "Identity",   "Dropout",
     "Transpose", "Concat",     "Slice",
     "Resize",    "Upsample",   NULL};

static int
is_op(const struct kt_onnx_node *n, const char *op)
{
    return strcmp(n->op, op) == 0;
}

static int skip(struct kt_cc *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Records why the network cannot be compiled; returns 1. */
static int
skip(struct kt_cc *c, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(c->net_skip, sizeof(c->net_skip), fmt, ap);
    va_end(ap);
    return 1;
}

static const char *
node_label(const struct kt_onnx_node *n)
{
    return n->name[0] ? n->name : n->op;
}

/* ---- Kernel arguments ------------------------------------------------------ */

/* A value as a buffer: its constant data or its activation. */
static struct kt_cc_ref
value_ref(struct kt_cc_net *net, int v)
{
    struct kt_cc_ref r = {KT_CC_ACT, v};

    if (net->g->values[v].data != NULL) {
        r.src = KT_CC_WEIGHT;
        r.at = kt__cc_w_raw(net, v);
    }
    return r;
}

/* P<i> of kernel k: its value; the folded bias when it is the bias of an
 * anchor with a folded batch norm; a batch norm's derived scale/shift when
 * it is the scale/bias input of a batch norm in k that is not folded. */
static struct kt_cc_ref
extra_ref(struct kt_cc_net *net, const struct kt_onnx_kernel *k, int v)
{
    const struct kt_onnx_node *a = &net->g->nodes[k->anchor];
    const struct kt_onnx_node *bn = k->bn_folded ? &net->g->nodes[k->nodes[1]]
                                                 : NULL;
    struct kt_cc_ref r = {KT_CC_WEIGHT, 0};
    int i, which;

    /* the bias a folded batch norm's shift stands in for (epilogue.c) */
    if (bn != NULL &&
        v == (a->nin > 2 && a->in[2] >= 0 ? a->in[2] : bn->in[2])) {
        r.at = kt__cc_w_folded_bias(net, a, bn);
        return r;
    }
    for (i = k->bn_folded ? 2 : 1; i < k->nnodes; i++) {
        const struct kt_onnx_node *n = &net->g->nodes[k->nodes[i]];
        if (!is_op(n, "BatchNormalization") || !kt__cc_bn_consts(net->g, n))
            continue;
        for (which = 1; which <= 2; which++)
            if (n->in[which] == v) {
                r.at = kt__cc_w_bn(net, n, which);
                return r;
            }
    }
    return value_ref(net, v);
}

/* A Winograd convolution's transformed weight U and its transforms BT
 * and AT (kt_op_conv2d_winograd). */
static int
winograd_arg(struct kt_cc *c, const struct kt_onnx_kernel *k,
             const struct kt_onnx_node *bn, const struct kt_lbuf *lb,
             struct kt_cc_ref *r)
{
    struct kt_cc_net *net = c->net;
    const struct kt_onnx_node *a = &net->g->nodes[k->anchor];
    const struct kt_onnx_value *wv = &net->g->values[a->in[1]];

    if (strcmp(lb->name, "U") == 0)
        r->at = kt__cc_w_winograd(net, a, bn, lb);
    else if (lb->ndim == 2 && wv->ndim == 4)
        r->at = kt__cc_w_winograd_matrix(net, lb->shape[1], wv->dims[2],
                                         strcmp(lb->name, "AT") == 0);
    else
        r->at = -1;
    if (r->at < 0)
        return skip(c,
                    "kernel %s: argument %s does not fit a Winograd "
                    "transform of its weight",
                    k->name, lb->name);
    return 0;
}

/* The source of kernel k's argument lb. */
static int
kernel_arg(struct kt_cc *c, const struct kt_onnx_kernel *k,
           const struct kt_lbuf *lb, struct kt_cc_ref *r)
{
    struct kt_cc_net *net = c->net;
    const struct kt_onnx_node *a = &net->g->nodes[k->anchor];
    const struct kt_onnx_node *bn = k->bn_folded ? &net->g->nodes[k->nodes[1]]
                                                 : NULL;
    const char *name = lb->name;
    int matmul = strncmp(k->def.name, "matmul", 6) == 0 ||
                 strncmp(k->def.name, "batch_matmul", 12) == 0;

    *r = (struct kt_cc_ref){KT_CC_WEIGHT, 0};
    if (strcmp(name, "O") == 0) {
        *r = (struct kt_cc_ref){KT_CC_ACT, k->output};
        return 0;
    }
    if (name[0] == 'P' && name[1] >= '0' && name[1] <= '9') {
        int i = atoi(name + 1);
        if (i >= k->nextra)
            return skip(c, "kernel %s reads %s, which the graph lacks", k->name,
                        name);
        *r = extra_ref(net, k, k->extra_values[i]);
        return 0;
    }
    if (strcmp(name, "I") == 0 || strcmp(name, "A") == 0 ||
        strcmp(name, "X") == 0) {
        *r = value_ref(net, a->in[0]);
        return 0;
    }
    if (strcmp(name, "W") == 0 && is_op(a, "ConvTranspose")) {
        if ((r->at = kt__cc_w_phase(net, k, bn, lb)) < 0)
            return skip(c,
                        "kernel %s: ConvTranspose with auto_pad or "
                        "output_shape (the network compiler needs its pads)",
                        k->name);
        return 0;
    }
    if (is_op(a, "Conv") && (strcmp(name, "U") == 0 ||
                             strcmp(name, "BT") == 0 || strcmp(name, "AT") == 0))
        return winograd_arg(c, k, bn, lb, r);
    if (strcmp(name, "W") == 0 || (matmul && strcmp(name, "B") == 0)) {
        if (bn != NULL && !is_op(a, "Conv"))
            return skip(c, "kernel %s: a batch norm folded into %s", k->name,
                        a->op);
        if (bn != NULL)
            r->at = kt__cc_w_folded(net, a, bn);
        else
            *r = value_ref(net, a->in[1]);
        return 0;
    }
    if (strcmp(name, "B") == 0 && bn != NULL && is_op(a, "Conv")) {
        r->at = kt__cc_w_folded_bias(net, a, bn);
        return 0;
    }
    if (strcmp(name, "B") == 0 && a->nin > 2 && a->in[2] >= 0 && bn == NULL) {
        *r = value_ref(net, a->in[2]);
        return 0;
    }
    return skip(c, "kernel %s (%s): argument %s has no source in the graph",
                k->name, a->op, name);
}

static int
kernel_step(struct kt_cc *c, int kidx, struct kt_cc_step *s)
{
    struct kt_cc_net *net = c->net;
    const struct kt_onnx_kernel *k = &net->g->kernels[kidx];
    const struct kt_cc_task *t = &c->t[k->task];
    int a, p;

    if (k->bn_folded && !kt__cc_bn_consts(net->g, &net->g->nodes[k->nodes[1]]))
        return skip(c, "kernel %s: its batch norm has non-constant inputs",
                    k->name);
    if (t->lt->nargs > KT_CC_MAX_REFS)
        return skip(c, "kernel %s has %d arguments", k->name, t->lt->nargs);
    s->kernel = kidx;
    s->node = k->anchor;
    s->nrefs = t->lt->nargs;
    for (a = 0; a < t->lt->nargs; a++) {
        const struct kt_lbuf *b = kt__cc_arg(t, a);
        int64_t want;
        if (kernel_arg(c, k, b, &s->refs[a]))
            return 1;
        want = s->refs[a].src == KT_CC_ACT
                   ? kt_onnx_value_elems(&net->g->values[s->refs[a].at])
                   : kt_lbuf_elems(b);
        if (want != kt_lbuf_elems(b))
            return skip(c,
                        "kernel %s: argument %s has %lld elements, its "
                        "tensor %s %lld",
                        k->name, b->name, (long long)kt_lbuf_elems(b),
                        net->g->values[s->refs[a].at].name, (long long)want);
    }
    s->packed = net->npacked;
    for (p = 0; p < t->npacked; p++) {
        net->packed_elems = kt_xrealloc(net->packed_elems,
                                        (size_t)(net->npacked + 1) *
                                            sizeof(int64_t));
        net->packed_elems[net->npacked++] = t->packed[p].elems;
        if (s->refs[t->packed[p].arg].src == KT_CC_ACT)
            s->pack_input = 1;
    }
    return 0;
}

static int
node_step(struct kt_cc *c, int i, struct kt_cc_step *s)
{
    struct kt_cc_net *net = c->net;
    const struct kt_onnx_node *n = &net->g->nodes[i];
    char why[128];
    int j, known = 0;

    for (j = 0; untuned_ops[j] != NULL; j++)
        known |= is_op(n, untuned_ops[j]);
    if (!known || n->nout != 1)
        return skip(c,
                    "node '%s' (%s) has no plain C version in the compiled "
                    "network",
                    node_label(n), n->op);
    if (kt__cc_layout_check(net->g, n, why, sizeof(why)) != 0)
        return skip(c,
                    "node '%s' (%s): %s not run by the compiled "
                    "network",
                    node_label(n), n->op, why);
    if (is_op(n, "BatchNormalization") && !kt__cc_bn_consts(net->g, n))
        return skip(c,
                    "node '%s' (BatchNormalization) has non-constant "
                    "parameters",
                    node_label(n));
    s->kernel = -1;
    s->node = i;
    if (kt__cc_expr_node(net->g, i)) {
        kt__cc_expr_refs(net, i, s);
        return 0;
    }
    if (is_op(n, "BatchNormalization"))
        return skip(c, "node '%s' (BatchNormalization) over fewer than 2 dims",
                    node_label(n));
    for (j = 0; j < n->nin; j++) {
        if (n->in[j] < 0)
            continue;
        if (s->nrefs + 1 >= KT_CC_MAX_REFS)
            return skip(c, "node '%s' (%s) has more than %d inputs",
                        node_label(n), n->op, KT_CC_MAX_REFS - 1);
        s->refs[s->nrefs++] = value_ref(net, n->in[j]);
    }
    s->refs[s->nrefs++] = (struct kt_cc_ref){KT_CC_ACT, n->out[0]};
    return 0;
}

/* The steps: each kernel runs at its last node (the values its epilogue
 * reads exist by then), each untuned node at its place. */
static int
build_steps(struct kt_cc *c)
{
    struct kt_cc_net *net = c->net;
    const struct kt_onnx_graph *g = net->g;
    int *last = kt_xcalloc((size_t)g->nkernels + 1, sizeof(int));
    int i, j, k, rc = 0;

    for (k = 0; k < g->nkernels; k++)
        for (j = 0; j < g->kernels[k].nnodes; j++)
            if (g->kernels[k].nodes[j] > last[k])
                last[k] = g->kernels[k].nodes[j];
    net->steps = kt_xcalloc((size_t)g->nnodes + 1, sizeof(*net->steps));
    for (i = 0; i < g->nnodes && rc == 0; i++) {
        const struct kt_onnx_node *n = &g->nodes[i];
        struct kt_cc_step *s = &net->steps[net->nsteps];
        if (net->inlined[i])
            continue; /* computed in its consumer's step */
        if (n->role == KT_ONNX_ROLE_UNSUPPORTED)
            rc = skip(c, "node '%s' (%s) is not supported (%s)", node_label(n),
                      n->op, n->note ? n->note : "imported with --partial");
        else if (n->role == KT_ONNX_ROLE_UNTUNED)
            rc = node_step(c, i, s);
        else if ((n->role == KT_ONNX_ROLE_TASK ||
                  n->role == KT_ONNX_ROLE_FUSED) &&
                 n->kernel >= 0 && last[n->kernel] == i)
            rc = kernel_step(c, n->kernel, s);
        else
            continue;
        net->nsteps++;
    }
    free(last);
    return rc;
}

static uint64_t
fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ULL;
    size_t i;

    for (i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

/* ---- The plan ------------------------------------------------------------ */

/* Graph inputs and outputs must be float activations. */
static int
check_io(struct kt_cc *c)
{
    const struct kt_onnx_graph *g = c->net->g;
    int i;

    for (i = 0; i < g->ninputs + g->noutputs; i++) {
        int v = i < g->ninputs ? g->inputs[i] : g->outputs[i - g->ninputs];
        const struct kt_onnx_value *val = &g->values[v];
        if (val->dtype != KT_ONNX_FLOAT && val->dtype != 0)
            return skip(c, "graph %s '%s' is not float32",
                        i < g->ninputs ? "input" : "output", val->name);
        if (i >= g->ninputs && (val->data != NULL || val->is_input))
            return skip(c, "graph output '%s' is a constant or an input",
                        val->name);
    }
    return 0;
}

int
kt__cc_net_plan(struct kt_cc *c, FILE *log, char *err, size_t errlen)
{
    struct kt_cc_net *net;
    int rc;

    if (c->m->onnx == NULL)
        return KT_OK;
    net = c->net = kt_xcalloc(1, sizeof(*net));
    rc = kt_tasks_import_onnx(c->m, &net->g, err, errlen);
    if (rc != KT_OK)
        return rc;
    net->w_of_value = kt_xmalloc((size_t)net->g->nvalues * sizeof(int64_t));
    net->arena_off = kt_xmalloc((size_t)net->g->nvalues * sizeof(int64_t));
    net->act_bytes = kt_xcalloc((size_t)net->g->nvalues, sizeof(int64_t));
    net->alias_of = kt_xmalloc((size_t)net->g->nvalues * sizeof(int));
    net->alias_at = kt_xcalloc((size_t)net->g->nvalues, sizeof(int64_t));
    net->has_alias = kt_xcalloc((size_t)net->g->nvalues, 1);
    memset(net->w_of_value, 0xff, (size_t)net->g->nvalues * sizeof(int64_t));
    kt__cc_expr_plan(net);
    if (check_io(c) || build_steps(c)) {
        if (log != NULL)
            fprintf(log,
                    "kerntune: warning: %s: the network is not compiled (%s); "
                    "the library has the kernels only\n",
                    c->m->onnx, c->net_skip);
        kt__cc_net_free(net);
        c->net = NULL;
        return KT_OK;
    }
    kt__cc_plan_arena(net);
    rc = kt__cc_net_prepack(c, err, errlen);
    net->w_hash = fnv1a(net->w, (size_t)net->nw * sizeof(float));
    return rc;
}

void
kt__cc_net_free(struct kt_cc_net *n)
{
    if (n == NULL)
        return;
    kt_onnx_free(n->g);
    free(n->steps);
    free(n->packed_elems);
    free(n->packed_at);
    free(n->allocs);
    free(n->w);
    free(n->w_of_value);
    free(n->inlined);
    free(n->arena_off);
    free(n->act_bytes);
    free(n->alias_of);
    free(n->alias_at);
    free(n->has_alias);
    free(n);
}
