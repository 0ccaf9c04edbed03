/* print.c - writes a DAG back as compute-language text: the form used for
 * workload keys and messages.  Padding stages are folded back into the
 * reads of the stage they serve, so parse(print(d)) gives d's key. */
#include "ir/front.h"

#include <stdio.h>
#include <string.h>

/* The tensor and index a load had before padding was inserted. */
static void
orig_load(const struct kt_dag *d, const struct kt_expr *e, int *t,
          struct kt_affine *idx)
{
    const struct kt_stage *ps;
    int k, p;

    *t = e->src;
    memcpy(idx, e->idx, sizeof(*idx) * (size_t)e->ndim);
    p = d->tensors[e->src].producer;
    if (p < 0 || !d->stages[p].is_pad)
        return;
    ps = &d->stages[p];
    *t = ps->body->src;
    for (k = 0; k < e->ndim; k++)
        idx[k].c += ps->body->idx[k].c;
}

static void
print_affine(const struct kt_affine *a, struct kt_buf *b)
{
    int order[KT_AFF_TERMS], i, j, tmp, first = 1;
    int64_t k;

    for (i = 0; i < a->n; i++)
        order[i] = i;
    for (i = 1; i < a->n; i++)
        for (j = i; j > 0 && a->var[order[j - 1]] > a->var[order[j]]; j--) {
            tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    for (i = 0; i < a->n; i++) {
        k = a->k[order[i]];
        if (k < 0)
            kt_buf_putc(b, '-');
        else if (!first)
            kt_buf_putc(b, '+');
        if (k != 1 && k != -1)
            kt_buf_printf(b, "%lld*", (long long)(k < 0 ? -k : k));
        kt_buf_printf(b, "a%d", a->var[order[i]]);
        first = 0;
    }
    if (first)
        kt_buf_printf(b, "%lld", (long long)a->c);
    else if (a->c != 0)
        kt_buf_printf(b, "%+lld", (long long)a->c);
}

/* Binding strength: 1 for + -, 2 for * /, 3 for unary minus and negative
 * numbers, 4 for atoms. */
static int
prec(const struct kt_expr *e)
{
    switch (e->op) {
    case KT_X_ADD:
    case KT_X_SUB: return 1;
    case KT_X_MUL:
    case KT_X_DIV: return 2;
    case KT_X_NEG: return 3;
    case KT_X_CONST: return e->value < 0 ? 3 : 4;
    default: return 4;
    }
}

static void print_expr(const struct kt_dag *d, const struct kt_expr *e,
                       struct kt_buf *b);

static void
print_sub(const struct kt_dag *d, const struct kt_expr *e, int paren,
          struct kt_buf *b)
{
    if (paren)
        kt_buf_putc(b, '(');
    print_expr(d, e, b);
    if (paren)
        kt_buf_putc(b, ')');
}

static void
print_expr(const struct kt_dag *d, const struct kt_expr *e, struct kt_buf *b)
{
    struct kt_affine idx[KT_MAX_DIMS];
    static const char ops[] = "+-*/";
    int t, k, p;

    switch (e->op) {
    case KT_X_CONST: kt_buf_printf(b, "%.9g", (double)e->value); return;
    case KT_X_LOAD:
        orig_load(d, e, &t, idx);
        kt_buf_printf(b, "%s[", d->tensors[t].name);
        for (k = 0; k < e->ndim; k++) {
            if (k)
                kt_buf_putc(b, ',');
            print_affine(&idx[k], b);
        }
        kt_buf_putc(b, ']');
        return;
    case KT_X_ADD:
    case KT_X_SUB:
    case KT_X_MUL:
    case KT_X_DIV:
        p = prec(e);
        print_sub(d, e->a, prec(e->a) < p, b);
        kt_buf_putc(b, ops[e->op - KT_X_ADD]);
        print_sub(d, e->b, prec(e->b) <= p, b);
        return;
    case KT_X_NEG:
        kt_buf_putc(b, '-');
        print_sub(d, e->a, prec(e->a) < 3, b);
        return;
    default:
        kt_buf_printf(b, "%s(", kt_xop_name(e->op));
        print_expr(d, e->a, b);
        if (e->b != NULL) {
            kt_buf_putc(b, ',');
            print_expr(d, e->b, b);
        }
        kt_buf_putc(b, ')');
        return;
    }
}

/* Over the reads of e (as written, before padding) that index axis a alone:
 * the shortest such dim, and whether one is exactly `extent` long. */
static void
alone_reads(const struct kt_dag *d, const struct kt_expr *e, int a,
            int64_t extent, int64_t *shortest, int *equal)
{
    struct kt_affine idx[KT_MAX_DIMS];
    int64_t dim;
    int t, k;

    if (e == NULL)
        return;
    if (e->op == KT_X_LOAD) {
        orig_load(d, e, &t, idx);
        for (k = 0; k < e->ndim; k++) {
            if (idx[k].n != 1 || idx[k].k[0] != 1 || idx[k].var[0] != a ||
                idx[k].c != 0)
                continue;
            dim = d->tensors[t].shape[k];
            if (*shortest == 0 || dim < *shortest)
                *shortest = dim;
            *equal |= dim == extent;
        }
    }
    alone_reads(d, e->a, a, extent, shortest, equal);
    alone_reads(d, e->b, a, extent, shortest, equal);
}

/* The output's extent along spatial axis a (a reduction axis: its own
 * extent); a stage iterating past it drops the stores beyond. */
static int64_t
out_extent(const struct kt_dag *d, const struct kt_stage *s, int a)
{
    return a < s->nspatial ? d->tensors[s->out].shape[a] : s->axes[a].extent;
}

int64_t
kt__dag_useful_extent(const struct kt_dag *d, const struct kt_stage *s, int a)
{
    int64_t shortest = 0, e = out_extent(d, s, a);
    int equal = 0;

    alone_reads(d, s->body, a, s->axes[a].extent, &shortest, &equal);
    return shortest != 0 && shortest < e ? shortest : e;
}

/* A parser finds an axis's extent from a read that indexes it alone in a
 * dim of that length; other extents are printed: 'pad' when the stage
 * iterates past a shorter read or past its output's extent (given by
 * 'where'), 'where' otherwise. */
static void
print_extents(const struct kt_dag *d, const struct kt_stage *s,
              struct kt_buf *b, int want_pad)
{
    int64_t shortest, e;
    int a, equal, padded, n = 0;

    for (a = 0; a < s->naxes; a++) {
        shortest = 0;
        equal = 0;
        e = s->axes[a].extent;
        alone_reads(d, s->body, a, e, &shortest, &equal);
        padded = out_extent(d, s, a) < e || (shortest != 0 && shortest < e);
        if (want_pad ? !padded : out_extent(d, s, a) == e && (equal || padded))
            continue;
        if (!want_pad)
            e = out_extent(d, s, a);
        kt_buf_printf(b, "%sa%d:%lld",
                      n++        ? ","
                      : want_pad ? " pad "
                                 : " where ",
                      a, (long long)e);
    }
}

static void
print_stage(const struct kt_dag *d, const struct kt_stage *s, struct kt_buf *b)
{
    static const char *const opnames[] = {"=", "+=", "max=", "min="};
    int a;

    kt_buf_printf(b, "%s[", d->tensors[s->out].name);
    for (a = 0; a < s->nspatial; a++)
        kt_buf_printf(b, "%sa%d", a ? "," : "", a);
    kt_buf_printf(b, "]%s", opnames[s->op]);
    print_expr(d, s->body, b);
    print_extents(d, s, b, 0);
    print_extents(d, s, b, 1);
}

void
kt__dag_print_sep(const struct kt_dag *dag, struct kt_buf *b, char sep)
{
    int s, n = 0;

    for (s = 0; s < dag->nstages; s++) {
        if (dag->stages[s].is_pad)
            continue;
        if (n++)
            kt_buf_putc(b, sep);
        print_stage(dag, &dag->stages[s], b);
    }
}

void
kt_dag_print(const struct kt_dag *dag, struct kt_buf *b)
{
    kt__dag_print_sep(dag, b, '\n');
    kt_buf_putc(b, '\n');
}
