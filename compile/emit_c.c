/* emit_c.c - the C files of a compiled model: the kernels, the header that
 * documents them, and the self-check program (docs/compile.md). */
#include "compile/compile_int.h"

#include <stdlib.h>
#include <string.h>

const struct kt_cc_packed *
kt__cc_packed_of(const struct kt_cc_task *t, int a)
{
    int k;

    for (k = 0; k < t->npacked; k++)
        if (t->packed[k].arg == a)
            return &t->packed[k];
    return NULL;
}

/* A weight the kernel reads only through its packed copy: the public
 * function takes the packed copy in its place. */
int
kt__cc_arg_replaced(const struct kt_cc_task *t, int a)
{
    return kt__cc_packed_of(t, a) != NULL && !t->arg_read[a];
}

static const char *
packed_name(const struct kt_cc_task *t, const struct kt_cc_packed *p)
{
    return t->lt->bufs[p->buf].name;
}

static void
put_shape(struct kt_buf *b, int ndim, const int64_t *shape)
{
    int d;

    kt_buf_putc(b, '[');
    for (d = 0; d < ndim; d++)
        kt_buf_printf(b, "%s%lld", d ? " x " : "", (long long)shape[d]);
    kt_buf_putc(b, ']');
}

/* "const float *A, const float *B, float *C" */
static void
put_params(struct kt_buf *b, const struct kt_cc_task *t)
{
    int a, k, first = 1;

    for (a = 0; a < t->lt->nargs; a++) {
        const struct kt_cc_packed *p = kt__cc_packed_of(t, a);
        kt_buf_printf(b, "%s%sfloat *%s", first ? "" : ", ",
                      kt__cc_arg_is_output(t, a) ? "" : "const ",
                      kt__cc_arg_replaced(t, a) ? packed_name(t, p)
                                                : kt__cc_arg(t, a)->name);
        first = 0;
    }
    for (k = 0; k < t->npacked; k++)
        if (!kt__cc_arg_replaced(t, t->packed[k].arg))
            kt_buf_printf(b, ", const float *%s",
                          packed_name(t, &t->packed[k]));
}

/* The argument array of the kernel (pack = 0) or of its pack routine. */
static void
put_args(struct kt_buf *b, const struct kt_cc_task *t, int pack)
{
    int a, k;

    kt_buf_puts(b, "    float *const args[] = {");
    for (a = 0; a < t->lt->nargs; a++) {
        const char *name = kt__cc_arg(t, a)->name;
        if (pack ? kt__cc_packed_of(t, a) == NULL : kt__cc_arg_replaced(t, a))
            name = NULL;
        kt_buf_printf(b, "%s%s%s", a ? ", " : "", name ? "(float *)" : "NULL",
                      name ? name : "");
    }
    for (k = 0; k < t->npacked; k++)
        kt_buf_printf(b, ", (float *)%s", packed_name(t, &t->packed[k]));
    kt_buf_puts(b, "};\n");
}

/* "const float *W, float *W_pack" */
static void
put_pack_params(struct kt_buf *b, const struct kt_cc_task *t)
{
    int a, k, first = 1;

    for (a = 0; a < t->lt->nargs; a++)
        if (kt__cc_packed_of(t, a) != NULL) {
            kt_buf_printf(b, "%sconst float *%s", first ? "" : ", ",
                          kt__cc_arg(t, a)->name);
            first = 0;
        }
    for (k = 0; k < t->npacked; k++)
        kt_buf_printf(b, ", float *%s", packed_name(t, &t->packed[k]));
}

/* Appends text with every line break replaced by sep (no trailing one). */
static void
put_lines(struct kt_buf *b, const char *text, const char *sep)
{
    size_t n = strlen(text);

    while (n > 0 && text[n - 1] == '\n')
        n--;
    kt_buf_putc(b, ' ');
    for (size_t i = 0; i < n; i++) {
        if (text[i] == '\n')
            kt_buf_puts(b, sep);
        else
            kt_buf_putc(b, text[i]);
    }
}

static void
upper(const char *s, char *out, size_t n)
{
    size_t i;

    for (i = 0; s[i] && i + 1 < n; i++)
        out[i] = (s[i] >= 'a' && s[i] <= 'z') ? (char)(s[i] - 'a' + 'A') : s[i];
    out[i] = '\0';
}

static void
header_task(struct kt_buf *h, const struct kt_cc *c, int i)
{
    const struct kt_cc_task *t = &c->t[i];
    const struct kt_dag *dag = t->task->dag;
    struct kt_buf def;
    char up[192];
    int a, k;

    kt_buf_init(&def);
    kt_dag_print(dag, &def);
    kt_buf_printf(h, "/* Task %d: %s (%g in the model), %.6g MFLOP per call.\n",
                  i, t->task->name, t->task->weight, dag->flops / 1e6);
    kt_buf_puts(h, " *   computes:");
    put_lines(h, def.p ? def.p : "", "\n *     ");
    kt_buf_puts(h, "\n");
    for (a = 0; a < t->lt->nargs; a++) {
        const struct kt_lbuf *lb = kt__cc_arg(t, a);
        const struct kt_tensor *tt = &dag->tensors[lb->tensor];
        if (kt__cc_arg_replaced(t, a))
            continue;
        kt_buf_printf(h, " *   %-8s %s ", lb->name,
                      kt__cc_arg_is_output(t, a) ? "output"
                      : tt->is_const             ? "weight"
                                                 : "input ");
        put_shape(h, lb->ndim, lb->shape);
        kt_buf_puts(h, "\n");
    }
    for (k = 0; k < t->npacked; k++) {
        const struct kt_lbuf *src = kt__cc_arg(t, t->packed[k].arg);
        kt_buf_printf(h, " *   %-8s packed weight: %s ",
                      packed_name(t, &t->packed[k]), src->name);
        put_shape(h, src->ndim, src->shape);
        kt_buf_printf(h, " as written by %s_pack()%s\n", t->fname,
                      kt__cc_arg_replaced(t, t->packed[k].arg)
                          ? ", in its place"
                          : "");
    }
    if (t->best.id > 0)
        kt_buf_printf(h,
                      " *   schedule: tuned, trial %lld: %.4f ms, %.2f GFLOPS "
                      "measured\n",
                      (long long)t->best.id, t->best.cost * 1e3,
                      dag->flops / t->best.cost / 1e9);
    else
        kt_buf_puts(h, " *   schedule: UNTUNED default (no successful trial "
                       "in the database)\n");
    kt_buf_printf(h, " */\nvoid %s(", t->fname);
    put_params(h, t);
    kt_buf_puts(h, ");\n");
    upper(t->fname, up, sizeof(up));
    for (k = 0; k < t->npacked; k++) {
        char pk[KT_MAX_NAME + 8];
        upper(packed_name(t, &t->packed[k]), pk, sizeof(pk));
        kt_buf_printf(h, "#define %s_%s_ELEMS %lldLL\n", up, pk,
                      (long long)t->packed[k].elems);
    }
    if (t->npacked > 0) {
        kt_buf_printf(h,
                      "/* Writes the weights in the layout the schedule of "
                      "%s reads (each *_pack\n * buffer holds its _ELEMS "
                      "floats, 64-byte aligned); once per set of weights. "
                      "*/\nvoid %s_pack(",
                      t->fname, t->fname);
        put_pack_params(h, t);
        kt_buf_puts(h, ");\n");
    }
    kt__cc_wino_header(h, t, up);
    kt_buf_puts(h, "\n");
    kt_buf_free(&def);
}

static void
emit_header(struct kt_buf *h, const struct kt_cc *c)
{
    char up[64];
    int i;

    upper(c->model, up, sizeof(up));
    kt_buf_printf(h,
                  "/* %s.h - the kernels of model %s, compiled by kerntune "
                  "from the tuning\n * database %s for target %s.\n *\n",
                  c->model, c->m->name, c->o->db_path, c->target);
    kt_buf_printf(
        h,
        " * Every buffer holds float32 values in row-major (C) order of the "
        "shape given,\n * starts at a 64-byte aligned address (e.g. "
        "aligned_alloc(64, bytes rounded\n * up to 64)) and overlaps no "
        "other buffer of the call.  Outputs are\n * overwritten.  The "
        "kernels run on OpenMP threads (%s_set_threads); they\n * were "
        "tuned with %lld thread(s) (0: every core).  Calls may run "
        "concurrently\n * with different buffers.  See manifest.json for "
        "the schedules. */\n",
        c->model, (long long)c->m->target.threads);
    kt_buf_printf(h,
                  "#ifndef KT_%s_H\n#define KT_%s_H\n\n#ifdef __cplusplus\n"
                  "extern \"C\" {\n#endif\n\n#define %s_NTASKS %d\n\n",
                  up, up, up, c->tasks.n);
    for (i = 0; i < c->tasks.n; i++)
        header_task(h, c, i);
    kt_buf_printf(h,
                  "/* The number of OpenMP threads of the following kernel "
                  "calls (omp_set_num_threads;\n * n <= 0 leaves it as it "
                  "is). */\nvoid %s_set_threads(int n);\n\n",
                  c->model);
    kt_buf_printf(h,
                  "/* Kernels keep the scratch memory of their intermediates "
                  "between calls (at\n * most 8 blocks, shared by all "
                  "kernels of this library, freed at exit);\n * this frees "
                  "it now.  Not while a kernel runs. */\nvoid "
                  "%s_free_scratch(void);\n\n",
                  c->model);
    kt__cc_net_header(h, c);
    kt_buf_printf(h, "#ifdef __cplusplus\n}\n#endif\n\n#endif /* KT_%s_H */\n",
                  up);
}

static int
emit_kernels(struct kt_buf *k, const struct kt_cc *c, char *err, size_t errlen)
{
    int i, rc;

    kt_buf_printf(k,
                  "/* %s_kernels.c - generated by kerntune compile from %s; "
                  "see %s.h. */\n",
                  c->model, c->o->db_path, c->model);
    kt_codegen_prelude(k);
    kt_buf_printf(k, "#include \"%s.h\"\n", c->model);
    for (i = 0; i < c->tasks.n; i++) {
        const struct kt_cc_task *t = &c->t[i];
        char fn[32];
        snprintf(fn, sizeof(fn), "kt_k%d", i);
        kt_buf_printf(k, "\n/* task %d: %s */\n", i, t->task->name);
        rc = kt_codegen_function(t->lt, &c->cg, fn, k, err, errlen);
        if (rc != KT_OK)
            return kt_seterr(err, errlen, rc, "task %s: %.800s", t->task->name,
                             err);
        kt_buf_printf(k, "void\n%s(", t->fname);
        put_params(k, t);
        kt_buf_puts(k, ")\n{\n");
        put_args(k, t, 0);
        kt_buf_printf(k, "    %s(args);\n}\n", fn);
        if (t->npacked > 0) {
            kt_buf_printf(k, "void\n%s_pack(", t->fname);
            put_pack_params(k, t);
            kt_buf_puts(k, ")\n{\n");
            put_args(k, t, 1);
            kt_buf_printf(k, "    %s_pack(args);\n}\n", fn);
        }
        kt__cc_wino_kernel(k, t);
    }
    kt_buf_printf(k,
                  "\nvoid\n%s_set_threads(int n)\n{\n#ifdef _OPENMP\n    if "
                  "(n > 0)\n        omp_set_num_threads(n);\n#else\n    "
                  "(void)n;\n#endif\n}\n\nvoid\n%s_free_scratch(void)\n{\n"
                  "    kt_pool_drain();\n}\n",
                  c->model, c->model);
    return KT_OK;
}

/* The call of t's public function (pack = 0) or pack routine in the
 * check program: arguments are x[a], packed copies p<k>. */
static void
put_call(struct kt_buf *b, const struct kt_cc_task *t, int pack)
{
    int a, k, first = 1;

    kt_buf_printf(b, "    %s%s(", t->fname, pack ? "_pack" : "");
    for (a = 0; a < t->lt->nargs; a++) {
        const struct kt_cc_packed *p = kt__cc_packed_of(t, a);
        if (pack && p == NULL)
            continue;
        if (!pack && kt__cc_arg_replaced(t, a))
            kt_buf_printf(b, "%sp%d", first ? "" : ", ", (int)(p - t->packed));
        else
            kt_buf_printf(b, "%sx[%d]", first ? "" : ", ", a);
        first = 0;
    }
    for (k = 0; k < t->npacked; k++)
        if (pack || !kt__cc_arg_replaced(t, t->packed[k].arg))
            kt_buf_printf(b, ", p%d", k);
    kt_buf_puts(b, ");\n");
}

static const char check_runtime[] =
    "#include <stdio.h>\n"
    "static float *\nbuf(long long n)\n{\n"
    "    float *p = aligned_alloc(64, (size_t)((n * 4 + 63) / 64 * 64));\n"
    "    if (p == NULL) abort();\n    return p;\n}\n"
    "static unsigned long long rng = 88172645463325252ULL;\n"
    "static void\nfill(float *p, long long n)\n{\n"
    "    for (long long i = 0; i < n; i++) {\n"
    "        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;\n"
    "        p[i] = (float)((double)(rng >> 11) / 9007199254740992.0 * 2 - "
    "1);\n    }\n}\n"
    "/* Relative L2 error of y against the reference r. */\n"
    "static double\nrel_l2(const float *y, const float *r, long long n)\n{\n"
    "    double num = 0, den = 0;\n"
    "    for (long long i = 0; i < n; i++) {\n"
    "        double d = (double)y[i] - r[i];\n"
    "        num += d * d;\n        den += (double)r[i] * r[i];\n    }\n"
    "    return sqrt(num) / (den > 0 ? sqrt(den) : 1.0);\n}\n";

static int
check_task(struct kt_buf *b, const struct kt_cc *c, int i, char *err,
           size_t errlen)
{
    const struct kt_cc_task *t = &c->t[i];
    char fn[32];
    int a, k, rc;

    if (t->ref_lt->nargs != t->lt->nargs)
        return kt_seterr(err, errlen, KT_ESCHEDULE,
                         "task %s: reference and kernel arguments differ",
                         t->task->name);
    snprintf(fn, sizeof(fn), "ref_k%d", i);
    rc = kt_codegen_function(t->ref_lt, &c->cg, fn, b, err, errlen);
    if (rc != KT_OK)
        return rc;
    kt_buf_printf(b, "static double\ncheck_k%d(void)\n{\n", i);
    kt_buf_puts(b, "    static const long long elems[] = {");
    for (a = 0; a < t->lt->nargs; a++) {
        const struct kt_lbuf *lb = kt__cc_arg(t, a);
        int64_t n = 1;
        int d;
        for (d = 0; d < lb->ndim; d++)
            n *= lb->shape[d];
        kt_buf_printf(b, "%s%lldLL", a ? ", " : "", (long long)n);
    }
    kt_buf_puts(b, "};\n    static const int is_out[] = {");
    for (a = 0; a < t->lt->nargs; a++)
        kt_buf_printf(b, "%s%d", a ? ", " : "", kt__cc_arg_is_output(t, a));
    kt_buf_printf(b,
                  "};\n    float *x[%d], *ref[%d];\n    double worst = 0;\n"
                  "    for (int a = 0; a < %d; a++) {\n"
                  "        x[a] = buf(elems[a]);\n"
                  "        if (!is_out[a]) fill(x[a], elems[a]);\n"
                  "        else memset(x[a], 0xff, (size_t)elems[a] * 4);\n"
                  "        ref[a] = is_out[a] ? buf(elems[a]) : x[a];\n    }\n"
                  "    %s(ref);\n",
                  t->lt->nargs, t->lt->nargs, t->lt->nargs, fn);
    for (k = 0; k < t->npacked; k++)
        kt_buf_printf(b, "    float *p%d = buf(%lldLL);\n", k,
                      (long long)t->packed[k].elems);
    if (t->npacked > 0)
        put_call(b, t, 1);
    put_call(b, t, 0);
    kt_buf_printf(b,
                  "    for (int a = 0; a < %d; a++) {\n"
                  "        if (is_out[a]) {\n"
                  "            double e = rel_l2(x[a], ref[a], elems[a]);\n"
                  "            if (!(e <= worst)) worst = e;\n"
                  "            free(ref[a]);\n        }\n"
                  "        free(x[a]);\n    }\n",
                  t->lt->nargs);
    for (k = 0; k < t->npacked; k++)
        kt_buf_printf(b, "    free(p%d);\n", k);
    kt_buf_puts(b, "    return worst;\n}\n");
    return KT_OK;
}

static int
emit_check(struct kt_buf *b, const struct kt_cc *c, char *err, size_t errlen)
{
    int i, rc;

    kt_buf_printf(b,
                  "/* %s_check.c - generated by kerntune compile: runs every "
                  "kernel of %s.h on\n * random inputs and compares it with "
                  "naive loops over the same definition\n * (relative L2 "
                  "error, tolerance %g).  Exit status 0 when all pass. */\n",
                  c->model, c->model, c->m->measure.tolerance);
    kt_codegen_prelude(b);
    kt_buf_printf(b, "#include \"%s.h\"\n%s", c->model, check_runtime);
    for (i = 0; i < c->tasks.n; i++) {
        rc = check_task(b, c, i, err, errlen);
        if (rc != KT_OK)
            return rc;
    }
    kt_buf_puts(b, "int\nmain(void)\n{\n    int failed = 0;\n    double e;\n");
    for (i = 0; i < c->tasks.n; i++)
        kt_buf_printf(b,
                      "    e = check_k%d();\n"
                      "    printf(\"%%-48s rel_err %%.3g %%s\\n\", \"%s\", e,"
                      " e <= %g ? \"ok\" : \"FAILED\");\n"
                      "    failed += !(e <= %g);\n",
                      i, c->t[i].fname, c->m->measure.tolerance,
                      c->m->measure.tolerance);
    kt_buf_printf(b,
                  "    printf(\"%%d of %d kernels match the reference\\n\", "
                  "%d - failed);\n    return failed ? 1 : 0;\n}\n",
                  c->tasks.n, c->tasks.n);
    return KT_OK;
}

int
kt__cc_emit_sources(const struct kt_cc *c, char *err, size_t errlen)
{
    struct kt_buf b;
    char name[96];
    int rc;

    kt_buf_init(&b);
    emit_header(&b, c);
    snprintf(name, sizeof(name), "%s.h", c->model);
    rc = kt__cc_write(c, name, b.p, err, errlen);
    kt_buf_reset(&b);
    if (rc == KT_OK)
        rc = emit_kernels(&b, c, err, errlen);
    snprintf(name, sizeof(name), "%s_kernels.c", c->model);
    if (rc == KT_OK)
        rc = kt__cc_write(c, name, b.p, err, errlen);
    kt_buf_reset(&b);
    if (rc == KT_OK)
        rc = emit_check(&b, c, err, errlen);
    snprintf(name, sizeof(name), "%s_check.c", c->model);
    if (rc == KT_OK)
        rc = kt__cc_write(c, name, b.p, err, errlen);
    kt_buf_free(&b);
    return rc;
}
