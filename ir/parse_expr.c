/* parse_expr.c - the expressions of the compute language (docs/compute.md):
 * affine index expressions over a statement's axes, and value expressions
 * (loads, arithmetic, calls, numbers).  Errors name the line and column of
 * the token at fault. */
#include "ir/parse_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64 /* nesting of parentheses and unary minus */

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

int
kt__parse_tensor_use(struct parser *ps, const char *name, int ndim, int line,
                     int col, int writing, int *out)
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
    if ((rc = kt__parse_tensor_use(ps, name, n, line, col, 0, &t)) != KT_OK)
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
    if ((rc = kt__parse_value(ps, &a)) != KT_OK)
        goto fail;
    if (kt_xop_arity(funcs[i].op) == 2) {
        if (ps->lx.t != KT_TOK_COMMA) {
            snprintf(what, sizeof(what), "',' (%s takes 2 arguments)", name);
            rc = expected(ps, what);
            goto fail;
        }
        if ((rc = next(ps)) != KT_OK || (rc = kt__parse_value(ps, &b)) != KT_OK)
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
        if ((rc = next(ps)) != KT_OK || (rc = kt__parse_value(ps, &a)) != KT_OK)
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

int
kt__parse_value(struct parser *ps, struct kt_expr **out)
{
    return binary(ps, 0, out);
}
