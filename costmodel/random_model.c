/* random_model.c - uniform random scores: the baseline Ansor uses before
 * its XGBoost model has enough data, and a control for experiments. */
#include "costmodel/costmodel.h"

#include <math.h>
#include <stdlib.h>

struct kt_random_model {
    struct kt_rng rng;
};

struct kt_random_model *
kt_random_model_new(uint64_t seed)
{
    struct kt_random_model *m = kt_xcalloc(1, sizeof(*m));

    kt_rng_seed(&m->rng, seed);
    return m;
}

void
kt_random_model_free(struct kt_random_model *m)
{
    free(m);
}

void
kt_random_model_predict(struct kt_random_model *m,
                        const struct kt_prog_rows *progs, int n, float *scores)
{
    int i;

    for (i = 0; i < n; i++)
        scores[i] = progs[i].nrows > 0 ? (float)kt_rng_unit(&m->rng)
                                       : -INFINITY;
}
