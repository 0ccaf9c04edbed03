/* net_arena.c - the memory plan of a compiled network: where each
 * activation lives in the one arena <model>_run uses (docs/compile.md,
 * "Memory"). */
#include "compile/compile_int.h"

#include <stdlib.h>

#include "onnx/onnx.h"

/* First fit over the activations in order of definition: a value may use
 * the bytes of any value that died before the step that defines it (no
 * step reads and writes the same bytes: kernels take restrict pointers). */
void
kt__cc_plan_arena(struct kt_cc_net *net)
{
    const struct kt_onnx_graph *g = net->g;
    int *def = kt_xmalloc((size_t)g->nvalues * sizeof(int));
    int *end = kt_xmalloc((size_t)g->nvalues * sizeof(int));
    int *order = kt_xmalloc((size_t)g->nvalues * sizeof(int));
    int v, s, r, n = 0, i;

    for (v = 0; v < g->nvalues; v++) {
        def[v] = g->values[v].is_input ? -1 : g->nvalues + net->nsteps;
        end[v] = g->values[v].is_output ? net->nsteps : -2;
        net->arena_off[v] = -1;
    }
    for (s = 0; s < net->nsteps; s++) {
        const struct kt_cc_step *st = &net->steps[s];
        int nout = st->kernel >= 0 ? -1 : st->nrefs - 1;
        for (r = 0; r < st->nrefs; r++) {
            if (st->refs[r].src != KT_CC_ACT)
                continue;
            v = (int)st->refs[r].at;
            if (r == nout ||
                (st->kernel >= 0 && v == g->kernels[st->kernel].output))
                def[v] = def[v] < s ? def[v] : s;
            if (end[v] < s)
                end[v] = s;
        }
    }
    for (s = -1; s < net->nsteps; s++)
        for (v = 0; v < g->nvalues; v++)
            if (def[v] == s) {
                end[v] = end[v] > s ? end[v] : s; /* written, never read */
                order[n++] = v;
            }
    for (i = 0; i < n; i++) {
        int64_t at = 0, size;
        int moved = 1;
        v = order[i];
        size = (kt_onnx_value_elems(&g->values[v]) * 4 + 63) / 64 * 64;
        net->act_bytes[v] = size;
        while (moved) {
            moved = 0;
            for (r = 0; r < i; r++) {
                int u = order[r];
                if (end[u] < def[v] || net->arena_off[u] >= at + size ||
                    net->arena_off[u] + net->act_bytes[u] <= at)
                    continue;
                at = net->arena_off[u] + net->act_bytes[u];
                moved = 1;
            }
        }
        net->arena_off[v] = at;
        if (at + size > net->arena_bytes)
            net->arena_bytes = at + size;
    }
    free(def);
    free(end);
    free(order);
}
