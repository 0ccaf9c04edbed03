/* emit_wino.c - the weight transform of a Winograd kernel in a compiled
 * library: <task>_winograd() computes the kernel's U, BT and AT from the
 * convolution's own weights (docs/compile.md, "Winograd kernels"). */
#include "compile/compile_int.h"

#include <string.h>

/* The transforms of task t (a Winograd F(m, r) kernel); KT_EINVAL for
 * others. */
static int
task_matrices(const struct kt_cc_task *t, struct kt_winograd *w)
{
    if (t->task->wino_m <= 0)
        return KT_EINVAL;
    return kt_winograd_matrices(t->task->wino_m, t->task->wino_r, w);
}

/* K, C and S of the transformed weight U [K, C, alpha, S]. */
static int
u_dims(const struct kt_cc_task *t, int64_t *K, int64_t *C, int64_t *S)
{
    int a;

    for (a = 0; a < t->lt->nargs; a++) {
        const struct kt_lbuf *lb = kt__cc_arg(t, a);
        if (strcmp(lb->name, "U") == 0 && lb->ndim == 4) {
            *K = lb->shape[0];
            *C = lb->shape[1];
            *S = lb->shape[3];
            return 1;
        }
    }
    return 0;
}

void
kt__cc_wino_header(struct kt_buf *h, const struct kt_cc_task *t,
                   const char *upper_fname)
{
    struct kt_winograd w;
    int64_t K, C, S;

    if (task_matrices(t, &w) != KT_OK || !u_dims(t, &K, &C, &S))
        return;
    kt_buf_printf(h, "#define %s_W_ELEMS %lldLL\n", upper_fname,
                  (long long)(K * C * w.r * S));
    kt_buf_printf(h,
                  "/* The kernel's arguments U, BT and AT, from the "
                  "convolution's weights\n * W [%lld x %lld x %d x %lld] "
                  "(OIHW, _W_ELEMS floats): U = G W along the window's\n"
                  " * rows and the transforms of Winograd F(%d, %d).  Once "
                  "per set of weights. */\nvoid %s_winograd(const float *W, "
                  "float *U, float *BT, float *AT);\n",
                  (long long)K, (long long)C, w.r, (long long)S, w.m, w.r,
                  t->fname);
}

/* "{a, b, ...}" of rows x cols doubles, exact when read back. */
static void
put_matrix(struct kt_buf *b, const double (*v)[KT_WINO_MAX_ALPHA], int rows,
           int cols)
{
    int i, j;

    kt_buf_puts(b, "{");
    for (i = 0; i < rows; i++)
        for (j = 0; j < cols; j++)
            kt_buf_printf(b, "%s%.17g", i + j ? ", " : "", v[i][j]);
    kt_buf_puts(b, "}");
}

void
kt__cc_wino_kernel(struct kt_buf *k, const struct kt_cc_task *t)
{
    struct kt_winograd w;
    int64_t K, C, S;

    if (task_matrices(t, &w) != KT_OK || !u_dims(t, &K, &C, &S))
        return;
    /* the same sums, in the same order, as kt_winograd_weights: a library
     * and a compiled network get the same U */
    kt_buf_printf(k,
                  "void\n%s_winograd(const float *W, float *U, float *BT, "
                  "float *AT)\n{\n    static const double g[] = ",
                  t->fname);
    put_matrix(k, w.g, w.alpha, w.r);
    kt_buf_puts(k, ";\n    static const double bt[] = ");
    put_matrix(k, w.bt, w.alpha, w.alpha);
    kt_buf_puts(k, ";\n    static const double at[] = ");
    put_matrix(k, w.at, w.m, w.alpha);
    kt_buf_printf(k,
                  ";\n    for (long long fc = 0; fc < %lldLL; fc++)\n"
                  "        for (int e = 0; e < %d; e++)\n"
                  "            for (long long s = 0; s < %lldLL; s++) {\n"
                  "                double acc = 0;\n"
                  "                for (int j = 0; j < %d; j++)\n"
                  "                    acc += g[e * %d + j] * W[(fc * %d + j) "
                  "* %lldLL + s];\n"
                  "                U[(fc * %d + e) * %lldLL + s] = "
                  "(float)acc;\n"
                  "            }\n"
                  "    for (int i = 0; i < %d; i++)\n"
                  "        BT[i] = (float)bt[i];\n"
                  "    for (int i = 0; i < %d; i++)\n"
                  "        AT[i] = (float)at[i];\n}\n",
                  (long long)(K * C), w.alpha, (long long)S, w.r, w.r, w.r,
                  (long long)S, w.alpha, (long long)S, w.alpha * w.alpha,
                  w.m * w.alpha);
}
