/* fuzz_schedule.c - libFuzzer target: schedule JSON -> steps -> replay on a
 * padded, fused conv2d DAG -> lowering -> C.  Any input must end in a clean
 * error (err_no 1 in the tuner) or in generated code, never in a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct kt_dag *dag;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kt_step *steps = NULL;
    struct kt_state *st = NULL;
    struct kt_looptree *lt = NULL;
    char err[512], *text;
    int n;

    if (dag == NULL) {
        struct kt_conv2d_params p = {.N = 1,
                                     .C = 4,
                                     .H = 7,
                                     .W = 7,
                                     .K = 8,
                                     .R = 3,
                                     .S = 3,
                                     .stride_h = 1,
                                     .stride_w = 1,
                                     .pad_h = 1,
                                     .pad_w = 1,
                                     .dilation_h = 1,
                                     .dilation_w = 1,
                                     .groups = 1,
                                     .epilogue = KT_EPI_BIAS | KT_EPI_RELU};
        struct kt_op_def d;
        if (kt_op_conv2d(&d, &p) != KT_OK ||
            kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
            abort();
    }
    if (size > 65536)
        return 0;
    text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    if (kt_steps_from_json(text, &steps, &n, err, sizeof(err)) == KT_OK &&
        kt_state_replay(dag, steps, n, &st, err, sizeof(err)) == KT_OK &&
        kt_lower(st, &lt, err, sizeof(err)) == KT_OK) {
        struct kt_codegen_opts o;
        struct kt_buf b;
        struct kt_buf j;
        kt_codegen_default_opts(&o);
        kt_buf_init(&b);
        kt_codegen_function(lt, &o, "k", &b, err, sizeof(err));
        kt_buf_free(&b);
        /* The canonical form must round-trip. */
        kt_buf_init(&j);
        kt_steps_to_json(st->steps, st->nsteps, &j);
        kt_buf_free(&j);
    }
    kt_looptree_free(lt);
    kt_state_free(st);
    free(steps);
    free(text);
    return 0;
}
