/* net_layout.c - the plain C of the untuned Slice and Resize nodes of a
 * compiled network: their index arithmetic is done here, at compile time
 * (start offsets and strides, per-dim source index tables). */
#include "compile/compile_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx.h"

static int why_not(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes why a node is not run into why; returns -1. */
static int
why_not(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return -1;
}

static const struct kt_onnx_value *
in_val(const struct kt_onnx_graph *g, const struct kt_onnx_node *n, int i)
{
    return i < n->nin && n->in[i] >= 0 ? &g->values[n->in[i]] : NULL;
}

void
kt__cc_strides(const struct kt_onnx_value *v, int64_t *s)
{
    int64_t acc = 1;
    int d;

    for (d = v->ndim - 1; d >= 0; d--) {
        s[d] = acc;
        acc *= v->dims[d];
    }
}

/* Ints of a constant input (n values at most), or -1. */
static int
const_ints(const struct kt_onnx_value *v, int64_t *out, int max)
{
    int64_t n, i;

    if (v == NULL || v->data == NULL || (n = kt_onnx_value_elems(v)) > max)
        return -1;
    for (i = 0; i < n; i++)
        out[i] = (int64_t)kt_onnx_value_get(v, i);
    return (int)n;
}

/* ---- Slice ------------------------------------------------------------------ */

/* The first element and step of every dim (as the importer's shape rule
 * computes them; the output shape is already known). */
static int
slice_params(const struct kt_onnx_graph *g, const struct kt_onnx_node *n,
             int64_t *first, int64_t *step)
{
    const struct kt_onnx_value *a = in_val(g, n, 0);
    int64_t st[KT_ONNX_MAX_DIMS], ax[KT_ONNX_MAX_DIMS], sp[KT_ONNX_MAX_DIMS];
    int k, na, ns;

    if (g->opset < 10) {
        ns = kt_onnx_attr_ints(n, "starts", st, KT_ONNX_MAX_DIMS);
        na = kt_onnx_attr_ints(n, "axes", ax, KT_ONNX_MAX_DIMS);
        for (k = 0; k < KT_ONNX_MAX_DIMS; k++)
            sp[k] = 1;
    } else {
        ns = const_ints(in_val(g, n, 1), st, KT_ONNX_MAX_DIMS);
        na = in_val(g, n, 3) ? const_ints(in_val(g, n, 3), ax, KT_ONNX_MAX_DIMS)
                             : 0;
        for (k = 0; k < KT_ONNX_MAX_DIMS; k++)
            sp[k] = 1;
        if (in_val(g, n, 4) != NULL &&
            const_ints(in_val(g, n, 4), sp, KT_ONNX_MAX_DIMS) != ns)
            return -1;
    }
    if (ns < 0 || na < 0 || (na != 0 && na != ns))
        return -1;
    for (k = 0; k < a->ndim; k++) {
        first[k] = 0;
        step[k] = 1;
    }
    for (k = 0; k < ns; k++) {
        int64_t d = na ? ax[k] : k, len, s;
        if (d < 0)
            d += a->ndim;
        if (d < 0 || d >= a->ndim || sp[k] == 0)
            return -1;
        len = a->dims[d];
        s = st[k] < 0 ? st[k] + len : st[k];
        if (sp[k] > 0)
            s = s < 0 ? 0 : s > len ? len : s;
        else
            s = s < 0 ? -1 : s > len - 1 ? len - 1 : s;
        first[d] = s;
        step[d] = sp[k];
    }
    return 0;
}

static void
emit_slice(struct kt_buf *b, const struct kt_cc *c, const struct kt_cc_step *s)
{
    const struct kt_onnx_graph *g = c->net->g;
    const struct kt_onnx_node *n = &g->nodes[s->node];
    const struct kt_onnx_value *a = in_val(g, n, 0), *o = &g->values[n->out[0]];
    int64_t first[KT_ONNX_MAX_DIMS], step[KT_ONNX_MAX_DIMS];
    int64_t sa[KT_ONNX_MAX_DIMS], sx[KT_ONNX_MAX_DIMS], base = 0;
    int d;

    slice_params(g, n, first, step);
    kt__cc_strides(a, sa);
    for (d = 0; d < a->ndim; d++) {
        base += first[d] * sa[d];
        sx[d] = step[d] * sa[d];
    }
    kt_buf_puts(b, "    rt_transpose(");
    kt__cc_put_ref(b, c, &s->refs[s->nrefs - 1]);
    kt_buf_puts(b, ", ");
    kt__cc_put_ref(b, c, &s->refs[0]);
    kt_buf_printf(b, " + %lld, %d, ", (long long)base, o->ndim);
    kt__cc_put_ll(b, o->dims, o->ndim);
    kt_buf_puts(b, ", ");
    kt__cc_put_ll(b, sx, o->ndim);
    kt_buf_puts(b, ");\n");
}

/* ---- Resize ----------------------------------------------------------------- */

struct resize {
    int linear;
    char coord[32], nearest[32];
    double scale[KT_ONNX_MAX_DIMS];
};

/* Mode, coordinate transformation and the scale of every dim; -1 with
 * the reason in why for what is not run. */
static int
resize_params(const struct kt_onnx_graph *g, const struct kt_onnx_node *n,
              struct resize *r, char *why, size_t len)
{
    const struct kt_onnx_value *a = in_val(g, n, 0), *o = &g->values[n->out[0]];
    const struct kt_onnx_value *sc, *sz = NULL;
    char buf[32];
    int d, old = strcmp(n->op, "Upsample") == 0 || g->opset < 11;

    /* before opset 11: asymmetric coordinates, nearest rounds down */
    r->linear = strcmp(kt_onnx_attr_str(n, "mode", "nearest", buf, sizeof(buf)),
                       "nearest") != 0;
    snprintf(r->coord, sizeof(r->coord), "%s",
             kt_onnx_attr_str(n, "coordinate_transformation_mode",
                              old ? "asymmetric" : "half_pixel", buf,
                              sizeof(buf)));
    snprintf(r->nearest, sizeof(r->nearest), "%s",
             kt_onnx_attr_str(n, "nearest_mode",
                              old ? "floor" : "round_prefer_floor", buf,
                              sizeof(buf)));
    sc = in_val(g, n, old ? 1 : 2);
    if (!old)
        sz = in_val(g, n, 3);
    for (d = 0; d < a->ndim; d++) {
        if (sz != NULL && kt_onnx_value_elems(sz) == a->ndim)
            r->scale[d] = (double)o->dims[d] / (double)a->dims[d];
        else if (sc != NULL && kt_onnx_value_elems(sc) == a->ndim)
            r->scale[d] = kt_onnx_value_get(sc, d);
        else
            return why_not(why, len, "scales/sizes");
        if (r->linear && d < a->ndim - 2 && a->dims[d] != o->dims[d])
            return why_not(why, len,
                           "linear over more than the last two "
                           "dims");
    }
    if (r->linear && a->ndim < 2)
        return why_not(why, len, "linear over one dim");
    if (strcmp(r->coord, "half_pixel") != 0 &&
        strcmp(r->coord, "pytorch_half_pixel") != 0 &&
        strcmp(r->coord, "align_corners") != 0 &&
        strcmp(r->coord, "asymmetric") != 0 &&
        strcmp(r->coord, "tf_half_pixel_for_nn") != 0)
        return why_not(why, len, "coordinate_transformation_mode=%s", r->coord);
    if (kt_onnx_attr_int(n, "antialias", 0) != 0 ||
        kt_onnx_attr_int(n, "exclude_outside", 0) != 0)
        return why_not(why, len, "antialias or exclude_outside");
    return 0;
}

/* The source coordinate of output index i along a dim (in_len -> out). */
static double
source_coord(const struct resize *r, int d, int64_t i, int64_t in_len,
             int64_t out_len)
{
    double s = r->scale[d];

    if (strcmp(r->coord, "align_corners") == 0)
        return out_len == 1 ? 0 : (double)i * (in_len - 1) / (out_len - 1);
    if (strcmp(r->coord, "asymmetric") == 0)
        return i / s;
    if (strcmp(r->coord, "tf_half_pixel_for_nn") == 0)
        return (i + 0.5) / s;
    if (strcmp(r->coord, "pytorch_half_pixel") == 0 && out_len == 1)
        return 0;
    return (i + 0.5) / s - 0.5;
}

static int64_t
nearest_index(const struct resize *r, double x, int64_t in_len)
{
    int64_t k;

    if (strcmp(r->nearest, "floor") == 0)
        k = (int64_t)floor(x);
    else if (strcmp(r->nearest, "ceil") == 0)
        k = (int64_t)ceil(x);
    else if (x - floor(x) == 0.5)
        k = strcmp(r->nearest, "round_prefer_ceil") == 0 ? (int64_t)ceil(x)
                                                         : (int64_t)floor(x);
    else
        k = (int64_t)floor(x + 0.5);
    return k < 0 ? 0 : k >= in_len ? in_len - 1 : k;
}

static void
emit_nearest(struct kt_buf *b, const struct kt_cc *c,
             const struct kt_cc_step *s, const struct resize *r)
{
    const struct kt_onnx_graph *g = c->net->g;
    const struct kt_onnx_node *n = &g->nodes[s->node];
    const struct kt_onnx_value *a = in_val(g, n, 0), *o = &g->values[n->out[0]];
    int64_t sa[KT_ONNX_MAX_DIMS], i;
    int d;

    kt__cc_strides(a, sa);
    kt_buf_puts(b, "    {\n");
    for (d = 0; d < o->ndim; d++) {
        kt_buf_printf(b, "        static const long long d%d[] = {", d);
        for (i = 0; i < o->dims[d]; i++) {
            double x = source_coord(r, d, i, a->dims[d], o->dims[d]);
            kt_buf_printf(b, "%s%lld", i ? ", " : "",
                          (long long)(nearest_index(r, x, a->dims[d]) * sa[d]));
        }
        kt_buf_puts(b, "};\n");
    }
    kt_buf_puts(b, "        static const long long *const off[] = {");
    for (d = 0; d < o->ndim; d++)
        kt_buf_printf(b, "%sd%d", d ? ", " : "", d);
    kt_buf_puts(b, "};\n        rt_gather(");
    kt__cc_put_ref(b, c, &s->refs[s->nrefs - 1]);
    kt_buf_puts(b, ", ");
    kt__cc_put_ref(b, c, &s->refs[0]);
    kt_buf_printf(b, ", %d, ", o->ndim);
    kt__cc_put_ll(b, o->dims, o->ndim);
    kt_buf_puts(b, ", off);\n    }\n");
}

int
kt__cc_nearest_map(const struct kt_onnx_graph *g, const struct kt_onnx_node *n,
                   int64_t *mul, int64_t *div)
{
    const struct kt_onnx_value *a = in_val(g, n, 0), *o = &g->values[n->out[0]];
    struct resize r;
    char why[64];
    int64_t i;
    int d;

    if (resize_params(g, n, &r, why, sizeof(why)) != 0 || r.linear ||
        a->ndim != o->ndim)
        return -1;
    for (d = 0; d < o->ndim; d++) {
        int64_t in = a->dims[d], out = o->dims[d];
        if (in <= 0 || out <= 0)
            return -1;
        mul[d] = out % in == 0 ? 1 : in / out;
        div[d] = out % in == 0 ? out / in : 1;
        if (out % in != 0 && in % out != 0)
            return -1;
        for (i = 0; i < out; i++)
            if (nearest_index(&r, source_coord(&r, d, i, in, out), in) !=
                i * mul[d] / div[d])
                return -1;
    }
    return 0;
}

/* One dim's two source indices and the weight of the second. */
static void
put_linear_tables(struct kt_buf *b, const struct resize *r, int d,
                  int64_t in_len, int64_t out_len, const char *name)
{
    struct kt_buf i0, i1, w;
    int64_t i;

    kt_buf_init(&i0);
    kt_buf_init(&i1);
    kt_buf_init(&w);
    for (i = 0; i < out_len; i++) {
        double x = source_coord(r, d, i, in_len, out_len);
        int64_t k0;
        x = x < 0 ? 0 : x > in_len - 1 ? (double)(in_len - 1) : x;
        k0 = (int64_t)floor(x);
        kt_buf_printf(&i0, "%s%lld", i ? ", " : "", (long long)k0);
        kt_buf_printf(&i1, "%s%lld", i ? ", " : "",
                      (long long)(k0 + 1 < in_len ? k0 + 1 : in_len - 1));
        kt_buf_printf(&w, "%s%.9g", i ? ", " : "", x - (double)k0);
    }
    kt_buf_printf(b,
                  "        static const long long %s0[] = {%s}, %s1[] = "
                  "{%s};\n        static const float w%s[] = {%s};\n",
                  name, i0.p, name, i1.p, name, w.p);
    kt_buf_free(&i0);
    kt_buf_free(&i1);
    kt_buf_free(&w);
}

static void
emit_linear(struct kt_buf *b, const struct kt_cc *c, const struct kt_cc_step *s,
            const struct resize *r)
{
    const struct kt_onnx_graph *g = c->net->g;
    const struct kt_onnx_node *n = &g->nodes[s->node];
    const struct kt_onnx_value *a = in_val(g, n, 0), *o = &g->values[n->out[0]];
    int nd = a->ndim, d;
    int64_t planes = 1;

    for (d = 0; d < nd - 2; d++)
        planes *= a->dims[d];
    kt_buf_puts(b, "    {\n");
    put_linear_tables(b, r, nd - 2, a->dims[nd - 2], o->dims[nd - 2], "y");
    put_linear_tables(b, r, nd - 1, a->dims[nd - 1], o->dims[nd - 1], "x");
    kt_buf_puts(b, "        rt_bilinear(");
    kt__cc_put_ref(b, c, &s->refs[s->nrefs - 1]);
    kt_buf_puts(b, ", ");
    kt__cc_put_ref(b, c, &s->refs[0]);
    kt_buf_printf(b,
                  ", %lld, %lld, %lld, %lld, %lld, y0, y1, wy, x0, x1, "
                  "wx);\n    }\n",
                  (long long)planes, (long long)a->dims[nd - 2],
                  (long long)a->dims[nd - 1], (long long)o->dims[nd - 2],
                  (long long)o->dims[nd - 1]);
}

int
kt__cc_layout_check(const struct kt_onnx_graph *g, const struct kt_onnx_node *n,
                    char *why, size_t len)
{
    int64_t first[KT_ONNX_MAX_DIMS], step[KT_ONNX_MAX_DIMS];
    struct resize r;

    if (strcmp(n->op, "Slice") == 0 && slice_params(g, n, first, step) != 0)
        return why_not(why, len, "starts/ends/axes/steps");
    if (strcmp(n->op, "Resize") == 0 || strcmp(n->op, "Upsample") == 0)
        return resize_params(g, n, &r, why, len);
    return 0;
}

void
kt__cc_emit_layout(struct kt_buf *b, const struct kt_cc *c,
                   const struct kt_cc_step *s)
{
    const struct kt_onnx_node *n = &c->net->g->nodes[s->node];
    struct resize r;
    char why[64];

    if (strcmp(n->op, "Slice") == 0) {
        emit_slice(b, c, s);
        return;
    }
    resize_params(c->net->g, n, &r, why, sizeof(why));
    if (r.linear)
        emit_linear(b, c, s, &r);
    else
        emit_nearest(b, c, s, &r);
}
