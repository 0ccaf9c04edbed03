/* target.c - the identity of a model's target (see config.h). */
#include <string.h>

#include "config/config.h"

void
kt_target_cc_line(const struct kt_target_conf *t, struct kt_buf *b)
{
    int i;

    kt_buf_puts(b, t->cc);
    for (i = 0; i < t->cflags.n; i++)
        kt_buf_printf(b, " %s", t->cflags.v[i]);
    if (t->sysroot != NULL)
        kt_buf_printf(b, " --sysroot=%s", t->sysroot);
}

void
kt_target_id(const struct kt_target_conf *t, struct kt_buf *b)
{
    kt_buf_printf(b, "%s:%s:", t->kind, t->key);
    kt_target_cc_line(t, b);
}

/* A flag that only steers the optimiser: -O, -O0..-O3, -Os, -Oz, -Og and
 * --param=NAME=VALUE.  -Ofast (fast math), -march, -m*, -f* (-fopenmp,
 * -ffast-math) and the rest can change the instructions, the ABI or the
 * results and stay part of the identity. */
static int
optimiser_only(const char *flag, size_t n)
{
    if (n >= 2 && strncmp(flag, "-O", 2) == 0)
        return n == 2 || (n == 3 && strchr("0123sgz", flag[2]) != NULL);
    return n > 8 && strncmp(flag, "--param=", 8) == 0;
}

/* The next blank-separated word of *p: its start and length; 0 at the
 * end.  Optimiser-only flags are skipped. */
static size_t
next_identity_word(const char **p, const char **word)
{
    for (;;) {
        size_t n;
        while (**p == ' ')
            (*p)++;
        if (**p == '\0')
            return 0;
        n = strcspn(*p, " ");
        *word = *p;
        *p += n;
        if (!optimiser_only(*word, n))
            return n;
    }
}

int
kt_target_siblings(const char *a, const char *b)
{
    const char *ca, *cb, *wa, *wb;
    size_t na, nb;

    /* KIND:KEY: must be equal; the compiler line follows the 2nd colon */
    if ((ca = strchr(a, ':')) == NULL || (ca = strchr(ca + 1, ':')) == NULL ||
        (cb = strchr(b, ':')) == NULL || (cb = strchr(cb + 1, ':')) == NULL ||
        ca - a != cb - b || strncmp(a, b, (size_t)(ca - a)) != 0)
        return 0;
    ca++;
    cb++;
    for (;;) {
        na = next_identity_word(&ca, &wa);
        nb = next_identity_word(&cb, &wb);
        if (na != nb || (na > 0 && strncmp(wa, wb, na) != 0))
            return 0;
        if (na == 0)
            return 1;
    }
}
