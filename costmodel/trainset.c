/* trainset.c - training sets for the cost model: programs' feature rows,
 * tasks and costs, and Ansor's normalized-throughput labels. */
#include "costmodel/costmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FAILED_COST 1e10 /* Ansor's sentinel for failed programs */

void
kt_train_set_init(struct kt_train_set *s)
{
    memset(s, 0, sizeof(*s));
}

void
kt_train_set_free(struct kt_train_set *s)
{
    int i;

    if (s == NULL)
        return;
    for (i = 0; i < s->n; i++)
        free(s->rows[i]);
    free(s->rows);
    free(s->nrows);
    free(s->task);
    free(s->cost);
    free(s->label);
    free(s->weight);
    memset(s, 0, sizeof(*s));
}

void
kt_train_set_add(struct kt_train_set *s, const float *rows, int nrows,
                 int64_t task, double cost)
{
    size_t cap;
    int i = s->n;

    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        cap = (size_t)s->cap;
        s->rows = kt_xrealloc(s->rows, cap * sizeof(*s->rows));
        s->nrows = kt_xrealloc(s->nrows, cap * sizeof(*s->nrows));
        s->task = kt_xrealloc(s->task, cap * sizeof(*s->task));
        s->cost = kt_xrealloc(s->cost, cap * sizeof(*s->cost));
        s->label = kt_xrealloc(s->label, cap * sizeof(*s->label));
        s->weight = kt_xrealloc(s->weight, cap * sizeof(*s->weight));
    }
    if (nrows < 0 || rows == NULL)
        nrows = 0;
    s->rows[i] = NULL;
    if (nrows > 0) {
        s->rows[i] = kt_xmalloc((size_t)nrows * KT_FEATURE_LEN * sizeof(float));
        memcpy(s->rows[i], rows,
               (size_t)nrows * KT_FEATURE_LEN * sizeof(float));
    }
    s->nrows[i] = nrows;
    s->task[i] = task;
    s->cost[i] = cost > 0 && isfinite(cost) ? cost : FAILED_COST;
    s->label[i] = 0;
    s->weight[i] = 0;
    s->n++;
}

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return x < y ? -1 : x > y;
}

void
kt_train_set_label(struct kt_train_set *s, float wfloor)
{
    int64_t *tasks;
    double *best;
    int i, nt = 0, lo, hi, mid;

    if (s->n == 0)
        return;
    tasks = kt_xmalloc((size_t)s->n * sizeof(*tasks));
    memcpy(tasks, s->task, (size_t)s->n * sizeof(*tasks));
    qsort(tasks, (size_t)s->n, sizeof(*tasks), cmp_i64);
    for (i = 0; i < s->n; i++)
        if (nt == 0 || tasks[nt - 1] != tasks[i])
            tasks[nt++] = tasks[i];
    best = kt_xmalloc((size_t)nt * sizeof(*best));
    for (i = 0; i < nt; i++)
        best[i] = INFINITY;
    for (i = 0; i < s->n * 2; i++) {
        int p = i % s->n;
        lo = 0;
        hi = nt - 1;
        while (lo < hi) {
            mid = (lo + hi) / 2;
            if (tasks[mid] < s->task[p])
                lo = mid + 1;
            else
                hi = mid;
        }
        if (i < s->n) {
            if (s->cost[p] < best[lo])
                best[lo] = s->cost[p];
        } else {
            s->label[p] = (float)(best[lo] / s->cost[p]);
            s->weight[p] = s->label[p] > wfloor ? s->label[p] : wfloor;
        }
    }
    free(best);
    free(tasks);
}

/* ---- the window of a bounded training set ------------------------------ */

struct keep_ref {
    int64_t task;
    double cost;
    int i;
    int rank; /* among its task's successful programs, fastest = 0 */
};

static int
cmp_task_cost(const void *a, const void *b)
{
    const struct keep_ref *x = a, *y = b;

    if (x->task != y->task)
        return x->task < y->task ? -1 : 1;
    if (x->cost != y->cost)
        return x->cost < y->cost ? -1 : 1;
    return x->i - y->i;
}

static int
cmp_rank(const void *a, const void *b)
{
    const struct keep_ref *x = a, *y = b;

    if (x->rank != y->rank)
        return x->rank - y->rank;
    return x->i - y->i;
}

int
kt_train_keep(const int64_t *task, const double *cost, int n, int recent,
              int per_task, unsigned char *keep)
{
    struct keep_ref *v = kt_xmalloc(sizeof(*v) * (size_t)(n > 0 ? n : 1));
    int i, nv = 0, nbest = 0, kept = 0;

    for (i = 0; i < n; i++) {
        keep[i] = i >= n - recent;
        if (cost[i] > 0 && isfinite(cost[i]) && cost[i] < FAILED_COST) {
            v[nv].task = task[i];
            v[nv].cost = cost[i];
            v[nv++].i = i;
        }
    }
    qsort(v, (size_t)nv, sizeof(*v), cmp_task_cost);
    for (i = 0; i < nv; i++)
        v[i].rank = i > 0 && v[i - 1].task == v[i].task ? v[i - 1].rank + 1 : 0;
    for (i = 0; i < nv; i++)
        if (v[i].rank < per_task)
            v[nbest++] = v[i];
    qsort(v, (size_t)nbest, sizeof(*v), cmp_rank);
    for (i = 0; i < nbest && i < recent; i++)
        keep[v[i].i] = 1;
    for (i = 0; i < n; i++)
        kept += keep[i];
    free(v);
    return kept;
}
