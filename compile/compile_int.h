/* compile_int.h - internal to compile/: the tasks of a model with the
 * schedule chosen for each, and the writers of the files of DIR. */
#ifndef KT_COMPILE_INT_H
#define KT_COMPILE_INT_H

#include "compile/compile.h"
#include "ir/ir.h"
#include "scheduler/scheduler.h"
#include "storage/storage.h"

#define KT_CC_MAX_PACKED 8

/* A weight whose layout the schedule rewrote: the pack routine fills
 * 'elems' floats from argument 'arg' (its source tensor). */
struct kt_cc_packed {
    int buf; /* loop-tree buffer of the packed copy */
    int arg; /* kernel argument it is packed from */
    int64_t elems;
};

struct kt_cc_task {
    const struct kt_task *task; /* borrowed from the model's tasks */
    char fname[192];            /* public C name, <model>_<task> */
    struct kt_state *st;        /* chosen schedule (steps empty: untuned) */
    struct kt_looptree *lt;     /* st lowered */
    struct kt_looptree *ref_lt; /* naive loops, for the self-check */
    struct kt_best_trial best;  /* id 0: untuned */
    int npacked;
    struct kt_cc_packed packed[KT_CC_MAX_PACKED];
    int *arg_read; /* per kernel argument: read by the kernel (1/0) */
};

struct kt_cc {
    const struct kt_model_conf *m;
    const struct kt_compile_opts *o;
    char model[64]; /* C identifier of the model */
    char *target;   /* kt_target_id */
    struct kt_codegen_opts cg;
    struct kt_tasks tasks;
    struct kt_cc_task *t; /* tasks.n entries */
    int ntuned;
};

/* Writes text to DIR/name (through a temporary file and rename). */
int kt__cc_write(const struct kt_cc *c, const char *name, const char *text,
                 char *err, size_t errlen);
/* DIR/<model>_kernels.c, DIR/<model>.h, DIR/<model>_check.c. */
int kt__cc_emit_sources(const struct kt_cc *c, char *err, size_t errlen);
/* DIR/Makefile, DIR/<model>.pc, DIR/manifest.json. */
int kt__cc_emit_build(const struct kt_cc *c, char *err, size_t errlen);
/* Argument i's buffer of task t's kernel. */
const struct kt_lbuf *kt__cc_arg(const struct kt_cc_task *t, int i);
/* 1 when argument i of t is an output. */
int kt__cc_arg_is_output(const struct kt_cc_task *t, int i);

#endif /* KT_COMPILE_INT_H */
