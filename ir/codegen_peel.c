/* codegen_peel.c - narrow vectors for the last tile of a row.  A tile
 * padded past the edge of what it stores (197 columns as 13 tiles of 16
 * lanes) computes its last tile at full width although only a few lanes
 * (5 of 16) are kept.  The generator peels that last iteration off the
 * loop over the tiles and emits it with the narrowest vectors still
 * covering the kept lanes (8), the guarded stores dropping the rest as
 * before.  On cores that split a 16-lane FMA in two (AMD Zen 4) the
 * narrow tile costs half; elsewhere it is as many instructions.  The
 * loop before it then never reaches the edge: its stores need no checks.
 * A loop is peeled for that alone where bounds checks below it hold for
 * every iteration but its last (a padded product's last row tile). */
#include "ir/codegen_int.h"

/* The lanes of vectorized loop v's stores still inside their buffers at
 * the last iteration of loop n, or -1 when the lanes past them are not
 * all dropped: every store must be guarded and index one dimension by
 * k * n + v + c alone (k, c >= 0), so that lanes past the edge there are
 * exactly the ones its checks drop. */
static int64_t
kept_lanes(const struct cg *g, const struct kt_node *n, const struct kt_node *v)
{
    int64_t kept = 0;
    int i, d;

    for (i = 0; i < v->nkids; i++) {
        const struct kt_node *s = v->kids[i];
        const struct kt_affine *a = NULL;
        int64_t k, in = 0;

        if (s->kind != KT_N_STORE || !s->guarded)
            return -1;
        for (d = 0; d < s->ndim; d++) {
            if (kt_aff_coef(&s->idx[d], v->var) == 0)
                continue;
            if (a != NULL)
                return -1;
            a = &s->idx[d];
            in = g->lt->bufs[s->buf].shape[d];
        }
        if (a == NULL || a->n != 2 || a->c < 0 || kt_aff_coef(a, v->var) != 1)
            return -1;
        k = kt_aff_coef(a, n->var);
        if (k <= 0)
            return -1;
        in -= k * (n->extent - 1) + a->c;
        if (in < 1)
            return -1;
        if (in > kept)
            kept = in;
    }
    return kept;
}

/* Chunk lanes w at offset i halved while half still covers the lanes
 * below keep (0: all kept). */
static int
narrowed(int w, int64_t i, int64_t keep)
{
    while (keep > 0 && w / 2 >= 4 && i + w / 2 >= keep)
        w /= 2;
    return w;
}

int
kt__cg_tail_lanes(const struct cg *g, const struct kt_node *n, int rule,
                  int64_t i)
{
    int64_t keep = g->lane_limit != NULL ? g->lane_limit[n->var] : 0;

    return narrowed(kt__cg_rule_lanes(g, n, rule, i), i, keep);
}

int64_t
kt__cg_tail_end(const struct cg *g, const struct kt_node *n)
{
    int64_t keep = g->lane_limit != NULL ? g->lane_limit[n->var] : 0;

    return keep > 0 && keep < n->extent ? keep : n->extent;
}

int
kt__cg_tail_stores(const struct cg *g, const struct kt_node *n, int rule,
                   int64_t i, int w)
{
    int64_t end = kt__cg_tail_end(g, n);

    return rule == KT_CG_LANES_MASKED && i + w > end ? (int)(end - i) : 0;
}

/* The lanes vectorized loop v emits up to end, each chunk narrowed to
 * what the lanes before keep still need (keep 0: as the rule says). */
static int64_t
emitted_lanes(const struct cg *g, const struct kt_node *v, int64_t keep)
{
    int rule = kt__cg_lane_rule(g, v), w;
    int64_t i, end = keep > 0 && keep < v->extent ? keep : v->extent, sum = 0;

    for (i = 0; i < end; i += w) {
        w = narrowed(kt__cg_rule_lanes(g, v, rule, i), i, keep);
        sum += w;
    }
    return sum;
}

/* Walks the nest below n: -1 when some vectorized loop there cannot be
 * narrowed at n's last iteration (or a transposing copy, which keeps its
 * blocks whole), else how many would emit fewer lanes; with limit set,
 * records their kept lanes in g->lane_limit (limit 0 clears them). */
static int
walk(struct cg *g, const struct kt_node *n, const struct kt_node *m, int set,
     int limit)
{
    int k, r, count = 0;
    int64_t keep;

    if (m->kind == KT_N_LOOP && m != n) {
        if (kt__cg_transpose_weight(g, m) > 0)
            return -1;
        if (kt__cg_is_vector_loop(g, m)) {
            keep = kept_lanes(g, n, m);
            if (keep < 0)
                return -1;
            if (emitted_lanes(g, m, keep) >= emitted_lanes(g, m, 0))
                return 0;
            if (set)
                g->lane_limit[m->var] = limit ? keep : 0;
            return 1;
        }
    }
    for (k = 0; k < m->nkids; k++) {
        r = walk(g, n, m->kids[k], set, limit);
        if (r < 0)
            return -1;
        count += r;
    }
    return count;
}

/* Whether a bounds check of index idx against extent uses variable var
 * and holds for all its values but the last, last (the other loops at
 * their ranges), not for all of them. */
static int
holds_short(struct cg *g, int var, int64_t last, const struct kt_affine *idx,
            int64_t extent)
{
    struct kt_affine a;
    int64_t was = g->var_max[var];
    int all, short_of_last;

    kt__cg_subst(g, idx, -1, &a);
    if (kt_aff_coef(&a, var) == 0)
        return 0;
    g->var_max[var] = last;
    all = kt__cg_inside(g, &a, extent);
    g->var_max[var] = last - 1;
    short_of_last = kt__cg_inside(g, &a, extent);
    g->var_max[var] = was;
    return short_of_last && !all;
}

/* Whether a guarded read in e has such a check; with vec >= 0, only a
 * check whose index moves with the vectorized loop vec. */
static int
read_checks_hold_short(struct cg *g, int var, int64_t last,
                       const struct kt_expr *e, int vec)
{
    int d;

    if (e == NULL)
        return 0;
    if (e->op == KT_X_LOAD && e->guarded)
        for (d = 0; d < e->ndim; d++)
            if ((vec < 0 || kt_aff_coef(&e->idx[d], vec) != 0) &&
                holds_short(g, var, last, &e->idx[d],
                            g->lt->bufs[e->src].shape[d]))
                return 1;
    return read_checks_hold_short(g, var, last, e->a, vec) ||
           read_checks_hold_short(g, var, last, e->b, vec);
}

/* Whether some guarded read or store under m has a check that holds
 * short of var's last value (holds_short). */
static int
checks_hold_short(struct cg *g, int var, int64_t last, const struct kt_node *m)
{
    int k, d;

    if (m->kind == KT_N_STORE) {
        if (m->guarded)
            for (d = 0; d < m->ndim; d++)
                if (holds_short(g, var, last, &m->idx[d],
                                g->lt->bufs[m->buf].shape[d]))
                    return 1;
        return read_checks_hold_short(g, var, last, m->expr, -1);
    }
    for (k = 0; k < m->nkids; k++)
        if (checks_hold_short(g, var, last, m->kids[k]))
            return 1;
    return 0;
}

/* Whether loop n's last iteration narrows some vectorized loop below it
 * (walk). */
static int
narrows(struct cg *g, const struct kt_node *n)
{
    return g->o->vector_bytes / 4 >= 8 && walk(g, n, n, 0, 0) > 0;
}

/* Peeled, the loop's other iterations drop those checks and its last one
 * knows their outcome: a 197-row product tiled by 20 rows reads rows
 * 197-199 through a check in its innermost loop (a branch per step) and
 * stores them through another; peeled, the first 9 row tiles run
 * without either and the last one's dropped rows are dead code,
 * 1.03x-1.05x on 1 thread (docs/performance.md).  Reduction loops are left
 * whole (the sliding windows of codegen_window.c are not peeled). */
int
kt__cg_peels(struct cg *g, const struct kt_node *n)
{
    if (g->reference || n->kind != KT_N_LOOP || n->extent < 2 ||
        n->ann != KT_ANN_NONE || kt__cg_is_unrolled(g, n))
        return 0;
    if (narrows(g, n))
        return 1;
    return !n->reduce && g->var_max != NULL && g->env != NULL &&
           checks_hold_short(g, n->var, n->extent - 1, n);
}

void
kt__cg_emit_peeled(struct cg *g, const struct kt_node *n)
{
    const char *v = g->lt->var_names[n->var];
    int narrowed_tail = narrows(g, n);

    kt__cg_loop_range(g, n->var, 1, n->extent - 1);
    kt__cg_line(g, "for (long %s = 0; %s < %lld; %s++) {", v, v,
                (long long)(n->extent - 1), v);
    g->indent++;
    kt__cg_emit_kids(g, n);
    g->indent--;
    kt__cg_line(g, "}");
    kt__cg_line(g, "{");
    g->indent++;
    g->env[n->var].set = 1;
    kt_aff_const(&g->env[n->var].val, n->extent - 1);
    if (narrowed_tail)
        walk(g, n, n, 1, 1);
    kt__cg_emit_kids(g, n);
    if (narrowed_tail)
        walk(g, n, n, 1, 0);
    g->env[n->var].set = 0;
    g->indent--;
    kt__cg_line(g, "}");
}

/* Whether a guarded vector read in a reduction loop under m (its index
 * moving with the vectorized loop vec) has a check that holds short of
 * var's last value: a check at every step of the reduction, which gcc
 * does not hoist out of a register tile's loop (a masked load beside
 * each load).  A broadcast's check (a padded row of A) it does hoist. */
static int
hot_checks_hold_short(struct cg *g, int var, int64_t last,
                      const struct kt_node *m, int in_reduction, int vec)
{
    int k;

    if (m->kind == KT_N_LOOP) {
        in_reduction |= m->reduce;
        if (m->ann == KT_ANN_VECTORIZE)
            vec = m->var;
    }
    if (m->kind == KT_N_STORE)
        return in_reduction && vec >= 0 &&
               read_checks_hold_short(g, var, last, m->expr, vec);
    for (k = 0; k < m->nkids; k++)
        if (hot_checks_hold_short(g, var, last, m->kids[k], in_reduction, vec))
            return 1;
    return 0;
}

/* Let n (x / d % m) names a part of a fused loop's iteration, which no
 * loop of its own can be peeled for (the parallel loop of a product's
 * column chunks: 104 chunks of 64 over 6625 columns padded to 6656).
 * When a check at every reduction step in the siblings after it,
 * kids[from..], holds for all of its values but the last, they are
 * emitted twice behind one branch: without those checks, and for its
 * last value (a constant).  Read in place, the product's padded B then
 * checks its bounds in the last chunk only, not at every k step of
 * every chunk's last column tile (150.7 against 215.0 GFLOPS on 1
 * thread on a Zen 5, docs/performance.md). */
int
kt__cg_let_splits(struct cg *g, const struct kt_node *n,
                  const struct kt_node *const *kids, int from, int nkids)
{
    int64_t last = g->var_max != NULL ? g->var_max[n->var] : -1;
    int k;

    if (g->reference || g->env == NULL || g->env[n->var].set || last < 1 ||
        last != n->mod - 1)
        return 0;
    for (k = from; k < nkids; k++)
        if (hot_checks_hold_short(g, n->var, last, kids[k], 0, -1))
            return 1;
    return 0;
}

int
kt__cg_emit_let_split(struct cg *g, const struct kt_node *n,
                      const struct kt_node *const *kids, int from, int nkids)
{
    const char *v = g->lt->var_names[n->var];
    int64_t last = g->var_max != NULL ? g->var_max[n->var] : -1;
    int k;

    if (!kt__cg_let_splits(g, n, kids, from, nkids))
        return 0;
    kt__cg_line(g, "if (%s < %lld) {", v, (long long)last);
    g->indent++;
    g->var_max[n->var] = last - 1;
    for (k = from; k < nkids; k++)
        kt__cg_emit_node(g, kids[k]);
    g->var_max[n->var] = last;
    g->indent--;
    kt__cg_line(g, "} else {");
    g->indent++;
    g->env[n->var].set = 1;
    kt_aff_const(&g->env[n->var].val, last);
    for (k = from; k < nkids; k++)
        kt__cg_emit_node(g, kids[k]);
    g->env[n->var].set = 0;
    g->indent--;
    kt__cg_line(g, "}");
    return 1;
}
