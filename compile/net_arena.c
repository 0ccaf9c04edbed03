/* net_arena.c - the memory plan of a compiled network: where each
 * activation lives in the one arena <model>_run uses (docs/compile.md,
 * "Memory"). */
#include "compile/compile_int.h"

#include <stdlib.h>
#include <string.h>

#include "onnx/onnx.h"

void
kt__cc_concat_shape(const struct kt_onnx_graph *g, const struct kt_onnx_node *n,
                    int64_t *axis, int64_t *rows, int64_t *inner)
{
    const struct kt_onnx_value *o = &g->values[n->out[0]];
    int d;

    *axis = kt_onnx_attr_int(n, "axis", 0);
    if (*axis < 0)
        *axis += o->ndim;
    *rows = *inner = 1;
    for (d = 0; d < o->ndim; d++) {
        if (d < *axis)
            *rows *= o->dims[d];
        if (d > *axis)
            *inner *= o->dims[d];
    }
}

/* A Concat whose inputs are one run each in its output (only size-1 dims
 * before the axis) reads each input that it alone reads, and that a step
 * writes, in place: the input lives in the output where it belongs, the
 * copy is skipped (the detection network's four 24-channel maps).  The
 * place must stay 64-byte aligned (kernels assume it); an output that
 * has inputs in it is not itself placed in a later Concat. */
static void
plan_concat(struct kt_cc_net *net)
{
    const struct kt_onnx_graph *g = net->g;
    int s, i;

    for (s = 0; s < net->nsteps; s++) {
        const struct kt_cc_step *st = &net->steps[s];
        const struct kt_onnx_node *n = &g->nodes[st->node];
        int64_t axis, rows, inner, at = 0;
        if (st->kernel >= 0 || strcmp(n->op, "Concat") != 0)
            continue;
        kt__cc_concat_shape(g, n, &axis, &rows, &inner);
        for (i = 0; rows == 1 && i < n->nin; i++) {
            int v = n->in[i];
            const struct kt_onnx_value *val = &g->values[v];
            if (st->refs[i].src == KT_CC_ACT && !val->is_input &&
                !val->is_output && val->nconsumers == 1 &&
                net->alias_of[v] < 0 && !net->has_alias[v] && at % 16 == 0) {
                net->alias_of[v] = n->out[0];
                net->alias_at[v] = at * 4;
                net->has_alias[n->out[0]] = 1;
            }
            at += val->dims[axis] * inner;
        }
    }
}

/* First fit over the activations in order of definition: a value may use
 * the bytes of any value that died before the step that defines it (no
 * step reads and writes the same bytes: kernels take restrict pointers).
 * A Concat's output that holds its inputs (plan_concat) lives from the
 * first of them on. */
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
        net->alias_of[v] = -1;
        net->has_alias[v] = 0;
    }
    plan_concat(net);
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
    for (v = 0; v < g->nvalues; v++)
        if (net->alias_of[v] >= 0 && def[v] < def[net->alias_of[v]])
            def[net->alias_of[v]] = def[v];
    for (s = -1; s < net->nsteps; s++)
        for (v = 0; v < g->nvalues; v++)
            if (def[v] == s && net->alias_of[v] < 0) {
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
    for (v = 0; v < g->nvalues; v++)
        if (net->alias_of[v] >= 0)
            net->arena_off[v] = net->arena_off[net->alias_of[v]] +
                                net->alias_at[v];
    free(def);
    free(end);
    free(order);
}
