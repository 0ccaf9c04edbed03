/* ktt_compile.h - test support for kerntune compile: a model tuned with
 * one stored schedule and compiled into a library directory, commands run
 * in that directory, numbers read from its manifest. */
#ifndef KT_TESTS_KTT_COMPILE_H
#define KT_TESTS_KTT_COMPILE_H

#include <stddef.h>

/* Parses model_json (the model config text; its one task), stores config
 * as that task's trial on the model's target in database db (created if
 * needed), and compiles the model with --require-tuned into each of the
 * nout directories out[k] with serial_below[k] as kt_compile_opts'
 * serial_below_mflop (0: the default; -1: every kernel on all threads).
 * Returns KT_OK or an error with err. */
int ktt_compile_tuned(const char *model_json, const char *db,
                      const char *config, const char *const *out,
                      const double *serial_below, int nout, char *err,
                      size_t errlen);

/* Runs cmd with sh in dir, its output in dir/cmd.out; returns its exit
 * status, and with a failure that output (at most 3000 bytes) in log. */
int ktt_run_in(const char *dir, const char *cmd, char *log, size_t loglen);

/* Builds the library of a model named m compiled into dir (make; m.h,
 * libm.a) and a program against it
 * that packs the model's one packed weight (weight_elems floats filled
 * with ktt_onnx_fill) with the library's own *_pack routine into a buffer
 * of packed_elems floats set to NaN first, written to dir/mine.bin.
 * Returns 0, or non-zero with what went wrong in log. */
int ktt_library_pack(const char *dir, long long weight_elems,
                     long long packed_elems, char *log, size_t loglen);

/* In a cmocka test: runs cmd in dir, failing the test with its output. */
#define KTT_RUN_OR_FAIL(dir, cmd)                                              \
    do {                                                                       \
        char ktt_log_[9000];                                                   \
        if (ktt_run_in((dir), (cmd), ktt_log_, sizeof(ktt_log_)) != 0)         \
            fail_msg("%s", ktt_log_);                                          \
    } while (0)

/* The number after "key": in text (a manifest), or -1 when absent. */
double ktt_json_number(const char *text, const char *key);

#endif
