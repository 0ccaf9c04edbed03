/* codegen_int.h - private interface between the two halves of the C code
 * generator: ir/codegen.c (loops, micro-kernels, functions),
 * ir/codegen_expr.c (expressions, index arithmetic and scalar replacement
 * bookkeeping), ir/codegen_load.c (reads), ir/codegen_store.c (stores) and
 * their helpers (codegen_size.c, codegen_transpose.c, codegen_lanes.c).
 * Only those files include it. */
#ifndef KT_IR_CODEGEN_INT_H
#define KT_IR_CODEGEN_INT_H

#include "ir/ir.h"

struct binding {
    int set;
    struct kt_affine val;
};

/* A buffer access held in a register inside a micro-kernel.  A scalar
 * that the loop only reduces vectors of 'lanes' lanes into becomes a lane
 * accumulator: a vector register reduced across lanes once, after the loop
 * (instead of a horizontal reduction per iteration). */
struct reg {
    int buf;
    struct kt_affine addr;
    int width;
    int64_t stride; /* between lanes: 1 contiguous, 0 scalar, else strided */
    int lanes;      /* lane-reduction width seen (0 none) */
    int mixed;      /* some access is not such a reduction */
    enum kt_reduce op;
    int acc;   /* decided: lanes of the accumulator, or 0 */
    int nred;  /* lane reductions per loop iteration */
    int split; /* accumulators it is spread over (ILP) */
    int next;  /* the one the next reduction goes to */
    int init;  /* starts at init_val (a folded init store), not loaded */
    float init_val;
    /* Held for a guarded store (a tile padded past its buffer): per
     * dimension the index of lane 0 and its step per lane, checked where
     * the register is loaded and stored; NULL when unguarded. */
    struct kt_affine *gdim;
    int64_t gstep[KT_MAX_DIMS];
    int gndim;
};

/* Independent lane accumulators one reduction may be spread over, so
 * consecutive vector FMAs into one element do not wait for each other. */
#define KT_CG_MAX_ACC_SPLIT 4

#define KT_CG_MAX_REGS 256

/* The most chunks of a vector loop that a micro-kernel expands: the
 * vector registers of the ISAs with the most (AVX-512, AArch64).  A
 * longer loop holds no tile of registers and stays a loop (an elementwise
 * row of 192 vectors expanded, its repeated reads pinned, weighed 960
 * against the code-size bound of 512, and its search kept only the scalar
 * form). */
#define KT_CG_MAX_EXPANDED_CHUNKS 32

/* The fewest iterations of a micro-kernel's loops behind which a store's
 * line is prefetched (codegen_regs.c): fewer (a 3 x 3 window) end before
 * the line could arrive. */
#define KT_CG_PREFETCH_STEPS 16

/* A contiguous vector load a micro-kernel's body makes more than once
 * (codegen_pin.c): counted in pass 1, declared once in pass 2. */
struct pin {
    int buf;
    struct kt_affine addr;
    int width;
    int uses;     /* in pass 1 */
    int declared; /* in pass 2: its name is x<index> */
};
#define KT_CG_MAX_PINS 256

/* A guarded vector read (bounds checks, masked loads at the edges) a
 * micro-kernel's body makes more than once, keyed by its C text: counted
 * in pass 1, declared once in pass 2 (codegen_pin.c). */
struct share {
    char *text;
    int width;
    int64_t weight; /* kt__cg_load_weight */
    int uses;
    int declared; /* its name is g<index> */
};
#define KT_CG_MAX_SHARES 128
/* Largest constant lane stride read as contiguous loads and shuffles (or,
 * guarded, checked at the vector's ends) rather than lane by lane. */
#define KT_CG_MAX_SHUFFLE_STRIDE 4

struct cg {
    const struct kt_looptree *lt;
    const struct kt_codegen_opts *o;
    struct kt_buf *out;
    int reference;
    int indent;
    struct binding *env;      /* per variable: substitution while expanding */
    unsigned char *unrolled;  /* per loop variable: unroll by pragma */
    unsigned char *window;    /* ... a window loop (codegen_window.c) */
    unsigned char *inner;     /* per variable: defined inside the kernel loop */
    unsigned char *expanding; /* per loop variable: the size pass expands it */
    int64_t *var_max; /* per variable: its largest value in the C, -1 unknown */
    unsigned char *slack; /* per buffer: a vector of zeros after its last
                           * row (kt__cg_plan_slack); NULL: any may have */
    int64_t *lane_limit;  /* per vectorized loop: the lanes kept, 0 all
                          * (a peeled last tile, codegen_peel.c) */
    int store_lanes;      /* lanes the chunk being emitted stores (its
                           * masked tail, KT_CG_LANES_MASKED); 0: all */
    int nregs;
    struct reg *regs; /* KT_CG_MAX_REGS of them, only [0, nregs) set */
    int promote_ok[KT_MAX_TENSORS * 2];
    int stored[KT_MAX_TENSORS * 2];
    struct pin *pins; /* NULL: loads are never pinned */
    int npins;
    int pinning;          /* pass 2, in a micro-kernel's straight-line body */
    struct share *shares; /* NULL: guarded reads are never shared */
    int nshares;
    int sharing;          /* pass 2, in a micro-kernel's straight-line body */
    int64_t kernel_steps; /* iterations of the micro-kernel's loop nest */
    int analysing;        /* pass 1 of a micro-kernel */
    int matching_init;    /* stores are an init nest to fold into registers */
    int init_mismatch;    /* ... and one of them is not a register */
    int kernel_var;
    int nchunk;           /* counter for chunk-loop names */
    int *unroll_factor;   /* per loop variable: #pragma GCC unroll n */
    unsigned char *whole; /* per loop variable: a kernel loop expanded whole
                           * fits the budget with its reads shared */
    int64_t max_block;    /* largest straight-line block, weighted */
    int64_t total_weight; /* all the code, unrolled, weighted */
    int bare;             /* weighing without the checks of guarded accesses */
    /* A read emitted as the C text given_text (a vector transposed in
     * registers, codegen_transpose.c) instead of from memory; NULL: none. */
    const struct kt_expr *given_load;
    const char *given_text;
    int rc;
    char *err;
    size_t errlen;
};

/* ---- ir/codegen.c and ir/codegen_lanes.c -------------------------------- */

/* Appends one line of generated code at the current indent. */
void kt__cg_line(struct cg *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Records the first error (KT_ESCHEDULE, "codegen: msg"); later ones are
 * dropped and generation goes on to the end. */
void kt__cg_fail(struct cg *g, const char *msg);

/* The widest lanes dividing extent e (1: none); lane reductions and
 * transposing copies use one width throughout. */
int kt__cg_lanes_for(const struct cg *g, int64_t e);
/* How vectorized loop n is cut into chunks, decided once per loop:
 * KT_CG_LANES_DIVIDING (it reads padding: one width dividing its extent),
 * KT_CG_LANES_NARROW (kt_vector_chunk_lanes), KT_CG_LANES_PADDED (along
 * whole padded rows: whole vectors into the padding) or
 * KT_CG_LANES_MASKED (whole vectors, the last one's store masked to the
 * lanes inside the loop); the lanes of the chunk at offset i under that
 * rule (1: a scalar), and both in one call; how many chunks cover n. */
enum {
    KT_CG_LANES_DIVIDING,
    KT_CG_LANES_NARROW,
    KT_CG_LANES_PADDED,
    KT_CG_LANES_MASKED
};
int kt__cg_lane_rule(const struct cg *g, const struct kt_node *n);
int kt__cg_rule_lanes(const struct cg *g, const struct kt_node *n, int rule,
                      int64_t i);
int kt__cg_chunk_lanes(const struct cg *g, const struct kt_node *n, int64_t i);
int64_t kt__cg_chunks(const struct cg *g, const struct kt_node *n);
/* The extent dimension d of b is laid out with (its shape, rows of local
 * buffers padded to whole vectors) and b's elements so laid out. */
int64_t kt__cg_pitch(const struct cg *g, const struct kt_lbuf *b, int d);
int64_t kt__cg_buf_elems(const struct cg *g, const struct kt_lbuf *b);
/* The floats after buffer b's last row that reads along its rows may run
 * into (a vector for a local or intermediate buffer that has them, or
 * may: g->slack NULL), and the buffers that need them: those a read of
 * a vectorized loop under n taking whole vectors into its rows' padding
 * runs past the end of (marked in need, one byte per buffer). */
int64_t kt__cg_buf_slack(const struct cg *g, int b);
void kt__cg_plan_slack(const struct cg *g, const struct kt_node *n,
                       unsigned char *need);
int kt__cg_is_unrolled(const struct cg *g, const struct kt_node *n);
int kt__cg_only_stores(const struct kt_node *n);
/* Statements n expands to when fully unrolled, or -1 if it cannot be. */
int64_t kt__cg_expand_count(const struct cg *g, const struct kt_node *n);
/* 1 if the kids of n all expand within the statement budget (n is a
 * micro-kernel's kernel loop, codegen_kernel.c). */
int kt__cg_body_expands(const struct cg *g, const struct kt_node *n);

/* Emits the kids of n (init nests folded into the kernels after them). */
void kt__cg_emit_kids(struct cg *g, const struct kt_node *n);

/* ---- ir/codegen_peel.c ------------------------------------------------- */

/* Whether loop n's last iteration is emitted apart: with narrower vectors
 * where its vectorized loops' stores keep only some lanes, or because
 * bounds checks below it hold for every iteration but the last. */
int kt__cg_peels(struct cg *g, const struct kt_node *n);
/* Emits loop n without its last iteration, then that iteration. */
void kt__cg_emit_peeled(struct cg *g, const struct kt_node *n);
/* Whether a check at every reduction step in kids[from..nkids) (a
 * guarded vector read), after let n, holds for all of n's values but the
 * last; if so, kt__cg_emit_let_split emits those kids behind one branch,
 * without the check and for that value, and returns 1 (else 0). */
int kt__cg_let_splits(struct cg *g, const struct kt_node *n,
                      const struct kt_node *const *kids, int from, int nkids);
int kt__cg_emit_let_split(struct cg *g, const struct kt_node *n,
                          const struct kt_node *const *kids, int from,
                          int nkids);
/* The lanes of the chunk at offset i of vectorized loop n under rule,
 * narrowed to the lanes kept (g->lane_limit), and where its chunks end. */
int kt__cg_tail_lanes(const struct cg *g, const struct kt_node *n, int rule,
                      int64_t i);
/* The lanes the chunk of w lanes at offset i of vectorized loop n under
 * rule stores when it stores fewer than w (a masked tail), else 0. */
int kt__cg_tail_stores(const struct cg *g, const struct kt_node *n, int rule,
                       int64_t i, int w);
int64_t kt__cg_tail_end(const struct cg *g, const struct kt_node *n);

/* ---- ir/codegen_pin.c -------------------------------------------------- */

/* Forgets the counted loads (a new micro-kernel's pass 1). */
void kt__cg_pins_clear(struct cg *g);
/* Pass 1: counts a contiguous, unguarded w-lane load of buf at addr. */
void kt__cg_pin_note(struct cg *g, int buf, const struct kt_affine *addr,
                     int w);
/* After pass 1: whether the body shares enough vectors to pin them. */
int kt__cg_pins_pay(const struct cg *g);
/* Pass 2: when pinning pays and the body loads these lanes often enough,
 * appends the name of the register holding them to b (declaring it,
 * loaded and pinned, at the first use) and returns 1; else 0 (the caller
 * loads them in place). */
int kt__cg_pin_load(struct cg *g, struct kt_buf *b, int buf,
                    const struct kt_affine *addr, int w);
/* Pass 1: counts a guarded w-lane read of buf whose C is text. */
void kt__cg_share_note(struct cg *g, int buf, const char *text, int w,
                       int64_t weight);
/* After pass 1: the weight the body saves by reading each share once. */
int64_t kt__cg_shares_saving(const struct cg *g);
/* Pass 2: when the body makes the guarded read text of buf more than once,
 * appends the name of the variable holding it to b (declared at the first
 * use) and returns 1; else 0 (the caller puts text in place). */
int kt__cg_share_read(struct cg *g, struct kt_buf *b, int buf, const char *text,
                      int w);

/* The weight kernel loop k saves expanded whole (codegen_kernel.c), its
 * guarded reads each made once: 0 when its iterations share none. */
int64_t kt__cg_whole_saving(struct cg *g, const struct kt_node *k);

/* ---- ir/codegen_window.c ---------------------------------------------- */

/* Marks the window loops under n: loops at or above a micro-kernel's
 * kernel loop whose iterations read what the kernel's expanded body reads
 * at other positions (a depthwise conv's kernel rows over a tile of output
 * rows), unrolled by pragma so that each vector is loaded once. */
void kt__cg_mark_windows(struct cg *g, const struct kt_node *n);
/* Whether loop n was marked a window loop. */
int kt__cg_is_window(const struct cg *g, const struct kt_node *n);

/* ---- ir/codegen_size.c ------------------------------------------------- */

/* The weight of guarded or plain read e at w lanes along lane_var. */
int64_t kt__cg_load_weight(const struct cg *g, const struct kt_expr *e,
                           int lane_var, int w);
/* The weight of one pass of vector loop n's body at w lanes. */
int64_t kt__cg_body_weight(const struct cg *g, const struct kt_node *n, int w);
/* The weight a straight-line block may have (the search's code-size
 * bound). */
int64_t kt__cg_block_budget(const struct cg *g);

/* Chooses the #pragma GCC unroll factor of every unrolled loop under n so
 * that no straight-line block gcc sees after unrolling weighs more than
 * the budget (unless its body alone does), and records the heaviest block
 * in g->max_block. */
void kt__cg_plan_unroll(struct cg *g, const struct kt_node *n);

/* ---- ir/codegen_expr.c, ir/codegen_load.c, ir/codegen_store.c -------- */

/* Writes a with every bound variable except keep_var (-1: none) replaced
 * by its binding into *out. */
void kt__cg_subst(struct cg *g, const struct kt_affine *a, int keep_var,
                  struct kt_affine *out);
/* Writes a with only var's binding (if any) applied into *out: after
 * kt__cg_flat_addr kept var, the others' bindings are applied already
 * (applying a binding of a variable to itself plus a constant twice
 * would add the constant twice). */
void kt__cg_subst_var(struct cg *g, const struct kt_affine *a, int var,
                      struct kt_affine *out);
/* Flat row-major address of idx in buffer b, with bindings applied except
 * to keep_var. */
void kt__cg_flat_addr(struct cg *g, int b, const struct kt_affine *idx,
                      int keep_var, struct kt_affine *out);
/* Appends a as C, terms sorted by variable number. */
void kt__cg_put_aff(struct cg *g, struct kt_buf *b, const struct kt_affine *a);
/* Appends the check that a (plus step times the C variable lane_text,
 * when not NULL, which runs over 0..lanes-1) is inside [0, extent),
 * after " && " when *nchecks > 0, and counts it in *nchecks; nothing
 * when the ranges of the loops prove it (g->var_max), "0" when they prove
 * it false, and then returns 1. */
int kt__cg_put_bound(struct cg *g, struct kt_buf *b, int *nchecks,
                     const struct kt_affine *a, int64_t step,
                     const char *lane_text, int lanes, int64_t extent);
/* Closes a conjunction of checks: "1" when none was needed. */
void kt__cg_end_checks(struct kt_buf *b, int nchecks);
/* Appends the lanes of a + step * lane (lane < lanes) inside [0, extent)
 * as a C bit mask (bit l: lane l), after " & " when *nparts > 0, and
 * counts it in *nparts; nothing when the loops' ranges keep every lane
 * inside. */
void kt__cg_put_lane_mask(struct cg *g, struct kt_buf *b, int *nparts,
                          const struct kt_affine *a, int64_t step, int lanes,
                          int64_t extent);
/* Closes a conjunction of masks: every lane when none was needed. */
void kt__cg_end_mask(struct kt_buf *b, int nparts);
/* The bounds checks of index idx (ndim dimensions) of buffer src at lane
 * (of lane_var) and row (of row_var, -1 for none), joined by && and
 * counted in *nchecks; with lane_dims_only, only the dimensions that vary
 * with the lane (the others were checked at lane 0). */
void kt__cg_put_index_bounds(struct cg *g, struct kt_buf *b, int *nchecks,
                             int src, const struct kt_affine *idx, int ndim,
                             int lane_var, int lane, int row_var, int row,
                             int lane_dims_only);
/* Replaces scalar operand s by it broadcast to a vector of w lanes. */
void kt__cg_broadcast(struct kt_buf *s, int w);
/* Renders e into b; returns 1 if the value is a vector of w lanes (it
 * varies with lane_var), 0 for a scalar. */
int kt__cg_put_expr(struct cg *g, struct kt_buf *b, const struct kt_expr *e,
                    int lane_var, int w);
/* Renders read e (codegen_load.c) as kt__cg_put_expr does. */
int kt__cg_put_load(struct cg *g, struct kt_buf *b, const struct kt_expr *e,
                    int lane_var, int w);
/* The step of read e's last index along var when no other index moves
 * with it, else 0 (codegen_load.c). */
int64_t kt__cg_row_step(const struct kt_expr *e, int var);
/* Whether a store of w lanes stepping c elements a lane goes out as c
 * masked stores of shuffled vectors (kt__cg_put_strided_store): c 2 to 4,
 * 8 or 16 lanes, an AVX-512 target (elsewhere a masked store is a loop
 * over its lanes, no better than the scatter; codegen_store.c). */
int kt__cg_strided_store(const struct cg *g, int64_t c, int w);
/* Emits the store of vector val (C text, w lanes) to t_<name>[addr +
 * c * lane] as c masked stores, the j-th of val's lanes shuffled into the
 * w elements from addr + j * w: instead of w scalar stores.  A masked
 * store writes its set lanes only, the elements the scalar stores would
 * write, so nothing of another thread's. */
void kt__cg_put_strided_store(struct cg *g, const char *name, const char *addr,
                              int64_t c, const char *val, int w);
/* Whether guarded read e, stepping c along lane_var, reads its edge
 * vectors of w lanes as masked loads merged by shuffles rather than a loop
 * over the lanes (contiguous ones always are masked loads): stepping 2 to
 * 4 along its rows only, at the target's width or, with AVX-512, at 8
 * lanes (codegen_load.c). */
int kt__cg_strided_masked(const struct cg *g, const struct kt_expr *e,
                          int lane_var, int64_t c, int w);
/* Whether guarded read e, stepping c along lane_var in w lanes, is a
 * window tap read from shared loads (codegen_load.c): a stride-2 read of
 * the target's lanes (AVX-512) whose last index holds an expanded loop's
 * variable (the code being emitted fixed it, or the size pass expands
 * it) with a coefficient under a block (c * w); *t gets the offset the
 * fixed ones add (NULL: not wanted). */
int kt__cg_shared_taps(const struct cg *g, const struct kt_expr *e,
                       int lane_var, int64_t c, int w, int64_t *t);
/* Fills g->var_max from the loops and lets under n. */
void kt__cg_note_ranges(struct cg *g, const struct kt_node *n);
/* Whether a stays inside [0, extent) for every value the C gives its
 * variables (g->var_max). */
int kt__cg_inside(const struct cg *g, const struct kt_affine *a,
                  int64_t extent);
/* Whether a stays outside [0, extent) for every such value. */
int kt__cg_outside(const struct cg *g, const struct kt_affine *a,
                   int64_t extent);
/* The C loop of var runs from 0 below end by step: its largest value. */
void kt__cg_loop_range(struct cg *g, int var, int64_t step, int64_t end);
/* Whether a and b are the same affine expression (codegen_regs.c). */
int kt__cg_aff_equal(const struct kt_affine *a, const struct kt_affine *b);
/* The register holding the width lanes at addr + stride * lane (stride 0
 * and width 1 for a scalar), or -1 (codegen_regs.c). */
int kt__cg_find_reg(const struct cg *g, int buf, const struct kt_affine *addr,
                    int64_t stride, int width);
/* Pass 1: notes an access (lane_red: the width of a lane reduction by op
 * into this one element, else 0).  A guarded load is never held; a
 * guarded store (gstore, its lanes along lane_var) is, with its checks. */
void kt__cg_note_access(struct cg *g, int buf, const struct kt_affine *addr,
                        int64_t lane_coef, int width, int guarded, int is_store,
                        int lane_red, enum kt_reduce op,
                        const struct kt_node *gstore, int lane_var);
/* Forgets the registers (pass 1's or the nest's just emitted). */
void kt__cg_clear_regs(struct cg *g);
/* Matches a constant store of an init nest (to be folded) with the
 * register holding the same lanes; notes a mismatch in g->init_mismatch. */
void kt__cg_match_init_store(struct cg *g, const struct kt_node *n,
                             const struct kt_affine *addr, int64_t c, int w);
/* Appends v as a C float literal. */
void kt__cg_put_float(struct kt_buf *b, float v);
/* A for-loop header for n stepping by step (OpenMP or unroll pragma). */
void kt__cg_loop_header(struct cg *g, const struct kt_node *n, int step);
/* A let node: its value folded into the environment when constant, else
 * a const long declaration. */
void kt__cg_emit_let(struct cg *g, const struct kt_node *n);
/* A vectorized loop of stores spanning more than one lane. */
int kt__cg_is_vector_loop(const struct cg *g, const struct kt_node *n);
/* The kernel loop of loop n when n is emitted as a micro-kernel nest (n
 * itself, or the bottom of a perfect nest from n when holding the
 * registers across it pays), else NULL (codegen_kernel.c). */
const struct kt_node *kt__cg_kernel_of(struct cg *g, const struct kt_node *n);
/* Emits the micro-kernel nest from top down to kernel loop k; init (or
 * NULL) is an init nest folded into the registers (kt__cg_init_folds). */
void kt__cg_emit_kernel_nest(struct cg *g, const struct kt_node *top,
                             const struct kt_node *k,
                             const struct kt_node *init);
/* Whether the init nest init folds into the micro-kernel of loop n (set
 * in *kern): every init store is a register the kernel keeps. */
int kt__cg_init_folds(struct cg *g, const struct kt_node *init,
                      const struct kt_node *n, const struct kt_node **kern);
/* "add", "max" or "min" for a reduction store op (codegen_store.c). */
const char *kt__cg_combine_op(enum kt_reduce op);
/* Declares the registers kept for a micro-kernel before its loop
 * (loaded from memory) or writes them back after it. */
void kt__cg_load_regs(struct cg *g);
void kt__cg_store_regs(struct cg *g);
/* Whether store n is a reduction into one element along lane_var
 * (codegen_store.c, as the two below). */
int kt__cg_lane_reduction(struct cg *g, const struct kt_node *n, int lane_var);
/* Such a store kept in W-lane accumulators acc<i>_<q> across its
 * vectorized loop: phase 0 declares acc<i>_<q> (the reduction's identity),
 * 1 accumulates one chunk into it, 2 combines it into acc<i>_0, 3 reduces
 * acc<i>_0 across lanes into the element. */
void kt__cg_emit_lane_acc(struct cg *g, const struct kt_node *n, int i, int q,
                          int phase, int lane_var, int w);
/* Emits store n; lane_var >= 0 is the variable vectorized with w lanes.
 * While g->analysing, only notes the accesses for scalar replacement. */
void kt__cg_emit_store(struct cg *g, const struct kt_node *n, int lane_var,
                       int w);

/* Emits node n (and what is under it) as the generator does anywhere. */
void kt__cg_emit_node(struct cg *g, const struct kt_node *n);
/* The chunks of vectorized loop n from offset from to its end, as after
 * its loop of whole vectors (codegen.c). */
void kt__cg_emit_tail_chunks(struct cg *g, const struct kt_node *n,
                             int64_t from);

/* ---- ir/codegen_transpose.c -------------------------------------------- */

/* Emits loop n as a transposing copy in W x W register blocks when it is
 * one, or as a nest whose read transposes (a tile computed with output
 * channels along the lanes, stored back with pixels along them) reading
 * W x W blocks transposed in registers; returns 1, else emits nothing and
 * returns 0. */
int kt__cg_emit_transpose(struct cg *g, const struct kt_node *n);
/* The guarded (padding) reads of e: 0 none, 1 all masked along the rows
 * var moves over (a stride of 1 to 4 along the last dimension only), 2
 * some read lane by lane at the edges. */
int kt__cg_reads_guarded(const struct kt_expr *e, int var);
/* Guarded read e (unit stride along lane_var) as w lanes at addr, with
 * row_var advanced by row: one vector load when the first and last lanes
 * are in bounds, else lane by lane with the pad value outside. */
void kt__cg_put_guarded_row(struct cg *g, struct kt_buf *b,
                            const struct kt_expr *e,
                            const struct kt_affine *addr, int row_var, int row,
                            int lane_var, int w);
/* The weight of the block kt__cg_emit_transpose emits for loop n (its
 * loops are not unrolled), or 0 when n is no transposing copy or nest. */
int kt__cg_transpose_weight(const struct cg *g, const struct kt_node *n);

#endif /* KT_IR_CODEGEN_INT_H */
