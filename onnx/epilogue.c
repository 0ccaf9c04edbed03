/* epilogue.c - the text of a kernel's fused epilogue: each elementwise
 * node becomes one stage over the anchor's output axes (the search inlines
 * them); operands are constants, the values of earlier stages, or extra
 * inputs P0, P1, ... mapped onto the definition's output dims.  A scalar
 * constant that an Add, Sub or Mul applies (a learned scale or shift) is
 * an extra input of one element too, so that layers which differ only in
 * such numbers are one workload, tuned once (docs/onnx.md). */
#include "onnx/int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct epi {
    struct kt__ox *p;
    struct kt_onnx_kernel *k;
    struct kt__ox_group *gr;
    const struct kt_onnx_value *out; /* ONNX shape of the anchor result */
    int drank;
    int64_t ddims[KT_MAX_DIMS]; /* the definition's output dims */
    char idx[64];               /* "a0,a1,..." */
    struct kt_buf text;
    int nstages;
    int nextra;
    struct kt_shape extra[32];
    int extra_key[16]; /* value, or -2 - value (explicit) */
    int scalar_params; /* Add/Sub/Mul scalars become P inputs */
    int fail;
};

static int
is_op(const struct kt_onnx_node *n, const char *op)
{
    return strcmp(n->op, op) == 0;
}

static struct kt_onnx_value *
vin(struct kt__ox *p, const struct kt_onnx_node *n, int i)
{
    return i < n->nin && n->in[i] >= 0 ? &p->g->values[n->in[i]] : NULL;
}

int
kt__ox_group_stage(const struct kt__ox_group *gr, int v)
{
    int i;
    for (i = 0; i < gr->nvals; i++)
        if (gr->val[i] == v)
            return i;
    return -1;
}

void
kt__ox_group_add(struct kt__ox_group *gr, int v, int stage)
{
    if (gr->nvals < 64) {
        gr->val[gr->nvals] = v;
        gr->stage[gr->nvals++] = stage;
    }
}

/* ---- Epilogue text ---------------------------------------------------------- */

/* Index text and DAG shape of an operand with ONNX dims pd (right-aligned
 * against the anchor's output), over the definition's output dims.  Dims
 * of the output that the definition splits (grouped conv) or merges
 * (batched matmul) map group by group; an operand must span a group fully
 * or not at all. */
static int
map_operand(struct epi *e, const int64_t *pd, int prank, char *idx, size_t len,
            struct kt_shape *sh)
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

/* Text of operand value v (explicit ONNX dims when dims != NULL); a
 * scalar constant is written as a number unless as_param. */
static void
operand(struct epi *e, int v, const int64_t *dims, int rank, int as_param,
        char *out, size_t len)
{
    const struct kt_onnx_value *val = &e->p->g->values[v];
    int s = kt__ox_group_stage(e->gr, v), i, key = dims ? -2 - v : v;
    struct kt_shape sh;
    char idx[96];

    if (s >= 0) {
        if (e->gr->stage[s] < 0)
            snprintf(out, len, "Y[%s]", e->idx);
        else
            snprintf(out, len, "E%d[%s]", e->gr->stage[s], e->idx);
        return;
    }
    if (dims == NULL && val->data != NULL && kt_onnx_value_elems(val) == 1 &&
        !(as_param && e->scalar_params)) {
        snprintf(out, len, "(%.9g)", (float)kt_onnx_value_get(val, 0));
        return;
    }
    memset(&sh, 0, sizeof(sh));
    if (map_operand(e, dims ? dims : val->dims, dims ? rank : val->ndim, idx,
                    sizeof(idx), &sh) < 0 ||
        e->nextra >= 16) {
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
static int stage(struct epi *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

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
#define ERFC_POLY                                                              \
    "(E%d[%s] * (0.254829592 + E%d[%s] * (-0.284496736 + "                     \
    "E%d[%s] * (1.421413741 + E%d[%s] * (-1.453152027 + E%d[%s] * "            \
    "1.061405429)))))"

static int
erfc_poly_stage(struct epi *e, const char *a, double zscale)
{
    int t = stage(e, "1 / (1 + %.9g * abs(%s))", 0.3275911 * zscale, a);
    const char *i = e->idx;
    return stage(e, ERFC_POLY " * exp(-(%s * %s) * %.9g)", t, i, t, i, t, i, t,
                 i, t, i, a, a, zscale * zscale);
}

static double
attr_or_input(struct kt__ox *p, const struct kt_onnx_node *n, const char *name,
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
    int affine = is_op(n, "Add") || is_op(n, "Sub") || is_op(n, "Mul");

    operand(e, n->in[0], NULL, 0, affine, a, sizeof(a));
    if (strcmp(op, "BatchNormalization") == 0) {
        /* Scale and shift per channel (dim 1), folded by the compiler. */
        char c[160];
        for (k = 0; k < r; k++)
            ch[k] = k == 1 ? e->out->dims[1] : 1;
        operand(e, n->in[1], ch, r, 0, b, sizeof(b));
        operand(e, n->in[2], ch, r, 0, c, sizeof(c));
        return stage(e, "%s * %s + %s", a, b, c);
    }
    if (n->nin > 1 && n->in[1] >= 0 && strcmp(op, "Clip") != 0)
        operand(e, n->in[1], NULL, 0, affine, b, sizeof(b));
    if (strcmp(op, "Add") == 0)
        return stage(e, "%s + %s", a, b);
    if (strcmp(op, "Sub") == 0)
        return stage(e, "%s - %s", a, b);
    if (strcmp(op, "Mul") == 0)
        return stage(e, "%s * %s", a, b);
    if (strcmp(op, "Div") == 0)
        return stage(e, "%s / %s", a, b);
    if (strcmp(op, "Pow") == 0) {
        const struct kt_onnx_value *ev = vin(e->p, n, 1);
        double p = ev->data != NULL && kt_onnx_value_elems(ev) == 1
                       ? kt_onnx_value_get(ev, 0)
                       : NAN;
        if (p == 1)
            return stage(e, "%s", a);
        if (p == 2)
            return stage(e, "%s * %s", a, a);
        if (p == 3)
            return stage(e, "%s * %s * %s", a, a, a);
        if (p == 0.5)
            return stage(e, "sqrt(%s)", a);
        return stage(e, "exp(log(%s) * %s)", a, b);
    }
    if (strcmp(op, "Relu") == 0)
        return stage(e, "max(%s, 0)", a);
    if (strcmp(op, "Sigmoid") == 0)
        return stage(e, "sigmoid(%s)", a);
    if (strcmp(op, "Tanh") == 0)
        return stage(e, "tanh(%s)", a);
    if (strcmp(op, "Sqrt") == 0)
        return stage(e, "sqrt(%s)", a);
    if (strcmp(op, "Exp") == 0)
        return stage(e, "exp(%s)", a);
    if (strcmp(op, "Log") == 0)
        return stage(e, "log(%s)", a);
    if (strcmp(op, "Abs") == 0)
        return stage(e, "abs(%s)", a);
    if (strcmp(op, "Neg") == 0)
        return stage(e, "-%s", a);
    if (strcmp(op, "Reciprocal") == 0)
        return stage(e, "1 / %s", a);
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
        return stage(e,
                     "0.5 * %s * (1 + tanh(0.797884561 * (%s + 0.044715 * "
                     "%s * %s * %s)))",
                     a, a, a, a, a);
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
has_bias(struct kt__ox *p, const struct kt_onnx_kernel *k)
{
    const struct kt_onnx_node *a = &p->g->nodes[k->anchor];
    return k->bn_folded || vin(p, a, 2) != NULL;
}

/* The stand-in value of the anchor's bias (conv bias, else the folded
 * batch norm's shift). */
static int
bias_value(struct kt__ox *p, const struct kt_onnx_kernel *k)
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
    struct kt__ox *p = e->p;
    const struct kt_onnx_node *a = &p->g->nodes[e->k->anchor];
    char y[96], o[160];
    int64_t ch[KT_ONNX_MAX_DIMS];
    int r = e->out->ndim, i, s = -1;

    snprintf(y, sizeof(y), "Y[%s]", e->idx);
    if (is_op(a, "ConvTranspose") && has_bias(p, e->k)) {
        for (i = 0; i < r; i++)
            ch[i] = i == 1 ? e->out->dims[1] : 1;
        operand(e, bias_value(p, e->k), ch, r, 0, o, sizeof(o));
        s = stage(e, "%s + %s", y, o);
    }
    if (is_op(a, "Gemm")) {
        double alpha = kt_onnx_attr_float(a, "alpha", 1);
        double beta = kt_onnx_attr_float(a, "beta", 1);
        if (alpha != 1)
            s = stage(e, "%s * %.9g", y, (float)alpha);
        if (has_bias(p, e->k) && !(bits & KT_EPI_BIAS)) {
            for (i = 0; i < r; i++)
                ch[i] = i == 1 ? e->out->dims[1] : 1;
            if (vin(p, a, 2) != NULL)
                operand(e, a->in[2], NULL, 0, 0, o, sizeof(o));
            else
                operand(e, bias_value(p, e->k), ch, r, 0, o, sizeof(o));
            if (s > 0)
                snprintf(y, sizeof(y), "E%d[%s]", s, e->idx);
            if (beta != 1 && !e->k->bn_folded)
                s = stage(e, "%s + %s * %.9g", y, o, (float)beta);
            else
                s = stage(e, "%s + %s", y, o);
        }
    }
    if (is_op(a, "LayerNormalization")) {
        if (vin(p, a, 1) != NULL) {
            operand(e, a->in[1], NULL, 0, 0, o, sizeof(o));
            s = stage(e, "%s * %s", y, o);
        }
        if (vin(p, a, 2) != NULL) {
            operand(e, a->in[2], NULL, 0, 0, o, sizeof(o));
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
builder_bits(struct kt__ox *p, const struct kt_onnx_kernel *k,
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

static int
gen_kernel(struct kt__ox *p, struct kt_onnx_kernel *k,
           struct kt__ox_group *base, const int *members, int n, int grid,
           int scalar_params, int *unmapped, char *err, size_t len)
{
    struct kt__ox_group gr = *base;
    struct epi e;
    struct kt_dag *dag = NULL;
    int i, skip, bits, rc, last = -1;

    bits = builder_bits(p, k, members, n, &skip);
    rc = kt__ox_anchor_def(p, k, bits, grid);
    if (rc < 0) {
        snprintf(err, len, "%.400s", k->def.text);
        return rc;
    }
    memset(&e, 0, sizeof(e));
    e.p = p;
    e.k = k;
    e.scalar_params = scalar_params;
    e.gr = &gr;
    e.out = &p->g->values[k->output];
    kt_buf_init(&e.text);
    if ((rc = output_dims(&e, k, err, len)) < 0)
        goto out;
    for (i = 0; i < e.drank; i++)
        snprintf(e.idx + strlen(e.idx), sizeof(e.idx) - strlen(e.idx), "%sa%d",
                 i ? "," : "", i);
    if (k->kind != KT_ONNX_K_ELEMENTWISE)
        anchor_stages(&e, bits);
    for (i = 0; i < n; i++) {
        const struct kt_onnx_node *m = &p->g->nodes[members[i]];
        if ((i == 0 && skip) || is_op(m, "Identity") || is_op(m, "Dropout")) {
            int s = kt__ox_group_stage(&gr, m->in[0]);
            kt__ox_group_add(&gr, m->out[0], s >= 0 ? gr.stage[s] : -1);
            continue;
        }
        kt__ox_group_add(&gr, m->out[0], node_stages(&e, m));
    }
    last = gr.stage[kt__ox_group_stage(&gr,
                                       p->g->nodes[n ? members[n - 1]
                                                     : k->nodes[k->nnodes - 1]]
                                           .out[0])];
    if (e.fail) {
        *unmapped = 1;
        rc = kt_seterr(err, len, KT_EINVAL,
                       "an operand does not map onto "
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
            rc = kt_seterr(err, len, KT_EINVAL,
                           "the kernel's result is not "
                           "its last stage");
            goto out;
        }
        memmove(at + 1, at + strlen(lhs) - 1, strlen(at + strlen(lhs) - 1) + 1);
        at[0] = 'O';
        for (i = 1; i <= e.nstages && e.nextra + 1 < 32; i++) {
            struct kt_shape *s = &e.extra[e.nextra++];
            snprintf(s->name, sizeof(s->name), i == e.nstages ? "O" : "E%d", i);
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

/* Whether the scalars of the members' Add, Sub and Mul nodes may be
 * inputs: the tuner fills inputs with random numbers in [-1, 1], and a
 * random shift before a square root or a logarithm (a layer norm's
 * epsilon) would make every candidate's output NaN; such kernels keep
 * their numbers. */
static int
scalars_may_vary(struct kt__ox *p, const int *members, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        const struct kt_onnx_node *m = &p->g->nodes[members[i]];
        const struct kt_onnx_value *d = vin(p, m, 1);
        if (is_op(m, "Sqrt") || is_op(m, "Log") || is_op(m, "Pow") ||
            is_op(m, "Reciprocal"))
            return 0;
        if (is_op(m, "Div") &&
            (d == NULL || d->data == NULL || kt_onnx_value_elems(d) != 1))
            return 0;
    }
    return 1;
}

/* Builds k's definition with the first n members fused; 0 on success.  An
 * operand that varies along the image's y or x but not both does not map
 * onto a pointwise convolution's one pixel axis: that kernel is then
 * defined over y and x.  When the scalars as inputs leave too many inputs
 * or tensors, they are written as numbers. */
int
kt__ox_gen_kernel(struct kt__ox *p, struct kt_onnx_kernel *k,
                  struct kt__ox_group *base, const int *members, int n,
                  char *err, size_t len)
{
    int params = scalars_may_vary(p, members, n), unmapped, rc;

    for (;;) {
        unmapped = 0;
        rc = gen_kernel(p, k, base, members, n, 0, params, &unmapped, err, len);
        if (rc != 0 && unmapped && k->kind != KT_ONNX_K_ELEMENTWISE &&
            strcmp(p->g->nodes[k->anchor].op, "Conv") == 0)
            rc = gen_kernel(p, k, base, members, n, 1, params, &unmapped, err,
                            len);
        if (rc == 0 || !params)
            return rc;
        params = 0;
    }
}
