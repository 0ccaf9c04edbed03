/* codegen_kernel.c - micro-kernels: a loop whose body expands completely
 * is emitted as straight-line vector code, with the buffers it touches at
 * addresses that do not change across the loops from the nest's top down
 * to it held in registers (scalar replacement); an init nest just before
 * such a kernel is folded into the registers' start values. */
#include "ir/codegen_int.h"

#include <stdlib.h>

/* Whether n is made of loops, lets and stores of constants only. */
static int
only_const_stores(const struct kt_node *n)
{
    int i;

    if (n->kind == KT_N_STORE)
        return n->op == KT_ASSIGN && n->expr->op == KT_X_CONST;
    if (n->kind != KT_N_LOOP && n->kind != KT_N_LET)
        return 0;
    for (i = 0; i < n->nkids; i++)
        if (!only_const_stores(n->kids[i]))
            return 0;
    return 1;
}

void
kt__cg_emit_let(struct cg *g, const struct kt_node *n)
{
    struct kt_affine src, a;

    kt_aff_var(&a, n->src_var, 1);
    kt__cg_subst(g, &a, -1, &src);
    if (src.n == 0) {
        g->env[n->var].set = 1;
        kt_aff_const(&g->env[n->var].val, (src.c / n->div) % n->mod);
        return;
    }
    /* not a constant here, whatever an expansion of its loop left */
    g->env[n->var].set = 0;
    if (g->analysing)
        return;
    {
        struct kt_buf b;
        kt_buf_init(&b);
        kt__cg_put_aff(g, &b, &src);
        kt__cg_line(g, "const long %s = (%s) / %lld %% %lld;",
                    g->lt->var_names[n->var], b.p, (long long)n->div,
                    (long long)n->mod);
        kt_buf_free(&b);
    }
}

/* Emits (or, while analysing, walks) the fully expanded form of n. */
static void
expand(struct cg *g, const struct kt_node *n, int lane_var, int w)
{
    int64_t i;
    int k, lw, vec, rule;

    switch (n->kind) {
    case KT_N_STORE: kt__cg_emit_store(g, n, lane_var, w); return;
    case KT_N_LET: kt__cg_emit_let(g, n); return;
    case KT_N_LOOP: break;
    default: kt__cg_fail(g, "cannot expand this node"); return;
    }
    vec = kt__cg_is_vector_loop(g, n);
    rule = vec ? kt__cg_lane_rule(g, n) : 0;
    g->env[n->var].set = 1;
    for (i = 0; i < (vec ? kt__cg_tail_end(g, n) : n->extent); i += lw) {
        lw = vec ? kt__cg_tail_lanes(g, n, rule, i) : 1;
        kt_aff_const(&g->env[n->var].val, i);
        if (vec)
            g->store_lanes = kt__cg_tail_stores(g, n, rule, i, lw);
        for (k = 0; k < n->nkids; k++) {
            if (lw > 1)
                expand(g, n->kids[k], n->var, lw);
            else
                expand(g, n->kids[k], vec ? -1 : lane_var, vec ? 1 : w);
        }
        if (vec)
            g->store_lanes = 0;
    }
    g->env[n->var].set = 0;
}

static void
mark_inner(struct cg *g, const struct kt_node *n, int on)
{
    int i;

    if (n->kind == KT_N_LOOP || n->kind == KT_N_LET)
        g->inner[n->var] = (unsigned char)on;
    for (i = 0; i < n->nkids; i++)
        mark_inner(g, n->kids[i], on);
}

/* Whether kernel loop k, emitted alone, is expanded whole rather than
 * looped over its expanded body: its iterations read the same guarded
 * vectors (a depthwise convolution's kernel rows over a tile of output
 * rows), which the whole body then reads once each (codegen_pin.c), and
 * so expanded it fits the code-size budget (kt__cg_plan_unroll). */
static int
expands_whole(const struct cg *g, const struct kt_node *k)
{
    return g->whole != NULL && g->whole[k->var];
}

/* Pass 1 of a micro-kernel: the registers kept when the loops from top
 * down to the kernel loop k (a perfect nest) hold them, or k expanded
 * whole holds them (whole); returns how many. */
static int
analyse_kernel(struct cg *g, const struct kt_node *top, const struct kt_node *k,
               int whole)
{
    int i, j, keep = 0;

    kt__cg_clear_regs(g);
    kt__cg_pins_clear(g);
    for (i = 0; i < g->lt->nbufs; i++) {
        g->promote_ok[i] = top->ann != KT_ANN_PARALLEL;
        g->stored[i] = 0;
    }
    mark_inner(g, top, 1);
    g->analysing = 1;
    if (whole)
        expand(g, k, -1, 1);
    else
        for (j = 0; j < k->nkids; j++)
            expand(g, k->kids[j], -1, 1);
    g->analysing = 0;
    mark_inner(g, top, 0);
    /* Keep registers only for promotable buffers that the loop writes. */
    for (i = 0; i < g->nregs; i++)
        if (g->promote_ok[g->regs[i].buf] && g->stored[g->regs[i].buf]) {
            struct reg *r = &g->regs[i];
            r->acc = r->mixed ? 0 : r->lanes;
            r->split = r->nred < KT_CG_MAX_ACC_SPLIT ? r->nred
                                                     : KT_CG_MAX_ACC_SPLIT;
            r->next = 0;
            g->regs[keep++] = g->regs[i];
        } else {
            free(g->regs[i].gdim);
        }
    g->nregs = keep;
    return keep;
}

/* Whether every store of init (a nest of constant stores that expands
 * completely) lands on a register the kernel just analysed keeps; marks
 * those registers to start at the constant. */
static int
match_init(struct cg *g, const struct kt_node *init)
{
    int i;

    for (i = 0; i < g->nregs; i++)
        g->regs[i].init = 0;
    g->analysing = g->matching_init = 1;
    g->init_mismatch = 0;
    expand(g, init, -1, 1);
    g->analysing = g->matching_init = 0;
    return !g->init_mismatch;
}

/* A kernel loop k whose body expands completely: straight-line vector
 * code, with loop-invariant accesses held in registers across the loops
 * from top (k itself or a perfect nest of loops around it) down to k.
 * init (or NULL): the init nest just before top, folded into the
 * registers' start values (init_folds said it can be). */
void
kt__cg_emit_kernel_nest(struct cg *g, const struct kt_node *top,
                        const struct kt_node *k, const struct kt_node *init)
{
    const struct kt_node *cur;
    int j, depth = 0, whole = expands_whole(g, k);

    analyse_kernel(g, top, k, whole);
    if (init != NULL && !match_init(g, init))
        kt__cg_fail(g, "init nest no longer matches the registers");
    g->kernel_steps = whole ? 1 : k->extent;
    for (cur = top; cur != k; cur = cur->kids[0])
        g->kernel_steps *= cur->extent;
    /* expanded whole, a block: the shared reads are declared in it */
    if (g->nregs > 0 || whole) {
        kt__cg_line(g, "{");
        g->indent++;
        kt__cg_load_regs(g);
    }
    for (cur = top; cur != k; cur = cur->kids[0], depth++) {
        kt__cg_loop_header(g, cur, 1);
        g->indent++;
    }
    g->pinning = kt__cg_pins_pay(g);
    g->sharing = 1;
    if (whole) {
        expand(g, k, -1, 1);
    } else {
        kt__cg_loop_header(g, k, 1);
        g->indent++;
        depth++;
        for (j = 0; j < k->nkids; j++)
            expand(g, k->kids[j], -1, 1);
    }
    g->pinning = g->sharing = 0;
    for (j = 0; j < depth; j++) {
        g->indent--;
        kt__cg_line(g, "}");
    }
    if (g->nregs > 0 || whole) {
        kt__cg_store_regs(g);
        g->indent--;
        kt__cg_line(g, "}");
    }
    kt__cg_clear_regs(g);
}

int
kt__cg_body_expands(const struct cg *g, const struct kt_node *n)
{
    int64_t count = 0, c;
    int k;

    for (k = 0; k < n->nkids && count >= 0; k++) {
        c = kt__cg_expand_count(g, n->kids[k]);
        count = c < 0 ? -1 : count + c;
    }
    return count >= 0 && count <= g->o->max_unrolled_stmts;
}

int
kt__cg_is_vector_loop(const struct cg *g, const struct kt_node *n)
{
    return n->ann == KT_ANN_VECTORIZE && kt__cg_only_stores(n) &&
           kt__cg_chunk_lanes(g, n, 0) > 1;
}

/* The kernel loop at the bottom of a perfect nest of plain loops from n
 * (each has one loop as its only child), or NULL. */
static const struct kt_node *
nest_kernel(const struct cg *g, const struct kt_node *n)
{
    const struct kt_node *cur = n;

    while (!kt__cg_body_expands(g, cur)) {
        if (cur->nkids != 1 || cur->kids[0]->kind != KT_N_LOOP ||
            cur->kids[0]->ann == KT_ANN_PARALLEL ||
            kt__cg_is_vector_loop(g, cur->kids[0]))
            return NULL;
        cur = cur->kids[0];
    }
    return cur;
}

/* Holding the registers across the whole nest from n pays when it keeps
 * every register the kernel loop alone would keep (typically the
 * accumulator tile across a conv's c, r, s loops). */
static int
hoist_pays(struct cg *g, const struct kt_node *n, const struct kt_node *k)
{
    int inner = analyse_kernel(g, k, k, 0), outer = analyse_kernel(g, n, k, 0);

    kt__cg_clear_regs(g);
    return inner > 0 && outer >= inner;
}

/* The kernel loop of loop n when n is emitted as a micro-kernel nest
 * (n itself, or the bottom of a perfect nest from n when holding the
 * registers across it pays), else NULL. */
const struct kt_node *
kt__cg_kernel_of(struct cg *g, const struct kt_node *n)
{
    const struct kt_node *kern;

    if (g->reference || kt__cg_is_vector_loop(g, n) ||
        kt__cg_transpose_weight(g, n) > 0)
        return NULL;
    if (n->ann != KT_ANN_PARALLEL && (kern = nest_kernel(g, n)) != NULL &&
        kern != n && hoist_pays(g, n, kern))
        return kern;
    return kt__cg_body_expands(g, n) ? n : NULL;
}

/* Whether n holds only constant stores (an init nest) and expands to at
 * most as many as a kernel keeps registers. */
static int
is_const_nest(const struct cg *g, const struct kt_node *n)
{
    int64_t count = kt__cg_expand_count(g, n);
    return count >= 1 && count <= KT_CG_MAX_REGS && only_const_stores(n);
}

/* A reduction's init directly before the micro-kernel that accumulates
 * into the same elements (the register tile of a GEMM with its whole
 * reduction inside): when every init store is a register the kernel
 * keeps - and writes back after it - the registers start at the init
 * value instead of being stored, then loaded again. */
int
kt__cg_init_folds(struct cg *g, const struct kt_node *init,
                  const struct kt_node *n, const struct kt_node **kern)
{
    int ok;

    if (g->reference || n->kind != KT_N_LOOP || !is_const_nest(g, init))
        return 0;
    *kern = kt__cg_kernel_of(g, n);
    if (*kern == NULL)
        return 0;
    ok = analyse_kernel(g, n, *kern, expands_whole(g, *kern)) > 0 &&
         match_init(g, init);
    kt__cg_clear_regs(g);
    return ok;
}

/* Whether a store under n reads a guarded (padding) load: only those are
 * shared reads (put_load notes them while analysing). */
static int
has_guarded_read(const struct kt_node *n)
{
    int i;

    if (n->kind == KT_N_STORE)
        return kt__cg_reads_guarded(n->expr, -1) != 0;
    for (i = 0; i < n->nkids; i++)
        if (has_guarded_read(n->kids[i]))
            return 1;
    return 0;
}

int64_t
kt__cg_whole_saving(struct cg *g, const struct kt_node *k)
{
    int64_t saving;

    /* Without a guarded read nothing is shared: no expansion to walk (it
     * was a sixth of the search's time, for every unrolled loop of every
     * candidate's code-size check). */
    if (!has_guarded_read(k))
        return 0;
    analyse_kernel(g, k, k, 1);
    saving = kt__cg_shares_saving(g);
    kt__cg_clear_regs(g);
    kt__cg_pins_clear(g);
    return saving;
}
