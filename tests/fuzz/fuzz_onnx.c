/* fuzz_onnx.c - libFuzzer target for the ONNX importer: any bytes must
 * give a graph or an error message, never a crash, a leak or undefined
 * behaviour; every kernel of an accepted graph must build as a DAG. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "onnx/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int64_t dims[4] = {1, 3, 8, 8};
    const struct kt_onnx_input in = {"x", 4, dims};
    struct kt_onnx_graph *g = NULL;
    char err[1024];
    int pass, k;

    for (pass = 0; pass < 2; pass++) {
        int rc = kt_onnx_import_mem("fuzz.onnx", data, size, pass ? &in : NULL,
                                    pass, KT_ONNX_PARTIAL, &g, err,
                                    sizeof(err));
        if (rc != 0) {
            if (err[0] == '\0')
                abort();
            continue;
        }
        for (k = 0; k < g->nkernels; k++) {
            struct kt_dag *dag = NULL;
            if (kt_op_build(&g->kernels[k].def, &dag, err, sizeof(err)) != 0)
                abort();
            kt_dag_free(dag);
        }
        {
            FILE *f = fopen("/dev/null", "w");
            if (f != NULL) {
                kt_onnx_print_graph(g, f);
                fclose(f);
            }
        }
        kt_onnx_free(g);
    }
    return 0;
}
