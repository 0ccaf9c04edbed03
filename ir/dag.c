/* dag.c - builds a compute DAG from a parsed definition: tensor order and
 * kinds, shapes, axis extents, padding stages, FLOPs, and the canonical
 * workload key (see docs/compute.md). */
#include "ir/front.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growable list of the loads of one expression, in traversal order. */
struct loads {
    struct kt_expr **v;
    int n, cap;
};

static void
collect_loads(struct kt_expr *e, struct loads *l)
{
    if (e == NULL)
        return;
    if (e->op == KT_X_LOAD) {
        if (l->n == l->cap) {
            l->cap = l->cap ? l->cap * 2 : 16;
            l->v = kt_xrealloc(l->v, sizeof(*l->v) * (size_t)l->cap);
        }
        l->v[l->n++] = e;
    }
    collect_loads(e->a, l);
    collect_loads(e->b, l);
}

struct builder {
    struct kt__prog *p;
    struct kt_dag *d;
    int map[KT_MAX_TENSORS];      /* raw -> DAG tensor */
    int given[KT_MAX_TENSORS];    /* shape came with the text */
    int is_const[KT_MAX_TENSORS]; /* ... marked a weight */
    int64_t shape[KT_MAX_TENSORS][KT_MAX_DIMS];
    char *err;
    size_t errlen;
};

static int
apply_shapes(struct builder *bd, const struct kt_shape *shapes,
             const int *is_const, int nshapes)
{
    struct kt__prog *p = bd->p;
    const struct kt_shape *s;
    int i, t, k;
    int64_t elems;

    for (i = 0; i < nshapes; i++) {
        s = &shapes[i];
        for (t = 0; t < p->ntensors; t++)
            if (strncmp(p->tname[t], s->name, KT_MAX_NAME) == 0)
                break;
        if (t == p->ntensors)
            return kt_seterr(bd->err, bd->errlen, KT_ESHAPE,
                             "a shape is given for tensor '%.*s', which the "
                             "definition does not use",
                             KT_MAX_NAME - 1, s->name);
        if (bd->given[t])
            return kt_seterr(bd->err, bd->errlen, KT_ESHAPE,
                             "tensor %s: two shapes are given", p->tname[t]);
        if (s->ndim != p->ndim[t])
            return kt_seterr(bd->err, bd->errlen, KT_ESHAPE,
                             "tensor %s: the definition uses %d indexes but "
                             "its shape has %d dims",
                             p->tname[t], p->ndim[t], s->ndim);
        elems = 1;
        for (k = 0; k < s->ndim; k++) {
            if (s->dims[k] <= 0 || s->dims[k] > KT_IDX_LIMIT)
                return kt_seterr(bd->err, bd->errlen, KT_ESHAPE,
                                 "tensor %s: dim %d is %lld; dims must be in "
                                 "1..%lld",
                                 p->tname[t], k, (long long)s->dims[k],
                                 (long long)KT_IDX_LIMIT);
            if (__builtin_mul_overflow(elems, s->dims[k], &elems) ||
                elems > KT_IDX_LIMIT)
                return kt_seterr(bd->err, bd->errlen, KT_ESHAPE,
                                 "tensor %s has too many elements (at most "
                                 "%lld)",
                                 p->tname[t], (long long)KT_IDX_LIMIT);
            bd->shape[t][k] = s->dims[k];
        }
        bd->given[t] = 1;
        bd->is_const[t] = is_const != NULL && is_const[i];
    }
    return KT_OK;
}

static int
add_inputs(struct builder *bd)
{
    struct kt__prog *p = bd->p;
    struct kt_tensor *x;
    int t;

    for (t = 0; t < p->ntensors; t++) {
        if (p->writer[t] >= 0)
            continue;
        if (!bd->given[t])
            return kt_seterr(bd->err, bd->errlen, KT_ESHAPE,
                             "input tensor %s (line %d, column %d) has no "
                             "shape",
                             p->tname[t], p->line[t], p->col[t]);
        x = &bd->d->tensors[bd->d->ntensors];
        snprintf(x->name, sizeof(x->name), "%s", p->tname[t]);
        x->kind = KT_TENSOR_INPUT;
        x->ndim = p->ndim[t];
        memcpy(x->shape, bd->shape[t], sizeof(x->shape));
        x->producer = -1;
        x->is_const = bd->is_const[t] != 0;
        bd->map[t] = bd->d->ntensors++;
    }
    return KT_OK;
}

/* Records one source of an axis extent; all sources must agree. */
static int
set_extent(struct builder *bd, const struct kt__pstmt *st, int a, int64_t *ext,
           char (*from)[48], int64_t v, const char *src)
{
    if (ext[a] == 0) {
        ext[a] = v;
        snprintf(from[a], sizeof(from[a]), "%s", src);
        return KT_OK;
    }
    if (ext[a] == v)
        return KT_OK;
    return kt_seterr(bd->err, bd->errlen, KT_ESHAPE,
                     "line %d: axis %s: extent %lld from %s but %lld from %s",
                     st->line, st->axname[a], (long long)ext[a], from[a],
                     (long long)v, src);
}

/* A read where the axis is alone, of a tensor dim differing from an extent
 * given by 'where', 'pad' or the output's shape: a longer dim is read in
 * part; a shorter one only along a 'pad' axis (the builder pads it). */
static int
check_read_extent(struct builder *bd, const struct kt__pstmt *st, int a,
                  int64_t ext, const char *from, int64_t dim, const char *src)
{
    if (dim >= ext || st->padto[a] != 0)
        return KT_OK;
    return kt_seterr(bd->err, bd->errlen, KT_ESHAPE,
                     "line %d: axis %s: extent %lld from %s but %lld from %s "
                     "(to read past its end, give the extent with 'pad "
                     "%s:%lld')",
                     st->line, st->axname[a], (long long)ext, from,
                     (long long)dim, src, st->axname[a], (long long)ext);
}

/* A 'pad' axis iterates over its padded extent; the written tensor keeps
 * the extent 'where' or the output's shape gives (stores past it are
 * dropped: only a plain assignment may do that), else the padded one. */
static int
apply_pad(struct builder *bd, const struct kt__pstmt *st, int a, int64_t *ext,
          char (*from)[48], int64_t *tshape)
{
    if (ext[a] > st->padto[a])
        return kt_seterr(bd->err, bd->errlen, KT_ESHAPE,
                         "line %d: axis %s: pad %lld is shorter than its "
                         "extent %lld from %s",
                         st->line, st->axname[a], (long long)st->padto[a],
                         (long long)ext[a], from[a]);
    if (ext[a] != 0 && ext[a] < st->padto[a] &&
        (a >= st->nspatial || st->op != KT_ASSIGN))
        return kt_seterr(bd->err, bd->errlen, KT_ESHAPE,
                         "line %d: axis %s: only a plain assignment (=) may "
                         "iterate past its output's extent %lld; pad the "
                         "reduction's output instead and copy it",
                         st->line, st->axname[a], (long long)ext[a]);
    if (a < st->nspatial)
        tshape[a] = ext[a] != 0 ? ext[a] : st->padto[a];
    ext[a] = st->padto[a];
    snprintf(from[a], sizeof(from[a]), "pad");
    return KT_OK;
}

static int
infer_extents(struct builder *bd, const struct kt__pstmt *st,
              const struct loads *l, int64_t *ext, int64_t *tshape)
{
    char from[KT_MAX_AXES][48], src[48];
    int given[KT_MAX_AXES] = {0};
    const struct kt_expr *e;
    int a, i, d, rc;

    memset(ext, 0, sizeof(*ext) * KT_MAX_AXES);
    for (a = 0; a < st->naxes; a++)
        if (st->where[a] != 0 &&
            (rc = set_extent(bd, st, a, ext, from, st->where[a], "where")) !=
                KT_OK)
            return rc;
    if (bd->given[st->out]) {
        for (d = 0; d < st->nspatial; d++) {
            snprintf(src, sizeof(src), "%s dim %d", bd->p->tname[st->out], d);
            rc = set_extent(bd, st, d, ext, from, bd->shape[st->out][d], src);
            if (rc != KT_OK)
                return rc;
        }
    }
    for (a = 0; a < st->naxes; a++)
        if (st->padto[a] != 0 &&
            (rc = apply_pad(bd, st, a, ext, from, tshape)) != KT_OK)
            return rc;
    for (a = 0; a < st->naxes; a++)
        given[a] = ext[a] != 0;
    for (i = 0; i < l->n; i++) {
        e = l->v[i];
        for (d = 0; d < e->ndim; d++) {
            if (e->idx[d].n != 1 || e->idx[d].k[0] != 1 || e->idx[d].c != 0)
                continue;
            a = e->idx[d].var[0];
            snprintf(src, sizeof(src), "%s dim %d", bd->p->tname[e->src], d);
            rc = given[a] ? check_read_extent(bd, st, a, ext[a], from[a],
                                              bd->shape[e->src][d], src)
                          : set_extent(bd, st, a, ext, from,
                                       bd->shape[e->src][d], src);
            if (rc != KT_OK)
                return rc;
        }
    }
    for (a = 0; a < st->naxes; a++) {
        if (ext[a] == 0)
            return kt_seterr(bd->err, bd->errlen, KT_ESHAPE,
                             "line %d: axis %s: extent unknown (it is never "
                             "alone in an index of a tensor with a known "
                             "shape); give it with 'where %s:N'",
                             st->line, st->axname[a], st->axname[a]);
        if (a < st->nspatial && st->padto[a] == 0)
            tshape[a] = ext[a];
    }
    return KT_OK;
}

/* Range [*lo, *hi] of affine a over axes in [0, ext). */
static int
aff_range(const struct kt_affine *a, const int64_t *ext, int64_t *lo,
          int64_t *hi)
{
    int64_t l = a->c, h = a->c, t;
    int i;

    for (i = 0; i < a->n; i++) {
        if (__builtin_mul_overflow(a->k[i], ext[a->var[i]] - 1, &t))
            return -1;
        if (t < 0 ? __builtin_add_overflow(l, t, &l)
                  : __builtin_add_overflow(h, t, &h))
            return -1;
    }
    *lo = l;
    *hi = h;
    return 0;
}

static int
name_taken(const struct builder *bd, const char *name)
{
    int t;

    for (t = 0; t < bd->p->ntensors; t++)
        if (strcmp(bd->p->tname[t], name) == 0)
            return 1;
    for (t = 0; t < bd->d->ntensors; t++)
        if (strcmp(bd->d->tensors[t].name, name) == 0)
            return 1;
    return 0;
}

static void
pad_name(const struct builder *bd, const char *base, char out[KT_MAX_NAME])
{
    char suffix[16];
    int n, len;

    for (n = 0;; n++) {
        if (n == 0)
            snprintf(suffix, sizeof(suffix), "_pad");
        else
            snprintf(suffix, sizeof(suffix), "_pad%d", n);
        len = KT_MAX_NAME - 1 - (int)strlen(suffix);
        snprintf(out, KT_MAX_NAME, "%.*s%s", len, base, suffix);
        if (!name_taken(bd, out))
            return;
    }
}

static int
room(struct builder *bd, const struct kt__pstmt *st)
{
    if (bd->d->ntensors < KT_MAX_TENSORS && bd->d->nstages < KT_MAX_STAGES)
        return KT_OK;
    return kt_seterr(bd->err, bd->errlen, KT_ESHAPE,
                     "line %d: too many tensors or stages with padding (at "
                     "most %d tensors, %d stages)",
                     st->line, KT_MAX_TENSORS, KT_MAX_STAGES);
}

/* Appends the padding stage of raw tensor x read by statement st over
 * [lo, hi]; returns its DAG tensor in *pt. */
static int
add_pad(struct builder *bd, const struct kt__pstmt *st, int x,
        const int64_t *lo, const int64_t *hi, int *pt)
{
    struct kt_dag *d = bd->d;
    struct kt_tensor *t;
    struct kt_stage *s;
    struct kt_expr *e;
    int k, rc;
    int64_t elems = 1;

    if ((rc = room(bd, st)) != KT_OK)
        return rc;
    t = &d->tensors[d->ntensors];
    s = &d->stages[d->nstages];
    pad_name(bd, bd->p->tname[x], t->name);
    t->kind = KT_TENSOR_INTERMEDIATE;
    t->ndim = bd->p->ndim[x];
    t->producer = d->nstages;
    memcpy(s->name, t->name, sizeof(s->name));
    s->out = d->ntensors;
    s->naxes = s->nspatial = t->ndim;
    s->op = KT_ASSIGN;
    s->is_pad = 1;
    e = kt_expr_new(KT_X_LOAD);
    e->src = bd->map[x];
    e->ndim = t->ndim;
    e->idx = kt_xcalloc((size_t)t->ndim, sizeof(*e->idx));
    e->guarded = 1;
    e->pad_value = st->op == KT_MAXR   ? -INFINITY
                   : st->op == KT_MINR ? INFINITY
                                       : 0.0f;
    for (k = 0; k < t->ndim; k++) {
        t->shape[k] = hi[k] - lo[k] + 1;
        if (t->shape[k] > KT_IDX_LIMIT ||
            __builtin_mul_overflow(elems, t->shape[k], &elems) ||
            elems > KT_IDX_LIMIT) {
            kt_expr_free(e);
            return kt_seterr(bd->err, bd->errlen, KT_ESHAPE,
                             "line %d: padded %s would have too many "
                             "elements",
                             st->line, bd->p->tname[x]);
        }
        snprintf(s->axes[k].name, sizeof(s->axes[k].name), "d%d", k);
        s->axes[k].extent = t->shape[k];
        kt_aff_var(&e->idx[k], k, 1);
        e->idx[k].c = lo[k];
    }
    s->body = e;
    *pt = d->ntensors++;
    d->nstages++;
    return KT_OK;
}

/* Pads every tensor that statement st reads out of bounds, then rewrites
 * the loads of body (a clone of st's body) to DAG tensor numbers. */
static int
pad_reads(struct builder *bd, const struct kt__pstmt *st, const int64_t *ext,
          struct kt_expr *body)
{
    int64_t lo[KT_MAX_DIMS], hi[KT_MAX_DIMS], l, h;
    int64_t off[KT_MAX_TENSORS][KT_MAX_DIMS];
    int done[KT_MAX_TENSORS] = {0}, dst[KT_MAX_TENSORS];
    struct loads ld = {0};
    struct kt_expr *e;
    int i, j, k, x, need, rc = KT_OK;

    collect_loads(body, &ld);
    for (i = 0; i < ld.n; i++) {
        x = ld.v[i]->src;
        if (done[x])
            continue;
        done[x] = 1;
        dst[x] = bd->map[x];
        need = 0;
        for (k = 0; k < bd->p->ndim[x]; k++) {
            lo[k] = 0;
            hi[k] = bd->shape[x][k] - 1;
        }
        for (j = i; j < ld.n; j++) {
            e = ld.v[j];
            if (e->src != x)
                continue;
            for (k = 0; k < e->ndim; k++) {
                if (aff_range(&e->idx[k], ext, &l, &h) != 0 ||
                    l < -KT_IDX_LIMIT || h > KT_IDX_LIMIT) {
                    rc = kt_seterr(bd->err, bd->errlen, KT_ESHAPE,
                                   "line %d: index %d of %s is out of range "
                                   "(too large)",
                                   st->line, k, bd->p->tname[x]);
                    goto out;
                }
                if (l < 0 || h > bd->shape[x][k] - 1)
                    need = 1;
                lo[k] = l < lo[k] ? l : lo[k];
                hi[k] = h > hi[k] ? h : hi[k];
            }
        }
        for (k = 0; k < bd->p->ndim[x]; k++)
            off[x][k] = need ? lo[k] : 0;
        if (need && (rc = add_pad(bd, st, x, lo, hi, &dst[x])) != KT_OK)
            goto out;
    }
    for (i = 0; i < ld.n; i++) {
        e = ld.v[i];
        x = e->src;
        for (k = 0; k < e->ndim; k++)
            e->idx[k].c -= off[x][k];
        e->src = dst[x];
    }
out:
    free(ld.v);
    return rc;
}

static int
add_stage(struct builder *bd, int si)
{
    const struct kt__pstmt *st = &bd->p->st[si];
    struct kt_dag *d = bd->d;
    struct kt_expr *body = NULL;
    struct loads ld = {0};
    struct kt_tensor *t;
    struct kt_stage *s;
    int64_t ext[KT_MAX_AXES], tshape[KT_MAX_AXES], elems = 1;
    int a, rc;

    collect_loads(st->body, &ld);
    rc = infer_extents(bd, st, &ld, ext, tshape);
    free(ld.v);
    if (rc != KT_OK)
        return rc;
    for (a = 0; a < st->nspatial; a++) {
        bd->shape[st->out][a] = tshape[a];
        if (__builtin_mul_overflow(elems, ext[a], &elems) ||
            elems > KT_IDX_LIMIT)
            return kt_seterr(bd->err, bd->errlen, KT_ESHAPE,
                             "line %d: tensor %s has too many elements",
                             st->line, bd->p->tname[st->out]);
    }
    body = kt_expr_clone(st->body);
    if ((rc = pad_reads(bd, st, ext, body)) != KT_OK ||
        (rc = room(bd, st)) != KT_OK) {
        kt_expr_free(body);
        return rc;
    }
    t = &d->tensors[d->ntensors];
    snprintf(t->name, sizeof(t->name), "%s", bd->p->tname[st->out]);
    t->ndim = st->nspatial;
    memcpy(t->shape, bd->shape[st->out], sizeof(t->shape));
    t->producer = d->nstages;
    s = &d->stages[d->nstages];
    memcpy(s->name, t->name, sizeof(s->name));
    s->out = d->ntensors;
    s->naxes = st->naxes;
    s->nspatial = st->nspatial;
    for (a = 0; a < st->naxes; a++) {
        snprintf(s->axes[a].name, sizeof(s->axes[a].name), "%s", st->axname[a]);
        s->axes[a].extent = ext[a];
        s->axes[a].reduce = a >= st->nspatial;
    }
    s->op = st->op;
    s->body = body;
    bd->map[st->out] = d->ntensors++;
    d->nstages++;
    return KT_OK;
}

static void
finish(struct kt_dag *d)
{
    struct kt_buf b;
    double iters;
    int t, s, a;

    for (t = 0; t < d->ntensors; t++) {
        if (d->tensors[t].producer < 0)
            continue;
        d->tensors[t].kind = KT_TENSOR_OUTPUT;
        for (s = 0; s < d->nstages; s++)
            if (kt_expr_reads(d->stages[s].body, t))
                d->tensors[t].kind = KT_TENSOR_INTERMEDIATE;
    }
    d->flops = 0;
    for (s = 0; s < d->nstages; s++) {
        if (d->stages[s].is_pad)
            continue;
        iters = 1;
        for (a = 0; a < d->stages[s].naxes; a++)
            iters *= (double)kt__dag_useful_extent(d, &d->stages[s], a);
        d->flops += (kt_expr_flops(d->stages[s].body) +
                     (d->stages[s].op != KT_ASSIGN)) *
                    iters;
    }
    kt_buf_init(&b);
    kt__dag_print_sep(d, &b, ';');
    for (t = 0; t < d->ntensors; t++) {
        if (d->tensors[t].kind != KT_TENSOR_INPUT)
            continue;
        kt_buf_printf(&b, ";%s:", d->tensors[t].name);
        for (a = 0; a < d->tensors[t].ndim; a++)
            kt_buf_printf(&b, "%s%lld", a ? "x" : "",
                          (long long)d->tensors[t].shape[a]);
        if (d->tensors[t].is_const)
            kt_buf_puts(&b, ":const");
    }
    d->key = kt_buf_take(&b);
    kt_hash_hex(kt_hash64(d->key, strlen(d->key)), d->hash);
}

int
kt_dag_parse(const char *text, const struct kt_shape *shapes, int nshapes,
             struct kt_dag **out, char *err, size_t errlen)
{
    return kt_dag_parse_weights(text, shapes, NULL, nshapes, out, err, errlen);
}

int
kt_dag_parse_weights(const char *text, const struct kt_shape *shapes,
                     const int *is_const, int nshapes, struct kt_dag **out,
                     char *err, size_t errlen)
{
    struct builder *bd;
    int rc, s;

    *out = NULL;
    if (text == NULL || nshapes < 0 || (nshapes > 0 && shapes == NULL))
        return kt_seterr(err, errlen, KT_EINVAL,
                         "kt_dag_parse: no text or bad shape list");
    bd = kt_xcalloc(1, sizeof(*bd));
    bd->p = kt_xcalloc(1, sizeof(*bd->p));
    bd->d = kt_xcalloc(1, sizeof(*bd->d));
    bd->err = err;
    bd->errlen = errlen;
    if ((rc = kt__prog_parse(text, bd->p, err, errlen)) != KT_OK ||
        (rc = apply_shapes(bd, shapes, is_const, nshapes)) != KT_OK ||
        (rc = add_inputs(bd)) != KT_OK)
        goto fail;
    for (s = 0; s < bd->p->nstmts; s++)
        if ((rc = add_stage(bd, s)) != KT_OK)
            goto fail;
    finish(bd->d);
    *out = bd->d;
    bd->d = NULL;
fail:
    kt_dag_free(bd->d);
    kt__prog_free(bd->p);
    free(bd->p);
    free(bd);
    return rc;
}

void
kt_dag_free(struct kt_dag *dag)
{
    int s;

    if (dag == NULL)
        return;
    for (s = 0; s < dag->nstages; s++)
        kt_expr_free(dag->stages[s].body);
    free(dag->key);
    free(dag);
}

int
kt_dag_find_tensor(const struct kt_dag *dag, const char *name)
{
    int t;

    for (t = 0; t < dag->ntensors; t++)
        if (strcmp(dag->tensors[t].name, name) == 0)
            return t;
    return -1;
}

int64_t
kt_tensor_elems(const struct kt_tensor *t)
{
    int64_t n = 1;
    int d;

    for (d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}
