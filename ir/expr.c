/* expr.c - affine index expressions and expression trees shared by the DAG,
 * the schedule state and the loop tree. */
#include "ir/ir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Only c and n: the terms past n are never read (kt_aff_add_term leaves
 * stale ones there too), and clearing all 400 bytes was 4% of a network
 * tuning's CPU time, in the code generator's address arithmetic. */
void
kt_aff_const(struct kt_affine *a, int64_t c)
{
    a->c = c;
    a->n = 0;
}

void
kt_aff_var(struct kt_affine *a, int var, int64_t k)
{
    kt_aff_const(a, 0);
    kt_aff_add_term(a, var, k);
}

int
kt_aff_add_term(struct kt_affine *a, int var, int64_t k)
{
    int i;

    if (k == 0)
        return KT_OK;
    for (i = 0; i < a->n; i++) {
        if (a->var[i] == var) {
            a->k[i] += k;
            if (a->k[i] == 0) {
                /* Keep the table dense: move the last term here. */
                a->n--;
                a->var[i] = a->var[a->n];
                a->k[i] = a->k[a->n];
            }
            return KT_OK;
        }
    }
    if (a->n == KT_AFF_TERMS)
        return KT_ETOOBIG;
    a->var[a->n] = var;
    a->k[a->n] = k;
    a->n++;
    return KT_OK;
}

int
kt_aff_add(struct kt_affine *a, const struct kt_affine *b, int64_t k)
{
    int i, rc;

    a->c += b->c * k;
    for (i = 0; i < b->n; i++) {
        rc = kt_aff_add_term(a, b->var[i], b->k[i] * k);
        if (rc != KT_OK)
            return rc;
    }
    return KT_OK;
}

int64_t
kt_aff_coef(const struct kt_affine *a, int var)
{
    int i;

    for (i = 0; i < a->n; i++)
        if (a->var[i] == var)
            return a->k[i];
    return 0;
}

/* Affines keep one term per variable, none with coefficient 0
 * (kt_aff_add_term), in any order: same terms is same set of pairs.
 * Compared in place: this runs for every access against every register
 * of its buffer in the code-size check of every candidate the search
 * makes (subtracting into a copy of the 400-byte affine took a tenth of
 * the tuner's CPU time in a network's tuning, by perf). */
int
kt_aff_same_terms(const struct kt_affine *a, const struct kt_affine *b)
{
    int i, j;

    if (a->n != b->n)
        return 0;
    for (i = 0; i < a->n; i++) {
        for (j = 0; j < b->n && b->var[j] != a->var[i]; j++)
            ;
        if (j == b->n || b->k[j] != a->k[i])
            return 0;
    }
    return 1;
}

int
kt_expr_load_uses(const struct kt_expr *e, int var)
{
    int d;

    for (d = 0; d < e->ndim; d++)
        if (kt_aff_coef(&e->idx[d], var) != 0)
            return 1;
    return 0;
}

int
kt_xop_arity(enum kt_xop op)
{
    switch (op) {
    case KT_X_CONST:
    case KT_X_LOAD: return 0;
    case KT_X_ADD:
    case KT_X_SUB:
    case KT_X_MUL:
    case KT_X_DIV:
    case KT_X_MAX:
    case KT_X_MIN: return 2;
    default: return 1;
    }
}

const char *
kt_xop_name(enum kt_xop op)
{
    switch (op) {
    case KT_X_MAX: return "max";
    case KT_X_MIN: return "min";
    case KT_X_EXP: return "exp";
    case KT_X_LOG: return "log";
    case KT_X_SQRT: return "sqrt";
    case KT_X_TANH: return "tanh";
    case KT_X_SIGMOID: return "sigmoid";
    case KT_X_RELU: return "relu";
    case KT_X_ABS: return "abs";
    default: return NULL;
    }
}

struct kt_expr *
kt_expr_new(enum kt_xop op)
{
    struct kt_expr *e = kt_xcalloc(1, sizeof(*e));

    e->op = op;
    return e;
}

struct kt_expr *
kt_expr_clone(const struct kt_expr *e)
{
    struct kt_expr *c;

    if (e == NULL)
        return NULL;
    c = kt_xmalloc(sizeof(*c));
    *c = *e;
    if (e->idx != NULL) {
        c->idx = kt_xmalloc(sizeof(*c->idx) * (size_t)(e->ndim ? e->ndim : 1));
        memcpy(c->idx, e->idx, sizeof(*c->idx) * (size_t)e->ndim);
    }
    c->a = kt_expr_clone(e->a);
    c->b = kt_expr_clone(e->b);
    return c;
}

void
kt_expr_free(struct kt_expr *e)
{
    if (e == NULL)
        return;
    kt_expr_free(e->a);
    kt_expr_free(e->b);
    free(e->idx);
    free(e);
}

double
kt_xop_eval(enum kt_xop op, double a, double b)
{
    switch (op) {
    case KT_X_ADD: return a + b;
    case KT_X_SUB: return a - b;
    case KT_X_MUL: return a * b;
    case KT_X_DIV: return a / b;
    case KT_X_MAX: return a > b ? a : b;
    case KT_X_MIN: return a < b ? a : b;
    case KT_X_NEG: return -a;
    case KT_X_EXP: return exp(a);
    case KT_X_LOG: return log(a);
    case KT_X_SQRT: return sqrt(a);
    case KT_X_TANH: return tanh(a);
    case KT_X_SIGMOID: return 1.0 / (1.0 + exp(-a));
    case KT_X_RELU: return a > 0 ? a : 0;
    case KT_X_ABS: return fabs(a);
    default: return NAN;
    }
}

int
kt_expr_reads(const struct kt_expr *e, int t)
{
    if (e == NULL)
        return 0;
    if (e->op == KT_X_LOAD && e->src == t)
        return 1;
    return kt_expr_reads(e->a, t) || kt_expr_reads(e->b, t);
}

int
kt_expr_flops(const struct kt_expr *e)
{
    int n;

    if (e == NULL)
        return 0;
    n = kt_expr_flops(e->a) + kt_expr_flops(e->b);
    switch (e->op) {
    case KT_X_CONST:
    case KT_X_LOAD: return n;
    default: return n + 1;
    }
}

int
kt_aff_compose(struct kt_affine *out, const struct kt_affine *a,
               const struct kt_affine *rep, int nrep)
{
    struct kt_affine r;
    int i, rc;

    kt_aff_const(&r, a->c);
    for (i = 0; i < a->n; i++) {
        if (a->var[i] < 0 || a->var[i] >= nrep)
            return KT_EINVAL;
        rc = kt_aff_add(&r, &rep[a->var[i]], a->k[i]);
        if (rc != KT_OK)
            return rc;
    }
    *out = r;
    return KT_OK;
}

int
kt_expr_subst_axes(struct kt_expr *e, const struct kt_affine *rep, int nrep)
{
    int d, rc;

    if (e == NULL)
        return KT_OK;
    if (e->op == KT_X_LOAD) {
        for (d = 0; d < e->ndim; d++) {
            rc = kt_aff_compose(&e->idx[d], &e->idx[d], rep, nrep);
            if (rc != KT_OK)
                return rc;
        }
    }
    rc = kt_expr_subst_axes(e->a, rep, nrep);
    if (rc == KT_OK)
        rc = kt_expr_subst_axes(e->b, rep, nrep);
    return rc;
}

int64_t
kt_load_flat_coef(const struct kt_expr *e, const int64_t *shape, int var)
{
    int64_t stride = 1, c = 0;
    int d;

    for (d = e->ndim - 1; d >= 0; d--) {
        c += kt_aff_coef(&e->idx[d], var) * stride;
        stride *= shape[d];
    }
    return c;
}
