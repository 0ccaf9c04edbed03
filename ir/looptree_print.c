/* looptree_print.c - a readable dump of a loop tree (kt_looptree_print). */
#include "ir/ir.h"

static const char *const ann_names[] = {"", " parallel", " vectorize",
                                        " unroll"};
static const char *const op_names[] = {"=", "+=", "max=", "min="};

static void
put_aff(const struct kt_looptree *lt, struct kt_buf *b,
        const struct kt_affine *a)
{
    int i;

    for (i = 0; i < a->n; i++)
        kt_buf_printf(b, "%s%lld*%s", i ? " + " : "", (long long)a->k[i],
                      lt->var_names[a->var[i]]);
    if (a->c || a->n == 0)
        kt_buf_printf(b, "%s%lld", a->n ? " + " : "", (long long)a->c);
}

static void
put_expr(const struct kt_looptree *lt, struct kt_buf *b,
         const struct kt_expr *e)
{
    static const char ops[] =
        {[KT_X_ADD] = '+', [KT_X_SUB] = '-', [KT_X_MUL] = '*', [KT_X_DIV] = '/'};
    int d;

    switch (e->op) {
    case KT_X_CONST: kt_buf_printf(b, "%g", (double)e->value); return;
    case KT_X_LOAD:
        kt_buf_printf(b, "%s%s[", e->guarded ? "guarded " : "",
                      lt->bufs[e->src].name);
        for (d = 0; d < e->ndim; d++) {
            if (d)
                kt_buf_puts(b, ", ");
            put_aff(lt, b, &e->idx[d]);
        }
        kt_buf_puts(b, "]");
        return;
    case KT_X_ADD:
    case KT_X_SUB:
    case KT_X_MUL:
    case KT_X_DIV:
        kt_buf_puts(b, "(");
        put_expr(lt, b, e->a);
        kt_buf_printf(b, " %c ", ops[e->op]);
        put_expr(lt, b, e->b);
        kt_buf_puts(b, ")");
        return;
    case KT_X_NEG:
        kt_buf_puts(b, "-");
        put_expr(lt, b, e->a);
        return;
    default:
        kt_buf_printf(b, "%s(", kt_xop_name(e->op) ? kt_xop_name(e->op) : "?");
        put_expr(lt, b, e->a);
        if (e->b) {
            kt_buf_puts(b, ", ");
            put_expr(lt, b, e->b);
        }
        kt_buf_puts(b, ")");
        return;
    }
}

static void
put_node(const struct kt_looptree *lt, struct kt_buf *b,
         const struct kt_node *n, int depth)
{
    int i, d;

    for (i = 0; i < depth && n->kind != KT_N_SEQ; i++)
        kt_buf_puts(b, "  ");
    switch (n->kind) {
    case KT_N_SEQ: break;
    case KT_N_LOOP:
        kt_buf_printf(b, "for %s in 0..%lld%s%s", lt->var_names[n->var],
                      (long long)n->extent, ann_names[n->ann],
                      n->reduce ? " (reduce)" : "");
        if (n->auto_unroll_max_step)
            kt_buf_printf(b, " auto_unroll_max_step=%d",
                          n->auto_unroll_max_step);
        kt_buf_puts(b, "\n");
        break;
    case KT_N_LET:
        kt_buf_printf(b, "let %s = %s / %lld %% %lld\n", lt->var_names[n->var],
                      lt->var_names[n->src_var], (long long)n->div,
                      (long long)n->mod);
        break;
    case KT_N_ALLOC:
        kt_buf_printf(b, "alloc %s[", lt->bufs[n->buf].name);
        for (d = 0; d < lt->bufs[n->buf].ndim; d++)
            kt_buf_printf(b, "%s%lld", d ? ", " : "",
                          (long long)lt->bufs[n->buf].shape[d]);
        kt_buf_puts(b, "]\n");
        break;
    case KT_N_STORE:
        kt_buf_printf(b, "%s[", lt->bufs[n->buf].name);
        for (d = 0; d < n->ndim; d++) {
            if (d)
                kt_buf_puts(b, ", ");
            put_aff(lt, b, &n->idx[d]);
        }
        kt_buf_printf(b, "] %s ", op_names[n->op]);
        put_expr(lt, b, n->expr);
        kt_buf_puts(b, "\n");
        break;
    }
    for (i = 0; i < n->nkids; i++)
        put_node(lt, b, n->kids[i], n->kind == KT_N_SEQ ? depth : depth + 1);
}

void
kt_looptree_print(const struct kt_looptree *lt, struct kt_buf *b)
{
    put_node(lt, b, lt->root, 0);
}

uint64_t
kt_looptree_hash(const struct kt_looptree *lt)
{
    struct kt_buf b;
    uint64_t h;

    kt_buf_init(&b);
    put_node(lt, &b, lt->root, 0);
    if (lt->pack_root != NULL) {
        kt_buf_puts(&b, "pack\n");
        put_node(lt, &b, lt->pack_root, 0);
    }
    h = kt_hash64(b.p, b.len);
    kt_buf_free(&b);
    return h;
}
