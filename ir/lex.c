/* lex.c - lexer of the compute language (docs/compute.md): tokens,
 * numbers, identifiers and their positions, and the "line L, column C: ..."
 * error messages the parser (ir/parse.c) reports through it. */
#include "ir/front.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
kt__lex_init(struct kt__lex *lx, const char *text, char *err, size_t errlen)
{
    memset(lx, 0, sizeof(*lx));
    lx->s = text;
    lx->line = lx->col = 1;
    lx->err = err;
    lx->errlen = errlen;
}

int
kt__lex_verr(struct kt__lex *lx, int line, int col, const char *fmt, va_list ap)
{
    char msg[256];

    vsnprintf(msg, sizeof(msg), fmt, ap);
    return kt_seterr(lx->err, lx->errlen, KT_EPARSE, "line %d, column %d: %s",
                     line, col, msg);
}

int
kt__lex_err(struct kt__lex *lx, int line, int col, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = kt__lex_verr(lx, line, col, fmt, ap);
    va_end(ap);
    return rc;
}

/* Describes the current token for "found X" messages. */
static const char *
tokdesc(struct kt__lex *lx, char *buf, size_t n)
{
    switch (lx->t) {
    case KT_TOK_EOF: return "end of input";
    case KT_TOK_END: return lx->tstart[0] == ';' ? "';'" : "end of line";
    case KT_TOK_IDENT:
        snprintf(buf, n, "identifier '%.*s'", (int)lx->tlen, lx->tstart);
        return buf;
    case KT_TOK_NUM:
        snprintf(buf, n, "number '%.*s'", (int)lx->tlen, lx->tstart);
        return buf;
    default: snprintf(buf, n, "'%.*s'", (int)lx->tlen, lx->tstart); return buf;
    }
}

/* "expected X, found <current token>" at the current token. */
int
kt__lex_expected(struct kt__lex *lx, const char *what)
{
    char buf[64];

    return kt__lex_err(lx, lx->tline, lx->tcol, "expected %s, found %s", what,
                       tokdesc(lx, buf, sizeof(buf)));
}

static int
is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int
is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static void
advance_char(struct kt__lex *lx)
{
    if (*lx->s == '\n') {
        lx->line++;
        lx->col = 1;
    } else {
        lx->col++;
    }
    lx->s++;
}

/* Reads the next token into lx. */
int
kt__lex_next(struct kt__lex *lx)
{
    const char *q;

    for (;;) {
        while (*lx->s == ' ' || *lx->s == '\t' || *lx->s == '\r')
            advance_char(lx);
        if (*lx->s != '#')
            break;
        while (*lx->s != '\0' && *lx->s != '\n')
            advance_char(lx);
    }
    lx->tstart = lx->s;
    lx->tline = lx->line;
    lx->tcol = lx->col;
    lx->tlen = 1;
    lx->is_int = 0;
    q = lx->s;
    if (*q == '\0') {
        lx->t = KT_TOK_EOF;
        lx->tlen = 0;
        return KT_OK;
    }
    if (is_alpha(*q)) {
        while (is_alpha(*q) || is_digit(*q))
            q++;
        lx->t = KT_TOK_IDENT;
        lx->tlen = (size_t)(q - lx->s);
        if (lx->tlen >= KT_MAX_NAME)
            return kt__lex_err(lx, lx->tline, lx->tcol,
                               "name '%.*s...' is too long (at most %d "
                               "characters)",
                               16, lx->s, KT_MAX_NAME - 1);
    } else if (is_digit(*q) || (*q == '.' && is_digit(q[1]))) {
        lx->is_int = 1;
        while (is_digit(*q))
            q++;
        if (*q == '.') {
            lx->is_int = 0;
            q++;
            while (is_digit(*q))
                q++;
        }
        if ((*q == 'e' || *q == 'E') &&
            (is_digit(q[1]) ||
             ((q[1] == '+' || q[1] == '-') && is_digit(q[2])))) {
            lx->is_int = 0;
            q += 2;
            while (is_digit(*q))
                q++;
        }
        lx->t = KT_TOK_NUM;
        lx->tlen = (size_t)(q - lx->s);
        if (is_alpha(*q))
            return kt__lex_err(lx, lx->tline, lx->tcol,
                               "malformed number '%.*s%c'", (int)lx->tlen,
                               lx->s, *q);
    } else {
        switch (*q) {
        case '\n':
        case ';': lx->t = KT_TOK_END; break;
        case '[': lx->t = KT_TOK_LBRACK; break;
        case ']': lx->t = KT_TOK_RBRACK; break;
        case '(': lx->t = KT_TOK_LPAREN; break;
        case ')': lx->t = KT_TOK_RPAREN; break;
        case ',': lx->t = KT_TOK_COMMA; break;
        case ':': lx->t = KT_TOK_COLON; break;
        case '-': lx->t = KT_TOK_MINUS; break;
        case '*': lx->t = KT_TOK_STAR; break;
        case '/': lx->t = KT_TOK_SLASH; break;
        case '=': lx->t = KT_TOK_EQ; break;
        case '+':
            lx->t = KT_TOK_PLUS;
            if (q[1] == '=') {
                lx->t = KT_TOK_PLUSEQ;
                lx->tlen = 2;
            }
            break;
        default:
            if (*q > ' ' && *q < 127)
                return kt__lex_err(lx, lx->tline, lx->tcol,
                                   "unexpected character '%c'", *q);
            return kt__lex_err(lx, lx->tline, lx->tcol,
                               "unexpected character 0x%02x",
                               (unsigned char)*q);
        }
    }
    while (lx->s < lx->tstart + lx->tlen)
        advance_char(lx);
    return KT_OK;
}

int
kt__lex_is(struct kt__lex *lx, const char *word)
{
    return lx->t == KT_TOK_IDENT && strlen(word) == lx->tlen &&
           memcmp(lx->tstart, word, lx->tlen) == 0;
}

void
kt__lex_copy(struct kt__lex *lx, char out[KT_MAX_NAME])
{
    memcpy(out, lx->tstart, lx->tlen);
    out[lx->tlen] = '\0';
}

int
kt__lex_int(struct kt__lex *lx, int64_t *v)
{
    char buf[64];
    long long x;

    if (lx->t != KT_TOK_NUM || !lx->is_int)
        return kt__lex_expected(lx, "an integer");
    if (lx->tlen >= sizeof(buf))
        return kt__lex_err(lx, lx->tline, lx->tcol,
                           "integer '%.*s' is too large", (int)lx->tlen,
                           lx->tstart);
    memcpy(buf, lx->tstart, lx->tlen);
    buf[lx->tlen] = '\0';
    errno = 0;
    x = strtoll(buf, NULL, 10);
    if (errno != 0 || x > KT_IDX_LIMIT)
        return kt__lex_err(lx, lx->tline, lx->tcol,
                           "integer %s is too large (at most %lld)", buf,
                           (long long)KT_IDX_LIMIT);
    *v = x;
    return KT_OK;
}
