/* onnx.h - ONNX models in: decoding (protobuf-c, Debian's onnx.proto),
 * shape inference over the whole graph, and the partition of the graph
 * into kernels to tune (an anchor operator plus the elementwise nodes
 * fused into it, TVM style) and nodes that run untuned (layout and cheap
 * elementwise ops).  docs/onnx.md lists the operators.
 *
 * The graph keeps every node in execution order with its tensors, shapes,
 * attributes and constant data (initializers and Constant nodes), so a
 * later stage can rebuild the network from it: each kernel names the nodes
 * it covers and its compute definition (struct kt_op_def); folded batch
 * norms and weight layouts are described per kernel.
 *
 * Depends on ir/ (operator library) and common/ only.  Not thread-safe per
 * graph; no global state. */
#ifndef KT_ONNX_H
#define KT_ONNX_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/common.h"
#include "ir/ir.h"

#define KT_ONNX_MAX_BYTES ((size_t)2 << 30) /* protobuf's own limit */
#define KT_ONNX_MAX_DIMS 8

/* ONNX TensorProto.DataType values the importer reads. */
enum kt_onnx_dtype {
    KT_ONNX_FLOAT = 1,
    KT_ONNX_UINT8 = 2,
    KT_ONNX_INT8 = 3,
    KT_ONNX_INT32 = 6,
    KT_ONNX_INT64 = 7,
    KT_ONNX_BOOL = 9,
    KT_ONNX_DOUBLE = 11
};

/* One tensor of the graph. */
struct kt_onnx_value {
    char *name;
    int ndim; /* -1 while unknown */
    int64_t dims[KT_ONNX_MAX_DIMS];
    int dtype;               /* enum kt_onnx_dtype (0 = unknown) */
    int producer;            /* node index, -1 for inputs and constants */
    int is_input, is_output; /* a graph input / output */
    /* Constants (initializers, Constant nodes, folded shape arithmetic):
     * data holds the elements in dtype, little endian; NULL otherwise. */
    const void *data;
    size_t nbytes;
    int owned; /* data was computed by the importer */
    int nconsumers;
};

enum kt_onnx_role {
    KT_ONNX_ROLE_TASK,       /* anchor of a kernel */
    KT_ONNX_ROLE_FUSED,      /* part of a kernel (epilogue, pattern) */
    KT_ONNX_ROLE_UNTUNED,    /* runs as plain code (layout, cheap) */
    KT_ONNX_ROLE_CONSTANT,   /* folded at import (Constant, Shape...) */
    KT_ONNX_ROLE_UNSUPPORTED /* --partial: not understood */
};

struct kt_onnx_node {
    const char *op;   /* op_type, e.g. "Conv" */
    const char *name; /* node name ("" when unnamed) */
    const char *domain;
    int nin, nout;
    int *in, *out;     /* value indices; -1 = optional, absent */
    int role;          /* enum kt_onnx_role */
    int kernel;        /* kernel index for TASK / FUSED, else -1 */
    const void *proto; /* the NodeProto (for the attributes) */
    char *note;        /* why it is unsupported, else NULL */
};

enum kt_onnx_kernel_kind {
    KT_ONNX_K_OP,         /* one operator (Conv, MatMul, ...) */
    KT_ONNX_K_LAYER_NORM, /* the ReduceMean/Sub/Pow/.../Div pattern */
    KT_ONNX_K_ELEMENTWISE /* an elementwise chain (GELU) */
};

/* One kernel: a tuning task of the model (equal kernels share a task).
 * Its definition's tensors: the anchor's inputs as the IR operator names
 * them (docs/compute.md), then P0, P1, ... = extra_values[0], [1], ...
 * (residuals, per-channel operands) read by the fused epilogue. */
struct kt_onnx_kernel {
    int kind;      /* enum kt_onnx_kernel_kind */
    char name[96]; /* the definition's name, e.g.
                                  * "conv2d_n1_c8_h24_w96_..._bias_relu" */
    char tag[64];  /* similarity group tag */
    int anchor;    /* node index */
    int nnodes;
    int *nodes;               /* anchor, then fused nodes, in order */
    int output;               /* value the kernel writes */
    int task;                 /* task number: kernels with equal workloads
                                  * share one (the index kt_tasks_extract
                                  * gives it) */
    int bn_folded;            /* a BatchNormalization is folded into the
                                  * anchor's weights and bias */
    int64_t conv_t_offset[2]; /* ConvTranspose: ch, cw of the phase
                                  * weight layout (kt_op_conv2d_transpose) */
    int nextra;
    int extra_values[16]; /* value of P<i>; for a batch norm that is
                                  * not folded, its scale input stands for
                                  * gamma/sqrt(var+eps) and its bias input
                                  * for beta-mean*scale */
    struct kt_op_def def; /* the compute definition */
    double flops;
};

struct kt_onnx_graph {
    char *path;
    int64_t opset;
    int nvalues;
    struct kt_onnx_value *values;
    int nnodes;
    struct kt_onnx_node *nodes; /* execution order */
    int ninputs, noutputs;
    int *inputs, *outputs; /* value indices */
    int nkernels;
    struct kt_onnx_kernel *kernels;
    int ntasks;       /* distinct workloads among the kernels */
    int nunsupported; /* nodes the importer does not support */
    void *model;      /* the decoded ModelProto (private) */
};

/* A shape for a graph input (fixes dynamic dims). */
struct kt_onnx_input {
    const char *name;
    int ndim;
    const int64_t *dims;
};

enum kt_onnx_flags {
    KT_ONNX_PARTIAL = 1, /* unsupported nodes run untuned */
    KT_ONNX_WINOGRAD = 2 /* convolutions in Winograd form where it pays */
};

/* Reads, decodes and partitions the ONNX model at path.  inputs fix the
 * shapes of graph inputs (required for dynamic dims).  On error returns
 * KT_EPARSE (not a model: malformed or truncated protobuf, bad graph),
 * KT_ESHAPE (shapes: unknown input dim, producer/consumer mismatch),
 * KT_EINVAL (ops the importer does not support, listed with op type,
 * node name and count; not with KT_ONNX_PARTIAL) or -errno, with
 * "path: message" in err.  Caller frees *out with kt_onnx_free. */
int kt_onnx_import(const char *path, const struct kt_onnx_input *inputs,
                   int ninputs, int flags, struct kt_onnx_graph **out,
                   char *err, size_t errlen);
/* As kt_onnx_import from bytes in memory (path names it in messages). */
int kt_onnx_import_mem(const char *path, const void *data, size_t len,
                       const struct kt_onnx_input *inputs, int ninputs,
                       int flags, struct kt_onnx_graph **out, char *err,
                       size_t errlen);
void kt_onnx_free(struct kt_onnx_graph *g); /* NULL is a no-op */

/* Attributes of a node (defaults when absent). */
int64_t kt_onnx_attr_int(const struct kt_onnx_node *n, const char *name,
                         int64_t def);
double kt_onnx_attr_float(const struct kt_onnx_node *n, const char *name,
                          double def);
/* The ints of a list attribute: copies them to v and returns the count
 * (0 when absent, -1 when there are more than max). */
int kt_onnx_attr_ints(const struct kt_onnx_node *n, const char *name,
                      int64_t *v, int max);
/* A string attribute copied into buf (at most len - 1 bytes), or def. */
const char *kt_onnx_attr_str(const struct kt_onnx_node *n, const char *name,
                             const char *def, char *buf, size_t len);

/* Element i of constant value v as a double (0 when v is not constant). */
double kt_onnx_value_get(const struct kt_onnx_value *v, int64_t i);
int64_t kt_onnx_value_elems(const struct kt_onnx_value *v);

/* Writes the graph in execution order: per node its op, name, input and
 * output tensors with shapes, and its role ("task N", "fused into task N",
 * "untuned", "constant", "unsupported"). */
void kt_onnx_print_graph(const struct kt_onnx_graph *g, FILE *f);

#endif /* KT_ONNX_H */
