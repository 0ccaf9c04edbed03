/* compile_int.h - internal to compile/: the tasks of a model with the
 * schedule chosen for each, and the writers of the files of DIR. */
#ifndef KT_COMPILE_INT_H
#define KT_COMPILE_INT_H

#include "compile/compile.h"
#include "ir/ir.h"
#include "scheduler/scheduler.h"
#include "storage/storage.h"

#define KT_CC_MAX_PACKED 8

/* A weight whose layout the schedule rewrote: the pack routine fills
 * 'elems' floats from argument 'arg' (its source tensor). */
struct kt_cc_packed {
    int buf; /* loop-tree buffer of the packed copy */
    int arg; /* kernel argument it is packed from */
    int64_t elems;
};

struct kt_cc_task {
    const struct kt_task *task; /* borrowed from the model's tasks */
    char fname[192];            /* public C name, <model>_<task> */
    struct kt_state *st;        /* chosen schedule (steps empty: untuned) */
    struct kt_looptree *lt;     /* st lowered */
    struct kt_looptree *ref_lt; /* naive loops, for the self-check */
    struct kt_best_trial best;  /* id 0: untuned */
    int npacked;
    struct kt_cc_packed packed[KT_CC_MAX_PACKED];
    int *arg_read; /* per kernel argument: read by the kernel (1/0) */
};

/* The whole network of an ONNX model (net.c): steps in execution order,
 * each a kernel call or an untuned node run as plain C, with the source
 * of every buffer: an activation in the arena (planned so that values
 * whose lifetimes do not overlap share memory), a float range of the
 * weights file, or a packed weight made in init. */
enum kt_cc_src { KT_CC_ACT, KT_CC_WEIGHT, KT_CC_PACKED };

struct kt_cc_ref {
    int src;    /* enum kt_cc_src */
    int64_t at; /* ACT: value index; WEIGHT: float offset; PACKED: slot */
};

#define KT_CC_MAX_REFS 48

struct kt_cc_step {
    int kernel;     /* kernel index, -1 for an untuned node */
    int node;       /* the untuned node, or the kernel's anchor */
    int packed;     /* first packed slot of the kernel's packed weights */
    int pack_input; /* a packed weight comes from an activation: packed
                     * before every call instead of once in init */
    int nrefs;      /* kernel: one per kernel argument; node: inputs then
                     * outputs (absent optional inputs are skipped) */
    struct kt_cc_ref refs[KT_CC_MAX_REFS];
};

struct kt_cc_net {
    struct kt_onnx_graph *g;
    int nsteps;
    struct kt_cc_step *steps;
    int npacked;
    int64_t *packed_elems; /* per packed slot */
    int64_t *packed_at;    /* per packed slot: its offset in w (packed by
                            * compile), -1 when packed at run time */
    float *w;              /* the weights file's floats */
    int64_t nw, capw;
    int nallocs; /* the ranges of w, in order */
    struct kt_cc_range {
        int64_t at, n;
    } * allocs;
    int64_t *w_of_value;    /* raw constant's offset in w, -1 */
    unsigned char *inlined; /* per node: computed in its consumer's step
                             * (net_expr.c) */
    int64_t *arena_off;     /* activation's byte offset in the arena, -1 */
    int *alias_of;          /* the Concat output a value is placed in, -1 */
    int64_t *alias_at;      /* its byte offset there */
    char *has_alias;        /* some value is placed in this one */
    int64_t *act_bytes;     /* activation's size, 64-byte rounded */
    int64_t arena_bytes;    /* peak activation memory */
    uint64_t w_hash;        /* FNV-1a of w: init checks the file against it */
};

struct kt_cc {
    const struct kt_model_conf *m;
    const struct kt_compile_opts *o;
    char model[64]; /* C identifier of the model */
    char *target;   /* kt_target_id */
    struct kt_codegen_opts cg;
    struct kt_tasks tasks;
    struct kt_cc_task *t; /* tasks.n entries */
    int ntuned;
    struct kt_cc_net *net; /* NULL: no ONNX model, or not compiled */
    char net_skip[512];    /* why the network was not compiled */
};

/* Writes text (or len bytes of data) to DIR/name, through a temporary
 * file and rename. */
int kt__cc_write(const struct kt_cc *c, const char *name, const char *text,
                 char *err, size_t errlen);
int kt__cc_write_bytes(const struct kt_cc *c, const char *name,
                       const void *data, size_t len, char *err, size_t errlen);
/* DIR/<model>_kernels.c, DIR/<model>.h, DIR/<model>_check.c. */
int kt__cc_emit_sources(const struct kt_cc *c, char *err, size_t errlen);
/* DIR/Makefile, DIR/<model>.pc, DIR/manifest.json. */
int kt__cc_emit_build(const struct kt_cc *c, char *err, size_t errlen);
/* The packed copy of argument a of t, or NULL; 1 when the kernel reads
 * argument a only through its packed copy (it is passed in its place). */
const struct kt_cc_packed *kt__cc_packed_of(const struct kt_cc_task *t, int a);
int kt__cc_arg_replaced(const struct kt_cc_task *t, int a);
/* net.c: plans the network of an ONNX model (c->net); a graph it cannot
 * run leaves c->net NULL with the reason in c->net_skip and a warning on
 * log.  Errors only for I/O and memory. */
int kt__cc_net_plan(struct kt_cc *c, FILE *log, char *err, size_t errlen);
void kt__cc_net_free(struct kt_cc_net *n);
struct kt_onnx_graph;
struct kt_onnx_node;
struct kt_onnx_kernel;
struct kt_onnx_value;
/* net_weights.c: the weights' floats.  Appends n floats (64-byte aligned)
 * to the weights; their offset. */
int64_t kt__cc_w_alloc(struct kt_cc_net *net, int64_t n);
/* The offset of constant value v (converted to float, once). */
int64_t kt__cc_w_raw(struct kt_cc_net *net, int v);
/* 1 when batch norm bn's scale, bias, mean and variance are constants. */
int kt__cc_bn_consts(const struct kt_onnx_graph *g,
                     const struct kt_onnx_node *bn);
/* A batch norm's scale (which = 1) or shift (2), per channel. */
int64_t kt__cc_w_bn(struct kt_cc_net *net, const struct kt_onnx_node *bn,
                    int which);
/* Conv a's weight, and its bias, with batch norm bn folded in. */
int64_t kt__cc_w_folded(struct kt_cc_net *net, const struct kt_onnx_node *a,
                        const struct kt_onnx_node *bn);
int64_t kt__cc_w_folded_bias(struct kt_cc_net *net,
                             const struct kt_onnx_node *a,
                             const struct kt_onnx_node *bn);
/* A ConvTranspose weight in the phase layout of kernel k's argument lb;
 * -1 when the pads are not given explicitly. */
int64_t kt__cc_w_phase(struct kt_cc_net *net, const struct kt_onnx_kernel *k,
                       const struct kt_onnx_node *bn, const struct kt_lbuf *lb);
/* A Winograd kernel's transformed weight U (its argument lb), bn folded
 * in; -1 when lb does not fit a's weight. */
int64_t kt__cc_w_winograd(struct kt_cc_net *net, const struct kt_onnx_node *a,
                          const struct kt_onnx_node *bn,
                          const struct kt_lbuf *lb);
/* Its transform BT (which 0) or AT (1) over alpha rows for an r-row
 * window; -1 when there is none. */
int64_t kt__cc_w_winograd_matrix(struct kt_cc_net *net, int64_t alpha,
                                 int64_t r, int which);
/* net_arena.c: Concat n's axis (non-negative), the product of the output
 * dims before it (rows) and after it (inner). */
void kt__cc_concat_shape(const struct kt_onnx_graph *g,
                         const struct kt_onnx_node *n, int64_t *axis,
                         int64_t *rows, int64_t *inner);
/* net_arena.c: each activation's offset in the arena (arena_off,
 * act_bytes, arena_bytes) from the steps. */
void kt__cc_plan_arena(struct kt_cc_net *net);
/* pack_eval.c: runs lt's pack routine in this process on args (the
 * kernel's arguments, then its packed buffers laid out for vectors of
 * vector_bytes; those the routine does not read may be NULL). */
int kt__cc_pack_eval(const struct kt_looptree *lt, int vector_bytes,
                     float *const *args, char *err, size_t errlen);
/* pack_eval.c: packs every constant weight a kernel step reads in another
 * layout into the weights (packed_at) and drops the originals no step
 * reads any more. */
int kt__cc_net_prepack(struct kt_cc *c, char *err, size_t errlen);
/* net_files.c: DIR/<model>_net.c, DIR/<model>.weights, DIR/<model>_infer.c,
 * DIR/ort_run.js; net_emit.c: the network's part of the header. */
int kt__cc_emit_net(const struct kt_cc *c, char *err, size_t errlen);
void kt__cc_net_header(struct kt_buf *h, const struct kt_cc *c);
/* net_profile.c: step s's label (its comment in <model>_net.c and its
 * <model>_step_name); the profile's code and its part of the header. */
void kt__cc_step_label(struct kt_buf *b, const struct kt_cc *c,
                       const struct kt_cc_step *s);
void kt__cc_emit_profile(struct kt_buf *b, const struct kt_cc *c);
void kt__cc_profile_header(struct kt_buf *h, const struct kt_cc *c,
                           const char *up);
/* The text of DIR/<model>_net.c (net_emit.c; net_files.c writes it). */
void kt__cc_emit_net_c(struct kt_buf *b, const struct kt_cc *c);
/* The weights file's magic; its last digits are the format version (2:
 * packed weights are in the file; 1 packed them at init). */
#define KT_CC_WEIGHTS_MAGIC "KTWGT002"
/* A step's buffer as a C expression; a "(const long long[]){...}". */
void kt__cc_put_ref(struct kt_buf *b, const struct kt_cc *c,
                    const struct kt_cc_ref *r);
void kt__cc_put_ll(struct kt_buf *b, const int64_t *v, int n);
/* net_layout.c: Slice and Resize (Upsample) nodes: -1 with the reason in
 * why for one the network cannot run; the C of a step. */
int kt__cc_layout_check(const struct kt_onnx_graph *g,
                        const struct kt_onnx_node *n, char *why, size_t len);
void kt__cc_emit_layout(struct kt_buf *b, const struct kt_cc *c,
                        const struct kt_cc_step *s);
/* net_layout.c: the row-major strides of v's dims, in elements. */
void kt__cc_strides(const struct kt_onnx_value *v, int64_t *s);
/* net_layout.c: 0 when nearest Resize n reads source index i * mul[d] /
 * div[d] for output index i along every dim d (a whole scale factor up or
 * down); -1 otherwise. */
int kt__cc_nearest_map(const struct kt_onnx_graph *g,
                       const struct kt_onnx_node *n, int64_t *mul,
                       int64_t *div);
/* net_expr.c: elementwise steps.  1 when untuned node i runs as an
 * elementwise expression (binary and unary ops, batch norm, nearest
 * Resize by whole factors). */
int kt__cc_expr_node(const struct kt_onnx_graph *g, int i);
/* Sets net->inlined: the expression nodes whose value only the next
 * expression node of the same shape reads are computed inside its step. */
void kt__cc_expr_plan(struct kt_cc_net *net);
/* The refs of the step of expression root (its operands, then its
 * output); the number of nodes inlined into it. */
int kt__cc_expr_refs(struct kt_cc_net *net, int root, struct kt_cc_step *s);
/* The nodes inlined into root's step (up to max into members); their
 * number. */
int kt__cc_expr_members(const struct kt_cc_net *net, int root, int *members,
                        int max);
/* 1 when root's step is large enough to run on all the run's threads. */
int kt__cc_expr_parallel(const struct kt_cc_net *net, int root);
/* The static function expr_<index> of step s = steps[index] (before the
 * run function) and its call (in it). */
void kt__cc_emit_expr_fn(struct kt_buf *b, const struct kt_cc *c,
                         const struct kt_cc_step *s, int index);
void kt__cc_emit_expr(struct kt_buf *b, const struct kt_cc *c,
                      const struct kt_cc_step *s, int index);
/* Argument i's buffer of task t's kernel. */
const struct kt_lbuf *kt__cc_arg(const struct kt_cc_task *t, int i);
/* 1 when argument i of t is an output. */
int kt__cc_arg_is_output(const struct kt_cc_task *t, int i);
/* A Winograd kernel's <fname>_winograd() (emit_wino.c): its declaration
 * (upper_fname names the macros) and its definition; nothing for other
 * tasks. */
void kt__cc_wino_header(struct kt_buf *h, const struct kt_cc_task *t,
                        const char *upper_fname);
void kt__cc_wino_kernel(struct kt_buf *k, const struct kt_cc_task *t);

#endif /* KT_COMPILE_INT_H */
