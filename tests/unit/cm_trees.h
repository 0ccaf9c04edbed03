/* cm_trees.h - hand-built loop trees for the cost-model tests and bench
 * (header-only, static inline; included by tests/unit/test_features.c,
 * tests/unit/test_xgb.c and bench/bench_costmodel.c). */
#ifndef KT_CM_TREES_H
#define KT_CM_TREES_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "ir/ir.h"

static inline struct kt_looptree *
tb_new(int nvars)
{
    struct kt_looptree *lt = kt_xcalloc(1, sizeof(*lt));
    int i;

    lt->nvars = nvars;
    lt->var_names = kt_xcalloc((size_t)nvars, sizeof(*lt->var_names));
    for (i = 0; i < nvars; i++)
        snprintf(lt->var_names[i], sizeof(lt->var_names[i]), "v%d", i);
    return lt;
}

static inline int
tb_buf(struct kt_looptree *lt, const char *name, enum kt_buf_scope scope,
       int ndim, int64_t d0, int64_t d1)
{
    struct kt_lbuf *b = &lt->bufs[lt->nbufs];

    snprintf(b->name, sizeof(b->name), "%s", name);
    b->scope = scope;
    b->tensor = lt->nbufs;
    b->ndim = ndim;
    b->shape[0] = d0;
    b->shape[1] = d1;
    if (scope == KT_BUF_ARG) {
        b->arg = lt->nargs;
        lt->args[lt->nargs++] = lt->nbufs;
    }
    return lt->nbufs++;
}

static inline struct kt_node *
tb_add(struct kt_node *parent, struct kt_node *kid)
{
    if (parent->nkids == parent->capkids) {
        parent->capkids = parent->capkids ? parent->capkids * 2 : 4;
        parent->kids = kt_xrealloc(parent->kids, (size_t)parent->capkids *
                                                     sizeof(*parent->kids));
    }
    parent->kids[parent->nkids++] = kid;
    return kid;
}

static inline struct kt_node *
tb_node(struct kt_node *parent, enum kt_node_kind kind)
{
    struct kt_node *n = kt_xcalloc(1, sizeof(*n));

    n->kind = kind;
    if (parent != NULL)
        tb_add(parent, n);
    return n;
}

static inline struct kt_node *
tb_loop(struct kt_node *parent, int var, int64_t extent, enum kt_annot ann,
        int reduce)
{
    struct kt_node *n = tb_node(parent, KT_N_LOOP);

    n->var = var;
    n->extent = extent;
    n->ann = ann;
    n->reduce = reduce;
    return n;
}

static inline struct kt_node *
tb_let(struct kt_node *parent, int var, int src, int64_t div, int64_t mod)
{
    struct kt_node *n = tb_node(parent, KT_N_LET);

    n->var = var;
    n->src_var = src;
    n->div = div;
    n->mod = mod;
    return n;
}

/* a = c + sum of n (var, k) pairs given as ints/int64s. */
static inline void
tb_aff(struct kt_affine *a, int64_t c, int n, ...)
{
    va_list ap;
    int i, v;
    int64_t k;

    kt_aff_const(a, c);
    va_start(ap, n);
    for (i = 0; i < n; i++) {
        v = va_arg(ap, int);
        k = va_arg(ap, int64_t);
        kt_aff_add_term(a, v, k);
    }
    va_end(ap);
}

static inline struct kt_expr *
tb_load(int buf, int ndim)
{
    struct kt_expr *e = kt_expr_new(KT_X_LOAD);

    e->src = buf;
    e->ndim = ndim;
    e->idx = kt_xcalloc((size_t)ndim, sizeof(*e->idx));
    return e;
}

static inline struct kt_expr *
tb_bin(enum kt_xop op, struct kt_expr *a, struct kt_expr *b)
{
    struct kt_expr *e = kt_expr_new(op);

    e->a = a;
    e->b = b;
    return e;
}

static inline struct kt_node *
tb_store(struct kt_node *parent, int buf, int ndim, enum kt_reduce op,
         struct kt_expr *expr)
{
    struct kt_node *n = tb_node(parent, KT_N_STORE);

    n->buf = buf;
    n->ndim = ndim;
    n->op = op;
    n->expr = expr;
    return n;
}

static inline void
tb_free_node(struct kt_node *n)
{
    int i;

    if (n == NULL)
        return;
    for (i = 0; i < n->nkids; i++)
        tb_free_node(n->kids[i]);
    free(n->kids);
    kt_expr_free(n->expr);
    free(n);
}

static inline void
tb_free(struct kt_looptree *lt)
{
    if (lt == NULL)
        return;
    tb_free_node(lt->root);
    free(lt->var_names);
    free(lt);
}

#define I64(x) ((int64_t)(x))

/* A dense layer D = relu(A x B + bias) with A[M,K], B[K,N], scheduled as
 * Ansor's CPU sketch: a parallel outer loop (fused io,jo when 'fuse'), a
 * local accumulator tile C[ti,tj] with an init store, the reduction split
 * ko/ki with ki unrolled, the tile rows unrolled and the tile columns
 * vectorized, and an epilogue storing the tile.  M, N, K must be
 * multiples of ti, tj and tk.  Buffers: 0 A, 1 B, 2 bias, 3 D, 4 C. */
struct tb_gemm {
    int64_t M, N, K, ti, tj, tk;
    int fuse; /* fuse io and jo into one parallel loop */
    int vectorize, unroll, parallel;
};

static inline struct kt_looptree *
tb_gemm_tree(const struct tb_gemm *g)
{
    struct kt_looptree *lt = tb_new(16);
    struct kt_node *n, *alloc, *l;
    struct kt_expr *a, *b, *c, *bias;
    int64_t mo = g->M / g->ti, no = g->N / g->tj, ko = g->K / g->tk;
    enum kt_annot vec = g->vectorize ? KT_ANN_VECTORIZE : KT_ANN_NONE;
    enum kt_annot unr = g->unroll ? KT_ANN_UNROLL : KT_ANN_NONE;
    enum kt_annot par = g->parallel ? KT_ANN_PARALLEL : KT_ANN_NONE;
    int A, B, BIAS, D, C;

    A = tb_buf(lt, "A", KT_BUF_ARG, 2, g->M, g->K);
    B = tb_buf(lt, "B", KT_BUF_ARG, 2, g->K, g->N);
    BIAS = tb_buf(lt, "bias", KT_BUF_ARG, 1, g->N, 0);
    D = tb_buf(lt, "D", KT_BUF_ARG, 2, g->M, g->N);
    C = tb_buf(lt, "C.local", KT_BUF_LOCAL, 2, g->ti, g->tj);
    lt->root = tb_node(NULL, KT_N_SEQ);
    lt->flops = 2.0 * (double)g->M * (double)g->N * (double)g->K;
    /* vars: 0 io, 1 jo, 2 ii(init), 3 ji(init), 4 ko, 5 ki, 6 ii, 7 ji,
     * 8 ii(epi), 9 ji(epi), 10 fused. */
    if (g->fuse) {
        n = tb_loop(lt->root, 10, mo * no, par, 0);
        tb_let(n, 0, 10, no, mo);
        tb_let(n, 1, 10, 1, no);
    } else {
        n = tb_loop(lt->root, 0, mo, par, 0);
        n = tb_loop(n, 1, no, KT_ANN_NONE, 0);
    }
    alloc = tb_node(n, KT_N_ALLOC);
    alloc->buf = C;
    /* init */
    l = tb_loop(alloc, 2, g->ti, KT_ANN_NONE, 0);
    l = tb_loop(l, 3, g->tj, vec, 0);
    n = tb_store(l, C, 2, KT_ASSIGN, kt_expr_new(KT_X_CONST));
    tb_aff(&n->idx[0], 0, 1, 2, I64(1));
    tb_aff(&n->idx[1], 0, 1, 3, I64(1));
    /* update */
    l = tb_loop(alloc, 4, ko, KT_ANN_NONE, 1);
    l = tb_loop(l, 5, g->tk, unr, 1);
    l = tb_loop(l, 6, g->ti, unr, 0);
    l = tb_loop(l, 7, g->tj, vec, 0);
    a = tb_load(A, 2);
    tb_aff(&a->idx[0], 0, 2, 0, g->ti, 6, I64(1));
    tb_aff(&a->idx[1], 0, 2, 4, g->tk, 5, I64(1));
    b = tb_load(B, 2);
    tb_aff(&b->idx[0], 0, 2, 4, g->tk, 5, I64(1));
    tb_aff(&b->idx[1], 0, 2, 1, g->tj, 7, I64(1));
    n = tb_store(l, C, 2, KT_SUM, tb_bin(KT_X_MUL, a, b));
    tb_aff(&n->idx[0], 0, 1, 6, I64(1));
    tb_aff(&n->idx[1], 0, 1, 7, I64(1));
    /* epilogue */
    l = tb_loop(alloc, 8, g->ti, KT_ANN_NONE, 0);
    l = tb_loop(l, 9, g->tj, vec, 0);
    c = tb_load(C, 2);
    tb_aff(&c->idx[0], 0, 1, 8, I64(1));
    tb_aff(&c->idx[1], 0, 1, 9, I64(1));
    bias = tb_load(BIAS, 1);
    tb_aff(&bias->idx[0], 0, 2, 1, g->tj, 9, I64(1));
    n = tb_store(l, D, 2, KT_ASSIGN,
                 tb_bin(KT_X_RELU, tb_bin(KT_X_ADD, c, bias), NULL));
    tb_aff(&n->idx[0], 0, 2, 0, g->ti, 8, I64(1));
    tb_aff(&n->idx[1], 0, 2, 1, g->tj, 9, I64(1));
    return lt;
}

#endif /* KT_CM_TREES_H */
