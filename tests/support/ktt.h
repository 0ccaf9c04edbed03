/* ktt.h - support code shared by the unit tests and benchmarks: building
 * generated C into shared objects, running kernels against the DAG
 * interpreter, and a seeded generator of random valid schedules. */
#ifndef KT_TESTS_KTT_H
#define KT_TESTS_KTT_H

#include "ir/ir.h"

typedef void (*ktt_kernel_fn)(float *const *bufs);

struct kt_search;
/* A search of dag with the sketch-random policy, the given population,
 * seed and mutation probability (< 0: the default); NULL (the reason on
 * stderr) if it cannot be made. */
struct kt_search *ktt_sketch_search(const struct kt_dag *dag, int population,
                                    uint64_t seed, double mutation_prob);

/* Compiles C source into a shared object with the host compiler
 * (gcc -O3 -march=native -fopenmp -shared -fPIC unless $KT_TEST_CC /
 * $KT_TEST_CFLAGS say otherwise).  Returns a dlopen handle or NULL with the
 * compiler's message in err. */
void *ktt_build(const char *src, char *err, size_t errlen);
/* As ktt_build with a target's compiler line (cc and cflags, as
 * kt_target_cc_line() writes it) and nothing else, as the measuring
 * worker builds a candidate (measure/worker/builder.c). */
void *ktt_build_cc(const char *src, const char *cc_line, char *err,
                   size_t errlen);

/* Buffers for every tensor of a DAG, inputs filled from a seeded RNG. */
struct ktt_bufs {
    int n;
    float *t[KT_MAX_TENSORS];
    int64_t elems[KT_MAX_TENSORS];
};
void ktt_bufs_init(struct ktt_bufs *b, const struct kt_dag *dag, uint64_t seed);
void ktt_bufs_free(struct ktt_bufs *b);
/* Every buffer is followed by KTT_CANARY floats of KTT_CANARY_VALUE; 1 when
 * they are all still there (nothing wrote past the end). */
#define KTT_CANARY 1024
#define KTT_CANARY_VALUE 1234.5f
int ktt_bufs_intact(const struct ktt_bufs *b);

/* Kernel argument list (inputs then outputs) for a DAG, pointing into b. */
int ktt_args(const struct kt_dag *dag, struct ktt_bufs *b, float **args);

/* Relative L2 error of got against want (n floats); NaN gives INFINITY. */
double ktt_rel_l2(const float *got, const float *want, int64_t n);

/* Applies a random sequence of valid steps, in the shape the CPU sketch
 * rules produce (tiling, cache_write, compute_at of producers into their
 * consumer's tile loop, inlining, parallel/vectorize/unroll annotations and
 * auto-unroll pragmas).  Returns a state the caller frees. */
struct kt_state *ktt_random_schedule(const struct kt_dag *dag,
                                     struct kt_rng *rng);

/* The vector width ktt_module_many generates for: 0 (the default) the
 * host's as kt_codegen_default_opts sees it, else this many bytes (tests
 * that inspect 16-lane code set 64: valgrind's CPU, or an AVX2 host,
 * gives 32). */
extern int ktt_vector_bytes;

/* Source holding the reference and ncand candidate kernels (cand_0 ...),
 * reachable through "ktt_cands" (an array of function pointers), and their
 * pack routines through "ktt_packs" (NULL for a kernel without one).  Candidates
 * that fail to lower or generate are left out and counted in *skipped
 * (messages go to stderr).  Caller frees the text. */
char *ktt_module_many(const struct kt_dag *dag, struct kt_state *const *cands,
                      int ncand, int *generated, int *skipped);

/* Generates the candidates with ktt_module_many, compiles them into one
 * shared object and runs the reference and every generated candidate on
 * buffers filled from seed, comparing each output with kt_dag_interpret
 * (relative L2 below 1e-4).  *skipped gets the number of candidates that
 * did not lower or generate.  Returns 0 when everything that ran matched,
 * -1 otherwise (each failure is described on stderr, with the candidate's
 * steps).  A candidate wrong as built here but right when built by
 * gcc -O0 and by clang -O3 is a gcc miscompile: described, counted in
 * ktt_gcc_miscompiles and not a failure.  cands stay the caller's. */
extern int ktt_gcc_miscompiles;
int ktt_check_many(const struct kt_dag *dag, struct kt_state *const *cands,
                   int ncand, uint64_t seed, int *skipped);

/* The state of dag after the steps of a schedule's JSON form: NULL when
 * they do not parse or replay (the message on stderr).  Caller frees. */
struct kt_state *ktt_replay_json(const struct kt_dag *dag, const char *json);

/* How many times needle occurs in hay (a generated module's C). */
int ktt_count(const char *hay, const char *needle);

/* The weight of st's generated code for vector_bytes (kt_codegen_block_size's
 * total), -1 when it does not lower; *bound gets the search's bound on it
 * (twice max_unrolled_stmts, scheduler/search_evo.c). */
int64_t ktt_code_weight(const struct kt_state *st, int vector_bytes,
                        int64_t *bound);
/* 1 when st's generated code for vector_bytes lowers and weighs at most
 * the search's bound; else 0, saying what it weighs on stderr. */
int ktt_within_code_bound(const struct kt_state *st, int vector_bytes);

/* The C of one candidate (from its function "cand_0(" on), generated
 * by ktt_module_many and checked by ktt_check_many with seed: NULL when
 * it did not generate or did not match (described on stderr).  Caller
 * frees. */
char *ktt_checked_c(const struct kt_dag *dag, struct kt_state *st,
                    uint64_t seed);

/* ktt_checked_c with the code generated for vector_bytes-wide vectors
 * (ktt_vector_bytes is restored after). */
char *ktt_checked_c_at(const struct kt_dag *dag, struct kt_state *st,
                       int vector_bytes, uint64_t seed);

/* A square conv2d with batch 1 (H = W, R = S, the same stride, padding and
 * dilation in both directions) for the table-driven tests. */
struct kt_conv2d_params ktt_square_conv(int64_t C, int64_t H, int64_t K,
                                        int64_t R, int64_t stride, int64_t pad,
                                        int64_t dil, int64_t groups, int epi);
/* Its definition; returns what kt_op_conv2d returns. */
int ktt_conv_def(struct kt_op_def *d, int64_t C, int64_t H, int64_t K,
                 int64_t R, int64_t stride, int64_t pad, int64_t dil,
                 int64_t groups, int epi);
/* A 3 x 3 depthwise convolution over 16 channels of side x side, pad 1,
 * bias + relu (stage 0 pads I, 1 is T, 2 the epilogue into O); aborts,
 * saying why on stderr, when it does not build. */
struct kt_dag *ktt_depthwise3x3(int64_t side, int64_t stride);
/* A dense layer O[M, N] = A[M, K] x W[N, K]^T (kt_op_dense, no epilogue);
 * aborts, saying why on stderr, when it does not build. */
struct kt_dag *ktt_dense(int64_t M, int64_t N, int64_t K);
/* A search over dag with the default options for a target with 64-byte
 * vectors (AVX-512), whatever the host's; aborts, saying why on stderr,
 * when it cannot be made.  kt_search_free frees it. */
struct kt_search;
struct kt_search *ktt_avx512_search(const struct kt_dag *dag);
/* The same with y and x apart when it is pointwise (kt_op_conv2d_grid). */
int ktt_conv_grid_def(struct kt_op_def *d, int64_t C, int64_t H, int64_t K,
                      int64_t R, int64_t stride, int64_t pad, int64_t dil,
                      int64_t groups, int epi);

/* conv p computed directly in double (groups, strides, dilations, the
 * KT_EPI_* epilogue), NCHW in and out, weights [K, C/groups, R, S]. */
void ktt_naive_conv(const struct kt_conv2d_params *p, const float *in,
                    const float *w, const float *bias, float *out);

/* A synthetic cost in seconds for training the model in tests and
 * benchmarks that have no measurements: the floating-point work of the
 * feature rows (nrows x KT_FEATURE_LEN, costmodel.h) over the vector length
 * and the parallel extent (at most 2 cores).  Not a prediction of anything
 * real; only something the model can learn. */
double ktt_synthetic_cost(const float *rows, int nrows);

/* The whole file dir/name (name alone when dir is NULL), NUL-terminated,
 * with its length in *len when len is not NULL; NULL when it cannot be
 * opened.  The caller frees it. */
char *ktt_slurp(const char *dir, const char *name, size_t *len);

#endif
