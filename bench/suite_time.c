/* suite_time.c - the timing half of the benchmark suite (bench/suite.sh,
 * docs/performance.md).  For each model config and its tuning database:
 * rebuilds the best stored kernel (as `kerntune show` does), compiles it
 * with the config's target compiler line (as the tuner's worker built and
 * timed it) and times it in this process next to
 * OpenBLAS and oneDNN on the same buffers, and one pass over those buffers
 * (the memory floor), on 1 and 2 threads, with one timing rule
 * (bench/baseline.h); checks every output against the DAG interpreter;
 * prints a table with ratios and appends JSON lines to FILE (a log of
 * every timing: a re-timing of some tasks keeps the earlier lines).
 *
 *   build/bench/suite_time [--json FILE] [--passes N] CONFIG DB [CONFIG DB ...]
 *
 * Every task is timed in N passes over all of them (default 2), each
 * implementation keeping its best; the kernel is built and the reference
 * computed once, before the first.
 */
#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <omp.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/baseline.h"
#include "bench/suite.h"
#include "daemon/show.h"
#include "scheduler/scheduler.h"
#include "tests/support/ktt.h"

void openblas_set_num_threads(int);

/* Each implementation's 15 timed batches run in ROUNDS rounds of
 * BATCHES, the implementations of a task taking turns: a window in which
 * another process holds one of the two CPUs hits every implementation a
 * little instead of one whole.  Timed whole and alone, a 2-thread kernel
 * of 50 us waited at each barrier for the other CPU's scheduler slice:
 * maxpool read 0.2-0.3 GFLOPS in two of three runs at load 1.5 and 36.9
 * in the third.  Slower spells last the whole of a task's timing and do
 * not hit its implementations alike (a kernel near the FMA peak loses
 * most): the same bmm_attn kernel read 123.9 GFLOPS on 1 thread in one
 * suite run where oneDNN read 140.8, and 162.3 in bench_modules right
 * after (docs/performance.md).  So all tasks are timed DEFAULT_PASSES
 * times over, minutes apart, and each implementation keeps its best. */
enum {
    MAX_THREADS = 2,
    ROUNDS = 5,
    BATCHES = 3,
    MAX_DNNL = 4,
    DEFAULT_PASSES = 2
};

/* What was tuned for a task, from its database. */
struct tuned {
    long long trials, ok, build_timeouts;
    double tune_s;      /* first start to last finish */
    double stored_cost; /* best stored cost, seconds (0: none) */
    long long trial_id;
    char cc[256]; /* the target's compiler line the kernel is built with */
};

/* One implementation measured on 1..MAX_THREADS threads. */
struct impl {
    char name[96];
    double t[MAX_THREADS + 1];   /* seconds; 0 = not measured */
    double err[MAX_THREADS + 1]; /* relative L2 error against the interpreter */
};

struct task_result {
    char name[64];
    const char *db; /* its tuning database, as given */
    double flops;
    struct tuned tuned;
    double pack_s;        /* the kernel's pack routine (layout rewrite), once */
    double pass_bytes[2]; /* the kernel's arguments: [0] read, [1] written */
    struct impl ours, blas, dnnl, pass;
    struct impl pass_after; /* the pass again, after all tasks */
};

static double fma_peak[MAX_THREADS + 1];

static double
pass_total(const struct task_result *r)
{
    return r->pass_bytes[0] + r->pass_bytes[1];
}

void
suite_conv_params(const struct kt_layer *L, struct kt_conv2d_params *p)
{
    memset(p, 0, sizeof(*p));
    p->N = L->N, p->C = L->C, p->H = L->H, p->W = L->W, p->K = L->K,
    p->R = L->R;
    p->S = L->S, p->stride_h = L->stride[0], p->stride_w = L->stride[1];
    p->pad_h = L->pad[0], p->pad_w = L->pad[1], p->dilation_h = L->dilation[0];
    p->dilation_w = L->dilation[1], p->groups = L->groups,
    p->epilogue = L->epilogue;
}

/* ---- OpenBLAS --------------------------------------------------------------- */

struct blas_run {
    const struct suite_op *op;
    struct kt_conv2d_params conv;
    float *col;
};

static void
run_blas(void *arg)
{
    struct blas_run *r = arg;
    const struct suite_op *op = r->op;
    const struct kt_layer *L = op->layer;
    int64_t b;

    switch (L->op) {
    case KT_LAYER_CONV2D:
        kt_bench_conv_im2col(&r->conv, op->x, op->w, op->bias, r->col, op->out);
        break;
    case KT_LAYER_DENSE:
        if (L->M == 1)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)L->N, (int)L->K, 1.0f,
                        op->w, (int)L->K, op->x, 1, 0.0f, op->out, 1);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)L->M,
                        (int)L->N, (int)L->K, 1.0f, op->x, (int)L->K, op->w,
                        (int)L->K, 0.0f, op->out, (int)L->N);
        kt_bench_epilogue(op->out, L->M, L->N, op->bias, 0,
                          L->epilogue & KT_EPI_RELU);
        break;
    case KT_LAYER_MATMUL:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)L->M,
                    (int)L->N, (int)L->K, 1.0f, op->x, (int)L->K, op->w,
                    (int)L->N, 0.0f, op->out, (int)L->N);
        break;
    case KT_LAYER_BATCH_MATMUL:
        for (b = 0; b < L->B; b++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans,
                        L->transpose_b ? CblasTrans : CblasNoTrans, (int)L->M,
                        (int)L->N, (int)L->K, 1.0f, op->x + b * L->M * L->K,
                        (int)L->K, op->w + b * L->K * L->N,
                        (int)(L->transpose_b ? L->K : L->N), 0.0f,
                        op->out + b * L->M * L->N, (int)L->N);
        break;
    default: break;
    }
}

static int
blas_has(const struct kt_layer *L)
{
    return L->op == KT_LAYER_CONV2D || L->op == KT_LAYER_DENSE ||
           L->op == KT_LAYER_MATMUL || L->op == KT_LAYER_BATCH_MATMUL;
}

/* ---- one pass over the task's memory --------------------------------------- */

/* Every input of the kernel read once and its output written once, each
 * buffer split over the threads: no implementation moves less data, so a
 * kernel whose time is close to this one's can only gain by moving less
 * (dense_b1 on a machine whose L2 cannot hold its 9.4 MB of weights). */
struct memory_pass {
    int n;
    float *buf[KT_MAX_TENSORS];
    int64_t elems[KT_MAX_TENSORS];
    int is_output[KT_MAX_TENSORS];
    unsigned long long sink;
};

typedef unsigned long long pass_vec __attribute__((vector_size(64)));

/* The bits of p[0..n) folded by xor: four independent 64-byte loads per
 * step, nothing the compiler can drop. */
static unsigned long long
fold_floats(const float *p, int64_t n)
{
    pass_vec a[4] = {{0}}, v;
    unsigned long long x = 0;
    uint32_t w;
    int64_t i = 0;
    int j;

    for (; i + 64 <= n; i += 64)
        for (j = 0; j < 4; j++) {
            memcpy(&v, p + i + 16 * j, sizeof(v));
            a[j] ^= v;
        }
    a[0] ^= a[1] ^ a[2] ^ a[3];
    for (j = 0; j < 8; j++)
        x ^= a[0][j];
    for (; i < n; i++) {
        memcpy(&w, p + i, sizeof(float));
        x ^= w;
    }
    return x;
}

static void
memory_pass_init(struct memory_pass *m, const struct kt_dag *dag,
                 struct ktt_bufs *b, double bytes[2])
{
    int t;

    memset(m, 0, sizeof(*m));
    bytes[0] = bytes[1] = 0;
    for (t = 0; t < dag->ntensors; t++) {
        enum kt_tensor_kind kind = dag->tensors[t].kind;
        if (kind != KT_TENSOR_INPUT && kind != KT_TENSOR_OUTPUT)
            continue;
        m->buf[m->n] = b->t[t];
        m->elems[m->n] = b->elems[t];
        m->is_output[m->n] = kind == KT_TENSOR_OUTPUT;
        bytes[m->is_output[m->n]] += (double)b->elems[t] * sizeof(float);
        m->n++;
    }
}

static void
run_memory_pass(void *arg)
{
    struct memory_pass *m = arg;
    unsigned long long x = 0;

#pragma omp parallel reduction(^ : x)
    {
        int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        int i;
        for (i = 0; i < m->n; i++) {
            int64_t lo = m->elems[i] * t / nt, hi = m->elems[i] * (t + 1) / nt;
            if (m->is_output[i])
                memset(m->buf[i] + lo, 0, (size_t)(hi - lo) * sizeof(float));
            else
                x ^= fold_floats(m->buf[i] + lo, hi - lo);
        }
    }
    m->sink = x;
}

/* ---- kerntune's kernel ------------------------------------------------------ */

struct kernel_run {
    void (*fn)(float *const *);
    float **args;
};

static void
run_kernel(void *arg)
{
    struct kernel_run *k = arg;
    k->fn(k->args);
}

static void
set_threads(int t, void (*kernel_threads)(int))
{
    openblas_set_num_threads(t);
    omp_set_num_threads(t);
    if (kernel_threads != NULL)
        kernel_threads(t);
}

/* One implementation in a timing pass: run(arg), on t threads set by
 * set_threads (with threads, the kernel's own kt_set_threads). */
struct timed {
    struct impl *im;
    void (*run)(void *);
    void *arg;
    void (*threads)(int);
};

/* Times each of v[0..n) on t threads into im->t[t] (the best batch of all
 * rounds), then poisons out, runs it once and compares out with want. */
static void
time_interleaved(struct timed *v, int n, int t, float *out, const float *want,
                 int64_t elems)
{
    int r, i;

    for (i = 0; i < n; i++)
        v[i].im->t[t] = 0;
    for (r = 0; r < ROUNDS; r++)
        for (i = 0; i < n; i++) {
            double x;
            set_threads(t, v[i].threads);
            x = kt_bench_time(v[i].run, v[i].arg, BATCHES);
            if (v[i].im->t[t] == 0 || x < v[i].im->t[t])
                v[i].im->t[t] = x;
        }
    for (i = 0; i < n; i++) {
        set_threads(t, v[i].threads);
        memset(out, 0xff, (size_t)elems * sizeof(float)); /* NaN: a skipped
                                                            * write shows */
        v[i].run(v[i].arg);
        v[i].im->err[t] = ktt_rel_l2(out, want, elems);
    }
}

static void
read_tuned(sqlite3 *db, const char *hash, struct tuned *tu)
{
    sqlite3_stmt *q = NULL;

    if (sqlite3_prepare_v2(db,
                           "select count(*), sum(err_no = 0), sum(err_no = 6), "
                           "max(finished) - min(started) from logs where "
                           "workload_hash = ?",
                           -1, &q, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_text(q, 1, hash, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_ROW) {
        tu->trials = sqlite3_column_int64(q, 0);
        tu->ok = sqlite3_column_int64(q, 1);
        tu->build_timeouts = sqlite3_column_int64(q, 2);
        tu->tune_s = sqlite3_column_double(q, 3);
    }
    sqlite3_finalize(q);
}

/* Builds the best stored kernel of dag from db; returns its dlopen handle or
 * NULL (message on stderr). */
static void *
build_best(const char *db_path, const struct kt_model_conf *conf,
           const struct kt_dag *dag, struct tuned *tu)
{
    struct kt_codegen_opts cg;
    struct kt_shown t;
    sqlite3 *db = NULL;
    char err[4096], *src = NULL;
    void *h = NULL;

    kt_codegen_default_opts(&cg);
    if (conf->target.vector_bytes > 0)
        cg.vector_bytes = (int)conf->target.vector_bytes;
    if (kt_show_open_db(db_path, &db, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "suite: %s\n", err);
        return NULL;
    }
    read_tuned(db, dag->hash, tu);
    if (kt_show_load_best(db, db_path, dag->hash, &t, err, sizeof(err)) !=
            KT_OK ||
        kt_show_module(&t, &cg, &src, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "suite: %s\n", err);
    } else {
        struct kt_buf b;
        char *cc;
        tu->stored_cost = t.cost;
        tu->trial_id = (long long)t.id;
        /* the target's compiler line, as the worker built and timed it */
        kt_buf_init(&b);
        kt_target_cc_line(&conf->target, &b);
        cc = kt_buf_take(&b);
        snprintf(tu->cc, sizeof(tu->cc), "%s", cc);
        h = ktt_build_cc(src, cc, err, sizeof(err));
        free(cc);
        if (h == NULL)
            fprintf(stderr, "suite: %s: trial %lld does not build:\n%.2000s\n",
                    db_path, (long long)t.id, err);
    }
    free(src);
    kt_shown_free(&t);
    sqlite3_close(db);
    return h;
}

static float *
tensor(const struct kt_dag *dag, struct ktt_bufs *b, const char *name)
{
    int i = kt_dag_find_tensor(dag, name);
    return i >= 0 ? b->t[i] : NULL;
}

/* Fills op with the layer's tensors from b (names of docs/compute.md). */
static void
bind_op(struct suite_op *op, const struct kt_layer *L, const struct kt_dag *dag,
        struct ktt_bufs *b)
{
    int product = L->op == KT_LAYER_MATMUL || L->op == KT_LAYER_BATCH_MATMUL;

    op->layer = L;
    op->x = tensor(dag, b, "A")   ? tensor(dag, b, "A")
            : tensor(dag, b, "I") ? tensor(dag, b, "I")
                                  : tensor(dag, b, "X");
    op->w = product ? tensor(dag, b, "B") : tensor(dag, b, "W");
    op->bias = product ? NULL : tensor(dag, b, "B");
    op->out = tensor(dag, b, "O");
}

/* Names the libraries' implementations of op in r and prepares the
 * OpenBLAS run (its im2col buffer: free br->col). */
static void
name_libraries(struct task_result *r, const struct suite_op *op,
               struct blas_run *br)
{
    br->op = op;
    br->col = NULL;
    if (!blas_has(op->layer))
        return;
    snprintf(r->blas.name, sizeof(r->blas.name), "%s",
             op->layer->op == KT_LAYER_CONV2D ? "im2col+sgemm"
             : op->layer->op == KT_LAYER_DENSE && op->layer->M == 1 ? "sgemv"
                                                                    : "sgemm");
    if (op->layer->op == KT_LAYER_CONV2D) {
        suite_conv_params(op->layer, &br->conv);
        br->col = kt_xaligned(64, kt_bench_conv_col_floats(&br->conv) *
                                          sizeof(float) +
                                      64);
    }
}

/* Times OpenBLAS, every oneDNN variant and our kernel (kr, when built) on
 * 1..MAX_THREADS threads, interleaved (time_interleaved).  A oneDNN
 * primitive is created on the thread count it runs on: one created on 2
 * threads keeps running on 2 after omp_set_num_threads(1) (its "1 thread"
 * figures were 2-thread ones: gemm-based convolutions and pooling).  The
 * faster variant on all threads stands for oneDNN. */
static void
time_all(struct task_result *r, const struct suite_op *op,
         struct kernel_run *kr, void (*kernel_threads)(int),
         struct memory_pass *pass, const float *want, int64_t n)
{
    struct blas_run br;
    struct impl dv[MAX_DNNL];
    int ok[MAX_DNNL], nv = suite_dnnl_variants(op), t, v;
    char name[96], err[512];

    if (nv > MAX_DNNL)
        nv = MAX_DNNL;
    memset(dv, 0, sizeof(dv));
    for (v = 0; v < nv; v++)
        ok[v] = 1;
    name_libraries(r, op, &br);
    for (t = 1; t <= MAX_THREADS; t++) {
        struct suite_dnnl *d[MAX_DNNL] = {NULL};
        struct timed list[MAX_DNNL + 3];
        int k = 0;
        if (blas_has(op->layer))
            list[k++] = (struct timed){&r->blas, run_blas, &br, NULL};
        for (v = 0; v < nv; v++) {
            if (!ok[v])
                continue;
            set_threads(t, NULL);
            d[v] = suite_dnnl_new(op, v, name, sizeof(name), err, sizeof(err));
            if (d[v] == NULL) {
                fprintf(stderr, "suite: %s: oneDNN variant %d: %s\n", r->name,
                        v, err);
                ok[v] = 0;
                continue;
            }
            snprintf(dv[v].name, sizeof(dv[v].name), "%s", name);
            list[k++] = (struct timed){&dv[v], suite_dnnl_run, d[v], NULL};
        }
        if (kr != NULL)
            list[k++] = (struct timed){&r->ours, run_kernel, kr,
                                       kernel_threads};
        list[k++] = (struct timed){&r->pass, run_memory_pass, pass, NULL};
        time_interleaved(list, k, t, op->out, want, n);
        for (v = 0; v < nv; v++)
            suite_dnnl_free(d[v]);
    }
    for (v = 0; v < nv; v++)
        if (ok[v] && (r->dnnl.t[MAX_THREADS] == 0 ||
                      dv[v].t[MAX_THREADS] < r->dnnl.t[MAX_THREADS]))
            r->dnnl = dv[v];
    free(br.col);
}

/* The host's other tenants share its caches and memory: a memory-bound
 * kernel timed while they used them reads a ratio that depends on which
 * batches each implementation's best fell in (the held-out dense_b1_4096
 * read 0.78x on 2 threads with its pass at 38.8 GB/s, 1.16x-1.27x re-timed
 * with it at 75 GB/s).  So after all tasks each task's pass runs again on
 * buffers of the same sizes; a memory-bound task (kerntune within 2x of
 * its pass) whose pass ran below 3/4 of that was timed under contention. */
static void
time_pass_after(struct task_result *r)
{
    struct memory_pass m;
    int t, i;

    memset(&m, 0, sizeof(m));
    for (i = 0; i < 2; i++) {
        int64_t bytes = (int64_t)r->pass_bytes[i];
        if (bytes <= 0)
            continue;
        m.elems[m.n] = bytes / (int64_t)sizeof(float);
        m.buf[m.n] = kt_xmalloc((size_t)bytes);
        memset(m.buf[m.n], 0x3c, (size_t)bytes);
        m.is_output[m.n] = i;
        m.n++;
    }
    for (t = 1; t <= MAX_THREADS && m.n > 0; t++) {
        set_threads(t, NULL);
        r->pass_after.t[t] = kt_bench_time(run_memory_pass, &m, BATCHES);
    }
    for (i = 0; i < m.n; i++)
        free(m.buf[i]);
}

static double
pass_gbps(const struct task_result *r, int t)
{
    return r->pass_after.t[t] > 0 ? pass_total(r) / r->pass_after.t[t] / 1e9
                                  : 0;
}

static int
memory_contended(const struct task_result *r, int t)
{
    return r->pass.t[t] > 0 && r->ours.t[t] > 0 && r->pass_after.t[t] > 0 &&
           r->pass.t[t] / r->ours.t[t] > 0.5 &&
           r->pass_after.t[t] < 0.75 * r->pass.t[t];
}

/* A task ready to time: its kernel built and checked against the
 * interpreter's reference once, for every pass. */
struct prepared {
    struct kt_model_conf *conf;
    struct kt_tasks tasks;
    struct ktt_bufs b, ref;
    struct suite_op op;
    struct kernel_run kr;
    struct memory_pass pass;
    float *args[KT_MAX_TENSORS];
    void *h; /* stays open: its OpenMP pool may still run its code */
    void (*threads)(int);
    int out;
    struct task_result base; /* what preparing found: name, kernel, ... */
};

static void
release_task(struct prepared *pt)
{
    ktt_bufs_free(&pt->b);
    ktt_bufs_free(&pt->ref);
    kt_tasks_free(&pt->tasks);
    kt_model_conf_free(pt->conf);
    memset(pt, 0, sizeof(*pt));
}

static int
prepare_task(const char *cfg, const char *db_path, struct prepared *pt)
{
    struct task_result *r = &pt->base;
    char err[1024];

    memset(pt, 0, sizeof(*pt));
    r->db = db_path;
    if (kt_model_conf_load(cfg, &pt->conf, err, sizeof(err)) != KT_OK ||
        kt_tasks_extract(pt->conf, &pt->tasks, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "suite: %s\n", err);
        release_task(pt);
        return 1;
    }
    if (pt->tasks.n != 1 || pt->conf->nlayers != 1) {
        fprintf(stderr, "suite: %s: a suite config has exactly one layer\n",
                cfg);
        release_task(pt);
        return 1;
    }
    snprintf(r->name, sizeof(r->name), "%s", pt->conf->name);
    r->flops = pt->tasks.v[0].dag->flops;
    ktt_bufs_init(&pt->b, pt->tasks.v[0].dag, 1);
    ktt_bufs_init(&pt->ref, pt->tasks.v[0].dag, 1);
    kt_dag_interpret(pt->tasks.v[0].dag, pt->ref.t);
    pt->out = kt_dag_find_tensor(pt->tasks.v[0].dag, "O");
    bind_op(&pt->op, &pt->conf->layers[0], pt->tasks.v[0].dag, &pt->b);
    memory_pass_init(&pt->pass, pt->tasks.v[0].dag, &pt->b, r->pass_bytes);

    pt->h = build_best(db_path, pt->conf, pt->tasks.v[0].dag, &r->tuned);
    if (pt->h != NULL) {
        void (*pack)(float *const *);
        *(void **)&pt->threads = dlsym(pt->h, "kt_set_threads");
        ktt_args(pt->tasks.v[0].dag, &pt->b, pt->args);
        pt->kr.fn = (void (*)(float *const *))dlsym(pt->h, "kt_kernel");
        pt->kr.args = pt->args;
        /* a layout rewrite: the kernel reads the packed weights, built
         * once before it (timed apart, as the runner does) */
        *(void **)&pack = dlsym(pt->h, "kt_pack");
        if (pack != NULL) {
            double t0 = kt_now();
            pack(pt->args);
            r->pack_s = kt_now() - t0;
        }
        snprintf(r->ours.name, sizeof(r->ours.name), "trial %lld",
                 r->tuned.trial_id);
    }
    return 0;
}

/* One pass's timings of a prepared task into r. */
static void
time_task(struct prepared *pt, struct task_result *r)
{
    *r = pt->base;
    time_all(r, &pt->op, pt->h != NULL ? &pt->kr : NULL, pt->threads, &pt->pass,
             pt->ref.t[pt->out], pt->b.elems[pt->out]);
}

/* into keeps, on each thread count, the faster of its timing and from's
 * (the same implementation in another pass) and the larger error; the
 * name of the one faster on all threads. */
static void
keep_faster(struct impl *into, const struct impl *from)
{
    int t;

    if (into->name[0] == 0 || (from->t[MAX_THREADS] > 0 &&
                               from->t[MAX_THREADS] < into->t[MAX_THREADS]))
        memcpy(into->name, from->name, sizeof(into->name));
    for (t = 1; t <= MAX_THREADS; t++) {
        if (from->err[t] > into->err[t])
            into->err[t] = from->err[t];
        if (from->t[t] > 0 && (into->t[t] == 0 || from->t[t] < into->t[t]))
            into->t[t] = from->t[t];
    }
}

static void
merge_pass(struct task_result *into, const struct task_result *from)
{
    keep_faster(&into->ours, &from->ours);
    keep_faster(&into->blas, &from->blas);
    keep_faster(&into->dnnl, &from->dnnl);
    keep_faster(&into->pass, &from->pass);
}

/* ---- report ----------------------------------------------------------------- */

static double
gflops(const struct task_result *r, const struct impl *im, int t)
{
    return im->t[t] > 0 ? r->flops / im->t[t] / 1e9 : 0;
}

/* The faster library on t threads, or NULL when no library ran. */
static const struct impl *
best_library(const struct task_result *r, int t)
{
    if (r->blas.t[t] > 0 && (r->dnnl.t[t] <= 0 || r->blas.t[t] <= r->dnnl.t[t]))
        return &r->blas;
    return r->dnnl.t[t] > 0 ? &r->dnnl : NULL;
}

static void
put_gflops(double g, double err)
{
    if (g <= 0)
        printf(" %9s", "-");
    else
        printf(" %8.1f%s", g, err < 1e-3 ? " " : "!");
}

static void
print_row(const struct task_result *r, int t)
{
    const struct impl *best = best_library(r, t);
    double ours = gflops(r, &r->ours, t);

    printf("%-15s %2d", r->name, t);
    put_gflops(t == MAX_THREADS && r->tuned.stored_cost > 0
                   ? r->flops / r->tuned.stored_cost / 1e9
                   : 0,
               0);
    put_gflops(ours, r->ours.err[t]);
    put_gflops(gflops(r, &r->blas, t), r->blas.err[t]);
    put_gflops(gflops(r, &r->dnnl, t), r->dnnl.err[t]);
    if (best != NULL && ours > 0)
        printf(" %8.2fx", best->t[t] / r->ours.t[t]);
    else
        printf(" %9s", "-");
    if (ours > 0)
        printf(" %6.1f%%", ours / fma_peak[t] * 100);
    else
        printf(" %7s", "-");
    if (ours > 0 && r->pass.t[t] > 0)
        printf(" %6.1f%%%s", r->pass.t[t] / r->ours.t[t] * 100,
               memory_contended(r, t) ? "~" : " ");
    else
        printf(" %7s ", "-");
    printf(" %4lld/%-4lld %4lld\n", r->tuned.ok, r->tuned.trials,
           r->tuned.build_timeouts);
}

static void
json_num(FILE *f, const char *key, double v)
{
    if (v > 0 && isfinite(v))
        fprintf(f, ",\"%s\":%.6g", key, v);
    else
        fprintf(f, ",\"%s\":null", key);
}

static void
json_str(FILE *f, const char *key, const char *v)
{
    fprintf(f, ",\"%s\":\"", key);
    for (; *v != '\0'; v++)
        if (*v == '"' || *v == '\\')
            fprintf(f, "\\%c", *v);
        else if ((unsigned char)*v < 0x20)
            fprintf(f, "\\u%04x", (unsigned)*v);
        else
            fputc(*v, f);
    fputc('"', f);
}

/* The machine's CPU (kt_bench_cpu_model) and OpenBLAS's build and
 * kernels, printed and in every JSON line. */
static char cpu_model[256], openblas[256];

static void
write_json(FILE *f, const struct task_result *r, int t, int passes,
           const char *date)
{
    const struct impl *best = best_library(r, t);

    fprintf(f, "{\"date\":\"%s\",\"task\":\"%s\"", date, r->name);
    json_str(f, "cpu", cpu_model);
    json_str(f, "openblas", openblas);
    json_str(f, "db", r->db);
    fprintf(f, ",\"threads\":%d,\"passes\":%d,\"flops\":%.0f", t, passes,
            r->flops);
    fprintf(f,
            ",\"trials\":%lld,\"ok_trials\":%lld,\"build_timeouts\":%lld,"
            "\"trial_id\":%lld",
            r->tuned.trials, r->tuned.ok, r->tuned.build_timeouts,
            r->tuned.trial_id);
    json_num(f, "tune_s", r->tuned.tune_s);
    json_num(f, "kerntune_pack_ms", r->pack_s * 1e3);
    json_num(f, "kerntune_stored_gflops",
             t == MAX_THREADS && r->tuned.stored_cost > 0
                 ? r->flops / r->tuned.stored_cost / 1e9
                 : 0);
    json_num(f, "kerntune_gflops", gflops(r, &r->ours, t));
    json_num(f, "openblas_gflops", gflops(r, &r->blas, t));
    fprintf(f, ",\"openblas_impl\":\"%s\"", r->blas.name);
    json_num(f, "onednn_gflops", gflops(r, &r->dnnl, t));
    fprintf(f, ",\"onednn_impl\":\"%s\"", r->dnnl.name);
    json_num(f, "ratio_vs_best_library",
             best != NULL && r->ours.t[t] > 0 ? best->t[t] / r->ours.t[t] : 0);
    json_num(f, "fma_peak_gflops", fma_peak[t]);
    json_num(f, "fraction_of_peak", gflops(r, &r->ours, t) / fma_peak[t]);
    json_num(f, "memory_pass_gbps",
             r->pass.t[t] > 0 ? pass_total(r) / r->pass.t[t] / 1e9 : 0);
    json_num(f, "fraction_of_memory_pass",
             r->ours.t[t] > 0 ? r->pass.t[t] / r->ours.t[t] : 0);
    json_num(f, "memory_pass_after_gbps", pass_gbps(r, t));
    fprintf(f, ",\"memory_contended\":%s",
            memory_contended(r, t) ? "true" : "false");
    fprintf(f, ",\"all_correct\":%s}\n",
            r->ours.err[t] < 1e-3 && r->blas.err[t] < 1e-3 &&
                    r->dnnl.err[t] < 1e-3
                ? "true"
                : "false");
}

static void
print_machine(const char *date)
{
    char load[64] = "?";
    FILE *f;

    kt_bench_cpu_model(cpu_model, sizeof(cpu_model));
    f = fopen("/proc/loadavg", "r");
    if (f != NULL && fgets(load, sizeof(load), f) != NULL)
        load[strcspn(load, "\n")] = '\0';
    if (f != NULL)
        fclose(f);
    kt_bench_openblas_describe(openblas, sizeof(openblas));
    printf("%s; CPU: %s, %ld threads online; load (1/5/15 min, ...): %s\n"
           "%s\n",
           date, cpu_model, sysconf(_SC_NPROCESSORS_ONLN), load, openblas);
}

/* Raises fma_peak[] to this measurement where it is higher: on a shared
 * machine the least disturbed run is the closest to the peak. */
static void
measure_peak(const char **isa)
{
    int t;

    for (t = 1; t <= MAX_THREADS; t++) {
        double g = kt_bench_fma_peak(t, isa);
        if (g > fma_peak[t])
            fma_peak[t] = g;
    }
}

int
main(int argc, char **argv)
{
    struct task_result *res;
    struct prepared *prep;
    const char *json_path = NULL, *isa = "?";
    char date[64];
    time_t now = time(NULL);
    FILE *json = NULL;
    int i, t, first = 1, n = 0, ntasks, passes = DEFAULT_PASSES, p;
    char *failed;

    kt_bench_openblas_widest(argv);
    while (first + 1 < argc && argv[first][0] == '-') {
        if (strcmp(argv[first], "--json") == 0)
            json_path = argv[first + 1];
        else if (strcmp(argv[first], "--passes") == 0)
            passes = atoi(argv[first + 1]);
        else
            break;
        first += 2;
    }
    if (argc - first < 2 || (argc - first) % 2 != 0 || passes < 1) {
        fprintf(stderr, "usage: suite_time [--json FILE] [--passes N] CONFIG "
                        "DB [CONFIG DB ...]\n");
        return 2;
    }
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
    print_machine(date);
    measure_peak(&isa);
    ntasks = (argc - first) / 2;
    res = kt_xcalloc((size_t)ntasks, sizeof(*res));
    prep = kt_xcalloc((size_t)ntasks, sizeof(*prep));
    failed = kt_xcalloc((size_t)ntasks, 1);
    for (p = 0; p < passes; p++) {
        for (i = 0; i < ntasks; i++) {
            struct task_result r;
            if (p == 0 && prepare_task(argv[first + 2 * i],
                                       argv[first + 2 * i + 1], &prep[i]) != 0)
                failed[i] = 1;
            if (failed[i])
                continue;
            time_task(&prep[i], &r);
            if (p == 0)
                res[i] = r;
            else
                merge_pass(&res[i], &r);
        }
        measure_peak(&isa);
    }
    for (i = 0; i < ntasks; i++) {
        if (!failed[i]) {
            release_task(&prep[i]);
            res[n++] = res[i];
        }
    }
    free(prep);
    free(failed);
    for (i = 0; i < n; i++)
        time_pass_after(&res[i]);
    printf("FMA peak (register-only %s FMA loop, best of the runs before "
           "the tasks and after each pass): %.1f GFLOPS on 1 thread, %.1f "
           "on 2\n",
           isa, fma_peak[1], fma_peak[2]);
    printf("\nGFLOPS, best of %d timed batches per implementation (%d "
           "rounds, the implementations taking turns, in each of %d passes "
           "over all tasks), same process and buffers\n"
           "(\"!\": output differs from the reference; \"~\": a memory-bound "
           "task whose pass ran below 3/4 of its speed after all tasks,\n"
           "its timing shared the memory with other tenants; stored = the "
           "tuner's own measurement)\n\n",
           ROUNDS * BATCHES * passes, ROUNDS, passes);
    printf("%-15s %2s %9s %9s %9s %9s %9s %7s %7s %9s %4s\n", "task", "T",
           "stored", "kerntune", "OpenBLAS", "oneDNN", "ours/best", "%peak",
           "%pass", "ok/trials", "bto");
    for (i = 0; i < n; i++)
        for (t = 1; t <= MAX_THREADS; t++)
            print_row(&res[i], t);
    printf("\nimplementations:\n");
    for (i = 0; i < n; i++)
        printf("  %-15s kerntune %s (tuned %.0f s, pack %.2f ms, built with "
               "%s); OpenBLAS %s; oneDNN %s; one pass over its %.2f MB: "
               "%.1f / %.1f GB/s (%.1f / %.1f after the tasks)\n",
               res[i].name, res[i].ours.name[0] ? res[i].ours.name : "-",
               res[i].tuned.tune_s, res[i].pack_s * 1e3, res[i].tuned.cc,
               res[i].blas.name[0] ? res[i].blas.name : "-",
               res[i].dnnl.name[0] ? res[i].dnnl.name : "-",
               pass_total(&res[i]) / 1e6,
               res[i].pass.t[1] > 0
                   ? pass_total(&res[i]) / res[i].pass.t[1] / 1e9
                   : 0,
               res[i].pass.t[2] > 0
                   ? pass_total(&res[i]) / res[i].pass.t[2] / 1e9
                   : 0,
               pass_gbps(&res[i], 1), pass_gbps(&res[i], 2));
    if (json_path != NULL && (json = fopen(json_path, "a")) == NULL)
        fprintf(stderr, "suite: %s: cannot write\n", json_path);
    for (i = 0; json != NULL && i < n; i++)
        for (t = 1; t <= MAX_THREADS; t++)
            write_json(json, &res[i], t, passes, date);
    if (json != NULL) {
        fclose(json);
        printf("JSON lines: %s\n", json_path);
    }
    return n == (argc - first) / 2 ? 0 : 1;
}
