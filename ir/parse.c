/* parse.c - recursive-descent parser of the compute language
 * (docs/compute.md), on top of the lexer in ir/lex.c.  Produces a struct
 * kt__prog; ir/dag.c turns it into a DAG.  Every error names the line and
 * column (1-based) of the token at fault. */
#include "ir/front.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64 /* nesting of parentheses and unary minus */

struct parser {
    struct kt__lex lx; /* tokens, positions and the error buffer */
    struct kt__prog *p;
    struct kt__pstmt *st;    /* statement being parsed */
    int axline[KT_MAX_AXES]; /* first appearance of each axis */
    int axcol[KT_MAX_AXES];
    int depth;
};

static int perr(struct parser *ps, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
perr(struct parser *ps, int line, int col, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = kt__lex_verr(&ps->lx, line, col, fmt, ap);
    va_end(ap);
    return rc;
}

static int
expected(struct parser *ps, const char *what)
{
    return kt__lex_expected(&ps->lx, what);
}

static int
next(struct parser *ps)
{
    return kt__lex_next(&ps->lx);
}

static int
tok_is(struct parser *ps, const char *word)
{
    return kt__lex_is(&ps->lx, word);
}

static void
tok_copy(struct parser *ps, char out[KT_MAX_NAME])
{
    kt__lex_copy(&ps->lx, out);
}

static int
tok_int(struct parser *ps, int64_t *v)
{
    return kt__lex_int(&ps->lx, v);
}

/* ---- Index expressions (affine) --------------------------------------- */

static int
aff_check(struct parser *ps, const struct kt_affine *a, int line, int col)
{
    int i;

    if (a->c > KT_IDX_LIMIT || a->c < -KT_IDX_LIMIT)
        goto big;
    for (i = 0; i < a->n; i++)
        if (a->k[i] > KT_IDX_LIMIT || a->k[i] < -KT_IDX_LIMIT)
            goto big;
    return KT_OK;
big:
    return perr(ps, line, col, "index constant too large (at most %lld)",
                (long long)KT_IDX_LIMIT);
}

/* a *= k, with overflow checks. */
static int
aff_scale(struct parser *ps, struct kt_affine *a, int64_t k, int line, int col)
{
    struct kt_affine r;
    int64_t t;
    int i;

    kt_aff_const(&r, 0);
    if (__builtin_mul_overflow(a->c, k, &r.c))
        goto big;
    for (i = 0; i < a->n; i++) {
        if (__builtin_mul_overflow(a->k[i], k, &t))
            goto big;
        kt_aff_add_term(&r, a->var[i], t);
    }
    *a = r;
    return aff_check(ps, a, line, col);
big:
    return perr(ps, line, col, "index constant too large (at most %lld)",
                (long long)KT_IDX_LIMIT);
}

/* Looks up or creates the axis called by the current identifier. */
static int
axis_ref(struct parser *ps, int *var)
{
    struct kt__pstmt *st = ps->st;
    char name[KT_MAX_NAME];
    int i;

    tok_copy(ps, name);
    for (i = 0; i < st->naxes; i++) {
        if (strcmp(st->axname[i], name) == 0) {
            *var = i;
            return KT_OK;
        }
    }
    if (st->op == KT_ASSIGN)
        return perr(ps, ps->lx.tline, ps->lx.tcol,
                    "axis %s is not on the left; use += / max= / min=", name);
    if (st->naxes == KT_MAX_AXES)
        return perr(ps, ps->lx.tline, ps->lx.tcol,
                    "too many axes in one statement (at most %d)", KT_MAX_AXES);
    snprintf(st->axname[st->naxes], KT_MAX_NAME, "%s", name);
    ps->axline[st->naxes] = ps->lx.tline;
    ps->axcol[st->naxes] = ps->lx.tcol;
    *var = st->naxes++;
    return KT_OK;
}

static int aff_sum(struct parser *ps, struct kt_affine *a);

static int
aff_atom(struct parser *ps, struct kt_affine *a)
{
    int rc, var = 0, line = ps->lx.tline, col = ps->lx.tcol;
    int64_t v;

    if (++ps->depth > MAX_DEPTH)
        return perr(ps, line, col, "index expression nested too deeply");
    switch (ps->lx.t) {
    case KT_TOK_MINUS:
        if ((rc = next(ps)) != KT_OK || (rc = aff_atom(ps, a)) != KT_OK)
            return rc;
        rc = aff_scale(ps, a, -1, line, col);
        break;
    case KT_TOK_LPAREN:
        if ((rc = next(ps)) != KT_OK || (rc = aff_sum(ps, a)) != KT_OK)
            return rc;
        if (ps->lx.t != KT_TOK_RPAREN)
            return expected(ps, "')'");
        rc = next(ps);
        break;
    case KT_TOK_NUM:
        if (!ps->lx.is_int)
            return perr(ps, line, col,
                        "index must be affine with integer coefficients, "
                        "found number '%.*s'",
                        (int)ps->lx.tlen, ps->lx.tstart);
        if ((rc = tok_int(ps, &v)) != KT_OK)
            return rc;
        kt_aff_const(a, v);
        rc = next(ps);
        break;
    case KT_TOK_IDENT:
        if ((rc = axis_ref(ps, &var)) != KT_OK || (rc = next(ps)) != KT_OK)
            return rc;
        if (ps->lx.t == KT_TOK_LBRACK || ps->lx.t == KT_TOK_LPAREN)
            return perr(ps, ps->lx.tline, ps->lx.tcol,
                        "tensor reads and calls are not allowed in an index "
                        "(indexes must be affine in the axes)");
        kt_aff_var(a, var, 1);
        break;
    default: return expected(ps, "an index expression");
    }
    ps->depth--;
    return rc;
}

static int
aff_product(struct parser *ps, struct kt_affine *a)
{
    struct kt_affine b;
    int rc, line, col;

    if ((rc = aff_atom(ps, a)) != KT_OK)
        return rc;
    for (;;) {
        line = ps->lx.tline;
        col = ps->lx.tcol;
        if (ps->lx.t == KT_TOK_SLASH)
            return perr(ps, line, col,
                        "'/' is not allowed in an index (indexes must be "
                        "affine)");
        if (ps->lx.t != KT_TOK_STAR)
            return KT_OK;
        if ((rc = next(ps)) != KT_OK || (rc = aff_atom(ps, &b)) != KT_OK)
            return rc;
        if (a->n > 0 && b.n > 0)
            return perr(ps, line, col,
                        "index is not affine: product of two axis terms");
        if (a->n == 0) {
            int64_t k = a->c;
            *a = b;
            rc = aff_scale(ps, a, k, line, col);
        } else {
            rc = aff_scale(ps, a, b.c, line, col);
        }
        if (rc != KT_OK)
            return rc;
    }
}

static int
aff_sum(struct parser *ps, struct kt_affine *a)
{
    struct kt_affine b;
    int rc, line, col;
    int64_t sign;

    if ((rc = aff_product(ps, a)) != KT_OK)
        return rc;
    while (ps->lx.t == KT_TOK_PLUS || ps->lx.t == KT_TOK_MINUS) {
        sign = ps->lx.t == KT_TOK_PLUS ? 1 : -1;
        line = ps->lx.tline;
        col = ps->lx.tcol;
        if ((rc = next(ps)) != KT_OK || (rc = aff_product(ps, &b)) != KT_OK)
            return rc;
        /* Both sides are within the limit, so the sum cannot overflow. */
        if (kt_aff_add(a, &b, sign) != KT_OK)
            return perr(ps, line, col, "too many terms in an index");
        if ((rc = aff_check(ps, a, line, col)) != KT_OK)
            return rc;
    }
    return KT_OK;
}

/* ---- Value expressions ------------------------------------------------- */

static int
tensor_use(struct parser *ps, const char *name, int ndim, int line, int col,
           int writing, int *out)
{
    struct kt__prog *p = ps->p;
    int t, cur = (int)(ps->st - p->st);

    for (t = 0; t < p->ntensors; t++)
        if (strcmp(p->tname[t], name) == 0)
            break;
    if (t == p->ntensors) {
        if (t == KT_MAX_TENSORS)
            return perr(ps, line, col, "too many tensors (at most %d)",
                        KT_MAX_TENSORS);
        snprintf(p->tname[t], KT_MAX_NAME, "%s", name);
        p->ndim[t] = ndim;
        p->writer[t] = writing ? cur : -1;
        p->line[t] = line;
        p->col[t] = col;
        p->ntensors++;
        *out = t;
        return KT_OK;
    }
    if (writing && p->writer[t] >= 0)
        return perr(ps, line, col, "tensor %s is already written at line %d",
                    name, p->st[p->writer[t]].line);
    if (writing)
        return perr(ps, line, col,
                    "tensor %s is written here but read before (line %d, "
                    "column %d); a tensor must be written before it is read",
                    name, p->line[t], p->col[t]);
    if (p->writer[t] == cur)
        return perr(ps, line, col, "statement reads its own output %s", name);
    if (p->ndim[t] != ndim)
        return perr(ps, line, col,
                    "tensor %s has %d indexes here but %d at line %d, "
                    "column %d",
                    name, ndim, p->ndim[t], p->line[t], p->col[t]);
    *out = t;
    return KT_OK;
}

static int sum(struct parser *ps, struct kt_expr **out);

static int
load(struct parser *ps, struct kt_expr **out)
{
    struct kt_affine idx[KT_MAX_DIMS];
    char name[KT_MAX_NAME];
    struct kt_expr *e;
    int rc, n = 0, line = ps->lx.tline, col = ps->lx.tcol, t;

    tok_copy(ps, name);
    if ((rc = next(ps)) != KT_OK || (rc = next(ps)) != KT_OK) /* name, [ */
        return rc;
    for (;;) {
        if (n == KT_MAX_DIMS)
            return perr(ps, ps->lx.tline, ps->lx.tcol,
                        "tensor %s has too many indexes (at most %d)", name,
                        KT_MAX_DIMS);
        if ((rc = aff_sum(ps, &idx[n++])) != KT_OK)
            return rc;
        if (ps->lx.t == KT_TOK_RBRACK)
            break;
        if (ps->lx.t != KT_TOK_COMMA)
            return expected(ps, "',' or ']'");
        if ((rc = next(ps)) != KT_OK)
            return rc;
    }
    if ((rc = next(ps)) != KT_OK)
        return rc;
    if ((rc = tensor_use(ps, name, n, line, col, 0, &t)) != KT_OK)
        return rc;
    e = kt_expr_new(KT_X_LOAD);
    e->src = t;
    e->ndim = n;
    e->idx = kt_xmalloc(sizeof(*e->idx) * (size_t)n);
    memcpy(e->idx, idx, sizeof(*e->idx) * (size_t)n);
    *out = e;
    return KT_OK;
}

/* Builds op(a, b); folds it when every operand is a constant. */
static int
make(struct parser *ps, enum kt_xop op, struct kt_expr *a, struct kt_expr *b,
     int line, int col, struct kt_expr **out)
{
    struct kt_expr *e;
    double v;

    if (a->op == KT_X_CONST && (b == NULL || b->op == KT_X_CONST)) {
        v = kt_xop_eval(op, a->value, b ? b->value : 0);
        kt_expr_free(a);
        kt_expr_free(b);
        if (!isfinite(v) || fabs(v) > 3.4e38)
            return perr(ps, line, col,
                        "constant expression is not a finite float");
        e = kt_expr_new(KT_X_CONST);
        e->value = (float)v;
        *out = e;
        return KT_OK;
    }
    e = kt_expr_new(op);
    e->a = a;
    e->b = b;
    *out = e;
    return KT_OK;
}

static const struct {
    const char *name;
    enum kt_xop op;
} funcs[] = {
    {"max", KT_X_MAX},         {"min", KT_X_MIN},   {"exp", KT_X_EXP},
    {"log", KT_X_LOG},         {"sqrt", KT_X_SQRT}, {"tanh", KT_X_TANH},
    {"sigmoid", KT_X_SIGMOID}, {"relu", KT_X_RELU}, {"abs", KT_X_ABS},
};

static int
call(struct parser *ps, struct kt_expr **out)
{
    struct kt_expr *a = NULL, *b = NULL;
    char name[KT_MAX_NAME], what[64];
    int rc, line = ps->lx.tline, col = ps->lx.tcol;
    size_t i;

    tok_copy(ps, name);
    for (i = 0; i < KT_ARRAY_LEN(funcs); i++)
        if (strcmp(funcs[i].name, name) == 0)
            break;
    if (i == KT_ARRAY_LEN(funcs))
        return perr(ps, line, col,
                    "unknown function '%s' (known: max min exp log sqrt tanh "
                    "sigmoid relu abs)",
                    name);
    if ((rc = next(ps)) != KT_OK || (rc = next(ps)) != KT_OK) /* name, ( */
        return rc;
    if ((rc = sum(ps, &a)) != KT_OK)
        goto fail;
    if (kt_xop_arity(funcs[i].op) == 2) {
        if (ps->lx.t != KT_TOK_COMMA) {
            snprintf(what, sizeof(what), "',' (%s takes 2 arguments)", name);
            rc = expected(ps, what);
            goto fail;
        }
        if ((rc = next(ps)) != KT_OK || (rc = sum(ps, &b)) != KT_OK)
            goto fail;
    }
    if (ps->lx.t != KT_TOK_RPAREN) {
        snprintf(what, sizeof(what), "')' (%s takes %d argument%s)", name,
                 kt_xop_arity(funcs[i].op),
                 kt_xop_arity(funcs[i].op) == 1 ? "" : "s");
        rc = expected(ps, what);
        goto fail;
    }
    if ((rc = next(ps)) != KT_OK)
        goto fail;
    return make(ps, funcs[i].op, a, b, line, col, out);
fail:
    kt_expr_free(a);
    kt_expr_free(b);
    return rc;
}

static int
number(struct parser *ps, struct kt_expr **out)
{
    char buf[64];
    double v;
    int rc;

    if (ps->lx.tlen >= sizeof(buf))
        return perr(ps, ps->lx.tline, ps->lx.tcol, "number too long");
    memcpy(buf, ps->lx.tstart, ps->lx.tlen);
    buf[ps->lx.tlen] = '\0';
    v = strtod(buf, NULL);
    if (!isfinite(v) || v > 3.4e38)
        return perr(ps, ps->lx.tline, ps->lx.tcol,
                    "number %s is out of the float range", buf);
    if ((rc = next(ps)) != KT_OK)
        return rc;
    *out = kt_expr_new(KT_X_CONST);
    (*out)->value = (float)v;
    return KT_OK;
}

static int
unary(struct parser *ps, struct kt_expr **out)
{
    struct kt_expr *a = NULL;
    const char *after;
    int rc, line = ps->lx.tline, col = ps->lx.tcol;
    char name[KT_MAX_NAME];

    if (++ps->depth > MAX_DEPTH)
        return perr(ps, line, col, "expression nested too deeply");
    switch (ps->lx.t) {
    case KT_TOK_MINUS:
        if ((rc = next(ps)) != KT_OK || (rc = unary(ps, &a)) != KT_OK)
            break;
        rc = make(ps, KT_X_NEG, a, NULL, line, col, out);
        a = NULL;
        break;
    case KT_TOK_LPAREN:
        if ((rc = next(ps)) != KT_OK || (rc = sum(ps, &a)) != KT_OK)
            break;
        if (ps->lx.t != KT_TOK_RPAREN) {
            rc = expected(ps, "')'");
            break;
        }
        if ((rc = next(ps)) != KT_OK)
            break;
        *out = a;
        a = NULL;
        break;
    case KT_TOK_NUM: rc = number(ps, out); break;
    case KT_TOK_IDENT:
        /* One character of lookahead decides read, call or bare name. */
        after = ps->lx.s;
        while (*after == ' ' || *after == '\t' || *after == '\r')
            after++;
        if (*after == '[') {
            rc = load(ps, out);
        } else if (*after == '(') {
            rc = call(ps, out);
        } else {
            tok_copy(ps, name);
            rc = perr(ps, line, col,
                      "'%s' is used as a value; axes may appear only inside "
                      "tensor indexes [ ] (expected a tensor read, a number "
                      "or a call)",
                      name);
        }
        break;
    default: rc = expected(ps, "a number, a tensor read, a call or '('"); break;
    }
    kt_expr_free(a);
    if (rc == KT_OK)
        ps->depth--;
    return rc;
}

/* Left-associative binary operators, one precedence level each: level 0
 * is '+' and '-' over level 1, level 1 is '*' and '/' over unary. */
static int
binary(struct parser *ps, int level, struct kt_expr **out)
{
    static const struct {
        enum kt__tok tok[2];
        enum kt_xop op[2];
    } lv[2] = {
        {{KT_TOK_PLUS, KT_TOK_MINUS}, {KT_X_ADD, KT_X_SUB}},
        {{KT_TOK_STAR, KT_TOK_SLASH}, {KT_X_MUL, KT_X_DIV}},
    };
    struct kt_expr *a = NULL, *b = NULL;
    enum kt_xop op;
    int rc, line, col;

    rc = level == 1 ? unary(ps, &a) : binary(ps, level + 1, &a);
    if (rc != KT_OK)
        return rc;
    while (ps->lx.t == lv[level].tok[0] || ps->lx.t == lv[level].tok[1]) {
        op = ps->lx.t == lv[level].tok[0] ? lv[level].op[0] : lv[level].op[1];
        line = ps->lx.tline;
        col = ps->lx.tcol;
        rc = next(ps);
        if (rc == KT_OK)
            rc = level == 1 ? unary(ps, &b) : binary(ps, level + 1, &b);
        if (rc != KT_OK) {
            kt_expr_free(a);
            return rc;
        }
        if ((rc = make(ps, op, a, b, line, col, &a)) != KT_OK)
            return rc;
    }
    *out = a;
    return KT_OK;
}

static int
sum(struct parser *ps, struct kt_expr **out)
{
    return binary(ps, 0, out);
}

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
    if ((rc = tensor_use(ps, name, n, st->line, st->col, 1, &st->out)) != KT_OK)
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

static int
where(struct parser *ps)
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
                        "where: %s is not an axis of this statement", name);
        if (st->where[a] != 0)
            return perr(ps, line, col, "where: axis %s is given twice", name);
        if ((rc = next(ps)) != KT_OK)
            return rc;
        if (ps->lx.t != KT_TOK_COLON)
            return expected(ps, "':'");
        if ((rc = next(ps)) != KT_OK || (rc = tok_int(ps, &v)) != KT_OK)
            return rc;
        if (v <= 0)
            return perr(ps, ps->lx.tline, ps->lx.tcol,
                        "where: extent of %s must be positive", name);
        st->where[a] = v;
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
    int64_t where_ext[KT_MAX_AXES];
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
    for (a = 0; a < st->naxes; a++) {
        memcpy(st->axname[perm[a]], names[a], KT_MAX_NAME);
        st->where[perm[a]] = where_ext[a];
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
    if ((rc = sum(ps, &ps->st->body)) != KT_OK)
        return rc;
    if (tok_is(ps, "where") && (rc = where(ps)) != KT_OK)
        return rc;
    if (ps->lx.t != KT_TOK_END && ps->lx.t != KT_TOK_EOF)
        return expected(ps, "an operator, 'where' or end of statement");
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
