/* cm_internal.h - shared by the cost model's own files only (the loop-tree
 * walk and the access analysis used by features.c).  Other modules include
 * costmodel/costmodel.h. */
#ifndef KT_CM_INTERNAL_H
#define KT_CM_INTERNAL_H

#include "costmodel/costmodel.h"

#define KT__MAX_DEPTH 64 /* loops enclosing one store */
#define KT__MAX_ACC 64   /* buffer accesses of one store */

struct kt__loop {
    const struct kt_node *n;
    int id; /* loop number in tree order */
};

struct kt__let {
    int defined;
    int src_var;
    int64_t div, mod;
};

/* One access of a store: the written buffer or a load in its value. */
struct kt__access {
    int buf;
    int is_write;
    int ndim;
    const struct kt_affine *idx;
};

/* Everything known at one store: the enclosing loops (outermost first),
 * lets in scope, and per-loop access counts of the whole tree. */
struct kt__store_ctx {
    const struct kt_looptree *lt;
    const struct kt_node *store;
    int depth;
    struct kt__loop loops[KT__MAX_DEPTH];
    int *var_level;       /* nvars: loop level of a loop var, or -1 */
    struct kt__let *lets; /* nvars */
    int64_t *alloc_outer; /* nbufs: loop product at the ALLOC, 0 none */
    const int *acc_count; /* nloops x nbufs: accesses inside a loop */
    /* nvars: the loops the code generator unrolls as window loops
     * (kt_codegen_window_loops), counted as annotated unroll */
    const unsigned char *window;
    int nacc;
    struct kt__access acc[KT__MAX_ACC];
};

typedef int (*kt__store_fn)(const struct kt__store_ctx *c, void *arg);

/* Validates lt and calls fn for every store in tree order; stops at the
 * first non-zero return of fn and returns it.  Thread-safe. */
int kt__walk(const struct kt_looptree *lt, kt__store_fn fn, void *arg,
             char *err, size_t errlen);

/* Extent of loop level l of the store. */
int64_t kt__ext(const struct kt__store_ctx *c, int l);
/* Annotation of loop level l as the generated code has it: a window loop
 * is unrolled. */
enum kt_annot kt__ann(const struct kt__store_ctx *c, int l);
/* Elements of buffer a->buf touched by access a while loops l..depth-1 run
 * (loops outside l fixed): the bounding box, clipped to the shape. */
double kt__footprint(const struct kt__store_ctx *c, const struct kt__access *a,
                     int l);
/* The same with loop l running only its first ext_l iterations (ext_l <= 0:
 * all of them). */
double kt__footprint_part(const struct kt__store_ctx *c,
                          const struct kt__access *a, int l, int64_t ext_l);
/* Elements in the last dimension of that box (the contiguous run). */
double kt__footprint_last(const struct kt__store_ctx *c,
                          const struct kt__access *a, int l);
/* 1 if access a changes when loop level l advances. */
int kt__depends(const struct kt__store_ctx *c, const struct kt__access *a,
                int l);
/* Average change of a's flattened (row-major) element offset per
 * iteration of loop level l: a let var over the loop with divisor div
 * counts 1/div of its coefficient. */
double kt__stride(const struct kt__store_ctx *c, const struct kt__access *a,
                  int l);

/* Bytes touched by all accesses of the store while loops l.. run, each
 * buffer's total capped at its size. */
double kt__level_bytes(const struct kt__store_ctx *c, int l);

/* Arithmetic of one store value (per evaluation). */
struct kt__ops {
    double mad, addsub, mul, div, cmp, math, other, select;
};
void kt__count_ops(const struct kt_node *store, struct kt__ops *o);
/* Flops per evaluation (a mad counts 2). */
double kt__ops_flops(const struct kt__ops *o);

/* Elements of buffer b (dimensions of extent 0 count as 1). */
double kt__cm_buf_elems(const struct kt_lbuf *b);

/* sqrt(mean over rows of (pack score - label)^2), Ansor's p-rmse. */
double kt__prmse(const float *pred, const int *pack, int nrows,
                 const float *label, int nprog);

/* Programs grouped by task for the pairwise objective (objective.c):
 * the members of program i's task are member[start[i] .. start[i] +
 * size[i]). */
struct kt__groups {
    int nprog;
    int *member, *start, *size;
};
void kt__groups_init(struct kt__groups *g, const int64_t *task, int nprog);
void kt__groups_free(struct kt__groups *g);
/* Per-program gradient and hessian of the pairwise logistic loss on
 * npairs sampled partners per program (drawn from r). */
void kt__pairwise_grad(const struct kt__groups *g, const double *score,
                       const float *label, int npairs, struct kt_rng *r,
                       double *grad, double *hess);
/* The share of the pairs drawn from seed that score in the wrong order
 * (the same pairs every call: early stopping compares rounds on them; the
 * logistic loss itself keeps falling as scores spread, and would not stop
 * the boosting). */
double kt__pairwise_error(const struct kt__groups *g, const double *score,
                          const float *label, int npairs, uint64_t seed);

#endif /* KT_CM_INTERNAL_H */
