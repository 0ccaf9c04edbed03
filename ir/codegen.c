/* codegen.c - C code generation from a loop tree.
 *
 * Plain loops become C for-loops (OpenMP for parallel ones).  A loop whose
 * whole body can be expanded - only unrolled and vectorized loops below it,
 * within a statement budget - becomes a micro-kernel: its body is emitted
 * as straight-line code with explicit GCC vector-extension operations, and
 * every buffer it only touches at addresses that do not change across the
 * loop is held in registers for the duration of the loop (scalar
 * replacement).  That turns a tiled GEMM's accumulator tile into vector
 * registers, which is what makes the generated code fast.  Micro-kernels
 * are emitted by ir/codegen_kernel.c, expressions by ir/codegen_expr.c
 * (their reads by ir/codegen_load.c), stores by ir/codegen_store.c;
 * vector widths and padded rows are ir/codegen_lanes.c's. */
#include "ir/codegen_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
kt__cg_line(struct cg *g, const char *fmt, ...)
{
    va_list ap;
    int i;

    for (i = 0; i < g->indent; i++)
        kt_buf_puts(g->out, "    ");
    va_start(ap, fmt);
    kt_buf_vprintf(g->out, fmt, ap);
    va_end(ap);
    kt_buf_putc(g->out, '\n');
}

void
kt__cg_fail(struct cg *g, const char *msg)
{
    if (g->rc == KT_OK)
        g->rc = kt_seterr(g->err, g->errlen, KT_ESCHEDULE, "codegen: %s", msg);
}

/* ---- loops ------------------------------------------------------------- */

static int64_t
trip(const struct kt_node *n)
{
    int64_t t = 0;
    int i;

    if (n->kind == KT_N_STORE)
        return 1;
    for (i = 0; i < n->nkids; i++)
        t += trip(n->kids[i]);
    if (n->kind == KT_N_LOOP)
        t *= n->extent;
    return t;
}

/* Loops under an auto_unroll_max_step pragma whose whole nest runs at most
 * that many iterations are unrolled, as TVM's unroll pass does. */
static void
mark_unroll(struct cg *g, const struct kt_node *n, int max_step)
{
    int i;

    if (n->kind == KT_N_LOOP && n->auto_unroll_max_step > max_step)
        max_step = n->auto_unroll_max_step;
    if (n->kind == KT_N_LOOP && max_step > 0 && n->ann == KT_ANN_NONE &&
        trip(n) <= max_step)
        g->unrolled[n->var] = 1;
    for (i = 0; i < n->nkids; i++)
        mark_unroll(g, n->kids[i], max_step);
}

/* The loops under root unrolled by pragma: auto-unrolled ones, then the
 * window loops (codegen_window.c), which depend on the first. */
static void
mark_unrolled_loops(struct cg *g, const struct kt_node *root)
{
    mark_unroll(g, root, 0);
    kt__cg_mark_windows(g, root);
}

int
kt__cg_is_unrolled(const struct cg *g, const struct kt_node *n)
{
    return n->ann == KT_ANN_UNROLL || g->unrolled[n->var];
}

int
kt__cg_only_stores(const struct kt_node *n)
{
    int i;

    for (i = 0; i < n->nkids; i++)
        if (n->kids[i]->kind != KT_N_STORE)
            return 0;
    return 1;
}

/* Whether store n sets values that are not constants (a copy), rather
 * than accumulating or setting an init. */
static int
is_copy(const struct kt_node *n)
{
    return n->op == KT_ASSIGN && n->expr->op != KT_X_CONST;
}

/* Whether vectorized loop n may be expanded into straight-line chunks:
 * when vectors of one width cover it, or when its stores accumulate or
 * set constants (a register tile and its init, 197 lanes as 14 vector
 * registers).  A longer copy with a tail stays a loop and its tail:
 * straight-line, it holds nothing in registers and only makes the block
 * gcc compiles longer.  So does a copy that drops padding (guarded
 * stores, each with a lane-by-lane fallback) over more than one vector
 * (a register tile retargeted through such a copy still expands):
 * expanded, the copy of a padded product's 208-wide rows out of its local
 * tile weighed 1254 against the search's code-size bound of 512, and the
 * search never measured the forms that pack once per row block
 * (docs/performance.md).  Nor does a loop of plain assignments whose
 * chunks together weigh over the block budget: it holds nothing in
 * registers either, and expanded, a sum of 70 reads over rows of 8
 * vectors (AVX2) had no program within the search's code-size bound. */
static int
expands_as_chunks(const struct cg *g, const struct kt_node *n)
{
    int i, copies = 1;

    for (i = 0; i < n->nkids; i++) {
        if (n->kids[i]->guarded && is_copy(n->kids[i]) &&
            kt__cg_chunks(g, n) > 1)
            return 0;
        copies &= is_copy(n->kids[i]);
    }
    if (copies && kt__cg_chunks(g, n) *
                          kt__cg_body_weight(g, n, kt__cg_chunk_lanes(g, n, 0)) >
                      kt__cg_block_budget(g))
        return 0;
    if (n->extent % kt__cg_chunk_lanes(g, n, 0) == 0)
        return 1;
    for (i = 0; i < n->nkids; i++)
        if (is_copy(n->kids[i]))
            return 0;
    return 1;
}

/* Statements n expands to when fully unrolled, or -1 if it cannot be. */
int64_t
kt__cg_expand_count(const struct cg *g, const struct kt_node *n)
{
    int64_t sum = 0, c;
    int i;

    if (n->kind == KT_N_STORE)
        return 1;
    if (n->kind == KT_N_LET)
        return 0;
    if (n->kind != KT_N_LOOP)
        return -1;
    for (i = 0; i < n->nkids; i++) {
        c = kt__cg_expand_count(g, n->kids[i]);
        if (c < 0)
            return -1;
        sum += c;
    }
    if (kt__cg_is_vector_loop(g, n))
        return (expands_as_chunks(g, n) || n->extent <= 16) &&
                       kt__cg_chunks(g, n) <= KT_CG_MAX_EXPANDED_CHUNKS
                   ? kt__cg_chunks(g, n) * sum
                   : -1;
    if (kt__cg_is_unrolled(g, n) || n->extent == 1 ||
        (n->ann == KT_ANN_VECTORIZE && n->extent <= 16))
        return n->extent * sum;
    return -1;
}

static void emit_node(struct cg *g, const struct kt_node *n);
static void emit_kids(struct cg *g, const struct kt_node *n);

/* The header of loop n from 0 up to end (its extent, or less when a
 * vector tail follows) stepping by step. */
static void
loop_header_to(struct cg *g, const struct kt_node *n, int step, int64_t end)
{
    const char *v = g->lt->var_names[n->var];

    kt__cg_loop_range(g, n->var, step, end);
    if (g->reference) {
        kt__cg_line(g, "for (long %s = 0; %s < %lld; %s++) {", v, v,
                    (long long)n->extent, v);
        return;
    }
    if (n->ann == KT_ANN_PARALLEL)
        kt__cg_line(g, "#pragma omp parallel for schedule(static)");
    else if ((kt__cg_is_unrolled(g, n) || kt__cg_is_window(g, n)) &&
             step == 1 && g->unroll_factor[n->var] > 1)
        kt__cg_line(g, "#pragma GCC unroll %d", g->unroll_factor[n->var]);
    if (step == 1)
        kt__cg_line(g, "for (long %s = 0; %s < %lld; %s++) {", v, v,
                    (long long)end, v);
    else
        kt__cg_line(g, "for (long %s = 0; %s < %lld; %s += %d) {", v, v,
                    (long long)end, v, step);
}

void
kt__cg_loop_header(struct cg *g, const struct kt_node *n, int step)
{
    loop_header_to(g, n, step, n->extent);
}

/* The chunks of vectorized loop n from offset from to its end, its
 * variable a constant in each (kt__cg_chunk_lanes). */
static void
emit_tail_chunks(struct cg *g, const struct kt_node *n, int64_t from)
{
    int64_t i;
    int k, w, rule = kt__cg_lane_rule(g, n);

    g->env[n->var].set = 1;
    for (i = from; i < kt__cg_tail_end(g, n); i += w) {
        w = kt__cg_tail_lanes(g, n, rule, i);
        kt_aff_const(&g->env[n->var].val, i);
        g->store_lanes = kt__cg_tail_stores(g, n, rule, i, w);
        for (k = 0; k < n->nkids; k++)
            kt__cg_emit_store(g, n->kids[k], w > 1 ? n->var : -1, w);
        g->store_lanes = 0;
    }
    g->env[n->var].set = 0;
}

/* A vectorized loop outside any micro-kernel: a loop of the widest
 * vectors over what they cover, then the tail chunks. */
static void
emit_vector_loop(struct cg *g, const struct kt_node *n)
{
    int w = kt__cg_chunk_lanes(g, n, 0), k;
    int64_t i = n->extent / w * w;

    if (g->lane_limit[n->var] > 0) {
        i = 0; /* a peeled last tile: its narrowed chunks only */
    } else if (i == n->extent || i >= 2 * w) {
        loop_header_to(g, n, w, i);
        g->indent++;
        for (k = 0; k < n->nkids; k++)
            kt__cg_emit_store(g, n->kids[k], n->var, w);
        g->indent--;
        kt__cg_line(g, "}");
        if (i == n->extent)
            return;
    } else {
        i = 0;
    }
    kt__cg_line(g, "{");
    g->indent++;
    emit_tail_chunks(g, n, i);
    g->indent--;
    kt__cg_line(g, "}");
}

/* A vectorized loop of more than one vector whose stores all reduce into
 * one element each (an untiled row max or sum computed at its consumer's
 * row, outside any micro-kernel). */
static int
lane_reduction_loop(struct cg *g, const struct kt_node *n)
{
    int k;

    if (n->extent <= kt__cg_chunk_lanes(g, n, 0))
        return 0;
    for (k = 0; k < n->nkids; k++)
        if (!kt__cg_lane_reduction(g, n->kids[k], n->var))
            return 0;
    return 1;
}

/* Lane accumulators across the loop, reduced across lanes once after it
 * (was: across lanes per vector); up to 4 per store (independent add
 * chains), chunk q of each step accumulating into the q-th; a tail no
 * full vector covers is reduced into the element after that. */
static void
emit_lane_reduction(struct cg *g, const struct kt_node *n)
{
    int k, q, w = kt__cg_chunk_lanes(g, n, 0);
    int64_t whole = n->extent / w * w, chunks = whole / w;
    int nacc = chunks % 4 == 0 ? 4 : chunks % 2 == 0 ? 2 : 1;

    kt__cg_line(g, "{");
    g->indent++;
    for (k = 0; k < n->nkids; k++)
        for (q = 0; q < nacc; q++)
            kt__cg_emit_lane_acc(g, n->kids[k], k, q, 0, n->var, w);
    loop_header_to(g, n, w * nacc, whole);
    g->indent++;
    g->env[n->var].set = 1;
    for (q = 0; q < nacc; q++) {
        kt_aff_var(&g->env[n->var].val, n->var, 1);
        g->env[n->var].val.c = (int64_t)q * w;
        for (k = 0; k < n->nkids; k++)
            kt__cg_emit_lane_acc(g, n->kids[k], k, q, 1, n->var, w);
    }
    g->env[n->var].set = 0;
    g->indent--;
    kt__cg_line(g, "}");
    for (k = 0; k < n->nkids; k++) {
        for (q = 1; q < nacc; q++)
            kt__cg_emit_lane_acc(g, n->kids[k], k, q, 2, n->var, w);
        kt__cg_emit_lane_acc(g, n->kids[k], k, 0, 3, n->var, w);
    }
    /* the tail (197 = 12 x 16 + 4 + 1), reduced into the element chunk by
     * chunk */
    emit_tail_chunks(g, n, whole);
    g->indent--;
    kt__cg_line(g, "}");
}

static void
emit_loop(struct cg *g, const struct kt_node *n)
{
    const struct kt_node *kern;

    if (kt__cg_emit_transpose(g, n))
        return;
    if (!g->reference && kt__cg_is_vector_loop(g, n) &&
        lane_reduction_loop(g, n)) {
        emit_lane_reduction(g, n);
        return;
    }
    if (!g->reference && kt__cg_is_vector_loop(g, n)) {
        emit_vector_loop(g, n);
        return;
    }
    if ((kern = kt__cg_kernel_of(g, n)) != NULL) {
        kt__cg_emit_kernel_nest(g, n, kern, NULL);
        return;
    }
    if (kt__cg_peels(g, n)) {
        kt__cg_emit_peeled(g, n);
        return;
    }
    kt__cg_loop_header(g, n, 1);
    g->indent++;
    emit_kids(g, n);
    g->indent--;
    kt__cg_line(g, "}");
}

/* The kids of n in order, each init nest followed by a kernel it folds
 * into emitted as part of that kernel. */
static void
emit_kids(struct cg *g, const struct kt_node *n)
{
    const struct kt_node *kern;
    int k;

    for (k = 0; k < n->nkids; k++) {
        if (n->kids[k]->kind == KT_N_LET) {
            kt__cg_emit_let(g, n->kids[k]);
            if (kt__cg_emit_let_split(g, n->kids[k],
                                      (const struct kt_node *const *)n->kids,
                                      k + 1, n->nkids))
                return;
            continue;
        }
        if (k + 1 < n->nkids &&
            kt__cg_init_folds(g, n->kids[k], n->kids[k + 1], &kern)) {
            kt__cg_emit_kernel_nest(g, n->kids[k + 1], kern, n->kids[k]);
            k++;
            continue;
        }
        emit_node(g, n->kids[k]);
    }
}

void
kt__cg_emit_node(struct cg *g, const struct kt_node *n)
{
    emit_node(g, n);
}

void
kt__cg_emit_tail_chunks(struct cg *g, const struct kt_node *n, int64_t from)
{
    emit_tail_chunks(g, n, from);
}

void
kt__cg_emit_kids(struct cg *g, const struct kt_node *n)
{
    emit_kids(g, n);
}

#define STACK_TILE_BYTES (256 * 1024)

/* The floats allocated after b's last row (kt__cg_plan_slack). */
static int64_t
alloc_slack(const struct cg *g, const struct kt_lbuf *b)
{
    return g->slack != NULL && g->slack[b - g->lt->bufs]
               ? kt__cg_buf_slack(g, (int)(b - g->lt->bufs))
               : 0;
}

/* Zeros in the padding of b's rows and in its slack, which vectors
 * running along whole rows read (ROWS_PADDED): stack or heap garbage
 * there would be arithmetic on denormals, which is slow.  Packed weights get theirs from
 * the pack routine (a library's caller allocates them). */
static void
emit_zero_padding(struct cg *g, const struct kt_lbuf *b)
{
    int64_t e = b->shape[b->ndim - 1], p = kt__cg_pitch(g, b, b->ndim - 1);
    int64_t elems = kt__cg_buf_elems(g, b);

    if (g->reference)
        return;
    if (alloc_slack(g, b) > 0)
        kt__cg_line(g, "for (long c = %lld; c < %lld; c++) t_%s[c] = 0.0f;",
                    (long long)elems, (long long)(elems + alloc_slack(g, b)),
                    b->name);
    if (p == e)
        return;
    kt__cg_line(g, "for (long r = 0; r < %lld; r++)", (long long)(elems / p));
    kt__cg_line(g, "    for (long c = %lld; c < %lld; c++)", (long long)e,
                (long long)p);
    kt__cg_line(g, "        t_%s[r * %lld + c] = 0.0f;", b->name, (long long)p);
}

static void
emit_node(struct cg *g, const struct kt_node *n)
{
    switch (n->kind) {
    case KT_N_SEQ: emit_kids(g, n); break;
    case KT_N_LOOP: emit_loop(g, n); break;
    case KT_N_LET: kt__cg_emit_let(g, n); break;
    case KT_N_STORE: kt__cg_emit_store(g, n, -1, 1); break;
    case KT_N_ALLOC: {
        const struct kt_lbuf *b = &g->lt->bufs[n->buf];
        int64_t elems = kt__cg_buf_elems(g, b) + alloc_slack(g, b);
        int heap = elems * 4 > STACK_TILE_BYTES;
        kt__cg_line(g, "{");
        g->indent++;
        if (heap) {
            kt__cg_line(g, "float *restrict t_%s = kt_scratch(%lld);", b->name,
                        (long long)((elems * 4 + 63) / 64 * 64));
            kt__cg_line(g, "if (t_%s == NULL) abort();", b->name);
        } else {
            kt__cg_line(g, "float t_%s[%lld] __attribute__((aligned(64)));",
                        b->name, (long long)elems);
        }
        emit_zero_padding(g, b);
        emit_kids(g, n);
        if (heap)
            kt__cg_line(g, "kt_scratch_free(t_%s);", b->name);
        g->indent--;
        kt__cg_line(g, "}");
        break;
    }
    }
}

void
kt_codegen_default_opts(struct kt_codegen_opts *o)
{
    memset(o, 0, sizeof(*o));
#if defined(__x86_64__)
    __builtin_cpu_init();
    o->vector_bytes = __builtin_cpu_supports("avx512f") ? 64
                      : __builtin_cpu_supports("avx2")  ? 32
                                                        : 16;
#else
    o->vector_bytes = 16;
#endif
    o->max_unrolled_stmts = 256;
    o->packed_args = 0;
}

/* Prepacked buffers live in module storage "<kernel>_pk_<name>" (static,
 * so they come and go with the module), or with o->packed_args in the
 * caller's arguments after the kernel's own: the pack routine fills them
 * once, the kernel reads them. */
static void
declare_packed(struct cg *g, const char *kname)
{
    int i, k = 0;

    for (i = 0; i < g->lt->nbufs; i++) {
        const struct kt_lbuf *b = &g->lt->bufs[i];
        if (b->scope != KT_BUF_PACKED)
            continue;
        if (g->o->packed_args)
            kt__cg_line(g,
                        "float *restrict t_%s = (float "
                        "*)__builtin_assume_aligned(args[%d], 64);",
                        b->name, g->lt->nargs + k++);
        else
            kt__cg_line(g, "float *restrict t_%s = %s_pk_%s;", b->name, kname,
                        b->name);
    }
}

/* A generator over lt: its per-variable tables, the loops' ranges under
 * root noted (g->var_max). */
static void
cg_open(struct cg *g, const struct kt_looptree *lt,
        const struct kt_codegen_opts *o, const struct kt_node *root)
{
    size_t n = (size_t)lt->nvars + 1;
    int i;

    memset(g, 0, sizeof(*g));
    g->lt = lt;
    g->o = o;
    g->env = kt_xcalloc(n, sizeof(*g->env));
    g->unrolled = kt_xcalloc(n, 1);
    g->window = kt_xcalloc(n, 1);
    g->inner = kt_xcalloc(n, 1);
    g->expanding = kt_xcalloc(n, 1);
    g->unroll_factor = kt_xcalloc(n, sizeof(*g->unroll_factor));
    g->var_max = kt_xcalloc(n, sizeof(*g->var_max));
    g->lane_limit = kt_xcalloc(n, sizeof(*g->lane_limit));
    g->whole = kt_xcalloc(n, 1);
    g->shares = kt_xcalloc(KT_CG_MAX_SHARES, sizeof(*g->shares));
    /* Not cleared: 130 KB, and only the first nregs are ever read. */
    g->regs = kt_xmalloc(KT_CG_MAX_REGS * sizeof(*g->regs));
    for (i = 0; i <= lt->nvars; i++)
        g->var_max[i] = -1;
    kt__cg_note_ranges(g, root);
}

static void
cg_close(struct cg *g)
{
    free(g->env);
    free(g->unrolled);
    free(g->window);
    free(g->inner);
    free(g->expanding);
    free(g->unroll_factor);
    free(g->var_max);
    free(g->slack);
    free(g->lane_limit);
    free(g->pins);
    free(g->whole);
    kt__cg_pins_clear(g);
    free(g->shares);
    free(g->regs);
}

/* The kernel (pack = 0, from lt->root) or its pack routine "<fname>_pack"
 * (pack = 1, from lt->pack_root). */
static int
gen_function(const struct kt_looptree *lt, const struct kt_codegen_opts *o,
             const char *fname, int reference, int pack, struct kt_buf *out,
             char *err, size_t errlen)
{
    const struct kt_node *root = pack ? lt->pack_root : lt->root;
    unsigned char *need_slack;
    struct cg g;
    int i;

    cg_open(&g, lt, o, root);
    g.out = out;
    g.reference = reference;
    g.err = err;
    g.errlen = errlen;
    need_slack = kt_xcalloc((size_t)lt->nbufs + 1, 1);
    if (!reference) {
        g.pins = kt_xcalloc(KT_CG_MAX_PINS, sizeof(*g.pins));
        mark_unrolled_loops(&g, root);
        kt__cg_plan_unroll(&g, root);
        kt__cg_plan_slack(&g, root, need_slack);
    }
    g.slack = need_slack;

    kt__cg_line(&g, "static void\n%s%s(float *const *args)\n{", fname,
                pack ? "_pack" : "");
    g.indent = 1;
    for (i = 0; i < lt->nargs; i++)
        kt__cg_line(&g,
                    "float *restrict t_%s = (float "
                    "*)__builtin_assume_aligned(args[%d], 64);",
                    lt->bufs[lt->args[i]].name, i);
    /* the pack routine reads weights and writes packed buffers only: the
     * kernel's intermediates are not its business */
    for (i = 0; !pack && i < lt->nbufs; i++) {
        const struct kt_lbuf *b = &lt->bufs[i];
        int64_t bytes;
        if (b->scope != KT_BUF_HEAP)
            continue;
        bytes = (kt__cg_buf_elems(&g, b) + alloc_slack(&g, b)) * 4;
        kt__cg_line(&g, "float *restrict t_%s = kt_scratch(%lld);", b->name,
                    (long long)((bytes + 63) / 64 * 64));
        kt__cg_line(&g, "if (t_%s == NULL) abort();", b->name);
        emit_zero_padding(&g, b);
    }
    declare_packed(&g, fname);
    for (i = 0; pack && i < lt->nbufs; i++)
        if (lt->bufs[i].scope == KT_BUF_PACKED)
            emit_zero_padding(&g, &lt->bufs[i]);
    emit_node(&g, root);
    for (i = 0; !pack && i < lt->nbufs; i++)
        if (lt->bufs[i].scope == KT_BUF_HEAP)
            kt__cg_line(&g, "kt_scratch_free(t_%s);", lt->bufs[i].name);
    g.indent = 0;
    kt__cg_line(&g, "}");
    cg_close(&g);
    return g.rc;
}

int64_t
kt_codegen_block_size(const struct kt_looptree *lt,
                      const struct kt_codegen_opts *o, int64_t *total_weight)
{
    struct cg g;

    cg_open(&g, lt, o, lt->root);
    mark_unrolled_loops(&g, lt->root);
    kt__cg_plan_unroll(&g, lt->root);
    cg_close(&g);
    if (total_weight != NULL)
        *total_weight = g.total_weight;
    return g.max_block;
}

void
kt_codegen_window_loops(const struct kt_looptree *lt,
                        const struct kt_codegen_opts *o, unsigned char *window)
{
    struct cg g;

    if (lt->root == NULL)
        return;
    memset(&g, 0, sizeof(g));
    g.lt = lt;
    g.o = o;
    g.unrolled = kt_xcalloc((size_t)lt->nvars + 1, 1);
    g.window = window;
    mark_unrolled_loops(&g, lt->root);
    free(g.unrolled);
}

/* gcc's -O3 passes unroll-and-jam and loop distribution analyse the
 * dependences between the memory references of each loop nest, pair by
 * pair: on the generator's unrolled register tiles that took up to 60% of
 * a kernel's compile time, and the loops they would transform are already
 * the schedule's (docs/measure.md, "A kernel's compile without two -O3
 * passes").  Not pushed and popped: the functions after a kernel in a
 * generated file are its wrappers, which inline it only under the same
 * options. */
static const char kernel_options[] =
    "#if defined(__GNUC__) && !defined(__clang__)\n"
    "#pragma GCC optimize(\"no-loop-unroll-and-jam\", "
    "\"no-tree-loop-distribution\")\n"
    "#endif\n";

static int
functions(const struct kt_looptree *lt, const struct kt_codegen_opts *o,
          const char *fname, struct kt_buf *out, char *err, size_t errlen)
{
    int i, rc;

    if (lt->pack_root == NULL)
        return gen_function(lt, o, fname, 0, 0, out, err, errlen);
    for (i = 0; i < lt->nbufs; i++)
        if (lt->bufs[i].scope == KT_BUF_PACKED && !o->packed_args)
            kt_buf_printf(out,
                          "static float %s_pk_%s[%lld] "
                          "__attribute__((aligned(64)));\n",
                          fname, lt->bufs[i].name,
                          (long long)kt_lbuf_stored_elems(&lt->bufs[i],
                                                          o->vector_bytes));
    rc = gen_function(lt, o, fname, 0, 1, out, err, errlen);
    if (rc == KT_OK)
        rc = gen_function(lt, o, fname, 0, 0, out, err, errlen);
    return rc;
}

int
kt_codegen_function(const struct kt_looptree *lt,
                    const struct kt_codegen_opts *o, const char *fname,
                    struct kt_buf *out, char *err, size_t errlen)
{
    kt_buf_puts(out, kernel_options);
    return functions(lt, o, fname, out, err, errlen);
}

int
kt__codegen_reference(const struct kt_looptree *lt,
                      const struct kt_codegen_opts *o, const char *fname,
                      struct kt_buf *out, char *err, size_t errlen)
{
    return gen_function(lt, o, fname, 1, 0, out, err, errlen);
}
