/* codegen_size.c - the size of the straight-line code the C compiler sees,
 * predicted before anything is built.  gcc's build time grows faster than
 * linearly with the length of a basic block full of memory references
 * (a 7x unrolled 56-statement scalar block took 4 s more than the rolled
 * loop), so the generator clamps every "#pragma GCC unroll" to keep each
 * block within a weighted budget, and kt_codegen_block_size() reports the
 * heaviest block so the search can drop candidates whose micro-kernels
 * alone are too heavy (e.g. many lane-by-lane gathers). */
#include "ir/codegen_int.h"

#include <stdlib.h>
#include <string.h>

/* Budget per block, in weighted statements (see store_weight). */
#define KT_CG_BLOCK_BUDGET_PER_STMT 2
#define KT_CG_MAX_PRAGMA_UNROLL 64

/* Loads of e, each weighing 1, or its lanes when it is gathered lane by
 * lane, or its loads when it is read as shuffled vectors; a guarded
 * (padding) read weighs its checks at every lane, or, contiguous or
 * strided and masked at the edges, its loads twice with their checks.
 * Weighed as a loop over the edge lanes (its loads and the checks of its
 * ends and of one lane), when edges were such loops, the search found
 * slower classifier kernels (dense_fc1000 0.94x where it found 1.08x);
 * weighed at every lane, a 14 x 14 depthwise convolution's register tiles
 * of 7 and 14 rows reading its input in place went over the code-size
 * bound, and its searches ended on 2 rows at 0.6x of the speed;
 * dense_fc1000 was level in an A/B with the contiguous ones weighed as
 * now (docs/performance.md).  A stride-2 window tap read from shared
 * loads weighs its shuffles (kt__cg_shared_taps). */
static int64_t
load_weight(const struct cg *g, const struct kt_expr *e, int lane_var, int w)
{
    int64_t c, sum = 0, one;

    if (e == NULL)
        return 0;
    if (e->op == KT_X_LOAD) {
        c = lane_var >= 0
                ? kt_load_flat_coef(e, g->lt->bufs[e->src].shape, lane_var)
                : 0;
        one = e->guarded && !g->bare ? 1 + e->ndim : 1;
        if (c == 0)
            return one;
        if (c == 1 && (!e->guarded || g->bare))
            return 1;
        if ((!e->guarded || g->bare) && c >= 2 && c <= KT_CG_MAX_SHUFFLE_STRIDE)
            return c;
        if (c == 1)
            return 2 * one; /* a vector load, masked at the edges */
        if (kt__cg_strided_masked(g, e, lane_var, c, w))
            return kt__cg_shared_taps(g, e, lane_var, c, w, NULL)
                       ? one + c      /* its shuffles, its share of loads */
                       : 2 * c * one; /* its loads, then masked at the edges */
        return w * one;
    }
    sum += load_weight(g, e->a, lane_var, w);
    sum += load_weight(g, e->b, lane_var, w);
    return sum;
}

/* A store weighs 1 plus its loads, or its lanes when it is scattered lane
 * by lane (twice for a reduction: each lane is read and written), or its
 * masked stores when it is strided and they replace the scatter; a
 * guarded assignment (padding dropped) also weighs its checks: the whole
 * vector's, then a loop checking each lane.  A guarded update (an
 * accumulator retargeted through a padded copy, ir/lower_elide.c) weighs
 * as a plain one: its producer finishes each element in one pass, so it
 * is held in a register and checked only where the register is stored,
 * after the unrolled body. */
static int64_t
store_weight(const struct cg *g, const struct kt_node *n, int lane_var, int w)
{
    const struct kt_lbuf *b = &g->lt->bufs[n->buf];
    int64_t c = 0, stride = 1, self = 1;
    int d;

    for (d = b->ndim - 1; lane_var >= 0 && d >= 0; d--) {
        c += kt_aff_coef(&n->idx[d], lane_var) * stride;
        stride *= kt__cg_pitch(g, b, d);
    }
    if (n->op == KT_ASSIGN && kt__cg_strided_store(g, c, w))
        self = c;
    else if (c != 0 && c != 1)
        self = n->op == KT_ASSIGN ? w : 2 * (int64_t)w;
    if (n->guarded && n->op == KT_ASSIGN && !g->bare)
        self += c == 0 ? 1 + n->ndim : 2 * (1 + (int64_t)n->ndim);
    return self + load_weight(g, n->expr, lane_var, w);
}

int64_t
kt__cg_load_weight(const struct cg *g, const struct kt_expr *e, int lane_var,
                   int w)
{
    return load_weight(g, e, lane_var, w);
}

int64_t
kt__cg_body_weight(const struct cg *g, const struct kt_node *n, int w)
{
    int64_t sum = 0;
    int k;

    for (k = 0; k < n->nkids; k++)
        sum += store_weight(g, n->kids[k], w > 1 ? n->var : -1, w);
    return sum;
}

int64_t
kt__cg_block_budget(const struct cg *g)
{
    return KT_CG_BLOCK_BUDGET_PER_STMT * (int64_t)g->o->max_unrolled_stmts;
}

/* Weight of n fully expanded (n expands: kt__cg_expand_count >= 0). */
static int64_t
expand_weight(const struct cg *g, const struct kt_node *n, int lane_var, int w)
{
    int64_t sum = 0, i;
    int k, lw, rule;

    if (n->kind == KT_N_STORE)
        return store_weight(g, n, lane_var, w);
    if (n->kind != KT_N_LOOP)
        return 0;
    if (!kt__cg_is_vector_loop(g, n)) {
        g->expanding[n->var] = 1;
        for (k = 0; k < n->nkids; k++)
            sum += expand_weight(g, n->kids[k], lane_var, w);
        g->expanding[n->var] = 0;
        return n->extent * sum;
    }
    rule = kt__cg_lane_rule(g, n);
    for (i = 0; i < n->extent; i += lw) {
        lw = kt__cg_rule_lanes(g, n, rule, i);
        for (k = 0; k < n->nkids; k++)
            sum += expand_weight(g, n->kids[k], lw > 1 ? n->var : -1, lw);
    }
    return sum;
}

/* The largest divisor of extent that keeps body * factor in budget. */
static int
pick_factor(int64_t extent, int64_t body, int64_t budget)
{
    int64_t f = extent < KT_CG_MAX_PRAGMA_UNROLL ? extent
                                                 : KT_CG_MAX_PRAGMA_UNROLL;

    for (; f > 1; f--)
        if (extent % f == 0 && f * body <= budget)
            return (int)f;
    return 1;
}

/* Whether a local buffer is declared below n.  Such a loop gets no unroll
 * pragma: gcc 12.2 (-O1 and up) miscompiles "#pragma GCC unroll 2" over a
 * loop whose body declares a block-scoped array in a nest below it (a
 * dense layer's padded weight tile refilled per column block: 188 of 427
 * outputs wrong, right without the pragma or with the array declared
 * outside the loop; clang is right).  Unrolling a loop that big buys
 * nothing anyway. */
static int
holds_alloc(const struct kt_node *n)
{
    int k;

    if (n->kind == KT_N_ALLOC)
        return 1;
    for (k = 0; k < n->nkids; k++)
        if (holds_alloc(n->kids[k]))
            return 1;
    return 0;
}

static int64_t plan(struct cg *g, const struct kt_node *n);
static int64_t plan_kids(struct cg *g, const struct kt_node *n, int from,
                         int splits);

/* The weight of n's kids from kid from on without the checks the model
 * charges guarded accesses. */
static int64_t
bare_weight(struct cg *g, const struct kt_node *n, int from, int splits)
{
    size_t bytes = ((size_t)g->lt->nvars + 1) * sizeof(*g->unroll_factor);
    int *factors = kt_xcalloc(1, bytes);
    int64_t total = g->total_weight, bare;
    int was_bare = g->bare;

    memcpy(factors, g->unroll_factor, bytes);
    g->bare = 1;
    g->total_weight = 0;
    plan_kids(g, n, from, splits);
    bare = g->total_weight;
    g->bare = was_bare;
    g->total_weight = total;
    memcpy(g->unroll_factor, factors, bytes);
    free(factors);
    return bare;
}

/* Plans n's kids from kid from on as emit_kids emits them: after the
 * first let that splits (with splits set), the rest twice without the
 * checks the split is for (kt__cg_emit_let_split).  Returns the heaviest
 * block. */
static int64_t
plan_kids(struct cg *g, const struct kt_node *n, int from, int splits)
{
    int64_t sub = 0, c, split_from;
    int k;

    for (k = from; k < n->nkids; k++) {
        if (splits && n->kids[k]->kind == KT_N_LET &&
            kt__cg_let_splits(g, n->kids[k],
                              (const struct kt_node *const *)n->kids, k + 1,
                              n->nkids)) {
            split_from = g->total_weight;
            sub = plan_kids(g, n, k + 1, 0);
            g->total_weight = split_from + 2 * bare_weight(g, n, k + 1, 0);
            return sub;
        }
        c = plan(g, n->kids[k]);
        sub = c > sub ? c : sub;
    }
    return sub;
}

/* What peeling loop n's last iteration (codegen_peel.c) adds to the
 * weight body of its kids: both copies lose those checks (the loop stops
 * short of the edge, the last iteration's are constants), so the pair
 * weighs twice the body without them, counted only where that is more
 * than the body with them (a ViT tile's 25 guarded stores weigh 300 with
 * their checks, 2 x 100 peeled; gcc took 0.27 s for the module either
 * way).  A let's split on its last value (kt__cg_emit_let_split) weighs
 * its two copies without the checks: the ones it is split for sit in a
 * reduction loop, weighed at every lane of every vector where gcc sees
 * two loads and a branch. */
static int64_t
peel_weight(struct cg *g, const struct kt_node *n, int64_t body)
{
    int64_t bare = bare_weight(g, n, 0, 1);

    return 2 * bare > body ? 2 * bare - body : 0;
}

/* Window loop n (codegen_window.c), its body weighing sub in one block:
 * unrolled as far as its body weighed bare (without the checks of its
 * guarded reads) fits the block budget, the copies after the first
 * weighed so.  Guarded reads along rows are masked loads, one instruction
 * each to gcc, and the unrolling is what lets gcc load each once for all
 * the copies: weighed with their checks, the r loop of a 14 x 14
 * depthwise convolution reading its input in place stayed rolled even
 * over 2 rows (196 a copy), and its tile of 14 rows ran at about 0.6x of
 * its unrolled form on the Zen 5 (docs/performance.md). */
static int64_t
plan_window(struct cg *g, const struct kt_node *n, int64_t sub, int64_t budget)
{
    int64_t bare = bare_weight(g, n, 0, 1);
    int f = pick_factor(n->extent, bare, budget);

    g->unroll_factor[n->var] = f;
    g->total_weight += bare * (f - 1);
    return sub + bare * (f - 1);
}

/* Whether unrolled kernel loop n of body weight sub and count statements
 * is expanded whole with its shared reads made once (codegen_kernel.c)
 * within the budget; if so records that and its weight.  Expanded whole,
 * a depthwise convolution's 8 x 16 tile with its 3 kernel rows (72 FMAs
 * of 30 distinct input vectors) ran 1.46x faster on 1 thread than as a
 * loop over the rows (docs/performance.md). */
static int
plan_whole(struct cg *g, const struct kt_node *n, int64_t count, int64_t sub,
           int64_t budget, int64_t before)
{
    int64_t saving, whole;

    if (!kt__cg_is_unrolled(g, n) || n->ann == KT_ANN_PARALLEL ||
        n->extent < 2 || n->extent * count > g->o->max_unrolled_stmts)
        return 0;
    saving = kt__cg_whole_saving(g, n);
    whole = n->extent * sub - saving;
    if (saving <= 0 || whole > budget)
        return 0;
    g->whole[n->var] = 1;
    g->total_weight = before + whole;
    return 1;
}

/* Returns the heaviest block of n; adds the weight of all the code n
 * becomes, unrolled as gcc will, to g->total_weight. */
static int64_t
plan(struct cg *g, const struct kt_node *n)
{
    int64_t budget = kt__cg_block_budget(g);
    int64_t sub = 0, c, count = 0, before;
    int k, w;

    switch (n->kind) {
    case KT_N_STORE:
        g->total_weight += store_weight(g, n, -1, 1);
        return store_weight(g, n, -1, 1);
    case KT_N_LET: return 0;
    case KT_N_LOOP: break;
    default: return plan_kids(g, n, 0, 1);
    }
    before = g->total_weight;
    /* The same choices as emit_loop: a transposing copy, a vector loop, a
     * micro-kernel loop (body expanded) or a plain loop. */
    if ((c = kt__cg_transpose_weight(g, n)) > 0) {
        g->unroll_factor[n->var] = 1;
        g->total_weight += c;
        return c;
    }
    if (kt__cg_is_vector_loop(g, n)) {
        /* the loop's body, and its tail chunks straight after it */
        int rule = kt__cg_lane_rule(g, n);
        int64_t i;
        w = kt__cg_rule_lanes(g, n, rule, 0);
        i = n->extent / w * w;
        sub += kt__cg_body_weight(g, n, w);
        for (; i < n->extent; i += w) {
            w = kt__cg_rule_lanes(g, n, rule, i);
            sub += kt__cg_body_weight(g, n, w);
        }
        g->total_weight += sub;
        return sub;
    }
    for (k = 0; k < n->nkids && count >= 0; k++) {
        c = kt__cg_expand_count(g, n->kids[k]);
        count = c < 0 ? -1 : count + c;
    }
    if (count >= 0 && count <= g->o->max_unrolled_stmts) {
        for (k = 0; k < n->nkids; k++)
            sub += expand_weight(g, n->kids[k], -1, 1);
        g->total_weight += sub;
    } else {
        sub = plan_kids(g, n, 0, 1);
        if (kt__cg_peels(g, n))
            g->total_weight += peel_weight(g, n, g->total_weight - before);
    }
    g->unroll_factor[n->var] = 1;
    if (holds_alloc(n))
        return sub;
    if (count < 0 || count > g->o->max_unrolled_stmts)
        count = -1;
    if (!kt__cg_is_unrolled(g, n) && kt__cg_is_window(g, n)) {
        c = plan_window(g, n, sub, budget);
        /* unrolled completely all the same: expanded whole, its shared
         * reads made once rather than left to gcc (which merges none) */
        if (count >= 0 && g->unroll_factor[n->var] >= n->extent &&
            n->extent * count <= g->o->max_unrolled_stmts &&
            kt__cg_whole_saving(g, n) > 0)
            g->whole[n->var] = 1;
        return c;
    }
    if (count >= 0 && plan_whole(g, n, count, sub, budget, before))
        return g->total_weight - before;
    if (kt__cg_is_unrolled(g, n))
        g->unroll_factor[n->var] = pick_factor(n->extent, sub, budget);
    g->total_weight = before +
                      (g->total_weight - before) * g->unroll_factor[n->var];
    return sub * g->unroll_factor[n->var];
}

void
kt__cg_plan_unroll(struct cg *g, const struct kt_node *n)
{
    int64_t b = plan(g, n);

    if (b > g->max_block)
        g->max_block = b;
}
