/* lower_region.c - bound inference for the lowering: the effective split
 * lengths of an attached stage, axis values from part bindings, the region
 * of a tensor a stage reads (interval arithmetic on affine indexes), and
 * buffer indexes of local and packed tiles (docs/schedule.md, Lowering). */
#include "ir/lower_int.h"

#include <stdio.h>
#include <string.h>
/* Effective part extents once the axis covers 'range' points: inner parts
 * keep their lengths while they tile the range, then shrink to 1; the
 * outermost part takes what is left. */
int
kt__lower_infer_parts(struct lower *L, struct snest *n, int a, int64_t range)
{
    const struct kt_sstage *s = n->ss;
    int64_t rem = range;
    int p;

    for (p = s->nparts[a] - 1; p >= 1; p--) {
        int64_t e = s->part_extent[a][p];
        if (rem % e == 0) {
            n->pe[a][p] = e;
            rem /= e;
        } else if (rem == 1) {
            n->pe[a][p] = 1;
        } else {
            return FAIL(L,
                        "stage %s: axis %s covers %lld points here, which "
                        "its split lengths cannot tile",
                        s->name, s->axes[a].name, (long long)range);
        }
    }
    n->pe[a][0] = rem;
    return KT_OK;
}

static int64_t
part_stride(const struct snest *n, int a, int p)
{
    int64_t st = 1;
    int q;

    for (q = p + 1; q < n->ss->nparts[a]; q++)
        st *= n->pe[a][q];
    return st;
}

/* Value of axis a from the current part bindings; unbound parts become
 * pseudo variables when 'pseudo' is set (for bound inference), else 0. */
static int
axis_expr(const struct snest *n, int a, int pseudo, struct kt_affine *out)
{
    int p, rc = KT_OK;

    *out = n->off[a];
    for (p = 0; p < n->ss->nparts[a] && rc == KT_OK; p++) {
        int64_t stride = part_stride(n, a, p);
        if (n->pe[a][p] == 1)
            continue;
        if (n->bound[a][p])
            rc = kt_aff_add(out, &n->partval[a][p], stride);
        else if (pseudo)
            rc = kt_aff_add_term(out, PSEUDO + a * KT_MAX_PARTS + p, stride);
    }
    return rc;
}

int
kt__lower_all_axis_exprs(const struct snest *n, int pseudo,
                         struct kt_affine *ax)
{
    int a, rc;

    for (a = 0; a < n->ss->naxes; a++) {
        rc = axis_expr(n, a, pseudo, &ax[a]);
        if (rc != KT_OK)
            return rc;
    }
    return KT_OK;
}


/* Index into tensor t's buffer of the element at idx (ndim entries): for
 * local and packed tiles shifted by the region offset, dims in buffer
 * order, a prepacked buffer's tile variables first.  Returns the buffer's
 * ndim, -1 when an index grows too long. */
int
kt__lower_buf_index(const struct lower *L, int t, const struct kt_affine *idx,
                    int ndim, struct kt_affine *out)
{
    int i, nl = L->tnlead[t];

    for (i = 0; i < nl; i++)
        kt_aff_const(&out[i], 0);
    for (i = 0; i < L->tnleadvar[t]; i++)
        if (kt_aff_add_term(&out[L->tlead[t][i].dim], L->tlead[t][i].var,
                            L->tlead[t][i].k) != KT_OK)
            return -1;
    for (i = 0; i < ndim; i++) {
        int d = L->tperm[t][i];
        out[nl + i] = idx[d];
        if (kt_aff_add(&out[nl + i], &L->toff[t][d], -1) != KT_OK)
            return -1;
    }
    return nl + ndim;
}

/* A new buffer for the output of stage ps; NULL when the table is full. */
struct kt_lbuf *
kt__lower_new_stage_buf(struct lower *L, const struct kt_sstage *ps,
                        enum kt_buf_scope scope, int ndim)
{
    struct kt_lbuf *b;

    if (L->lt->nbufs == (int)KT_ARRAY_LEN(L->lt->bufs))
        return NULL;
    b = &L->lt->bufs[L->lt->nbufs];
    memset(b, 0, sizeof(*b));
    snprintf(b->name, sizeof(b->name), "%s", ps->name);
    b->scope = scope;
    b->tensor = ps->out;
    b->arg = -1;
    b->ndim = ndim;
    L->tbuf[ps->out] = L->lt->nbufs++;
    return b;
}

int
kt__lower_is_tile(const struct lower *L, int b)
{
    return L->lt->bufs[b].scope == KT_BUF_LOCAL ||
           L->lt->bufs[b].scope == KT_BUF_PACKED;
}

int
kt__lower_is_permuted(const struct lower *L, int t)
{
    int d;

    for (d = 0; d < KT_MAX_DIMS; d++)
        if (L->tperm[t][d] != d)
            return 1;
    return 0;
}

/* Rewrites loads: tensor numbers become buffer numbers, and reads of local
 * and packed tiles are shifted by their region offsets (and reads of a
 * permuted root buffer reordered). */
int
kt__lower_map_loads(struct lower *L, struct kt_expr *e)
{
    int d, b, rc;

    if (e == NULL)
        return KT_OK;
    if (e->op == KT_X_LOAD) {
        int t = e->src;
        b = L->tbuf[t];
        if (b < 0)
            return FAIL(L, "%s is read before it is computed",
                        L->st->tensors[t].name);
        if (kt__lower_is_tile(L, b) || kt__lower_is_permuted(L, t)) {
            struct kt_affine idx[KT_MAX_DIMS];
            if (e->guarded && kt__lower_is_tile(L, b))
                return FAIL(L, "guarded read of local tile %s",
                            L->lt->bufs[b].name);
            d = kt__lower_buf_index(L, t, e->idx, e->ndim, idx);
            if (d < 0)
                return FAIL(L, "index expression too long");
            if (d != e->ndim)
                e->idx = kt_xrealloc(e->idx, sizeof(*e->idx) * (size_t)d);
            memcpy(e->idx, idx, sizeof(*idx) * (size_t)d);
            e->ndim = d;
        }
        e->src = b;
    }
    rc = kt__lower_map_loads(L, e->a);
    if (rc == KT_OK)
        rc = kt__lower_map_loads(L, e->b);
    return rc;
}

/* Interval of affine a over its pseudo variables: min is affine in the
 * bound variables, the extent a constant. */
static void
split_range(const struct snest *n, const struct kt_affine *a,
            struct kt_affine *min, int64_t *extent)
{
    int i;

    kt_aff_const(min, a->c);
    *extent = 1;
    for (i = 0; i < a->n; i++) {
        if (a->var[i] >= PSEUDO) {
            int ax = (a->var[i] - PSEUDO) / KT_MAX_PARTS;
            int p = (a->var[i] - PSEUDO) % KT_MAX_PARTS;
            int64_t span = a->k[i] * (n->pe[ax][p] - 1);
            if (span < 0)
                min->c += span;
            *extent += span < 0 ? -span : span;
        } else {
            kt_aff_add_term(min, a->var[i], a->k[i]);
        }
    }
}

static int
same_linear(const struct kt_affine *a, const struct kt_affine *b)
{
    int i;

    if (a->n != b->n)
        return 0;
    for (i = 0; i < a->n; i++)
        if (kt_aff_coef(b, a->var[i]) != a->k[i])
            return 0;
    return 1;
}

int
kt__lower_collect_region(struct lower *L, const struct snest *n,
                         const struct kt_expr *e, int t,
                         const struct kt_affine *ax, struct region *r)
{
    int d, rc;

    if (e == NULL)
        return KT_OK;
    if (e->op == KT_X_LOAD && e->src == t) {
        for (d = 0; d < e->ndim; d++) {
            struct kt_affine idx, min;
            int64_t ext;
            rc = kt_aff_compose(&idx, &e->idx[d], ax, n->ss->naxes);
            if (rc != KT_OK)
                return FAIL(L, "index expression too long");
            split_range(n, &idx, &min, &ext);
            if (!r->found) {
                r->base[d] = min;
                r->base[d].c = 0;
                r->lo[d] = min.c;
                r->hi[d] = min.c + ext - 1;
            } else {
                if (!same_linear(&min, &r->base[d]))
                    return FAIL(L,
                                "stage %s reads %s at unrelated places; "
                                "its region cannot be bounded",
                                n->ss->name, L->st->tensors[t].name);
                if (min.c < r->lo[d])
                    r->lo[d] = min.c;
                if (min.c + ext - 1 > r->hi[d])
                    r->hi[d] = min.c + ext - 1;
            }
        }
        r->found = 1;
        return KT_OK;
    }
    rc = kt__lower_collect_region(L, n, e->a, t, ax, r);
    if (rc == KT_OK)
        rc = kt__lower_collect_region(L, n, e->b, t, ax, r);
    return rc;
}

void
kt__lower_merge_region(const struct lower *L, int t, struct region *r,
                       const struct region *add)
{
    const struct kt_tensor *x = &L->st->tensors[t];
    int d;

    if (!add->found)
        return;
    if (!r->found) {
        *r = *add;
        return;
    }
    for (d = 0; d < x->ndim; d++) {
        if (same_linear(&r->base[d], &add->base[d])) {
            if (add->lo[d] < r->lo[d])
                r->lo[d] = add->lo[d];
            if (add->hi[d] > r->hi[d])
                r->hi[d] = add->hi[d];
        } else {
            /* read at places that move differently: the whole dimension */
            kt_aff_const(&r->base[d], 0);
            r->lo[d] = 0;
            r->hi[d] = x->shape[d] - 1;
        }
    }
}
