/* lower_elide.c - a cache-write tile that is only copied out is dropped
 * (docs/schedule.md, Lowering): when the last thing under a local tile's
 * alloc is a nest that copies it unchanged into another buffer, and its
 * producer finishes each element's reduction in one pass (the reduction
 * loops sit directly above a register tile of unrolled and vectorized
 * loops, so the code generator keeps the accumulators in registers), the
 * producer stores into that buffer instead and the copy goes.  The tile
 * would be written once, read once and copied: one pass over the output
 * for nothing (2-3% of the suite's best GEMM 1024^3).  A producer that
 * revisits elements (a reduction split around a spatial loop) keeps its
 * contiguous tile, which may be worth its copy; the search measures both.
 * A copy that drops the padding of a tile (guarded stores: a product
 * computed over padded extents) goes the same way, its guard moving onto
 * the producer's stores: the register tile is then written straight into
 * the output, its padded lanes and rows dropped there (docs/schedule.md).
 * A pack that copies a block of its operand in the operand's own layout
 * goes too, its readers reading the operand in place (elide_pack). */
#include "ir/lower_int.h"

#include <stdlib.h>

/* The copy nest below n: loops (with lets beside one inner node) down to
 * one store of a bare load, out of buffer tile (into 0) or, unguarded,
 * into it (into 1).  Its store, or NULL. */
static struct kt_node *
copy_store(struct kt_node *n, int tile, int into)
{
    for (;;) {
        struct kt_node *inner = NULL;
        int i;

        if (n->kind == KT_N_STORE)
            break;
        if (n->kind != KT_N_LOOP && n->kind != KT_N_SEQ)
            return NULL;
        for (i = 0; i < n->nkids; i++) {
            if (n->kids[i]->kind == KT_N_LET)
                continue;
            if (inner != NULL)
                return NULL;
            inner = n->kids[i];
        }
        if (inner == NULL)
            return NULL;
        n = inner;
    }
    if (n->op != KT_ASSIGN || n->expr == NULL || n->expr->op != KT_X_LOAD ||
        n->expr->ndim != n->ndim)
        return NULL;
    if (into)
        return n->buf == tile && n->expr->src != tile && !n->guarded &&
                       !n->expr->guarded
                   ? n
                   : NULL;
    return n->buf != tile && n->expr->src == tile ? n : NULL;
}

/* Iterations of the store under the copy nest n (the product of its
 * loops' extents). */
static int64_t
copy_iterations(const struct kt_node *n)
{
    int64_t count = n->kind == KT_N_LOOP ? n->extent : 1, inner = 1;
    int i;

    for (i = 0; i < n->nkids; i++)
        if (n->kids[i]->kind != KT_N_LET)
            inner = copy_iterations(n->kids[i]);
    return count * inner;
}

/* Marks in uses[] the variables that the nest below n binds. */
static void
bound_vars(const struct kt_node *n, unsigned char *uses, int nvars)
{
    int i;

    if ((n->kind == KT_N_LOOP || n->kind == KT_N_LET) && n->var >= 0 &&
        n->var < nvars)
        uses[n->var] = 1;
    for (i = 0; i < n->nkids; i++)
        bound_vars(n->kids[i], uses, nvars);
}

/* Per dimension, the other buffer's index minus the tile's in the copy
 * st (into: whether it copies into the tile); each must be free of the
 * copy nest's own variables. */
static int
copy_offsets(const struct kt_looptree *lt, const struct kt_node *nest,
             const struct kt_node *st, int into, struct kt_affine *base)
{
    unsigned char *inner = calloc((size_t)lt->nvars + 1, 1);
    int d, j, ok = inner != NULL;

    if (ok)
        bound_vars(nest, inner, lt->nvars);
    for (d = 0; ok && d < st->ndim; d++) {
        base[d] = into ? st->expr->idx[d] : st->idx[d];
        ok = kt_aff_add(&base[d], into ? &st->idx[d] : &st->expr->idx[d], -1) ==
             KT_OK;
        for (j = 0; ok && j < base[d].n; j++)
            ok = base[d].k[j] == 0 || base[d].var[j] < 0 ||
                 base[d].var[j] >= lt->nvars || !inner[base[d].var[j]];
    }
    free(inner);
    return ok;
}

/* Whether the update store under path[0..depth) finishes its elements
 * in one pass: up from it, unrolled or vectorized spatial loops, then
 * reduction loops, then spatial loops only. */
static int
one_pass(const struct kt_node **path, int depth)
{
    int phase = 0; /* 0: register tile, 1: reductions, 2: outer */
    int i;

    for (i = depth - 1; i >= 0; i--) {
        const struct kt_node *p = path[i];
        int tile_loop = p->ann == KT_ANN_UNROLL || p->ann == KT_ANN_VECTORIZE;
        if (p->kind != KT_N_LOOP)
            continue;
        if (p->reduce) {
            if (phase == 2)
                return 0;
            phase = 1;
        } else if (phase == 0 && !tile_loop) {
            return 0;
        } else if (phase == 1) {
            phase = 2;
        }
    }
    return phase >= 1;
}

/* Whether a store below n reads tile in its expression: a producer that
 * reads its own tile back is not retargeted through a guarded copy (the
 * padding it would read is not in the target). */
static int
node_reads(const struct kt_node *n, int tile)
{
    int i;

    if (kt_expr_reads(n->expr, tile))
        return 1;
    for (i = 0; i < n->nkids; i++)
        if (node_reads(n->kids[i], tile))
            return 1;
    return 0;
}

static void
retarget_expr(struct kt_expr *e, int tile, int to, const struct kt_affine *base)
{
    int d;

    if (e == NULL)
        return;
    if (e->op == KT_X_LOAD && e->src == tile) {
        e->src = to;
        for (d = 0; d < e->ndim; d++)
            (void)kt_aff_add(&e->idx[d], &base[d], 1);
    }
    retarget_expr(e->a, tile, to, base);
    retarget_expr(e->b, tile, to, base);
}

static void
retarget(struct kt_node *n, int tile, int to, const struct kt_affine *base,
         int guarded)
{
    int i, d;

    if (n->kind == KT_N_STORE && n->buf == tile) {
        n->buf = to;
        n->guarded |= guarded;
        for (d = 0; d < n->ndim; d++)
            (void)kt_aff_add(&n->idx[d], &base[d], 1);
    }
    retarget_expr(n->expr, tile, to, base);
    for (i = 0; i < n->nkids; i++)
        retarget(n->kids[i], tile, to, base, guarded);
}

/* Whether adding base to every index of tile in e fits the affine term
 * table (kt_aff_add fails otherwise); checked before anything changes. */
static int
expr_fits(const struct kt_expr *e, int tile, const struct kt_affine *base)
{
    int d;

    if (e == NULL)
        return 1;
    if (e->op == KT_X_LOAD && e->src == tile)
        for (d = 0; d < e->ndim; d++) {
            struct kt_affine a = e->idx[d];
            if (kt_aff_add(&a, &base[d], 1) != KT_OK)
                return 0;
        }
    return expr_fits(e->a, tile, base) && expr_fits(e->b, tile, base);
}

static int
fits(const struct kt_node *n, int tile, const struct kt_affine *base)
{
    int i, d;

    if (n->kind == KT_N_STORE && n->buf == tile)
        for (d = 0; d < n->ndim; d++) {
            struct kt_affine a = n->idx[d];
            if (kt_aff_add(&a, &base[d], 1) != KT_OK)
                return 0;
        }
    if (!expr_fits(n->expr, tile, base))
        return 0;
    for (i = 0; i < n->nkids; i++)
        if (!fits(n->kids[i], tile, base))
            return 0;
    return 1;
}

/* Whether the register tile of update store st under path[0..depth)
 * (the unrolled and vectorized loops right above it) is longer than buffer
 * `to` along one dimension while it spans more than one index of an
 * outer one: retargeted, the padded lanes of one of its rows would be
 * elements of the next one (a 2 x 208 tile of a 197 x 197 product), the
 * code generator could keep none of them in registers, and every update
 * would go through memory (that tile ran at 37.7 GFLOPS on 1 thread,
 * 79.0 with its own tile copied out).  A tile's rows past the last (25
 * rows of 16 over 200 of 197 rows) are dropped by their guards. */
static int
tile_wraps(const struct kt_looptree *lt, const struct kt_node *st, int to,
           const struct kt_node **path, int depth)
{
    int64_t span[KT_MAX_DIMS], outer = 1;
    int i, d;

    for (d = 0; d < st->ndim; d++)
        span[d] = 1;
    for (i = depth - 1; i >= 0; i--) {
        const struct kt_node *p = path[i];
        if (p->kind != KT_N_LOOP)
            continue;
        if (p->ann != KT_ANN_UNROLL && p->ann != KT_ANN_VECTORIZE)
            break;
        for (d = 0; d < st->ndim; d++) {
            int64_t k = kt_aff_coef(&st->idx[d], p->var);
            span[d] += (k < 0 ? -k : k) * (p->extent - 1);
        }
    }
    for (d = 0; d < st->ndim; d++) {
        if (outer > 1 && span[d] > lt->bufs[to].shape[d])
            return 1;
        outer *= span[d];
    }
    return 0;
}

/* Whether every update store into tile below n may be retargeted into
 * buffer to (guarded: through a guarded copy): one_pass(), and for a
 * guarded copy not tile_wraps(). */
static int
updates_retargetable(const struct kt_looptree *lt, const struct kt_node *n,
                     int tile, int to, int guarded, const struct kt_node **path,
                     int depth)
{
    int i;

    if (n->kind == KT_N_STORE && n->buf == tile && n->op != KT_ASSIGN)
        return one_pass(path, depth) &&
               !(guarded && tile_wraps(lt, n, to, path, depth));
    if (depth == 64)
        return 0;
    path[depth] = n;
    for (i = 0; i < n->nkids; i++)
        if (!updates_retargetable(lt, n->kids[i], tile, to, guarded, path,
                                  depth + 1))
            return 0;
    return 1;
}

static int
reads_guarded(const struct kt_expr *e, int tile)
{
    if (e == NULL)
        return 0;
    if (e->op == KT_X_LOAD && e->src == tile && e->guarded)
        return 1;
    return reads_guarded(e->a, tile) || reads_guarded(e->b, tile);
}

/* Whether a store below n writes the tile or its operand src (the
 * readers must see the operand as the copy left it) or reads the tile
 * through a bounds check (made against the tile's shape, not src's). */
static int
disturbs_copy(const struct kt_node *n, int tile, int src)
{
    int i;

    if (n->kind == KT_N_STORE && (n->buf == tile || n->buf == src))
        return 1;
    if (reads_guarded(n->expr, tile))
        return 1;
    for (i = 0; i < n->nkids; i++)
        if (disturbs_copy(n->kids[i], tile, src))
            return 1;
    return 0;
}

/* Whether tile, a copy of a block of src at a constant offset, lies in
 * memory as that block does: under its outermost dimension longer than
 * 1 every dimension is whole and no vector width pads its rows (the
 * generated code pads a local tile's rows, never an argument's). */
static int
same_layout(const struct kt_lbuf *tile, const struct kt_lbuf *src)
{
    static const int vector_bytes[] = {16, 32, 64};
    int d, d0 = 0, v;

    if (tile->ndim != src->ndim)
        return 0;
    while (d0 < tile->ndim - 1 && tile->shape[d0] == 1)
        d0++;
    for (d = d0 + 1; d < tile->ndim; d++) {
        if (tile->shape[d] != src->shape[d])
            return 0;
        for (v = 0; v < 3; v++)
            if (kt_lbuf_pitch(tile, d, vector_bytes[v]) !=
                kt_lbuf_pitch(src, d, vector_bytes[v]))
                return 0;
    }
    return 1;
}

/* A pack that copies a block of its operand without changing its layout
 * (B[h] of a batch matmul, 197 x 64, copied whole per head) is dropped
 * and its readers read the operand in place: the copy changes no stride
 * they see, so it is a pass over the operand for nothing (without it the
 * ViT P V product's pick ran 1.04x faster on a Zen 5, docs/performance.md).
 * A pack of a panel (a column tile of wider rows) or of padded rows
 * changes the layout and stays; the search measures it against the
 * operand read in place.  Returns whether n's pack went. */
static int
elide_pack(struct kt_looptree *lt, struct kt_node *n)
{
    struct kt_affine base[KT_MAX_DIMS];
    struct kt_node *nest = n->kids[0], *st;
    int i, tile = n->buf;

    st = copy_store(nest, tile, 1);
    if (st == NULL || copy_iterations(nest) != kt_lbuf_elems(&lt->bufs[tile]) ||
        !same_layout(&lt->bufs[tile], &lt->bufs[st->expr->src]) ||
        !copy_offsets(lt, nest, st, 1, base))
        return 0;
    for (i = 1; i < n->nkids; i++)
        if (disturbs_copy(n->kids[i], tile, st->expr->src) ||
            !fits(n->kids[i], tile, base))
            return 0;
    for (i = 1; i < n->nkids; i++)
        retarget(n->kids[i], tile, st->expr->src, base, 0);
    kt__lower_node_free(nest);
    for (i = 1; i < n->nkids; i++)
        n->kids[i - 1] = n->kids[i];
    n->nkids--;
    n->kind = KT_N_SEQ;
    n->buf = -1;
    return 1;
}

static void
elide(struct kt_looptree *lt, struct kt_node *n)
{
    const struct kt_node *path[64];
    struct kt_affine base[KT_MAX_DIMS];
    struct kt_node *nest, *st;
    int i, tile;

    for (i = 0; i < n->nkids; i++)
        elide(lt, n->kids[i]);
    if (n->kind != KT_N_ALLOC || n->nkids < 2 ||
        lt->bufs[n->buf].scope != KT_BUF_LOCAL || elide_pack(lt, n))
        return;
    tile = n->buf;
    nest = n->kids[n->nkids - 1];
    st = copy_store(nest, tile, 0);
    /* The copy must cover the tile exactly: a tile widened for another
     * reader would have the producer write outside the copied block. */
    if (st == NULL || lt->bufs[st->buf].ndim != lt->bufs[tile].ndim ||
        copy_iterations(nest) != kt_lbuf_elems(&lt->bufs[tile]) ||
        !copy_offsets(lt, nest, st, 0, base))
        return;
    for (i = 0; i < n->nkids - 1; i++)
        if (!updates_retargetable(lt, n->kids[i], tile, st->buf, st->guarded,
                                  path, 0) ||
            !fits(n->kids[i], tile, base) ||
            (st->guarded && node_reads(n->kids[i], tile)))
            return;
    for (i = 0; i < n->nkids - 1; i++)
        retarget(n->kids[i], tile, st->buf, base, st->guarded);
    kt__lower_node_free(nest);
    n->nkids--;
    n->kind = KT_N_SEQ; /* the tile is no longer allocated */
    n->buf = -1;
}

void
kt__lower_elide_copies(struct kt_looptree *lt)
{
    elide(lt, lt->root);
}
