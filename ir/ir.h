/* ir.h - the tensor-program IR: compute definitions (the DAG), schedules
 * (transform steps replayed into a state), the loop tree they lower to, and
 * C code generation.
 *
 * Data flow:  text --kt_dag_parse--> kt_dag
 *             kt_dag + kt_step[] --kt_state_replay--> kt_state
 *             kt_state --kt_lower--> kt_looptree --kt_codegen_*--> C source
 *
 * The DAG, state and loop tree are plain structs that other modules read
 * (the search inspects iterators, the cost model walks the loop tree); only
 * functions of this module create or change them. */
#ifndef KT_IR_H
#define KT_IR_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#define KT_MAX_NAME 32
#define KT_MAX_DIMS 8  /* dimensions of a tensor */
#define KT_MAX_AXES 12 /* axes of one stage (spatial + reduction) */
#define KT_MAX_TENSORS 32
#define KT_MAX_STAGES 24
#define KT_MAX_PARTS 8  /* pieces an axis may be split into */
#define KT_MAX_ITERS 40 /* iterators of one stage after splits */
#define KT_AFF_TERMS 32 /* variables in one affine expression */
#define KT_MAX_STEP_ARGS 40

/* ---- Affine expressions ------------------------------------------------
 * c + sum(k[i] * var[i]).  In a DAG the variables are the stage's axis
 * numbers; in a loop tree they are loop-tree variable numbers. */
struct kt_affine {
    int64_t c;
    int n;
    int var[KT_AFF_TERMS];
    int64_t k[KT_AFF_TERMS];
};

void kt_aff_const(struct kt_affine *a, int64_t c);
void kt_aff_var(struct kt_affine *a, int var, int64_t k);
/* a += k * var; returns KT_ETOOBIG when the term table is full. */
int kt_aff_add_term(struct kt_affine *a, int var, int64_t k);
/* a += k * b; returns KT_ETOOBIG when the term table is full. */
int kt_aff_add(struct kt_affine *a, const struct kt_affine *b, int64_t k);
/* Coefficient of var in a (0 when absent). */
int64_t kt_aff_coef(const struct kt_affine *a, int var);
/* 1 when a and b have the same variable terms (their constants may
 * differ), that is when a - b is a constant. */
int kt_aff_same_terms(const struct kt_affine *a, const struct kt_affine *b);

/* ---- Expressions ------------------------------------------------------- */
enum kt_xop {
    KT_X_CONST,
    KT_X_LOAD, /* tensor (DAG) or buffer (loop tree) read */
    KT_X_ADD,
    KT_X_SUB,
    KT_X_MUL,
    KT_X_DIV,
    KT_X_MAX,
    KT_X_MIN, /* binary */
    KT_X_NEG,
    KT_X_EXP,
    KT_X_LOG,
    KT_X_SQRT,
    KT_X_TANH,
    KT_X_SIGMOID,
    KT_X_RELU,
    KT_X_ABS,
    KT_X_NOPS
};

/* A load reads tensor/buffer 'src' at idx[0..ndim).  When 'guarded' is set
 * the read is checked against the source's shape and yields 'pad_value'
 * outside it (only padding stages carry guarded loads). */
struct kt_expr {
    enum kt_xop op;
    float value; /* KT_X_CONST */
    int src;     /* KT_X_LOAD */
    int ndim;
    struct kt_affine *idx; /* KT_X_LOAD: ndim entries, owned */
    int guarded;
    float pad_value;
    struct kt_expr *a, *b; /* operands, owned */
};

/* Number of operands of op (0, 1 or 2). */
int kt_xop_arity(enum kt_xop op);
/* Source-language name of a function op ("exp", "max", ...) or NULL. */
const char *kt_xop_name(enum kt_xop op);
struct kt_expr *kt_expr_new(enum kt_xop op);
struct kt_expr *kt_expr_clone(const struct kt_expr *e);
void kt_expr_free(struct kt_expr *e); /* NULL is a no-op */
/* Whether load e's indexes use variable var. */
int kt_expr_load_uses(const struct kt_expr *e, int var);
/* Replaces every variable v of e's load indexes by rep[v] (v < nrep),
 * composing the affine forms.  KT_EINVAL for a variable >= nrep,
 * KT_ETOOBIG when a result has too many terms. */
int kt_expr_subst_axes(struct kt_expr *e, const struct kt_affine *rep,
                       int nrep);
/* Composes one affine form: out = a with each var v replaced by rep[v]. */
int kt_aff_compose(struct kt_affine *out, const struct kt_affine *a,
                   const struct kt_affine *rep, int nrep);
/* The value of op applied to a (and b for binary ops) in double precision:
 * the one definition of the operators' arithmetic, shared by constant
 * folding and the interpreter.  NAN for KT_X_CONST and KT_X_LOAD. */
double kt_xop_eval(enum kt_xop op, double a, double b);
/* 1 if e reads tensor (or buffer) t anywhere, else 0. */
int kt_expr_reads(const struct kt_expr *e, int t);
/* Arithmetic operations per evaluation (a load or constant costs 0). */
int kt_expr_flops(const struct kt_expr *e);
/* Coefficient of variable var in the row-major flat element offset of load
 * e into a tensor (or buffer) of the given shape (e->ndim dimensions). */
int64_t kt_load_flat_coef(const struct kt_expr *e, const int64_t *shape,
                          int var);

/* ---- Compute DAG ------------------------------------------------------- */
enum kt_tensor_kind {
    KT_TENSOR_INPUT,
    KT_TENSOR_INTERMEDIATE,
    KT_TENSOR_OUTPUT
};

struct kt_tensor {
    char name[KT_MAX_NAME];
    enum kt_tensor_kind kind;
    int ndim;
    int64_t shape[KT_MAX_DIMS];
    int producer; /* stage index, or -1 for inputs */
    int is_const; /* input known before any call (weights) */
};

enum kt_reduce {
    KT_ASSIGN, /* O[...] = e */
    KT_SUM,    /* O[...] += e, init 0 */
    KT_MAXR,   /* O[...] max= e, init -inf */
    KT_MINR    /* O[...] min= e, init +inf */
};

struct kt_axis {
    char name[KT_MAX_NAME];
    int64_t extent;
    int reduce; /* 1 for a reduction axis */
};

/* One stage: out[axes 0..nspatial) (op)= body.  Spatial axes come first,
 * in the order of the output's indexes; reduction axes follow.  Variables
 * in the body's affine indexes are axis numbers. */
struct kt_stage {
    char name[KT_MAX_NAME];
    int out; /* tensor written */
    int naxes;
    int nspatial;
    struct kt_axis axes[KT_MAX_AXES];
    enum kt_reduce op;
    struct kt_expr *body; /* owned */
    int is_pad;           /* inserted by the DAG builder for padding */
};

struct kt_dag {
    int ntensors;
    struct kt_tensor tensors[KT_MAX_TENSORS];
    int nstages;
    struct kt_stage stages[KT_MAX_STAGES]; /* topological order */
    double flops;  /* per kernel call; a multiply-add is 2 */
    char *key;     /* canonical workload key, owned */
    char hash[17]; /* kt_hash64 of key, hex */
};

/* A tensor shape given with a definition. */
struct kt_shape {
    char name[KT_MAX_NAME];
    int ndim;
    int64_t dims[KT_MAX_DIMS];
};

/* Parses a multi-stage definition (one statement per line; lines may also
 * be separated by ';') with the shapes of its inputs and, optionally, of its
 * intermediates and outputs, and builds the DAG: axis extents are inferred
 * from shapes, out-of-bounds reads get a padding stage, FLOPs and the
 * workload key are computed.  On error returns KT_EPARSE or KT_ESHAPE and
 * writes "line L, column C: expected ..." or the shape problem to err.
 * Caller frees *out with kt_dag_free. */
int kt_dag_parse(const char *text, const struct kt_shape *shapes, int nshapes,
                 struct kt_dag **out, char *err, size_t errlen);
/* kt_dag_parse with is_const[i] (may be NULL) saying that the input of
 * shapes[i] is a constant weight (kt_tensor.is_const, ":const" in the key). */
int kt_dag_parse_weights(const char *text, const struct kt_shape *shapes,
                         const int *is_const, int nshapes, struct kt_dag **out,
                         char *err, size_t errlen);
void kt_dag_free(struct kt_dag *dag);
/* Rebuilds the DAG of a workload key (kt_dag.key), e.g. of a stored trial;
 * the result's key equals key.  KT_EPARSE when it does not rebuild. */
int kt_dag_from_key(const char *key, struct kt_dag **out, char *err,
                    size_t errlen);
/* Index of the tensor called name, or -1. */
int kt_dag_find_tensor(const struct kt_dag *dag, const char *name);
/* Writes the DAG back as source text (one stage per line, canonical axis
 * names) into b; used for workload keys and for messages. */
void kt_dag_print(const struct kt_dag *dag, struct kt_buf *b);
/* Number of elements of tensor t. */
int64_t kt_tensor_elems(const struct kt_tensor *t);

/* Evaluates the DAG directly (no schedule, no code generation): the
 * independent reference used by tests.  bufs[t] points at tensor t's data
 * for every tensor (inputs filled by the caller; intermediates and outputs
 * written).  Accumulates in double. */
void kt_dag_interpret(const struct kt_dag *dag, float *const *bufs);

/* ---- Operator library --------------------------------------------------
 * Each builder writes a definition and its shapes; kt_op_build parses it. */
enum kt_epilogue_bits {
    KT_EPI_BIAS = 1,
    KT_EPI_RELU = 2,
};

struct kt_op_def {
    char name[64];
    char text[4096];
    int nshapes;
    struct kt_shape shapes[KT_MAX_TENSORS];
    int is_const[KT_MAX_TENSORS]; /* shapes[i] is a layer's weight */
    int wino_m, wino_r; /* Winograd F(m, r) (kt_op_conv2d_winograd), else 0 */
};

struct kt_conv2d_params {
    int64_t N, C, H, W, K, R, S;
    int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups;
    int epilogue; /* KT_EPI_* bits */
};

int kt_op_dense(struct kt_op_def *d, int64_t M, int64_t N, int64_t K,
                int epilogue);
int kt_op_matmul(struct kt_op_def *d, int64_t M, int64_t N, int64_t K);
/* The same product with B a constant weight (a layer's parameters, as an
 * ONNX MatMul or Gemm reading an initializer): a schedule may store B in
 * the layout it reads (a layout rewrite); name matmul_MxNxK_constb. */
int kt_op_matmul_const_b(struct kt_op_def *d, int64_t M, int64_t N, int64_t K);
int kt_op_batch_matmul(struct kt_op_def *d, int64_t B, int64_t M, int64_t N,
                       int64_t K, int transpose_b);
/* A pointwise convolution (1x1 window, stride 1, no padding) indexes the
 * H*W pixels as one axis (docs/compute.md); kt_op_conv2d_grid keeps y and
 * x apart for it too (an epilogue operand that varies along one only). */
int kt_op_conv2d(struct kt_op_def *d, const struct kt_conv2d_params *p);
int kt_op_conv2d_grid(struct kt_op_def *d, const struct kt_conv2d_params *p);
/* As kt_op_conv2d with the output size given (asymmetric padding: pad_h
 * and pad_w are the top and left pads; the bottom and right follow). */
int kt_op_conv2d_sized(struct kt_op_def *d, const struct kt_conv2d_params *p,
                       int64_t out_h, int64_t out_w);
int kt_op_pool2d(struct kt_op_def *d, int is_max, int64_t N, int64_t C,
                 int64_t H, int64_t W, int64_t kernel, int64_t stride,
                 int64_t pad);
int kt_op_global_avg_pool(struct kt_op_def *d, int64_t N, int64_t C, int64_t H,
                          int64_t W);
/* kind: "add", "mul", "relu", "hardswish", "sigmoid" over a 4-D shape. */
int kt_op_elementwise(struct kt_op_def *d, const char *kind, int64_t N,
                      int64_t C, int64_t H, int64_t W);
int kt_op_softmax(struct kt_op_def *d, int64_t rows, int64_t cols);

/* Softmax over the middle axis of X[outer, n, inner] (inner = 1 is
 * kt_op_softmax(outer, n)). */
int kt_op_softmax_axis(struct kt_op_def *d, int64_t outer, int64_t n,
                       int64_t inner);
/* Mean over the middle axis of X[outer, n, inner]: O[outer, inner]
 * (O[outer] when inner = 1). */
int kt_op_reduce_mean(struct kt_op_def *d, int64_t outer, int64_t n,
                      int64_t inner);
/* Layer normalization of each row of X[rows, cols] (no scale or shift;
 * those fuse as an epilogue): O = (X - mean) / sqrt(var + eps). */
int kt_op_layer_norm(struct kt_op_def *d, int64_t rows, int64_t cols,
                     double eps);

/* Pooling with separate window sizes, strides and begin pads per
 * dimension and the output size given (asymmetric padding, ceil mode).
 * An average that excludes padding (count_include_pad = 0) divides by a
 * second input Nrm[OH, OW] holding 1/(real elements of each window). */
struct kt_pool_params {
    int is_max;
    int64_t N, C, H, W;
    int64_t kh, kw, stride_h, stride_w, pad_h, pad_w, out_h, out_w;
    int count_include_pad;
};
int kt_op_pool(struct kt_op_def *d, const struct kt_pool_params *p);

/* Transposed convolution (groups 1, dilation 1) written as a gather over
 * the output's stride phases: O[n,f,y,a,x,b] (shape N x K x ceil(OH/Sh) x
 * Sh x ceil(OW/Sw) x Sw, the NCHW layout of the output when Sh divides OH
 * and Sw divides OW) += I[n,c,y+ch-q,x+cw-p] * W[c,f,q,a,p,b].  W is the
 * ONNX weight [C, K, R, S] laid out by phase:
 * W[c,f,q,a,p,b] = Wonnx[c,f,a+pad_h+Sh*(q-ch),b+pad_w+Sw*(p-cw)] (0 outside
 * the kernel); ch/cw are returned in *ch, *cw. */
struct kt_conv_t_params {
    int64_t N, C, H, W, K, R, S;
    int64_t stride_h, stride_w, pad_h, pad_w, out_h, out_w;
};
int kt_op_conv2d_transpose(struct kt_op_def *d,
                           const struct kt_conv_t_params *p, int64_t *ch,
                           int64_t *cw);

/* Winograd's minimal filtering F(m, r) along a convolution's rows
 * (docs/compute.md, "Winograd convolutions"): y = AT [(G g) . (BT d)]
 * computes the m outputs y_i = sum_j g_j d_(i+j) of an r-tap filter g over
 * alpha = m + r - 1 inputs d with alpha products. */
#define KT_WINO_MAX_ALPHA 8
struct kt_winograd {
    int m, r, alpha;
    double at[KT_WINO_MAX_ALPHA][KT_WINO_MAX_ALPHA]; /* m x alpha */
    double g[KT_WINO_MAX_ALPHA][KT_WINO_MAX_ALPHA];  /* alpha x r */
    double bt[KT_WINO_MAX_ALPHA][KT_WINO_MAX_ALPHA]; /* alpha x alpha */
};
/* KT_EINVAL when m + r - 1 > KT_WINO_MAX_ALPHA or m, r < 1. */
int kt_winograd_matrices(int m, int r, struct kt_winograd *w);
/* The row tile m of p's Winograd form, or 0 when it has none (groups,
 * stride or dilation along the rows, no tile of 4 or 2 rows divides the
 * output rows). */
int kt_winograd_tile(const struct kt_conv2d_params *p);
/* The row tile when p is worth computing in Winograd form: its FLOPs, the
 * transforms included, at most KT_WINO_MAX_WORK of the direct form's (the
 * transforms run below the products' share of the FMA peak), and the
 * direct form at least KT_WINO_MIN_MFLOP per call (three stages cost more
 * on small layers than they save); else 0. */
#define KT_WINO_MAX_WORK 0.7
#define KT_WINO_MIN_MFLOP 50.0
int kt_winograd_choose(const struct kt_conv2d_params *p);
/* p as Winograd F(m, R) along the rows: inputs I, the transformed weights
 * U [K, C, m+R-1, S] (kt_winograd_weights), BT and AT (kt_winograd_matrices
 * as floats, row-major); the output O [N, K, OH/m, m, OW] is NCHW's memory.
 * Named as kt_op_conv2d's layer with "_wino<m>" appended. */
int kt_op_conv2d_winograd(struct kt_op_def *d, const struct kt_conv2d_params *p,
                          int m);
/* U[f,c,e,s] = sum_j G[e,j] W[f,c,j,s] for W [K, C, r, S]. */
void kt_winograd_weights(const struct kt_winograd *w, int64_t K, int64_t C,
                         int64_t S, const float *W, float *U);

/* Appends a fused epilogue to d: d's output O is renamed Y, then 'stages'
 * (statements that read Y and write O last) and the shapes of their extra
 * inputs are added.  KT_ETOOBIG when the text or shapes do not fit. */
int kt_op_epilogue(struct kt_op_def *d, const char *stages,
                   const struct kt_shape *extra, int nextra);
/* Parses d into a DAG (see kt_dag_parse). */
int kt_op_build(const struct kt_op_def *d, struct kt_dag **out, char *err,
                size_t errlen);

/* ---- Schedules ---------------------------------------------------------
 * A schedule is a list of steps replayed on the DAG, as in Ansor.  Stage and
 * iterator numbers refer to the state at the time the step is applied (a
 * cache_write inserts a stage, shifting later stage numbers by one). */
enum kt_step_kind {
    KT_STEP_SPLIT,          /* "SP": stage, iter, lengths v[0..n) inner parts */
    KT_STEP_REORDER,        /* "RE": stage, v[0..n) new order of iterators */
    KT_STEP_FUSE,           /* "FU": stage, iter = first, n = how many */
    KT_STEP_COMPUTE_AT,     /* "CA": stage, v[0] target stage, v[1] its iter */
    KT_STEP_COMPUTE_INLINE, /* "CI": stage */
    KT_STEP_COMPUTE_ROOT,   /* "CR": stage */
    KT_STEP_CACHE_WRITE,    /* "CHW": stage */
    KT_STEP_ANNOTATE,       /* "AN": stage, iter, v[0] = enum kt_annot */
    KT_STEP_PRAGMA,         /* "PR": stage, iter, v[0] = auto_unroll_max_step */
    KT_STEP_CACHE_READ,     /* "CHR": stage (the reader), v[0] = tensor read */
    KT_STEP_LAYOUT_REWRITE, /* "LR": stage (a cache_read stage of a weight) */
    KT_STEP_NKINDS
};

enum kt_annot { KT_ANN_NONE, KT_ANN_PARALLEL, KT_ANN_VECTORIZE, KT_ANN_UNROLL };

struct kt_step {
    enum kt_step_kind kind;
    int stage;
    int iter;
    int n;
    int64_t v[KT_MAX_STEP_ARGS];
};

/* The replayed state.  Each axis of a stage is a sequence of parts (outer
 * to inner); an iterator covers one part, or several after a fuse. */
struct kt_part_ref {
    int axis;
    int part;
};

struct kt_iter {
    int64_t extent;
    int reduce; /* 0 spatial, 1 reduction, 2 fused mix */
    enum kt_annot ann;
    int auto_unroll_max_step; /* 0 = none */
    int nparts;
    struct kt_part_ref parts[KT_MAX_AXES * 2];
};

struct kt_sstage {
    char name[KT_MAX_NAME];
    int out; /* tensor written (index into state tensors) */
    int naxes, nspatial;
    struct kt_axis axes[KT_MAX_AXES];
    enum kt_reduce op;
    struct kt_expr *body; /* owned; loads name state tensor numbers */
    int is_pad;
    int nparts[KT_MAX_AXES];
    int64_t part_extent[KT_MAX_AXES][KT_MAX_PARTS];
    int niters;
    struct kt_iter iters[KT_MAX_ITERS];
    int inlined;
    int attach_stage; /* -1 = root */
    int attach_iter;
    int transformed; /* any split/reorder/fuse applied */
    int cache_read;  /* 1: a "_pack" copy made by cache_read */
    int prepacked;   /* cache_read stage moved out of the kernel
                               * into its pack routine (layout rewrite) */
};

struct kt_state {
    const struct kt_dag *dag; /* borrowed */
    int ntensors;
    struct kt_tensor tensors[KT_MAX_TENSORS];
    int nstages;
    struct kt_sstage *stages; /* nstages entries, owned */
    int nsteps, capsteps;
    struct kt_step *steps; /* the history, owned */
};

/* Initial state of a DAG (no steps).  Caller frees with kt_state_free. */
struct kt_state *kt_state_new(const struct kt_dag *dag);
struct kt_state *kt_state_clone(const struct kt_state *st);
void kt_state_free(struct kt_state *st);
/* Applies one step, validating it; on success it is appended to the
 * history.  On error the state is unchanged, KT_ESCHEDULE is returned and
 * err says which step and why. */
int kt_state_apply(struct kt_state *st, const struct kt_step *step, char *err,
                   size_t errlen);
/* Internal to ir/: opens slot idx of the stage list (later stages move up
 * one, references to them follow), for steps that insert a stage. */
void kt__state_open_stage(struct kt_state *st, int idx);
/* Internal to ir/: the cache_read and layout_rewrite steps (ir/pack.c). */
int kt__do_cache_read(struct kt_state *st, const struct kt_step *sp, char *err,
                      size_t errlen);
int kt__do_layout_rewrite(struct kt_state *st, const struct kt_step *sp,
                          char *err, size_t errlen);
/* Record code of a step kind ("SP", "RE", ...). */
const char *kt_step_name(enum kt_step_kind k);
/* Replays steps on a fresh state of dag. */
int kt_state_replay(const struct kt_dag *dag, const struct kt_step *steps,
                    int nsteps, struct kt_state **out, char *err,
                    size_t errlen);

/* Canonical JSON: {"v":1,"steps":[["SP",0,1,[8,16]],["AN",0,3,"vectorize"]]}
 * with no spaces; equal schedules give equal text (docs/schedule.md). */
void kt_steps_to_json(const struct kt_step *steps, int nsteps,
                      struct kt_buf *b);
/* Parses kt_steps_to_json output.  *steps is malloc'd (caller frees). */
int kt_steps_from_json(const char *json, struct kt_step **steps, int *nsteps,
                       char *err, size_t errlen);
/* Hex hash of the canonical JSON: a candidate's identity. */
void kt_steps_hash(const struct kt_step *steps, int nsteps, char out[17]);

/* ---- Loop tree ---------------------------------------------------------*/
enum kt_buf_scope {
    KT_BUF_ARG,   /* input or output: a kernel argument */
    KT_BUF_HEAP,  /* intermediate at root: allocated per call */
    KT_BUF_LOCAL, /* attached stage: a local tile inside a loop */
    KT_BUF_PACKED /* prepacked weights: filled once by the pack routine */
};

struct kt_lbuf {
    char name[KT_MAX_NAME + 8];
    enum kt_buf_scope scope;
    int tensor; /* state tensor number */
    int arg;    /* argument position for KT_BUF_ARG */
    int ndim;
    int64_t shape[KT_MAX_DIMS];
};
/* Elements of b (the product of its shape). */
int64_t kt_lbuf_elems(const struct kt_lbuf *b);
/* How the generated code lays b out for vectors of vector_bytes: the
 * extent of dimension d in memory (rows of local, intermediate and packed
 * buffers padded to whole vectors; arguments as they are) and the floats
 * b then takes.  A packed weight filled outside the generated code (the
 * compiler's pack evaluation) must use the same layout. */
int64_t kt_lbuf_pitch(const struct kt_lbuf *b, int d, int vector_bytes);
int64_t kt_lbuf_stored_elems(const struct kt_lbuf *b, int vector_bytes);

enum kt_node_kind {
    KT_N_SEQ,   /* children in order */
    KT_N_LOOP,  /* for var in [0, extent) */
    KT_N_LET,   /* var = (src / div) % mod, for fused loops */
    KT_N_ALLOC, /* buffer 'buf' lives for the children */
    KT_N_STORE  /* buf[idx] (op)= expr */
};

struct kt_node {
    enum kt_node_kind kind;
    int stage; /* state stage that produced the node */
    /* loop */
    int var;
    int64_t extent;
    enum kt_annot ann;
    int auto_unroll_max_step;
    int reduce; /* loop over a reduction axis */
    /* let */
    int src_var;
    int64_t div, mod;
    /* alloc and store */
    int buf;
    /* store */
    int ndim;
    struct kt_affine idx[KT_MAX_DIMS];
    enum kt_reduce op;    /* KT_ASSIGN for init and plain stores */
    struct kt_expr *expr; /* owned; loads name loop-tree buffers */
    int guarded; /* dropped outside the buffer (a stage padded past it) */
    /* children */
    int nkids, capkids;
    struct kt_node **kids;
};

struct kt_looptree {
    int nvars;
    char (*var_names)[24];
    int nbufs;
    struct kt_lbuf bufs[KT_MAX_TENSORS * 2];
    int nargs;                /* kernel arguments: inputs then outputs */
    int args[KT_MAX_TENSORS]; /* buffer number of each argument */
    struct kt_node *root;
    double flops;
    struct kt_node *pack_root; /* the pack routine's nest (NULL: none) */
};

/* Lowers a state to a loop tree: applies inlining, infers the regions of
 * attached stages and cache-write tiles, and places reduction inits.
 * Returns KT_ESCHEDULE with a message for schedules that cannot be lowered.
 * Caller frees *out with kt_looptree_free. */
int kt_lower(const struct kt_state *st, struct kt_looptree **out, char *err,
             size_t errlen);
void kt_looptree_free(struct kt_looptree *lt);
/* Writes a readable dump (for tests, docs and `kerntune` debugging). */
void kt_looptree_print(const struct kt_looptree *lt, struct kt_buf *b);
/* The program's identity: a hash of that dump and of the pack routine's.
 * Two schedules with equal hashes lower to the same program. */
uint64_t kt_looptree_hash(const struct kt_looptree *lt);

/* ---- C code generation ------------------------------------------------- */
/* A micro-kernel's shared input vectors are held in pinned registers when
 * at least KT_CODEGEN_PIN_MIN_VECTORS of them each feed at least
 * KT_CODEGEN_PIN_MIN_USES of its FMAs (ir/codegen_pin.c); the search
 * sizes whole rows of vectors by the same count (scheduler/search_grade.c). */
#define KT_CODEGEN_PIN_MIN_USES 3
#define KT_CODEGEN_PIN_MIN_VECTORS 3
/* Largest constant lane stride of a vector store that an AVX-512 target
 * (64-byte vectors) writes as that many masked stores rather than lane by
 * lane (docs/schedule.md); the search's fused consumers vectorize such a
 * stride over a vector of at most that many lanes (scheduler/search_build.c). */
#define KT_MAX_STRIDED_STORE 4
struct kt_codegen_opts {
    int vector_bytes;       /* 64 for AVX-512, 32 for AVX2, 16 for NEON/SSE */
    int max_unrolled_stmts; /* bound on straight-line code per micro-kernel */
    /* 0: prepacked weights live in static module storage (one copy per
     * module); 1: they are caller-owned arguments after the kernel's own,
     * args[nargs + k] for the k-th KT_BUF_PACKED buffer, written by the pack
     * routine and read by the kernel (a library kernel called for several
     * layers with different weights). */
    int packed_args;
};

/* Defaults for the machine this process runs on. */
void kt_codegen_default_opts(struct kt_codegen_opts *o);

/* Lanes of the vector the generator emits at offset at of a vectorized
 * loop of extent e (1: a scalar).  The widest width dividing e when it is
 * the target's widest or at least 8 lanes (every chunk then as aligned as
 * the rows it reads); otherwise the widest vector that still fits, so an
 * extent like 197 or 20 runs as 16-lane vectors and a narrow tail (12 x 16
 * + 4 + 1, 16 + 4) instead of scalars or 4-lane vectors.  A loop that
 * runs along whole padded rows only (kt_lbuf_pitch: a register tile
 * accumulated in a local tile from rewritten weights) takes whole target
 * vectors instead, the last one running into the padding (40 = 3 x 16,
 * 197 = 13 x 16). */
int kt_vector_chunk_lanes(int vector_bytes, int64_t e, int64_t at);
/* How many such chunks cover a loop of extent e. */
int64_t kt_vector_chunks(int vector_bytes, int64_t e);
/* How many vectors cover a loop along the whole rows, e long, of a local
 * buffer (kt_lbuf_pitch pads rows longer than half a vector, and the loop
 * runs whole vectors into the padding: 14 lanes are one vector). */
int64_t kt_vector_chunks_padded(int vector_bytes, int64_t e);

/* The weight of the largest straight-line block the C compiler sees for
 * lt after the generator's expansion and the unroll pragmas it emits
 * (statements; a load gathered lane by lane weighs its lanes), and in
 * *total_weight (may be NULL) that of all the code: predictors of build
 * time that the search uses to drop candidates before building. */
int64_t kt_codegen_block_size(const struct kt_looptree *lt,
                              const struct kt_codegen_opts *o,
                              int64_t *total_weight);

/* Marks in window[var] (lt->nvars + 1 entries, zeroed by the caller) the
 * loops of lt's kernel the generator unrolls as window loops: their
 * iterations read vectors the micro-kernel below them reads at other
 * positions (docs/schedule.md, Generated C).  The cost model counts them
 * with the loops annotated unroll. */
void kt_codegen_window_loops(const struct kt_looptree *lt,
                             const struct kt_codegen_opts *o,
                             unsigned char *window);

/* Appends "static void fname(float *const *args) {...}" for lt (and, when
 * lt has a pack routine, its storage and "static void fname_pack(...)"
 * before it), after a gcc "#pragma GCC optimize" that holds for the rest
 * of the file (two -O3 loop passes off: docs/measure.md).  Errors
 * (KT_ESCHEDULE) mean the tree uses something the generator cannot
 * emit. */
int kt_codegen_function(const struct kt_looptree *lt,
                        const struct kt_codegen_opts *o, const char *fname,
                        struct kt_buf *out, char *err, size_t errlen);

/* Internal to ir/: the naive reference version of kt_codegen_function. */
int kt__codegen_reference(const struct kt_looptree *lt,
                          const struct kt_codegen_opts *o, const char *fname,
                          struct kt_buf *out, char *err, size_t errlen);

/* Internal to ir/: the marker KT_MODULE_PRELUDE_END and what opens the
 * shared part (its optimization level). */
void kt__codegen_shared_begin(struct kt_buf *out);
/* Internal to ir/: kt_reference calling function `reference`,
 * kt_set_threads, what closes the shared part and the marker
 * KT_MODULE_SHARED_END. */
void kt__codegen_shared_end(struct kt_buf *out, const char *reference);

/* The shared prelude of generated code (includes, min/max and the vector
 * helpers kt_codegen_function's output uses); once per C file. */
void kt_codegen_prelude(struct kt_buf *out);

/* A whole build unit for one candidate, with the ABI the runner expects:
 *
 *   const char kt_workload_hash[17];
 *   const int kt_nbufs;                    inputs, then outputs
 *   const long long kt_buf_elems[];
 *   const unsigned char kt_buf_is_output[];
 *   const double kt_flops;
 *   void kt_reference(float *const *bufs); naive loops, no schedule
 *   void kt_kernel(float *const *bufs);    the candidate
 *   void kt_set_threads(int n);            OpenMP threads for kt_kernel
 *
 * and, when the schedule rewrites a constant weight's layout (LR):
 *
 *   const long long kt_pack_elems;
 *   void kt_pack(float *const *bufs);      fills the packed weights; call
 *                                          once before kt_kernel
 *
 * st may be NULL to emit only the reference (kt_kernel is then the
 * reference too).  The metadata, kt_reference and kt_set_threads come
 * first, between the marker lines KT_MODULE_PRELUDE_END and
 * KT_MODULE_SHARED_END (common.h): that part is the same for every
 * candidate of the DAG, so a builder may compile it once. */
int kt_codegen_module(const struct kt_state *st, const struct kt_dag *dag,
                      const struct kt_codegen_opts *o, struct kt_buf *out,
                      char *err, size_t errlen);
/* The same unit from trees already lowered: ref from kt_lower_reference
 * (one per DAG, shared by its candidates), cand the candidate's (NULL:
 * only the reference).  The trial path lowers each candidate once. */
int kt_codegen_module_lowered(const struct kt_looptree *ref,
                              const struct kt_looptree *cand,
                              const struct kt_dag *dag,
                              const struct kt_codegen_opts *o,
                              struct kt_buf *out, char *err, size_t errlen);
/* A module with the same ABI whose kernel (and reference) is a loop of
 * independent register-only vector FMAs of the target's width on every
 * thread (at most the worker's CPUs): timed like a candidate, it measures
 * the target's float FMA peak.  Each thread computes
 * kt_peak_probe_flops(o) FLOP per call (also the module's kt_flops); the
 * runner's kernel_threads note says how many ran. */
void kt_codegen_peak_probe(const struct kt_codegen_opts *o, struct kt_buf *out);
double kt_peak_probe_flops(const struct kt_codegen_opts *o);
/* The naive loop tree of dag's unscheduled state (the reference). */
int kt_lower_reference(const struct kt_dag *dag, struct kt_looptree **out,
                       char *err, size_t errlen);

#endif /* KT_IR_H */
