/* xgb.c - the XGBoost cost model through the C API: the objectives of
 * objective.c as custom gradients (XGBoosterBoostOneIter), early stopping
 * on the training loss, the score line of a pairwise model, batched
 * in-place prediction, and save/load to memory.  Every
 * booster access holds the model's mutex; training builds its booster
 * without the lock and swaps it in at the end. */
#include "costmodel/cm_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xgboost/c_api.h>

#define VERSION_ATTR "kt_feature_version"
#define KT_STR_(x) #x
#define KT_STR(x) KT_STR_(x)

struct kt_xgb_model {
    struct kt_xgb_params p;
    char tree_method[16];
    pthread_mutex_t mu;
    BoosterHandle bst;    /* NULL until trained or loaded */
    int ntrain;           /* trainings since the last one from scratch */
    double scale, offset; /* score = scale x pack sum + offset */
};

#define SCALE_ATTR "kt_score_scale"
#define OFFSET_ATTR "kt_score_offset"

static int
xgb_err(char *err, size_t errlen, const char *what)
{
    return kt_seterr(err, errlen, KT_EIO, "costmodel: xgboost %s: %s", what,
                     XGBGetLastError());
}

void
kt_xgb_params_default(struct kt_xgb_params *p)
{
    p->max_depth = 4;
    p->gamma = 0.001;
    p->min_child_weight = 0;
    p->eta = 0.2;
    p->nthread = 1;
    p->seed = 43;
    p->max_rounds = 10000;
    p->early_stop = 10;
    p->early_stop_delta = 0.002;
    p->eval_every = 2;
    p->tree_method = "hist";
    p->retrain_every = 1;
    p->warm_rounds = 50;
    p->objective = KT_XGB_OBJ_PAIRWISE;
    p->rank_pairs = 16;
    p->predict_nthread = 1;
}

void
kt_xgb_params_ansor(struct kt_xgb_params *p)
{
    kt_xgb_params_default(p);
    p->max_depth = 10;
    p->early_stop = 50;
    p->early_stop_delta = 0;
    p->objective = KT_XGB_OBJ_PACKSUM;
}

struct kt_xgb_model *
kt_xgb_new(const struct kt_xgb_params *params)
{
    struct kt_xgb_model *m = kt_xcalloc(1, sizeof(*m));

    if (params != NULL)
        m->p = *params;
    else
        kt_xgb_params_default(&m->p);
    snprintf(m->tree_method, sizeof(m->tree_method), "%s",
             m->p.tree_method != NULL ? m->p.tree_method : "hist");
    m->p.tree_method = m->tree_method;
    if (m->p.eval_every < 1)
        m->p.eval_every = 1;
    if (m->p.nthread < 1)
        m->p.nthread = 1;
    if (m->p.predict_nthread < 1)
        m->p.predict_nthread = 1;
    m->scale = 1;
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

void
kt_xgb_free(struct kt_xgb_model *m)
{
    if (m == NULL)
        return;
    if (m->bst != NULL)
        XGBoosterFree(m->bst);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

int
kt_xgb_trained(struct kt_xgb_model *m)
{
    int t;

    pthread_mutex_lock(&m->mu);
    t = m->bst != NULL;
    pthread_mutex_unlock(&m->mu);
    return t;
}

static int
set_params(const struct kt_xgb_params *p, BoosterHandle h, char *err,
           size_t errlen)
{
    char v[8][32];
    const char *k[8] = {"max_depth", "gamma", "min_child_weight", "eta",
                        "nthread",   "seed",  "tree_method",      "base_score"};
    int i;

    snprintf(v[0], sizeof(v[0]), "%d", p->max_depth);
    snprintf(v[1], sizeof(v[1]), "%.17g", p->gamma);
    snprintf(v[2], sizeof(v[2]), "%.17g", p->min_child_weight);
    snprintf(v[3], sizeof(v[3]), "%.17g", p->eta);
    snprintf(v[4], sizeof(v[4]), "%d", p->nthread);
    snprintf(v[5], sizeof(v[5]), "%d", p->seed);
    snprintf(v[6], sizeof(v[6]), "%s", p->tree_method);
    /* Pack-sum adds base_score once per row; 0 keeps it out of scores. */
    snprintf(v[7], sizeof(v[7]), "0");
    if (XGBoosterSetParam(h, "verbosity", "0") != 0 ||
        XGBoosterSetParam(h, "objective", "reg:squarederror") != 0 ||
        XGBoosterSetParam(h, "disable_default_eval_metric", "1") != 0)
        return xgb_err(err, errlen, "set parameters");
    for (i = 0; i < 8; i++)
        if (XGBoosterSetParam(h, k[i], v[i]) != 0)
            return xgb_err(err, errlen, k[i]);
    return 0;
}

/* The training data of one kt_xgb_train call. */
struct train_data {
    DMatrixHandle dm;
    const int *pack;
    const float *label, *weight;
    int nrows, nprog;
    struct kt__groups groups; /* programs by task (pairwise objective) */
};

/* Scratch of the objective: program scores, gradients and the sampler. */
struct objective {
    double *score, *pgrad, *phess;
    struct kt_rng rng;
};

static double
eval_loss(const struct kt_xgb_params *p, const struct train_data *d,
          const float *pred, struct objective *o)
{
    int r;

    if (p->objective != KT_XGB_OBJ_PAIRWISE)
        return kt__prmse(pred, d->pack, d->nrows, d->label, d->nprog);
    memset(o->score, 0, sizeof(double) * (size_t)d->nprog);
    for (r = 0; r < d->nrows; r++)
        o->score[d->pack[r]] += pred[r];
    return kt__pairwise_error(&d->groups, o->score, d->label, p->rank_pairs,
                              (uint64_t)p->seed);
}

static void
gradients(const struct kt_xgb_params *p, const struct train_data *d,
          const float *pred, struct objective *o, float *grad, float *hess)
{
    int r;

    if (p->objective != KT_XGB_OBJ_PAIRWISE) {
        kt_xgb_packsum_grad(pred, d->pack, d->nrows, d->label, d->weight,
                            d->nprog, grad, hess);
        return;
    }
    memset(o->score, 0, sizeof(double) * (size_t)d->nprog);
    for (r = 0; r < d->nrows; r++)
        o->score[d->pack[r]] += pred[r];
    kt__pairwise_grad(&d->groups, o->score, d->label, p->rank_pairs, &o->rng,
                      o->pgrad, o->phess);
    for (r = 0; r < d->nrows; r++) {
        grad[r] = (float)o->pgrad[d->pack[r]];
        hess[r] = (float)o->phess[d->pack[r]];
    }
}

/* The boosting loop on a fresh booster, or on a copy of the model in
 * from[0..fromlen) when from is not NULL (then the loaded model's loss is
 * the first to beat, and at most p->warm_rounds rounds are added); *out
 * gets it on success. */
static int
boost(const struct kt_xgb_params *p, const struct train_data *d,
      const void *from, size_t fromlen, BoosterHandle *out,
      struct kt_xgb_train_stats *st, char *err, size_t errlen)
{
    BoosterHandle h = NULL, sl = NULL;
    DMatrixHandle dm = d->dm;
    int nrows = d->nrows;
    struct objective o;
    float *grad = kt_xmalloc((size_t)nrows * sizeof(float));
    float *hess = kt_xmalloc((size_t)nrows * sizeof(float));
    const float *pred;
    bst_ulong len;
    double e, best = INFINITY;
    int it, best_it = 0, base = 0, rc = 0;
    int max_rounds = from != NULL ? p->warm_rounds : p->max_rounds;

    o.score = kt_xmalloc(sizeof(double) * (size_t)(d->nprog + 1));
    o.pgrad = kt_xmalloc(sizeof(double) * (size_t)(d->nprog + 1));
    o.phess = kt_xmalloc(sizeof(double) * (size_t)(d->nprog + 1));
    kt_rng_seed(&o.rng, (uint64_t)p->seed + 1);
    if (XGBoosterCreate(&dm, 1, &h) != 0) {
        rc = xgb_err(err, errlen, "create booster");
        goto out;
    }
    if (from != NULL &&
        (XGBoosterLoadModelFromBuffer(h, from, (bst_ulong)fromlen) != 0 ||
         XGBoosterBoostedRounds(h, &base) != 0)) {
        rc = xgb_err(err, errlen, "continue from the previous model");
        goto out;
    }
    rc = set_params(p, h, err, errlen);
    if (rc < 0)
        goto out;
    for (it = 0; it < max_rounds; it++) {
        if (XGBoosterPredict(h, dm, 0, 0, 1, &len, &pred) != 0) {
            rc = xgb_err(err, errlen, "predict");
            goto out;
        }
        if (len != (bst_ulong)nrows) {
            rc = kt_seterr(err, errlen, KT_EIO,
                           "costmodel: xgboost "
                           "predicted %llu rows for %d",
                           (unsigned long long)len, nrows);
            goto out;
        }
        if ((it > 0 || from != NULL) && it % p->eval_every == 0) {
            e = eval_loss(p, d, pred, &o);
            if (e < best - p->early_stop_delta) {
                best = e;
                best_it = it;
            } else if (it - best_it >= p->early_stop) {
                break;
            }
        }
        gradients(p, d, pred, &o, grad, hess);
        if (XGBoosterBoostOneIter(h, dm, grad, hess, (bst_ulong)nrows) != 0) {
            rc = xgb_err(err, errlen, "boost");
            goto out;
        }
    }
    st->rounds = it;
    st->best_round = best_it;
    st->best_prmse = best;
    /* Keep the trees up to the best evaluation: the rounds after it only
     * cost prediction time. */
    if ((best_it > 0 || from != NULL) && best_it < it) {
        if (XGBoosterSlice(h, 0, base + best_it, 1, &sl) != 0) {
            rc = xgb_err(err, errlen, "slice");
            goto out;
        }
        XGBoosterFree(h);
        h = sl;
        rc = set_params(p, h, err, errlen);
        if (rc < 0)
            goto out;
    }
    if (XGBoosterSetAttr(h, VERSION_ATTR, KT_STR(KT_FEATURE_VERSION)) != 0) {
        rc = xgb_err(err, errlen, "set attribute");
        goto out;
    }
    *out = h;
    h = NULL;
out:
    if (h != NULL)
        XGBoosterFree(h);
    free(grad);
    free(hess);
    free(o.score);
    free(o.pgrad);
    free(o.phess);
    return rc;
}

/* The score line of h (SCALE_ATTR, OFFSET_ATTR; 1 and 0 without them). */
static int
score_line(BoosterHandle h, double *scale, double *offset, char *err,
           size_t errlen)
{
    const char *v;
    int ok = 0;

    *scale = 1;
    *offset = 0;
    if (XGBoosterGetAttr(h, SCALE_ATTR, &v, &ok) != 0)
        return xgb_err(err, errlen, "get attribute");
    if (ok)
        *scale = strtod(v, NULL);
    if (XGBoosterGetAttr(h, OFFSET_ATTR, &v, &ok) != 0)
        return xgb_err(err, errlen, "get attribute");
    if (ok)
        *offset = strtod(v, NULL);
    if (!(*scale > 0) || !isfinite(*scale) || !isfinite(*offset))
        return kt_seterr(err, errlen, KT_EINVAL,
                         "costmodel: model has score scale %g, offset %g",
                         *scale, *offset);
    return 0;
}

/* Sets the model's prediction threads on h and makes h its booster (h is
 * freed on error). */
static int
swap_in(struct kt_xgb_model *m, BoosterHandle h, char *err, size_t errlen)
{
    BoosterHandle old;
    double scale, offset;
    char v[16];
    int rc;

    snprintf(v, sizeof(v), "%d", m->p.predict_nthread);
    rc = score_line(h, &scale, &offset, err, errlen);
    if (rc == 0 && XGBoosterSetParam(h, "nthread", v) != 0)
        rc = xgb_err(err, errlen, "nthread");
    if (rc < 0) {
        XGBoosterFree(h);
        return rc;
    }
    pthread_mutex_lock(&m->mu);
    old = m->bst;
    m->bst = h;
    m->scale = scale;
    m->offset = offset;
    pthread_mutex_unlock(&m->mu);
    if (old != NULL)
        XGBoosterFree(old);
    return 0;
}

/* A pairwise model's scores only order programs; the search also weighs
 * them (its roulette selection expects Ansor's label scale).  The least
 * squares line from the pack sums of the training programs to their
 * labels, stored as booster attributes, maps them there without changing
 * their order. */
static int
calibrate(BoosterHandle h, const struct train_data *d, char *err, size_t errlen)
{
    double *sum = kt_xcalloc((size_t)d->nprog + 1, sizeof(double));
    double ms = 0, ml = 0, sxy = 0, sxx = 0, scale = 1, offset;
    const float *pred;
    bst_ulong len;
    char v[32];
    int r, i, rc = 0;

    if (XGBoosterPredict(h, d->dm, 0, 0, 0, &len, &pred) != 0) {
        free(sum);
        return xgb_err(err, errlen, "predict");
    }
    for (r = 0; r < d->nrows && r < (int)len; r++)
        sum[d->pack[r]] += pred[r];
    for (i = 0; i < d->nprog; i++) {
        ms += sum[i] / d->nprog;
        ml += (double)d->label[i] / d->nprog;
    }
    for (i = 0; i < d->nprog; i++) {
        sxy += (sum[i] - ms) * ((double)d->label[i] - ml);
        sxx += (sum[i] - ms) * (sum[i] - ms);
    }
    if (sxx > 0 && sxy > 0)
        scale = sxy / sxx;
    offset = ml - scale * ms;
    snprintf(v, sizeof(v), "%.17g", scale);
    if (XGBoosterSetAttr(h, SCALE_ATTR, v) != 0)
        rc = xgb_err(err, errlen, "set attribute");
    snprintf(v, sizeof(v), "%.17g", offset);
    if (rc == 0 && XGBoosterSetAttr(h, OFFSET_ATTR, v) != 0)
        rc = xgb_err(err, errlen, "set attribute");
    free(sum);
    return rc;
}

int
kt_xgb_train(struct kt_xgb_model *m, const struct kt_train_set *set,
             struct kt_xgb_train_stats *stats, char *err, size_t errlen)
{
    struct kt_xgb_train_stats st;
    DMatrixHandle dm = NULL;
    BoosterHandle h = NULL;
    float *x = NULL, *label = NULL, *weight = NULL;
    int64_t *task = NULL;
    int *pack = NULL;
    int i, nrows = 0, nprog = 0, r = 0, rc;

    memset(&st, 0, sizeof(st));
    for (i = 0; i < set->n; i++)
        if (set->nrows[i] > 0) {
            nrows += set->nrows[i];
            nprog++;
        }
    if (nrows == 0)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "costmodel: training set has no feature rows");
    x = kt_xmalloc((size_t)nrows * KT_FEATURE_LEN * sizeof(float));
    pack = kt_xmalloc((size_t)nrows * sizeof(int));
    label = kt_xmalloc((size_t)nprog * sizeof(float));
    weight = kt_xmalloc((size_t)nprog * sizeof(float));
    task = kt_xmalloc((size_t)nprog * sizeof(int64_t));
    nprog = 0;
    for (i = 0; i < set->n; i++) {
        int k;
        if (set->nrows[i] <= 0)
            continue;
        memcpy(x + (size_t)r * KT_FEATURE_LEN, set->rows[i],
               (size_t)set->nrows[i] * KT_FEATURE_LEN * sizeof(float));
        for (k = 0; k < set->nrows[i]; k++)
            pack[r++] = nprog;
        label[nprog] = set->label[i];
        weight[nprog] = set->weight[i];
        task[nprog] = set->task[i];
        nprog++;
    }
    if (XGDMatrixCreateFromMat_omp(x, (bst_ulong)nrows, KT_FEATURE_LEN, NAN,
                                   &dm, m->p.nthread) != 0) {
        rc = xgb_err(err, errlen, "create matrix");
        goto out;
    }
    {
        struct train_data d = {dm, pack, label, weight, nrows, nprog, {0}};
        void *prev = NULL;
        size_t prevlen = 0;
        char ign[8];
        if (m->p.retrain_every > 1 && m->ntrain % m->p.retrain_every != 0)
            (void)kt_xgb_save_buf(m, &prev, &prevlen, ign, sizeof(ign));
        kt__groups_init(&d.groups, task, nprog);
        rc = boost(&m->p, &d, prev, prevlen, &h, &st, err, errlen);
        if (rc == 0 && m->p.objective == KT_XGB_OBJ_PAIRWISE) {
            rc = calibrate(h, &d, err, errlen);
            if (rc < 0)
                XGBoosterFree(h);
        }
        st.continued = prev != NULL;
        kt__groups_free(&d.groups);
        free(prev);
    }
    if (rc < 0)
        goto out;
    st.nrows = nrows;
    rc = swap_in(m, h, err, errlen);
    if (rc < 0)
        goto out;
    pthread_mutex_lock(&m->mu);
    m->ntrain = st.continued ? m->ntrain + 1 : 1;
    pthread_mutex_unlock(&m->mu);
    if (stats != NULL)
        *stats = st;
out:
    if (dm != NULL)
        XGDMatrixFree(dm);
    free(x);
    free(pack);
    free(label);
    free(weight);
    free(task);
    return rc;
}

int
kt_xgb_predict(struct kt_xgb_model *m, const struct kt_prog_rows *progs, int n,
               float *scores, char *err, size_t errlen)
{
    char arr[160];
    const char *cfg = "{\"type\": 0, \"training\": false, "
                      "\"iteration_begin\": 0, \"iteration_end\": 0, "
                      "\"strict_shape\": false, \"missing\": NaN, "
                      "\"cache_id\": 0}";
    const bst_ulong *shape;
    const float *pred;
    bst_ulong dim;
    float *x;
    size_t nrows = 0, r = 0;
    int i, k, rc = 0;

    for (i = 0; i < n; i++)
        if (progs[i].nrows > 0)
            nrows += (size_t)progs[i].nrows;
    if (nrows == 0) {
        for (i = 0; i < n; i++)
            scores[i] = -INFINITY;
        return kt_xgb_trained(m) ? 0
                                 : kt_seterr(err, errlen, KT_EINVAL,
                                             "costmodel: model not trained");
    }
    x = kt_xmalloc(nrows * KT_FEATURE_LEN * sizeof(float));
    for (i = 0; i < n; i++)
        if (progs[i].nrows > 0) {
            memcpy(x + r * KT_FEATURE_LEN, progs[i].rows,
                   (size_t)progs[i].nrows * KT_FEATURE_LEN * sizeof(float));
            r += (size_t)progs[i].nrows;
        }
    snprintf(arr, sizeof(arr),
             "{\"data\": [%llu, true], \"shape\": [%zu, %d], "
             "\"typestr\": \"<f4\", \"version\": 3}",
             (unsigned long long)(uintptr_t)x, nrows, KT_FEATURE_LEN);
    pthread_mutex_lock(&m->mu);
    if (m->bst == NULL) {
        rc = kt_seterr(err, errlen, KT_EINVAL, "costmodel: model not trained");
    } else if (XGBoosterPredictFromDense(m->bst, arr, cfg, NULL, &shape, &dim,
                                         &pred) != 0) {
        rc = xgb_err(err, errlen, "predict");
    } else {
        r = 0;
        for (i = 0; i < n; i++) {
            double s = 0;
            if (progs[i].nrows <= 0) {
                scores[i] = -INFINITY;
                continue;
            }
            for (k = 0; k < progs[i].nrows; k++)
                s += pred[r++];
            scores[i] = (float)(m->scale * s + m->offset);
        }
    }
    pthread_mutex_unlock(&m->mu);
    free(x);
    return rc;
}

int
kt_xgb_save_buf(struct kt_xgb_model *m, void **buf, size_t *len, char *err,
                size_t errlen)
{
    const char *out;
    bst_ulong n;
    int rc = 0;

    *buf = NULL;
    *len = 0;
    pthread_mutex_lock(&m->mu);
    if (m->bst == NULL) {
        rc = kt_seterr(err, errlen, KT_EINVAL, "costmodel: model not trained");
    } else if (XGBoosterSaveModelToBuffer(m->bst, "{\"format\": \"ubj\"}", &n,
                                          &out) != 0) {
        rc = xgb_err(err, errlen, "save");
    } else {
        *buf = kt_xmalloc((size_t)n);
        memcpy(*buf, out, (size_t)n);
        *len = (size_t)n;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int
kt_xgb_load_buf(struct kt_xgb_model *m, const void *buf, size_t len, char *err,
                size_t errlen)
{
    BoosterHandle h = NULL;
    const char *ver;
    int ok = 0, rc;

    if (XGBoosterCreate(NULL, 0, &h) != 0)
        return xgb_err(err, errlen, "create booster");
    if (XGBoosterLoadModelFromBuffer(h, buf, (bst_ulong)len) != 0) {
        rc = xgb_err(err, errlen, "load");
        goto fail;
    }
    if (XGBoosterGetAttr(h, VERSION_ATTR, &ver, &ok) != 0) {
        rc = xgb_err(err, errlen, "get attribute");
        goto fail;
    }
    if (!ok || strcmp(ver, KT_STR(KT_FEATURE_VERSION)) != 0) {
        rc = kt_seterr(err, errlen, KT_EINVAL,
                       "costmodel: model has feature version %s, this "
                       "build extracts version %d",
                       ok ? ver : "(none)", KT_FEATURE_VERSION);
        goto fail;
    }
    rc = set_params(&m->p, h, err, errlen);
    if (rc < 0)
        goto fail;
    return swap_in(m, h, err, errlen);
fail:
    XGBoosterFree(h);
    return rc;
}
