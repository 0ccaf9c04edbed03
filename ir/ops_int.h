/* ops_int.h - helpers shared by the operator library's files (ir/ops.c:
 * the contractions, ir/ops_reduce.c: pooling, elementwise, normalizations);
 * not a public header. */
#ifndef KT_OPS_INT_H
#define KT_OPS_INT_H

#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

/* Clears d, names it "invalid" with the reason in d->text: KT_EINVAL. */
int kt__op_bad(struct kt_op_def *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void kt__op_add_shape(struct kt_op_def *d, const char *name, int ndim,
                      const int64_t *dims);
/* A layer's weights (d->is_const): the same on every call, so their layout
 * may be rewritten once, outside the timed kernel. */
void kt__op_add_weight(struct kt_op_def *d, const char *name, int ndim,
                       const int64_t *dims);
/* Appends "O[idx] = T[idx] + B[bidx]" with the relu of KT_EPI_* bits epi. */
void kt__op_put_epilogue(struct kt_op_def *d, int epi, const char *idx,
                         const char *bidx);
/* Appends formatted text to d->text. */
void kt__op_put(struct kt_op_def *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void kt__op_set_name(struct kt_op_def *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Writes "y*S+r*D-P" with unit factors and a zero offset left out. */
void kt__op_window_index(char *buf, size_t n, const char *out, int64_t stride,
                         const char *win, int64_t dil, int64_t pad);
/* Output size of a sliding window, or a value <= 0 when none fits. */
int64_t kt__op_out_size(int64_t in, int64_t pad, int64_t dil, int64_t win,
                        int64_t stride);
#endif /* KT_OPS_INT_H */
