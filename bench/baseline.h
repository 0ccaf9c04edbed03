/* baseline.h - code shared by the benchmarks in bench/: one timing rule,
 * environment settings and CPU time,
 * the OpenBLAS convolution baseline (im2col + sgemm + epilogue) and the
 * machine's measured FMA peak. */
#ifndef KT_BENCH_BASELINE_H
#define KT_BENCH_BASELINE_H

#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"

/* Seconds per call of run(arg): once the process is quiet (no thread
 * pool of an earlier call still spinning), one call and one warm-up
 * batch, then the best of 'repeats' batches, each of enough calls to last
 * at least 10 ms. */
double kt_bench_time(void (*run)(void *), void *arg, int repeats);

/* Floats of the im2col buffer kt_bench_conv_im2col needs for p. */
size_t kt_bench_conv_col_floats(const struct kt_conv2d_params *p);
/* conv2d of p (NCHW input, KCRS weights, NKHW output, p->epilogue bits) as
 * OpenBLAS users write it: per image and group, im2col into col (skipped
 * for a 1x1 stride-1 unpadded convolution) and one cblas_sgemm; then the
 * bias and relu.  bias may be NULL when p has no bias. */
void kt_bench_conv_im2col(const struct kt_conv2d_params *p, const float *in,
                          const float *wt, const float *bias, float *col,
                          float *out);
/* out[rows][cols] += bias (per row when bias_per_row, else per column),
 * then max(., 0) when relu; bias may be NULL. */
void kt_bench_epilogue(float *out, int64_t rows, int64_t cols,
                       const float *bias, int bias_per_row, int relu);

/* GFLOPS of a loop of independent register-only vector FMAs on 'threads'
 * threads (best of 7 runs); *isa (may be NULL) gets "avx512", "avx2" or
 * "scalar": what this file was compiled for (-march=native for the real
 * peak). */
double kt_bench_fma_peak(int threads, const char **isa);
/* GFLOPS on this thread of a register tile 'rows' x 'vectors' (1, 2 or
 * 4) over a reduction of 64 steps, its operands in L1: per step
 * 'vectors' vector loads and 'rows' broadcasts, each feeding 'vectors'
 * FMAs, as a generated micro-kernel runs them.  It shows how many
 * accumulators keep the FMA pipes busy.  0 for a shape it has no
 * function for: kt_bench_reg_tile_rows() gives the rows it has for
 * 'vectors', *lo to *hi (it returns 0 for none). */
double kt_bench_reg_tile(int rows, int vectors);
int kt_bench_reg_tile_rows(int vectors, int *lo, int *hi);

/* The integer / number in environment variable name, def when unset or
 * empty. */
int kt_bench_env_int(const char *name, int def);
double kt_bench_env_double(const char *name, double def);
/* This process's CPU seconds (all threads). */
double kt_bench_cpu_now(void);

/* Makes OpenBLAS use kernels for this CPU's widest vectors: Debian's
 * 0.3.21 does not know newer CPUs (an Emerald Rapids Xeon, family 6 model
 * 207) and falls back to its Prescott (SSE3) kernels, 5x slower there
 * than its SkylakeX ones, which makes a poor baseline.  When
 * OPENBLAS_CORETYPE is unset and the kernels OpenBLAS chose lack AVX-512
 * (or AVX2) the CPU has, runs this program again (argv) with
 * OPENBLAS_CORETYPE=SkylakeX (or Haswell), saying so on stderr.  Call it
 * first in main.  A user's own OPENBLAS_CORETYPE is kept. */
void kt_bench_openblas_widest(char **argv);
/* "OpenBLAS 0.3.21 ... SkylakeX" (its build) and the kernels it runs. */
void kt_bench_openblas_describe(char *buf, size_t size);

/* Writes "MODEL NAME (family F, model M, stepping S)" of this machine's
 * first CPU (as bench/cpu.sh does) into buf: one name may stand for
 * several generations under a hypervisor ("AMD EPYC"). */
void kt_bench_cpu_model(char *buf, size_t size);

#endif /* KT_BENCH_BASELINE_H */
