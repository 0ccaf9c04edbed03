/* interp.c - the reference interpreter: evaluates a DAG straight from its
 * definition, one stage after another, with double accumulation.  Code
 * generation is tested against it, so it stays simple and obvious. */
#include "ir/ir.h"

#include <math.h>

static double
eval(const struct kt_dag *d, float *const *bufs, const struct kt_expr *e,
     const int64_t *iv)
{
    const struct kt_tensor *t;
    int64_t off = 0, x;
    double a, b;
    int k, i;

    switch (e->op) {
    case KT_X_CONST: return e->value;
    case KT_X_LOAD:
        t = &d->tensors[e->src];
        for (k = 0; k < e->ndim; k++) {
            x = e->idx[k].c;
            for (i = 0; i < e->idx[k].n; i++)
                x += e->idx[k].k[i] * iv[e->idx[k].var[i]];
            if (x < 0 || x >= t->shape[k]) {
                if (e->guarded)
                    return e->pad_value;
                kt_fatalx("interpret: unguarded read of %s out of bounds "
                          "(dim %d index %lld)",
                          t->name, k, (long long)x);
            }
            off = off * t->shape[k] + x;
        }
        return bufs[e->src][off];
    default: break;
    }
    a = eval(d, bufs, e->a, iv);
    b = e->b != NULL ? eval(d, bufs, e->b, iv) : 0;
    if (kt_xop_arity(e->op) == 0)
        kt_fatalx("interpret: bad expression op %d", (int)e->op);
    return kt_xop_eval(e->op, a, b);
}

/* Advances iv[from..to) like an odometer (last axis fastest); returns 0
 * after the last point. */
static int
step(const struct kt_stage *s, int64_t *iv, int from, int to)
{
    int a;

    for (a = to - 1; a >= from; a--) {
        if (++iv[a] < s->axes[a].extent)
            return 1;
        iv[a] = 0;
    }
    return 0;
}

static void
run_stage(const struct kt_dag *d, float *const *bufs, const struct kt_stage *s)
{
    const struct kt_tensor *out = &d->tensors[s->out];
    int64_t iv[KT_MAX_AXES] = {0}, off;
    double acc, v;
    int a;

    do {
        for (a = s->nspatial; a < s->naxes; a++)
            iv[a] = 0;
        acc = s->op == KT_MAXR ? -INFINITY : s->op == KT_MINR ? INFINITY : 0;
        do {
            v = eval(d, bufs, s->body, iv);
            switch (s->op) {
            case KT_ASSIGN: acc = v; break;
            case KT_SUM: acc += v; break;
            case KT_MAXR: acc = v > acc ? v : acc; break;
            case KT_MINR: acc = v < acc ? v : acc; break;
            }
        } while (step(s, iv, s->nspatial, s->naxes));
        /* a stage padded past its output's extent drops those points */
        off = 0;
        for (a = 0; a < s->nspatial && off >= 0; a++)
            off = iv[a] < out->shape[a] ? off * out->shape[a] + iv[a] : -1;
        if (off >= 0)
            bufs[s->out][off] = (float)acc;
    } while (step(s, iv, 0, s->nspatial));
}

void
kt_dag_interpret(const struct kt_dag *dag, float *const *bufs)
{
    int s;

    for (s = 0; s < dag->nstages; s++)
        run_stage(dag, bufs, &dag->stages[s]);
}
