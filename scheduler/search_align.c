/* search_align.c - the root stages of one pipeline split among the
 * threads along the same axis (the genome's align gene, docs/search.md
 * "Aligned parallel partitions").
 *
 * A Winograd convolution runs three root stages, each parallel: the input
 * transform V, the product M and the output transform O.  Tiled freely,
 * V splits over input channels, M over transform points and O over
 * output channels, so each thread reads the half of V and M the other
 * thread wrote: through the shared L3 that costs little, but on a VM whose
 * host runs the two vCPUs on different CCXs (docs/measure.md, "Thread
 * placement") the 80x80 layer of PP-OCRv4 det ran 1.88 ms instead of
 * 0.75.  With all three split by tile rows it ran 1.07 ms there and 1.4%
 * slower than the free form on close CPUs (docs/performance.md).
 *
 * With align set, the builder finds the spatial axis of the heaviest
 * multi-level-tiled stage that the most work shares: a producer's output
 * dimension that each consumer reads as one of its own spatial axes, of
 * the same extent, with coefficient 1 (V's tile rows are M's, M's are
 * O's).  Every stage it reaches gets that axis's outer part one length
 * (the heaviest stage's, made a multiple of the core count where the
 * axis allows) and puts it first among its outer loops, so each stage's
 * parallel loop hands every thread the same rows.  The inner parts keep
 * their innermost lengths (the register tile); the factor moved goes to
 * the outermost inner part.  A plain stage at the root (an unfused bias
 * + relu) is split in two, the outer part first. */
#include <string.h>

#include "scheduler/search_int.h"

struct unit {
    int stage;    /* a multi-level-tiled or plain stage */
    int root;     /* the stage whose loops are parallel (its partner or it) */
    int64_t work; /* product of its axes' extents */
};

/* The spatial axis of consumer cs that every load of tensor t in e reads
 * dimension d by (index 1 * axis + constant); -1 when some load reads it
 * otherwise.  *seen counts the loads. */
static int
dim_axis(const struct kt_sstage *cs, const struct kt_expr *e, int t, int d,
         int *seen)
{
    int a, b;

    if (e == NULL)
        return -2; /* no load here: agrees with anything */
    if (e->op == KT_X_LOAD && e->src == t) {
        const struct kt_affine *x;
        (*seen)++;
        if (d >= e->ndim)
            return -1;
        x = &e->idx[d];
        if (x->n != 1 || x->k[0] != 1 || x->var[0] >= cs->nspatial)
            return -1;
        return x->var[0];
    }
    a = dim_axis(cs, e->a, t, d, seen);
    if (a == -1)
        return -1;
    b = dim_axis(cs, e->b, t, d, seen);
    if (b == -1)
        return -1;
    if (a >= 0 && b >= 0 && a != b)
        return -1;
    return a >= 0 ? a : b;
}

/* Consumer cs's spatial axis that producer ps's output dimension d maps
 * to one to one (same extent), or -1. */
static int
mapped_axis(const struct kt_sstage *ps, int d, const struct kt_sstage *cs)
{
    int seen = 0, a;

    if (!kt_expr_reads(cs->body, ps->out) || d >= ps->nspatial)
        return -1;
    a = dim_axis(cs, cs->body, ps->out, d, &seen);
    if (a < 0 || seen == 0 || cs->axes[a].extent != ps->axes[d].extent)
        return -1;
    return a;
}

/* The stages of g whose loops run in parallel at the root: the
 * multi-level-tiled ones (their loops, or those of the elementwise
 * consumer they are fused into) and the plain ones left at the root. */
static int
find_units(const struct kt_search *s, const struct sk_genome *g, struct unit *u)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    const struct kt_state *st = sk->base;
    int i, a, n = 0;

    for (i = 0; i < st->nstages; i++) {
        const struct sk_plan *p = &sk->plan[i];
        int root = p->role == SK_MLT && p->partner >= 0 ? p->partner : i;
        int plain_root = p->role == SK_PLAIN &&
                         (!p->may_move || g->loc[i] == 0);
        if ((p->role != SK_MLT && !plain_root) || st->stages[i].inlined ||
            st->stages[i].cache_read || g->par[root] == 0)
            continue;
        u[n].stage = i;
        u[n].root = root;
        u[n].work = 1;
        for (a = 0; a < st->stages[i].naxes; a++)
            u[n].work *= st->stages[i].axes[a].extent;
        n++;
    }
    return n;
}

/* From the units' axes known in axis[], the others that one reads or that
 * reads one along a mapped axis; returns the work covered. */
static int64_t
spread(const struct kt_state *st, const struct unit *u, int n, int *axis)
{
    int64_t work = 0;
    int i, j, grew = 1;

    while (grew) {
        grew = 0;
        for (i = 0; i < n; i++)
            for (j = 0; j < n; j++) {
                const struct kt_sstage *a = &st->stages[u[i].stage];
                const struct kt_sstage *b = &st->stages[u[j].stage];
                int m;
                if (i == j || axis[i] < 0 || axis[j] >= 0)
                    continue;
                /* i produces what j reads, or j produces what i reads */
                m = mapped_axis(a, axis[i], b);
                if (m < 0 && kt_expr_reads(a->body, b->out))
                    for (m = 0; m < b->nspatial; m++)
                        if (mapped_axis(b, m, a) == axis[i])
                            break;
                if (m >= 0 && m < b->nspatial) {
                    axis[j] = m;
                    grew = 1;
                }
            }
    }
    for (i = 0; i < n; i++)
        if (axis[i] >= 0)
            work += u[i].work;
    return work;
}

/* Outer length of axis a of the tiles t (n levels). */
static int64_t
outer_of(const int32_t *t, int n, int64_t extent)
{
    int64_t inner = 1;
    int l;

    for (l = 1; l < n; l++)
        inner *= t[l];
    return extent / inner;
}

int64_t
sk_gcd(int64_t a, int64_t b)
{
    while (b != 0) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* Gives axis tiles t (n levels, extent) the outer length e: the inner
 * levels keep what divides extent / e from the innermost out, the rest
 * goes to the outermost inner level. */
static void
set_outer(int32_t *t, int n, int64_t extent, int64_t e)
{
    int64_t rem = extent / e;
    int l;

    for (l = n - 1; l >= 1; l--) {
        int64_t keep = sk_gcd(rem, t[l]);
        t[l] = (int32_t)keep;
        rem /= keep;
    }
    if (n >= 2)
        t[1] = (int32_t)(t[1] * rem);
    t[0] = (int32_t)e;
}

/* The outer length to split an axis of extent ext into: want when the
 * cores divide it, else the next length the cores divide that divides
 * ext (each thread the same rows in every stage), else want or the
 * smallest divisor of ext from the core count up. */
static int64_t
even_split(int64_t want, int64_t ext, int cores)
{
    int64_t e;

    for (e = want < cores ? cores : want; e <= ext; e++)
        if (e % cores == 0 && ext % e == 0)
            return e;
    if (want >= cores)
        return want;
    for (e = cores; e < ext && ext % e != 0; e++)
        ;
    return e;
}

int
sk_align(const struct kt_search *s, const struct sk_genome *g,
         struct sk_aligned *al)
{
    const struct sk_sketch *sk = &s->sk[g->sketch];
    const struct kt_state *st = sk->base;
    struct unit u[KT_MAX_STAGES];
    int axis[KT_MAX_STAGES], best_axis[KT_MAX_STAGES];
    int n, i, a, anchor = 0, cores = s->o.cores > 1 ? s->o.cores : 2;
    int64_t best = 0, e;

    for (i = 0; i < KT_MAX_STAGES; i++) {
        al->first[i] = -1;
        al->outer[i] = 0;
    }
    memcpy(al->tiles, g->tiles, sizeof(g->tiles));
    if (!g->align || (n = find_units(s, g, u)) < 2)
        return 0;
    for (i = 1; i < n; i++)
        if (u[i].work > u[anchor].work)
            anchor = i;
    /* the anchor's axis that the most work shares (the first on a tie) */
    for (a = 0; a < st->stages[u[anchor].stage].nspatial; a++) {
        int64_t w;
        if (st->stages[u[anchor].stage].axes[a].extent < cores)
            continue;
        for (i = 0; i < n; i++)
            axis[i] = i == anchor ? a : -1;
        w = spread(st, u, n, axis);
        if (w > best) {
            best = w;
            memcpy(best_axis, axis, sizeof(axis));
        }
    }
    if (best <= u[anchor].work)
        return 0; /* no other stage shares an axis with it */
    {
        const struct sk_plan *p = &sk->plan[u[anchor].stage];
        const struct kt_sstage *ss = &st->stages[u[anchor].stage];
        int ax = best_axis[anchor];
        int64_t ext = ss->axes[ax].extent;
        e = p->role == SK_MLT
                ? outer_of(al->tiles[p->slot][ax], sk_nparts(p, 0), ext)
                : 1;
        e = even_split(e, ext, cores);
    }
    for (i = 0; i < n; i++) {
        const struct sk_plan *p = &sk->plan[u[i].stage];
        int ax = best_axis[i];
        if (ax < 0)
            continue;
        if (p->role == SK_MLT)
            set_outer(al->tiles[p->slot][ax], sk_nparts(p, 0),
                      st->stages[u[i].stage].axes[ax].extent, e);
        al->first[u[i].stage] = ax;
        al->outer[u[i].stage] = e;
        if (u[i].root != u[i].stage) { /* its elementwise consumer's loops */
            al->first[u[i].root] = ax;
            al->outer[u[i].root] = e;
        }
    }
    return 1;
}
