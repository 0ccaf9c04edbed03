/* lower_layout.c - the layout of tiles in the lowering: the dimension
 * order of a packed operand tile (by the reader's loops) and of an
 * accumulator tile (vectorized dimension last), and the layout rewrite of
 * a pack into the module's pack routine (docs/schedule.md, Packing). */
#include "ir/lower_int.h"

#include <stdlib.h>
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
void
kt__lower_pack_dim_order(const struct snest *n, int t,
                         const struct kt_affine *ax, int *perm, int ndim)
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
void
kt__lower_accumulator_dim_order(const struct kt_sstage *ps, int *perm, int ndim)
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

/* Lead dimensions of prepacked tensor t, one per tile variable (vars[],
 * outermost first) - unless there are more variables than nlead: the
 * outermost then share lead dim 0, row-major (the same addresses as one
 * dim each; a tensor has at most KT_MAX_DIMS dims).  shape[] gets the
 * lead dims' extents. */
void
kt__lower_fold_lead_vars(struct lower *L, int t, const int *vars, int nv,
                         int nlead, int64_t *shape)
{
    int folded = nv - nlead + 1, i;

    for (i = 0; i < nlead; i++)
        shape[i] = 1;
    for (i = nv - 1; i >= 0; i--) {
        struct lead_var *lv = &L->tlead[t][i];
        lv->var = vars[i];
        lv->dim = i < folded ? 0 : i - folded + 1;
        lv->k = shape[lv->dim];
        shape[lv->dim] *= L->var_ext[vars[i]];
    }
    L->tnlead[t] = nlead;
    L->tnleadvar[t] = nv;
}

/* Layout rewrite of the pack stage p attached with region (off, range):
 * its buffer holds every tile the kernel visits, indexed by the variables
 * the region's offset depends on, and is filled by the pack routine
 * (lt->pack_root) with loops over those variables around the copy. */
int
kt__lower_emit_prepacked(struct lower *L, int p, const struct kt_affine *off,
                         const int64_t *range)
{
    const struct kt_sstage *ps = &L->st->stages[p];
    const struct kt_tensor *t = &L->st->tensors[ps->out];
    struct kt_lbuf *b;
    struct kt_node *parent;
    int vars[KT_MAX_DIMS * KT_AFF_TERMS], nv = 0, nlead, d, i, k, rc, was;

    for (d = 0; d < t->ndim; d++)
        for (i = 0; i < off[d].n; i++) {
            for (k = 0; k < nv && vars[k] != off[d].var[i]; k++)
                ;
            if (k == nv && off[d].k[i] != 0)
                vars[nv++] = off[d].var[i];
        }
    qsort(vars, (size_t)nv, sizeof(*vars), cmp_int);
    nlead = KT_MAX_DIMS - t->ndim < nv ? KT_MAX_DIMS - t->ndim : nv;
    if (nv > KT_MAX_ITERS || (nv > 0 && nlead < 1))
        return FAIL(L, "layout rewrite of %s: %d tile variables and %d dims",
                    ps->name, nv, t->ndim);
    b = kt__lower_new_stage_buf(L, ps, KT_BUF_PACKED, nlead + t->ndim);
    if (b == NULL)
        return FAIL(L, "too many buffers");
    kt__lower_fold_lead_vars(L, ps->out, vars, nv, nlead, b->shape);
    for (d = 0; d < t->ndim; d++)
        b->shape[nlead + d] = range[L->tperm[ps->out][d]];
    if (L->lt->pack_root == NULL)
        L->lt->pack_root = kt__lower_node_new(KT_N_SEQ, -1);
    parent = L->lt->pack_root;
    for (i = 0; i < nv; i++) {
        struct kt_node *loop = kt__lower_node_new(KT_N_LOOP, p);
        loop->var = vars[i];
        loop->extent = L->var_ext[vars[i]];
        kt__lower_node_add(parent, loop);
        parent = loop;
    }
    was = L->in_parallel;
    L->in_parallel = 0;
    rc = kt__lower_emit_stage(L, p, parent, off, range);
    L->in_parallel = was;
    return rc;
}
