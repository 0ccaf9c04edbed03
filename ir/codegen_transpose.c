/* codegen_transpose.c - a transposing copy (a pack of K[j, k] into
 * P[k][j], docs/schedule.md) as W x W blocks transposed in registers: W
 * contiguous vector loads, log2(W) rounds of two-input shuffles, W
 * contiguous vector stores, instead of one vector load and W scalar
 * stores per W elements.  Likewise a nest whose store reads one buffer
 * across its rows (a tile computed with the output channels along the
 * lanes, stored back to NCHW with the pixels along them): W contiguous
 * loads and the shuffles instead of W scalar loads per vector. */
#include "ir/codegen_int.h"

#include <stdio.h>

/* Coefficient of var in the flat offset of index idx into buffer buf. */
static int64_t
flat_coef(const struct cg *g, int buf, const struct kt_affine *idx, int var)
{
    const struct kt_lbuf *b = &g->lt->bufs[buf];
    int64_t c = 0, stride = 1;
    int d;

    for (d = b->ndim - 1; d >= 0; d--) {
        c += kt_aff_coef(&idx[d], var) * stride;
        stride *= kt__cg_pitch(g, b, d);
    }
    return c;
}

/* Coefficient of var in the flat offset of store n. */
static int64_t
store_coef(const struct cg *g, const struct kt_node *n, int var)
{
    return flat_coef(g, n->buf, n->idx, var);
}

/* Whether loop n is a transposing copy: n's only child is a vectorized
 * loop whose only child is a plain copy dst = src (guarded when it packs
 * zero-padded rows) that reads along the inner loop and writes along n,
 * both contiguously.  Returns
 * the block width W (0: no such copy) and the copy. */
static int
transposes(const struct cg *g, const struct kt_node *n,
           const struct kt_node **copy)
{
    const struct kt_node *m, *s;
    const struct kt_expr *e;
    int lanes;

    if (g->reference || n->ann == KT_ANN_PARALLEL || n->nkids != 1 ||
        n->kids[0]->kind != KT_N_LOOP)
        return 0;
    m = n->kids[0];
    if (m->ann != KT_ANN_VECTORIZE || m->nkids != 1 ||
        m->kids[0]->kind != KT_N_STORE)
        return 0;
    s = m->kids[0];
    e = s->expr;
    if (s->op != KT_ASSIGN || e->op != KT_X_LOAD)
        return 0;
    /* blocks of the widest vector dividing both extents (an 8 x 256 tile
     * of A: 8 x 8 blocks); an outer extent no vector divides takes blocks
     * as wide as the inner one and copies its last rows one by one (B of
     * a ViT's attention, 197 x 64: 12 blocks of 16 x 16 rows, 5 rows) */
    lanes = kt__cg_lanes_for(g, m->extent);
    if (kt__cg_lanes_for(g, n->extent) >= 4 &&
        kt__cg_lanes_for(g, n->extent) < lanes)
        lanes = kt__cg_lanes_for(g, n->extent);
    if (lanes < 4 || n->extent < lanes)
        return 0;
    {
        const int64_t *shape = g->lt->bufs[e->src].shape;
        int64_t src_v = kt_load_flat_coef(e, shape, m->var);
        int64_t src_u = kt_load_flat_coef(e, shape, n->var);
        int64_t dst_v = store_coef(g, s, m->var);
        int64_t dst_u = store_coef(g, s, n->var);
        if (src_v != 1 || dst_u != 1 || dst_v == 0 || dst_v == 1 ||
            src_u == 0 || src_u == 1)
            return 0;
    }
    *copy = s;
    return lanes;
}

/* The reads of e moving along var by more than one element: how many,
 * the last of them in *found. */
static int
strided_reads(const struct cg *g, const struct kt_expr *e, int var,
              const struct kt_expr **found)
{
    int64_t c;

    if (e == NULL || e->op == KT_X_CONST)
        return 0;
    if (e->op != KT_X_LOAD)
        return strided_reads(g, e->a, var, found) +
               strided_reads(g, e->b, var, found);
    c = flat_coef(g, e->src, e->idx, var);
    if (c == 0 || c == 1)
        return 0;
    *found = e;
    return 1;
}

/* Whether loop n heads a nest whose read transposes: a chain of loops,
 * each the only child of the one above and none parallel, down to a
 * vectorized loop whose only child is a plain store writing along it
 * contiguously, with one read (unguarded, of another buffer: its rows
 * are loaded before the block's stores) at a stride along it and
 * contiguous along n, and every other read moving along it by 0 or 1
 * element (O[k, y, x] = T[y, x, k] + B[k], x along the lanes, k along
 * n).  Returns the block width W (0: no such nest), the vectorized loop
 * and the read. */
static int
reads_transposed(const struct cg *g, const struct kt_node *n,
                 const struct kt_node **vec, const struct kt_expr **read)
{
    const struct kt_node *m = n, *s;
    int w;

    if (g->reference || n->kind != KT_N_LOOP || n->ann == KT_ANN_PARALLEL ||
        n->ann == KT_ANN_VECTORIZE)
        return 0;
    do {
        if (m->nkids != 1 || m->kids[0]->kind != KT_N_LOOP ||
            m->kids[0]->ann == KT_ANN_PARALLEL)
            return 0;
        m = m->kids[0];
    } while (m->ann != KT_ANN_VECTORIZE);
    if (m->nkids != 1 || m->kids[0]->kind != KT_N_STORE ||
        (g->lane_limit != NULL && g->lane_limit[m->var] > 0))
        return 0;
    s = m->kids[0];
    if (s->op != KT_ASSIGN || s->guarded || store_coef(g, s, m->var) != 1 ||
        strided_reads(g, s->expr, m->var, read) != 1 || (*read)->guarded ||
        (*read)->src == s->buf ||
        flat_coef(g, (*read)->src, (*read)->idx, n->var) != 1)
        return 0;
    w = kt__cg_chunk_lanes(g, m, 0);
    if (w < 4 || (w & (w - 1)) != 0 || n->extent < w || m->extent < w)
        return 0;
    *vec = m;
    return w;
}

/* Operators and reads of e. */
static int
expr_nodes(const struct kt_expr *e)
{
    if (e == NULL)
        return 0;
    return 1 + expr_nodes(e->a) + expr_nodes(e->b);
}

int
kt__cg_transpose_weight(const struct cg *g, const struct kt_node *n)
{
    const struct kt_node *copy, *m = NULL;
    const struct kt_expr *read;
    int w = transposes(g, n, &copy), rounds = 0, l;

    if (w == 0 && (w = reads_transposed(g, n, &m, &read)) == 0)
        return 0;
    for (l = w; l > 1; l /= 2)
        rounds++;
    if (m == NULL)
        return w * (2 + rounds); /* loads, shuffles, stores of one block */
    /* the loads and shuffles of one block, and its w stores */
    return w * (1 + rounds) + w * (1 + expr_nodes(m->kids[0]->expr));
}

static void
put_addr(struct cg *g, struct kt_buf *b, const struct kt_affine *a, int64_t add)
{
    struct kt_affine s = *a;

    s.c += add;
    kt__cg_put_aff(g, b, &s);
}

/* Round s of the block transpose: rows i and i + s (i without bit s)
 * swap row i's columns with bit s for row i+s's columns without it. */
static void
shuffle_round(struct cg *g, int w, int s, int from, int to)
{
    struct kt_buf lo, hi;
    int i, c;

    kt_buf_init(&lo);
    kt_buf_init(&hi);
    for (i = 0; i < w; i++) {
        if (i & s)
            continue;
        kt_buf_reset(&lo);
        kt_buf_reset(&hi);
        for (c = 0; c < w; c++) {
            kt_buf_printf(&lo, ", %d", (c & s) ? w + c - s : c);
            kt_buf_printf(&hi, ", %d", (c & s) ? w + c : c + s);
        }
        kt__cg_line(g,
                    "kt_v%d x%d_%d = __builtin_shufflevector(x%d_%d, "
                    "x%d_%d%s);",
                    w, to, i, from, i, from, i + s, lo.p);
        kt__cg_line(g,
                    "kt_v%d x%d_%d = __builtin_shufflevector(x%d_%d, "
                    "x%d_%d%s);",
                    w, to, i + s, from, i, from, i + s, hi.p);
    }
    kt_buf_free(&lo);
    kt_buf_free(&hi);
}

/* Emits the nest from n down to vectorized loop m (reads_transposed) in
 * blocks of w values of n by w lanes of m: per block, w rows of read e
 * loaded along n and transposed, then m's store for each value of n with
 * e given as its transposed row; the columns past the last whole block as
 * m's tail chunks for each of those values, the rows past it as before. */
static void
emit_read_blocks(struct cg *g, const struct kt_node *n, const struct kt_node *m,
                 const struct kt_expr *e, int w)
{
    const struct kt_node *c;
    const char *u = g->lt->var_names[n->var], *v = g->lt->var_names[m->var];
    int64_t rows = n->extent / w * w, cols = m->extent / w * w;
    struct kt_affine src;
    char text[32];
    int l, s, round = 0, depth = 0;

    kt__cg_loop_range(g, n->var, w, rows);
    kt__cg_line(g, "for (long %s = 0; %s < %lld; %s += %d) {", u, u,
                (long long)rows, u, w);
    g->indent++;
    for (c = n->kids[0]; c != m; c = c->kids[0], depth++) {
        kt__cg_loop_header(g, c, 1);
        g->indent++;
    }
    kt__cg_loop_range(g, m->var, w, cols);
    kt__cg_line(g, "for (long %s = 0; %s < %lld; %s += %d) {", v, v,
                (long long)cols, v, w);
    g->indent++;
    kt__cg_flat_addr(g, e->src, e->idx, -1, &src);
    for (l = 0; l < w; l++) { /* row l: e at v + l, lanes along u */
        struct kt_buf b;
        kt_buf_init(&b);
        kt_buf_printf(&b, "kt_ld%d(&t_%s[", w, g->lt->bufs[e->src].name);
        put_addr(g, &b, &src, kt_aff_coef(&src, m->var) * l);
        kt_buf_puts(&b, "])");
        kt__cg_line(g, "kt_v%d x0_%d = %s;", w, l, b.p);
        kt_buf_free(&b);
    }
    for (s = w / 2; s >= 1; s /= 2, round++)
        shuffle_round(g, w, s, round, round + 1);
    g->env[n->var].set = 1;
    g->given_load = e;
    g->given_text = text;
    for (l = 0; l < w; l++) { /* u + l: e's lanes along v */
        kt_aff_var(&g->env[n->var].val, n->var, 1);
        g->env[n->var].val.c = l;
        snprintf(text, sizeof(text), "x%d_%d", round, l);
        kt__cg_emit_store(g, m->kids[0], m->var, w);
    }
    g->given_load = NULL;
    g->given_text = NULL;
    g->indent--;
    kt__cg_line(g, "}");
    if (kt__cg_tail_end(g, m) > cols) {
        for (l = 0; l < w; l++) {
            kt_aff_var(&g->env[n->var].val, n->var, 1);
            g->env[n->var].val.c = l;
            kt__cg_emit_tail_chunks(g, m, cols);
        }
    }
    g->env[n->var].set = 0;
    for (; depth > 0; depth--) {
        g->indent--;
        kt__cg_line(g, "}");
    }
    g->indent--;
    kt__cg_line(g, "}");
    if (rows < n->extent) {
        kt__cg_loop_range(g, n->var, 1, n->extent);
        kt__cg_line(g, "for (long %s = %lld; %s < %lld; %s++) {", u,
                    (long long)rows, u, (long long)n->extent, u);
        g->indent++;
        kt__cg_emit_node(g, n->kids[0]);
        g->indent--;
        kt__cg_line(g, "}");
    }
}

int
kt__cg_emit_transpose(struct cg *g, const struct kt_node *n)
{
    const struct kt_node *copy, *m = n->kids[0];
    const struct kt_expr *read;
    struct kt_affine dst, src;
    const char *u, *v, *dname, *sname;
    int w = transposes(g, n, &copy), l, s, round = 0;

    if (w == 0 && (w = reads_transposed(g, n, &m, &read)) > 0) {
        emit_read_blocks(g, n, m, read, w);
        return 1;
    }
    if (w == 0)
        return 0;
    kt__cg_flat_addr(g, copy->buf, copy->idx, -1, &dst);
    kt__cg_flat_addr(g, copy->expr->src, copy->expr->idx, -1, &src);
    u = g->lt->var_names[n->var];
    v = g->lt->var_names[m->var];
    dname = g->lt->bufs[copy->buf].name;
    sname = g->lt->bufs[copy->expr->src].name;
    kt__cg_loop_range(g, n->var, w, n->extent / w * w);
    kt__cg_loop_range(g, m->var, w, m->extent);
    kt__cg_line(g, "for (long %s = 0; %s < %lld; %s += %d) {", u, u,
                (long long)(n->extent / w * w), u, w);
    g->indent++;
    kt__cg_line(g, "for (long %s = 0; %s < %lld; %s += %d) {", v, v,
                (long long)m->extent, v, w);
    g->indent++;
    for (l = 0; l < w; l++) { /* row l: src at u + l, lanes along v */
        struct kt_affine row = src;
        struct kt_buf b;
        row.c += kt_aff_coef(&src, n->var) * l;
        kt_buf_init(&b);
        if (copy->expr->guarded) {
            kt__cg_put_guarded_row(g, &b, copy->expr, &row, n->var, l, m->var,
                                   w);
        } else {
            kt_buf_printf(&b, "kt_ld%d(&t_%s[", w, sname);
            put_addr(g, &b, &row, 0);
            kt_buf_puts(&b, "])");
        }
        kt__cg_line(g, "kt_v%d x0_%d = %s;", w, l, b.p);
        kt_buf_free(&b);
    }
    for (s = w / 2; s >= 1; s /= 2, round++)
        shuffle_round(g, w, s, round, round + 1);
    for (l = 0; l < w; l++) { /* column l: dst at v + l, lanes along u */
        struct kt_buf b;
        kt_buf_init(&b);
        put_addr(g, &b, &dst, kt_aff_coef(&dst, m->var) * l);
        kt__cg_line(g, "kt_st%d(&t_%s[%s], x%d_%d);", w, dname, b.p, round, l);
        kt_buf_free(&b);
    }
    g->indent--;
    kt__cg_line(g, "}");
    g->indent--;
    kt__cg_line(g, "}");
    if (n->extent % w != 0) {
        /* the rows past the last whole block: u runs on to the extent */
        kt__cg_loop_range(g, n->var, 1, n->extent);
        kt__cg_line(g, "for (long %s = %lld; %s < %lld; %s++) {", u,
                    (long long)(n->extent / w * w), u, (long long)n->extent, u);
        g->indent++;
        kt__cg_emit_node(g, m);
        g->indent--;
        kt__cg_line(g, "}");
    }
    return 1;
}
