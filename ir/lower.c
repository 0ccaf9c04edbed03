/* lower.c - lowering a schedule state to a loop tree.
 *
 * Each root stage becomes a loop nest, one loop per iterator of extent > 1.
 * A stage attached to iterator j of its consumer is emitted inside that
 * loop, over the region of its output the consumer's remaining loops read
 * (bound inference by interval arithmetic on the affine indexes), into a
 * local buffer of that region's shape.  Reductions get their init store
 * just before their outermost reduction loop, over the spatial loops inside
 * it. */
#include "ir/ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Variables numbered from here stand for not-yet-bound parts during bound
 * inference: PSEUDO + axis * KT_MAX_PARTS + part. */
#define PSEUDO (1 << 20)

struct lower {
    const struct kt_state *st;
    struct kt_looptree *lt;
    int tbuf[KT_MAX_TENSORS];
    struct kt_affine toff[KT_MAX_TENSORS][KT_MAX_DIMS];
    int tperm[KT_MAX_TENSORS][KT_MAX_DIMS]; /* buffer dim i: tensor dim */
    int tnlead[KT_MAX_TENSORS]; /* prepacked: leading tile-index dims */
    int tlead[KT_MAX_TENSORS][KT_MAX_DIMS]; /* ... and their variables */
    int64_t *var_ext; /* range of each loop-tree variable */
    int capvar;
    int in_parallel;
    char *err;
    size_t errlen;
};

struct snest {
    int s;
    const struct kt_sstage *ss;
    int64_t pe[KT_MAX_AXES][KT_MAX_PARTS];
    int64_t iext[KT_MAX_ITERS];
    struct kt_affine partval[KT_MAX_AXES][KT_MAX_PARTS];
    int bound[KT_MAX_AXES][KT_MAX_PARTS];
    struct kt_affine off[KT_MAX_AXES];
    int init_pos;
};

#define FAIL(L, ...) kt_seterr((L)->err, (L)->errlen, KT_ESCHEDULE, __VA_ARGS__)

static struct kt_node *
node_new(enum kt_node_kind kind, int stage)
{
    struct kt_node *n = kt_xcalloc(1, sizeof(*n));

    n->kind = kind;
    n->stage = stage;
    n->var = -1;
    return n;
}

static void
node_add(struct kt_node *parent, struct kt_node *kid)
{
    if (parent->nkids == parent->capkids) {
        parent->capkids = parent->capkids ? parent->capkids * 2 : 4;
        parent->kids = kt_xrealloc(parent->kids, sizeof(*parent->kids) *
                                                     (size_t)parent->capkids);
    }
    parent->kids[parent->nkids++] = kid;
}

static void
node_free(struct kt_node *n)
{
    int i;

    if (n == NULL)
        return;
    for (i = 0; i < n->nkids; i++)
        node_free(n->kids[i]);
    free(n->kids);
    kt_expr_free(n->expr);
    free(n);
}

static int
new_var(struct kt_looptree *lt, const char *axis, int part)
{
    int v = lt->nvars++;

    lt->var_names = kt_xrealloc(lt->var_names,
                                sizeof(*lt->var_names) * (size_t)lt->nvars);
    snprintf(lt->var_names[v], sizeof(lt->var_names[v]), "%.12s%d_%d", axis,
             part, v);
    return v;
}

/* Effective part extents once the axis covers 'range' points: inner parts
 * keep their lengths while they tile the range, then shrink to 1; the
 * outermost part takes what is left. */
static int
infer_parts(struct lower *L, struct snest *n, int a, int64_t range)
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

static int
all_axis_exprs(const struct snest *n, int pseudo, struct kt_affine *ax)
{
    int a, rc;

    for (a = 0; a < n->ss->naxes; a++) {
        rc = axis_expr(n, a, pseudo, &ax[a]);
        if (rc != KT_OK)
            return rc;
    }
    return KT_OK;
}

static void
note_ext(struct lower *L, int v, int64_t extent)
{
    if (v >= L->capvar) {
        L->capvar = v + 64;
        L->var_ext = kt_xrealloc(L->var_ext,
                                 sizeof(*L->var_ext) * (size_t)L->capvar);
    }
    L->var_ext[v] = extent;
}

/* Index into tensor t's buffer of the element at idx (ndim entries): for
 * local and packed tiles shifted by the region offset, dims in buffer
 * order, a prepacked buffer's tile variables first.  Returns the buffer's
 * ndim, -1 when an index grows too long. */
static int
buf_index(const struct lower *L, int t, const struct kt_affine *idx, int ndim,
          struct kt_affine *out)
{
    int i, nl = L->tnlead[t];

    for (i = 0; i < nl; i++)
        kt_aff_var(&out[i], L->tlead[t][i], 1);
    for (i = 0; i < ndim; i++) {
        int d = L->tperm[t][i];
        out[nl + i] = idx[d];
        if (kt_aff_add(&out[nl + i], &L->toff[t][d], -1) != KT_OK)
            return -1;
    }
    return nl + ndim;
}

/* A new buffer for the output of stage ps; NULL when the table is full. */
static struct kt_lbuf *
new_stage_buf(struct lower *L, const struct kt_sstage *ps,
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

static int
is_tile(const struct lower *L, int b)
{
    return L->lt->bufs[b].scope == KT_BUF_LOCAL ||
           L->lt->bufs[b].scope == KT_BUF_PACKED;
}

/* Whether tensor t's buffer is laid out in another dimension order. */
static int
is_permuted(const struct lower *L, int t)
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
static int
map_loads(struct lower *L, struct kt_expr *e)
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
        if (is_tile(L, b) || is_permuted(L, t)) {
            struct kt_affine idx[KT_MAX_DIMS];
            if (e->guarded && is_tile(L, b))
                return FAIL(L, "guarded read of local tile %s",
                            L->lt->bufs[b].name);
            d = buf_index(L, t, e->idx, e->ndim, idx);
            if (d < 0)
                return FAIL(L, "index expression too long");
            if (d != e->ndim)
                e->idx = kt_xrealloc(e->idx, sizeof(*e->idx) * (size_t)d);
            memcpy(e->idx, idx, sizeof(*idx) * (size_t)d);
            e->ndim = d;
        }
        e->src = b;
    }
    rc = map_loads(L, e->a);
    if (rc == KT_OK)
        rc = map_loads(L, e->b);
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

struct region {
    int found;
    int64_t lo[KT_MAX_DIMS], hi[KT_MAX_DIMS]; /* relative to base */
    struct kt_affine base[KT_MAX_DIMS];
};

static int
collect_region(struct lower *L, const struct snest *n, const struct kt_expr *e,
               int t, const struct kt_affine *ax, struct region *r)
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
    rc = collect_region(L, n, e->a, t, ax, r);
    if (rc == KT_OK)
        rc = collect_region(L, n, e->b, t, ax, r);
    return rc;
}

static int emit_stage(struct lower *L, int s, struct kt_node *parent,
                      const struct kt_affine *off, const int64_t *range);

/* Position of the iterator of n's stage that covers part p of axis a. */
static int
iter_of_part(const struct snest *n, int a, int p)
{
    int j, q;

    for (j = 0; j < n->ss->niters; j++)
        for (q = 0; q < n->ss->iters[j].nparts; q++)
            if (n->ss->iters[j].parts[q].axis == a &&
                n->ss->iters[j].parts[q].part == p)
                return j;
    return -1;
}

/* Dimension order of a pack of tensor t read by n's stage: dims sorted by
 * the innermost reader loop that moves along them (stable), so the reader's
 * inner loops walk the packed tile contiguously. */
static void
pack_dim_order(const struct snest *n, int t, const struct kt_affine *ax,
               int *perm, int ndim)
{
    const struct kt_expr *stack[64], *e, *load = NULL;
    int key[KT_MAX_DIMS], sp = 0, d, i, k;

    stack[sp++] = n->ss->body;
    while (sp > 0 && load == NULL) {
        e = stack[--sp];
        if (e == NULL)
            continue;
        if (e->op == KT_X_LOAD && e->src == t)
            load = e;
        else if (sp + 2 <= (int)KT_ARRAY_LEN(stack)) {
            stack[sp++] = e->b;
            stack[sp++] = e->a;
        }
    }
    for (d = 0; d < ndim; d++) {
        struct kt_affine idx;
        perm[d] = d;
        key[d] = -1;
        if (load == NULL ||
            kt_aff_compose(&idx, &load->idx[d], ax, n->ss->naxes) != KT_OK)
            continue;
        for (i = 0; i < idx.n; i++) {
            int v = idx.var[i] - PSEUDO, pos;
            if (idx.var[i] < PSEUDO || idx.k[i] == 0)
                continue;
            pos = iter_of_part(n, v / KT_MAX_PARTS, v % KT_MAX_PARTS);
            if (pos > key[d])
                key[d] = pos;
        }
    }
    for (d = 1; d < ndim; d++) /* insertion sort: stable */
        for (k = d; k > 0 && key[perm[k - 1]] > key[perm[k]]; k--) {
            int tmp = perm[k];
            perm[k] = perm[k - 1];
            perm[k - 1] = tmp;
        }
}

/* Dimension order of the local tile of a reduction stage ps whose
 * vectorized innermost loop walks an output dimension other than the last
 * (a conv's output channels): that dimension goes last, so the vector
 * accumulators of its register tile are contiguous (loaded and stored as
 * vectors around the reduction, not lane by lane); its reader then
 * gathers, once per element.  Other tiles keep the tensor's order. */
static void
accumulator_dim_order(const struct kt_sstage *ps, int *perm, int ndim)
{
    const struct kt_iter *last;
    int a, d, k = 0;

    if (ps->naxes == ps->nspatial || ps->niters == 0 || ps->cache_read)
        return;
    last = &ps->iters[ps->niters - 1];
    if (last->ann != KT_ANN_VECTORIZE || last->nparts != 1)
        return;
    a = last->parts[0].axis;
    if (a >= ndim - 1 || ps->axes[a].reduce)
        return;
    for (d = 0; d < ndim; d++)
        if (d != a)
            perm[k++] = d;
    perm[k] = a;
}

static int
cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* Layout rewrite of the pack stage p attached with region (off, range):
 * its buffer holds every tile the kernel visits, indexed by the variables
 * the region's offset depends on, and is filled by the pack routine
 * (lt->pack_root) with loops over those variables around the copy. */
static int
emit_prepacked(struct lower *L, int p, const struct kt_affine *off,
               const int64_t *range)
{
    const struct kt_sstage *ps = &L->st->stages[p];
    const struct kt_tensor *t = &L->st->tensors[ps->out];
    struct kt_lbuf *b;
    struct kt_node *parent;
    int vars[KT_MAX_DIMS * KT_AFF_TERMS], nv = 0, d, i, k, rc, was;
    int64_t elems = 1;

    for (d = 0; d < t->ndim; d++)
        for (i = 0; i < off[d].n; i++) {
            for (k = 0; k < nv && vars[k] != off[d].var[i]; k++)
                ;
            if (k == nv && off[d].k[i] != 0)
                vars[nv++] = off[d].var[i];
        }
    qsort(vars, (size_t)nv, sizeof(*vars), cmp_int);
    if (nv + t->ndim > KT_MAX_DIMS)
        return FAIL(L,
                    "layout rewrite of %s: %d tile variables and %d dims "
                    "exceed %d dims",
                    ps->name, nv, t->ndim, KT_MAX_DIMS);
    b = new_stage_buf(L, ps, KT_BUF_PACKED, nv + t->ndim);
    if (b == NULL)
        return FAIL(L, "too many buffers");
    for (i = 0; i < nv; i++) {
        b->shape[i] = L->var_ext[vars[i]];
        L->tlead[ps->out][i] = vars[i];
    }
    for (d = 0; d < t->ndim; d++)
        b->shape[nv + d] = range[L->tperm[ps->out][d]];
    for (d = 0; d < b->ndim; d++)
        elems *= b->shape[d];
    L->tnlead[ps->out] = nv;
    L->lt->pack_elems += elems;
    if (L->lt->pack_root == NULL)
        L->lt->pack_root = node_new(KT_N_SEQ, -1);
    parent = L->lt->pack_root;
    for (i = 0; i < nv; i++) {
        struct kt_node *loop = node_new(KT_N_LOOP, p);
        loop->var = vars[i];
        loop->extent = L->var_ext[vars[i]];
        node_add(parent, loop);
        parent = loop;
    }
    was = L->in_parallel;
    L->in_parallel = 0;
    rc = emit_stage(L, p, parent, off, range);
    L->in_parallel = was;
    return rc;
}

/* Emits every stage attached at iterator j of n's stage into *body,
 * wrapping the rest of the nest in their buffers' scopes. */
static int
emit_attached(struct lower *L, struct snest *n, int j, struct kt_node **body)
{
    const struct kt_state *st = L->st;
    int p, d, rc;

    for (p = 0; p < st->nstages; p++) {
        const struct kt_sstage *ps = &st->stages[p];
        struct kt_affine ax[KT_MAX_AXES], off[KT_MAX_DIMS];
        int64_t range[KT_MAX_DIMS];
        struct region r;
        struct kt_lbuf *b;
        struct kt_node *alloc;
        const struct kt_tensor *t = &st->tensors[ps->out];

        if (ps->inlined || ps->attach_stage != n->s || ps->attach_iter != j)
            continue;
        rc = all_axis_exprs(n, 1, ax);
        if (rc != KT_OK)
            return FAIL(L, "index expression too long");
        memset(&r, 0, sizeof(r));
        rc = collect_region(L, n, n->ss->body, ps->out, ax, &r);
        if (rc != KT_OK)
            return rc;
        if (!r.found)
            return FAIL(L, "%s is attached to %s, which does not read it",
                        ps->name, n->ss->name);
        if (L->lt->nbufs == (int)KT_ARRAY_LEN(L->lt->bufs))
            return FAIL(L, "too many buffers");
        for (d = 0; d < t->ndim; d++) {
            off[d] = r.base[d];
            off[d].c = r.lo[d];
            range[d] = r.hi[d] - r.lo[d] + 1;
            if (range[d] > t->shape[d])
                return FAIL(L, "region of %s dim %d (%lld) exceeds its shape",
                            ps->name, d, (long long)range[d]);
        }
        if (ps->cache_read)
            pack_dim_order(n, ps->out, ax, L->tperm[ps->out], t->ndim);
        else
            accumulator_dim_order(ps, L->tperm[ps->out], t->ndim);
        memcpy(L->toff[ps->out], off, sizeof(off[0]) * (size_t)t->ndim);
        if (ps->prepacked) {
            rc = emit_prepacked(L, p, off, range);
            if (rc != KT_OK)
                return rc;
            continue;
        }
        b = new_stage_buf(L, ps, KT_BUF_LOCAL, t->ndim);
        if (b == NULL)
            return FAIL(L, "too many buffers");
        for (d = 0; d < t->ndim; d++)
            b->shape[d] = range[L->tperm[ps->out][d]];

        alloc = node_new(KT_N_ALLOC, p);
        alloc->buf = L->tbuf[ps->out];
        node_add(*body, alloc);
        rc = emit_stage(L, p, alloc, off, range);
        if (rc != KT_OK)
            return rc;
        *body = alloc;
    }
    return KT_OK;
}

/* Binds iterator j: a loop (if its extent is above 1) and lets for fused
 * parts.  Returns the node the rest of the nest goes into. */
static struct kt_node *
bind_iter(struct lower *L, struct snest *n, int j, struct kt_node *parent,
          int *loop_var)
{
    const struct kt_iter *it = &n->ss->iters[j];
    struct kt_node *loop;
    int64_t inner = 1;
    int q;

    *loop_var = -1;
    if (n->iext[j] == 1) {
        for (q = 0; q < it->nparts; q++) {
            kt_aff_const(&n->partval[it->parts[q].axis][it->parts[q].part], 0);
            n->bound[it->parts[q].axis][it->parts[q].part] = 1;
        }
        return parent;
    }
    loop = node_new(KT_N_LOOP, n->s);
    if (it->nparts == 1)
        loop->var = new_var(L->lt, n->ss->axes[it->parts[0].axis].name,
                            it->parts[0].part);
    else
        loop->var = new_var(L->lt, "fused", 0);
    loop->extent = n->iext[j];
    note_ext(L, loop->var, loop->extent);
    loop->ann = it->ann;
    loop->auto_unroll_max_step = it->auto_unroll_max_step;
    loop->reduce = it->reduce != 0;
    node_add(parent, loop);
    *loop_var = loop->var;
    if (it->nparts == 1) {
        kt_aff_var(&n->partval[it->parts[0].axis][it->parts[0].part], loop->var,
                   1);
        n->bound[it->parts[0].axis][it->parts[0].part] = 1;
        return loop;
    }
    for (q = it->nparts - 1; q >= 0; q--) {
        int a = it->parts[q].axis, p = it->parts[q].part;
        int64_t e = n->pe[a][p];
        n->bound[a][p] = 1;
        if (e == 1) {
            kt_aff_const(&n->partval[a][p], 0);
            continue;
        }
        {
            struct kt_node *let = node_new(KT_N_LET, n->s);
            let->var = new_var(L->lt, n->ss->axes[a].name, p);
            let->src_var = loop->var;
            let->div = inner;
            let->mod = e;
            note_ext(L, let->var, e);
            node_add(loop, let);
            kt_aff_var(&n->partval[a][p], let->var, 1);
        }
        inner *= e;
    }
    return loop;
}

static void
unbind_iter(struct snest *n, int j)
{
    const struct kt_iter *it = &n->ss->iters[j];
    int q;

    for (q = 0; q < it->nparts; q++)
        n->bound[it->parts[q].axis][it->parts[q].part] = 0;
}

static int
make_store(struct lower *L, struct snest *n, struct kt_node *parent, int init)
{
    const struct kt_sstage *s = n->ss;
    struct kt_affine ax[KT_MAX_AXES];
    struct kt_node *store;
    int d, rc, b = L->tbuf[s->out];

    rc = all_axis_exprs(n, 0, ax);
    if (rc != KT_OK)
        return FAIL(L, "index expression too long");
    store = node_new(KT_N_STORE, n->s);
    store->buf = b;
    store->ndim = s->nspatial;
    for (d = 0; d < s->nspatial; d++)
        store->idx[d] = ax[d];
    if (is_tile(L, b) || is_permuted(L, s->out))
        store->ndim = buf_index(L, s->out, ax, s->nspatial, store->idx);
    if (store->ndim < 0) {
        node_free(store);
        return FAIL(L, "index expression too long");
    }
    if (init) {
        store->op = KT_ASSIGN;
        store->expr = kt_expr_new(KT_X_CONST);
        store->expr->value = s->op == KT_SUM    ? 0.0f
                             : s->op == KT_MAXR ? -INFINITY
                                                : INFINITY;
    } else {
        store->op = s->op;
        store->expr = kt_expr_clone(s->body);
        rc = kt_expr_subst_axes(store->expr, ax, s->naxes);
        if (rc == KT_OK)
            rc = map_loads(L, store->expr);
        if (rc != KT_OK) {
            node_free(store);
            return rc == KT_ESCHEDULE ? rc
                                      : FAIL(L, "index expression too long");
        }
    }
    node_add(parent, store);
    return KT_OK;
}

/* The init nest: the spatial iterators from j on, then the init store. */
static int
emit_init(struct lower *L, struct snest *n, int j, struct kt_node *parent)
{
    int var, rc;
    struct kt_node *body;

    while (j < n->ss->niters && n->ss->iters[j].reduce)
        j++;
    if (j == n->ss->niters)
        return make_store(L, n, parent, 1);
    body = bind_iter(L, n, j, parent, &var);
    rc = emit_init(L, n, j + 1, body);
    unbind_iter(n, j);
    return rc;
}

static int
emit_nest(struct lower *L, struct snest *n, int j, struct kt_node *parent)
{
    const struct kt_iter *it;
    struct kt_node *body;
    int var, rc, was_parallel = L->in_parallel;

    if (j == n->init_pos) {
        rc = emit_init(L, n, j, parent);
        if (rc != KT_OK)
            return rc;
    }
    if (j == n->ss->niters)
        return make_store(L, n, parent, 0);
    it = &n->ss->iters[j];
    if (it->ann == KT_ANN_PARALLEL && n->iext[j] > 1) {
        if (L->in_parallel)
            return FAIL(L, "stage %s: parallel loop inside a parallel loop",
                        n->ss->name);
        L->in_parallel = 1;
    }
    body = bind_iter(L, n, j, parent, &var);
    rc = emit_attached(L, n, j, &body);
    if (rc == KT_OK)
        rc = emit_nest(L, n, j + 1, body);
    unbind_iter(n, j);
    L->in_parallel = was_parallel;
    return rc;
}

static int
emit_stage(struct lower *L, int s, struct kt_node *parent,
           const struct kt_affine *off, const int64_t *range)
{
    struct snest *n = kt_xcalloc(1, sizeof(*n));
    const struct kt_sstage *ss = &L->st->stages[s];
    int a, j, q, rc = KT_OK;

    n->s = s;
    n->ss = ss;
    n->init_pos = -1;
    for (a = 0; a < ss->naxes && rc == KT_OK; a++) {
        int64_t r = ss->axes[a].extent;
        if (off != NULL && a < ss->nspatial) {
            n->off[a] = off[a];
            r = range[a];
        } else {
            kt_aff_const(&n->off[a], 0);
        }
        rc = infer_parts(L, n, a, r);
    }
    for (j = 0; j < ss->niters && rc == KT_OK; j++) {
        n->iext[j] = 1;
        for (q = 0; q < ss->iters[j].nparts; q++)
            n->iext[j] *= n->pe[ss->iters[j].parts[q].axis]
                               [ss->iters[j].parts[q].part];
        if (ss->op != KT_ASSIGN && ss->iters[j].reduce && n->init_pos < 0)
            n->init_pos = j;
        if (ss->op != KT_ASSIGN && ss->iters[j].reduce == 2)
            rc = FAIL(L,
                      "stage %s: a fused iterator mixes spatial and "
                      "reduction axes",
                      ss->name);
    }
    if (rc == KT_OK && ss->op != KT_ASSIGN && n->init_pos < 0)
        n->init_pos = ss->niters;
    if (rc == KT_OK)
        rc = emit_nest(L, n, 0, parent);
    free(n);
    return rc;
}

int
kt_lower(const struct kt_state *st, struct kt_looptree **out, char *err,
         size_t errlen)
{
    struct lower *L = kt_xcalloc(1, sizeof(*L));
    struct kt_looptree *lt = kt_xcalloc(1, sizeof(*lt));
    int t, s, rc = KT_OK;

    *out = NULL;
    L->st = st;
    L->lt = lt;
    L->err = err;
    L->errlen = errlen;
    lt->root = node_new(KT_N_SEQ, -1);
    lt->flops = st->dag->flops;

    /* Arguments: inputs, then outputs; root intermediates live on the heap. */
    for (t = 0; t < st->ntensors; t++) {
        L->tbuf[t] = -1;
        for (s = 0; s < KT_MAX_DIMS; s++)
            L->tperm[t][s] = s;
    }
    for (s = 0; s < 2; s++) {
        for (t = 0; t < st->ntensors; t++) {
            const struct kt_tensor *tt = &st->tensors[t];
            struct kt_lbuf *b;
            if (tt->kind != (s == 0 ? KT_TENSOR_INPUT : KT_TENSOR_OUTPUT))
                continue;
            b = &lt->bufs[lt->nbufs];
            snprintf(b->name, sizeof(b->name), "%s", tt->name);
            b->scope = KT_BUF_ARG;
            b->tensor = t;
            b->arg = lt->nargs;
            b->ndim = tt->ndim;
            memcpy(b->shape, tt->shape, sizeof(tt->shape));
            lt->args[lt->nargs++] = lt->nbufs;
            L->tbuf[t] = lt->nbufs++;
        }
    }
    for (t = 0; t < st->ntensors; t++) {
        const struct kt_tensor *tt = &st->tensors[t];
        const struct kt_sstage *p;
        struct kt_lbuf *b;
        if (tt->kind != KT_TENSOR_INTERMEDIATE || tt->producer < 0)
            continue;
        p = &st->stages[tt->producer];
        if (p->inlined || p->attach_stage >= 0)
            continue;
        b = &lt->bufs[lt->nbufs];
        snprintf(b->name, sizeof(b->name), "%s", tt->name);
        b->scope = p->prepacked ? KT_BUF_PACKED : KT_BUF_HEAP;
        b->tensor = t;
        b->arg = -1;
        b->ndim = tt->ndim;
        memcpy(b->shape, tt->shape, sizeof(tt->shape));
        if (p->prepacked) {
            lt->pack_elems += kt_tensor_elems(tt);
        } else {
            /* a root reduction vectorized along its output channels */
            accumulator_dim_order(p, L->tperm[t], tt->ndim);
            for (s = 0; s < tt->ndim; s++)
                b->shape[s] = tt->shape[L->tperm[t][s]];
        }
        L->tbuf[t] = lt->nbufs++;
    }
    for (s = 0; s < st->nstages && rc == KT_OK; s++) {
        if (st->stages[s].inlined || st->stages[s].attach_stage >= 0)
            continue;
        if (st->stages[s].prepacked && lt->pack_root == NULL)
            lt->pack_root = node_new(KT_N_SEQ, -1);
        rc = emit_stage(L, s,
                        st->stages[s].prepacked ? lt->pack_root : lt->root,
                        NULL, NULL);
    }
    /* Every attached stage must have found its place. */
    for (s = 0; s < st->nstages && rc == KT_OK; s++) {
        const struct kt_sstage *ss = &st->stages[s];
        if (!ss->inlined && ss->attach_stage >= 0 && L->tbuf[ss->out] < 0)
            rc = FAIL(L, "stage %s: its compute_at point was never reached",
                      ss->name);
    }
    free(L->var_ext);
    free(L);
    if (rc != KT_OK) {
        kt_looptree_free(lt);
        return rc;
    }
    *out = lt;
    return KT_OK;
}

void
kt_looptree_free(struct kt_looptree *lt)
{
    if (lt == NULL)
        return;
    node_free(lt->root);
    node_free(lt->pack_root);
    free(lt->var_names);
    free(lt);
}
