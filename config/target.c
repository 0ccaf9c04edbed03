/* target.c - the identity of a model's target (see config.h). */
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
