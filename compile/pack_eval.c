/* pack_eval.c - runs a kernel's pack routine (the loop tree's pack nest,
 * lt->pack_root) in this process, so that compile writes the packed copy
 * of a constant weight into the weights file instead of the network
 * packing it at init.  The nest is a copy (with zero padding) of a weight
 * into a tiled layout: evaluated in float it gives the bits the generated
 * pack routine gives. */
#include "compile/compile_int.h"

#include <stdlib.h>
#include <string.h>

#include "onnx/onnx.h"

struct pev {
    const struct kt_looptree *lt;
    int vector_bytes; /* the kernel's: packed rows are padded for it */
    int64_t *env;     /* value of each loop-tree variable */
    float **bufs;     /* per loop-tree buffer, NULL until it exists */
    char *err;
    size_t errlen;
    int rc;
};

static int64_t
aff_eval(const struct pev *p, const struct kt_affine *a)
{
    int64_t v = a->c;
    int i;

    for (i = 0; i < a->n; i++)
        v += a->k[i] * p->env[a->var[i]];
    return v;
}

/* The element of buffer b at idx, row-major, in the layout the kernel
 * reads (kt_lbuf_pitch); -1 outside the buffer (a guarded read's
 * padding). */
static int64_t
flat_index(const struct pev *p, int b, const struct kt_affine *idx)
{
    const struct kt_lbuf *lb = &p->lt->bufs[b];
    int64_t at = 0;
    int d;

    for (d = 0; d < lb->ndim; d++) {
        int64_t i = aff_eval(p, &idx[d]);
        if (i < 0 || i >= lb->shape[d])
            return -1;
        at = at * kt_lbuf_pitch(lb, d, p->vector_bytes) + i;
    }
    return at;
}

static int
fail(struct pev *p, const char *what, int b)
{
    if (p->rc == KT_OK)
        p->rc = kt_seterr(p->err, p->errlen, KT_ESCHEDULE,
                          "pack routine: %s buffer %s outside its shape or "
                          "before it exists",
                          what, p->lt->bufs[b].name);
    return p->rc;
}

static float
eval(struct pev *p, const struct kt_expr *e)
{
    int64_t at;

    switch (e->op) {
    case KT_X_CONST: return e->value;
    case KT_X_LOAD:
        at = flat_index(p, e->src, e->idx);
        if (at < 0 && e->guarded)
            return e->pad_value;
        if (at < 0 || p->bufs[e->src] == NULL) {
            fail(p, "reads", e->src);
            return 0;
        }
        return p->bufs[e->src][at];
    default: break;
    }
    if (kt_xop_arity(e->op) == 1)
        return (float)kt_xop_eval(e->op, eval(p, e->a), 0);
    return (float)kt_xop_eval(e->op, eval(p, e->a), eval(p, e->b));
}

static void
store(struct pev *p, const struct kt_node *n)
{
    int64_t at = flat_index(p, n->buf, n->idx);
    float v = eval(p, n->expr), *dst;

    if (at < 0 || p->bufs[n->buf] == NULL) {
        fail(p, "writes", n->buf);
        return;
    }
    dst = &p->bufs[n->buf][at];
    switch (n->op) {
    case KT_SUM: *dst += v; break;
    case KT_MAXR: *dst = *dst > v ? *dst : v; break;
    case KT_MINR: *dst = *dst < v ? *dst : v; break;
    default: *dst = v; break;
    }
}

static void
run(struct pev *p, const struct kt_node *n)
{
    int64_t i;
    int k;

    if (p->rc != KT_OK)
        return;
    switch (n->kind) {
    case KT_N_STORE: store(p, n); return;
    case KT_N_LET:
        p->env[n->var] = p->env[n->src_var] / n->div % n->mod;
        return;
    case KT_N_LOOP:
        for (i = 0; i < n->extent && p->rc == KT_OK; i++) {
            p->env[n->var] = i;
            for (k = 0; k < n->nkids; k++)
                run(p, n->kids[k]);
        }
        return;
    case KT_N_ALLOC:
        p->bufs[n->buf] =
            kt_xcalloc((size_t)kt_lbuf_stored_elems(&p->lt->bufs[n->buf],
                                                    p->vector_bytes),
                       sizeof(float));
        for (k = 0; k < n->nkids; k++)
            run(p, n->kids[k]);
        free(p->bufs[n->buf]);
        p->bufs[n->buf] = NULL;
        return;
    default:
        for (k = 0; k < n->nkids; k++)
            run(p, n->kids[k]);
        return;
    }
}

int
kt__cc_pack_eval(const struct kt_looptree *lt, int vector_bytes,
                 float *const *args, char *err, size_t errlen)
{
    struct pev p = {lt, vector_bytes, NULL, NULL, err, errlen, KT_OK};
    int b, k = 0;

    if (lt->pack_root == NULL)
        return KT_OK;
    p.env = kt_xcalloc((size_t)lt->nvars + 1, sizeof(*p.env));
    p.bufs = kt_xcalloc((size_t)lt->nbufs + 1, sizeof(*p.bufs));
    for (b = 0; b < lt->nargs; b++)
        p.bufs[lt->args[b]] = args[b];
    for (b = 0; b < lt->nbufs; b++) {
        const struct kt_lbuf *lb = &lt->bufs[b];
        if (lb->scope == KT_BUF_PACKED)
            p.bufs[b] = args[lt->nargs + k++];
        else if (lb->scope == KT_BUF_HEAP)
            p.bufs[b] = kt_xcalloc((size_t)kt_lbuf_stored_elems(lb,
                                                                vector_bytes),
                                   sizeof(float));
    }
    run(&p, lt->pack_root);
    for (b = 0; b < lt->nbufs; b++)
        if (lt->bufs[b].scope == KT_BUF_HEAP)
            free(p.bufs[b]);
    free(p.env);
    free(p.bufs);
    return p.rc;
}

/* Packs step s's constant weights into new ranges of the weights. */
static int
prepack_step(struct kt_cc *c, struct kt_cc_step *s, char *err, size_t errlen)
{
    struct kt_cc_net *net = c->net;
    const struct kt_cc_task *t = &c->t[net->g->kernels[s->kernel].task];
    float *args[KT_MAX_TENSORS + KT_CC_MAX_PACKED];
    int a, p;

    for (p = 0; p < t->npacked; p++)
        net->packed_at[s->packed + p] = kt__cc_w_alloc(net, t->packed[p].elems);
    /* pointers into w only once it no longer grows */
    for (a = 0; a < t->lt->nargs; a++)
        args[a] = kt__cc_packed_of(t, a) != NULL ? net->w + s->refs[a].at
                                                 : NULL;
    for (p = 0; p < t->npacked; p++)
        args[t->lt->nargs + p] = net->w + net->packed_at[s->packed + p];
    return kt__cc_pack_eval(t->lt, c->cg.vector_bytes, args, err, errlen);
}

/* 1 when step s reads argument a's weight itself: the kernel reads it, or
 * the step packs at run time. */
static int
reads_original(const struct kt_cc *c, const struct kt_cc_step *s, int a)
{
    if (s->kernel < 0 || s->pack_input)
        return 1;
    return !kt__cc_arg_replaced(&c->t[c->net->g->kernels[s->kernel].task], a);
}

/* The range of w that starts at float at (ranges are sorted). */
static int
range_of(const struct kt_cc_range *r, int n, int64_t at)
{
    int lo = 0, hi = n - 1;

    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (r[mid].at < at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Keeps the ranges of w a step reads (packed copies included), in order,
 * and moves the steps' references along. */
static void
drop_unread(struct kt_cc *c)
{
    struct kt_cc_net *net = c->net;
    struct kt_cc_range *old = net->allocs;
    int n = net->nallocs, i, r;
    int64_t *moved = kt_xmalloc((size_t)n * sizeof(int64_t) + 1);
    int64_t *at;
    float *w = net->w;

    memset(moved, 0xff, (size_t)n * sizeof(int64_t));
    for (i = 0; i < net->nsteps; i++)
        for (r = 0; r < net->steps[i].nrefs; r++)
            if (net->steps[i].refs[r].src == KT_CC_WEIGHT &&
                reads_original(c, &net->steps[i], r))
                moved[range_of(old, n, net->steps[i].refs[r].at)] = 0;
    for (i = 0; i < net->npacked; i++)
        if (net->packed_at[i] >= 0)
            moved[range_of(old, n, net->packed_at[i])] = 0;
    net->w = NULL;
    net->allocs = NULL;
    net->nw = net->capw = 0;
    net->nallocs = 0;
    for (i = 0; i < n; i++)
        if (moved[i] == 0) {
            moved[i] = kt__cc_w_alloc(net, old[i].n);
            memcpy(net->w + moved[i], w + old[i].at,
                   (size_t)old[i].n * sizeof(float));
        }
    for (i = 0; i < net->nsteps; i++)
        for (r = 0; r < net->steps[i].nrefs; r++) {
            at = &net->steps[i].refs[r].at;
            if (net->steps[i].refs[r].src == KT_CC_WEIGHT)
                *at = moved[range_of(old, n, *at)];
        }
    for (i = 0; i < net->npacked; i++)
        if (net->packed_at[i] >= 0)
            net->packed_at[i] = moved[range_of(old, n, net->packed_at[i])];
    free(old);
    free(w);
    free(moved);
}

int
kt__cc_net_prepack(struct kt_cc *c, char *err, size_t errlen)
{
    struct kt_cc_net *net = c->net;
    int i, rc = KT_OK;

    net->packed_at = kt_xmalloc((size_t)net->npacked * sizeof(int64_t) + 1);
    memset(net->packed_at, 0xff, (size_t)net->npacked * sizeof(int64_t));
    for (i = 0; i < net->nsteps && rc == KT_OK; i++)
        if (net->steps[i].kernel >= 0 && !net->steps[i].pack_input &&
            c->t[net->g->kernels[net->steps[i].kernel].task].npacked > 0)
            rc = prepack_step(c, &net->steps[i], err, errlen);
    if (rc == KT_OK)
        drop_unread(c);
    return rc;
}
