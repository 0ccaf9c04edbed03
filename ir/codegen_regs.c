/* codegen_regs.c - the register bookkeeping of scalar replacement inside
 * micro-kernels (docs/schedule.md, Generated C): pass 1 notes every access
 * (kt__cg_note_access), pass 2 reads and writes the registers it kept
 * (kt__cg_find_reg), loaded before the micro-kernel's loop nest and
 * stored after it. */
#include "ir/codegen_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
kt__cg_aff_equal(const struct kt_affine *a, const struct kt_affine *b)
{
    int i;

    if (a->c != b->c || a->n != b->n)
        return 0;
    for (i = 0; i < a->n; i++)
        if (kt_aff_coef(b, a->var[i]) != a->k[i])
            return 0;
    return 1;
}

static int
aff_uses_inner(const struct cg *g, const struct kt_affine *a)
{
    int i;

    for (i = 0; i < a->n; i++)
        if (g->inner[a->var[i]])
            return 1;
    return 0;
}

/* ---- registers (scalar replacement) ------------------------------------ */

/* The register holding the w lanes at addr + stride * lane (stride 0 and
 * width 1 for a scalar), or -1. */
int
kt__cg_find_reg(const struct cg *g, int buf, const struct kt_affine *addr,
                int64_t stride, int width)
{
    int i;

    for (i = 0; i < g->nregs; i++)
        if (g->regs[i].buf == buf && g->regs[i].width == width &&
            g->regs[i].stride == stride &&
            kt__cg_aff_equal(&g->regs[i].addr, addr))
            return i;
    return -1;
}

/* Whether the w1 elements at stride s1 from 0 and the w2 at stride s2
 * from d share one: some lane l1 with s1 * l1 - d = s2 * l2 for a lane l2.
 * Solved for l2 rather than tried pair by pair: the search's code-size
 * check asks this for every pair of a micro-kernel's accumulator vectors,
 * and the 16 x 16 pairs of lanes were an eighth of a network tuning's
 * search time. */
static int
lanes_overlap(int64_t d, int w1, int64_t s1, int w2, int64_t s2)
{
    int l1;

    if (s1 == 1 && s2 == 1)
        return d > -w2 && d < w1;
    for (l1 = 0; l1 < w1; l1++) {
        int64_t t = s1 * l1 - d;
        if (s2 == 0 ? t == 0 : t % s2 == 0 && t / s2 >= 0 && t / s2 < w2)
            return 1;
    }
    return 0;
}

/* Pass 1 sees an access: buffers touched at addresses that vary across the
 * kernel loop, strided, guarded or overlapping are not promoted. */
static void
note_lanes(struct reg *r, int lane_red, enum kt_reduce op)
{
    if (lane_red == 0 ||
        (r->lanes != 0 && (r->lanes != lane_red || r->op != op)))
        r->mixed = 1;
    r->lanes = lane_red;
    r->op = op;
    r->nred++;
}

void
kt__cg_clear_regs(struct cg *g)
{
    int i;

    for (i = 0; i < g->nregs; i++) {
        free(g->regs[i].gdim);
        g->regs[i].gdim = NULL;
    }
    g->nregs = 0;
}

/* Records on register r the checks of guarded store n (lanes along
 * lane_var); 0 when an index moves inside the kernel loop. */
static int
note_guard(struct cg *g, struct reg *r, const struct kt_node *n, int lane_var)
{
    int d;

    if (r->gdim != NULL)
        return 1;
    r->gdim = kt_xcalloc((size_t)n->ndim, sizeof(*r->gdim));
    r->gndim = n->ndim;
    for (d = 0; d < n->ndim; d++) {
        kt__cg_subst(g, &n->idx[d], -1, &r->gdim[d]);
        r->gstep[d] = lane_var >= 0 ? kt_aff_coef(&n->idx[d], lane_var) : 0;
        if (aff_uses_inner(g, &r->gdim[d]))
            return 0;
    }
    return 1;
}

/* lane_red: w when the access is a reduction (op) of a w-lane vector
 * into this one element, else 0. */
void
kt__cg_note_access(struct cg *g, int buf, const struct kt_affine *addr,
                   int64_t lane_coef, int width, int guarded, int is_store,
                   int lane_red, enum kt_reduce op,
                   const struct kt_node *gstore, int lane_var)
{
    int i, w = lane_coef == 0 ? 1 : width;

    if (is_store)
        g->stored[buf] = 1;
    if (!g->promote_ok[buf])
        return;
    /* A strided access (lane_coef other than 0 and 1) is held too: the
     * register is gathered before the nest and scattered after it, e.g.
     * an accumulator tile vectorized along output channels. */
    if ((guarded && gstore == NULL) || aff_uses_inner(g, addr)) {
        g->promote_ok[buf] = 0;
        return;
    }
    for (i = 0; i < g->nregs; i++) {
        const struct reg *r = &g->regs[i];
        int64_t d;
        if (r->buf != buf)
            continue;
        if (!kt_aff_same_terms(addr, &r->addr)) {
            g->promote_ok[buf] = 0; /* cannot prove they do not overlap */
            return;
        }
        d = addr->c - r->addr.c;
        if (d == 0 && r->width == w && r->stride == lane_coef) {
            note_lanes(&g->regs[i], lane_red, op);
            if (gstore != NULL && !note_guard(g, &g->regs[i], gstore, lane_var))
                g->promote_ok[buf] = 0;
            return; /* already known */
        }
        if (lanes_overlap(d, r->width, r->stride, w, lane_coef)) {
            g->promote_ok[buf] = 0;
            return;
        }
    }
    if (g->nregs == KT_CG_MAX_REGS) {
        g->promote_ok[buf] = 0;
        return;
    }
    g->regs[g->nregs].buf = buf;
    g->regs[g->nregs].addr = *addr;
    g->regs[g->nregs].width = w;
    g->regs[g->nregs].stride = lane_coef;
    g->regs[g->nregs].lanes = lane_red;
    g->regs[g->nregs].mixed = lane_red == 0;
    g->regs[g->nregs].op = op;
    g->regs[g->nregs].acc = 0;
    g->regs[g->nregs].nred = 1;
    g->regs[g->nregs].init = 0;
    g->regs[g->nregs].gdim = NULL;
    g->nregs++;
    if (gstore != NULL &&
        !note_guard(g, &g->regs[g->nregs - 1], gstore, lane_var))
        g->promote_ok[buf] = 0;
}

void
kt__cg_match_init_store(struct cg *g, const struct kt_node *n,
                        const struct kt_affine *addr, int64_t c, int w)
{
    int r;

    if (n->op != KT_ASSIGN || n->expr->op != KT_X_CONST) {
        g->init_mismatch = 1;
        return;
    }
    r = kt__cg_find_reg(g, n->buf, addr, c, c == 0 ? 1 : w);
    if (r < 0 || !g->promote_ok[n->buf]) {
        g->init_mismatch = 1;
        return;
    }
    g->regs[r].init = 1;
    g->regs[r].init_val = n->expr->value;
}

/* The bounds checks of guarded register r's lane: lane_text (a C
 * variable over its lanes) when not NULL, else the constant lane (with
 * lane_dims_only, only the dimensions that vary with it), joined by &&
 * and counted in *nchecks; 1 when one of them is proved false. */
static int
put_reg_checks(struct cg *g, struct kt_buf *b, int *nchecks,
               const struct reg *r, int lane, const char *lane_text,
               int lane_dims_only)
{
    int d, never = 0;

    for (d = 0; d < r->gndim; d++) {
        struct kt_affine a = r->gdim[d];
        if (lane_dims_only && r->gstep[d] == 0)
            continue;
        if (lane_text == NULL)
            a.c += r->gstep[d] * lane;
        never |= kt__cg_put_bound(g, b, nchecks, &a, r->gstep[d], lane_text,
                                  r->width, g->lt->bufs[r->buf].shape[d]);
    }
    return never;
}

/* put_reg_checks of all dimensions, "1" when none is needed; returns how
 * many. */
static int
put_reg_cond(struct cg *g, struct kt_buf *b, const struct reg *r, int lane,
             const char *lane_text)
{
    int nchecks = 0;

    put_reg_checks(g, b, &nchecks, r, lane, lane_text, 0);
    kt__cg_end_checks(b, nchecks);
    return nchecks;
}

/* Opens "if (both end lanes of r are inside) then-line else" for a
 * contiguous register and returns the indent of the else branch's lines;
 * "" (no test) for a strided register, which goes lane by lane only, or
 * when the loops' ranges prove an end lane outside (the peeled last tile,
 * codegen_peel.c); when they keep every lane inside, emits then-line
 * alone and returns NULL. */
static const char *
open_whole_vector(struct cg *g, const struct reg *r, const char *then_line)
{
    struct kt_buf c;
    int nchecks = 0, never;

    if (r->stride != 1)
        return "";
    kt_buf_init(&c);
    never = put_reg_checks(g, &c, &nchecks, r, 0, NULL, 0);
    never |= put_reg_checks(g, &c, &nchecks, r, r->width - 1, NULL, 1);
    if (never) {
        kt_buf_free(&c);
        return "";
    }
    if (nchecks == 0) {
        kt__cg_line(g, "%s", then_line);
        kt_buf_free(&c);
        return NULL;
    }
    kt__cg_line(g, "if (%s)", c.p);
    kt__cg_line(g, "    %s", then_line);
    kt__cg_line(g, "else");
    kt_buf_free(&c);
    return "    ";
}

/* The lanes of guarded register r inside its buffer as a C bit mask. */
static void
put_reg_mask(struct cg *g, struct kt_buf *b, const struct reg *r)
{
    int d, nparts = 0;

    for (d = 0; d < r->gndim; d++)
        kt__cg_put_lane_mask(g, b, &nparts, &r->gdim[d], r->gstep[d], r->width,
                             g->lt->bufs[r->buf].shape[d]);
    kt__cg_end_mask(b, nparts);
}

/* The offset of lane l_ of register r from its first, as C in b. */
static const char *
lane_offset(const struct reg *r, struct kt_buf *b)
{
    kt_buf_init(b);
    if (r->stride == 1)
        kt_buf_puts(b, "l_");
    else
        kt_buf_printf(b, "%lld*l_", (long long)r->stride);
    return b->p;
}

/* Guarded register i of w > 1 lanes: loaded whole when its first and last
 * lanes are inside its buffer, else those inside (a masked load when
 * contiguous, else lane by lane; 0 outside: those lanes are dropped when
 * it is stored). */
static void
load_guarded_lanes(struct cg *g, int i, const char *name, const char *addr)
{
    const struct reg *r = &g->regs[i];
    struct kt_buf c, off, whole;
    const char *in;

    kt_buf_init(&c);
    kt_buf_init(&whole);
    kt__cg_line(g, "kt_v%d r%d;", r->width, i);
    kt_buf_printf(&whole, "r%d = kt_ld%d(&t_%s[%s]);", i, r->width, name, addr);
    if ((in = open_whole_vector(g, r, whole.p)) == NULL) {
        kt_buf_free(&whole);
        kt_buf_free(&c);
        return;
    }
    if (r->stride == 1) {
        put_reg_mask(g, &c, r);
        kt__cg_line(g, "%sr%d = kt_ldm%d(&t_%s[%s], %s, kt_bc%d(0.0f));", in, i,
                    r->width, name, addr, c.p, r->width);
        kt_buf_free(&whole);
        kt_buf_free(&c);
        return;
    }
    put_reg_cond(g, &c, r, 0, "l_");
    kt__cg_line(g, "%sfor (int l_ = 0; l_ < %d; l_++)", in, r->width);
    kt__cg_line(g, "%s    r%d[l_] = %s ? t_%s[%s + %s] : 0.0f;", in, i, c.p,
                name, addr, lane_offset(r, &off));
    kt_buf_free(&off);
    kt_buf_free(&whole);
    kt_buf_free(&c);
}

/* Whether the loops' ranges keep lane 0 of register r inside its buffer
 * (always, for an unguarded register). */
static int
first_lane_inside(struct cg *g, const struct reg *r)
{
    struct kt_buf c;
    int nchecks = 0, never;

    if (r->gdim == NULL)
        return 1;
    kt_buf_init(&c);
    never = put_reg_checks(g, &c, &nchecks, r, 0, NULL, 0);
    kt_buf_free(&c);
    return !never && nchecks == 0;
}

/* Whether register r, which starts at a constant, is stored where a
 * prefetch for writing before the micro-kernel's loops pays: a contiguous
 * vector of a kernel argument whose first lane the loops keep inside,
 * behind loops long enough to hide the wait for the line
 * (KT_CG_PREFETCH_STEPS).  Nothing reads that line before the store, so
 * without the prefetch the store waits for it after the loops: the
 * attention scores' 22 x 16 tiles over 64 steps, whose output rows of 197
 * floats mostly start off a line, ran 1.04x-1.11x faster on 1 thread with
 * it.  A local tile is hot; a product written whole into a per-call
 * buffer ran 0.97x-0.99x with it (docs/performance.md, 2026-12-02 07:32
 * UTC). */
static int
store_prefetch_pays(struct cg *g, const struct reg *r)
{
    return r->stride == 1 && r->width > 1 &&
           g->lt->bufs[r->buf].scope == KT_BUF_ARG &&
           g->kernel_steps >= KT_CG_PREFETCH_STEPS && first_lane_inside(g, r);
}

static void
put_store_prefetch(struct cg *g, const char *name, const char *addr)
{
    kt__cg_line(g, "__builtin_prefetch(&t_%s[%s], 1);", name, addr);
}

/* Register i starts at its folded init value or at t_name[addr]; src is
 * that value as C. */
static void
load_reg(struct cg *g, int i, const char *name, const char *addr)
{
    const struct reg *r = &g->regs[i];
    struct kt_buf src;
    int k;

    kt_buf_init(&src);
    if (r->init) {
        kt__cg_put_float(&src, r->init_val);
    } else if (r->gdim != NULL && r->width > 1 && r->acc == 0) {
        load_guarded_lanes(g, i, name, addr);
        kt_buf_free(&src);
        return;
    } else if (r->gdim != NULL) {
        kt_buf_puts(&src, "(");
        if (put_reg_cond(g, &src, r, 0, NULL) == 0) /* the loops keep it in */
            kt_buf_reset(&src);
        else
            kt_buf_printf(&src, " ? t_%s[%s] : 0.0f)", name, addr);
    }
    if (src.len == 0)
        kt_buf_printf(&src, "t_%s[%s]", name, addr);
    if (r->acc > 0 && r->op == KT_SUM) {
        kt__cg_line(g, "kt_v%d r%d = kt_bc%d(0.0f);", r->acc, i, r->acc);
        kt__cg_line(g, "r%d[0] = %s;", i, src.p);
        for (k = 1; k < r->split; k++)
            kt__cg_line(g, "kt_v%d r%d_%d = kt_bc%d(0.0f);", r->acc, i, k,
                        r->acc);
    } else if (r->acc > 0) {
        /* max and min are idempotent: every accumulator starts at it */
        kt__cg_line(g, "kt_v%d r%d = kt_bc%d(%s);", r->acc, i, r->acc, src.p);
        for (k = 1; k < r->split; k++)
            kt__cg_line(g, "kt_v%d r%d_%d = r%d;", r->acc, i, k, i);
    } else if (r->width > 1 && r->init) {
        kt__cg_line(g, "kt_v%d r%d = kt_bc%d(%s);", r->width, i, r->width,
                    src.p);
        if (store_prefetch_pays(g, r))
            put_store_prefetch(g, name, addr);
    } else if (r->width > 1 && r->stride != 1) {
        kt__cg_line(g, "kt_v%d r%d;", r->width, i);
        kt__cg_line(g, "for (int l_ = 0; l_ < %d; l_++)", r->width);
        kt__cg_line(g, "    r%d[l_] = t_%s[%s + %lld*l_];", i, name, addr,
                    (long long)r->stride);
    } else if (r->width > 1) {
        kt__cg_line(g, "kt_v%d r%d = kt_ld%d(&t_%s[%s]);", r->width, i,
                    r->width, name, addr);
    } else {
        kt__cg_line(g, "float r%d = %s;", i, src.p);
    }
    kt_buf_free(&src);
}

/* Whether no lane of guarded register r is ever inside its buffer: a
 * dimension the lanes do not move along is outside (a row past the edge
 * in a peeled last tile, codegen_peel.c).  Its store is then dropped, and
 * with it the arithmetic only the store used. */
static int
never_inside(const struct cg *g, const struct reg *r)
{
    int d;

    for (d = 0; d < r->gndim; d++)
        if (r->gstep[d] == 0 &&
            kt__cg_outside(g, &r->gdim[d], g->lt->bufs[r->buf].shape[d]))
            return 1;
    return 0;
}

/* Guarded register i of w > 1 lanes: stored whole when its first and
 * last lanes are inside its buffer, else only the lanes inside (a masked
 * store when contiguous, else lane by lane), dropping the padding of a
 * product computed over padded extents. */
static void
store_guarded_lanes(struct cg *g, int i, const char *name, const char *addr)
{
    const struct reg *r = &g->regs[i];
    struct kt_buf c, off, whole;
    const char *in;

    if (never_inside(g, r))
        return;
    kt_buf_init(&c);
    kt_buf_init(&whole);
    kt_buf_printf(&whole, "kt_st%d(&t_%s[%s], r%d);", r->width, name, addr, i);
    if ((in = open_whole_vector(g, r, whole.p)) == NULL) {
        kt_buf_free(&whole);
        kt_buf_free(&c);
        return;
    }
    if (r->stride == 1) {
        put_reg_mask(g, &c, r);
        kt__cg_line(g, "%skt_stm%d(&t_%s[%s], r%d, %s);", in, r->width, name,
                    addr, i, c.p);
        kt_buf_free(&whole);
        kt_buf_free(&c);
        return;
    }
    put_reg_cond(g, &c, r, 0, "l_");
    kt__cg_line(g, "%sfor (int l_ = 0; l_ < %d; l_++)", in, r->width);
    kt__cg_line(g, "%s    if (%s) t_%s[%s + %s] = r%d[l_];", in, c.p, name,
                addr, lane_offset(r, &off), i);
    kt_buf_free(&off);
    kt_buf_free(&whole);
    kt_buf_free(&c);
}

static void
store_reg(struct cg *g, int i, const char *name, const char *addr)
{
    const struct reg *r = &g->regs[i];
    const char *op = kt__cg_combine_op(r->op);
    struct kt_buf c;
    int k, checked = 0;

    kt_buf_init(&c);
    if (r->gdim != NULL && (r->acc > 0 || r->width == 1)) {
        /* "if (checks) ", or nothing when the loops keep it inside */
        kt_buf_puts(&c, "if (");
        checked = put_reg_cond(g, &c, r, 0, NULL) > 0;
        kt_buf_puts(&c, ") ");
        if (!checked)
            kt_buf_reset(&c);
    }
    if (r->acc > 0) {
        for (k = 1; k < r->split; k++) {
            if (r->op == KT_SUM)
                kt__cg_line(g, "r%d += r%d_%d;", i, i, k);
            else
                kt__cg_line(g, "r%d = kt_v%s%d(r%d, r%d_%d);", i, op, r->acc, i,
                            i, k);
        }
        kt__cg_line(g, "%st_%s[%s] = kt_h%s%d(r%d);", c.p, name, addr,
                    r->op == KT_SUM ? "sum" : op, r->acc, i);
    } else if (r->gdim != NULL && r->width > 1) {
        store_guarded_lanes(g, i, name, addr);
    } else if (checked) {
        kt__cg_line(g, "%st_%s[%s] = r%d;", c.p, name, addr, i);
    } else if (r->width > 1 && kt__cg_strided_store(g, r->stride, r->width)) {
        char reg[16];
        snprintf(reg, sizeof(reg), "r%d", i);
        kt__cg_put_strided_store(g, name, addr, r->stride, reg, r->width);
    } else if (r->width > 1 && r->stride != 1) {
        kt__cg_line(g, "for (int l_ = 0; l_ < %d; l_++)", r->width);
        kt__cg_line(g, "    t_%s[%s + %lld*l_] = r%d[l_];", name, addr,
                    (long long)r->stride, i);
    } else if (r->width > 1) {
        kt__cg_line(g, "kt_st%d(&t_%s[%s], r%d);", r->width, name, addr, i);
    } else {
        kt__cg_line(g, "t_%s[%s] = r%d;", name, addr, i);
    }
    kt_buf_free(&c);
}

static void
each_reg(struct cg *g, void (*fn)(struct cg *, int, const char *, const char *))
{
    int i;

    for (i = 0; i < g->nregs; i++) {
        struct kt_buf a;
        kt_buf_init(&a);
        kt__cg_put_aff(g, &a, &g->regs[i].addr);
        fn(g, i, g->lt->bufs[g->regs[i].buf].name, a.p);
        kt_buf_free(&a);
    }
}

void
kt__cg_load_regs(struct cg *g)
{
    each_reg(g, load_reg);
}

void
kt__cg_store_regs(struct cg *g)
{
    each_reg(g, store_reg);
}
