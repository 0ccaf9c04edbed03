/* int.h - shared between the files of onnx/ only. */
#ifndef KT_ONNX_INT_H
#define KT_ONNX_INT_H

#include "onnx.pb-c.h"
#include "onnx/onnx.h"

/* Import context: the graph being built plus the error buffer. */
struct kt__ox {
    struct kt_onnx_graph *g;
    int capvalues;
    int *hash; /* open addressing over values by name */
    int hashcap;
    char *err;
    size_t errlen;
    int flags;
};

/* Value index of name, or -1. */
int kt__ox_find(struct kt__ox *x, const char *name);
/* Adds a value (the name is copied); -1 and an error when it exists. */
int kt__ox_add_value(struct kt__ox *x, const char *name);
/* Sets v's data to a malloc'd buffer the graph owns. */
void kt__ox_set_owned(struct kt_onnx_value *v, int dtype, void *data,
                      size_t nbytes);
/* Reads a TensorProto into value v (dims, dtype, data). */
int kt__ox_tensor(struct kt__ox *x, struct kt_onnx_value *v,
                  const Onnx__TensorProto *t, const char *what);
/* Bytes of one element of dtype (0 for types the importer does not read). */
size_t kt__ox_dtype_size(int dtype);

/* "node 'name' (Op)" for messages. */
const char *kt__ox_node_label(const struct kt_onnx_node *n, char *buf,
                              size_t len);
/* Shape text "1x3x224x224" (or "?"). */
const char *kt__ox_shape_str(const struct kt_onnx_value *v, char *buf,
                             size_t len);

/* shape.c / layout.c: one node's shape inference. */
#define KT__OX_FOLD_MAX 4096                /* constants folded up to this */
#define KT__OX_ELEMS_MAX ((int64_t)1 << 40) /* any tensor, as the IR allows */
struct kt__ox_ctx {
    struct kt__ox *x;
    struct kt_onnx_graph *g;
    struct kt_onnx_node *n;
    int index;
};
/* Input / output i of the node, NULL when absent. */
struct kt_onnx_value *kt__ox_in(struct kt__ox_ctx *c, int i);
struct kt_onnx_value *kt__ox_out(struct kt__ox_ctx *c, int i);
/* KT_ESHAPE: "path: node 'b' (Op): input 'y' (from node 'a' (Op),
 * shape): problem". */
int kt__ox_mismatch(struct kt__ox_ctx *c, int i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Marks the node unsupported with a reason; returns 1. */
int kt__ox_unsupported(struct kt__ox_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void kt__ox_set_shape(struct kt_onnx_value *v, int ndim, const int64_t *dims,
                      int dtype);
int kt__ox_is_const(const struct kt_onnx_value *v);
/* A constant int list (at most max), or -1. */
int kt__ox_const_ints(const struct kt_onnx_value *v, int64_t *dst, int max);
/* Stores doubles as a constant of dtype (the graph owns it). */
void kt__ox_store_const(struct kt_onnx_value *v, int dtype, const double *vals,
                        int64_t n);
/* Copies src's constant data to dst (reshapes keep the data). */
void kt__ox_copy_const(struct kt_onnx_value *dst,
                       const struct kt_onnx_value *src);
/* axis in [-rank, rank) as a dim index, or -1. */
int kt__ox_norm_axis(int64_t axis, int rank);
/* A double as an int64 without undefined behaviour for huge values. */
int64_t kt__ox_clamp_i64(double d);
/* layout.c */
int kt__ox_infer_constant(struct kt__ox_ctx *c);
int kt__ox_infer_shape(struct kt__ox_ctx *c);
int kt__ox_infer_cast(struct kt__ox_ctx *c);
int kt__ox_infer_gather(struct kt__ox_ctx *c);
int kt__ox_infer_concat(struct kt__ox_ctx *c);
int kt__ox_infer_reshape(struct kt__ox_ctx *c);
int kt__ox_infer_flatten(struct kt__ox_ctx *c);
int kt__ox_infer_transpose(struct kt__ox_ctx *c);
int kt__ox_infer_slice(struct kt__ox_ctx *c);
int kt__ox_infer_squeeze(struct kt__ox_ctx *c);
int kt__ox_infer_unsqueeze(struct kt__ox_ctx *c);

/* shape.c: infers shapes (and folds constant shape arithmetic) node by
 * node; marks nodes it does not know as unsupported. */
int kt__ox_infer(struct kt__ox *x);
/* 1 if op is an elementwise op the partitioner can fuse. */
int kt__ox_is_elementwise(const char *op);

/* anchor.c: window geometry of Conv (kind 0), pools (1), ConvTranspose
 * (2): kernel, strides, dilations, begin/end pads, output size. */
struct kt__ox_window {
    int64_t k[2], s[2], d[2], pb[2], pe[2], out[2];
};
int kt__ox_window(struct kt__ox *x, const struct kt_onnx_node *n,
                  const int64_t hw[2], const int64_t kdef[2], int kind,
                  struct kt__ox_window *w);
/* ReduceMean's reduced axes as a bit set, -1 when not constant. */
int kt__ox_reduce_axes(struct kt__ox *x, const struct kt_onnx_node *n);
/* Shape rules of the anchors and Resize; *handled = 0 for other ops. */
int kt__ox_infer_anchor(struct kt__ox *x, struct kt_onnx_node *n, int *handled);

/* kernel.c: the compute definition of an anchor node (output O), with
 * bias (conv2d/dense: the KT_EPI_BIAS bit) and relu bits when asked; grid
 * keeps a pointwise convolution's y and x apart (kt_op_conv2d_grid). */
int kt__ox_anchor_def(struct kt__ox *x, struct kt_onnx_kernel *k, int epi_bits,
                      int grid);

/* epilogue.c: a kernel's group: the values computed inside it and the
 * stage that holds each one (-1 = the anchor's result Y). */
#define KT__OX_MAX_MEMBERS 16
struct kt__ox_group {
    int nvals;
    int val[64], stage[64];
};
int kt__ox_group_stage(const struct kt__ox_group *gr, int v);
void kt__ox_group_add(struct kt__ox_group *gr, int v, int stage);
/* Builds k's definition: the anchor (or, for an elementwise kernel,
 * nothing) and the first n members as epilogue stages; base holds the
 * values of the anchor's own nodes.  0, or an error in err. */
int kt__ox_gen_kernel(struct kt__ox *x, struct kt_onnx_kernel *k,
                      struct kt__ox_group *base, const int *members, int n,
                      char *err, size_t len);

/* fuse.c: the kernels (anchors, patterns, epilogues). */
int kt__ox_partition(struct kt__ox *x);

/* print.c: KT_EINVAL listing the unsupported nodes (op type, node names,
 * count), or with KT_ONNX_PARTIAL a warning naming the nodes that will run
 * untuned. */
int kt__ox_check_unsupported(struct kt__ox *x);

#endif /* KT_ONNX_INT_H */
