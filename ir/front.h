/* front.h - private interface between the compute-language lexer
 * (ir/lex.c), its parser (ir/parse.c) and the DAG builder (ir/dag.c).  Not
 * part of the ir API: only files of ir/ include it. */
#ifndef KT_IR_FRONT_H
#define KT_IR_FRONT_H

#include "ir/ir.h"

#include <stdarg.h>

/* Bound on every integer in an index (coefficients, constants) and on
 * every extent and tensor size, so that index arithmetic stays far from
 * int64 overflow. */
#define KT_IDX_LIMIT ((int64_t)1 << 40)

/* ---- Lexer (ir/lex.c) ------------------------------------------------ */

enum kt__tok {
    KT_TOK_EOF,
    KT_TOK_END,
    KT_TOK_IDENT,
    KT_TOK_NUM,
    KT_TOK_LBRACK,
    KT_TOK_RBRACK,
    KT_TOK_LPAREN,
    KT_TOK_RPAREN,
    KT_TOK_COMMA,
    KT_TOK_COLON,
    KT_TOK_PLUS,
    KT_TOK_MINUS,
    KT_TOK_STAR,
    KT_TOK_SLASH,
    KT_TOK_EQ,
    KT_TOK_PLUSEQ
};

/* Lexer state: the current token and where the text goes on.  Error
 * messages go to the caller's err buffer. */
struct kt__lex {
    const char *s; /* next character */
    int line, col; /* of s */
    /* current token */
    enum kt__tok t;
    const char *tstart;
    size_t tlen;
    int tline, tcol;
    int is_int; /* KT_TOK_NUM without '.' or exponent */
    char *err;
    size_t errlen;
};

/* Starts lexing text (borrowed; must outlive lx) at line 1, column 1; no
 * token is read yet (call kt__lex_next). */
void kt__lex_init(struct kt__lex *lx, const char *text, char *err,
                  size_t errlen);
/* Reads the next token into lx.  Returns KT_OK, or KT_EPARSE with the
 * message in lx->err for a name too long, a malformed number or an
 * unexpected character. */
int kt__lex_next(struct kt__lex *lx);
/* Writes "line L, column C: <fmt...>" to lx->err; returns KT_EPARSE. */
int kt__lex_err(struct kt__lex *lx, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int kt__lex_verr(struct kt__lex *lx, int line, int col, const char *fmt,
                 va_list ap) __attribute__((format(printf, 4, 0)));
/* "expected <what>, found <current token>" at the current token; returns
 * KT_EPARSE. */
int kt__lex_expected(struct kt__lex *lx, const char *what);
/* Whether the current token is the identifier word. */
int kt__lex_is(struct kt__lex *lx, const char *word);
/* Copies the current token (at most KT_MAX_NAME - 1 characters, as the
 * lexer guarantees for identifiers) into out, NUL-terminated. */
void kt__lex_copy(struct kt__lex *lx, char out[KT_MAX_NAME]);
/* Parses the current KT_TOK_NUM as a positive integer no larger than
 * KT_IDX_LIMIT into *v; KT_EPARSE otherwise. */
int kt__lex_int(struct kt__lex *lx, int64_t *v);

/* ---- Parser (ir/parse.c) ---------------------------------------------- */

/* One parsed statement.  Axis numbers: spatial axes (the left side, in
 * order) first, then reduction axes in order of first appearance. */
struct kt__pstmt {
    int line, col; /* position of the output name */
    int out;       /* raw tensor number */
    enum kt_reduce op;
    int naxes, nspatial;
    char axname[KT_MAX_AXES][KT_MAX_NAME];
    int64_t where[KT_MAX_AXES]; /* extent from 'where', 0 if none */
    int64_t padto[KT_MAX_AXES]; /* iterated extent from 'pad', 0 if none */
    struct kt_expr *body;       /* owned; loads name raw tensor numbers */
};

/* A parsed program.  Raw tensor numbers follow first appearance. */
struct kt__prog {
    int ntensors;
    char tname[KT_MAX_TENSORS][KT_MAX_NAME];
    int ndim[KT_MAX_TENSORS];   /* number of indexes at every use */
    int writer[KT_MAX_TENSORS]; /* statement writing it, or -1 */
    int line[KT_MAX_TENSORS];   /* first use */
    int col[KT_MAX_TENSORS];
    int nstmts;
    struct kt__pstmt st[KT_MAX_STAGES];
};

/* Parses text into *p (which the caller zeroes first).  Checks the syntax,
 * affine indexes, axis roles, read-after-write order and consistent index
 * counts; shapes and extents are the builder's job.  On error returns
 * KT_EPARSE with "line L, column C: ..." in err; *p must still be released
 * with kt__prog_free. */
int kt__prog_parse(const char *text, struct kt__prog *p, char *err,
                   size_t errlen);
/* Frees the statement bodies of p (not p itself). */
void kt__prog_free(struct kt__prog *p);

/* Prints the user stages of dag (padding stages folded back into the
 * reads), separated by sep, with canonical axis names a0, a1, ...
 * (ir/print.c). */
void kt__dag_print_sep(const struct kt_dag *dag, struct kt_buf *b, char sep);
/* An axis's extent without padding: where 'pad' lengthened it, the
 * shortest read that indexes it alone; FLOPs count only this. */
int64_t kt__dag_useful_extent(const struct kt_dag *d, const struct kt_stage *s,
                              int a);

#endif /* KT_IR_FRONT_H */
