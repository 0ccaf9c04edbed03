/* parse_int.h - the parser's state and token helpers, shared by
 * ir/parse.c (statements) and ir/parse_expr.c (index and value
 * expressions).  Not a public header: the parser's entry points are in
 * ir/front.h. */
#ifndef KT_IR_PARSE_INT_H
#define KT_IR_PARSE_INT_H

#include "ir/front.h"

#include <stdarg.h>

struct parser {
    struct kt__lex lx; /* tokens, positions and the error buffer */
    struct kt__prog *p;
    struct kt__pstmt *st;    /* statement being parsed */
    int axline[KT_MAX_AXES]; /* first appearance of each axis */
    int axcol[KT_MAX_AXES];
    int depth;
};

__attribute__((format(printf, 4, 5))) static inline int
perr(struct parser *ps, int line, int col, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = kt__lex_verr(&ps->lx, line, col, fmt, ap);
    va_end(ap);
    return rc;
}

static inline int
expected(struct parser *ps, const char *what)
{
    return kt__lex_expected(&ps->lx, what);
}

static inline int
next(struct parser *ps)
{
    return kt__lex_next(&ps->lx);
}

static inline int
tok_is(struct parser *ps, const char *word)
{
    return kt__lex_is(&ps->lx, word);
}

static inline void
tok_copy(struct parser *ps, char out[KT_MAX_NAME])
{
    kt__lex_copy(&ps->lx, out);
}

static inline int
tok_int(struct parser *ps, int64_t *v)
{
    return kt__lex_int(&ps->lx, v);
}

/* A tensor's use with ndim indexes (writing: the statement's left side):
 * declared on first use, checked against its declaration after. */
int kt__parse_tensor_use(struct parser *ps, const char *name, int ndim,
                         int line, int col, int writing, int *out);
/* A value expression (the right side of a statement). */
int kt__parse_value(struct parser *ps, struct kt_expr **out);

#endif /* KT_IR_PARSE_INT_H */
