/* lower_hoist.c - a pack attached inside loops that do not move its
 * region is copied once, outside them (docs/schedule.md, Packing).
 *
 * A GEMM tiled `i1 i2 j2 k` with B's 1024 x 32 column panel packed at
 * `j2` copies the same panel once per row block.  Hoisted out of `i1`,
 * the copy runs once; the loops it crosses that do move the region (`j2`)
 * become leading dimensions of the buffer, so the kernel reads
 * B_pack[j2][k][32]: each 32-column panel contiguous, the tile-major
 * layout of OpenBLAS's packed panels (1.02-1.04x over B_pack[k][128] on
 * an Intel Xeon, docs/performance.md). */
#include "ir/lower_int.h"

#include <stdlib.h>
#include <string.h>

/* Whether the tiles the variables vars[] (extents ext[]) step through along
 * each dimension of the region (off, range) are disjoint, each variable
 * moving one dimension: then the buffer holding all of them is no larger
 * than the region they cover. */
static int
tiles_disjoint(const struct kt_affine *off, const int64_t *range, int ndim,
               const int *vars, const int64_t *ext, int nv)
{
    int d, i, k;

    for (i = 0; i < nv; i++) {
        int dims = 0;
        for (d = 0; d < ndim; d++)
            dims += kt_aff_coef(&off[d], vars[i]) != 0;
        if (dims != 1)
            return 0;
    }
    for (d = 0; d < ndim; d++) {
        int64_t span = range[d], stride[KT_MAX_ITERS], count[KT_MAX_ITERS];
        int m = 0;
        for (i = 0; i < nv; i++) {
            int64_t c = llabs(kt_aff_coef(&off[d], vars[i]));
            if (c == 0)
                continue;
            for (k = m; k > 0 && stride[k - 1] > c; k--) {
                stride[k] = stride[k - 1];
                count[k] = count[k - 1];
            }
            stride[k] = c;
            count[k] = ext[i];
            m++;
        }
        for (k = 0; k < m; k++) {
            if (stride[k] < span)
                return 0;
            span += stride[k] * (count[k] - 1);
        }
    }
    return 1;
}

/* The outermost iterator the pack of tensor t attached at iterator j of n
 * can be hoisted out of, and in vars[] the variables of the loops it
 * crosses that move its region (outermost first); -1 when it stays.  It
 * crosses no parallel, vectorized or fused loop nor one whose tiles
 * overlap, and only gains by crossing a loop of more than one iteration
 * that does not move it.  Its buffer then holds disjoint tiles of the
 * region the pack would copy at that outer loop: no larger than that
 * pack's. */
static int
hoist_point(const struct lower *L, const struct snest *n, int j,
            const struct kt_affine *off, const int64_t *range, int t, int *vars,
            int *nvars)
{
    const struct kt_tensor *tensor = &L->st->tensors[t];
    int64_t ext[KT_MAX_ITERS];
    int i, d, best = -1, nv = 0, best_nv = 0;
    int mv[KT_MAX_ITERS];

    for (i = j; i >= 0; i--) {
        const struct kt_iter *it = &n->ss->iters[i];
        int moving = 0, v;
        if (n->iext[i] == 1)
            continue;
        if (it->ann == KT_ANN_PARALLEL || it->ann == KT_ANN_VECTORIZE)
            break;
        for (v = n->var_lo[i]; v < n->var_hi[i]; v++)
            for (d = 0; d < tensor->ndim; d++)
                moving |= kt_aff_coef(&off[d], v) != 0;
        if (moving) {
            if (it->nparts != 1 || n->var_hi[i] != n->var_lo[i] + 1 ||
                nv == KT_MAX_ITERS)
                break;
            mv[nv] = n->var_lo[i];
            ext[nv] = n->iext[i];
            nv++;
            if (!tiles_disjoint(off, range, tensor->ndim, mv, ext, nv))
                break;
            continue;
        }
        best = i;
        best_nv = nv;
    }
    if (best < 0)
        return -1;
    for (i = 0; i < best_nv; i++) /* outermost first */
        vars[i] = mv[best_nv - 1 - i];
    *nvars = best_nv;
    return best;
}

/* off with every variable from[i] replaced by to[i]. */
static void
rename_vars(struct kt_affine *off, int ndim, const int *from, const int *to,
            int nv)
{
    int d, q, i;

    for (d = 0; d < ndim; d++)
        for (q = 0; q < off[d].n; q++)
            for (i = 0; i < nv; i++)
                if (off[d].var[q] == from[i])
                    off[d].var[q] = to[i];
}

int
kt__lower_emit_hoisted(struct lower *L, struct snest *n, int j, int p,
                       const struct kt_affine *off, const int64_t *range)
{
    const struct kt_sstage *ps = &L->st->stages[p];
    int t = ps->out, ndim = L->st->tensors[t].ndim;
    int vars[KT_MAX_ITERS], fresh[KT_MAX_ITERS], nv = 0, outer, nlead, i, d;
    int64_t shape[KT_MAX_DIMS];
    struct kt_affine copy_off[KT_MAX_DIMS];
    struct kt_node *host, *alloc, *parent;
    struct kt_lbuf *b;
    int at, rc;

    outer = hoist_point(L, n, j, off, range, t, vars, &nv);
    if (outer < 0)
        return 0;
    nlead = nv == 0 ? 0 : nv < KT_MAX_DIMS - ndim ? nv : KT_MAX_DIMS - ndim;
    if (nv > 0 && nlead < 1)
        return 0;
    b = kt__lower_new_stage_buf(L, ps, KT_BUF_LOCAL, nlead + ndim);
    if (b == NULL)
        return FAIL(L, "too many buffers");
    kt__lower_fold_lead_vars(L, t, vars, nv, nlead, shape);
    for (d = 0; d < nlead; d++)
        b->shape[d] = shape[d];
    for (d = 0; d < ndim; d++)
        b->shape[nlead + d] = range[L->tperm[t][d]];

    /* The copy loops get variables of their own (the reader's loops bind
     * the same tiles again below); while the copy is lowered the tile's
     * offset and lead dims name them. */
    alloc = kt__lower_node_new(KT_N_ALLOC, p);
    alloc->buf = L->tbuf[t];
    parent = alloc;
    for (i = 0; i < nv; i++) {
        struct kt_node *loop = kt__lower_node_new(KT_N_LOOP, p);
        fresh[i] = kt__lower_new_var(L, "hoist", i, L->var_ext[vars[i]]);
        loop->var = fresh[i];
        loop->extent = L->var_ext[vars[i]];
        kt__lower_node_add(parent, loop);
        parent = loop;
    }
    memcpy(copy_off, off, sizeof(copy_off[0]) * (size_t)ndim);
    rename_vars(copy_off, ndim, vars, fresh, nv);
    memcpy(L->toff[t], copy_off, sizeof(copy_off[0]) * (size_t)ndim);
    for (i = 0; i < L->tnleadvar[t]; i++)
        L->tlead[t][i].var = fresh[i];
    rc = kt__lower_emit_stage(L, p, parent, copy_off, range);
    memcpy(L->toff[t], off, sizeof(off[0]) * (size_t)ndim);
    for (i = 0; i < L->tnleadvar[t]; i++)
        L->tlead[t][i].var = vars[i];
    if (rc != KT_OK) {
        kt__lower_node_free(alloc);
        return rc;
    }
    /* Everything n's nest put from iterator 'outer' on moves into the
     * buffer's scope, after the copy. */
    host = n->slot_parent[outer];
    at = n->slot_index[outer];
    for (i = at; i < host->nkids; i++)
        kt__lower_node_add(alloc, host->kids[i]);
    host->nkids = at;
    kt__lower_node_add(host, alloc);
    return 1;
}
