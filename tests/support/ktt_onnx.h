/* ktt_onnx.h - tests build their own ONNX models: a small writer over the
 * protobuf-c structs generated from Debian's onnx.proto. */
#ifndef KTT_ONNX_H
#define KTT_ONNX_H

#include <stddef.h>
#include <stdint.h>

struct ktt_onnx;
struct ktt_onnx_node;

/* A model with the default-domain opset given. */
struct ktt_onnx *ktt_onnx_new(int64_t opset);
void ktt_onnx_free(struct ktt_onnx *b);
/* A float graph input; a dim of -1 is dynamic (dim_param "N"). */
void ktt_onnx_input(struct ktt_onnx *b, const char *name, int ndim,
                    const int64_t *dims);
void ktt_onnx_output(struct ktt_onnx *b, const char *name);
/* Element i of a float initializer given without data. */
float ktt_onnx_fill(int64_t i);
/* A float initializer; data NULL fills it with ktt_onnx_fill. */
void ktt_onnx_init(struct ktt_onnx *b, const char *name, int ndim,
                   const int64_t *dims, const float *data);
void ktt_onnx_init_i64(struct ktt_onnx *b, const char *name, int n,
                       const int64_t *vals);
/* A scalar float initializer. */
void ktt_onnx_scalar(struct ktt_onnx *b, const char *name, float v);
/* A node: inputs and outputs are comma-separated names ("" entries are
 * absent optional inputs, e.g. "x,,s"). */
struct ktt_onnx_node *ktt_onnx_node(struct ktt_onnx *b, const char *op,
                                    const char *name, const char *inputs,
                                    const char *outputs);
/* Layer l of a PP-LCNet-like stack: in -> Conv (1x1 weights "w<l>",
 * C x C, filled) -> Mul by scalar "s<l>" = scale -> Add scalar "t<l>" =
 * shift -> out. */
void ktt_onnx_conv_affine(struct ktt_onnx *b, int l, int channels,
                          const char *in, float scale, float shift,
                          const char *out);
void ktt_attr_int(struct ktt_onnx_node *n, const char *name, int64_t v);
void ktt_attr_ints(struct ktt_onnx_node *n, const char *name, int count,
                   const int64_t *v);
void ktt_attr_float(struct ktt_onnx_node *n, const char *name, float v);
void ktt_attr_str(struct ktt_onnx_node *n, const char *name, const char *v);
/* The serialized model (malloc'd; caller frees). */
uint8_t *ktt_onnx_pack(struct ktt_onnx *b, size_t *len);
/* Writes the model to path; 0 on success. */
int ktt_onnx_write(struct ktt_onnx *b, const char *path);

#endif /* KTT_ONNX_H */
