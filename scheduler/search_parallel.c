/* search_parallel.c - the parallel-degree bound: on several cores, a
 * candidate whose heaviest loop nest runs on one thread is not proposed. */
#include "scheduler/search_int.h"

/* What encloses the store that runs most often. */
struct hot_store {
    int64_t runs;    /* product of all its loops' extents */
    int64_t spatial; /* product of its spatial loops' extents */
    int64_t par;     /* largest extent of a parallel loop around it */
};

static void
find_hot_store(const struct kt_node *n, int64_t runs, int64_t spatial,
               int64_t par, struct hot_store *hot)
{
    int i;

    if (n->kind == KT_N_LOOP) {
        runs *= n->extent;
        if (!n->reduce)
            spatial *= n->extent;
        if (n->ann == KT_ANN_PARALLEL && n->extent > par)
            par = n->extent;
    } else if (n->kind == KT_N_STORE) {
        if (runs > hot->runs) {
            hot->runs = runs;
            hot->spatial = spatial;
            hot->par = par;
        }
        return;
    }
    for (i = 0; i < n->nkids; i++)
        find_hot_store(n->kids[i], runs, spatial, par, hot);
}

int
sk_parallel_ok(const struct kt_search *s, const struct kt_looptree *lt)
{
    struct hot_store hot = {0, 1, 1};

    if (s->o.cores < 2 || lt->root == NULL)
        return 1;
    find_hot_store(lt->root, 1, 1, 1, &hot);
    /* A store with fewer spatial points than cores has nothing to split
     * (a full reduction to one value). */
    return hot.spatial < s->o.cores || hot.par >= s->o.cores;
}
