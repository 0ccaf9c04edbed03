/* bench_fma.c - this machine's measured float32 FMA peak: a loop of
 * independent vector FMAs on registers only (bench/baseline.h), on 1 and 2
 * threads.  The benchmark suite reports kernels as a fraction of it. */
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
    return 0;
}
