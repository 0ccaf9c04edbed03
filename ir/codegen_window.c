/* codegen_window.c - window loops: a reduction loop at or above a
 * micro-kernel's kernel loop whose iterations read vectors that other
 * iterations of it read too, at positions the kernel's straight-line
 * body steps over.  A depthwise convolution's kernel rows over a register
 * tile of output rows are one: input row y + r of output row y is row
 * (y + 1) + (r - 1) of output row y + 1.  Left a loop, each iteration
 * loads all its rows again (one load per FMA, the load ports' limit).
 * The 96-channel depthwise conv at 40x40 of PP-OCRv4 det ran 1.32x
 * faster on 1 thread with its r loop unrolled (docs/performance.md).
 * gcc merges plain loads of the unrolled copies but not guarded ones
 * (each a branch): a window loop unrolled completely is expanded whole
 * by the generator instead, each shared read made once
 * (codegen_kernel.c, codegen_pin.c). */
#include "ir/codegen_int.h"

#include <stdlib.h>

/* Longest loop unrolled for its windows: kernel windows are small. */
#define KT_CG_MAX_WINDOW 8

/* Step of the expanded copies of loop n's body, in units of its
 * variable: 1 for a plain loop, its lanes for a vectorized one. */
static int64_t
copy_step(const struct cg *g, const struct kt_node *n)
{
    return kt__cg_is_vector_loop(g, n) ? kt__cg_chunk_lanes(g, n, 0) : 1;
}

/* The loop defining var in the body under n (expanded), or NULL. */
static const struct kt_node *
inner_loop(const struct kt_node *n, int var)
{
    const struct kt_node *f;
    int k;

    for (k = 0; k < n->nkids; k++) {
        const struct kt_node *c = n->kids[k];
        if (c->kind == KT_N_LOOP && c->var == var)
            return c;
        if ((f = inner_loop(c, var)) != NULL)
            return f;
    }
    return NULL;
}

/* Whether a step of dl iterations of loop l (coefficient a) lands on
 * the position a copy of inner loop u (coefficient b) already read: a *
 * dl = b * du for 1 <= dl < l's extent and du one of u's copy offsets. */
static int
steps_meet(const struct cg *g, const struct kt_node *l, int64_t a,
           const struct kt_node *u, int64_t b)
{
    int64_t step = copy_step(g, u), dl, du;

    a = a < 0 ? -a : a;
    b = b < 0 ? -b : b;
    for (dl = 1; dl < l->extent; dl++)
        for (du = step; du < u->extent; du += step)
            if (a * dl == b * du)
                return 1;
    return 0;
}

/* Whether load e reads a new element in every copy of the body under n:
 * every loop there (of more than one iteration) is in its indexes.  A
 * load some copies share (a conv's input row, the same for every output
 * channel of the tile) is reused already; unrolling a window for it
 * adds code and few loads saved (dense 3x3 convolutions ran the same,
 * with 3x as many candidates over the code-size bound). */
static int
load_is_unshared(const struct kt_expr *e, const struct kt_node *n)
{
    int k;

    for (k = 0; k < n->nkids; k++) {
        const struct kt_node *c = n->kids[k];
        if (c->kind == KT_N_LOOP && c->extent > 1 &&
            !kt_expr_load_uses(e, c->var))
            return 0;
        if (!load_is_unshared(e, c))
            return 0;
    }
    return 1;
}

/* Whether load e, in the expanded body under k, reads along one
 * dimension both l's variable and the variable of an expanded loop
 * whose copies meet l's steps (each alone in that dimension among the
 * indexes), and is not shared by the body's copies already. */
static int
load_shares(const struct cg *g, const struct kt_expr *e,
            const struct kt_node *k, const struct kt_node *l)
{
    int d, other, i, seen = -1;

    if (!load_is_unshared(e, k))
        return 0;

    for (d = 0; d < e->ndim; d++)
        if (kt_aff_coef(&e->idx[d], l->var) != 0) {
            if (seen >= 0)
                return 0;
            seen = d;
        }
    if (seen < 0)
        return 0;
    for (i = 0; i < e->idx[seen].n; i++) {
        int var = e->idx[seen].var[i];
        const struct kt_node *u = inner_loop(k, var);
        if (u == NULL || var == l->var)
            continue;
        for (other = 0; other < e->ndim; other++)
            if (other != seen && kt_aff_coef(&e->idx[other], var) != 0)
                break;
        if (other == e->ndim &&
            steps_meet(g, l, kt_aff_coef(&e->idx[seen], l->var), u,
                       e->idx[seen].k[i]))
            return 1;
    }
    return 0;
}

static int
expr_shares(const struct cg *g, const struct kt_expr *e,
            const struct kt_node *k, const struct kt_node *l)
{
    if (e == NULL)
        return 0;
    if (e->op == KT_X_LOAD)
        return load_shares(g, e, k, l);
    return expr_shares(g, e->a, k, l) || expr_shares(g, e->b, k, l);
}

static int
body_shares(const struct cg *g, const struct kt_node *n,
            const struct kt_node *k, const struct kt_node *l)
{
    int i;

    if (n->kind == KT_N_STORE)
        return expr_shares(g, n->expr, k, l);
    for (i = 0; i < n->nkids; i++)
        if (body_shares(g, n->kids[i], k, l))
            return 1;
    return 0;
}

/* The loop at the bottom of the perfect nest of plain loops from n
 * whose body expands (a micro-kernel's kernel loop), or NULL. */
static const struct kt_node *
kernel_below(const struct cg *g, const struct kt_node *n)
{
    const struct kt_node *cur = n;

    while (!kt__cg_body_expands(g, cur)) {
        if (cur->nkids != 1 || cur->kids[0]->kind != KT_N_LOOP ||
            cur->kids[0]->ann != KT_ANN_NONE)
            return NULL;
        cur = cur->kids[0];
    }
    return cur;
}

static int
is_window(struct cg *g, const struct kt_node *n)
{
    const struct kt_node *k;

    if (!n->reduce || n->ann != KT_ANN_NONE || kt__cg_is_unrolled(g, n) ||
        n->extent < 2 || n->extent > KT_CG_MAX_WINDOW)
        return 0;
    k = kernel_below(g, n);
    return k != NULL && body_shares(g, k, k, n) && !kt__cg_peels(g, n);
}

void
kt__cg_mark_windows(struct cg *g, const struct kt_node *n)
{
    int i;

    if (n->kind == KT_N_LOOP && is_window(g, n))
        g->window[n->var] = 1;
    for (i = 0; i < n->nkids; i++)
        kt__cg_mark_windows(g, n->kids[i]);
}

int
kt__cg_is_window(const struct cg *g, const struct kt_node *n)
{
    return g->window != NULL && g->window[n->var];
}
