/* net_expr.c - the elementwise steps of a compiled network: a chain of
 * untuned elementwise nodes (Add, Mul, ..., Sigmoid, ..., a batch norm, a
 * nearest Resize by whole factors) whose inner values feed only the next
 * node of the chain runs as one loop over the output, each operand read
 * once through its broadcast strides or its nearest-neighbour index, with
 * the shapes in the code so that the compiler vectorizes it; large ones
 * are split among the run's threads (docs/compile.md, "Elementwise
 * steps"). */
#include "compile/compile_int.h"

#include <string.h>

#include "onnx/onnx.h"

/* Steps of at least this many output elements run on all the run's
 * threads: 32768 floats are ~10 microseconds on one core, several
 * parallel-region forks and joins. */
#define PARALLEL_ELEMS 32768
#define MAX_LEAVES (KT_CC_MAX_REFS - 1)
#define MAX_MEMBERS 256

static const char *const binary_ops[] = {"Add", "Sub", "Mul",
                                         "Div", "Pow", NULL};
static const char *const unary_ops[] =
    {"Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish",  "Tanh", "Sqrt",
     "Exp",  "Log",  "Abs",     "Neg",         "Reciprocal", NULL};

static int
op_index(const char *const *ops, const char *op)
{
    int i;

    for (i = 0; ops[i] != NULL; i++)
        if (strcmp(ops[i], op) == 0)
            return i;
    return -1;
}

static int
is_op(const struct kt_onnx_node *n, const char *op)
{
    return strcmp(n->op, op) == 0;
}

static int
is_resize(const struct kt_onnx_node *n)
{
    return is_op(n, "Resize") || is_op(n, "Upsample");
}

int
kt__cc_expr_node(const struct kt_onnx_graph *g, int i)
{
    const struct kt_onnx_node *n = &g->nodes[i];
    int64_t mul[KT_ONNX_MAX_DIMS], div[KT_ONNX_MAX_DIMS];

    if (n->role != KT_ONNX_ROLE_UNTUNED || n->nout != 1 || n->out[0] < 0)
        return 0;
    if (op_index(binary_ops, n->op) >= 0 || op_index(unary_ops, n->op) >= 0)
        return 1;
    if (is_op(n, "BatchNormalization"))
        return kt__cc_bn_consts(g, n) && g->values[n->out[0]].ndim >= 2;
    return is_resize(n) && kt__cc_nearest_map(g, n, mul, div) == 0;
}

/* ---- The expression of a step ------------------------------------------- */

/* An operand: value (index-mapped through nearest Resize 'node' when
 * node >= 0), or with value -1 the scale (which 1) or shift (2) of batch
 * norm 'node'. */
struct leaf {
    int value, node, which;
};

struct walk {
    const struct kt_cc_net *net;
    int nleaves, nmembers, ntemps;
    struct leaf leaves[MAX_LEAVES + 1];
    int members[MAX_MEMBERS]; /* inlined nodes, consumers first */
    struct kt_buf *body;      /* the statements; NULL: only collect */
};

/* An operand's name in the loop body: leaf h (h >= 0) is xh, temporary
 * -h-1 is th. */
static void
put_name(struct kt_buf *b, int h)
{
    kt_buf_printf(b, h >= 0 ? "x%d" : "t%d", h >= 0 ? h : -h - 1);
}

static int
leaf(struct walk *w, int value, int node, int which)
{
    int i, stored = w->nleaves <= MAX_LEAVES ? w->nleaves : MAX_LEAVES + 1;

    /* past MAX_LEAVES only counted: kt__cc_expr_plan splits the chain */
    for (i = 0; i < stored; i++)
        if (w->leaves[i].value == value && w->leaves[i].node == node &&
            w->leaves[i].which == which)
            return i;
    if (stored <= MAX_LEAVES)
        w->leaves[stored] = (struct leaf){value, node, which};
    return w->nleaves++;
}

static int walk_node(struct walk *w, int i);

static int
operand(struct walk *w, int v)
{
    int p = w->net->g->values[v].producer;

    if (p >= 0 && w->net->inlined[p])
        return walk_node(w, p);
    return leaf(w, v, -1, 0);
}

/* "const float tK = " for a new temporary; its handle. */
static int
new_temp(struct walk *w)
{
    int t = w->ntemps++;

    if (w->body != NULL)
        kt_buf_printf(w->body, "const float t%d = ", t);
    return -t - 1;
}

static double
const_input(const struct kt_onnx_graph *g, const struct kt_onnx_node *n, int i,
            double def)
{
    if (n->nin > i && n->in[i] >= 0 && g->values[n->in[i]].data != NULL)
        return kt_onnx_value_get(&g->values[n->in[i]], 0);
    return def;
}

/* The C of unary op k of x (its name in b, p0 and p1 its parameters). */
static void
put_unary(struct kt_buf *b, int k, const char *x, double p0, double p1)
{
    switch (k) {
    case 0: kt_buf_printf(b, "%s > 0 ? %s : 0", x, x); break;
    case 1:
        kt_buf_printf(b, "fminf(fmaxf(%s, (float)%.9g), (float)%.9g)", x, p0,
                      p1);
        break;
    case 2: kt_buf_printf(b, "1 / (1 + expf(-%s))", x); break;
    case 3:
        kt_buf_printf(b, "fminf(fmaxf(%s * (float)%.9g + (float)%.9g, 0), 1)",
                      x, p0, p1);
        break;
    case 4:
        kt_buf_printf(b, "%s * fminf(fmaxf(%s / 6 + 0.5f, 0), 1)", x, x);
        break;
    case 5: kt_buf_printf(b, "tanhf(%s)", x); break;
    case 6: kt_buf_printf(b, "sqrtf(%s)", x); break;
    case 7: kt_buf_printf(b, "expf(%s)", x); break;
    case 8: kt_buf_printf(b, "logf(%s)", x); break;
    case 9: kt_buf_printf(b, "fabsf(%s)", x); break;
    case 10: kt_buf_printf(b, "-%s", x); break;
    default: kt_buf_printf(b, "1 / %s", x); break;
    }
}

static void
unary_params(const struct kt_onnx_graph *g, const struct kt_onnx_node *n, int k,
             double *p0, double *p1)
{
    *p0 = *p1 = 0;
    if (k == 1) {
        *p0 = const_input(g, n, 1, kt_onnx_attr_float(n, "min", -3.4e38));
        *p1 = const_input(g, n, 2, kt_onnx_attr_float(n, "max", 3.4e38));
    } else if (k == 3) {
        *p0 = kt_onnx_attr_float(n, "alpha", 0.2);
        *p1 = kt_onnx_attr_float(n, "beta", 0.5);
    }
}

/* Node i's value in the loop body: its operands first, then its own
 * statement; the handle of its result. */
static int
walk_node(struct walk *w, int i)
{
    const struct kt_onnx_graph *g = w->net->g;
    const struct kt_onnx_node *n = &g->nodes[i];
    int k, a, x, s, t, h;
    char name[16];

    if (w->net->inlined[i] && w->nmembers < MAX_MEMBERS)
        w->members[w->nmembers++] = i;
    if (is_resize(n))
        return leaf(w, n->in[0], i, 0);
    x = operand(w, n->in[0]);
    if (is_op(n, "BatchNormalization")) {
        s = leaf(w, -1, i, 1);
        t = leaf(w, -1, i, 2);
        h = new_temp(w);
        if (w->body != NULL) {
            put_name(w->body, x);
            kt_buf_puts(w->body, " * ");
            put_name(w->body, s);
            kt_buf_puts(w->body, " + ");
            put_name(w->body, t);
            kt_buf_puts(w->body, ";\n");
        }
        return h;
    }
    if ((k = op_index(binary_ops, n->op)) >= 0) {
        static const char sym[] = "+-*/";
        a = operand(w, n->in[1]);
        h = new_temp(w);
        if (w->body != NULL) {
            kt_buf_puts(w->body, k == 4 ? "powf(" : "");
            put_name(w->body, x);
            kt_buf_printf(w->body, k == 4 ? ", " : " %c ", sym[k < 4 ? k : 0]);
            put_name(w->body, a);
            kt_buf_puts(w->body, k == 4 ? ");\n" : ";\n");
        }
        return h;
    }
    k = op_index(unary_ops, n->op);
    h = new_temp(w);
    if (w->body != NULL) {
        double p0, p1;
        unary_params(g, n, k, &p0, &p1);
        snprintf(name, sizeof(name), x >= 0 ? "x%d" : "t%d",
                 x >= 0 ? x : -x - 1);
        put_unary(w->body, k, name, p0, p1);
        kt_buf_puts(w->body, ";\n");
    }
    return h;
}

static int
walk(struct walk *w, const struct kt_cc_net *net, int root, struct kt_buf *body)
{
    memset(w, 0, sizeof(*w));
    w->net = net;
    w->body = body;
    return walk_node(w, root);
}

/* ---- Which nodes join their consumer's step ------------------------------ */

static int
same_dims(const struct kt_onnx_value *a, const struct kt_onnx_value *b)
{
    return a->ndim == b->ndim &&
           memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof(int64_t)) == 0;
}

/* The one node that reads value v, or -1. */
static int
sole_consumer(const struct kt_onnx_graph *g, int v, int after)
{
    int j, k;

    if (g->values[v].is_output || g->values[v].nconsumers != 1)
        return -1;
    for (j = after + 1; j < g->nnodes; j++)
        for (k = 0; k < g->nodes[j].nin; k++)
            if (g->nodes[j].in[k] == v)
                return j;
    return -1;
}

void
kt__cc_expr_plan(struct kt_cc_net *net)
{
    const struct kt_onnx_graph *g = net->g;
    struct walk w;
    int i, j, m, changed;

    net->inlined = kt_xcalloc((size_t)g->nnodes + 1, 1);
    for (i = 0; i < g->nnodes; i++) {
        int v;
        if (!kt__cc_expr_node(g, i))
            continue;
        v = g->nodes[i].out[0];
        j = sole_consumer(g, v, i);
        /* the consumer's input 0 for the ops whose other inputs are
         * parameters; a Resize reads only a leaf */
        if (j < 0 || !kt__cc_expr_node(g, j) || is_resize(&g->nodes[j]) ||
            (op_index(binary_ops, g->nodes[j].op) < 0 &&
             g->nodes[j].in[0] != v) ||
            !same_dims(&g->values[v], &g->values[g->nodes[j].out[0]]))
            continue;
        net->inlined[i] = 1;
    }
    /* a step has at most MAX_LEAVES operands and MAX_MEMBERS nodes: a
     * longer chain runs as one step per node (its members' own chains are
     * checked again) */
    do {
        changed = 0;
        for (i = 0; i < g->nnodes; i++) {
            if (!kt__cc_expr_node(g, i) || net->inlined[i])
                continue;
            walk(&w, net, i, NULL);
            if (w.nleaves <= MAX_LEAVES && w.nmembers < MAX_MEMBERS)
                continue;
            for (m = 0; m < w.nmembers && m < MAX_MEMBERS; m++)
                net->inlined[w.members[m]] = 0;
            changed = 1;
        }
    } while (changed);
}

int
kt__cc_expr_refs(struct kt_cc_net *net, int root, struct kt_cc_step *s)
{
    struct walk w;
    int i;

    walk(&w, net, root, NULL);
    for (i = 0; i < w.nleaves; i++) {
        const struct leaf *l = &w.leaves[i];
        struct kt_cc_ref r = {KT_CC_ACT, l->value};
        if (l->value < 0)
            r = (struct kt_cc_ref){KT_CC_WEIGHT,
                                   kt__cc_w_bn(net, &net->g->nodes[l->node],
                                               l->which)};
        else if (net->g->values[l->value].data != NULL)
            r = (struct kt_cc_ref){KT_CC_WEIGHT, kt__cc_w_raw(net, l->value)};
        s->refs[i] = r;
    }
    s->refs[w.nleaves] = (struct kt_cc_ref){KT_CC_ACT,
                                            net->g->nodes[root].out[0]};
    s->nrefs = w.nleaves + 1;
    return w.nmembers;
}

int
kt__cc_expr_members(const struct kt_cc_net *net, int root, int *members,
                    int max)
{
    struct walk w;
    int i;

    walk(&w, net, root, NULL);
    for (i = 0; i < w.nmembers && i < max; i++)
        members[i] = w.members[i];
    return w.nmembers;
}

/* ---- The loop ------------------------------------------------------------ */

/* How a leaf is read along one output dim: source index i * mul / div,
 * times stride (0 where broadcast). */
struct dim_map {
    int64_t stride, mul, div;
};

static void
leaf_maps(const struct kt_onnx_graph *g, const struct leaf *l, int r,
          struct dim_map *m)
{
    const struct kt_onnx_value *v = l->value >= 0 ? &g->values[l->value] : NULL;
    int64_t mul[KT_ONNX_MAX_DIMS], div[KT_ONNX_MAX_DIMS], acc = 1;
    int d;

    for (d = 0; d < r; d++)
        m[d] = (struct dim_map){0, 1, 1};
    if (v == NULL) { /* a batch norm's per-channel vector */
        m[1].stride = 1;
        return;
    }
    if (l->node >= 0)
        kt__cc_nearest_map(g, &g->nodes[l->node], mul, div);
    for (d = v->ndim - 1; d >= 0; d--) {
        int od = d + (r - v->ndim);
        if (od >= 0 && v->dims[d] != 1)
            m[od].stride = acc;
        if (od >= 0 && l->node >= 0) {
            m[od].mul = mul[d];
            m[od].div = div[d];
        }
        acc *= v->dims[d];
    }
}

/* Drops size-1 dims and merges a dim into the one before it where every
 * leaf reads both as one run; the number of dims left. */
static int
merge_dims(int r, const int64_t *odims, int nl,
           struct dim_map (*m)[KT_ONNX_MAX_DIMS], int64_t *dims)
{
    int d, l, nd = 0;

    for (d = 0; d < r; d++) {
        int fits = nd > 0;
        if (odims[d] == 1)
            continue;
        for (l = 0; l < nl && fits; l++)
            fits = m[l][nd - 1].mul == 1 && m[l][nd - 1].div == 1 &&
                   m[l][d].mul == 1 && m[l][d].div == 1 &&
                   m[l][nd - 1].stride == m[l][d].stride * odims[d];
        if (fits) {
            dims[nd - 1] *= odims[d];
            for (l = 0; l < nl; l++)
                m[l][nd - 1].stride = m[l][d].stride;
            continue;
        }
        dims[nd] = odims[d];
        for (l = 0; l < nl; l++)
            m[l][nd] = m[l][d];
        nd++;
    }
    if (nd == 0) {
        dims[0] = 1;
        for (l = 0; l < nl; l++)
            m[l][0] = (struct dim_map){0, 1, 1};
        nd = 1;
    }
    return nd;
}

static void
put_index(struct kt_buf *b, const struct dim_map *m, int nd)
{
    int d, any = 0;

    for (d = 0; d < nd; d++) {
        if (m[d].stride == 0)
            continue;
        kt_buf_puts(b, any ? " + " : "");
        any = 1;
        kt_buf_printf(b, "i%d", d);
        if (m[d].mul != 1)
            kt_buf_printf(b, " * %lld", (long long)m[d].mul);
        if (m[d].div != 1)
            kt_buf_printf(b, " / %lld", (long long)m[d].div);
        if (m[d].stride != 1)
            kt_buf_printf(b, " * %lld", (long long)m[d].stride);
    }
    if (!any)
        kt_buf_puts(b, "0");
}

int
kt__cc_expr_parallel(const struct kt_cc_net *net, int root)
{
    const struct kt_onnx_value *o = &net->g->values[net->g->nodes[root].out[0]];

    return kt_onnx_value_elems(o) >= PARALLEL_ELEMS;
}

/* An expression step's loop nest: dims[nd] after merging, each leaf's
 * maps (the output's last), the statements and the result's handle. */
struct shape {
    int nd, nleaves, result;
    int64_t dims[KT_ONNX_MAX_DIMS];
    struct dim_map maps[MAX_LEAVES + 1][KT_ONNX_MAX_DIMS];
};

/* An operand upsampled by f along the innermost dim reads index i / f, a
 * gather to the compiler: the dim is split into (i / f, i % f), over which
 * every operand reads plainly (4x faster on the 2x upsample + add of the
 * detection network, 0.23 -> 0.056 ms on a Zen 4). */
static void
split_inner(struct shape *sh)
{
    int d = sh->nd - 1, l;
    int64_t f = 0;

    if (sh->nd >= KT_ONNX_MAX_DIMS)
        return;
    for (l = 0; l <= sh->nleaves; l++) {
        const struct dim_map *m = &sh->maps[l][d];
        if (m->mul != 1 || (m->div != 1 && f != 0 && m->div != f))
            return;
        if (m->div != 1)
            f = m->div;
    }
    if (f == 0 || sh->dims[d] % f != 0)
        return;
    sh->dims[d] /= f;
    sh->dims[d + 1] = f;
    for (l = 0; l <= sh->nleaves; l++) {
        struct dim_map m = sh->maps[l][d];
        sh->maps[l][d] = (struct dim_map){m.div == f ? m.stride : m.stride * f,
                                          1, 1};
        sh->maps[l][d + 1] = (struct dim_map){m.div == f ? 0 : m.stride, 1, 1};
    }
    sh->nd++;
}

static void
shape_of(const struct kt_cc *c, const struct kt_cc_step *s, struct shape *sh,
         struct kt_buf *body)
{
    const struct kt_onnx_graph *g = c->net->g;
    const struct kt_onnx_value *o = &g->values[g->nodes[s->node].out[0]];
    int64_t odims[KT_ONNX_MAX_DIMS], unit = 1;
    struct walk w;
    int r = o->ndim > 0 ? o->ndim : 1, d, l;

    for (d = 0; d < r; d++)
        odims[d] = o->ndim > 0 ? o->dims[d] : 1;
    sh->result = walk(&w, c->net, s->node, body);
    sh->nleaves = w.nleaves;
    for (l = 0; l < w.nleaves; l++)
        leaf_maps(g, &w.leaves[l], r, sh->maps[l]);
    for (d = r - 1; d >= 0; d--) {
        sh->maps[w.nleaves][d] = (struct dim_map){unit, 1, 1};
        unit *= odims[d];
    }
    sh->nd = merge_dims(r, odims, w.nleaves + 1, sh->maps, sh->dims);
    split_inner(sh);
}

/* The static function of step 'index' (it takes restrict pointers, the
 * compiler's licence to vectorize): rows [lo, hi) of the first dim. */
void
kt__cc_emit_expr_fn(struct kt_buf *b, const struct kt_cc *c,
                    const struct kt_cc_step *s, int index)
{
    struct shape sh;
    struct kt_buf body;
    const char *line, *end;
    int d, l, in;

    kt_buf_init(&body);
    shape_of(c, s, &sh, &body);
    in = 4 + 4 * sh.nd; /* the loop body's indent */
    kt_buf_puts(b, "/* ");
    kt__cc_step_label(b, c, s);
    kt_buf_printf(b, " */\nstatic void\nexpr_%d(float *restrict o", index);
    for (l = 0; l < sh.nleaves; l++)
        kt_buf_printf(b, ", const float *restrict l%d", l);
    kt_buf_puts(b, ", long long lo,\n        long long hi)\n{\n");
    for (d = 0; d < sh.nd; d++) {
        kt_buf_printf(b, "%*sfor (long long i%d = %s; i%d < ", 4 + 4 * d, "", d,
                      d == 0 ? "lo" : "0", d);
        if (d == 0)
            kt_buf_puts(b, "hi");
        else
            kt_buf_printf(b, "%lldLL", (long long)sh.dims[d]);
        kt_buf_printf(b, "; i%d++)%s\n", d, d == sh.nd - 1 ? " {" : "");
    }
    for (l = 0; l < sh.nleaves; l++) {
        kt_buf_printf(b, "%*sconst float x%d = l%d[", in, "", l, l);
        put_index(b, sh.maps[l], sh.nd);
        kt_buf_puts(b, "];\n");
    }
    for (line = body.p; line != NULL && *line != '\0'; line = end + 1) {
        end = strchr(line, '\n');
        kt_buf_printf(b, "%*s%.*s\n", in, "", (int)(end - line), line);
    }
    kt_buf_printf(b, "%*so[", in, "");
    put_index(b, sh.maps[sh.nleaves], sh.nd);
    kt_buf_puts(b, "] = ");
    put_name(b, sh.result);
    kt_buf_printf(b, ";\n%*s}\n}\n\n", 4 + 4 * (sh.nd - 1), "");
    kt_buf_free(&body);
}

static void
put_call(struct kt_buf *b, const struct kt_cc *c, const struct kt_cc_step *s,
         int index, const char *indent, const char *range)
{
    int l;

    kt_buf_printf(b, "%sexpr_%d(", indent, index);
    kt__cc_put_ref(b, c, &s->refs[s->nrefs - 1]);
    for (l = 0; l < s->nrefs - 1; l++) {
        kt_buf_puts(b, ", ");
        kt__cc_put_ref(b, c, &s->refs[l]);
    }
    kt_buf_printf(b, ", %s);\n", range);
}

void
kt__cc_emit_expr(struct kt_buf *b, const struct kt_cc *c,
                 const struct kt_cc_step *s, int index)
{
    struct shape sh;
    char range[64];

    shape_of(c, s, &sh, NULL);
    snprintf(range, sizeof(range), "0, %lldLL", (long long)sh.dims[0]);
    if (!kt__cc_expr_parallel(c->net, s->node)) {
        put_call(b, c, s, index, "    ", range);
        return;
    }
    /* the first dim in equal parts, one per thread */
    kt_buf_printf(b,
                  "#ifdef _OPENMP\n#pragma omp parallel\n    {\n"
                  "        const long long n = %lldLL, nt = "
                  "omp_get_num_threads(),\n"
                  "                        th = omp_get_thread_num();\n",
                  (long long)sh.dims[0]);
    put_call(b, c, s, index, "        ", "n * th / nt, n * (th + 1) / nt");
    kt_buf_puts(b, "    }\n#else\n");
    put_call(b, c, s, index, "    ", range);
    kt_buf_puts(b, "#endif\n");
}
