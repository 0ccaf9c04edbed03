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

#define MAX_MEMBERS 16

struct part {
    struct kt__ox *x;
    struct kt_onnx_graph *g;
    int **cons;                /* consumers (node indices) of each value */
    int *ncons;
    int capkernels;
};

/* The group being built: values computed inside the kernel and the stage
 * that holds each one (-1 = the anchor's result Y). */
struct group {
    int nvals;
    int val[64], stage[64];
    int nodes[MAX_MEMBERS + 8];
    int nnodes;
};

/* Epilogue text under construction. */
struct epi {
    struct part *p;
    struct kt_onnx_kernel *k;
    struct group *gr;
    const struct kt_onnx_value *out;   /* ONNX shape of the anchor result */
    int drank;
    int64_t ddims[KT_MAX_DIMS];        /* the definition's output dims */
    char idx[64];                      /* "a0,a1,..." */
    struct kt_buf text;
    int nstages;
    int nextra;
    struct kt_shape extra[32];
    int extra_key[16];                 /* value, or -2 - value (explicit) */
    int fail;
};

static const char *const anchor_ops[] = {
    "Conv", "ConvTranspose", "Gemm", "MatMul", "MaxPool", "AveragePool",
    "GlobalAveragePool", "GlobalMaxPool", "Softmax", "ReduceMean",
    "LayerNormalization", NULL
};

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
group_stage(const struct group *gr, int v)
{
    int i;
    for (i = 0; i < gr->nvals; i++)
        if (gr->val[i] == v)
            return i;
    return -1;
}

static void
group_add_val(struct group *gr, int v, int stage)
{
    if (gr->nvals < 64) {
        gr->val[gr->nvals] = v;
        gr->stage[gr->nvals++] = stage;
    }
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

/* ---- Epilogue text ---------------------------------------------------------- */

/* Index text and DAG shape of an operand with ONNX dims pd (right-aligned
 * against the anchor's output), over the definition's output dims.  Dims
 * of the output that the definition splits (grouped conv) or merges
 * (batched matmul) map group by group; an operand must span a group fully
 * or not at all. */
static int
map_operand(struct epi *e, const int64_t *pd, int prank, char *idx,
            size_t len, struct kt_shape *sh)
{
    const int64_t *od = e->out->dims;
    int orank = e->out->ndim, i = 0, j = 0, k, o = 0;

    sh->ndim = 0;
    idx[0] = '\0';
    if (prank > orank)
        return -1;
    for (;;) {
        int i0, j0, full = 0, bc = 0;
        int64_t po, pdd;
        while (i < orank && od[i] == 1)
            i++;
        while (j < e->drank && e->ddims[j] == 1)
            j++;
        if (i == orank || j == e->drank)
            break;
        i0 = i;
        j0 = j;
        po = od[i++];
        pdd = e->ddims[j++];
        while (po != pdd) {
            if (po < pdd) {
                if (i == orank)
                    return -1;
                po *= od[i++];
            } else {
                if (j == e->drank)
                    return -1;
                pdd *= e->ddims[j++];
            }
        }
        for (k = i0; k < i; k++) {
            int pk = k - (orank - prank);
            int64_t v = pk >= 0 ? pd[pk] : 1;
            if (od[k] == 1)
                continue;
            if (v == od[k])
                full++;
            else if (v == 1)
                bc++;
            else
                return -1;
        }
        if (full && bc)
            return -1;
        for (k = j0; full && k < j; k++) {
            if (e->ddims[k] == 1)
                continue;
            o += snprintf(idx + o, len - (size_t)o, "%sa%d", o ? "," : "", k);
            sh->dims[sh->ndim++] = e->ddims[k];
        }
    }
    if (sh->ndim == 0) {
        snprintf(idx, len, "0");
        sh->dims[sh->ndim++] = 1;
    }
    return 0;
}

/* Text of operand value v (explicit ONNX dims when dims != NULL). */
static void
operand(struct epi *e, int v, const int64_t *dims, int rank, char *out,
        size_t len)
{
    const struct kt_onnx_value *val = &e->p->g->values[v];
    int s = group_stage(e->gr, v), i, key = dims ? -2 - v : v;
    struct kt_shape sh;
    char idx[96];

    if (s >= 0) {
        if (e->gr->stage[s] < 0)
            snprintf(out, len, "Y[%s]", e->idx);
        else
            snprintf(out, len, "E%d[%s]", e->gr->stage[s], e->idx);
        return;
    }
    if (dims == NULL && val->data != NULL && kt_onnx_value_elems(val) == 1) {
        snprintf(out, len, "(%.9g)", (float)kt_onnx_value_get(val, 0));
        return;
    }
    memset(&sh, 0, sizeof(sh));
    if (map_operand(e, dims ? dims : val->dims, dims ? rank : val->ndim, idx,
                    sizeof(idx), &sh) < 0 || e->nextra >= 16) {
        e->fail = 1;
        snprintf(out, len, "0");
        return;
    }
    for (i = 0; i < e->nextra && e->extra_key[i] != key; i++)
        ;
    if (i == e->nextra) {
        e->extra_key[i] = key;
        snprintf(e->extra[i].name, sizeof(e->extra[i].name), "P%d", i);
        e->extra[i].ndim = sh.ndim;
        memcpy(e->extra[i].dims, sh.dims, sizeof(sh.dims));
        e->k->extra_values[i] = v;
        e->nextra++;
    }
    snprintf(out, len, "P%d[%s]", i, idx);
}

/* Appends "E<n>[idx] = expr" and returns n. */
static int
stage(struct epi *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
stage(struct epi *e, const char *fmt, ...)
{
    va_list ap;

    e->nstages++;
    kt_buf_printf(&e->text, "%sE%d[%s] = ", e->nstages > 1 ? "\n" : "",
                  e->nstages, e->idx);
    va_start(ap, fmt);
    kt_buf_vprintf(&e->text, fmt, ap);
    va_end(ap);
    return e->nstages;
}

/* Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7): erfc(z) for z >= 0 is
 * t*(a1 + t*(a2 + t*(a3 + t*(a4 + t*a5)))) * exp(-z*z), t = 1/(1 + p*z);
 * the compute language has exp and abs but no erf. */
#define ERFC_POLY "(E%d[%s] * (0.254829592 + E%d[%s] * (-0.284496736 + " \
    "E%d[%s] * (1.421413741 + E%d[%s] * (-1.453152027 + E%d[%s] * " \
    "1.061405429)))))"

static int
erfc_poly_stage(struct epi *e, const char *a, double zscale)
{
    int t = stage(e, "1 / (1 + %.9g * abs(%s))", 0.3275911 * zscale, a);
    const char *i = e->idx;
    return stage(e, ERFC_POLY " * exp(-(%s * %s) * %.9g)", t, i, t, i, t, i,
                 t, i, t, i, a, a, zscale * zscale);
}

static double
attr_or_input(struct part *p, const struct kt_onnx_node *n, const char *name,
              int input, double def)
{
    const struct kt_onnx_value *v = vin(p, n, input);
    if (p->g->opset < 11 || v == NULL)
        return kt_onnx_attr_float(n, name, def);
    return v->data != NULL ? kt_onnx_value_get(v, 0) : def;
}

/* One elementwise node as stage(s); returns the stage of its result. */
static int
node_stages(struct epi *e, const struct kt_onnx_node *n)
{
    char a[160] = "", b[160] = "", buf[16];
    const char *op = n->op;
    int64_t ch[KT_ONNX_MAX_DIMS];
    int r = e->out->ndim, k;

    operand(e, n->in[0], NULL, 0, a, sizeof(a));
    if (strcmp(op, "BatchNormalization") == 0) {
        /* Scale and shift per channel (dim 1), folded by the compiler. */
        char c[160];
        for (k = 0; k < r; k++)
            ch[k] = k == 1 ? e->out->dims[1] : 1;
        operand(e, n->in[1], ch, r, b, sizeof(b));
        operand(e, n->in[2], ch, r, c, sizeof(c));
        return stage(e, "%s * %s + %s", a, b, c);
    }
    if (n->nin > 1 && n->in[1] >= 0 && strcmp(op, "Clip") != 0)
        operand(e, n->in[1], NULL, 0, b, sizeof(b));
    if (strcmp(op, "Add") == 0) return stage(e, "%s + %s", a, b);
    if (strcmp(op, "Sub") == 0) return stage(e, "%s - %s", a, b);
    if (strcmp(op, "Mul") == 0) return stage(e, "%s * %s", a, b);
    if (strcmp(op, "Div") == 0) return stage(e, "%s / %s", a, b);
    if (strcmp(op, "Pow") == 0) {
        const struct kt_onnx_value *ev = vin(e->p, n, 1);
        double p = ev->data != NULL && kt_onnx_value_elems(ev) == 1 ?
                   kt_onnx_value_get(ev, 0) : NAN;
        if (p == 1) return stage(e, "%s", a);
        if (p == 2) return stage(e, "%s * %s", a, a);
        if (p == 3) return stage(e, "%s * %s * %s", a, a, a);
        if (p == 0.5) return stage(e, "sqrt(%s)", a);
        return stage(e, "exp(log(%s) * %s)", a, b);
    }
    if (strcmp(op, "Relu") == 0) return stage(e, "max(%s, 0)", a);
    if (strcmp(op, "Sigmoid") == 0) return stage(e, "sigmoid(%s)", a);
    if (strcmp(op, "Tanh") == 0) return stage(e, "tanh(%s)", a);
    if (strcmp(op, "Sqrt") == 0) return stage(e, "sqrt(%s)", a);
    if (strcmp(op, "Exp") == 0) return stage(e, "exp(%s)", a);
    if (strcmp(op, "Log") == 0) return stage(e, "log(%s)", a);
    if (strcmp(op, "Abs") == 0) return stage(e, "abs(%s)", a);
    if (strcmp(op, "Neg") == 0) return stage(e, "-%s", a);
    if (strcmp(op, "Reciprocal") == 0) return stage(e, "1 / %s", a);
    if (strcmp(op, "HardSigmoid") == 0)
        return stage(e, "max(min(%s * %.9g + %.9g, 1), 0)", a,
                     (float)kt_onnx_attr_float(n, "alpha", 0.2),
                     (float)kt_onnx_attr_float(n, "beta", 0.5));
    if (strcmp(op, "HardSwish") == 0)
        return stage(e, "%s * max(min(%s * %.9g + 0.5, 1), 0)", a, a,
                     (float)(1.0 / 6));
    if (strcmp(op, "Clip") == 0) {
        double lo = attr_or_input(e->p, n, "min", 1, -INFINITY);
        double hi = attr_or_input(e->p, n, "max", 2, INFINITY);
        if (lo > -3e38 && hi < 3e38)
            return stage(e, "min(max(%s, %.9g), %.9g)", a, (float)lo,
                         (float)hi);
        if (lo > -3e38)
            return stage(e, "max(%s, %.9g)", a, (float)lo);
        if (hi < 3e38)
            return stage(e, "min(%s, %.9g)", a, (float)hi);
        return stage(e, "%s", a);
    }
    if (strcmp(op, "Erf") == 0) {
        /* erf(x) = sign(x) * (1 - erfc(|x|)) */
        int t = erfc_poly_stage(e, a, 1.0);
        return stage(e, "(1 - E%d[%s]) * %s / max(abs(%s), 1e-30)", t, e->idx,
                     a, a);
    }
    if (strcmp(op, "Gelu") == 0 &&
        strcmp(kt_onnx_attr_str(n, "approximate", "none", buf, sizeof(buf)),
               "tanh") == 0)
        return stage(e, "0.5 * %s * (1 + tanh(0.797884561 * (%s + 0.044715 * "
                     "%s * %s * %s)))", a, a, a, a, a);
    if (strcmp(op, "Gelu") == 0) {
        /* x * Phi(x) = relu(x) - |x| * erfc(|x| / sqrt 2) / 2 */
        int t = erfc_poly_stage(e, a, M_SQRT1_2);
        return stage(e, "max(%s, 0) - abs(%s) * E%d[%s] * 0.5", a, a, t,
                     e->idx);
    }
    e->fail = 1;
    return 0;
}

/* ---- Building one kernel ------------------------------------------------------ */

static int
has_bias(struct part *p, const struct kt_onnx_kernel *k)
{
    const struct kt_onnx_node *a = &p->g->nodes[k->anchor];
    return k->bn_folded || vin(p, a, 2) != NULL;
}

/* The stand-in value of the anchor's bias (conv bias, else the folded
 * batch norm's shift). */
static int
bias_value(struct part *p, const struct kt_onnx_kernel *k)
{
    const struct kt_onnx_node *a = &p->g->nodes[k->anchor];
    if (vin(p, a, 2) != NULL)
        return a->in[2];
    return p->g->nodes[k->nodes[1]].in[2];
}

/* Operations of the anchor node itself that go into the epilogue. */
static void
anchor_stages(struct epi *e, int bits)
{
    struct part *p = e->p;
    const struct kt_onnx_node *a = &p->g->nodes[e->k->anchor];
    char y[96], o[160];
    int64_t ch[KT_ONNX_MAX_DIMS];
    int r = e->out->ndim, i, s = -1;

    snprintf(y, sizeof(y), "Y[%s]", e->idx);
    if (is_op(a, "ConvTranspose") && has_bias(p, e->k)) {
        for (i = 0; i < r; i++)
            ch[i] = i == 1 ? e->out->dims[1] : 1;
        operand(e, bias_value(p, e->k), ch, r, o, sizeof(o));
        s = stage(e, "%s + %s", y, o);
    }
    if (is_op(a, "Gemm")) {
        double alpha = kt_onnx_attr_float(a, "alpha", 1);
        if (alpha != 1)
            s = stage(e, "%s * %.9g", y, (float)alpha);
        if (has_bias(p, e->k) && !(bits & KT_EPI_BIAS)) {
            for (i = 0; i < r; i++)
                ch[i] = i == 1 ? e->out->dims[1] : 1;
            if (vin(p, a, 2) != NULL)
                operand(e, a->in[2], NULL, 0, o, sizeof(o));
            else
                operand(e, bias_value(p, e->k), ch, r, o, sizeof(o));
            if (s > 0)
                snprintf(y, sizeof(y), "E%d[%s]", s, e->idx);
            s = stage(e, "%s + %s", y, o);
        }
    }
    if (is_op(a, "LayerNormalization")) {
        if (vin(p, a, 1) != NULL) {
            operand(e, a->in[1], NULL, 0, o, sizeof(o));
            s = stage(e, "%s * %s", y, o);
        }
        if (vin(p, a, 2) != NULL) {
            operand(e, a->in[2], NULL, 0, o, sizeof(o));
            if (s > 0)
                snprintf(y, sizeof(y), "E%d[%s]", s, e->idx);
            s = stage(e, "%s + %s", y, o);
        }
    }
    if (s > 0)
        for (i = 0; i < e->gr->nvals; i++)
            if (e->gr->stage[i] < 0)
                e->gr->stage[i] = s;
}

/* Epilogue bits the conv2d / dense builders take themselves (their keys
 * then equal those of the same layers in a JSON model). */
static int
builder_bits(struct part *p, const struct kt_onnx_kernel *k,
             const int *members, int n, int *skip)
{
    const struct kt_onnx_node *a = &p->g->nodes[k->anchor];
    int bits = 0, dense = is_op(a, "Gemm") &&
                          kt_onnx_attr_int(a, "transB", 0) &&
                          kt_onnx_attr_float(a, "alpha", 1) == 1;

    *skip = 0;
    if (is_op(a, "Conv") && has_bias(p, k))
        bits = KT_EPI_BIAS;
    if (dense && has_bias(p, k) && kt_onnx_attr_float(a, "beta", 1) == 1 &&
        (vin(p, a, 2) == NULL ||
         kt_onnx_value_elems(vin(p, a, 2)) == p->g->values[a->out[0]].dims[1]))
        bits = KT_EPI_BIAS;
    if ((is_op(a, "Conv") || dense) && n > 0 &&
        is_op(&p->g->nodes[members[0]], "Relu")) {
        bits |= KT_EPI_RELU;
        *skip = 1;
    }
    return bits;
}

static int
output_dims(struct epi *e, struct kt_onnx_kernel *k, char *err, size_t len)
{
    struct kt_dag *dag = NULL;
    int t, i, rc;

    if (k->kind == KT_ONNX_K_ELEMENTWISE) {
        e->drank = e->out->ndim > 0 ? e->out->ndim : 1;
        for (i = 0; i < e->drank; i++)
            e->ddims[i] = e->out->ndim > 0 ? e->out->dims[i] : 1;
        return 0;
    }
    if ((rc = kt_op_build(&k->def, &dag, err, len)) < 0)
        return rc;
    t = kt_dag_find_tensor(dag, "O");
    e->drank = dag->tensors[t].ndim;
    memcpy(e->ddims, dag->tensors[t].shape, sizeof(e->ddims));
    kt_dag_free(dag);
    return 0;
}

/* Builds k's definition with the first n members fused; 0 on success. */
static int
gen_kernel(struct part *p, struct kt_onnx_kernel *k, struct group *base,
           const int *members, int n, char *err, size_t len)
{
    struct group gr = *base;
    struct epi e;
    struct kt_dag *dag = NULL;
    int i, skip, bits, rc, last = -1;

    bits = builder_bits(p, k, members, n, &skip);
    rc = kt__ox_anchor_def(p->x, k, bits);
    if (rc < 0) {
        snprintf(err, len, "%.400s", k->def.text);
        return rc;
    }
    memset(&e, 0, sizeof(e));
    e.p = p;
    e.k = k;
    e.gr = &gr;
    e.out = &p->g->values[k->output];
    kt_buf_init(&e.text);
    if ((rc = output_dims(&e, k, err, len)) < 0)
        goto out;
    for (i = 0; i < e.drank; i++)
        snprintf(e.idx + strlen(e.idx), sizeof(e.idx) - strlen(e.idx),
                 "%sa%d", i ? "," : "", i);
    if (k->kind != KT_ONNX_K_ELEMENTWISE)
        anchor_stages(&e, bits);
    for (i = 0; i < n; i++) {
        const struct kt_onnx_node *m = &p->g->nodes[members[i]];
        if ((i == 0 && skip) || is_op(m, "Identity") || is_op(m, "Dropout")) {
            int s = group_stage(&gr, m->in[0]);
            group_add_val(&gr, m->out[0], s >= 0 ? gr.stage[s] : -1);
            continue;
        }
        group_add_val(&gr, m->out[0], node_stages(&e, m));
    }
    last = gr.stage[group_stage(&gr, p->g->nodes[n ? members[n - 1] :
                                k->nodes[k->nnodes - 1]].out[0])];
    if (e.fail) {
        rc = kt_seterr(err, len, KT_EINVAL, "an operand does not map onto "
                       "the kernel's output");
        goto out;
    }
    if (e.nstages > 0) {
        /* The last stage is the output O; every stage gets its shape. */
        char lhs[16];
        char *at;
        snprintf(lhs, sizeof(lhs), "E%d[", last);
        at = strstr(e.text.p, lhs);
        if (at == NULL || last != e.nstages) {
            rc = kt_seterr(err, len, KT_EINVAL, "the kernel's result is not "
                           "its last stage");
            goto out;
        }
        memmove(at + 1, at + strlen(lhs) - 1, strlen(at + strlen(lhs) - 1) +
                1);
        at[0] = 'O';
        for (i = 1; i <= e.nstages && e.nextra + 1 < 32; i++) {
            struct kt_shape *s = &e.extra[e.nextra++];
            snprintf(s->name, sizeof(s->name), i == e.nstages ? "O" : "E%d",
                     i);
            s->ndim = e.drank;
            memcpy(s->dims, e.ddims, sizeof(s->dims));
        }
        if (k->kind == KT_ONNX_K_ELEMENTWISE) {
            snprintf(k->def.text, sizeof(k->def.text), "%s", e.text.p);
            for (i = 0; i < e.nextra; i++)
                k->def.shapes[k->def.nshapes++] = e.extra[i];
        } else if (kt_op_epilogue(&k->def, e.text.p, e.extra, e.nextra) < 0) {
            rc = kt_seterr(err, len, KT_ETOOBIG, "epilogue too long");
            goto out;
        }
    }
    for (i = 0; i < e.nextra; i++)
        if (e.extra[i].name[0] == 'P')
            k->nextra = i + 1;
    rc = kt_op_build(&k->def, &dag, err, len);
    if (rc == 0) {
        k->flops = dag->flops;
        kt_dag_free(dag);
    }
out:
    kt_buf_free(&e.text);
    return rc;
}

/* Whether the first n members leave only the last value visible. */
static int
prefix_valid(struct part *p, const struct kt_onnx_kernel *k, const int *m,
             int n)
{
    int all[MAX_MEMBERS + 8], na = 0, i, j, c, fin;

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
grow(struct part *p, struct kt_onnx_kernel *k, struct group *gr, int first,
     int *m, int n, int *valid)
{
    const struct kt_onnx_value *out = &p->g->values[k->output];
    int j, i, reads, ok, horizon = first;

    for (i = 0; i < gr->nvals; i++)
        for (j = 0; j < p->ncons[gr->val[i]]; j++)
            if (p->cons[gr->val[i]][j] > horizon)
                horizon = p->cons[gr->val[i]][j];
    valid[n] = prefix_valid(p, k, m, n);
    for (j = first + 1; j <= horizon && j < p->g->nnodes && n < MAX_MEMBERS;
         j++) {
        const struct kt_onnx_node *nd = &p->g->nodes[j];
        if (!free_node(p, j) || in_nodes(k->nodes, k->nnodes, j) ||
            !kt__ox_is_elementwise(nd->op) ||
            nd->nout < 1 || nd->out[0] < 0 ||
            !same_shape(&p->g->values[nd->out[0]], out))
            continue;
        reads = 0;
        ok = 1;
        for (i = 0; i < nd->nin; i++) {
            int v = nd->in[i];
            if (v < 0)
                continue;
            if (group_stage(gr, v) >= 0)
                reads = 1;
        }
        if (!reads || !ok)
            continue;
        m[n++] = j;
        group_add_val(gr, nd->out[0], 0);
        for (i = 0; i < p->ncons[nd->out[0]]; i++)
            if (p->cons[nd->out[0]][i] > horizon)
                horizon = p->cons[nd->out[0]][i];
        valid[n] = prefix_valid(p, k, m, n);
    }
    return n;
}

/* The LayerNorm pattern at ReduceMean node i: mean, x - mean, squared,
 * mean again, + eps, sqrt, divide.  Fills nodes[7] and returns 1. */
static int
match_layer_norm(struct part *p, int i, int *nodes)
{
    const struct kt_onnx_graph *g = p->g;
    const struct kt_onnx_node *r1 = &g->nodes[i], *nd;
    int x = r1->in[0], d, k, sq = -1, dv = -1, c;

    if (p->ncons[r1->out[0]] != 1)
        return 0;
    nodes[0] = i;
    nodes[1] = p->cons[r1->out[0]][0];
    nd = &g->nodes[nodes[1]];
    if (!is_op(nd, "Sub") || nd->in[0] != x || nd->in[1] != r1->out[0])
        return 0;
    d = nd->out[0];
    if (p->ncons[d] != 2)
        return 0;
    for (k = 0; k < 2; k++) {
        c = p->cons[d][k];
        nd = &g->nodes[c];
        if ((is_op(nd, "Pow") && nd->in[0] == d && vin(p, nd, 1)->data &&
             kt_onnx_value_get(vin(p, nd, 1), 0) == 2) ||
            (is_op(nd, "Mul") && nd->in[0] == d && nd->in[1] == d))
            sq = c;
        else if (is_op(nd, "Div") && nd->in[0] == d)
            dv = c;
    }
    if (sq < 0 || dv < 0 || p->ncons[g->nodes[sq].out[0]] != 1)
        return 0;
    nodes[2] = sq;
    nodes[3] = p->cons[g->nodes[sq].out[0]][0];
    nd = &g->nodes[nodes[3]];
    if (!is_op(nd, "ReduceMean") ||
        kt__ox_reduce_axes(p->x, nd) != kt__ox_reduce_axes(p->x, r1) ||
        p->ncons[nd->out[0]] != 1)
        return 0;
    nodes[4] = p->cons[nd->out[0]][0];
    nd = &g->nodes[nodes[4]];
    if (!is_op(nd, "Add") || p->ncons[nd->out[0]] != 1 ||
        (vin(p, nd, 1)->data == NULL && vin(p, nd, 0)->data == NULL))
        return 0;
    nodes[5] = p->cons[nd->out[0]][0];
    nd = &g->nodes[nodes[5]];
    if (!is_op(nd, "Sqrt") || p->ncons[nd->out[0]] != 1 ||
        p->cons[nd->out[0]][0] != dv || g->nodes[dv].in[1] != nd->out[0])
        return 0;
    nodes[6] = dv;
    for (k = 0; k < 7; k++)
        if (!free_node(p, nodes[k]) || (k > 0 && nodes[k] < nodes[k - 1]))
            return 0;
    /* The reduced axes must be the trailing ones (rows x cols). */
    c = kt__ox_reduce_axes(p->x, r1);
    return c > 0 && ((c + (c & -c)) == 1 << g->values[x].ndim);
}

static struct kt_onnx_kernel *
new_kernel(struct part *p, int kind, int anchor)
{
    struct kt_onnx_graph *g = p->g;
    struct kt_onnx_kernel *k;

    if (g->nkernels == p->capkernels) {
        p->capkernels = p->capkernels ? 2 * p->capkernels : 32;
        g->kernels = kt_xrealloc(g->kernels, (size_t)p->capkernels *
                                 sizeof(*g->kernels));
    }
    k = &g->kernels[g->nkernels];
    memset(k, 0, sizeof(*k));
    k->kind = kind;
    k->anchor = anchor;
    k->nodes = kt_xcalloc(MAX_MEMBERS + 16, sizeof(int));
    k->nodes[k->nnodes++] = anchor;
    k->output = g->nodes[anchor].out[0];
    return k;
}

/* Folds a batch norm that is the only consumer of a Conv/ConvTranspose/
 * Gemm into it. */
static void
fold_batch_norm(struct part *p, struct kt_onnx_kernel *k, struct group *gr)
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
    group_add_val(gr, k->output, -1);
}

/* Builds the kernel at node i (kind, pattern nodes), grows the epilogue
 * and takes the longest fusion whose definition builds. */
static int
make_kernel(struct part *p, int i, int kind, const int *pattern, int npat)
{
    struct kt_onnx_kernel *k = new_kernel(p, kind, i);
    struct group gr, base;
    int m[MAX_MEMBERS], valid[MAX_MEMBERS + 1], n = 0, len, j, rc = -1;
    char err[512] = "";

    memset(&gr, 0, sizeof(gr));
    memset(valid, 0, sizeof(valid));
    for (j = 1; j < npat; j++)
        k->nodes[k->nnodes++] = pattern[j];
    k->output = p->g->nodes[k->nodes[k->nnodes - 1]].out[0];
    if (kind == KT_ONNX_K_ELEMENTWISE) {
        k->nnodes = 0;  /* the start node is the first member */
        m[n++] = i;
        base = gr;
        group_add_val(&gr, k->output, 0);
    } else {
        group_add_val(&gr, k->output, -1);
        if (kind == KT_ONNX_K_OP)
            fold_batch_norm(p, k, &gr);
        base = gr;
    }
    n = grow(p, k, &gr, pattern != NULL ? pattern[npat - 1] : i, m, n,
             valid);
    for (len = n; len >= 0; len--) {
        if (!valid[len] || (kind == KT_ONNX_K_ELEMENTWISE && len == 0))
            continue;
        rc = gen_kernel(p, k, &base, m, len, err, sizeof(err));
        if (rc == 0)
            break;
    }
    if (rc != 0) {
        struct kt_onnx_node *a = &p->g->nodes[i];
        free(k->nodes);
        if (kind == KT_ONNX_K_ELEMENTWISE)
            return 0;   /* stays untuned */
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
            p->cons[v] = kt_xrealloc(p->cons[v], (size_t)(p->ncons[v] + 1) *
                                     sizeof(int));
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
            snprintf(k->tag, sizeof(k->tag), "conv2d_%lldx%lld_s%lld_%s_e%d_%d",
                     (long long)w->dims[2], (long long)w->dims[3],
                     (long long)s[0], grp == 1 ? "g1" :
                     grp == g->values[a->in[0]].dims[1] ? "dw" : "g",
                     k->nnodes - 1, bucket);
        } else {
            snprintf(k->tag, sizeof(k->tag), "%.30s_e%d_%d",
                     k->kind == KT_ONNX_K_LAYER_NORM ? "layer_norm" :
                     k->kind == KT_ONNX_K_ELEMENTWISE ? "elementwise" : a->op,
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
        if (free_node(&p, i) && (is_op(&g->nodes[i], "Erf") ||
                                 is_op(&g->nodes[i], "Gelu")))
            rc = make_kernel(&p, gelu_start(&p, i), KT_ONNX_K_ELEMENTWISE,
                             NULL, 0);
    finish_kernels(&p);
    for (i = 0; i < g->nvalues; i++)
        free(p.cons[i]);
    free(p.cons);
    free(p.ncons);
    return rc < 0 ? rc : kt__ox_check_unsupported(x);
}
