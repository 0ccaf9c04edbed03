/* codegen_store.c - the statements of the C code generator (ir/codegen.c
 * drives it): stores as scalars or GCC vectors into memory, registers of
 * micro-kernels (ir/codegen_regs.c) or lane accumulators, guarded at
 * padding edges; their values are ir/codegen_expr.c's expressions. */
#include "ir/codegen_int.h"

#include <stdio.h>

const char *
kt__cg_combine_op(enum kt_reduce op)
{
    switch (op) {
    case KT_SUM: return "+";
    case KT_MAXR: return "max";
    default: return "min";
    }
}

/* Store n of val (vec: a vector) into an accumulator of register r split
 * into partial sums (the register tile's accumulators). */
static void
store_to_split_acc(struct cg *g, const struct kt_node *n, int r,
                   const char *val, int w)
{
    struct reg *rg = &g->regs[r];
    char acc[32];

    if (rg->next == 0)
        snprintf(acc, sizeof(acc), "r%d", r);
    else
        snprintf(acc, sizeof(acc), "r%d_%d", r, rg->next);
    rg->next = (rg->next + 1) % rg->split;
    if (n->op == KT_SUM)
        kt__cg_line(g, "%s += %s;", acc, val);
    else
        kt__cg_line(g, "%s = kt_v%s%d(%s, %s);", acc, kt__cg_combine_op(n->op),
                    w, acc, val);
}

/* Store n of val into register r; c: the address's lane coefficient. */
static void
store_to_reg(struct cg *g, const struct kt_node *n, int r, int64_t c,
             const char *val, int vec, int w)
{
    const char *op = kt__cg_combine_op(n->op);

    if (c == 0 && vec) {
        if (n->op == KT_ASSIGN)
            kt__cg_line(g, "r%d = (%s)[%d];", r, val, w - 1);
        else
            kt__cg_line(g, "r%d = kt_%s(r%d, kt_h%s%d(%s));", r,
                        n->op == KT_SUM ? "add" : op, r,
                        n->op == KT_SUM ? "sum" : op, w, val);
    } else if (n->op == KT_ASSIGN) {
        kt__cg_line(g, "r%d = %s;", r, val);
    } else if (n->op == KT_SUM) {
        kt__cg_line(g, "r%d += %s;", r, val);
    } else if (c != 0) {
        kt__cg_line(g, "r%d = kt_v%s%d(r%d, %s);", r, op, w, r, val);
    } else {
        kt__cg_line(g, "r%d = kt_%s(r%d, %s);", r, op, r, val);
    }
}

/* Store n of val to the buffer element dst (every lane lands on it: c == 0
 * and a vector val is reduced across lanes). */
static void
store_to_element(struct cg *g, const struct kt_node *n, const char *dst,
                 const char *val, int vec, int w)
{
    const char *op = kt__cg_combine_op(n->op);

    if (!vec) {
        if (n->op == KT_ASSIGN)
            kt__cg_line(g, "%s = %s;", dst, val);
        else if (n->op == KT_SUM)
            kt__cg_line(g, "%s += %s;", dst, val);
        else
            kt__cg_line(g, "%s = kt_%s(%s, %s);", dst, op, dst, val);
    } else if (n->op == KT_ASSIGN) {
        kt__cg_line(g, "%s = (%s)[%d];", dst, val, w - 1);
    } else {
        kt__cg_line(g, "%s = kt_%s(%s, kt_h%s%d(%s));", dst,
                    n->op == KT_SUM ? "add" : op, dst,
                    n->op == KT_SUM ? "sum" : op, w, val);
    }
}

/* Store n of val to w contiguous elements from addr, or to the first
 * g->store_lanes of them where set (the masked last chunk of an
 * assignment's loop, KT_CG_LANES_MASKED). */
static void
store_to_vector(struct cg *g, const struct kt_node *n,
                const struct kt_affine *addr, const char *val, int vec, int w)
{
    unsigned mask = (1u << g->store_lanes) - 1u;
    struct kt_buf p;

    kt_buf_init(&p);
    kt_buf_printf(&p, "&t_%s[", g->lt->bufs[n->buf].name);
    kt__cg_put_aff(g, &p, addr);
    kt_buf_puts(&p, "]");
    if (g->store_lanes > 0 && vec)
        kt__cg_line(g, "kt_stm%d(%s, %s, 0x%xu);", w, p.p, val, mask);
    else if (g->store_lanes > 0)
        kt__cg_line(g, "kt_stm%d(%s, kt_bc%d(%s), 0x%xu);", w, p.p, w, val,
                    mask);
    else if (!vec)
        kt__cg_line(g, "kt_st%d(%s, kt_bc%d(%s));", w, p.p, w, val);
    else if (n->op == KT_ASSIGN)
        kt__cg_line(g, "kt_st%d(%s, %s);", w, p.p, val);
    else if (n->op == KT_SUM)
        kt__cg_line(g, "kt_st%d(%s, kt_ld%d(%s) + %s);", w, p.p, w, p.p, val);
    else
        kt__cg_line(g, "kt_st%d(%s, kt_v%s%d(kt_ld%d(%s), %s));", w, p.p,
                    kt__cg_combine_op(n->op), w, w, p.p, val);
    kt_buf_free(&p);
}

int
kt__cg_strided_store(const struct cg *g, int64_t c, int w)
{
    return g->o->vector_bytes == 64 && c >= 2 && c <= KT_MAX_STRIDED_STORE &&
           (w == 16 || w == 8);
}

void
kt__cg_put_strided_store(struct cg *g, const char *name, const char *addr,
                         int64_t c, const char *val, int w)
{
    struct kt_buf pick;
    int64_t j, p;

    kt_buf_init(&pick);
    kt__cg_line(g, "{ kt_v%d s_ = %s;", w, val);
    for (j = 0; j < c; j++) {
        unsigned mask = 0;
        kt_buf_reset(&pick);
        for (p = 0; p < w; p++) {
            int64_t e = j * w + p, lane = e % c == 0 ? e / c : w;
            if (lane < w)
                mask |= 1u << p;
            kt_buf_printf(&pick, ", %lld", (long long)(lane < w ? lane : 0));
        }
        if (j == 0)
            kt__cg_line(g,
                        "  kt_stm%d(&t_%s[%s], __builtin_shufflevector(s_, "
                        "s_%s), 0x%xu);",
                        w, name, addr, pick.p, mask);
        else
            kt__cg_line(g,
                        "  kt_stm%d(&t_%s[%s + %lld], "
                        "__builtin_shufflevector(s_, s_%s), 0x%xu);",
                        w, name, addr, (long long)(j * w), pick.p, mask);
    }
    kt__cg_line(g, "}");
    kt_buf_free(&pick);
}

/* Strided destination: masked stores of shuffled vectors where the target
 * has them (kt__cg_strided_store), else scattered lane by lane. */
static void
store_scattered(struct cg *g, const struct kt_node *n,
                const struct kt_affine *addr, int64_t c, const char *val,
                int vec, int w)
{
    struct kt_buf dst;

    if (n->op == KT_ASSIGN && g->store_lanes == 0 &&
        kt__cg_strided_store(g, c, w)) {
        struct kt_buf at, v;
        kt_buf_init(&at);
        kt_buf_init(&v);
        kt__cg_put_aff(g, &at, addr);
        if (vec)
            kt_buf_puts(&v, val);
        else
            kt_buf_printf(&v, "kt_bc%d(%s)", w, val);
        kt__cg_put_strided_store(g, g->lt->bufs[n->buf].name, at.p, c, v.p, w);
        kt_buf_free(&at);
        kt_buf_free(&v);
        return;
    }
    if (vec)
        kt__cg_line(g, "{ kt_v%d v_ = %s;", w, val);
    else
        kt__cg_line(g, "{ kt_v%d v_ = kt_bc%d(%s);", w, w, val);
    kt__cg_line(g, "  for (int l_ = 0; l_ < %d; l_++) {", w);
    kt_buf_init(&dst);
    kt_buf_printf(&dst, "t_%s[", g->lt->bufs[n->buf].name);
    kt__cg_put_aff(g, &dst, addr);
    kt_buf_printf(&dst, " + %lld*l_]", (long long)c);
    if (n->op == KT_ASSIGN)
        kt__cg_line(g, "    %s = v_[l_];", dst.p);
    else if (n->op == KT_SUM)
        kt__cg_line(g, "    %s += v_[l_];", dst.p);
    else
        kt__cg_line(g, "    %s = kt_%s(%s, v_[l_]);", dst.p,
                    kt__cg_combine_op(n->op), dst.p);
    kt__cg_line(g, "  } }");
    kt_buf_free(&dst);
}

/* Contiguous guarded store n of v_ outside the whole-vector case: a
 * masked store of the lanes inside (combined with what they hold unless
 * n assigns). */
static void
put_masked_store(struct cg *g, const struct kt_node *n,
                 const struct kt_affine *addr, int lane_var, int w)
{
    struct kt_buf mask, at;
    int d, nparts = 0;

    kt_buf_init(&mask);
    for (d = 0; d < n->ndim; d++) {
        struct kt_affine a;
        kt__cg_subst(g, &n->idx[d], -1, &a);
        kt__cg_put_lane_mask(g, &mask, &nparts, &a,
                             kt_aff_coef(&n->idx[d], lane_var), w,
                             g->lt->bufs[n->buf].shape[d]);
    }
    kt__cg_end_mask(&mask, nparts);
    kt_buf_init(&at);
    kt_buf_printf(&at, "&t_%s[", g->lt->bufs[n->buf].name);
    kt__cg_put_aff(g, &at, addr);
    kt_buf_puts(&at, "]");
    kt__cg_line(g, "unsigned m_ = %s;", mask.p);
    if (n->op == KT_ASSIGN)
        kt__cg_line(g, "kt_stm%d(%s, v_, m_);", w, at.p);
    else if (n->op == KT_SUM)
        kt__cg_line(g,
                    "kt_stm%d(%s, kt_ldm%d(%s, m_, kt_bc%d(0.0f)) + v_, m_);",
                    w, at.p, w, at.p, w);
    else
        kt__cg_line(g, "kt_stm%d(%s, kt_v%s%d(kt_ldm%d(%s, m_, v_), v_), m_);",
                    w, at.p, kt__cg_combine_op(n->op), w, w, at.p);
    kt_buf_free(&mask);
    kt_buf_free(&at);
}

/* The lanes of guarded store n of v_, outside the whole-vector case: a
 * masked store when contiguous, else one loop over them, each checked, so
 * the fallback stays small whatever the width. */
static void
put_lanes_guarded(struct cg *g, const struct kt_node *n,
                  const struct kt_affine *addr, int64_t c, int lane_var, int w)
{
    struct kt_buf cond, at;
    int d, nchecks = 0;

    if (c == 1) {
        put_masked_store(g, n, addr, lane_var, w);
        return;
    }
    kt_buf_init(&cond);
    for (d = 0; d < n->ndim; d++) {
        struct kt_affine a;
        kt__cg_subst(g, &n->idx[d], -1, &a);
        kt__cg_put_bound(g, &cond, &nchecks, &a,
                         kt_aff_coef(&n->idx[d], lane_var), "l_", w,
                         g->lt->bufs[n->buf].shape[d]);
    }
    kt__cg_end_checks(&cond, nchecks);
    kt_buf_init(&at);
    kt_buf_printf(&at, "t_%s[", g->lt->bufs[n->buf].name);
    kt__cg_put_aff(g, &at, addr);
    if (c == 1)
        kt_buf_puts(&at, " + l_]");
    else
        kt_buf_printf(&at, " + %lld*l_]", (long long)c);
    kt__cg_line(g, "for (int l_ = 0; l_ < %d; l_++)", w);
    if (n->op == KT_ASSIGN)
        kt__cg_line(g, "    if (%s) %s = v_[l_];", cond.p, at.p);
    else if (n->op == KT_SUM)
        kt__cg_line(g, "    if (%s) %s += v_[l_];", cond.p, at.p);
    else
        kt__cg_line(g, "    if (%s) %s = kt_%s(%s, v_[l_]);", cond.p, at.p,
                    kt__cg_combine_op(n->op), at.p);
    kt_buf_free(&cond);
    kt_buf_free(&at);
}

/* Store n (guarded: a stage padded past its output, or an accumulator
 * retargeted through a padded copy and not held in a register) of val:
 * whole when its first and last lanes are in bounds, else lane by lane,
 * dropping the lanes outside. */
static void
store_guarded(struct cg *g, const struct kt_node *n,
              const struct kt_affine *addr, int64_t c, const char *val, int vec,
              int lane_var, int w)
{
    struct kt_buf cond, at;
    int lanes = c == 0 ? 1 : w, nchecks = 0;

    kt_buf_init(&cond);
    kt__cg_put_index_bounds(g, &cond, &nchecks, n->buf, n->idx, n->ndim,
                            lane_var, 0, -1, 0, 0);
    if (lanes > 1)
        kt__cg_put_index_bounds(g, &cond, &nchecks, n->buf, n->idx, n->ndim,
                                lane_var, lanes - 1, -1, 0, 1);
    kt_buf_init(&at);
    if (nchecks > 0) {
        kt__cg_line(g, "if (%s) {", cond.p);
        g->indent++;
    }
    if (c == 0) {
        kt_buf_printf(&at, "t_%s[", g->lt->bufs[n->buf].name);
        kt__cg_put_aff(g, &at, addr);
        kt_buf_puts(&at, "]");
        store_to_element(g, n, at.p, val, vec, w);
    } else if (c == 1)
        store_to_vector(g, n, addr, val, vec, w);
    else
        store_scattered(g, n, addr, c, val, vec, w);
    if (nchecks == 0) { /* the loops' ranges keep it inside */
        kt_buf_free(&cond);
        kt_buf_free(&at);
        return;
    }
    g->indent--;
    if (lanes > 1) {
        kt__cg_line(g, "} else {");
        g->indent++;
        if (vec)
            kt__cg_line(g, "kt_v%d v_ = %s;", w, val);
        else
            kt__cg_line(g, "kt_v%d v_ = kt_bc%d(%s);", w, w, val);
        put_lanes_guarded(g, n, addr, c, lane_var, w);
        g->indent--;
    }
    kt__cg_line(g, "}");
    kt_buf_free(&cond);
    kt_buf_free(&at);
}

void
kt__cg_emit_store(struct cg *g, const struct kt_node *n, int lane_var, int w)
{
    struct kt_affine pre, addr;
    struct kt_buf val, dst;
    int64_t c;
    int vec, r;

    kt__cg_flat_addr(g, n->buf, n->idx, lane_var, &pre);
    c = lane_var >= 0 ? kt_aff_coef(&pre, lane_var) : 0;
    kt__cg_subst_var(g, &pre, lane_var, &addr);
    if (g->matching_init) {
        kt__cg_match_init_store(g, n, &addr, c, w);
        return;
    }
    kt_buf_init(&val);
    vec = kt__cg_put_expr(g, &val, n->expr, lane_var, w);
    if (g->analysing) {
        if (g->store_lanes > 0) /* its masked store is to memory */
            g->promote_ok[n->buf] = 0;
        kt__cg_note_access(g, n->buf, &addr, c, w, n->guarded, 1,
                           c == 0 && vec && n->op != KT_ASSIGN ? w : 0, n->op,
                           n->guarded ? n : NULL, lane_var);
        kt_buf_free(&val);
        return;
    }
    r = kt__cg_find_reg(g, n->buf, &addr, c, c == 0 ? 1 : w);
    if (r >= 0 && g->promote_ok[n->buf] && g->regs[r].acc > 0) {
        store_to_split_acc(g, n, r, val.p, w);
    } else if (r >= 0 && g->promote_ok[n->buf]) {
        if (c != 0 && !vec)
            kt__cg_broadcast(&val, w);
        store_to_reg(g, n, r, c, val.p, vec, w);
    } else if (n->guarded) {
        store_guarded(g, n, &addr, c, val.p, vec, lane_var, w);
    } else if (c == 0) {
        kt_buf_init(&dst);
        kt_buf_printf(&dst, "t_%s[", g->lt->bufs[n->buf].name);
        kt__cg_put_aff(g, &dst, &addr);
        kt_buf_puts(&dst, "]");
        store_to_element(g, n, dst.p, val.p, vec, w);
        kt_buf_free(&dst);
    } else if (c == 1) {
        store_to_vector(g, n, &addr, val.p, vec, w);
    } else {
        store_scattered(g, n, &addr, c, val.p, vec, w);
    }
    kt_buf_free(&val);
}

/* The address of store n as C text in b (lane variable unbound). */
static void
put_store_addr(struct cg *g, struct kt_buf *b, const struct kt_node *n)
{
    struct kt_affine addr;

    kt__cg_flat_addr(g, n->buf, n->idx, -1, &addr);
    kt_buf_printf(b, "t_%s[", g->lt->bufs[n->buf].name);
    kt__cg_put_aff(g, b, &addr);
    kt_buf_puts(b, "]");
}

int
kt__cg_lane_reduction(struct cg *g, const struct kt_node *n, int lane_var)
{
    struct kt_affine pre;

    if (n->kind != KT_N_STORE || n->op == KT_ASSIGN)
        return 0;
    kt__cg_flat_addr(g, n->buf, n->idx, lane_var, &pre);
    return kt_aff_coef(&pre, lane_var) == 0;
}

void
kt__cg_emit_lane_acc(struct cg *g, const struct kt_node *n, int i, int q,
                     int phase, int lane_var, int w)
{
    static const char *const identity[] =
        {[KT_SUM] = "0.0f", [KT_MAXR] = "(-INFINITY)", [KT_MINR] = "INFINITY"};
    const char *op = kt__cg_combine_op(n->op);
    struct kt_buf val, dst;

    kt_buf_init(&val);
    kt_buf_init(&dst);
    if (phase == 0) {
        kt__cg_line(g, "kt_v%d acc%d_%d = kt_bc%d(%s);", w, i, q, w,
                    identity[n->op]);
    } else if (phase == 1) {
        if (!kt__cg_put_expr(g, &val, n->expr, lane_var, w))
            kt__cg_broadcast(&val, w);
        if (n->op == KT_SUM)
            kt__cg_line(g, "acc%d_%d += %s;", i, q, val.p);
        else
            kt__cg_line(g, "acc%d_%d = kt_v%s%d(acc%d_%d, %s);", i, q, op, w, i,
                        q, val.p);
    } else if (phase == 2) {
        if (n->op == KT_SUM)
            kt__cg_line(g, "acc%d_0 += acc%d_%d;", i, i, q);
        else
            kt__cg_line(g, "acc%d_0 = kt_v%s%d(acc%d_0, acc%d_%d);", i, op, w,
                        i, i, q);
    } else {
        put_store_addr(g, &dst, n);
        kt__cg_line(g, "%s = kt_%s(%s, kt_h%s%d(acc%d_0));", dst.p,
                    n->op == KT_SUM ? "add" : op, dst.p,
                    n->op == KT_SUM ? "sum" : op, w, i);
    }
    kt_buf_free(&val);
    kt_buf_free(&dst);
}
