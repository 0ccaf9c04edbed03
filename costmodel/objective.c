/* objective.c - the training objectives of the XGBoost model on pack-sum
 * program scores (the sum of a program's row predictions): Ansor's
 * weighted squared error and its p-rmse, and the pairwise ranking
 * objective, a logistic loss on pairs of programs of the same task whose
 * partners are sampled (rank_pairs per program and round) so a round
 * stays linear in the programs. */
#include "costmodel/cm_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct group_ref {
    int64_t task;
    int prog;
};

static int
cmp_group_ref(const void *a, const void *b)
{
    const struct group_ref *x = a, *y = b;

    if (x->task != y->task)
        return x->task < y->task ? -1 : 1;
    return x->prog - y->prog;
}

void
kt__groups_init(struct kt__groups *g, const int64_t *task, int nprog)
{
    struct group_ref *v = kt_xmalloc(sizeof(*v) * (size_t)(nprog + 1));
    int i, start = 0;

    g->nprog = nprog;
    g->member = kt_xmalloc(sizeof(int) * (size_t)(nprog + 1));
    g->start = kt_xmalloc(sizeof(int) * (size_t)(nprog + 1));
    g->size = kt_xmalloc(sizeof(int) * (size_t)(nprog + 1));
    for (i = 0; i < nprog; i++) {
        v[i].task = task[i];
        v[i].prog = i;
    }
    qsort(v, (size_t)nprog, sizeof(*v), cmp_group_ref);
    for (i = 0; i <= nprog; i++) {
        if (i > 0 && (i == nprog || v[i].task != v[i - 1].task)) {
            int k;
            for (k = start; k < i; k++) {
                g->start[v[k].prog] = start;
                g->size[v[k].prog] = i - start;
            }
            start = i;
        }
        if (i < nprog)
            g->member[i] = v[i].prog;
    }
    free(v);
}

void
kt__groups_free(struct kt__groups *g)
{
    free(g->member);
    free(g->start);
    free(g->size);
    memset(g, 0, sizeof(*g));
}

/* Calls fn on up to npairs sampled pairs (hi, lo) per program, hi the
 * program with the higher label. */
typedef void (*pair_fn)(int hi, int lo, void *arg);

static void
each_pair(const struct kt__groups *g, const float *label, int npairs,
          struct kt_rng *r, pair_fn fn, void *arg)
{
    int i, k;

    for (i = 0; i < g->nprog; i++) {
        int m = g->size[i];
        if (m < 2)
            continue;
        for (k = 0; k < npairs; k++) {
            int j = g->member[g->start[i] + (int)kt_rng_below(r, (uint64_t)m)];
            if (label[i] == label[j])
                continue;
            if (label[i] > label[j])
                fn(i, j, arg);
            else
                fn(j, i, arg);
        }
    }
}

struct grad_arg {
    const double *score;
    double *grad, *hess;
};

static void
add_pair_grad(int hi, int lo, void *arg)
{
    struct grad_arg *a = arg;
    double rho = 1.0 / (1.0 + exp(a->score[hi] - a->score[lo]));

    a->grad[hi] -= rho;
    a->grad[lo] += rho;
    a->hess[hi] += rho * (1 - rho);
    a->hess[lo] += rho * (1 - rho);
}

void
kt__pairwise_grad(const struct kt__groups *g, const double *score,
                  const float *label, int npairs, struct kt_rng *r,
                  double *grad, double *hess)
{
    struct grad_arg a = {score, grad, hess};

    memset(grad, 0, sizeof(double) * (size_t)g->nprog);
    memset(hess, 0, sizeof(double) * (size_t)g->nprog);
    each_pair(g, label, npairs, r, add_pair_grad, &a);
}

struct error_arg {
    const double *score;
    long wrong, n;
};

static void
add_pair_error(int hi, int lo, void *arg)
{
    struct error_arg *a = arg;

    a->wrong += a->score[hi] <= a->score[lo];
    a->n++;
}

double
kt__pairwise_error(const struct kt__groups *g, const double *score,
                   const float *label, int npairs, uint64_t seed)
{
    struct error_arg a = {score, 0, 0};
    struct kt_rng r;

    kt_rng_seed(&r, seed);
    each_pair(g, label, npairs, &r, add_pair_error, &a);
    return a.n > 0 ? (double)a.wrong / (double)a.n : 0;
}

/* ---- Ansor's pack-sum squared error ------------------------------------ */

void
kt_xgb_packsum_grad(const float *pred, const int *pack, int nrows,
                    const float *label, const float *weight, int nprog,
                    float *grad, float *hess)
{
    double *sum = kt_xcalloc((size_t)nprog + 1, sizeof(double));
    int r;

    for (r = 0; r < nrows; r++)
        sum[pack[r]] += pred[r];
    for (r = 0; r < nrows; r++) {
        grad[r] = (float)((sum[pack[r]] - label[pack[r]]) * weight[pack[r]]);
        hess[r] = weight[pack[r]];
    }
    free(sum);
}

/* sqrt(mean over rows of (pack score - label)^2), Ansor's p-rmse. */
double
kt__prmse(const float *pred, const int *pack, int nrows, const float *label,
          int nprog)
{
    double *sum = kt_xcalloc((size_t)nprog + 1, sizeof(double)), e = 0, d;
    int r;

    for (r = 0; r < nrows; r++)
        sum[pack[r]] += pred[r];
    for (r = 0; r < nrows; r++) {
        d = sum[pack[r]] - label[pack[r]];
        e += d * d;
    }
    free(sum);
    return sqrt(e / (nrows > 0 ? nrows : 1));
}
