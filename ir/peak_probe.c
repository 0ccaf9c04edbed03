/* peak_probe.c - a module with the kernel ABI whose kernel is a loop of
 * independent vector FMAs on registers only: timed on a worker like any
 * candidate, it gives the target's float FMA peak as the target's own
 * compiler and flags reach it (docs/design.md 2.3, the roofline of the
 * task scheduler).  kt_reference is the same loop, so the check passes
 * bit for bit. */
#include "ir/ir.h"

#include <stdio.h>

/* Independent accumulator chains: 16 covers two FMA pipes of latency 4
 * (Zen 4, Sapphire Rapids) and four of latency 4 (Neoverse V1) twice. */
#define PROBE_CHAINS 16
/* FMAs per chain and thread in one call: ~1 ms at 100 GFLOPS per thread
 * with 16 lanes, so the OpenMP fork and join are noise. */
#define PROBE_ITERS 200000
/* Output slots, one vector per thread; slots past the threads that ran
 * are copies, so the output does not depend on the thread count. */
#define PROBE_SLOTS 256

static int
probe_lanes(const struct kt_codegen_opts *o)
{
    int w = o->vector_bytes / 4;
    return w >= 16 ? 16 : w >= 8 ? 8 : 4;
}

double
kt_peak_probe_flops(const struct kt_codegen_opts *o)
{
    return 2.0 * probe_lanes(o) * PROBE_CHAINS * (double)PROBE_ITERS;
}

static void
probe_function(struct kt_buf *out, const char *name, int w)
{
    int c;

    kt_buf_printf(out,
                  "static void\n%s(float *const *bufs)\n{\n"
                  "    const float *in = bufs[0];\n"
                  "    float *res = bufs[1];\n"
                  "    int nt = 1;\n"
                  "#ifdef _OPENMP\n"
                  "    nt = omp_get_max_threads();\n"
                  "    if (nt > omp_get_num_procs())\n"
                  "        nt = omp_get_num_procs();\n"
                  "#endif\n"
                  "    if (nt > %d)\n        nt = %d;\n"
                  "    #pragma omp parallel for num_threads(nt) "
                  "schedule(static, 1)\n"
                  "    for (int t = 0; t < nt; t++) {\n",
                  name, PROBE_SLOTS, PROBE_SLOTS);
    for (c = 0; c < PROBE_CHAINS; c++)
        kt_buf_printf(out, "        kt_v%d a%d = kt_ld%d(in + %d);\n", w, c, w,
                      c * w);
    /* |m| < 1: every chain converges to c / (1 - m), no overflow and no
     * subnormals whatever the inputs */
    kt_buf_printf(out,
                  "        const kt_v%d m = kt_bc%d(0.9990234375f), "
                  "c = kt_bc%d(0.5f);\n"
                  "        for (long i = 0; i < %d; i++) {\n",
                  w, w, w, PROBE_ITERS);
    for (c = 0; c < PROBE_CHAINS; c++)
        kt_buf_printf(out, "            a%d = a%d * m + c;\n", c, c);
    kt_buf_puts(out, "        }\n        kt_st");
    kt_buf_printf(out, "%d(res + %d * t, a0", w, w);
    for (c = 1; c < PROBE_CHAINS; c++)
        kt_buf_printf(out, " + a%d", c);
    kt_buf_printf(out,
                  ");\n    }\n"
                  "    for (int t = nt; t < %d; t++)\n"
                  "        memcpy(res + %d * t, res, %d * sizeof(float));\n"
                  "}\n",
                  PROBE_SLOTS, w, w);
}

void
kt_codegen_peak_probe(const struct kt_codegen_opts *o, struct kt_buf *out)
{
    int w = probe_lanes(o);

    kt_codegen_prelude(out);
    kt__codegen_shared_begin(out);
    /* the runner caches reference outputs by this name and its seed */
    kt_buf_printf(out,
                  "const char kt_workload_hash[17] = "
                  "\"fmapeak-%02dx%02dv01\";\n",
                  w, PROBE_CHAINS);
    kt_buf_printf(out,
                  "const int kt_nbufs = 2;\n"
                  "const long long kt_buf_elems[] = {%d, %d};\n"
                  "const unsigned char kt_buf_is_output[] = {0, 1};\n"
                  "const double kt_flops = %.17g;\n",
                  PROBE_CHAINS * w, PROBE_SLOTS * w, kt_peak_probe_flops(o));
    probe_function(out, "kt__probe_reference", w);
    kt__codegen_shared_end(out, "kt__probe_reference");
    probe_function(out, "kt__probe", w);
    kt_buf_puts(out,
                "void kt_kernel(float *const *bufs) { kt__probe(bufs); }\n");
}
