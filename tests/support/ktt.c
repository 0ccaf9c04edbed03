/* ktt.c - see ktt.h. */
#include "tests/support/ktt.h"
#include "costmodel/costmodel.h"
#include "scheduler/scheduler.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ktt_gcc_miscompiles;

/* Compiles src with "compiler -shared -fPIC -o K.so K.c libs". */
static void *
build_with(const char *src, const char *compiler, const char *libs, char *err,
           size_t errlen)
{
    char dir[] = "/tmp/ktt.XXXXXX", cpath[64], sopath[64], cmd[4096], log[64];
    void *h = NULL;
    FILE *f;

    /* libgomp must outlive every kernel: its idle pool threads sit in its
     * code, so unloading it with the last kernel crashes them. */
    dlopen("libgomp.so.1", RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
    if (mkdtemp(dir) == NULL) {
        snprintf(err, errlen, "mkdtemp failed");
        return NULL;
    }
    snprintf(cpath, sizeof(cpath), "%s/k.c", dir);
    snprintf(sopath, sizeof(sopath), "%s/k.so", dir);
    snprintf(log, sizeof(log), "%s/cc.log", dir);
    f = fopen(cpath, "w");
    if (f == NULL) {
        snprintf(err, errlen, "cannot write %s", cpath);
        return NULL;
    }
    fputs(src, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "%s -shared -fPIC -o %s %s %s > %s 2>&1",
             compiler, sopath, cpath, libs, log);
    if (system(cmd) != 0) {
        f = fopen(log, "r");
        size_t n = f ? fread(err, 1, errlen - 1, f) : 0;
        err[n] = '\0';
        if (f)
            fclose(f);
        if (getenv("KT_TEST_KEEP"))
            fprintf(stderr, "kept %s\n", cpath);
        return NULL;
    }
    h = dlopen(sopath, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        snprintf(err, errlen, "dlopen: %s", dlerror());
    if (!getenv("KT_TEST_KEEP")) {
        unlink(cpath);
        unlink(sopath);
        unlink(log);
        rmdir(dir);
    } else {
        fprintf(stderr, "kept %s\n", cpath);
    }
    return h;
}

void *
ktt_build(const char *src, char *err, size_t errlen)
{
    const char *cc = getenv("KT_TEST_CC") ? getenv("KT_TEST_CC") : "gcc";
    const char *cflags = getenv("KT_TEST_CFLAGS")
                             ? getenv("KT_TEST_CFLAGS")
                             : "-O3 -march=native -fopenmp";
    char compiler[2048];

    snprintf(compiler, sizeof(compiler), "%s %s -std=gnu11", cc, cflags);
    return build_with(src, compiler, "-lm", err, errlen);
}

void *
ktt_build_cc(const char *src, const char *cc_line, char *err, size_t errlen)
{
    return build_with(src, cc_line, "", err, errlen);
}

void
ktt_bufs_init(struct ktt_bufs *b, const struct kt_dag *dag, uint64_t seed)
{
    struct kt_rng r;
    int t;
    int64_t i;

    kt_rng_seed(&r, seed);
    memset(b, 0, sizeof(*b));
    b->n = dag->ntensors;
    for (t = 0; t < dag->ntensors; t++) {
        b->elems[t] = kt_tensor_elems(&dag->tensors[t]);
        b->t[t] = kt_xaligned(64, ((size_t)b->elems[t] + KTT_CANARY) *
                                      sizeof(float));
        for (i = 0; i < b->elems[t]; i++)
            b->t[t][i] = dag->tensors[t].kind == KT_TENSOR_INPUT
                             ? (float)(kt_rng_unit(&r) * 2.0 - 1.0)
                             : NAN;
        for (i = 0; i < KTT_CANARY; i++)
            b->t[t][b->elems[t] + i] = KTT_CANARY_VALUE;
    }
}

int
ktt_bufs_intact(const struct ktt_bufs *b)
{
    int t;
    int64_t i;

    for (t = 0; t < b->n; t++)
        for (i = 0; i < KTT_CANARY; i++)
            if (b->t[t][b->elems[t] + i] != KTT_CANARY_VALUE)
                return 0;
    return 1;
}

void
ktt_bufs_free(struct ktt_bufs *b)
{
    int t;

    for (t = 0; t < b->n; t++)
        free(b->t[t]);
    memset(b, 0, sizeof(*b));
}

int
ktt_args(const struct kt_dag *dag, struct ktt_bufs *b, float **args)
{
    int n = 0, pass, t;

    for (pass = 0; pass < 2; pass++)
        for (t = 0; t < dag->ntensors; t++)
            if (dag->tensors[t].kind ==
                (pass ? KT_TENSOR_OUTPUT : KT_TENSOR_INPUT))
                args[n++] = b->t[t];
    return n;
}

double
ktt_rel_l2(const float *got, const float *want, int64_t n)
{
    double num = 0, den = 0;
    int64_t i;

    for (i = 0; i < n; i++) {
        double d = (double)got[i] - (double)want[i];
        if (isnan(got[i]))
            return INFINITY;
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

int ktt_vector_bytes;

char *
ktt_module_many(const struct kt_dag *dag, struct kt_state *const *cands,
                int ncand, int *generated, int *skipped)
{
    struct kt_codegen_opts o;
    struct kt_buf b, names, packs;
    char err[512], fname[32];
    int i, ok = 0;

    kt_codegen_default_opts(&o);
    if (ktt_vector_bytes > 0)
        o.vector_bytes = ktt_vector_bytes;
    kt_buf_init(&b);
    kt_buf_init(&names);
    kt_buf_init(&packs);
    *skipped = 0;
    if (kt_codegen_module(NULL, dag, &o, &b, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "reference: %s\n", err);
        kt_buf_free(&names);
        kt_buf_free(&packs);
        kt_buf_free(&b);
        return NULL;
    }
    for (i = 0; i < ncand; i++) {
        struct kt_looptree *lt = NULL;
        size_t mark = b.len;
        snprintf(fname, sizeof(fname), "cand_%d", i);
        if (kt_lower(cands[i], &lt, err, sizeof(err)) != KT_OK ||
            kt_codegen_function(lt, &o, fname, &b, err, sizeof(err)) != KT_OK) {
            struct kt_buf j;
            kt_buf_init(&j);
            kt_steps_to_json(cands[i]->steps, cands[i]->nsteps, &j);
            fprintf(stderr, "candidate %d rejected: %s\n  %s\n", i, err, j.p);
            kt_buf_free(&j);
            b.len = mark;
            b.p[mark] = '\0';
            (*skipped)++;
            kt_looptree_free(lt);
            continue;
        }
        kt_buf_printf(&packs, "%s%s%s", ok ? ", " : "",
                      lt->pack_root ? fname : "0",
                      lt->pack_root ? "_pack" : "");
        kt_looptree_free(lt);
        kt_buf_printf(&names, "%s%s", ok ? ", " : "", fname);
        generated[ok++] = i;
    }
    kt_buf_printf(&b, "void (*ktt_cands[])(float *const *) = {%s%s};\n",
                  names.p, ok ? "" : "0");
    kt_buf_printf(&b, "void (*ktt_packs[])(float *const *) = {%s%s};\n",
                  packs.p, ok ? "" : "0");
    kt_buf_free(&names);
    kt_buf_free(&packs);
    return kt_buf_take(&b);
}

/* Prints the steps of candidate i of cands for a failure message. */
static void
print_cand(const char *key, struct kt_state *const *cands, int i,
           const char *what)
{
    struct kt_buf j;

    kt_buf_init(&j);
    kt_steps_to_json(cands[i]->steps, cands[i]->nsteps, &j);
    fprintf(stderr, "%s: candidate %d %s: %s\n", key, i, what, j.p);
    kt_buf_free(&j);
}

/* Whether every output of dag in got matches want. */
static int
outputs_match(const struct kt_dag *dag, const struct ktt_bufs *got,
              const struct ktt_bufs *want, double *worst)
{
    int t, ok = 1;

    *worst = 0;
    for (t = 0; t < dag->ntensors; t++) {
        double e;
        if (dag->tensors[t].kind != KT_TENSOR_OUTPUT)
            continue;
        e = ktt_rel_l2(got->t[t], want->t[t], want->elems[t]);
        if (!(e < 1e-4)) {
            ok = 0;
            if (!(e <= *worst))
                *worst = e;
        }
    }
    return ok;
}

/* Runs the one candidate (and its pack) of module h on got, from seed;
 * whether it wrote only its outputs and they match want. */
static int
run_matches(const struct kt_dag *dag, void *h, struct ktt_bufs *got,
            const struct ktt_bufs *want)
{
    typedef void (*kernel_fn)(float *const *);
    kernel_fn *fns = (kernel_fn *)dlsym(h, "ktt_cands");
    kernel_fn *packs = (kernel_fn *)dlsym(h, "ktt_packs");
    float *args[KT_MAX_TENSORS];
    double e = 0;
    int t;

    if (fns == NULL || packs == NULL || fns[0] == NULL)
        return 0;
    for (t = 0; t < dag->ntensors; t++)
        if (dag->tensors[t].kind == KT_TENSOR_OUTPUT)
            memset(got->t[t], 0xff, (size_t)got->elems[t] * sizeof(float));
    ktt_args(dag, got, args);
    if (packs[0] != NULL)
        packs[0](args);
    fns[0](args);
    return ktt_bufs_intact(got) && outputs_match(dag, got, want, &e);
}

/* Whether candidate cand, wrong as ktt_build built it, computes the right
 * outputs when gcc does not optimize and when clang optimizes: then gcc's
 * optimizer miscompiled it, not the generator (gcc 12.2 has two such
 * bugs, docs/measure.md), and the measuring worker's check stores such a
 * program as an error. */
static int
right_unless_gcc_optimizes(const struct kt_dag *dag, struct kt_state *cand,
                           uint64_t seed, const struct ktt_bufs *want)
{
    /* clang without OpenMP: its libomp next to the tests' libgomp
     * crashed LeakSanitizer's exit-time tracer under make unit-asan */
    static const char *const lines[] = {
        "gcc -O0 -fopenmp -std=gnu11",
        "clang -O3 -march=native -std=gnu11",
    };
    struct ktt_bufs got;
    int gen[1], skipped = 0, right = 1;
    unsigned k;
    char err[512];
    char *src = ktt_module_many(dag, &cand, 1, gen, &skipped);

    if (src == NULL || skipped != 0) {
        free(src);
        return 0;
    }
    ktt_bufs_init(&got, dag, seed);
    for (k = 0; right && k < sizeof(lines) / sizeof(lines[0]); k++) {
        void *h = ktt_build_cc(src, lines[k], err, sizeof(err));
        right = h != NULL && run_matches(dag, h, &got, want);
        if (h != NULL)
            dlclose(h);
    }
    ktt_bufs_free(&got);
    free(src);
    return right;
}

int
ktt_check_many(const struct kt_dag *dag, struct kt_state *const *cands,
               int ncand, uint64_t seed, int *skipped)
{
    int *generated = calloc((size_t)ncand + 1, sizeof(int));
    struct ktt_bufs want, got;
    float *args[KT_MAX_TENSORS];
    void (**fns)(float *const *), (**packs)(float *const *);
    void (*ref)(float *const *);
    char err[4096];
    char *src;
    void *h;
    double e = 0.0;
    int i, t, rc = 0;

    *skipped = 0;
    src = ktt_module_many(dag, cands, ncand, generated, skipped);
    if (src == NULL) {
        free(generated);
        return -1;
    }
    h = ktt_build(src, err, sizeof(err));
    free(src);
    if (h == NULL) {
        fprintf(stderr, "%s: compile failed:\n%.3000s\n", dag->key, err);
        free(generated);
        return -1;
    }
    fns = (void (**)(float *const *))dlsym(h, "ktt_cands");
    packs = (void (**)(float *const *))dlsym(h, "ktt_packs");
    ref = (void (*)(float *const *))dlsym(h, "kt_reference");
    if (fns == NULL || packs == NULL || ref == NULL) {
        fprintf(stderr, "%s: ktt_cands or kt_reference missing\n", dag->key);
        dlclose(h);
        free(generated);
        return -1;
    }
    ktt_bufs_init(&want, dag, seed);
    kt_dag_interpret(dag, want.t);
    ktt_bufs_init(&got, dag, seed);
    ktt_args(dag, &got, args);
    ref(args);
    if (!ktt_bufs_intact(&got) || !outputs_match(dag, &got, &want, &e)) {
        fprintf(stderr, "%s: reference wrong (rel L2 %g)\n", dag->key, e);
        rc = -1;
    }
    for (i = 0; i < ncand - *skipped; i++) {
        for (t = 0; t < dag->ntensors; t++)
            if (dag->tensors[t].kind == KT_TENSOR_OUTPUT)
                memset(got.t[t], 0xff, (size_t)got.elems[t] * sizeof(float));
        if (getenv("KT_TEST_VERBOSE"))
            print_cand(dag->key, cands, generated[i], "running");
        if (packs[i] != NULL)
            packs[i](args); /* the layout rewrite, once */
        fns[i](args);
        if (!ktt_bufs_intact(&got)) {
            print_cand(dag->key, cands, generated[i],
                       "wrote past the end of a buffer");
            rc = -1;
        } else if (!outputs_match(dag, &got, &want, &e)) {
            char what[160];
            if (right_unless_gcc_optimizes(dag, cands[generated[i]], seed,
                                           &want)) {
                snprintf(what, sizeof(what),
                         "wrong (rel L2 %g) as gcc optimizes it, right with "
                         "gcc -O0 and clang -O3: a gcc miscompile, not "
                         "counted",
                         e);
                print_cand(dag->key, cands, generated[i], what);
                ktt_gcc_miscompiles++;
                continue;
            }
            snprintf(what, sizeof(what), "wrong (rel L2 %g)", e);
            print_cand(dag->key, cands, generated[i], what);
            rc = -1;
        }
    }
    ktt_bufs_free(&want);
    ktt_bufs_free(&got);
    dlclose(h);
    free(generated);
    return rc;
}

struct kt_conv2d_params
ktt_square_conv(int64_t C, int64_t H, int64_t K, int64_t R, int64_t stride,
                int64_t pad, int64_t dil, int64_t groups, int epi)
{
    struct kt_conv2d_params p = {
        .N = 1,
        .C = C,
        .H = H,
        .W = H,
        .K = K,
        .R = R,
        .S = R,
        .stride_h = stride,
        .stride_w = stride,
        .pad_h = pad,
        .pad_w = pad,
        .dilation_h = dil,
        .dilation_w = dil,
        .groups = groups,
        .epilogue = epi,
    };

    return p;
}

int
ktt_conv_def(struct kt_op_def *d, int64_t C, int64_t H, int64_t K, int64_t R,
             int64_t stride, int64_t pad, int64_t dil, int64_t groups, int epi)
{
    struct kt_conv2d_params p = ktt_square_conv(C, H, K, R, stride, pad, dil,
                                                groups, epi);

    return kt_op_conv2d(d, &p);
}

struct kt_dag *
ktt_depthwise3x3(int64_t side, int64_t stride)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    char err[512];

    snprintf(err, sizeof(err), "kt_op_conv2d refused it");
    if (ktt_conv_def(&d, 16, side, 16, 3, stride, 1, 1, 16,
                     KT_EPI_BIAS | KT_EPI_RELU) != KT_OK ||
        kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "ktt_depthwise3x3(%lld, %lld): %s\n", (long long)side,
                (long long)stride, err);
        abort();
    }
    return dag;
}

struct kt_dag *
ktt_dense(int64_t M, int64_t N, int64_t K)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    char err[512];

    snprintf(err, sizeof(err), "kt_op_dense refused it");
    if (kt_op_dense(&d, M, N, K, 0) != KT_OK ||
        kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "ktt_dense(%lld, %lld, %lld): %s\n", (long long)M,
                (long long)N, (long long)K, err);
        abort();
    }
    return dag;
}

struct kt_search *
ktt_avx512_search(const struct kt_dag *dag)
{
    struct kt_search *s = NULL;
    struct kt_search_opts o;
    char err[512];

    kt_search_opts_default(&o);
    o.vector_bytes = 64;
    if (kt_search_new(&s, dag, &o, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "ktt_avx512_search: %s\n", err);
        abort();
    }
    return s;
}

int
ktt_conv_grid_def(struct kt_op_def *d, int64_t C, int64_t H, int64_t K,
                  int64_t R, int64_t stride, int64_t pad, int64_t dil,
                  int64_t groups, int epi)
{
    struct kt_conv2d_params p = ktt_square_conv(C, H, K, R, stride, pad, dil,
                                                groups, epi);

    return kt_op_conv2d_grid(d, &p);
}

static int64_t
conv_out_size(int64_t in, int64_t pad, int64_t dil, int64_t win, int64_t stride)
{
    return (in + 2 * pad - dil * (win - 1) - 1) / stride + 1;
}

void
ktt_naive_conv(const struct kt_conv2d_params *p, const float *in,
               const float *w, const float *bias, float *out)
{
    int64_t OH = conv_out_size(p->H, p->pad_h, p->dilation_h, p->R,
                               p->stride_h);
    int64_t OW = conv_out_size(p->W, p->pad_w, p->dilation_w, p->S,
                               p->stride_w);
    int64_t cg = p->C / p->groups, kg = p->K / p->groups;
    int64_t n, k, y, x, c, r, s, iy, ix, ic;
    double acc;

    for (n = 0; n < p->N; n++)
        for (k = 0; k < p->K; k++)
            for (y = 0; y < OH; y++)
                for (x = 0; x < OW; x++) {
                    acc = 0;
                    for (c = 0; c < cg; c++)
                        for (r = 0; r < p->R; r++)
                            for (s = 0; s < p->S; s++) {
                                iy = y * p->stride_h + r * p->dilation_h -
                                     p->pad_h;
                                ix = x * p->stride_w + s * p->dilation_w -
                                     p->pad_w;
                                if (iy < 0 || iy >= p->H || ix < 0 ||
                                    ix >= p->W)
                                    continue;
                                ic = (k / kg) * cg + c;
                                acc += in[((n * p->C + ic) * p->H + iy) * p->W +
                                          ix] *
                                       w[((k * cg + c) * p->R + r) * p->S + s];
                            }
                    if (p->epilogue & KT_EPI_BIAS)
                        acc += bias[k];
                    if ((p->epilogue & KT_EPI_RELU) && acc < 0)
                        acc = 0;
                    out[((n * p->K + k) * OH + y) * OW + x] = (float)acc;
                }
}

static double
unscale(float v)
{
    return exp2((double)v) - 1.0; /* features are log2(1 + x) */
}

double
ktt_synthetic_cost(const float *rows, int nrows)
{
    static const int work[] = {KT_F_FLOAT_MAD,  KT_F_FLOAT_ADDSUB,
                               KT_F_FLOAT_MUL,  KT_F_FLOAT_DIV,
                               KT_F_FLOAT_CMP,  KT_F_FLOAT_MATH,
                               KT_F_FLOAT_OTHER};
    double sec = 0;
    int i, k;

    for (i = 0; i < nrows; i++) {
        const float *f = rows + (size_t)i * KT_FEATURE_LEN;
        double ops = 0, lanes, par;
        for (k = 0; k < (int)(sizeof(work) / sizeof(work[0])); k++)
            ops += unscale(f[work[k]]);
        lanes = unscale(f[KT_F_VEC_NUM + KT_FA_LEN]);
        par = unscale(f[KT_F_PARALLEL_NUM + KT_FA_PROD]);
        lanes = lanes < 1 ? 1 : lanes > 16 ? 16 : lanes;
        par = par < 1 ? 1 : par > 2 ? 2 : par;
        sec += (ops + 1) / (lanes * par) * 1e-9;
    }
    return sec;
}

char *
ktt_slurp(const char *dir, const char *name, size_t *len)
{
    char path[4400];
    struct kt_buf b;
    char chunk[4096];
    size_t k;
    FILE *in;

    if (dir != NULL)
        snprintf(path, sizeof(path), "%s/%s", dir, name);
    else
        snprintf(path, sizeof(path), "%s", name);
    in = fopen(path, "rb");
    if (in == NULL)
        return NULL;
    kt_buf_init(&b);
    while ((k = fread(chunk, 1, sizeof(chunk), in)) > 0)
        kt_buf_put(&b, chunk, k);
    fclose(in);
    if (len != NULL)
        *len = b.len;
    return kt_buf_take(&b);
}

char *
ktt_checked_c(const struct kt_dag *dag, struct kt_state *st, uint64_t seed)
{
    int gen = 0, skipped = 0;
    char *src = ktt_module_many(dag, &st, 1, &gen, &skipped), *body = NULL;

    if (src != NULL && skipped == 0 &&
        ktt_check_many(dag, &st, 1, seed, &skipped) == 0 && skipped == 0 &&
        (body = strstr(src, "cand_0(")) != NULL)
        body = strdup(body);
    else
        body = NULL;
    free(src);
    return body;
}

char *
ktt_checked_c_at(const struct kt_dag *dag, struct kt_state *st,
                 int vector_bytes, uint64_t seed)
{
    int saved = ktt_vector_bytes;
    char *c;

    ktt_vector_bytes = vector_bytes;
    c = ktt_checked_c(dag, st, seed);
    ktt_vector_bytes = saved;
    return c;
}

int64_t
ktt_code_weight(const struct kt_state *st, int vector_bytes, int64_t *bound)
{
    struct kt_looptree *lt = NULL;
    struct kt_codegen_opts o;
    int64_t total = -1;
    char err[512];

    kt_codegen_default_opts(&o);
    o.vector_bytes = vector_bytes;
    *bound = 2 * (int64_t)o.max_unrolled_stmts;
    if (kt_lower(st, &lt, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "lowering: %s\n", err);
        return -1;
    }
    kt_codegen_block_size(lt, &o, &total);
    kt_looptree_free(lt);
    return total;
}

int
ktt_within_code_bound(const struct kt_state *st, int vector_bytes)
{
    int64_t bound, total = ktt_code_weight(st, vector_bytes, &bound);

    if (total >= 0 && total <= bound)
        return 1;
    fprintf(stderr, "weighs %lld, over the code-size bound %lld\n",
            (long long)total, (long long)bound);
    return 0;
}

struct kt_state *
ktt_replay_json(const struct kt_dag *dag, const char *json)
{
    struct kt_step *steps = NULL;
    struct kt_state *st = NULL;
    char err[512];
    int n = 0;

    if (kt_steps_from_json(json, &steps, &n, err, sizeof(err)) != KT_OK ||
        kt_state_replay(dag, steps, n, &st, err, sizeof(err)) != KT_OK)
        fprintf(stderr, "%s: %s\n", json, err);
    free(steps);
    return st;
}

struct kt_search *
ktt_sketch_search(const struct kt_dag *dag, int population, uint64_t seed,
                  double mutation_prob)
{
    struct kt_search_opts o;
    struct kt_search *s = NULL;
    char err[512];

    kt_search_opts_default(&o);
    o.policy = KT_POLICY_SKETCH_RANDOM;
    o.population = population;
    o.seed = seed;
    if (mutation_prob >= 0)
        o.mutation_prob = mutation_prob;
    if (kt_search_new(&s, dag, &o, err, sizeof(err)) != KT_OK)
        fprintf(stderr, "%s: %s\n", dag->key, err);
    return s;
}

int
ktt_count(const char *hay, const char *needle)
{
    int n = 0;

    while ((hay = strstr(hay, needle)) != NULL) {
        n++;
        hay += strlen(needle);
    }
    return n;
}
