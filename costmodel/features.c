/* features.c - per-store feature rows from a lowered loop tree (Ansor's
 * groups, with its known gaps filled: mad counts, annotation positions,
 * one row per store).  Pure and thread-safe.  Layout in costmodel.h,
 * meaning in docs/features.md. */
#include "costmodel/cm_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rows_out {
    float *rows;
    int n, cap;
};

struct bufagg {
    int buf;
    int nacc, nread, nwrite;
    double bytes, ubytes, lines, ulines;
    int reuse; /* KT_FB_REUSE_* */
    double dis_iter, dis_bytes, reuse_ct, stride;
    double serial_stride, thread_bytes;
};

float
kt_feature_scale(double x)
{
    if (!isfinite(x))
        x = x > 0 ? 1e30 : (x < 0 ? -1e30 : 0);
    return (float)(x < 0 ? -log2(1.0 - x) : log2(1.0 + x));
}

static int
ann_onehot(int off)
{
    return off >= KT_FA_POS_NONE && off <= KT_FA_POS_MIXED;
}

int
kt_feature_is_onehot(int i)
{
    int b;

    if (i >= KT_F_VEC_NUM && i < KT_F_BUF0)
        return ann_onehot((i - KT_F_VEC_NUM) % 11);
    if (i >= KT_F_BUF0 && i < KT_F_AI_CURVE) {
        b = (i - KT_F_BUF0) % KT_F_BUF_LEN;
        return b <= KT_FB_READWRITE ||
               (b >= KT_FB_REUSE_LOOP && b <= KT_FB_REUSE_NONE) ||
               b == KT_FB_IS_LOCAL;
    }
    return i == KT_F_STORE_REDUCE || i == KT_F_STORE_INIT ||
           i == KT_F_VEC_LANE_REDUCE || i == KT_F_PREPACKED;
}

void
kt_feature_name(int i, char *buf, size_t len)
{
    static const char *const g1[] = {"float_mad",   "float_addsub",
                                     "float_mul",   "float_div",
                                     "float_cmp",   "float_math",
                                     "float_other", "select"};
    static const char *const ann[] = {"vec", "unroll", "parallel"};
    static const char *const annf[] = {"num",
                                       "prod",
                                       "len",
                                       "type.none",
                                       "type.inner_spatial",
                                       "type.middle_spatial",
                                       "type.outer_spatial",
                                       "type.inner_reduce",
                                       "type.middle_reduce",
                                       "type.outer_reduce",
                                       "type.mixed"};
    static const char *const bf[] = {"acc_type.read",
                                     "acc_type.write",
                                     "acc_type.readwrite",
                                     "bytes",
                                     "unique_bytes",
                                     "lines",
                                     "unique_lines",
                                     "reuse_type.loop",
                                     "reuse_type.serial",
                                     "reuse_type.none",
                                     "reuse_dis_iter",
                                     "reuse_dis_bytes",
                                     "reuse_ct",
                                     "bytes_d_reuse_ct",
                                     "unique_bytes_d_reuse_ct",
                                     "lines_d_reuse_ct",
                                     "unique_lines_d_reuse_ct",
                                     "stride",
                                     "is_local",
                                     "serial_stride",
                                     "thread_bytes"};
    static const char *const tail[] =
        {"alloc_size",           "alloc_prod",      "alloc_outer_prod",
         "alloc_inner_prod",     "outer_prod",      "num_loops",
         "auto_unroll_max_step", "store_reduce",    "store_init",
         "inner_extent",         "reduce_prod",     "vec_gather",
         "vec_shuffle",          "vec_lane_reduce", "prepacked",
         "prepacked_bytes",      "serial_body"};

    if (i < 0 || i >= KT_FEATURE_LEN)
        snprintf(buf, len, "invalid");
    else if (i < KT_F_VEC_NUM)
        snprintf(buf, len, "%s", g1[i]);
    else if (i < KT_F_BUF0)
        snprintf(buf, len, "%s_%s", ann[(i - KT_F_VEC_NUM) / 11],
                 annf[(i - KT_F_VEC_NUM) % 11]);
    else if (i < KT_F_AI_CURVE)
        snprintf(buf, len, "B%d.%s", (i - KT_F_BUF0) / KT_F_BUF_LEN,
                 bf[(i - KT_F_BUF0) % KT_F_BUF_LEN]);
    else if (i < KT_F_ALLOC_SIZE)
        snprintf(buf, len, "arith_intensity_curve_%d", i - KT_F_AI_CURVE);
    else
        snprintf(buf, len, "%s", tail[i - KT_F_ALLOC_SIZE]);
}

/* Position code (KT_FA_POS_*) of loop level l among the store's loops of
 * the same kind (spatial or reduction). */
static int
position(const struct kt__store_ctx *c, int l)
{
    int red = c->loops[l].n->reduce != 0;
    int i, first = -1, last = -1;

    for (i = 0; i < c->depth; i++)
        if ((c->loops[i].n->reduce != 0) == red) {
            if (first < 0)
                first = i;
            last = i;
        }
    if (l == last)
        return red ? KT_FA_POS_INNER_REDUCE : KT_FA_POS_INNER_SPATIAL;
    if (l == first)
        return red ? KT_FA_POS_OUTER_REDUCE : KT_FA_POS_OUTER_SPATIAL;
    return red ? KT_FA_POS_MIDDLE_REDUCE : KT_FA_POS_MIDDLE_SPATIAL;
}

static void
ann_block(const struct kt__store_ctx *c, enum kt_annot a, double *f)
{
    double num = 0, prod = 1, len = 0;
    int l, pos = KT_FA_POS_NONE, p;

    for (l = 0; l < c->depth; l++) {
        if (kt__ann(c, l) != a)
            continue;
        num += 1;
        prod *= (double)kt__ext(c, l);
        len = (double)kt__ext(c, l);
        p = position(c, l);
        pos = pos == KT_FA_POS_NONE || pos == p ? p : KT_FA_POS_MIXED;
    }
    f[KT_FA_NUM] = num;
    f[KT_FA_PROD] = num > 0 ? prod : 0;
    f[KT_FA_LEN] = len;
    f[pos] = 1;
}

static int
cmp_bufagg(const void *pa, const void *pb)
{
    const struct bufagg *a = pa, *b = pb;

    if (a->lines != b->lines)
        return a->lines > b->lines ? -1 : 1;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    return a->buf - b->buf;
}

/* Lines fetched by access a over the whole nest: iterations of the loops
 * outside the innermost loop a depends on, times the share of a line one
 * step of that loop moves (Ansor's definition without its reduce_ratio
 * quirk). */
static double
access_lines(const struct kt__store_ctx *c, const struct kt__access *a,
             double outer)
{
    double inner = 1, s, lines;
    int l;

    for (l = c->depth - 1; l >= 0; l--) {
        if (kt__depends(c, a, l))
            break;
        inner *= (double)kt__ext(c, l);
    }
    if (l < 0)
        return 1;
    s = fabs(kt__stride(c, a, l)) * KT_F_ELEM_BYTES / KT_F_CACHE_LINE;
    lines = outer / inner * (s < 1 ? s : 1);
    return lines < 1 ? 1 : lines;
}

static void
reuse(const struct kt__store_ctx *c, struct bufagg *g, const double *lvb)
{
    double dis_iter = 1;
    int l, j, dep, cnt;

    g->reuse = KT_FB_REUSE_NONE;
    for (l = c->depth - 1; l >= 0; l--) {
        dep = 0;
        for (j = 0; j < c->nacc && !dep; j++)
            if (c->acc[j].buf == g->buf && kt__depends(c, &c->acc[j], l))
                dep = 1;
        cnt = c->acc_count[c->loops[l].id * c->lt->nbufs + g->buf];
        if (!dep) {
            g->reuse = KT_FB_REUSE_LOOP;
            g->reuse_ct = (double)kt__ext(c, l);
        } else if (cnt > 1) {
            g->reuse = KT_FB_REUSE_SERIAL;
            g->reuse_ct = cnt - 1;
        }
        if (g->reuse != KT_FB_REUSE_NONE) {
            g->dis_iter = dis_iter;
            g->dis_bytes = lvb[l + 1];
            return;
        }
        dis_iter *= (double)kt__ext(c, l);
    }
}

static void
buffer_block(const struct kt__store_ctx *c, const struct bufagg *g, double *f)
{
    double r = g->reuse_ct > 0 ? g->reuse_ct : 1;

    f[g->nwrite == 0                                ? KT_FB_READ
      : (g->nread > 0 || c->store->op != KT_ASSIGN) ? KT_FB_READWRITE
                                                    : KT_FB_WRITE] = 1;
    f[KT_FB_BYTES] = g->bytes;
    f[KT_FB_UNIQUE_BYTES] = g->ubytes;
    f[KT_FB_LINES] = g->lines;
    f[KT_FB_UNIQUE_LINES] = g->ulines;
    f[g->reuse] = 1;
    f[KT_FB_REUSE_DIS_ITER] = g->dis_iter;
    f[KT_FB_REUSE_DIS_BYTES] = g->dis_bytes;
    f[KT_FB_REUSE_CT] = g->reuse_ct;
    f[KT_FB_BYTES_D_REUSE] = g->bytes / r;
    f[KT_FB_UNIQUE_BYTES_D_REUSE] = g->ubytes / r;
    f[KT_FB_LINES_D_REUSE] = g->lines / r;
    f[KT_FB_UNIQUE_LINES_D_REUSE] = g->ulines / r;
    f[KT_FB_STRIDE] = g->stride;
    f[KT_FB_IS_LOCAL] = c->lt->bufs[g->buf].scope == KT_BUF_LOCAL;
    f[KT_FB_SERIAL_STRIDE] = g->serial_stride;
    f[KT_FB_THREAD_BYTES] = g->thread_bytes;
}

/* The innermost serial loop: every buffer's smallest non-zero stride along
 * it, and the iterations of the straight-line code inside it (unrolled and
 * vectorized loops). */
static void
serial_loop(const struct kt__store_ctx *c, struct bufagg *ag, int nag,
            double *f)
{
    double body = 1, st;
    int l, i, j;

    for (l = c->depth - 1; l >= 0; l--) {
        enum kt_annot a = kt__ann(c, l);
        if (a != KT_ANN_VECTORIZE && a != KT_ANN_UNROLL)
            break;
        body *= (double)kt__ext(c, l);
    }
    f[KT_F_SERIAL_BODY] = body;
    for (j = 0; j < nag && l >= 0; j++)
        for (i = 0; i < c->nacc; i++) {
            if (c->acc[i].buf != ag[j].buf)
                continue;
            st = fabs(kt__stride(c, &c->acc[i], l));
            if (st > 0 && (ag[j].serial_stride == 0 || st < ag[j].serial_stride))
                ag[j].serial_stride = st;
        }
}

/* Bytes of each buffer that one thread touches when the outermost
 * parallel loop is split between two threads in contiguous chunks (the
 * static schedule): the footprint while it runs its first half.  Which
 * buffer a thread's chunk splits decides whether each thread streams all
 * of a large operand or half of it. */
static void
thread_chunk(const struct kt__store_ctx *c, struct bufagg *ag, int nag)
{
    double e, cap;
    int64_t half;
    int l, i, j;

    for (l = 0; l < c->depth; l++)
        if (c->loops[l].n->ann == KT_ANN_PARALLEL)
            break;
    if (l == c->depth)
        return;
    half = (kt__ext(c, l) + 1) / 2;
    for (j = 0; j < nag; j++) {
        e = 0;
        cap = kt__cm_buf_elems(&c->lt->bufs[ag[j].buf]);
        for (i = 0; i < c->nacc; i++)
            if (c->acc[i].buf == ag[j].buf)
                e += kt__footprint_part(c, &c->acc[i], l, half);
        ag[j].thread_bytes = (e < cap ? e : cap) * KT_F_ELEM_BYTES;
    }
}

/* Ten samples of ops/bytes along the cumulative-ops axis, from the
 * innermost loop level (fewest ops) to the whole nest, evenly spaced in
 * log(ops): every level of the nest gets samples, not only the outermost
 * (on a linear axis all ten fall in the last one or two levels). */
static void
ai_curve(const struct kt__store_ctx *c, double flops, const double *lvb,
         double *f)
{
    double lops[KT__MAX_DEPTH + 1], ai[KT__MAX_DEPTH + 1];
    double total, x, t;
    int n = 0, l, k, j;

    total = flops;
    for (l = c->depth; l >= 0; l--) {
        if (l < c->depth)
            total *= (double)kt__ext(c, l);
        if (total <= 0)
            return;
        lops[n] = log(total);
        ai[n] = lvb[l] > 0 ? total / lvb[l] : 0;
        n++;
    }
    j = 0;
    for (k = 0; k < 10; k++) {
        x = lops[0] + (lops[n - 1] - lops[0]) * (k + 1) / 10.0;
        while (j < n - 1 && lops[j] < x)
            j++;
        t = j > 0 && lops[j] > lops[j - 1]
                ? (x - lops[j - 1]) / (lops[j] - lops[j - 1])
                : 1;
        f[k] = j > 0 ? ai[j - 1] + t * (ai[j] - ai[j - 1]) : ai[0];
    }
}

static void
alloc_block(const struct kt__store_ctx *c, double outer, double *f)
{
    const struct kt_lbuf *b = &c->lt->bufs[c->store->buf];
    double size = kt__cm_buf_elems(b) * KT_F_ELEM_BYTES, ao;

    if (b->scope == KT_BUF_ARG)
        return;
    ao = 1;
    if (b->scope == KT_BUF_LOCAL && c->alloc_outer[c->store->buf] > 0)
        ao = (double)c->alloc_outer[c->store->buf];
    f[0] = size;
    f[1] = size * ao;
    f[2] = ao;
    f[3] = outer / ao;
}

/* Group 7: the accesses of the store along its innermost vectorized loop,
 * as the code generator emits them: unit-stride or invariant loads are
 * plain, strides 2..4 are contiguous loads and shuffles, anything else is
 * gathered lane by lane; a reduction store that does not move with the
 * loop keeps lane accumulators. */
static void
vector_block(const struct kt__store_ctx *c, double outer, double *f)
{
    int l, i;

    for (l = c->depth - 1; l >= 0; l--)
        if (c->loops[l].n->ann == KT_ANN_VECTORIZE)
            break;
    if (l < 0)
        return;
    for (i = 0; i < c->nacc; i++) {
        double st = fabs(kt__stride(c, &c->acc[i], l));
        if (c->acc[i].is_write) {
            f[2] = st == 0 && c->store->op != KT_ASSIGN;
            continue;
        }
        if (st == 2 || st == 3 || st == 4)
            f[1] += outer;
        else if (st != 0 && st != 1)
            f[0] += outer;
    }
}

static int
store_row(const struct kt__store_ctx *c, void *arg)
{
    struct rows_out *out = arg;
    struct bufagg ag[KT__MAX_ACC];
    double f[KT_FEATURE_LEN], lvb[KT__MAX_DEPTH + 1];
    double outer = 1, red = 1, st;
    struct kt__ops o;
    int nag = 0, i, j, l, aums = 0;
    float *row;

    memset(f, 0, sizeof(f));
    for (l = 0; l < c->depth; l++) {
        outer *= (double)kt__ext(c, l);
        if (c->loops[l].n->reduce)
            red *= (double)kt__ext(c, l);
        if (c->loops[l].n->auto_unroll_max_step > aums)
            aums = c->loops[l].n->auto_unroll_max_step;
    }

    /* Group 1. */
    kt__count_ops(c->store, &o);
    f[KT_F_FLOAT_MAD] = o.mad * outer;
    f[KT_F_FLOAT_ADDSUB] = o.addsub * outer;
    f[KT_F_FLOAT_MUL] = o.mul * outer;
    f[KT_F_FLOAT_DIV] = o.div * outer;
    f[KT_F_FLOAT_CMP] = o.cmp * outer;
    f[KT_F_FLOAT_MATH] = o.math * outer;
    f[KT_F_FLOAT_OTHER] = o.other * outer;
    f[KT_F_SELECT] = o.select * outer;
    ann_block(c, KT_ANN_VECTORIZE, f + KT_F_VEC_NUM);
    ann_block(c, KT_ANN_UNROLL, f + KT_F_UNROLL_NUM);
    ann_block(c, KT_ANN_PARALLEL, f + KT_F_PARALLEL_NUM);

    /* Group 2: aggregate accesses per buffer. */
    for (i = 0; i < c->nacc; i++) {
        for (j = 0; j < nag; j++)
            if (ag[j].buf == c->acc[i].buf)
                break;
        if (j == nag) {
            memset(&ag[nag], 0, sizeof(ag[nag]));
            ag[nag].buf = c->acc[i].buf;
            ag[nag].stride = -1;
            nag++;
        }
        ag[j].nacc++;
        if (c->acc[i].is_write)
            ag[j].nwrite++;
        else
            ag[j].nread++;
        ag[j].lines += access_lines(c, &c->acc[i], outer);
        if (!c->acc[i].is_write &&
            c->lt->bufs[c->acc[i].buf].scope == KT_BUF_PACKED) {
            f[KT_F_PREPACKED] = 1;
            f[KT_F_PREPACKED_BYTES] += outer * KT_F_ELEM_BYTES;
        }
        st = c->depth > 0 ? fabs(kt__stride(c, &c->acc[i], c->depth - 1)) : 0;
        if (ag[j].stride < 0 || st < ag[j].stride)
            ag[j].stride = st;
    }
    serial_loop(c, ag, nag, f);
    thread_chunk(c, ag, nag);
    for (l = 0; l <= c->depth; l++)
        lvb[l] = kt__level_bytes(c, l);
    for (j = 0; j < nag; j++) {
        double ub = 0, contig = 1;
        for (i = 0; i < c->nacc; i++)
            if (c->acc[i].buf == ag[j].buf) {
                ub += kt__footprint(c, &c->acc[i], 0);
                if (contig == 1)
                    contig = kt__footprint_last(c, &c->acc[i], 0);
            }
        if (ub > kt__cm_buf_elems(&c->lt->bufs[ag[j].buf]))
            ub = kt__cm_buf_elems(&c->lt->bufs[ag[j].buf]);
        ag[j].bytes = ag[j].nacc * outer * KT_F_ELEM_BYTES;
        ag[j].ubytes = ub * KT_F_ELEM_BYTES;
        contig *= KT_F_ELEM_BYTES;
        if (contig > KT_F_CACHE_LINE)
            contig = KT_F_CACHE_LINE;
        ag[j].ulines = ag[j].ubytes / contig;
        if (ag[j].ulines < 1)
            ag[j].ulines = 1;
        reuse(c, &ag[j], lvb);
    }
    qsort(ag, (size_t)nag, sizeof(ag[0]), cmp_bufagg);
    for (j = 0; j < nag && j < KT_F_NBUF; j++)
        buffer_block(c, &ag[j], f + KT_F_BUF0 + j * KT_F_BUF_LEN);

    /* Groups 3-6. */
    ai_curve(c, kt__ops_flops(&o), lvb, f + KT_F_AI_CURVE);
    alloc_block(c, outer, f + KT_F_ALLOC_SIZE);
    f[KT_F_OUTER_PROD] = outer;
    f[KT_F_NUM_LOOPS] = c->depth;
    f[KT_F_AUTO_UNROLL] = aums;
    f[KT_F_STORE_REDUCE] = c->store->op != KT_ASSIGN;
    f[KT_F_STORE_INIT] = c->store->op == KT_ASSIGN && c->store->expr != NULL &&
                         c->store->expr->op == KT_X_CONST;
    f[KT_F_INNER_EXTENT] = c->depth > 0 ? (double)kt__ext(c, c->depth - 1) : 1;
    f[KT_F_REDUCE_PROD] = red;
    vector_block(c, outer, f + KT_F_VEC_GATHER);

    if (out->n == out->cap) {
        out->cap = out->cap ? out->cap * 2 : 8;
        out->rows = kt_xrealloc(out->rows, (size_t)out->cap * KT_FEATURE_LEN *
                                               sizeof(float));
    }
    row = out->rows + (size_t)out->n * KT_FEATURE_LEN;
    /* Most entries are 0 and stay 0 either way: skip their log2. */
    for (i = 0; i < KT_FEATURE_LEN; i++)
        row[i] = f[i] == 0 || kt_feature_is_onehot(i) ? (float)f[i]
                                                      : kt_feature_scale(f[i]);
    out->n++;
    return 0;
}

int
kt_features_extract(const struct kt_looptree *lt, float **rows, int *nrows,
                    char *err, size_t errlen)
{
    struct rows_out out = {NULL, 0, 0};
    int rc;

    *rows = NULL;
    *nrows = 0;
    rc = kt__walk(lt, store_row, &out, err, errlen);
    if (rc < 0) {
        free(out.rows);
        return rc;
    }
    *rows = out.rows;
    *nrows = out.n;
    return 0;
}
