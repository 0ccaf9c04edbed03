/* bench_fma.c - this machine's measured float32 FMA peak: a loop of
 * independent vector FMAs on registers only (bench/baseline.h), on 1 and 2
 * threads.  The benchmark suite reports kernels as a fraction of it.  Then
 * a register tile one vector wide from L1 with 4 to 14 rows: the rows of
 * accumulators it takes to reach that peak (ir/ops.c pads rows for it). */
#include <stdio.h>

#include "bench/baseline.h"

int
main(void)
{
    const char *isa = "?";
    int t;

    for (t = 1; t <= 2; t++) {
        double g = kt_bench_fma_peak(t, &isa);
        printf("%dT FMA peak (%s, register-only loop): %7.1f GFLOPS\n", t, isa,
               g);
    }
    printf("1T register tile one vector wide, k 64 from L1, GFLOPS by rows:");
    for (t = 4; t <= 14; t++)
        printf(" %d: %.1f%s", t, kt_bench_row_tile(t), t < 14 ? "," : "\n");
    return 0;
}
