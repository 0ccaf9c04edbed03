/* parse.c - recursive-descent parser of the compute language
 * (docs/compute.md), on top of the lexer in ir/lex.c.  Produces a struct
 * kt__prog; ir/dag.c turns it into a DAG.  Every error names the line and
 * column (1-based) of the token at fault.  Statements here, expressions in
 * ir/parse_expr.c. */
#include "ir/parse_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Statements ------------------------------------------------------- */

static int
lhs(struct parser *ps)
{
    struct kt__pstmt *st = ps->st;
    char name[KT_MAX_NAME];
    int rc, i, n = 0;

    if (ps->lx.t != KT_TOK_IDENT)
        return expected(ps, "a tensor name");
    tok_copy(ps, name);
    st->line = ps->lx.tline;
    st->col = ps->lx.tcol;
    if ((rc = next(ps)) != KT_OK)
        return rc;
    if (ps->lx.t != KT_TOK_LBRACK)
        return expected(ps, "'['");
    do {
        if ((rc = next(ps)) != KT_OK)
            return rc;
        if (ps->lx.t != KT_TOK_IDENT)
            return expected(ps, "an axis name (the left side takes bare "
                                "axis names)");
        if (n == KT_MAX_DIMS)
            return perr(ps, ps->lx.tline, ps->lx.tcol,
                        "tensor %s has too many indexes (at most %d)", name,
                        KT_MAX_DIMS);
        tok_copy(ps, st->axname[n]);
        for (i = 0; i < n; i++)
            if (strcmp(st->axname[i], st->axname[n]) == 0)
                return perr(ps, ps->lx.tline, ps->lx.tcol,
                            "axis %s appears twice on the left", st->axname[n]);
        n++;
        if ((rc = next(ps)) != KT_OK)
            return rc;
    } while (ps->lx.t == KT_TOK_COMMA);
    if (ps->lx.t != KT_TOK_RBRACK)
        return expected(ps, "',' or ']' (the left side takes bare axis "
                            "names)");
    st->naxes = st->nspatial = n;
    if ((rc = kt__parse_tensor_use(ps, name, n, st->line, st->col, 1,
                                   &st->out)) != KT_OK)
        return rc;
    return next(ps);
}

static int
reduce_op(struct parser *ps)
{
    struct kt__pstmt *st = ps->st;
    int rc;

    if (ps->lx.t == KT_TOK_EQ) {
        st->op = KT_ASSIGN;
    } else if (ps->lx.t == KT_TOK_PLUSEQ) {
        st->op = KT_SUM;
    } else if (tok_is(ps, "max") || tok_is(ps, "min")) {
        st->op = tok_is(ps, "max") ? KT_MAXR : KT_MINR;
        if ((rc = next(ps)) != KT_OK)
            return rc;
        if (ps->lx.t != KT_TOK_EQ)
            return expected(ps, "'=' (as in max= or min=)");
    } else {
        return expected(ps, "'=', '+=', 'max=' or 'min='");
    }
    return next(ps);
}

/* 'where AXIS:N, ...' gives extents; 'pad AXIS:N, ...' the extents the
 * statement iterates over, past the ends of shorter reads (docs/compute.md,
 * Padded extents). */
static int
extents(struct parser *ps, const char *clause, int64_t *dst)
{
    struct kt__pstmt *st = ps->st;
    char name[KT_MAX_NAME];
    int rc, a, line, col;
    int64_t v;

    do {
        if ((rc = next(ps)) != KT_OK)
            return rc;
        if (ps->lx.t != KT_TOK_IDENT)
            return expected(ps, "an axis name");
        tok_copy(ps, name);
        line = ps->lx.tline;
        col = ps->lx.tcol;
        for (a = 0; a < st->naxes; a++)
            if (strcmp(st->axname[a], name) == 0)
                break;
        if (a == st->naxes)
            return perr(ps, line, col,
                        "%s: %s is not an axis of this statement", clause,
                        name);
        if (dst[a] != 0)
            return perr(ps, line, col, "%s: axis %s is given twice", clause,
                        name);
        if ((rc = next(ps)) != KT_OK)
            return rc;
        if (ps->lx.t != KT_TOK_COLON)
            return expected(ps, "':'");
        if ((rc = next(ps)) != KT_OK || (rc = tok_int(ps, &v)) != KT_OK)
            return rc;
        if (v <= 0)
            return perr(ps, ps->lx.tline, ps->lx.tcol,
                        "%s: extent of %s must be positive", clause, name);
        dst[a] = v;
        if ((rc = next(ps)) != KT_OK)
            return rc;
    } while (ps->lx.t == KT_TOK_COMMA);
    return KT_OK;
}

/* Numbers reduction axes by first appearance in the normalized body
 * (loads left to right, indexes in order, terms by axis number), the order
 * in which kt_dag_print writes them, so that printing and parsing again
 * gives the same numbering. */
static void
first_use(const struct kt_expr *e, int *perm, int *next)
{
    int d, i, best, v;

    if (e == NULL)
        return;
    if (e->op == KT_X_LOAD) {
        for (d = 0; d < e->ndim; d++) {
            /* Unnumbered variables of this index, smallest first. */
            for (;;) {
                best = -1;
                for (i = 0; i < e->idx[d].n; i++) {
                    v = e->idx[d].var[i];
                    if (perm[v] < 0 && (best < 0 || v < best))
                        best = v;
                }
                if (best < 0)
                    break;
                perm[best] = (*next)++;
            }
        }
    }
    first_use(e->a, perm, next);
    first_use(e->b, perm, next);
}

static void
renumber(struct kt_expr *e, const int *perm)
{
    int d, i;

    if (e == NULL)
        return;
    if (e->op == KT_X_LOAD)
        for (d = 0; d < e->ndim; d++)
            for (i = 0; i < e->idx[d].n; i++)
                e->idx[d].var[i] = perm[e->idx[d].var[i]];
    renumber(e->a, perm);
    renumber(e->b, perm);
}

static int
canon_axes(struct parser *ps)
{
    struct kt__pstmt *st = ps->st;
    char names[KT_MAX_AXES][KT_MAX_NAME];
    int64_t where_ext[KT_MAX_AXES], pad_ext[KT_MAX_AXES];
    int perm[KT_MAX_AXES], a, next = st->nspatial;

    for (a = 0; a < st->naxes; a++)
        perm[a] = a < st->nspatial ? a : -1;
    first_use(st->body, perm, &next);
    for (a = st->nspatial; a < st->naxes; a++)
        if (perm[a] < 0)
            return perr(ps, ps->axline[a], ps->axcol[a],
                        "axis %s drops out of every index it appears in "
                        "(its coefficient is 0)",
                        st->axname[a]);
    memcpy(names, st->axname, sizeof(names));
    memcpy(where_ext, st->where, sizeof(where_ext));
    memcpy(pad_ext, st->padto, sizeof(pad_ext));
    for (a = 0; a < st->naxes; a++) {
        memcpy(st->axname[perm[a]], names[a], KT_MAX_NAME);
        st->where[perm[a]] = where_ext[a];
        st->padto[perm[a]] = pad_ext[a];
    }
    renumber(st->body, perm);
    return KT_OK;
}

static int
statement(struct parser *ps)
{
    int rc;

    if ((rc = lhs(ps)) != KT_OK || (rc = reduce_op(ps)) != KT_OK)
        return rc;
    ps->depth = 0;
    if ((rc = kt__parse_value(ps, &ps->st->body)) != KT_OK)
        return rc;
    if (tok_is(ps, "where") &&
        (rc = extents(ps, "where", ps->st->where)) != KT_OK)
        return rc;
    if (tok_is(ps, "pad") && (rc = extents(ps, "pad", ps->st->padto)) != KT_OK)
        return rc;
    if (ps->lx.t != KT_TOK_END && ps->lx.t != KT_TOK_EOF)
        return expected(ps, "an operator, 'where', 'pad' or end of statement");
    return canon_axes(ps);
}

int
kt__prog_parse(const char *text, struct kt__prog *p, char *err, size_t errlen)
{
    struct parser ps;
    int rc;

    memset(&ps, 0, sizeof(ps));
    kt__lex_init(&ps.lx, text, err, errlen);
    ps.p = p;
    if ((rc = next(&ps)) != KT_OK)
        return rc;
    for (;;) {
        while (ps.lx.t == KT_TOK_END)
            if ((rc = next(&ps)) != KT_OK)
                return rc;
        if (ps.lx.t == KT_TOK_EOF)
            break;
        if (p->nstmts == KT_MAX_STAGES)
            return perr(&ps, ps.lx.tline, ps.lx.tcol,
                        "too many statements (at most %d)", KT_MAX_STAGES);
        ps.st = &p->st[p->nstmts++];
        if ((rc = statement(&ps)) != KT_OK)
            return rc;
    }
    if (p->nstmts == 0)
        return perr(&ps, ps.lx.tline, ps.lx.tcol,
                    "expected a statement, found end of input");
    return KT_OK;
}

void
kt__prog_free(struct kt__prog *p)
{
    int i;

    for (i = 0; i < p->nstmts; i++) {
        kt_expr_free(p->st[i].body);
        p->st[i].body = NULL;
    }
}
