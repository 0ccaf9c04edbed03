/* print.c - the graph for people: `kerntune check --graph` and the list
 * of unsupported nodes. */
#include "onnx/int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *
role_text(const struct kt_onnx_graph *g, const struct kt_onnx_node *n,
          char *buf, size_t len)
{
    switch (n->role) {
    case KT_ONNX_ROLE_TASK:
        snprintf(buf, len, "task %d", g->kernels[n->kernel].task);
        break;
    case KT_ONNX_ROLE_FUSED:
        snprintf(buf, len, "fused into task %d", g->kernels[n->kernel].task);
        break;
    case KT_ONNX_ROLE_CONSTANT: snprintf(buf, len, "constant"); break;
    case KT_ONNX_ROLE_UNSUPPORTED:
        snprintf(buf, len, "untuned, unsupported: %.200s",
                 n->note != NULL ? n->note : "?");
        break;
    default: snprintf(buf, len, "untuned"); break;
    }
    return buf;
}

static void
print_values(FILE *f, const struct kt_onnx_graph *g, const int *v, int n)
{
    char sh[128];
    int i, first = 1;

    for (i = 0; i < n; i++) {
        const struct kt_onnx_value *val;
        if (v[i] < 0)
            continue;
        val = &g->values[v[i]];
        fprintf(f, "%s%s:%s%s", first ? "" : ", ", val->name,
                kt__ox_shape_str(val, sh, sizeof(sh)),
                val->data != NULL ? " (const)" : "");
        first = 0;
    }
}

void
kt_onnx_print_graph(const struct kt_onnx_graph *g, FILE *f)
{
    char role[300], sh[128];
    int i;

    fprintf(f,
            "graph %s: opset %lld, %d nodes, %d kernels, %d tasks, %d "
            "unsupported\n",
            g->path, (long long)g->opset, g->nnodes, g->nkernels, g->ntasks,
            g->nunsupported);
    for (i = 0; i < g->ninputs; i++)
        fprintf(f, "  input %s: %s\n", g->values[g->inputs[i]].name,
                kt__ox_shape_str(&g->values[g->inputs[i]], sh, sizeof(sh)));
    for (i = 0; i < g->nnodes; i++) {
        const struct kt_onnx_node *n = &g->nodes[i];
        if (n->role == KT_ONNX_ROLE_CONSTANT && strcmp(n->op, "Constant") == 0)
            continue;
        fprintf(f, "  %4d %-18s %-24s [", i, n->op, n->name);
        print_values(f, g, n->in, n->nin);
        fprintf(f, "] -> [");
        print_values(f, g, n->out, n->nout);
        fprintf(f, "]  %s\n", role_text(g, n, role, sizeof(role)));
    }
    for (i = 0; i < g->noutputs; i++)
        fprintf(f, "  output %s: %s\n", g->values[g->outputs[i]].name,
                kt__ox_shape_str(&g->values[g->outputs[i]], sh, sizeof(sh)));
}

/* A node that is unsupported only because an earlier one was. */
static int
downstream(const struct kt_onnx_node *n)
{
    return n->note != NULL && strncmp(n->note, "input '", 7) == 0;
}

/* "Op xN (reason; nodes 'a', 'b', ...)" per op type, into b. */
static void
list_unsupported(const struct kt_onnx_graph *g, struct kt_buf *b)
{
    int i, j, listed = 0;

    for (i = 0; i < g->nnodes; i++) {
        const struct kt_onnx_node *n = &g->nodes[i];
        int count = 0, shown = 0;
        if (n->role != KT_ONNX_ROLE_UNSUPPORTED || downstream(n))
            continue;
        for (j = 0; j < i; j++)
            if (g->nodes[j].role == KT_ONNX_ROLE_UNSUPPORTED &&
                !downstream(&g->nodes[j]) && strcmp(g->nodes[j].op, n->op) == 0)
                break;
        if (j < i)
            continue; /* listed with the first of its op type */
        for (j = i; j < g->nnodes; j++)
            if (g->nodes[j].role == KT_ONNX_ROLE_UNSUPPORTED &&
                !downstream(&g->nodes[j]) && strcmp(g->nodes[j].op, n->op) == 0)
                count++;
        kt_buf_printf(b, "%s%s x%d (%s; node%s", listed++ ? ", " : "", n->op,
                      count, n->note, count > 1 ? "s" : "");
        for (j = i; j < g->nnodes && shown < 5; j++)
            if (g->nodes[j].role == KT_ONNX_ROLE_UNSUPPORTED &&
                !downstream(&g->nodes[j]) && strcmp(g->nodes[j].op, n->op) == 0)
                kt_buf_printf(b, "%s '%s'", shown++ ? "," : "",
                              g->nodes[j].name);
        kt_buf_printf(b, "%s)", count > shown ? ", ..." : "");
    }
}

int
kt__ox_check_unsupported(struct kt__ox *x)
{
    const struct kt_onnx_graph *g = x->g;
    struct kt_buf b;
    int i, after = 0;

    if (g->nunsupported == 0)
        return KT_OK;
    for (i = 0; i < g->nnodes; i++)
        after += downstream(&g->nodes[i]);
    kt_buf_init(&b);
    list_unsupported(g, &b);
    if (after > 0)
        kt_buf_printf(&b, "; %d node%s after them cannot be shaped", after,
                      after > 1 ? "s" : "");
    if (!(x->flags & KT_ONNX_PARTIAL)) {
        kt_seterr(x->err, x->errlen, KT_EINVAL,
                  "%s: unsupported: %s (with "
                  "--partial the rest is imported and these run untuned)",
                  g->path, b.p);
        kt_buf_free(&b);
        return KT_EINVAL;
    }
    log_warnx("%s: --partial: %d node%s run untuned: %s", g->path,
              g->nunsupported, g->nunsupported > 1 ? "s" : "", b.p);
    kt_buf_free(&b);
    return KT_OK;
}
