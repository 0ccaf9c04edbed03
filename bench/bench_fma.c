/* bench_fma.c - this machine's measured float32 FMA peak: a loop of
 * independent vector FMAs on registers only (bench/baseline.h), on 1 and 2
 * threads.  The benchmark suite reports kernels as a fraction of it.  Then
 * register tiles 1, 2 and 4 vectors wide from L1 by their rows: the
 * accumulators it takes to reach that peak (ir/ops.c pads rows for it,
 * the search's register tiles keep at least that many). */
#include <stdio.h>

#include "bench/baseline.h"

int
main(void)
{
    const char *isa = "?";
    int t, w, lo, hi;

    for (t = 1; t <= 2; t++) {
        double g = kt_bench_fma_peak(t, &isa);
        printf("%dT FMA peak (%s, register-only loop): %7.1f GFLOPS\n", t, isa,
               g);
    }
    for (w = 1; w <= 4; w++) {
        if (!kt_bench_reg_tile_rows(w, &lo, &hi))
            continue;
        printf("1T register tile %d vector%s wide, k 64 from L1, GFLOPS by "
               "rows:",
               w, w > 1 ? "s" : "");
        for (t = lo; t <= hi; t++)
            printf(" %d: %.1f%s", t, kt_bench_reg_tile(t, w),
                   t < hi ? "," : "\n");
    }
    return 0;
}
