/* search_factors.c - the tables of exact factorizations each tiled axis
 * of a sketch draws its tile lengths from, with a bound on the innermost
 * part (the register tile's; docs/search.md). */
#include <stdlib.h>
#include <string.h>

#include "scheduler/search_int.h"

#define SK_MAX_FACTORS 200000

/* ---- factorization tables ---------------------------------------------- */

static void
enum_factors(struct sk_factors *f, int32_t *cur, int pos, int64_t rest,
             int64_t maxin)
{
    int64_t d;

    if (f->count >= SK_MAX_FACTORS)
        return;
    if (pos == 0) {
        cur[0] = (int32_t)rest;
        memcpy(&f->v[(size_t)f->count * (size_t)f->n], cur,
               sizeof(*cur) * (size_t)f->n);
        f->count++;
        return;
    }
    for (d = 1; d <= rest; d++) {
        if (rest % d != 0 || (pos == f->n - 1 && d > maxin))
            continue;
        cur[pos] = (int32_t)d;
        enum_factors(f, cur, pos - 1, rest / d, maxin);
    }
}

static int64_t
count_factors(int64_t rest, int pos, int n, int64_t maxin, int64_t cap)
{
    int64_t d, c = 0;

    if (pos == 0)
        return 1;
    for (d = 1; d <= rest && c < cap; d++)
        if (rest % d == 0 && !(pos == n - 1 && d > maxin))
            c += count_factors(rest / d, pos - 1, n, maxin, cap);
    return c;
}

static struct sk_factors *
get_factors(struct kt_search *s, int64_t extent, int n, int64_t maxin)
{
    struct sk_factors *f;
    int32_t cur[SK_MAXP];
    int64_t cnt;
    int i;

    for (i = 0; i < s->nfac; i++)
        if (s->facs[i]->extent == extent && s->facs[i]->n == n &&
            s->facs[i]->maxin == maxin)
            return s->facs[i];
    f = kt_xcalloc(1, sizeof(*f));
    f->extent = extent;
    f->n = n;
    f->maxin = maxin;
    cnt = count_factors(extent, n - 1, n, maxin, SK_MAX_FACTORS);
    if (cnt > SK_MAX_FACTORS)
        cnt = SK_MAX_FACTORS;
    f->v = kt_xcalloc((size_t)(cnt ? cnt : 1) * (size_t)n, sizeof(int32_t));
    enum_factors(f, cur, n - 1, extent, maxin);
    if (s->nfac == s->capfac) {
        s->capfac = s->capfac ? 2 * s->capfac : 16;
        s->facs = kt_xrealloc(s->facs, sizeof(*s->facs) * (size_t)s->capfac);
    }
    s->facs[s->nfac++] = f;
    return f;
}

int
sk_nparts(const struct sk_plan *p, int reduce)
{
    const char *c = sk_structures[p->structure];
    int n = 0;

    for (; *c; c++)
        n += (*c == 'R') == reduce;
    return n;
}

/* An rfactor's innermost reduction part is one run of vectors folded
 * into a few lane accumulators per row (KT_CG_MAX_ACC_SPLIT), so it may
 * run longer than a spatial tile: dense_b1's GEMV (3072 x 768) ran at
 * 42-44 GFLOPS on 1 thread with runs of 256 against 40-41 with 64, each
 * row's weights read in longer streams (docs/performance.md). */
#define SK_RF_RUN_VECTORS 16

/* An axis of whole vectors whose count 2, 3 and 4 do not divide tiles
 * only 1 vector wide within max_innermost_factor (6640 lanes, 415
 * vectors = 5 x 83; 112 pixels, 7 vectors): each step of such a tile
 * loads 1 vector and broadcasts one scalar per accumulator.  Its
 * smallest run of 5 to SK_WIDE_RUN_VECTORS vectors may run innermost too
 * (lanes of it; 0 when the axis has none). */
#define SK_WIDE_RUN_VECTORS 8

static int64_t
wide_run_lanes(const struct kt_search *s, int64_t extent)
{
    int64_t lanes = sk_widest_lanes(s), vectors = extent / lanes, w;

    if (extent % lanes != 0 || vectors % 2 == 0 || vectors % 3 == 0)
        return 0;
    for (w = 5; w <= SK_WIDE_RUN_VECTORS; w++)
        if (vectors % w == 0)
            return w * lanes;
    return 0;
}

/* The bound on the innermost part of axis a of a tiled stage: the
 * reduction part around the register tile of a multi-level tiling may run
 * longer (each accumulator is loaded and stored once per pass over it:
 * GEMM 1024^3 with an 8 x 64 tile ran at 81 GFLOPS with 64 of k inside,
 * 100 with 256), up to the whole k of that GEMM (max_reduce_run): its
 * 8 x 32 tile over all 1024 steps of k, B packed per 32 columns, ran at
 * 1.01x / 1.00x-1.06x oneDNN on 1 / 2 threads where 256 steps ran at
 * 0.96x (docs/performance.md); an rfactor's innermost reduction part is
 * its run of lane vectors (SK_RF_RUN_VECTORS).  An
 * axis no full vector divides (the 197 tokens of a ViT's attention, a
 * prime; CLIP's 77; an rfactor's reduction of 300) may run whole inside
 * when its register tile can hold it: within the bound it could only be
 * 1 wide, or 7 or 11, where 197 lanes are 14 vectors and 77 are 7
 * (kt_vector_chunks). */
static int64_t
innermost_bound(const struct kt_search *s, const struct sk_plan *p,
                const struct kt_axis *ax)
{
    int64_t bound = s->o.max_innermost_factor;

    if (ax->reduce && p->structure != SK_STRUCT_RF)
        return s->o.max_reduce_run;
    if (ax->reduce && bound < SK_RF_RUN_VECTORS * sk_widest_lanes(s))
        bound = SK_RF_RUN_VECTORS * sk_widest_lanes(s);
    /* Whole extents are a separate bound: the larger of the two holds. */
    if (ax->extent > bound && ax->extent % sk_widest_lanes(s) != 0 &&
        ax->extent <= sk_register_tile_limit(s))
        bound = ax->extent;
    if (!ax->reduce && bound < wide_run_lanes(s, ax->extent))
        bound = wide_run_lanes(s, ax->extent);
    return bound;
}

int
sk_prepare_factors(struct kt_search *s)
{
    int k, slot, a;

    for (k = 0; k < s->nsketches; k++) {
        const struct sk_sketch *sk = &s->sk[k];
        for (slot = 0; slot < sk->nslots; slot++) {
            int i = sk->slot_stage[slot];
            const struct kt_sstage *ss = &sk->base->stages[i];
            for (a = 0; a < ss->naxes; a++) {
                struct sk_factors *f;
                int n = sk_nparts(&sk->plan[i], ss->axes[a].reduce);
                int64_t maxin = innermost_bound(s, &sk->plan[i], &ss->axes[a]);
                if (ss->axes[a].extent > INT32_MAX)
                    return KT_EINVAL;
                f = get_factors(s, ss->axes[a].extent, n, maxin);
                if (f->count == 0) /* innermost bound: allow all-outer */
                    f = get_factors(s, ss->axes[a].extent, 1, maxin);
                s->fac[k][slot][a] = f;
            }
        }
    }
    return KT_OK;
}

void
sk_free_factors(struct kt_search *s)
{
    int i;

    for (i = 0; i < s->nfac; i++) {
        free(s->facs[i]->v);
        free(s->facs[i]);
    }
    free(s->facs);
    s->facs = NULL;
    s->nfac = s->capfac = 0;
}
