/* costmodel.h - the cost model: program features extracted from a lowered
 * loop tree, the XGBoost "pack-sum" model and a random model for
 * baselines.
 *
 * Data flow:  kt_looptree --kt_features_extract--> rows (one per store)
 *             rows of many programs + labels --kt_xgb_train--> booster
 *             rows of candidates --kt_xgb_predict--> one score per program
 *
 * Feature extraction is a pure function of its inputs:
 * deterministic and safe to call from any thread.  A struct kt_xgb_model
 * serializes its own booster accesses with a mutex, so predictions and a
 * retrain may run on different pool threads.  docs/features.md documents
 * every feature. */
#ifndef KT_COSTMODEL_H
#define KT_COSTMODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "ir/ir.h"

/* ---- Features ------------------------------------------------------------
 * One row of KT_FEATURE_LEN floats per store node of the loop tree.  Any
 * change of meaning or layout bumps KT_FEATURE_VERSION (models trained on
 * another version are refused by kt_xgb_load). */
#define KT_FEATURE_VERSION 4

/* Group 2 has KT_F_NBUF blocks of KT_F_BUF_LEN (enum kt_feature_buf). */
#define KT_F_NBUF 5
#define KT_F_BUF_LEN 21

/* Group 1: computation.  Op counts are per evaluation of the stored value
 * times the product of the enclosing loop extents. */
enum kt_feature_index {
    KT_F_FLOAT_MAD = 0, /* a*b+c patterns (and += a*b) */
    KT_F_FLOAT_ADDSUB,
    KT_F_FLOAT_MUL,
    KT_F_FLOAT_DIV,
    KT_F_FLOAT_CMP,   /* max, min, relu, max=/min= reductions */
    KT_F_FLOAT_MATH,  /* exp, log, sqrt, tanh, sigmoid */
    KT_F_FLOAT_OTHER, /* neg, abs */
    KT_F_SELECT,      /* guarded (padding) loads */
    KT_F_VEC_NUM,     /* then prod, len, 8 position one-hots */
    KT_F_UNROLL_NUM = KT_F_VEC_NUM + 11,
    KT_F_PARALLEL_NUM = KT_F_UNROLL_NUM + 11,
    /* Group 2: per-buffer access features, KT_F_NBUF blocks. */
    KT_F_BUF0 = KT_F_PARALLEL_NUM + 11,
    /* Group 3: arithmetic-intensity curve, 10 samples. */
    KT_F_AI_CURVE = KT_F_BUF0 + KT_F_NBUF * KT_F_BUF_LEN,
    /* Group 4: allocation of the stored buffer. */
    KT_F_ALLOC_SIZE = KT_F_AI_CURVE + 10,
    KT_F_ALLOC_PROD,
    KT_F_ALLOC_OUTER_PROD,
    KT_F_ALLOC_INNER_PROD,
    /* Group 5: outer scope. */
    KT_F_OUTER_PROD,
    KT_F_NUM_LOOPS,
    KT_F_AUTO_UNROLL,
    /* Group 6: store kind. */
    KT_F_STORE_REDUCE, /* 1 for +=, max=, min= */
    KT_F_STORE_INIT,   /* 1 for a plain store of a constant */
    KT_F_INNER_EXTENT, /* extent of the innermost enclosing loop */
    KT_F_REDUCE_PROD,  /* product of enclosing reduction loop extents */
    /* Group 7: how the innermost vectorized loop reads and writes. */
    KT_F_VEC_GATHER,      /* loads gathered lane by lane, x outer_prod */
    KT_F_VEC_SHUFFLE,     /* stride 2..4 loads (vector loads + shuffles) */
    KT_F_VEC_LANE_REDUCE, /* 1: a reduction into one element (lane accs) */
    /* Group 8: layout rewrite. */
    KT_F_PREPACKED,       /* 1 if the store reads a prepacked buffer */
    KT_F_PREPACKED_BYTES, /* bytes read from prepacked buffers */
    /* Group 9: the innermost serial loop (neither vectorized nor unrolled:
     * the innermost loop left in the generated C). */
    KT_F_SERIAL_BODY, /* iterations of the loops inside it */
    KT_FEATURE_LEN
};

/* Offsets inside an annotation block (vec, unroll, parallel). */
enum kt_feature_ann {
    KT_FA_NUM = 0,
    KT_FA_PROD,
    KT_FA_LEN,
    KT_FA_POS_NONE,
    KT_FA_POS_INNER_SPATIAL,
    KT_FA_POS_MIDDLE_SPATIAL,
    KT_FA_POS_OUTER_SPATIAL,
    KT_FA_POS_INNER_REDUCE,
    KT_FA_POS_MIDDLE_REDUCE,
    KT_FA_POS_OUTER_REDUCE,
    KT_FA_POS_MIXED
};

/* Offsets inside one buffer block; block b starts at KT_F_BUF0 + b *
 * KT_F_BUF_LEN.  Buffers are sorted by (lines, bytes) descending. */
enum kt_feature_buf {
    KT_FB_READ = 0,
    KT_FB_WRITE,
    KT_FB_READWRITE,
    KT_FB_BYTES,
    KT_FB_UNIQUE_BYTES,
    KT_FB_LINES,
    KT_FB_UNIQUE_LINES,
    KT_FB_REUSE_LOOP,
    KT_FB_REUSE_SERIAL,
    KT_FB_REUSE_NONE,
    KT_FB_REUSE_DIS_ITER,
    KT_FB_REUSE_DIS_BYTES,
    KT_FB_REUSE_CT,
    KT_FB_BYTES_D_REUSE,
    KT_FB_UNIQUE_BYTES_D_REUSE,
    KT_FB_LINES_D_REUSE,
    KT_FB_UNIQUE_LINES_D_REUSE,
    KT_FB_STRIDE,
    KT_FB_IS_LOCAL,
    KT_FB_SERIAL_STRIDE, /* stride along the innermost serial loop */
    KT_FB_THREAD_BYTES   /* bytes one thread of two touches (static) */
};

/* Bytes of one element and of one cache line assumed by the features. */
#define KT_F_ELEM_BYTES 4
#define KT_F_CACHE_LINE 64

/* Numeric entries are stored as log2(1 + x) (x >= 0); one-hot entries are 0
 * or 1.  Returns 1 if feature i is a one-hot (unscaled) entry. */
int kt_feature_is_onehot(int i);
/* The scaling applied to numeric entries: log2(1 + |x|) with x's sign. */
float kt_feature_scale(double x);
/* Writes the name of feature i (e.g. "B2.reuse_dis_bytes") into buf. */
void kt_feature_name(int i, char *buf, size_t len);

/* Extracts one row per store node of lt, in tree order.  *rows receives a
 * malloc'd array of *nrows x KT_FEATURE_LEN floats (caller frees with
 * free()); a tree without stores gives *nrows = 0 and *rows = NULL.  A
 * malformed tree (buffer or variable out of range, index rank that does
 * not match the buffer, nesting deeper than 64 loops) returns KT_EINVAL
 * with the stage and buffer named in err.  Borrows lt; thread-safe. */
int kt_features_extract(const struct kt_looptree *lt, float **rows, int *nrows,
                        char *err, size_t errlen);

/* ---- Programs and training sets ----------------------------------------- */
/* The feature rows of one program (borrowed by the functions below). */
struct kt_prog_rows {
    const float *rows; /* nrows x KT_FEATURE_LEN */
    int nrows;
};

/* Training data: for each program its rows, task, label and weight.
 * kt_train_set_add copies the rows; labels and weights may be written
 * directly, or computed from costs by kt_train_set_label. */
struct kt_train_set {
    int n, cap;
    float **rows; /* owned copies */
    int *nrows;
    int64_t *task;
    double *cost; /* seconds; <= 0 or non-finite = failed */
    float *label;
    float *weight;
};

void kt_train_set_init(struct kt_train_set *s);
void kt_train_set_free(struct kt_train_set *s); /* NULL is a no-op */
/* Appends a program (copies rows).  cost <= 0 marks a failed program. */
void kt_train_set_add(struct kt_train_set *s, const float *rows, int nrows,
                      int64_t task, double cost);
/* Ansor's labels: per task, label = min cost / cost (failed programs count
 * with cost 1e10 so their label is ~0) and weight = max(label, wfloor).
 * wfloor = 0 is Ansor's exact choice. */
void kt_train_set_label(struct kt_train_set *s, float wfloor);

/* The window a bounded training set keeps of n programs (arrival order;
 * task and cost as kt_train_set_add takes them): the last `recent` ones,
 * where the search is now, and each task's `per_task` fastest successful
 * ones, which fix its labels (each is relative to the task's best) and
 * mark the fast region.  The fastest of every task are taken first (then
 * the second fastest, ...), at most `recent` of them, so at most
 * 2 x recent are kept.  Sets keep[i] to 1 or 0; returns the count kept. */
int kt_train_keep(const int64_t *task, const double *cost, int n, int recent,
                  int per_task, unsigned char *keep);

/* ---- XGBoost model ------------------------------------------------------ */
struct kt_xgb_params {
    int max_depth;           /* 4 (Ansor: 10) */
    double gamma;            /* 0.001 */
    double min_child_weight; /* 0 */
    double eta;              /* 0.2 */
    int nthread;             /* 1 */
    int seed;                /* 43 */
    int max_rounds;          /* 10000 */
    /* Boosting stops after early_stop rounds (10; Ansor: 50) without the
     * training loss (pairwise: the share of sampled pairs in the wrong
     * order; pack-sum: p-rmse) falling below the best by more than
     * early_stop_delta (0.002; Ansor: 0). */
    int early_stop;
    double early_stop_delta;
    int eval_every;          /* 2 */
    const char *tree_method; /* "hist" (see docs/features.md) */
    /* Between full retrains, kt_xgb_train continues boosting the current
     * model on the new set for at most warm_rounds rounds (same early
     * stopping); every retrain_every-th training starts from scratch.
     * retrain_every <= 1 always starts from scratch (Ansor's scheme). */
    int retrain_every; /* 1 (off: bench/bench_train.c) */
    int warm_rounds;   /* 50 */
    /* KT_XGB_OBJ_PAIRWISE: logistic loss on pairs of programs of the same
     * task (the one with the higher label should score higher), rank_pairs
     * partners drawn per program and round; scores are then mapped onto
     * the label scale (a line fitted on the training set).
     * KT_XGB_OBJ_PACKSUM: Ansor's weighted squared error of the program
     * score against its label.  docs/features.md compares them. */
    int objective;  /* KT_XGB_OBJ_PAIRWISE */
    int rank_pairs; /* 16 */
    /* Threads of one kt_xgb_predict call (XGBoost's OpenMP); training
     * uses nthread. */
    int predict_nthread; /* 1 */
};

enum { KT_XGB_OBJ_PACKSUM = 0, KT_XGB_OBJ_PAIRWISE = 1 };

/* The defaults above: the pairwise objective, depth 4, nthread 1. */
void kt_xgb_params_default(struct kt_xgb_params *p);
/* Ansor's pack-sum model (docs/features.md, Model) with nthread 1. */
void kt_xgb_params_ansor(struct kt_xgb_params *p);

struct kt_xgb_model; /* opaque */

struct kt_xgb_train_stats {
    int rounds; /* boosting rounds run */
    int best_round;
    double best_prmse; /* training loss at best_round (p-rmse, or the
                          share of wrong pairs for the pairwise objective) */
    int nrows;         /* feature rows used */
    int continued;     /* 1: boosted on from the previous model */
};

/* New, untrained model (copies params; NULL = defaults).  Caller frees
 * with kt_xgb_free. */
struct kt_xgb_model *kt_xgb_new(const struct kt_xgb_params *params);
void kt_xgb_free(struct kt_xgb_model *m); /* NULL is a no-op */
/* 1 once the model has a booster (trained or loaded). */
int kt_xgb_trained(struct kt_xgb_model *m);

/* Trains a booster on set (params.objective as custom gradients, early
 * stopping on the training loss) and swaps it in under the model's lock;
 * the old booster is freed.  From scratch on the first call and every
 * retrain_every-th; otherwise boosting continues from the current model
 * (stats->continued = 1, stats->rounds counts only the new rounds).  Programs with no rows are
 * skipped.  On error the old booster stays.  XGBoost errors give KT_EIO
 * with XGBGetLastError() in err; an empty set gives KT_EINVAL.  stats may
 * be NULL.  Safe to run on a pool thread while others predict. */
int kt_xgb_train(struct kt_xgb_model *m, const struct kt_train_set *set,
                 struct kt_xgb_train_stats *stats, char *err, size_t errlen);

/* One score per program: the sum of the per-row predictions (pack-sum);
 * programs with no rows score -INFINITY.  Predicts all rows in one
 * XGBoost call.  KT_EINVAL if the model is untrained. */
int kt_xgb_predict(struct kt_xgb_model *m, const struct kt_prog_rows *progs,
                   int n, float *scores, char *err, size_t errlen);

/* Saves the booster (UBJSON, written to path.tmp then renamed) with the
 * feature version as an attribute. */
int kt_xgb_save(struct kt_xgb_model *m, const char *path, char *err,
                size_t errlen);
/* Loads a file written by kt_xgb_save into m (replacing its booster).  A
 * model of another KT_FEATURE_VERSION is refused with KT_EINVAL. */
int kt_xgb_load(struct kt_xgb_model *m, const char *path, char *err,
                size_t errlen);
/* The same as a malloc'd buffer (caller frees) and back, for storage. */
int kt_xgb_save_buf(struct kt_xgb_model *m, void **buf, size_t *len, char *err,
                    size_t errlen);
int kt_xgb_load_buf(struct kt_xgb_model *m, const void *buf, size_t len,
                    char *err, size_t errlen);

/* The pack-sum gradient (exposed for tests): given per-row predictions
 * pred[r] and the program pack[r] of each row, the program score is the
 * sum of its rows' predictions and, for every row r of program p,
 * grad[r] = (score_p - label[p]) * weight[p] and hess[r] = weight[p]. */
void kt_xgb_packsum_grad(const float *pred, const int *pack, int nrows,
                         const float *label, const float *weight, int nprog,
                         float *grad, float *hess);

/* ---- Random model (baseline) -------------------------------------------- */
struct kt_random_model;

struct kt_random_model *kt_random_model_new(uint64_t seed);
void kt_random_model_free(struct kt_random_model *m); /* NULL is a no-op */
/* Uniform scores in [0, 1), deterministic for a seed; programs with no
 * rows get -INFINITY as with the XGBoost model.  Not thread-safe: one
 * model per thread. */
void kt_random_model_predict(struct kt_random_model *m,
                             const struct kt_prog_rows *progs, int n,
                             float *scores);

#endif /* KT_COSTMODEL_H */
