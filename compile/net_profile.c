/* net_profile.c - the per-step profile of a compiled network: each step's
 * label (the comment above its code in <model>_net.c and its name in
 * <model>_step_name), and <model>_profile, which makes <model>_run add
 * every step's wall time to an array (`kerntune run DIR --profile`,
 * docs/compile.md). */
#include "compile/compile_int.h"

#include <string.h>

#include "onnx/onnx.h"

/* s's label without the characters that would end a C string or comment
 * (ONNX node names are free text). */
void
kt__cc_step_label(struct kt_buf *b, const struct kt_cc *c,
                  const struct kt_cc_step *s)
{
    const struct kt_onnx_graph *g = c->net->g;
    struct kt_buf raw;
    size_t i;

    kt_buf_init(&raw);
    if (s->kernel >= 0)
        kt_buf_printf(&raw, "kernel %d: %s (task %d)", s->kernel,
                      g->kernels[s->kernel].name, g->kernels[s->kernel].task);
    else {
        int m[8], k, nm = 0;
        if (kt__cc_expr_node(g, s->node)) /* and the nodes inlined into it */
            nm = kt__cc_expr_members(c->net, s->node, m, 8);
        kt_buf_printf(&raw, "%s '%s'", g->nodes[s->node].op,
                      g->nodes[s->node].name);
        for (k = 0; k < nm && k < 8; k++)
            kt_buf_printf(&raw, " + %s '%s'", g->nodes[m[k]].op,
                          g->nodes[m[k]].name);
        if (nm > 8)
            kt_buf_printf(&raw, " + %d more", nm - 8);
    }
    for (i = 0; i < raw.len; i++) {
        char ch = raw.p[i];
        int bad = ch < 0x20 || ch > 0x7e || ch == '"' || ch == '\\' ||
                  (ch == '*' && raw.p[i + 1] == '/') ||
                  (ch == '/' && raw.p[i + 1] == '*');
        kt_buf_putc(b, bad ? '?' : ch);
    }
    kt_buf_free(&raw);
}

/* Before <model>_run: the clock, the step names, <model>_profile and
 * <model>_step_name. */
void
kt__cc_emit_profile(struct kt_buf *b, const struct kt_cc *c)
{
    const char *M = c->model;
    int i;

    kt_buf_puts(b, "/* Wall time in milliseconds, for the profile. */\n"
                   "static double\nstep_now_ms(void)\n{\n#ifdef _OPENMP\n"
                   "    return omp_get_wtime() * 1e3;\n#else\n"
                   "    struct timespec t;\n"
                   "    timespec_get(&t, TIME_UTC);\n"
                   "    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;\n#endif\n}\n\n"
                   "static inline double\nstep_done(double *ms, int i, double "
                   "t0)\n"
                   "{\n    double t = step_now_ms();\n"
                   "    ms[i] += t - t0;\n    return t;\n}\n\n");
    kt_buf_printf(b, "static const char *const step_names[%d] = {\n",
                  c->net->nsteps > 0 ? c->net->nsteps : 1);
    for (i = 0; i < c->net->nsteps; i++) {
        kt_buf_puts(b, "    \"");
        kt__cc_step_label(b, c, &c->net->steps[i]);
        kt_buf_puts(b, "\",\n");
    }
    kt_buf_puts(b, c->net->nsteps > 0 ? "};\n\n" : "    NULL,\n};\n\n");
    kt_buf_printf(b,
                  "const char *\n%s_step_name(int i)\n{\n"
                  "    return i >= 0 && i < %d ? step_names[i] : NULL;\n}\n\n"
                  "void\n%s_profile(struct %s_net *net, double *step_ms)\n"
                  "{\n    net->step_ms = step_ms;\n}\n\n",
                  M, c->net->nsteps, M, M);
}

/* The header's part: the step count and the two functions. */
void
kt__cc_profile_header(struct kt_buf *h, const struct kt_cc *c, const char *up)
{
    const char *M = c->model;

    kt_buf_printf(h,
                  "/* Profile: after %s_profile(net, ms), every %s_run "
                  "adds the wall time of its\n * step i (milliseconds) to "
                  "ms[i], for the %s_STEPS steps, until\n * %s_profile(net, "
                  "NULL).  %s_step_name(i) says what step i runs, e.g.\n"
                  " * \"kernel 8: conv2d_... (task 8)\" (a tuned kernel) "
                  "or \"Mul 'name'\" (an untuned\n * ONNX node); NULL "
                  "outside 0..%s_STEPS-1. */\n"
                  "#define %s_STEPS %d\n"
                  "void %s_profile(struct %s_net *net, double *step_ms);\n"
                  "const char *%s_step_name(int i);\n\n",
                  M, M, up, M, M, up, up, c->net->nsteps, M, M, M);
}
