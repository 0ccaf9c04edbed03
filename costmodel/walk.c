/* walk.c - the loop-tree walk of feature extraction: validation, the loop stack and lets in scope at each store,
 * per-loop access counts, and the access geometry (footprints, strides,
 * dependence) those features are made of.  See cm_internal.h. */
#include "costmodel/cm_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct walk {
    struct kt__store_ctx c;
    int nloops; /* loops numbered so far (pass 2) */
    int *acc_count;
    kt__store_fn fn;
    void *arg;
    char *err;
    size_t errlen;
};

int64_t
kt__ext(const struct kt__store_ctx *c, int l)
{
    return c->loops[l].n->extent;
}

enum kt_annot
kt__ann(const struct kt__store_ctx *c, int l)
{
    const struct kt_node *n = c->loops[l].n;

    return n->ann == KT_ANN_NONE && c->window[n->var] ? KT_ANN_UNROLL : n->ann;
}

static int
check_affine(const struct kt_looptree *lt, const struct kt_affine *a,
             const struct kt_node *s, const char *what, char *err,
             size_t errlen)
{
    int i;

    if (a->n < 0 || a->n > KT_AFF_TERMS)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "costmodel: stage %d: %s index has %d terms", s->stage,
                         what, a->n);
    for (i = 0; i < a->n; i++)
        if (a->var[i] < 0 || a->var[i] >= lt->nvars)
            return kt_seterr(err, errlen, KT_EINVAL,
                             "costmodel: stage %d: %s index uses variable "
                             "%d of %d",
                             s->stage, what, a->var[i], lt->nvars);
    return 0;
}

static int
add_access(const struct kt_looptree *lt, struct kt__store_ctx *c,
           const struct kt_node *s, int buf, int is_write, int ndim,
           const struct kt_affine *idx, char *err, size_t errlen)
{
    const char *name;
    int d, rc;

    if (buf < 0 || buf >= lt->nbufs)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "costmodel: stage %d: access to buffer %d of %d",
                         s->stage, buf, lt->nbufs);
    name = lt->bufs[buf].name;
    if (ndim != lt->bufs[buf].ndim || ndim < 0 || ndim > KT_MAX_DIMS ||
        (ndim > 0 && idx == NULL))
        return kt_seterr(err, errlen, KT_EINVAL,
                         "costmodel: stage %d: buffer %s has %d dims but "
                         "is indexed with %d",
                         s->stage, name, lt->bufs[buf].ndim, ndim);
    for (d = 0; d < ndim; d++) {
        rc = check_affine(lt, &idx[d], s, name, err, errlen);
        if (rc < 0)
            return rc;
    }
    if (c->nacc >= KT__MAX_ACC)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "costmodel: stage %d: more than %d accesses in one "
                         "store",
                         s->stage, KT__MAX_ACC);
    c->acc[c->nacc].buf = buf;
    c->acc[c->nacc].is_write = is_write;
    c->acc[c->nacc].ndim = ndim;
    c->acc[c->nacc].idx = idx;
    c->nacc++;
    return 0;
}

static int
collect_loads(const struct kt_looptree *lt, struct kt__store_ctx *c,
              const struct kt_node *s, const struct kt_expr *e, int depth,
              char *err, size_t errlen)
{
    int rc;

    if (e == NULL)
        return 0;
    if (depth > 256)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "costmodel: stage %d: expression nested too deep",
                         s->stage);
    if (e->op < 0 || e->op >= KT_X_NOPS)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "costmodel: stage %d: bad expression op %d", s->stage,
                         (int)e->op);
    if (e->op == KT_X_LOAD)
        return add_access(lt, c, s, e->src, 0, e->ndim, e->idx, err, errlen);
    rc = collect_loads(lt, c, s, e->a, depth + 1, err, errlen);
    if (rc < 0)
        return rc;
    return collect_loads(lt, c, s, e->b, depth + 1, err, errlen);
}

/* Fills c->acc for store s: the write first, then loads in pre-order. */
static int
collect(const struct kt_looptree *lt, struct kt__store_ctx *c,
        const struct kt_node *s, char *err, size_t errlen)
{
    int rc;

    c->nacc = 0;
    c->store = s;
    rc = add_access(lt, c, s, s->buf, 1, s->ndim, s->idx, err, errlen);
    if (rc < 0)
        return rc;
    return collect_loads(lt, c, s, s->expr, 0, err, errlen);
}

/* Pass 1: validates node shapes, numbers loops and counts, for each loop,
 * the accesses to each buffer inside it. */
static int
pass1(struct walk *w, const struct kt_node *n, int *stack, int depth)
{
    const struct kt_looptree *lt = w->c.lt;
    int i, j, rc;

    if (n == NULL)
        return kt_seterr(w->err, w->errlen, KT_EINVAL,
                         "costmodel: NULL node in loop tree");
    if (n->nkids < 0 || (n->nkids > 0 && n->kids == NULL))
        return kt_seterr(w->err, w->errlen, KT_EINVAL,
                         "costmodel: stage %d: bad child list", n->stage);
    switch (n->kind) {
    case KT_N_LOOP:
        if (depth >= KT__MAX_DEPTH)
            return kt_seterr(w->err, w->errlen, KT_EINVAL,
                             "costmodel: stage %d: more than %d nested "
                             "loops",
                             n->stage, KT__MAX_DEPTH);
        if (n->var < 0 || n->var >= lt->nvars || n->extent < 1)
            return kt_seterr(w->err, w->errlen, KT_EINVAL,
                             "costmodel: stage %d: loop over variable %d "
                             "with extent %lld",
                             n->stage, n->var, (long long)n->extent);
        stack[depth++] = w->nloops++;
        break;
    case KT_N_LET:
        if (n->var < 0 || n->var >= lt->nvars || n->src_var < 0 ||
            n->src_var >= lt->nvars || n->div < 1)
            return kt_seterr(w->err, w->errlen, KT_EINVAL,
                             "costmodel: stage %d: bad let of variable %d "
                             "(source %d, div %lld)",
                             n->stage, n->var, n->src_var, (long long)n->div);
        break;
    case KT_N_ALLOC:
        if (n->buf < 0 || n->buf >= lt->nbufs)
            return kt_seterr(w->err, w->errlen, KT_EINVAL,
                             "costmodel: stage %d: allocation of buffer %d "
                             "of %d",
                             n->stage, n->buf, lt->nbufs);
        break;
    case KT_N_STORE:
        rc = collect(lt, &w->c, n, w->err, w->errlen);
        if (rc < 0)
            return rc;
        if (w->acc_count != NULL)
            for (i = 0; i < w->c.nacc; i++)
                for (j = 0; j < depth; j++)
                    w->acc_count[stack[j] * lt->nbufs + w->c.acc[i].buf]++;
        break;
    case KT_N_SEQ: break;
    default:
        return kt_seterr(w->err, w->errlen, KT_EINVAL,
                         "costmodel: stage %d: unknown node kind %d", n->stage,
                         (int)n->kind);
    }
    for (i = 0; i < n->nkids; i++) {
        rc = pass1(w, n->kids[i], stack, depth);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int
check_vars_in_scope(const struct kt__store_ctx *c, char *err, size_t errlen)
{
    int i, d, t, v;

    for (i = 0; i < c->nacc; i++)
        for (d = 0; d < c->acc[i].ndim; d++)
            for (t = 0; t < c->acc[i].idx[d].n; t++) {
                v = c->acc[i].idx[d].var[t];
                if (c->var_level[v] < 0 && !c->lets[v].defined)
                    return kt_seterr(err, errlen, KT_EINVAL,
                                     "costmodel: stage %d: buffer %s is "
                                     "indexed by variable %d, which no "
                                     "enclosing loop or let defines",
                                     c->store->stage,
                                     c->lt->bufs[c->acc[i].buf].name, v);
            }
    return 0;
}

/* Pass 2: maintains the loop stack and lets, and calls fn per store. */
static int
pass2(struct walk *w, const struct kt_node *n, int64_t outer)
{
    struct kt__store_ctx *c = &w->c;
    int i, rc, level = -1;

    switch (n->kind) {
    case KT_N_LOOP:
        level = c->depth++;
        c->loops[level].n = n;
        c->loops[level].id = w->nloops++;
        c->var_level[n->var] = level;
        outer *= n->extent;
        break;
    case KT_N_LET:
        c->lets[n->var].defined = 1;
        c->lets[n->var].src_var = n->src_var;
        c->lets[n->var].div = n->div;
        c->lets[n->var].mod = n->mod;
        break;
    case KT_N_ALLOC: c->alloc_outer[n->buf] = outer; break;
    case KT_N_STORE:
        rc = collect(c->lt, c, n, w->err, w->errlen);
        if (rc == 0)
            rc = check_vars_in_scope(c, w->err, w->errlen);
        if (rc == 0)
            rc = w->fn(c, w->arg);
        if (rc != 0)
            return rc;
        break;
    default: break;
    }
    for (i = 0; i < n->nkids; i++) {
        rc = pass2(w, n->kids[i], outer);
        if (rc != 0)
            return rc;
    }
    if (level >= 0) {
        c->var_level[n->var] = -1;
        c->depth--;
    }
    return 0;
}

int
kt__walk(const struct kt_looptree *lt, kt__store_fn fn, void *arg, char *err,
         size_t errlen)
{
    struct kt_codegen_opts o;
    struct walk *w;
    unsigned char *window = NULL;
    int stack[KT__MAX_DEPTH];
    int i, rc;

    if (lt == NULL || lt->nbufs < 0 ||
        lt->nbufs > (int)KT_ARRAY_LEN(lt->bufs) || lt->nvars < 0)
        return kt_seterr(err, errlen, KT_EINVAL, "costmodel: bad loop tree");
    if (lt->root == NULL)
        return 0;
    w = kt_xcalloc(1, sizeof(*w));
    w->c.lt = lt;
    w->fn = fn;
    w->arg = arg;
    w->err = err;
    w->errlen = errlen;
    rc = pass1(w, lt->root, stack, 0);
    if (rc < 0)
        goto out;
    w->acc_count = kt_xcalloc((size_t)w->nloops * (size_t)lt->nbufs + 1,
                              sizeof(int));
    w->nloops = 0;
    rc = pass1(w, lt->root, stack, 0);
    if (rc < 0)
        goto out;
    w->c.acc_count = w->acc_count;
    w->c.var_level = kt_xmalloc(((size_t)lt->nvars + 1) * sizeof(int));
    for (i = 0; i < lt->nvars; i++)
        w->c.var_level[i] = -1;
    w->c.lets = kt_xcalloc((size_t)lt->nvars + 1, sizeof(struct kt__let));
    w->c.alloc_outer = kt_xcalloc((size_t)lt->nbufs + 1, sizeof(int64_t));
    window = kt_xcalloc((size_t)lt->nvars + 1, 1);
    kt_codegen_default_opts(&o);
    kt_codegen_window_loops(lt, &o, window);
    w->c.window = window;
    w->nloops = 0;
    rc = pass2(w, lt->root, 1);
out:
    free(w->acc_count);
    free(w->c.var_level);
    free(w->c.lets);
    free(w->c.alloc_outer);
    free(window);
    free(w);
    return rc;
}

/* Span (values - 1) of variable v while loops l.. run, loop l itself for
 * only its first ext_l iterations when ext_l > 0. */
static double
var_span(const struct kt__store_ctx *c, int v, int l, int64_t ext_l, int guard)
{
    const struct kt__let *let;
    double s, n;
    int lv = c->var_level[v];

    if (lv >= 0) {
        if (lv < l)
            return 0.0;
        return (double)((lv == l && ext_l > 0 ? ext_l : kt__ext(c, lv)) - 1);
    }
    let = &c->lets[v];
    if (!let->defined || guard > 8)
        return 0.0;
    s = var_span(c, let->src_var, l, ext_l, guard + 1);
    if (s == 0.0)
        return 0.0;
    n = ceil((s + 1.0) / (double)let->div);
    if (let->mod > 0 && n > (double)let->mod)
        n = (double)let->mod;
    return n - 1.0;
}

/* d(v)/d(loop l) on average. */
static double
var_rate(const struct kt__store_ctx *c, int v, int l, int guard)
{
    const struct kt__let *let;
    int lv = c->var_level[v];

    if (lv >= 0)
        return lv == l ? 1.0 : 0.0;
    let = &c->lets[v];
    if (!let->defined || guard > 8 || let->mod == 1)
        return 0.0;
    return var_rate(c, let->src_var, l, guard + 1) / (double)let->div;
}

static double
dim_range(const struct kt__store_ctx *c, const struct kt__access *a, int d,
          int l, int64_t ext_l)
{
    const struct kt_affine *x = &a->idx[d];
    double r = 1.0;
    int t;
    int64_t shape = c->lt->bufs[a->buf].shape[d];

    for (t = 0; t < x->n; t++)
        if (x->k[t] != 0)
            r += fabs((double)x->k[t]) * var_span(c, x->var[t], l, ext_l, 0);
    if (shape > 0 && r > (double)shape)
        r = (double)shape;
    return r;
}

double
kt__footprint(const struct kt__store_ctx *c, const struct kt__access *a, int l)
{
    return kt__footprint_part(c, a, l, 0);
}

double
kt__footprint_part(const struct kt__store_ctx *c, const struct kt__access *a,
                   int l, int64_t ext_l)
{
    double e = 1.0;
    int d;

    for (d = 0; d < a->ndim; d++)
        e *= dim_range(c, a, d, l, ext_l);
    return e;
}

double
kt__footprint_last(const struct kt__store_ctx *c, const struct kt__access *a,
                   int l)
{
    double run = 1.0, r;
    int d;

    for (d = a->ndim - 1; d >= 0; d--) {
        r = dim_range(c, a, d, l, 0);
        run *= r;
        if (r < (double)c->lt->bufs[a->buf].shape[d])
            break;
    }
    return run;
}

int
kt__depends(const struct kt__store_ctx *c, const struct kt__access *a, int l)
{
    return kt__stride(c, a, l) != 0.0;
}

double
kt__stride(const struct kt__store_ctx *c, const struct kt__access *a, int l)
{
    const struct kt_lbuf *b = &c->lt->bufs[a->buf];
    double s = 0.0, rs = 1.0;
    int d, t;

    for (d = a->ndim - 1; d >= 0; d--) {
        for (t = 0; t < a->idx[d].n; t++)
            if (a->idx[d].k[t] != 0)
                s += (double)a->idx[d].k[t] * rs *
                     var_rate(c, a->idx[d].var[t], l, 0);
        rs *= (double)(b->shape[d] > 0 ? b->shape[d] : 1);
    }
    return s;
}

double
kt__cm_buf_elems(const struct kt_lbuf *b)
{
    double e = 1;
    int d;

    for (d = 0; d < b->ndim; d++)
        e *= (double)(b->shape[d] > 0 ? b->shape[d] : 1);
    return e;
}

double
kt__level_bytes(const struct kt__store_ctx *c, int l)
{
    double tot = 0, b, cap;
    int i, j, seen;

    for (i = 0; i < c->nacc; i++) {
        seen = 0;
        for (j = 0; j < i && !seen; j++)
            seen = c->acc[j].buf == c->acc[i].buf;
        if (seen)
            continue;
        b = 0;
        for (j = i; j < c->nacc; j++)
            if (c->acc[j].buf == c->acc[i].buf)
                b += kt__footprint(c, &c->acc[j], l);
        cap = kt__cm_buf_elems(&c->lt->bufs[c->acc[i].buf]);
        tot += b < cap ? b : cap;
    }
    return tot * KT_F_ELEM_BYTES;
}

static void
ops_expr(const struct kt_expr *e, struct kt__ops *o)
{
    const struct kt_expr *m = NULL, *other = NULL;

    if (e == NULL)
        return;
    switch (e->op) {
    case KT_X_CONST: return;
    case KT_X_LOAD:
        if (e->guarded)
            o->select += 1;
        return;
    case KT_X_ADD:
    case KT_X_SUB:
        if (e->a != NULL && e->a->op == KT_X_MUL) {
            m = e->a;
            other = e->b;
        } else if (e->b != NULL && e->b->op == KT_X_MUL) {
            m = e->b;
            other = e->a;
        }
        if (m != NULL) {
            o->mad += 1;
            ops_expr(m->a, o);
            ops_expr(m->b, o);
            ops_expr(other, o);
            return;
        }
        o->addsub += 1;
        break;
    case KT_X_MUL: o->mul += 1; break;
    case KT_X_DIV: o->div += 1; break;
    case KT_X_MAX:
    case KT_X_MIN:
    case KT_X_RELU: o->cmp += 1; break;
    case KT_X_NEG:
    case KT_X_ABS: o->other += 1; break;
    default: o->math += 1; break;
    }
    ops_expr(e->a, o);
    ops_expr(e->b, o);
}

void
kt__count_ops(const struct kt_node *store, struct kt__ops *o)
{
    memset(o, 0, sizeof(*o));
    ops_expr(store->expr, o);
    switch (store->op) {
    case KT_SUM:
        if (store->expr != NULL && store->expr->op == KT_X_MUL) {
            o->mul -= 1;
            o->mad += 1;
        } else {
            o->addsub += 1;
        }
        break;
    case KT_MAXR:
    case KT_MINR: o->cmp += 1; break;
    default: break;
    }
}

double
kt__ops_flops(const struct kt__ops *o)
{
    return 2.0 * o->mad + o->addsub + o->mul + o->div + o->cmp + o->math +
           o->other;
}
