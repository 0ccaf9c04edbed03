/* lower_int.h - private interface between the parts of the lowering
 * (docs/schedule.md, Lowering): ir/lower.c (loop nests, attached stages,
 * stores, kt_lower), ir/lower_region.c (split lengths, axis values, bound
 * inference of regions, buffer indexes) and ir/lower_layout.c (the
 * dimension order of packed and accumulator tiles, layout rewrite).  Only
 * those files include it. */
#ifndef KT_IR_LOWER_INT_H
#define KT_IR_LOWER_INT_H

#include "ir/ir.h"

/* Variables numbered from here stand for not-yet-bound parts during bound
 * inference: PSEUDO + axis * KT_MAX_PARTS + part. */
#define PSEUDO (1 << 20)

/* A tile variable of a prepacked buffer: lead dimension dim is indexed by
 * the sum of k * var over its variables (one each unless they were folded,
 * ir/lower_layout.c). */
struct lead_var {
    int var, dim;
    int64_t k;
};

struct lower {
    const struct kt_state *st;
    struct kt_looptree *lt;
    int tbuf[KT_MAX_TENSORS];
    struct kt_affine toff[KT_MAX_TENSORS][KT_MAX_DIMS];
    int tperm[KT_MAX_TENSORS][KT_MAX_DIMS]; /* buffer dim i: tensor dim */
    int tnlead[KT_MAX_TENSORS];    /* prepacked: leading tile-index dims */
    int tnleadvar[KT_MAX_TENSORS]; /* ... the tile variables indexing them */
    struct lead_var tlead[KT_MAX_TENSORS][KT_MAX_ITERS];
    int64_t *var_ext; /* range of each loop-tree variable */
    int capvar;
    int in_parallel;
    char *err;
    size_t errlen;
};

struct snest {
    int s;
    const struct kt_sstage *ss;
    int64_t pe[KT_MAX_AXES][KT_MAX_PARTS];
    int64_t run0[KT_MAX_AXES]; /* loop extent of part 0 (run_extent) */
    int64_t iext[KT_MAX_ITERS];
    struct kt_affine partval[KT_MAX_AXES][KT_MAX_PARTS];
    int bound[KT_MAX_AXES][KT_MAX_PARTS];
    struct kt_affine off[KT_MAX_AXES];
    int init_pos;
    /* Where iterator j's part of the nest went (from child slot_index[j]
     * of slot_parent[j] on) and the loop-tree variables it bound
     * [var_lo[j], var_hi[j]): a pack can be hoisted out of it. */
    struct kt_node *slot_parent[KT_MAX_ITERS];
    int slot_index[KT_MAX_ITERS];
    int var_lo[KT_MAX_ITERS], var_hi[KT_MAX_ITERS];
};

#define FAIL(L, ...) kt_seterr((L)->err, (L)->errlen, KT_ESCHEDULE, __VA_ARGS__)

/* The region of a tensor a stage reads: per dimension an affine base (in
 * the bound variables) and the interval [lo, hi] relative to it. */
struct region {
    int found;
    int64_t lo[KT_MAX_DIMS], hi[KT_MAX_DIMS]; /* relative to base */
    struct kt_affine base[KT_MAX_DIMS];
};

/* ---- ir/lower.c --------------------------------------------------------- */

struct kt_node *kt__lower_node_new(enum kt_node_kind kind, int stage);
void kt__lower_node_add(struct kt_node *parent, struct kt_node *kid);
void kt__lower_node_free(struct kt_node *n);
/* Emits stage s (attached over region off/range, or at root with NULL)
 * into parent. */
int kt__lower_emit_stage(struct lower *L, int s, struct kt_node *parent,
                         const struct kt_affine *off, const int64_t *range);
/* A new loop-tree variable named after axis and part, of range extent. */
int kt__lower_new_var(struct lower *L, const char *axis, int part,
                      int64_t extent);

/* ---- ir/lower_region.c -------------------------------------------------- */

/* Effective part extents of axis a once it covers 'range' points. */
int kt__lower_infer_parts(struct lower *L, struct snest *n, int a,
                          int64_t range);
/* Every axis's value from the current part bindings; unbound parts become
 * pseudo variables when 'pseudo' is set, else 0. */
int kt__lower_all_axis_exprs(const struct snest *n, int pseudo,
                             struct kt_affine *ax);
/* Index into tensor t's buffer of the element at idx; the buffer's ndim,
 * -1 when an index grows too long. */
int kt__lower_buf_index(const struct lower *L, int t,
                        const struct kt_affine *idx, int ndim,
                        struct kt_affine *out);
/* A new buffer for the output of stage ps; NULL when the table is full. */
struct kt_lbuf *kt__lower_new_stage_buf(struct lower *L,
                                        const struct kt_sstage *ps,
                                        enum kt_buf_scope scope, int ndim);
/* Whether tensor t's buffer is laid out in another dimension order. */
int kt__lower_is_permuted(const struct lower *L, int t);
int kt__lower_is_tile(const struct lower *L, int b);
/* Loads name buffers, reads of tiles shifted by their region offsets. */
int kt__lower_map_loads(struct lower *L, struct kt_expr *e);
/* Widens r by the reads of tensor t in e, with axes valued ax. */
int kt__lower_collect_region(struct lower *L, const struct snest *n,
                             const struct kt_expr *e, int t,
                             const struct kt_affine *ax, struct region *r);

/* Widens r by add (regions of tensor t); a dimension the two read at
 * places that move differently becomes the whole dimension. */
void kt__lower_merge_region(const struct lower *L, int t, struct region *r,
                            const struct region *add);

/* ---- ir/lower_layout.c -------------------------------------------------- */

void kt__lower_pack_dim_order(const struct snest *n, int t,
                              const struct kt_affine *ax, int *perm, int ndim);
void kt__lower_accumulator_dim_order(const struct kt_sstage *ps, int *perm,
                                     int ndim);
int kt__lower_emit_prepacked(struct lower *L, int p,
                             const struct kt_affine *off, const int64_t *range);
/* Lead dims of tensor t's buffer, one per tile variable vars[] (outermost
 * first) unless more than nlead; shape[] gets their extents. */
void kt__lower_fold_lead_vars(struct lower *L, int t, const int *vars, int nv,
                              int nlead, int64_t *shape);

/* ---- ir/lower_hoist.c --------------------------------------------------- */

/* Emits pack stage p, attached at iterator j of n over region (off,
 * range), hoisted out of the loops around j that do not move its region
 * (those that do become lead dims of its buffer): 1 when it did, 0 when
 * the pack stays at j, else an error. */
int kt__lower_emit_hoisted(struct lower *L, struct snest *n, int j, int p,
                           const struct kt_affine *off, const int64_t *range);

/* ---- ir/lower_elide.c --------------------------------------------------- */

/* Drops local tiles that are only copied out unchanged by producers that
 * finish each element in one pass (the producer stores in place). */
void kt__lower_elide_copies(struct kt_looptree *lt);

#endif /* KT_IR_LOWER_INT_H */
