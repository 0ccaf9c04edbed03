/* net.c - the whole network of a model imported from ONNX: its steps in
 * execution order (a kernel call per kernel of the graph, plain C for the
 * untuned nodes), the weights file's contents (batch norms folded) and the
 * arena that holds the activations (docs/compile.md). */
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

/* ---- Weights ------------------------------------------------------------- */

int64_t
kt__cc_w_alloc(struct kt_cc_net *net, int64_t n)
{
    int64_t at = (net->nw + 15) / 16 * 16;

    if (at + n > net->capw) {
        net->capw = (at + n) * 2 + 1024;
        net->w = kt_xrealloc(net->w, (size_t)net->capw * sizeof(float));
    }
    memset(net->w + net->nw, 0, (size_t)(at + n - net->nw) * sizeof(float));
    net->nw = at + n;
    if (net->nallocs % 64 == 0)
        net->allocs = kt_xrealloc(net->allocs, (size_t)(net->nallocs + 64) *
                                                   sizeof(*net->allocs));
    net->allocs[net->nallocs].at = at;
    net->allocs[net->nallocs++].n = n;
    return at;
}

/* The weights slot of constant value v (converted to float, once). */
static int64_t
w_raw(struct kt_cc_net *net, int v)
{
    const struct kt_onnx_value *val = &net->g->values[v];
    int64_t n = kt_onnx_value_elems(val), i, at;

    if (net->w_of_value[v] >= 0)
        return net->w_of_value[v];
    at = kt__cc_w_alloc(net, n);
    for (i = 0; i < n; i++)
        net->w[at + i] = (float)kt_onnx_value_get(val, i);
    net->w_of_value[v] = at;
    return at;
}

/* gamma / sqrt(var + eps) and beta - mean * scale of a batch norm. */
static void
bn_scale_shift(const struct kt_onnx_graph *g, const struct kt_onnx_node *bn,
               int64_t ch, double *scale, double *shift)
{
    double eps = kt_onnx_attr_float(bn, "epsilon", 1e-5);
    int64_t i;

    for (i = 0; i < ch; i++) {
        double gamma = kt_onnx_value_get(&g->values[bn->in[1]], i);
        double beta = kt_onnx_value_get(&g->values[bn->in[2]], i);
        double mean = kt_onnx_value_get(&g->values[bn->in[3]], i);
        double var = kt_onnx_value_get(&g->values[bn->in[4]], i);
        scale[i] = gamma / sqrt(var + eps);
        shift[i] = beta - mean * scale[i];
    }
}

static int
bn_consts(const struct kt_onnx_graph *g, const struct kt_onnx_node *bn)
{
    int i;

    for (i = 1; i < 5; i++)
        if (bn->nin <= i || bn->in[i] < 0 || g->values[bn->in[i]].data == NULL)
            return 0;
    return 1;
}

/* A batch norm's scale (which = 1) or shift (2), per channel. */
static int64_t
w_bn(struct kt_cc_net *net, const struct kt_onnx_node *bn, int which)
{
    int64_t ch = kt_onnx_value_elems(&net->g->values[bn->in[1]]), i, at;
    double *s = kt_xcalloc((size_t)ch * 2, sizeof(double));

    bn_scale_shift(net->g, bn, ch, s, s + ch);
    at = kt__cc_w_alloc(net, ch);
    for (i = 0; i < ch; i++)
        net->w[at + i] = (float)s[(which == 1 ? 0 : ch) + i];
    free(s);
    return at;
}

/* The output channel of element i of anchor a's ONNX weight (ch channels):
 * dim 0 of a Conv weight [K, C/g, R, S], dim 1 of a ConvTranspose weight
 * [C, K, R, S]. */
static int64_t
weight_channel(const struct kt_onnx_node *a, const struct kt_onnx_value *w,
               int64_t ch, int64_t i)
{
    if (is_op(a, "ConvTranspose"))
        return i / (w->dims[2] * w->dims[3]) % ch;
    return i / (kt_onnx_value_elems(w) / ch);
}

/* Anchor a's weight in ONNX layout, its output channels scaled by the
 * batch norm bn (NULL: as it is); caller frees. */
static float *
weight_data(const struct kt_onnx_graph *g, const struct kt_onnx_node *a,
            const struct kt_onnx_node *bn)
{
    const struct kt_onnx_value *w = &g->values[a->in[1]];
    int64_t n = kt_onnx_value_elems(w), i, ch = 1;
    float *out = kt_xmalloc((size_t)n * sizeof(float) + 1);
    double *s = NULL;

    if (bn != NULL) {
        ch = kt_onnx_value_elems(&g->values[bn->in[1]]);
        s = kt_xcalloc((size_t)ch * 2, sizeof(double));
        bn_scale_shift(g, bn, ch, s, s + ch);
    }
    for (i = 0; i < n; i++)
        out[i] = (float)(kt_onnx_value_get(w, i) *
                         (s ? s[weight_channel(a, w, ch, i)] : 1));
    free(s);
    return out;
}

/* A conv's weight with the batch norm bn folded in (rows scaled). */
static int64_t
w_folded(struct kt_cc_net *net, const struct kt_onnx_node *a,
         const struct kt_onnx_node *bn)
{
    int64_t n = kt_onnx_value_elems(&net->g->values[a->in[1]]);
    int64_t at = kt__cc_w_alloc(net, n);
    float *w = weight_data(net->g, a, bn);

    memcpy(net->w + at, w, (size_t)n * sizeof(float));
    free(w);
    return at;
}

/* The bias with bn folded in: bias * scale + shift (bias 0 when a has
 * none). */
static int64_t
w_folded_bias(struct kt_cc_net *net, const struct kt_onnx_node *a,
              const struct kt_onnx_node *bn)
{
    const struct kt_onnx_graph *g = net->g;
    int64_t ch = kt_onnx_value_elems(&g->values[bn->in[1]]), i, at;
    int has_b = a->nin > 2 && a->in[2] >= 0;
    double *s = kt_xcalloc((size_t)ch * 2, sizeof(double));

    bn_scale_shift(g, bn, ch, s, s + ch);
    at = kt__cc_w_alloc(net, ch);
    for (i = 0; i < ch; i++)
        net->w[at + i] = (float)((has_b ? kt_onnx_value_get(&g->values[a->in[2]],
                                                            i)
                                        : 0) *
                                     s[i] +
                                 s[ch + i]);
    free(s);
    return at;
}

/* A ConvTranspose weight [C, K, R, S] in the phase layout of its kernel,
 * W[c,f,q,a,p,b] = Wonnx[c,f, a+pad_h+Sh*(q-ch), b+pad_w+Sw*(p-cw)] (0
 * outside the kernel; docs/onnx.md), bn folded in; -1 when the pads are
 * not given explicitly. */
static int64_t
w_phase(struct kt_cc_net *net, const struct kt_onnx_kernel *k,
        const struct kt_onnx_node *bn, const struct kt_lbuf *lb)
{
    const struct kt_onnx_node *a = &net->g->nodes[k->anchor];
    const struct kt_onnx_value *wv = &net->g->values[a->in[1]];
    int64_t pads[4] = {0, 0, 0, 0}, d[6], n, i, at, R, S;
    char buf[32];
    float *w;

    if (strcmp(kt_onnx_attr_str(a, "auto_pad", "NOTSET", buf, sizeof(buf)),
               "NOTSET") != 0 ||
        kt_onnx_attr_ints(a, "output_shape", d, 6) != 0 ||
        kt_onnx_attr_ints(a, "pads", pads, 4) < 0 || lb->ndim != 6)
        return -1;
    memcpy(d, lb->shape, sizeof(d));
    R = wv->dims[2];
    S = wv->dims[3];
    n = d[0] * d[1] * d[2] * d[3] * d[4] * d[5];
    at = kt__cc_w_alloc(net, n);
    w = weight_data(net->g, a, bn);
    for (i = 0; i < n; i++) {
        int64_t b = i % d[5], p = i / d[5] % d[4],
                ph = i / (d[5] * d[4]) % d[3];
        int64_t q = i / (d[5] * d[4] * d[3]) % d[2];
        int64_t cf = i / (d[5] * d[4] * d[3] * d[2]);
        int64_t r = ph + pads[0] + d[3] * (q - k->conv_t_offset[0]);
        int64_t s = b + pads[1] + d[5] * (p - k->conv_t_offset[1]);
        if (r >= 0 && r < R && s >= 0 && s < S)
            net->w[at + i] = w[(cf * R + r) * S + s];
    }
    free(w);
    return at;
}

/* ---- Kernel arguments ------------------------------------------------------ */

/* A value as a buffer: its constant data or its activation. */
static struct kt_cc_ref
value_ref(struct kt_cc_net *net, int v)
{
    struct kt_cc_ref r = {KT_CC_ACT, v};

    if (net->g->values[v].data != NULL) {
        r.src = KT_CC_WEIGHT;
        r.at = w_raw(net, v);
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
        r.at = w_folded_bias(net, a, bn);
        return r;
    }
    for (i = k->bn_folded ? 2 : 1; i < k->nnodes; i++) {
        const struct kt_onnx_node *n = &net->g->nodes[k->nodes[i]];
        if (!is_op(n, "BatchNormalization") || !bn_consts(net->g, n))
            continue;
        for (which = 1; which <= 2; which++)
            if (n->in[which] == v) {
                r.at = w_bn(net, n, which);
                return r;
            }
    }
    return value_ref(net, v);
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
        if ((r->at = w_phase(net, k, bn, lb)) < 0)
            return skip(c,
                        "kernel %s: ConvTranspose with auto_pad or "
                        "output_shape (the network compiler needs its pads)",
                        k->name);
        return 0;
    }
    if (strcmp(name, "W") == 0 || (matmul && strcmp(name, "B") == 0)) {
        if (bn != NULL && !is_op(a, "Conv"))
            return skip(c, "kernel %s: a batch norm folded into %s", k->name,
                        a->op);
        if (bn != NULL)
            r->at = w_folded(net, a, bn);
        else
            *r = value_ref(net, a->in[1]);
        return 0;
    }
    if (strcmp(name, "B") == 0 && bn != NULL && is_op(a, "Conv")) {
        r->at = w_folded_bias(net, a, bn);
        return 0;
    }
    if (strcmp(name, "B") == 0 && a->nin > 2 && a->in[2] >= 0 && bn == NULL) {
        *r = value_ref(net, a->in[2]);
        return 0;
    }
    return skip(c, "kernel %s (%s): argument %s has no source in the graph",
                k->name, a->op, name);
}

int64_t
kt__cc_lbuf_elems(const struct kt_lbuf *b)
{
    int64_t n = 1;
    int d;

    for (d = 0; d < b->ndim; d++)
        n *= b->shape[d];
    return n;
}

static int
kernel_step(struct kt_cc *c, int kidx, struct kt_cc_step *s)
{
    struct kt_cc_net *net = c->net;
    const struct kt_onnx_kernel *k = &net->g->kernels[kidx];
    const struct kt_cc_task *t = &c->t[k->task];
    int a, p;

    if (k->bn_folded && !bn_consts(net->g, &net->g->nodes[k->nodes[1]]))
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
                   : kt__cc_lbuf_elems(b);
        if (want != kt__cc_lbuf_elems(b))
            return skip(c,
                        "kernel %s: argument %s has %lld elements, its "
                        "tensor %s %lld",
                        k->name, b->name, (long long)kt__cc_lbuf_elems(b),
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
    if (is_op(n, "BatchNormalization") && !bn_consts(net->g, n))
        return skip(c,
                    "node '%s' (BatchNormalization) has non-constant "
                    "parameters",
                    node_label(n));
    s->kernel = -1;
    s->node = i;
    for (j = 0; j < n->nin; j++) {
        if (n->in[j] < 0)
            continue;
        if (s->nrefs + 1 >= KT_CC_MAX_REFS)
            return skip(c, "node '%s' (%s) has more than %d inputs",
                        node_label(n), n->op, KT_CC_MAX_REFS - 1);
        if (is_op(n, "BatchNormalization") && j > 0)
            s->refs[s->nrefs++] = (struct kt_cc_ref){KT_CC_WEIGHT,
                                                     w_bn(net, n, j)};
        else
            s->refs[s->nrefs++] = value_ref(net, n->in[j]);
        if (is_op(n, "BatchNormalization") && j == 2)
            break;
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

/* ---- Memory plan ------------------------------------------------------------ */

/* First fit over the activations in order of definition: a value may use
 * the bytes of any value that died before the step that defines it (no
 * step reads and writes the same bytes: kernels take restrict pointers). */
static void
plan_arena(struct kt_cc_net *net)
{
    const struct kt_onnx_graph *g = net->g;
    int *def = kt_xmalloc((size_t)g->nvalues * sizeof(int));
    int *end = kt_xmalloc((size_t)g->nvalues * sizeof(int));
    int *order = kt_xmalloc((size_t)g->nvalues * sizeof(int));
    int v, s, r, n = 0, i;

    for (v = 0; v < g->nvalues; v++) {
        def[v] = g->values[v].is_input ? -1 : g->nvalues + net->nsteps;
        end[v] = g->values[v].is_output ? net->nsteps : -2;
        net->arena_off[v] = -1;
    }
    for (s = 0; s < net->nsteps; s++) {
        const struct kt_cc_step *st = &net->steps[s];
        int nout = st->kernel >= 0 ? -1 : st->nrefs - 1;
        for (r = 0; r < st->nrefs; r++) {
            if (st->refs[r].src != KT_CC_ACT)
                continue;
            v = (int)st->refs[r].at;
            if (r == nout ||
                (st->kernel >= 0 && v == g->kernels[st->kernel].output))
                def[v] = def[v] < s ? def[v] : s;
            if (end[v] < s)
                end[v] = s;
        }
    }
    for (s = -1; s < net->nsteps; s++)
        for (v = 0; v < g->nvalues; v++)
            if (def[v] == s) {
                end[v] = end[v] > s ? end[v] : s; /* written, never read */
                order[n++] = v;
            }
    for (i = 0; i < n; i++) {
        int64_t at = 0, size;
        int moved = 1;
        v = order[i];
        size = (kt_onnx_value_elems(&g->values[v]) * 4 + 63) / 64 * 64;
        net->act_bytes[v] = size;
        while (moved) {
            moved = 0;
            for (r = 0; r < i; r++) {
                int u = order[r];
                if (end[u] < def[v] || net->arena_off[u] >= at + size ||
                    net->arena_off[u] + net->act_bytes[u] <= at)
                    continue;
                at = net->arena_off[u] + net->act_bytes[u];
                moved = 1;
            }
        }
        net->arena_off[v] = at;
        if (at + size > net->arena_bytes)
            net->arena_bytes = at + size;
    }
    free(def);
    free(end);
    free(order);
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
    memset(net->w_of_value, 0xff, (size_t)net->g->nvalues * sizeof(int64_t));
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
    plan_arena(net);
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
    free(n->arena_off);
    free(n->act_bytes);
    free(n);
}
