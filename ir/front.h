/* front.h - private interface between the compute-language parser
 * (ir/parse.c) and the DAG builder (ir/dag.c).  Not part of the ir API:
 * only files of ir/ include it. */
#ifndef KT_IR_FRONT_H
#define KT_IR_FRONT_H

#include "ir/ir.h"

/* Bound on every integer in an index (coefficients, constants) and on
 * every extent and tensor size, so that index arithmetic stays far from
 * int64 overflow. */
#define KT_IDX_LIMIT ((int64_t)1 << 40)

/* One parsed statement.  Axis numbers: spatial axes (the left side, in
 * order) first, then reduction axes in order of first appearance. */
struct kt__pstmt {
    int line, col;                 /* position of the output name */
    int out;                       /* raw tensor number */
    enum kt_reduce op;
    int naxes, nspatial;
    char axname[KT_MAX_AXES][KT_MAX_NAME];
    int64_t where[KT_MAX_AXES];    /* extent from 'where', 0 if none */
    struct kt_expr *body;          /* owned; loads name raw tensor numbers */
};

/* A parsed program.  Raw tensor numbers follow first appearance. */
struct kt__prog {
    int ntensors;
    char tname[KT_MAX_TENSORS][KT_MAX_NAME];
    int ndim[KT_MAX_TENSORS];      /* number of indexes at every use */
    int writer[KT_MAX_TENSORS];    /* statement writing it, or -1 */
    int line[KT_MAX_TENSORS];      /* first use */
    int col[KT_MAX_TENSORS];
    int nstmts;
    struct kt__pstmt st[KT_MAX_STAGES];
};

/* Parses text into *p (which the caller zeroes first).  Checks the syntax,
 * affine indexes, axis roles, read-after-write order and consistent index
 * counts; shapes and extents are the builder's job.  On error returns
 * KT_EPARSE with "line L, column C: ..." in err; *p must still be released
 * with kt__prog_free. */
int kt__prog_parse(const char *text, struct kt__prog *p, char *err,
                   size_t errlen);
/* Frees the statement bodies of p (not p itself). */
void kt__prog_free(struct kt__prog *p);

/* Prints the user stages of dag (padding stages folded back into the
 * reads), separated by sep, with canonical axis names a0, a1, ...
 * (ir/print.c). */
void kt__dag_print_sep(const struct kt_dag *dag, struct kt_buf *b, char sep);

#endif /* KT_IR_FRONT_H */
