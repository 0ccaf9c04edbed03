/* net_emit.c - the files of a compiled network: DIR/<model>_net.c (init,
 * run, free), DIR/<model>.weights, DIR/<model>_infer.c and DIR/ort_run.js,
 * and the network's part of <model>.h (docs/compile.md). */
#include "compile/compile_int.h"

#include <stdlib.h>
#include <string.h>

#include "compile/net_rt.h"
#include "onnx/onnx.h"

static const struct kt_onnx_value *
val(const struct kt_cc *c, int v)
{
    return &c->net->g->values[v];
}

static void
put_dims(struct kt_buf *b, const struct kt_onnx_value *v, const char *sep)
{
    int d;

    for (d = 0; d < v->ndim; d++)
        kt_buf_printf(b, "%s%lld", d ? sep : "", (long long)v->dims[d]);
    if (v->ndim == 0)
        kt_buf_puts(b, "1");
}

/* Packed slot k: a range of the weights when compile packed it, else the
 * buffer run packs into. */
static void
put_packed(struct kt_buf *b, const struct kt_cc *c, int k)
{
    if (c->net->packed_at[k] >= 0)
        kt_buf_printf(b, "(float *)(W + %lld)",
                      (long long)c->net->packed_at[k]);
    else
        kt_buf_printf(b, "net->packed[%d]", k);
}

void
kt__cc_put_ref(struct kt_buf *b, const struct kt_cc *c,
               const struct kt_cc_ref *r)
{
    if (r->src == KT_CC_ACT)
        kt_buf_printf(b, "(float *)(A + %lld)",
                      (long long)c->net->arena_off[r->at]);
    else if (r->src == KT_CC_WEIGHT)
        kt_buf_printf(b, "(float *)(W + %lld)", (long long)r->at);
    else
        put_packed(b, c, (int)r->at);
}

/* ---- Header ------------------------------------------------------------ */

void
kt__cc_net_header(struct kt_buf *h, const struct kt_cc *c)
{
    const struct kt_onnx_graph *g;
    const char *M = c->model;
    char up[64];
    int i;

    if (c->net == NULL)
        return;
    g = c->net->g;
    for (i = 0; M[i] && i < 63; i++)
        up[i] = (char)(M[i] >= 'a' && M[i] <= 'z' ? M[i] - 'a' + 'A' : M[i]);
    up[i] = '\0';
    kt_buf_printf(h,
                  "/* ---- The whole network (%s) ----\n"
                  " *\n"
                  " * %s_init reads the weights kerntune compile wrote "
                  "(%s.weights: batch norms\n * folded, the weights a "
                  "schedule reads in another layout already packed)\n"
                  " * and allocates the activation arena (%s_ARENA_BYTES,"
                  " planned so that\n * tensors that are not alive together "
                  "share memory).  %s_run runs the network:\n"
                  " * the tuned kernels above and plain C loops for the "
                  "untuned nodes.  inputs[i]\n * and outputs[i] hold the "
                  "float32 tensors below in row-major order (any\n"
                  " * alignment).  One net per thread; nets share nothing.\n"
                  " *\n",
                  c->m->onnx, M, M, up, M);
    for (i = 0; i < g->ninputs + g->noutputs; i++) {
        int out = i >= g->ninputs, k = out ? i - g->ninputs : i;
        const struct kt_onnx_value *v = val(c,
                                            out ? g->outputs[k] : g->inputs[k]);
        kt_buf_printf(h, " *   %s[%d]  %-24s [", out ? "outputs" : "inputs ", k,
                      v->name);
        put_dims(h, v, " x ");
        kt_buf_puts(h, "]\n");
    }
    kt_buf_printf(h,
                  " *\n * %s_init returns 0, -errno when the file cannot be "
                  "read, -EINVAL when it is\n * not the weights of this "
                  "library (format, size or checksum), -ENOMEM. */\n",
                  M);
    kt_buf_printf(h, "#define %s_NINPUTS %d\n#define %s_NOUTPUTS %d\n", up,
                  g->ninputs, up, g->noutputs);
    for (i = 0; i < g->ninputs + g->noutputs; i++) {
        int out = i >= g->ninputs, k = out ? i - g->ninputs : i;
        const struct kt_onnx_value *v = val(c,
                                            out ? g->outputs[k] : g->inputs[k]);
        kt_buf_printf(h, "#define %s_%s%d_ELEMS %lldLL\n", up,
                      out ? "OUTPUT" : "INPUT", k,
                      (long long)kt_onnx_value_elems(v));
    }
    kt_buf_printf(h,
                  "#define %s_ARENA_BYTES %lldLL\n"
                  "#define %s_WEIGHT_BYTES %lldLL\n"
                  "struct %s_net;\n"
                  "int %s_init(struct %s_net **net, const char "
                  "*weights_path);\n"
                  "int %s_run(struct %s_net *net, const float *const "
                  "*inputs, float *const *outputs);\n"
                  "void %s_free(struct %s_net *net);\n\n",
                  up, (long long)c->net->arena_bytes, up,
                  (long long)c->net->nw * 4, M, M, M, M, M, M, M);
    kt__cc_profile_header(h, c, up);
}

/* ---- Untuned nodes ------------------------------------------------------- */

void
kt__cc_put_ll(struct kt_buf *b, const int64_t *v, int n)
{
    int i;

    kt_buf_puts(b, "(const long long[]){");
    for (i = 0; i < n; i++)
        kt_buf_printf(b, "%s%lld", i ? ", " : "", (long long)v[i]);
    kt_buf_puts(b, "}");
}

static void
emit_transpose(struct kt_buf *b, const struct kt_cc *c,
               const struct kt_cc_step *s)
{
    const struct kt_onnx_node *n = &c->net->g->nodes[s->node];
    const struct kt_onnx_value *in = val(c, n->in[0]), *o = val(c, n->out[0]);
    int64_t perm[KT_ONNX_MAX_DIMS], sin[KT_ONNX_MAX_DIMS], sx[KT_ONNX_MAX_DIMS];
    int d;

    if (kt_onnx_attr_ints(n, "perm", perm, KT_ONNX_MAX_DIMS) != in->ndim)
        for (d = 0; d < in->ndim; d++)
            perm[d] = in->ndim - 1 - d;
    kt__cc_strides(in, sin);
    for (d = 0; d < in->ndim; d++)
        sx[d] = sin[perm[d]];
    kt_buf_puts(b, "    rt_transpose(");
    kt__cc_put_ref(b, c, &s->refs[s->nrefs - 1]);
    kt_buf_puts(b, ", ");
    kt__cc_put_ref(b, c, &s->refs[0]);
    kt_buf_printf(b, ", %d, ", o->ndim);
    kt__cc_put_ll(b, o->dims, o->ndim);
    kt_buf_puts(b, ", ");
    kt__cc_put_ll(b, sx, o->ndim);
    kt_buf_puts(b, ");\n");
}

static void
emit_concat(struct kt_buf *b, const struct kt_cc *c, const struct kt_cc_step *s)
{
    const struct kt_onnx_node *n = &c->net->g->nodes[s->node];
    const struct kt_onnx_value *o = val(c, n->out[0]);
    int64_t axis, rows, inner, at = 0;
    int i;

    kt__cc_concat_shape(c->net->g, n, &axis, &rows, &inner);
    for (i = 0; i < s->nrefs - 1; i++) {
        int64_t row = val(c, n->in[i])->dims[axis] * inner;
        if (c->net->alias_of[n->in[i]] == n->out[0]) {
            at += row; /* written in place (net_arena.c) */
            continue;
        }
        kt_buf_puts(b, "    rt_rows(");
        kt__cc_put_ref(b, c, &s->refs[s->nrefs - 1]);
        kt_buf_printf(b, " + %lld, ", (long long)at);
        kt__cc_put_ref(b, c, &s->refs[i]);
        kt_buf_printf(b, ", %lld, %lld, %lld);\n", (long long)rows,
                      (long long)row, (long long)(o->dims[axis] * inner));
        at += row;
    }
}

static void
emit_node(struct kt_buf *b, const struct kt_cc *c, const struct kt_cc_step *s,
          int index)
{
    const struct kt_onnx_node *n = &c->net->g->nodes[s->node];

    kt_buf_puts(b, "    /* ");
    kt__cc_step_label(b, c, s);
    kt_buf_puts(b, " */\n");
    if (kt__cc_expr_node(c->net->g, s->node))
        kt__cc_emit_expr(b, c, s, index);
    else if (strcmp(n->op, "Slice") == 0 || strcmp(n->op, "Resize") == 0 ||
             strcmp(n->op, "Upsample") == 0)
        kt__cc_emit_layout(b, c, s);
    else if (strcmp(n->op, "Transpose") == 0)
        emit_transpose(b, c, s);
    else if (strcmp(n->op, "Concat") == 0)
        emit_concat(b, c, s);
    else { /* Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout */
        kt_buf_puts(b, "    memcpy(");
        kt__cc_put_ref(b, c, &s->refs[s->nrefs - 1]);
        kt_buf_puts(b, ", ");
        kt__cc_put_ref(b, c, &s->refs[0]);
        kt_buf_printf(b, ", %lldu);\n",
                      (long long)kt_onnx_value_elems(val(c, n->out[0])) * 4);
    }
}

/* ---- Kernel calls ---------------------------------------------------------- */

static void
emit_pack(struct kt_buf *b, const struct kt_cc *c, const struct kt_cc_step *s)
{
    const struct kt_cc_task *t = &c->t[c->net->g->kernels[s->kernel].task];
    int a, k, first = 1;

    kt_buf_printf(b, "    %s_pack(", t->fname);
    for (a = 0; a < t->lt->nargs; a++)
        if (kt__cc_packed_of(t, a) != NULL) {
            kt_buf_puts(b, first ? "" : ", ");
            kt__cc_put_ref(b, c, &s->refs[a]);
            first = 0;
        }
    for (k = 0; k < t->npacked; k++) {
        kt_buf_puts(b, ", ");
        put_packed(b, c, s->packed + k);
    }
    kt_buf_puts(b, ");\n");
}

static void
emit_kernel(struct kt_buf *b, const struct kt_cc *c, const struct kt_cc_step *s)
{
    const struct kt_onnx_kernel *k = &c->net->g->kernels[s->kernel];
    const struct kt_cc_task *t = &c->t[k->task];
    int a, p;

    kt_buf_puts(b, "    /* ");
    kt__cc_step_label(b, c, s);
    kt_buf_puts(b, " */\n");
    if (s->pack_input)
        emit_pack(b, c, s);
    kt_buf_printf(b, "    %s(", t->fname);
    for (a = 0; a < t->lt->nargs; a++) {
        const struct kt_cc_packed *pk = kt__cc_packed_of(t, a);
        kt_buf_puts(b, a ? ", " : "");
        if (kt__cc_arg_replaced(t, a))
            put_packed(b, c, s->packed + (int)(pk - t->packed));
        else
            kt__cc_put_ref(b, c, &s->refs[a]);
    }
    for (p = 0; p < t->npacked; p++)
        if (!kt__cc_arg_replaced(t, t->packed[p].arg)) {
            kt_buf_puts(b, ", ");
            put_packed(b, c, s->packed + p);
        }
    kt_buf_puts(b, ");\n");
}

/* ---- DIR/<model>_net.c ------------------------------------------------------ */

static void
emit_init(struct kt_buf *b, const struct kt_cc *c)
{
    const struct kt_cc_net *net = c->net;
    const char *M = c->model;
    int i;

    kt_buf_printf(b,
                  "struct %s_net {\n    char *arena;\n    float *weights;\n"
                  "    float *packed[%d];\n"
                  "    double *step_ms; /* %s_profile */\n};\n\n",
                  M, net->npacked + 1, M);
    kt_buf_printf(b,
                  "static unsigned long long\nrd64(const unsigned char *p)\n{"
                  "\n    unsigned long long v = 0;\n"
                  "    for (int i = 7; i >= 0; i--)\n        v = v << 8 | "
                  "p[i];\n    return v;\n}\n\n"
                  "static unsigned long long\nfnv1a(const void *p, size_t n)"
                  "\n{\n    const unsigned char *q = p;\n"
                  "    unsigned long long h = 1469598103934665603ULL;\n"
                  "    for (size_t i = 0; i < n; i++)\n"
                  "        h = (h ^ q[i]) * 1099511628211ULL;\n    return h;"
                  "\n}\n\n"
                  "static void *\nalloc64(long long bytes)\n{\n"
                  "    return aligned_alloc(64, (size_t)((bytes + 127) / 64 * "
                  "64));\n}\n\n");
    kt_buf_printf(b,
                  "int\n%s_init(struct %s_net **out, const char *path)\n{\n"
                  "    const long long nw = %lldLL;\n"
                  "    const unsigned long long hash = %lluULL;\n"
                  "    struct %s_net *net = calloc(1, sizeof(*net));\n"
                  "    unsigned char hdr[64];\n    FILE *f;\n    int rc = 0;\n"
                  "    *out = NULL;\n    if (net == NULL)\n        return "
                  "-ENOMEM;\n"
                  "    net->arena = alloc64(%lldLL);\n"
                  "    net->weights = alloc64(nw * 4);\n",
                  M, M, (long long)net->nw, (unsigned long long)net->w_hash, M,
                  (long long)net->arena_bytes);
    for (i = 0; i < net->npacked; i++)
        if (net->packed_at[i] < 0)
            kt_buf_printf(b,
                          "    if ((net->packed[%d] = alloc64(%lldLL * 4)) "
                          "== NULL)\n        rc = -ENOMEM;\n",
                          i, (long long)net->packed_elems[i]);
    kt_buf_printf(b,
                  "    if (net->arena == NULL || net->weights == NULL || rc)"
                  " {\n        %s_free(net);\n        return -ENOMEM;\n    }\n"
                  "    if ((f = fopen(path, \"rb\")) == NULL) {\n"
                  "        rc = -errno;\n        %s_free(net);\n"
                  "        return rc;\n    }\n"
                  "    if (fread(hdr, 1, 64, f) != 64 || memcmp(hdr, \"%s\", "
                  "8) != 0 ||\n"
                  "        rd64(hdr + 8) != (unsigned long long)nw || "
                  "rd64(hdr + 16) != hash ||\n"
                  "        fread(net->weights, 4, (size_t)nw, f) != "
                  "(size_t)nw || fgetc(f) != EOF ||\n"
                  "        fnv1a(net->weights, (size_t)nw * 4) != hash)\n"
                  "        rc = -EINVAL;\n    fclose(f);\n"
                  "    if (rc != 0) {\n        %s_free(net);\n"
                  "        return rc;\n    }\n",
                  M, M, KT_CC_WEIGHTS_MAGIC, M);
    kt_buf_puts(b, "    *out = net;\n    return 0;\n}\n\n");
    kt_buf_printf(b,
                  "void\n%s_free(struct %s_net *net)\n{\n"
                  "    if (net == NULL)\n        return;\n"
                  "    for (int i = 0; i < %d; i++)\n"
                  "        free(net->packed[i]);\n"
                  "    free(net->arena);\n    free(net->weights);\n"
                  "    free(net);\n}\n\n",
                  M, M, net->npacked);
}

/* Kernels with less work per call run on the calling thread alone: the
 * default, 0.1 MFLOP, is a microsecond or two on one core, no more than a
 * parallel region's fork and join. */
static double
serial_flops(const struct kt_cc *c)
{
    double m = c->o->serial_below_mflop;

    return (m == 0 ? KT_COMPILE_SERIAL_MFLOP : m) * 1e6;
}

static void
emit_run(struct kt_buf *b, const struct kt_cc *c)
{
    const struct kt_cc_net *net = c->net;
    const struct kt_onnx_graph *g = net->g;
    int i, serial = 0;

    kt_buf_printf(b,
                  "int\n%s_run(struct %s_net *net, const float *const "
                  "*inputs, float *const *outputs)\n{\n"
                  "    char *const A = net->arena;\n"
                  "    const float *const W = net->weights;\n    (void)W;\n",
                  c->model, c->model);
    for (i = 0; i < g->ninputs; i++)
        kt_buf_printf(b, "    memcpy(A + %lld, inputs[%d], %lldu);\n",
                      (long long)net->arena_off[g->inputs[i]], i,
                      (long long)kt_onnx_value_elems(val(c, g->inputs[i])) * 4);
    kt_buf_puts(b, "    const int threads = threads_now();\n"
                   "    (void)threads;\n"
                   "    double *const prof = net->step_ms;\n"
                   "    double t = prof ? step_now_ms() : 0;\n");
    for (i = 0; i < net->nsteps; i++) {
        const struct kt_cc_step *s = &net->steps[i];
        /* small kernels run on one thread; large elementwise steps on all */
        int small = serial;
        if (s->kernel >= 0)
            small = c->t[g->kernels[s->kernel].task].task->dag->flops <
                    serial_flops(c);
        else if (kt__cc_expr_node(g, s->node) &&
                 kt__cc_expr_parallel(net, s->node))
            small = 0;
        if (small != serial) {
            kt_buf_puts(b, small ? "    threads_set(1);\n"
                                 : "    threads_set(threads);\n");
            serial = small;
        }
        if (s->kernel >= 0)
            emit_kernel(b, c, s);
        else
            emit_node(b, c, s, i);
        kt_buf_printf(b, "    if (prof)\n        t = step_done(prof, %d, t);\n",
                      i);
    }
    kt_buf_puts(b, "    (void)t;\n");
    if (serial)
        kt_buf_puts(b, "    threads_set(threads);\n");
    for (i = 0; i < g->noutputs; i++)
        kt_buf_printf(b, "    memcpy(outputs[%d], A + %lld, %lldu);\n", i,
                      (long long)net->arena_off[g->outputs[i]],
                      (long long)kt_onnx_value_elems(val(c, g->outputs[i])) * 4);
    kt_buf_puts(b, "    return 0;\n}\n");
}

void
kt__cc_emit_net_c(struct kt_buf *b, const struct kt_cc *c)
{
    struct kt_buf run;
    char call[64];
    int i;

    kt_buf_printf(b,
                  "/* %s_net.c - generated by kerntune compile: the network "
                  "of %s\n * (%d steps: kernel calls and plain C for the "
                  "untuned nodes); see %s.h. */\n"
                  "#include <errno.h>\n#include <math.h>\n#include <stdio.h>\n"
                  "#include <stdlib.h>\n#include <string.h>\n"
                  "#include <time.h>\n\n#include \"%s.h\"\n\n",
                  c->model, c->m->onnx, c->net->nsteps, c->model, c->model);
    kt_buf_init(&run);
    emit_run(&run, c);
    kt_buf_puts(b, kt__cc_rt_prelude);
    /* only the functions run calls: the file builds warning-free */
    for (i = 0; kt__cc_rt_fns[i].name != NULL; i++) {
        snprintf(call, sizeof(call), "%s(", kt__cc_rt_fns[i].name);
        if (strstr(run.p, call) != NULL) {
            kt_buf_puts(b, "\n");
            kt_buf_puts(b, kt__cc_rt_fns[i].text);
        }
    }
    kt_buf_puts(b, "\n");
    for (i = 0; i < c->net->nsteps; i++)
        if (c->net->steps[i].kernel < 0 &&
            kt__cc_expr_node(c->net->g, c->net->steps[i].node))
            kt__cc_emit_expr_fn(b, c, &c->net->steps[i], i);
    emit_init(b, c);
    kt__cc_emit_profile(b, c);
    kt_buf_puts(b, run.p);
    kt_buf_free(&run);
}
