/* suite.h - the benchmark suite's timing program (suite_time.c) and its
 * oneDNN baselines (suite_dnnl.c); see bench/suite.sh. */
#ifndef KT_BENCH_SUITE_H
#define KT_BENCH_SUITE_H

#include <stddef.h>

#include "config/config.h"
#include "ir/ir.h"

/* One suite task's operator and its tensors (the kernel's own buffers, in
 * the layouts of docs/compute.md: NCHW activations, KCRS conv weights,
 * dense weights [out, in]). */
struct suite_op {
    const struct kt_layer *layer;
    const float *x;          /* first input: A, I or X */
    const float *w;          /* second input: B or W; NULL for pools, softmax */
    const float *bias;       /* NULL without a bias */
    float *out;
};

/* The conv2d parameters of a conv2d layer. */
void suite_conv_params(const struct kt_layer *L, struct kt_conv2d_params *p);

struct suite_dnnl;
/* How many oneDNN implementations the suite times for op (0 when oneDNN
 * has none): dnnl_sgemm and the matmul primitive for matrix products, the
 * convolution, pooling and softmax primitives otherwise. */
int suite_dnnl_variants(const struct suite_op *op);
/* Prepares variant i of op (constant weights reordered here, outside the
 * timing); name gets what runs, e.g. "conv jit:avx512_core".  NULL with a
 * message in err when oneDNN refuses. */
struct suite_dnnl *suite_dnnl_new(const struct suite_op *op, int i, char *name,
                                  size_t namelen, char *err, size_t errlen);
/* Runs it once (void * for kt_bench_time). */
void suite_dnnl_run(void *d);
void suite_dnnl_free(struct suite_dnnl *d);

#endif /* KT_BENCH_SUITE_H */
