/* int.h - shared between the files of onnx/ only. */
#ifndef KT_ONNX_INT_H
#define KT_ONNX_INT_H

#include "onnx.pb-c.h"
#include "onnx/onnx.h"

/* Import context: the graph being built plus the error buffer. */
struct kt__ox {
    struct kt_onnx_graph *g;
    int capvalues;
    int *hash;                 /* open addressing over values by name */
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
int kt__ox_infer_anchor(struct kt__ox *x, struct kt_onnx_node *n,
                        int *handled);

/* kernel.c: the compute definition of an anchor node (output O), with
 * bias (conv2d/dense: the KT_EPI_BIAS bit) and relu bits when asked. */
int kt__ox_anchor_def(struct kt__ox *x, struct kt_onnx_kernel *k,
                      int epi_bits);

/* fuse.c: the kernels (anchors, patterns, epilogues). */
int kt__ox_partition(struct kt__ox *x);

/* print.c: KT_EINVAL listing the unsupported nodes (op type, node names,
 * count), or with KT_ONNX_PARTIAL a warning naming the nodes that will run
 * untuned. */
int kt__ox_check_unsupported(struct kt__ox *x);

#endif /* KT_ONNX_INT_H */
