/* layout.c - shape rules of the constant and layout operators (Constant,
 * Shape, Cast, Gather, Concat, Reshape, Flatten, Transpose, Slice,
 * Squeeze, Unsqueeze); small constant results are folded, so Reshape
 * targets computed from shapes are known at import. */
#include "onnx/int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
kt__ox_infer_constant(struct kt__ox_ctx *c)
{
    const Onnx__NodeProto *p = c->n->proto;
    struct kt_onnx_value *o = kt__ox_out(c, 0);
    size_t i;

    for (i = 0; o != NULL && i < p->n_attribute; i++) {
        const Onnx__AttributeProto *a = p->attribute[i];
        double vals[1024];
        size_t k;
        if (a->name == NULL)
            continue;
        if (strcmp(a->name, "value") == 0 && a->t != NULL)
            return kt__ox_tensor(c->x, o, a->t, "Constant");
        if (strcmp(a->name, "value_float") == 0 ||
            strcmp(a->name, "value_int") == 0) {
            vals[0] = a->name[6] == 'f' ? a->f : (double)a->i;
            kt__ox_set_shape(o, 0, NULL, 0);
            kt__ox_store_const(o,
                               a->name[6] == 'f' ? KT_ONNX_FLOAT
                                                 : KT_ONNX_INT64,
                               vals, 1);
            return 0;
        }
        if ((strcmp(a->name, "value_floats") == 0 && a->n_floats <= 1024) ||
            (strcmp(a->name, "value_ints") == 0 && a->n_ints <= 1024)) {
            int fl = a->name[6] == 'f';
            int64_t n = fl ? (int64_t)a->n_floats : (int64_t)a->n_ints;
            for (k = 0; k < (size_t)n; k++)
                vals[k] = fl ? a->floats[k] : (double)a->ints[k];
            kt__ox_set_shape(o, 1, &n, 0);
            kt__ox_store_const(o, fl ? KT_ONNX_FLOAT : KT_ONNX_INT64, vals, n);
            return 0;
        }
    }
    return kt__ox_unsupported(c, "no value attribute the importer reads");
}

int
kt__ox_infer_shape(struct kt__ox_ctx *c)
{
    struct kt_onnx_value *a = kt__ox_in(c, 0);
    double vals[KT_ONNX_MAX_DIMS];
    int64_t start = kt_onnx_attr_int(c->n, "start", 0);
    int64_t end = kt_onnx_attr_int(c->n, "end", a != NULL ? a->ndim : 0), n;
    int i;

    if (a == NULL)
        return kt__ox_mismatch(c, 0, "needs an input");
    if (start < 0)
        start += a->ndim;
    if (end < 0)
        end += a->ndim;
    start = start < 0 ? 0 : start > a->ndim ? a->ndim : start;
    end = end < start ? start : end > a->ndim ? a->ndim : end;
    n = end - start;
    for (i = 0; i < n; i++)
        vals[i] = (double)a->dims[start + i];
    kt__ox_set_shape(kt__ox_out(c, 0), 1, &n, KT_ONNX_INT64);
    kt__ox_store_const(kt__ox_out(c, 0), KT_ONNX_INT64, vals, n);
    return 0;
}

int
kt__ox_infer_cast(struct kt__ox_ctx *c)
{
    struct kt_onnx_value *a = kt__ox_in(c, 0), *o = kt__ox_out(c, 0);
    int to = (int)kt_onnx_attr_int(c->n, "to", KT_ONNX_FLOAT);
    int64_t n, k;
    double *vals;

    if (a == NULL)
        return kt__ox_mismatch(c, 0, "needs an input");
    kt__ox_set_shape(o, a->ndim, a->dims, to);
    o->dtype = to;
    n = kt_onnx_value_elems(a);
    if (!kt__ox_is_const(a) || n > KT__OX_FOLD_MAX ||
        kt__ox_dtype_size(to) == 0)
        return 0;
    vals = kt_xcalloc((size_t)n + 1, sizeof(*vals));
    for (k = 0; k < n; k++)
        vals[k] = kt_onnx_value_get(a, k);
    kt__ox_store_const(o, to, vals, n);
    free(vals);
    return 0;
}

int
kt__ox_infer_gather(struct kt__ox_ctx *c)
{
    struct kt_onnx_value *a = kt__ox_in(c, 0), *idx = kt__ox_in(c, 1),
                         *o = kt__ox_out(c, 0);
    int64_t dims[KT_ONNX_MAX_DIMS], n, inner = 1, k;
    int axis, r = 0, i;
    double *vals;

    if (a == NULL || idx == NULL)
        return kt__ox_mismatch(c, 0, "needs data and indices");
    axis = kt__ox_norm_axis(kt_onnx_attr_int(c->n, "axis", 0), a->ndim);
    if (axis < 0 || a->ndim + idx->ndim - 1 > KT_ONNX_MAX_DIMS)
        return kt__ox_mismatch(c, 0, "axis out of range");
    for (i = 0; i < axis; i++)
        dims[r++] = a->dims[i];
    for (i = 0; i < idx->ndim; i++)
        dims[r++] = idx->dims[i];
    for (i = axis + 1; i < a->ndim; i++) {
        dims[r++] = a->dims[i];
        inner *= a->dims[i];
    }
    kt__ox_set_shape(o, r, dims, a->dtype);
    n = kt_onnx_value_elems(o);
    if (!kt__ox_is_const(a) || !kt__ox_is_const(idx) || n > KT__OX_FOLD_MAX)
        return 0;
    vals = kt_xcalloc((size_t)n + 1, sizeof(*vals));
    for (k = 0; k < n; k++) {
        int64_t in_i = k % inner, rest = k / inner;
        int64_t j = rest % kt_onnx_value_elems(idx),
                outer = rest / kt_onnx_value_elems(idx);
        int64_t g = kt__ox_clamp_i64(kt_onnx_value_get(idx, j));
        if (g < 0)
            g += a->dims[axis];
        vals[k] = kt_onnx_value_get(a,
                                    (outer * a->dims[axis] + g) * inner + in_i);
    }
    kt__ox_store_const(o, a->dtype, vals, n);
    free(vals);
    return 0;
}

int
kt__ox_infer_concat(struct kt__ox_ctx *c)
{
    struct kt_onnx_value *a = kt__ox_in(c, 0), *o = kt__ox_out(c, 0);
    int64_t dims[KT_ONNX_MAX_DIMS];
    int axis, i, d, allc = 1;

    if (a == NULL)
        return kt__ox_mismatch(c, 0, "needs inputs");
    axis = kt__ox_norm_axis(kt_onnx_attr_int(c->n, "axis", 0), a->ndim);
    if (axis < 0)
        return kt__ox_mismatch(c, 0, "axis out of range");
    memcpy(dims, a->dims, sizeof(dims));
    dims[axis] = 0;
    for (i = 0; i < c->n->nin; i++) {
        struct kt_onnx_value *b = kt__ox_in(c, i);
        if (b == NULL)
            continue;
        if (b->ndim != a->ndim)
            return kt__ox_mismatch(c, i,
                                   "rank %d differs from the first input's %d",
                                   b->ndim, a->ndim);
        for (d = 0; d < a->ndim; d++)
            if (d != axis && b->dims[d] != a->dims[d])
                return kt__ox_mismatch(c, i,
                                       "dim %d is %lld but the first input's "
                                       "is %lld (concat axis %d)",
                                       d, (long long)b->dims[d],
                                       (long long)a->dims[d], axis);
        dims[axis] += b->dims[axis];
        allc &= kt__ox_is_const(b);
    }
    kt__ox_set_shape(o, a->ndim, dims, a->dtype);
    if (allc && a->ndim == 1 && dims[0] <= KT__OX_FOLD_MAX) {
        double vals[KT__OX_FOLD_MAX];
        int64_t k = 0, j;
        for (i = 0; i < c->n->nin; i++)
            for (j = 0; kt__ox_in(c, i) != NULL && j < kt__ox_in(c, i)->dims[0];
                 j++)
                vals[k++] = kt_onnx_value_get(kt__ox_in(c, i), j);
        kt__ox_store_const(o, a->dtype, vals, k);
    }
    return 0;
}

int
kt__ox_infer_reshape(struct kt__ox_ctx *c)
{
    struct kt_onnx_value *a = kt__ox_in(c, 0), *o = kt__ox_out(c, 0);
    int64_t sh[KT_ONNX_MAX_DIMS], known = 1, total;
    int n, i, neg = -1;

    if (a == NULL)
        return kt__ox_mismatch(c, 0, "needs an input");
    if (c->n->nin >= 2)
        n = kt__ox_const_ints(kt__ox_in(c, 1), sh, KT_ONNX_MAX_DIMS);
    else
        n = kt_onnx_attr_ints(c->n, "shape", sh, KT_ONNX_MAX_DIMS);
    if (n < 0 || n > KT_ONNX_MAX_DIMS)
        return kt__ox_unsupported(c,
                                  "a target shape that is not a constant of at "
                                  "most %d dims",
                                  KT_ONNX_MAX_DIMS);
    for (i = 0; i < n; i++) {
        if (sh[i] == 0 && !kt_onnx_attr_int(c->n, "allowzero", 0))
            sh[i] = i < a->ndim ? a->dims[i] : 1;
        if (sh[i] == -1) {
            if (neg >= 0)
                return kt__ox_mismatch(c, 1, "two -1 dims in the target shape");
            neg = i;
        } else if (sh[i] < 1 || sh[i] > KT__OX_ELEMS_MAX ||
                   known > KT__OX_ELEMS_MAX / sh[i]) {
            return kt__ox_mismatch(c, 1, "bad target dim %lld",
                                   (long long)sh[i]);
        } else {
            known *= sh[i];
        }
    }
    total = kt_onnx_value_elems(a);
    if (neg >= 0)
        sh[neg] = known > 0 ? total / known : 0;
    if (neg >= 0 ? sh[neg] * known != total : known != total)
        return kt__ox_mismatch(c, 0, "cannot reshape %lld elements to %lld",
                               (long long)total, (long long)known);
    kt__ox_set_shape(o, n, sh, a->dtype);
    kt__ox_copy_const(o, a);
    return 0;
}

int
kt__ox_infer_flatten(struct kt__ox_ctx *c)
{
    struct kt_onnx_value *a = kt__ox_in(c, 0);
    int64_t sh[2] = {1, 1};
    int axis, i;

    if (a == NULL)
        return kt__ox_mismatch(c, 0, "needs an input");
    axis = (int)kt_onnx_attr_int(c->n, "axis", 1);
    if (axis < 0)
        axis += a->ndim;
    if (axis < 0 || axis > a->ndim)
        return kt__ox_mismatch(c, 0, "axis %d out of range", axis);
    for (i = 0; i < a->ndim; i++)
        sh[i >= axis] *= a->dims[i];
    kt__ox_set_shape(kt__ox_out(c, 0), 2, sh, a->dtype);
    kt__ox_copy_const(kt__ox_out(c, 0), a);
    return 0;
}

int
kt__ox_infer_transpose(struct kt__ox_ctx *c)
{
    struct kt_onnx_value *a = kt__ox_in(c, 0);
    int64_t perm[KT_ONNX_MAX_DIMS], sh[KT_ONNX_MAX_DIMS];
    int n, i, seen = 0;

    if (a == NULL)
        return kt__ox_mismatch(c, 0, "needs an input");
    n = kt_onnx_attr_ints(c->n, "perm", perm, KT_ONNX_MAX_DIMS);
    if (n == 0)
        for (n = 0; n < a->ndim; n++)
            perm[n] = a->ndim - 1 - n;
    if (n != a->ndim)
        return kt__ox_mismatch(c, 0, "perm has %d entries for %d dims", n,
                               a->ndim);
    for (i = 0; i < n; i++) {
        if (perm[i] < 0 || perm[i] >= n || (seen & (1 << perm[i])))
            return kt__ox_mismatch(c, 0, "perm is not a permutation");
        seen |= 1 << perm[i];
        sh[i] = a->dims[perm[i]];
    }
    kt__ox_set_shape(kt__ox_out(c, 0), n, sh, a->dtype);
    return 0;
}

int
kt__ox_infer_slice(struct kt__ox_ctx *c)
{
    struct kt_onnx_value *a = kt__ox_in(c, 0), *o = kt__ox_out(c, 0);
    int64_t st[KT_ONNX_MAX_DIMS], en[KT_ONNX_MAX_DIMS], ax[KT_ONNX_MAX_DIMS];
    int64_t sp[KT_ONNX_MAX_DIMS], dims[KT_ONNX_MAX_DIMS];
    int64_t first[KT_ONNX_MAX_DIMS] = {0}, step[KT_ONNX_MAX_DIMS];
    int n, ne, na, i;

    if (a == NULL)
        return kt__ox_mismatch(c, 0, "needs an input");
    if (c->g->opset < 10) {
        n = kt_onnx_attr_ints(c->n, "starts", st, KT_ONNX_MAX_DIMS);
        ne = kt_onnx_attr_ints(c->n, "ends", en, KT_ONNX_MAX_DIMS);
        na = kt_onnx_attr_ints(c->n, "axes", ax, KT_ONNX_MAX_DIMS);
        for (i = 0; i < n; i++)
            sp[i] = 1;
    } else {
        n = kt__ox_const_ints(kt__ox_in(c, 1), st, KT_ONNX_MAX_DIMS);
        ne = kt__ox_const_ints(kt__ox_in(c, 2), en, KT_ONNX_MAX_DIMS);
        na = kt__ox_in(c, 3) != NULL
                 ? kt__ox_const_ints(kt__ox_in(c, 3), ax, KT_ONNX_MAX_DIMS)
                 : 0;
        if (kt__ox_in(c, 4) != NULL) {
            if (kt__ox_const_ints(kt__ox_in(c, 4), sp, KT_ONNX_MAX_DIMS) != n)
                return kt__ox_unsupported(c, "steps that are not constants");
        } else {
            for (i = 0; i < n && i < KT_ONNX_MAX_DIMS; i++)
                sp[i] = 1;
        }
    }
    if (n < 0 || ne != n || na < 0 || (na != 0 && na != n))
        return kt__ox_unsupported(c,
                                  "starts/ends/axes that are not constants of "
                                  "equal length");
    memcpy(dims, a->dims, sizeof(dims));
    for (i = 0; i < a->ndim; i++)
        step[i] = 1;
    for (i = 0; i < n; i++) {
        int d = kt__ox_norm_axis(na ? ax[i] : i, a->ndim);
        int64_t len, s, e;
        if (d < 0 || sp[i] == 0 || sp[i] > KT__OX_ELEMS_MAX ||
            sp[i] < -KT__OX_ELEMS_MAX)
            return kt__ox_mismatch(c, 0, "slice axis or step out of range");
        len = a->dims[d];
        s = st[i] < -KT__OX_ELEMS_MAX  ? -KT__OX_ELEMS_MAX
            : st[i] > KT__OX_ELEMS_MAX ? KT__OX_ELEMS_MAX
                                       : st[i];
        e = en[i] < -KT__OX_ELEMS_MAX  ? -KT__OX_ELEMS_MAX
            : en[i] > KT__OX_ELEMS_MAX ? KT__OX_ELEMS_MAX
                                       : en[i];
        s = s < 0 ? s + len : s;
        e = e < 0 ? e + len : e;
        if (sp[i] > 0) {
            s = s < 0 ? 0 : s > len ? len : s;
            e = e < 0 ? 0 : e > len ? len : e;
            dims[d] = e > s ? (e - s + sp[i] - 1) / sp[i] : 0;
        } else {
            s = s < 0 ? -1 : s > len - 1 ? len - 1 : s;
            e = e < -1 ? -1 : e > len - 1 ? len - 1 : e;
            dims[d] = s > e ? (s - e - sp[i] - 1) / -sp[i] : 0;
        }
        first[d] = s;
        step[d] = sp[i];
    }
    kt__ox_set_shape(o, a->ndim, dims, a->dtype);
    if (kt__ox_is_const(a) && a->ndim == 1 && dims[0] <= KT__OX_FOLD_MAX) {
        double vals[KT__OX_FOLD_MAX];
        int64_t k;
        for (k = 0; k < dims[0]; k++)
            vals[k] = kt_onnx_value_get(a, first[0] + k * step[0]);
        kt__ox_store_const(o, a->dtype, vals, dims[0]);
    }
    return 0;
}

/* Squeeze and Unsqueeze: axes from the attribute (opset < 13) or input. */
static int
squeeze_axes(struct kt__ox_ctx *c, int64_t *axes)
{
    if (c->n->nin >= 2)
        return kt__ox_const_ints(kt__ox_in(c, 1), axes, KT_ONNX_MAX_DIMS);
    return kt_onnx_attr_ints(c->n, "axes", axes, KT_ONNX_MAX_DIMS);
}

int
kt__ox_infer_squeeze(struct kt__ox_ctx *c)
{
    struct kt_onnx_value *a = kt__ox_in(c, 0);
    int64_t axes[KT_ONNX_MAX_DIMS], dims[KT_ONNX_MAX_DIMS];
    int n, i, j, r = 0, drop;

    if (a == NULL)
        return kt__ox_mismatch(c, 0, "needs an input");
    n = squeeze_axes(c, axes);
    if (n < 0)
        return kt__ox_unsupported(c, "axes that are not constants");
    for (i = 0; i < a->ndim; i++) {
        drop = n == 0 && a->dims[i] == 1;
        for (j = 0; j < n; j++)
            if (kt__ox_norm_axis(axes[j], a->ndim) == i)
                drop = 1;
        if (drop && a->dims[i] != 1)
            return kt__ox_mismatch(c, 0, "cannot squeeze dim %d of size %lld",
                                   i, (long long)a->dims[i]);
        if (!drop)
            dims[r++] = a->dims[i];
    }
    kt__ox_set_shape(kt__ox_out(c, 0), r, dims, a->dtype);
    kt__ox_copy_const(kt__ox_out(c, 0), a);
    return 0;
}

int
kt__ox_infer_unsqueeze(struct kt__ox_ctx *c)
{
    struct kt_onnx_value *a = kt__ox_in(c, 0);
    int64_t axes[KT_ONNX_MAX_DIMS], dims[KT_ONNX_MAX_DIMS];
    int n, i, j, r, k = 0, ins;

    if (a == NULL)
        return kt__ox_mismatch(c, 0, "needs an input");
    n = squeeze_axes(c, axes);
    r = a->ndim + n;
    if (n <= 0 || r > KT_ONNX_MAX_DIMS)
        return kt__ox_unsupported(c, "axes that are not constants");
    for (i = 0; i < r; i++) {
        ins = 0;
        for (j = 0; j < n; j++)
            if (kt__ox_norm_axis(axes[j], r) == i)
                ins = 1;
        if (!ins && k >= a->ndim)
            return kt__ox_mismatch(c, 0, "bad unsqueeze axes");
        dims[i] = ins ? 1 : a->dims[k++];
    }
    kt__ox_set_shape(kt__ox_out(c, 0), r, dims, a->dtype);
    kt__ox_copy_const(kt__ox_out(c, 0), a);
    return 0;
}
