/* compile.h - `kerntune compile`: the best stored schedule of every task of
 * a model, read from the tuning database alone (no daemon), emitted as a
 * standalone C library (docs/compile.md):
 *
 *   DIR/<model>_kernels.c   one function per task (+ weight packing routines)
 *   DIR/<model>.h           the documented C API
 *   DIR/<model>_check.c     a self-check against naive reference loops
 *   DIR/Makefile            static and shared library with the target's cc
 *   DIR/<model>.pc          pkg-config file
 *   DIR/manifest.json       per task: workload, schedule, trial, cost
 *
 * The generated code needs only libc, libm and OpenMP. */
#ifndef KT_COMPILE_H
#define KT_COMPILE_H

#include <stddef.h>
#include <stdio.h>

#include "config/config.h"

struct kt_compile_opts {
    const char *db_path; /* the tuning database (read-only) */
    const char *out_dir; /* created when missing */
    int require_tuned;   /* a task without a successful trial is an error */
    int untuned;         /* no database: every task gets the untuned
                          * default schedule (checks a network before it
                          * is tuned) */
    /* The network calls kernels with less work per call (MFLOP) on the
     * calling thread alone; 0: KT_COMPILE_SERIAL_MFLOP; negative: every
     * kernel on all threads. */
    double serial_below_mflop;
};

#define KT_COMPILE_SERIAL_MFLOP 0.1

/* Writes the library of model m into o->out_dir.  A task without a
 * successful trial for m's target gets the untuned default schedule and a
 * warning on log (may be NULL), or fails with --require-tuned.  Errors
 * (message in err): -ENOENT no database, KT_EDB a foreign database or no
 * trial of any task of m for its target (the targets found are named),
 * KT_ENOENT a task untuned under require_tuned, -errno when DIR cannot be
 * written. */
int kt_compile(const struct kt_model_conf *m, const struct kt_compile_opts *o,
               FILE *log, char *err, size_t errlen);

/* `kerntune compile`; argv[0] is "compile".  Returns the exit status. */
int kt_compile_main(int argc, char **argv);
/* `kerntune run DIR`: builds and runs the compiled network's inference
 * program (latency), with --check against ONNX Runtime; argv[0] is "run".
 * Returns the exit status. */
int kt_run_main(int argc, char **argv);

#endif /* KT_COMPILE_H */
