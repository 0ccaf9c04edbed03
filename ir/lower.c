/* lower.c - lowering a schedule state to a loop tree.
 *
 * Each root stage becomes a loop nest, one loop per iterator of extent > 1.
 * A stage attached to iterator j of its consumer is emitted inside that
 * loop, over the region of its output the consumer's remaining loops read
 * (bound inference by interval arithmetic on the affine indexes), into a
 * local buffer of that region's shape.  Reductions get their init store
 * just before their outermost reduction loop (a reduction iterator of
 * extent 1 is no loop), over the spatial loops inside it: in the innermost
 * spatial loop around all the reduction loops, where the code generator
 * can start a register tile at the init value (ir/codegen_kernel.c). */
#include "ir/lower_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kt_node *
kt__lower_node_new(enum kt_node_kind kind, int stage)
{
    struct kt_node *n = kt_xcalloc(1, sizeof(*n));

    n->kind = kind;
    n->stage = stage;
    n->var = -1;
    return n;
}

void
kt__lower_node_add(struct kt_node *parent, struct kt_node *kid)
{
    if (parent->nkids == parent->capkids) {
        parent->capkids = parent->capkids ? parent->capkids * 2 : 4;
        parent->kids = kt_xrealloc(parent->kids, sizeof(*parent->kids) *
                                                     (size_t)parent->capkids);
    }
    parent->kids[parent->nkids++] = kid;
}

void
kt__lower_node_free(struct kt_node *n)
{
    int i;

    if (n == NULL)
        return;
    for (i = 0; i < n->nkids; i++)
        kt__lower_node_free(n->kids[i]);
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
    /* "_l" keeps loop variables apart from the code generator's
     * temporaries (r0_1, x0_1, acc0_1: letters, digits, '_', digits),
     * whatever the axis is called (a conv's r, s, x, y) */
    snprintf(lt->var_names[v], sizeof(lt->var_names[v]), "%.12s%d_l%d", axis,
             part, v);
    return v;
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

int
kt__lower_new_var(struct lower *L, const char *axis, int part, int64_t extent)
{
    int v = new_var(L->lt, axis, part);

    note_ext(L, v, extent);
    return v;
}

/* Widens r by the reads of stage p's output by the other stages attached at
 * the same loop j of n (a row buffer read by the row's sum and by the row's
 * output): each reads it over its own region there.  Any other reader
 * fails: it would read the local buffer outside its scope. */
static int
collect_coattached_reads(struct lower *L, const struct snest *n, int j, int p,
                         const struct kt_affine *ax, struct region *r)
{
    const struct kt_state *st = L->st;
    int t = st->stages[p].out, c, a, d, rc;

    for (c = 0; c < st->nstages; c++) {
        const struct kt_sstage *cs = &st->stages[c];
        struct kt_affine cax[KT_MAX_AXES];
        struct region cr;
        struct snest *cn;
        if (c == p || c == n->s || cs->inlined || !kt_expr_reads(cs->body, t))
            continue;
        if (cs->attach_stage != n->s || cs->attach_iter != j)
            return FAIL(L,
                        "%s is computed inside %s but also read by %s, "
                        "which is not computed at the same loop",
                        st->stages[p].name, n->ss->name, cs->name);
        memset(&cr, 0, sizeof(cr));
        rc = kt__lower_collect_region(L, n, n->ss->body, cs->out, ax, &cr);
        if (rc != KT_OK)
            return rc;
        if (!cr.found)
            return FAIL(L, "%s is attached to %s, which does not read it",
                        cs->name, n->ss->name);
        cn = kt_xcalloc(1, sizeof(*cn));
        cn->s = c;
        cn->ss = cs;
        for (a = 0; a < cs->naxes && rc == KT_OK; a++) {
            int64_t range = cs->axes[a].extent;
            kt_aff_const(&cn->off[a], 0);
            if (a < cs->nspatial) {
                d = a;
                cn->off[a] = cr.base[d];
                cn->off[a].c = cr.lo[d];
                range = cr.hi[d] - cr.lo[d] + 1;
            }
            rc = kt__lower_infer_parts(L, cn, a, range);
        }
        if (rc == KT_OK && kt__lower_all_axis_exprs(cn, 1, cax) != KT_OK)
            rc = FAIL(L, "index expression too long");
        memset(&cr, 0, sizeof(cr));
        if (rc == KT_OK)
            rc = kt__lower_collect_region(L, cn, cs->body, t, cax, &cr);
        if (rc == KT_OK)
            kt__lower_merge_region(L, t, r, &cr);
        free(cn);
        if (rc != KT_OK)
            return rc;
    }
    return KT_OK;
}

/* Whether a stage other than n's and p reads p's output (one attached at
 * the same loop): the pack then stays where they all see it. */
static int
reread_here(const struct kt_state *st, const struct snest *n, int p)
{
    int c;

    for (c = 0; c < st->nstages; c++)
        if (c != p && c != n->s && !st->stages[c].inlined &&
            kt_expr_reads(st->stages[c].body, st->stages[p].out))
            return 1;
    return 0;
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
        rc = kt__lower_all_axis_exprs(n, 1, ax);
        if (rc != KT_OK)
            return FAIL(L, "index expression too long");
        memset(&r, 0, sizeof(r));
        rc = kt__lower_collect_region(L, n, n->ss->body, ps->out, ax, &r);
        if (rc == KT_OK)
            rc = collect_coattached_reads(L, n, j, p, ax, &r);
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
            kt__lower_pack_dim_order(n, ps->out, ax, L->tperm[ps->out],
                                     t->ndim);
        else
            kt__lower_accumulator_dim_order(ps, L->tperm[ps->out], t->ndim);
        memcpy(L->toff[ps->out], off, sizeof(off[0]) * (size_t)t->ndim);
        if (ps->prepacked) {
            rc = kt__lower_emit_prepacked(L, p, off, range);
            if (rc != KT_OK)
                return rc;
            continue;
        }
        if (ps->cache_read && !reread_here(st, n, p)) {
            rc = kt__lower_emit_hoisted(L, n, j, p, off, range);
            if (rc < 0)
                return rc;
            if (rc == 1)
                continue;
        }
        b = kt__lower_new_stage_buf(L, ps, KT_BUF_LOCAL, t->ndim);
        if (b == NULL)
            return FAIL(L, "too many buffers");
        for (d = 0; d < t->ndim; d++)
            b->shape[d] = range[L->tperm[ps->out][d]];

        alloc = kt__lower_node_new(KT_N_ALLOC, p);
        alloc->buf = L->tbuf[ps->out];
        kt__lower_node_add(*body, alloc);
        rc = kt__lower_emit_stage(L, p, alloc, off, range);
        if (rc != KT_OK)
            return rc;
        *body = alloc;
    }
    return KT_OK;
}

/* The iterations part p of axis a runs: its extent, but for the
 * outermost part of a stage padded past its output (stored_tiles). */
static int64_t
run_extent(const struct snest *n, int a, int p)
{
    return p == 0 ? n->run0[a] : n->pe[a][p];
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
    loop = kt__lower_node_new(KT_N_LOOP, n->s);
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
    kt__lower_node_add(parent, loop);
    *loop_var = loop->var;
    if (it->nparts == 1) {
        kt_aff_var(&n->partval[it->parts[0].axis][it->parts[0].part], loop->var,
                   1);
        n->bound[it->parts[0].axis][it->parts[0].part] = 1;
        return loop;
    }
    for (q = it->nparts - 1; q >= 0; q--) {
        int a = it->parts[q].axis, p = it->parts[q].part;
        int64_t e = run_extent(n, a, p);
        n->bound[a][p] = 1;
        if (e == 1) {
            kt_aff_const(&n->partval[a][p], 0);
            continue;
        }
        {
            struct kt_node *let = kt__lower_node_new(KT_N_LET, n->s);
            let->var = new_var(L->lt, n->ss->axes[a].name, p);
            let->src_var = loop->var;
            let->div = inner;
            let->mod = e;
            note_ext(L, let->var, e);
            kt__lower_node_add(loop, let);
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

    rc = kt__lower_all_axis_exprs(n, 0, ax);
    if (rc != KT_OK)
        return FAIL(L, "index expression too long");
    store = kt__lower_node_new(KT_N_STORE, n->s);
    store->buf = b;
    store->ndim = s->nspatial;
    for (d = 0; d < s->nspatial; d++)
        store->idx[d] = ax[d];
    if (kt__lower_is_tile(L, b) || kt__lower_is_permuted(L, s->out))
        store->ndim = kt__lower_buf_index(L, s->out, ax, s->nspatial,
                                          store->idx);
    else
        for (d = 0; d < s->nspatial; d++)
            store->guarded |= s->axes[d].extent >
                              L->st->tensors[s->out].shape[d];
    if (store->ndim < 0) {
        kt__lower_node_free(store);
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
            rc = kt__lower_map_loads(L, store->expr);
        if (rc != KT_OK) {
            kt__lower_node_free(store);
            return rc == KT_ESCHEDULE ? rc
                                      : FAIL(L, "index expression too long");
        }
    }
    kt__lower_node_add(parent, store);
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

    if (j < n->ss->niters) {
        n->slot_parent[j] = parent;
        n->slot_index[j] = parent->nkids;
    }
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
    n->var_lo[j] = L->lt->nvars;
    body = bind_iter(L, n, j, parent, &var);
    n->var_hi[j] = L->lt->nvars;
    rc = emit_attached(L, n, j, &body);
    if (rc == KT_OK)
        rc = emit_nest(L, n, j + 1, body);
    unbind_iter(n, j);
    L->in_parallel = was_parallel;
    return rc;
}

/* The loop extent of axis a's outermost part: for a root stage padded
 * past its output (guarded stores, docs/compute.md), only the tiles
 * that store something.  197 columns padded to 224 in tiles of one
 * 16-lane vector are 13 tiles, not 14: the 14th computed a whole tile of
 * the product and stored none of it.  Bounds inference keeps the part's
 * whole extent (a stage attached outside this loop computes the tiles
 * its split lengths tile), so only the loops and the lets change. */
static int64_t
stored_tiles(const struct lower *L, const struct snest *n, int a)
{
    const struct kt_sstage *s = n->ss;
    const struct kt_tensor *t = &L->st->tensors[s->out];
    int64_t inner = 1;
    int p;

    if (a >= s->nspatial || a >= t->ndim || t->shape[a] >= s->axes[a].extent ||
        kt__lower_is_tile(L, L->tbuf[s->out]) ||
        kt__lower_is_permuted(L, s->out))
        return n->pe[a][0];
    for (p = 1; p < s->nparts[a]; p++)
        inner *= n->pe[a][p];
    return (t->shape[a] + inner - 1) / inner;
}

int
kt__lower_emit_stage(struct lower *L, int s, struct kt_node *parent,
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
        rc = kt__lower_infer_parts(L, n, a, r);
        n->run0[a] = off == NULL ? stored_tiles(L, n, a) : n->pe[a][0];
    }
    for (j = 0; j < ss->niters && rc == KT_OK; j++) {
        n->iext[j] = 1;
        for (q = 0; q < ss->iters[j].nparts; q++)
            n->iext[j] *= run_extent(n, ss->iters[j].parts[q].axis,
                                     ss->iters[j].parts[q].part);
        if (ss->op != KT_ASSIGN && ss->iters[j].reduce && n->iext[j] > 1 &&
            n->init_pos < 0)
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
    lt->root = kt__lower_node_new(KT_N_SEQ, -1);
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
        if (!p->prepacked) {
            /* a root reduction vectorized along its output channels */
            kt__lower_accumulator_dim_order(p, L->tperm[t], tt->ndim);
            for (s = 0; s < tt->ndim; s++)
                b->shape[s] = tt->shape[L->tperm[t][s]];
        }
        L->tbuf[t] = lt->nbufs++;
    }
    for (s = 0; s < st->nstages && rc == KT_OK; s++) {
        if (st->stages[s].inlined || st->stages[s].attach_stage >= 0)
            continue;
        if (st->stages[s].prepacked && lt->pack_root == NULL)
            lt->pack_root = kt__lower_node_new(KT_N_SEQ, -1);
        rc = kt__lower_emit_stage(L, s,
                                  st->stages[s].prepacked ? lt->pack_root
                                                          : lt->root,
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
    kt__lower_elide_copies(lt);
    *out = lt;
    return KT_OK;
}

int64_t
kt_lbuf_elems(const struct kt_lbuf *b)
{
    int64_t n = 1;
    int d;

    for (d = 0; d < b->ndim; d++)
        n *= b->shape[d];
    return n;
}

void
kt_looptree_free(struct kt_looptree *lt)
{
    if (lt == NULL)
        return;
    kt__lower_node_free(lt->root);
    kt__lower_node_free(lt->pack_root);
    free(lt->var_names);
    free(lt);
}
