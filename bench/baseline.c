/* baseline.c - see baseline.h. */
#include "bench/baseline.h"

#include <cblas.h>
#include <errno.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Wall-clock seconds, or with KT_BENCH_CLOCK=cpu the CPU time of the whole
 * process: on a shared machine the time a 1-thread kernel spends preempted
 * is then not counted (with several threads it is the sum over them). */
static int
bench_cpu_clock(void)
{
    static int cpu = -1;

    if (cpu < 0) {
        const char *c = getenv("KT_BENCH_CLOCK");
        cpu = c != NULL && strcmp(c, "cpu") == 0;
    }
    return cpu;
}

static double
cpu_seconds(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double
bench_now(void)
{
    return bench_cpu_clock() ? cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) : kt_now();
}

/* Waits until no thread of this process has run for a 2 ms slice (at most
 * ~1 s).  Thread pools spin after a call before they sleep: measured on
 * the Zen 4 (docs/performance.md), OpenBLAS's pthreads ~100 ms, libgomp's
 * ~8 ms.  A spinning pool holds one of two CPUs from whatever is timed
 * next on 2 threads: in 10-call windows, oneDNN's GEMM right after
 * OpenBLAS ran 157 GFLOPS instead of 208. */
static void
wait_quiet(void)
{
    const struct timespec slice = {0, 2000000};
    int i;

    for (i = 0; i < 500; i++) {
        double c0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
        nanosleep(&slice, NULL);
        if (cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0 < 2e-4)
            return;
    }
}

double
kt_bench_time(void (*run)(void *), void *arg, int repeats)
{
    double t0, once, best = 1e30;
    long n, i;
    int r;

    wait_quiet();
    t0 = bench_now();
    run(arg);
    once = bench_now() - t0;
    n = once >= 0.01 ? 1 : (long)(0.01 / (once > 1e-7 ? once : 1e-7)) + 1;
    for (i = 0; i < n; i++) /* a warm-up batch: wakes pools, caches, clocks */
        run(arg);
    for (r = 0; r < repeats; r++) {
        t0 = bench_now();
        for (i = 0; i < n; i++)
            run(arg);
        once = (bench_now() - t0) / (double)n;
        if (once < best)
            best = once;
    }
    return best;
}

static int64_t
conv_out_h(const struct kt_conv2d_params *p)
{
    return (p->H + 2 * p->pad_h - p->dilation_h * (p->R - 1) - 1) /
               p->stride_h +
           1;
}

static int64_t
conv_out_w(const struct kt_conv2d_params *p)
{
    return (p->W + 2 * p->pad_w - p->dilation_w * (p->S - 1) - 1) /
               p->stride_w +
           1;
}

static int
conv_is_pointwise(const struct kt_conv2d_params *p)
{
    return p->R == 1 && p->S == 1 && p->stride_h == 1 && p->stride_w == 1 &&
           p->pad_h == 0 && p->pad_w == 0;
}

size_t
kt_bench_conv_col_floats(const struct kt_conv2d_params *p)
{
    return (size_t)(p->C / p->groups * p->R * p->S * conv_out_h(p) *
                    conv_out_w(p));
}

/* col[(c*R + r)*S + s][y*OW + x] = the padded input of channels c0.. */
static void
im2col(const struct kt_conv2d_params *p, const float *in, int64_t c0,
       float *col)
{
    int64_t OH = conv_out_h(p), OW = conv_out_w(p), cg = p->C / p->groups;
    int64_t c, r, s, y, x;

    for (c = 0; c < cg; c++)
        for (r = 0; r < p->R; r++)
            for (s = 0; s < p->S; s++) {
                float *dst = col + ((c * p->R + r) * p->S + s) * OH * OW;
                const float *src = in + (c0 + c) * p->H * p->W;
                for (y = 0; y < OH; y++) {
                    int64_t iy = y * p->stride_h + r * p->dilation_h - p->pad_h;
                    for (x = 0; x < OW; x++) {
                        int64_t ix = x * p->stride_w + s * p->dilation_w -
                                     p->pad_w;
                        dst[y * OW + x] = iy < 0 || iy >= p->H || ix < 0 ||
                                                  ix >= p->W
                                              ? 0.0f
                                              : src[iy * p->W + ix];
                    }
                }
            }
}

void
kt_bench_conv_im2col(const struct kt_conv2d_params *p, const float *in,
                     const float *wt, const float *bias, float *col, float *out)
{
    int64_t OH = conv_out_h(p), OW = conv_out_w(p);
    int64_t cg = p->C / p->groups, kg = p->K / p->groups,
            depth = cg * p->R * p->S;
    int64_t n, g;

    for (n = 0; n < p->N; n++) {
        const float *img = in + n * p->C * p->H * p->W;
        float *o = out + n * p->K * OH * OW;
        for (g = 0; g < p->groups; g++) {
            const float *b = img + g * cg * p->H * p->W;
            if (!conv_is_pointwise(p)) {
                im2col(p, img, g * cg, col);
                b = col;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)kg,
                        (int)(OH * OW), (int)depth, 1.0f, wt + g * kg * depth,
                        (int)depth, b, (int)(OH * OW), 0.0f,
                        o + g * kg * OH * OW, (int)(OH * OW));
        }
        kt_bench_epilogue(o, p->K, OH * OW,
                          p->epilogue & KT_EPI_BIAS ? bias : NULL, 1,
                          p->epilogue & KT_EPI_RELU);
    }
}

void
kt_bench_epilogue(float *out, int64_t rows, int64_t cols, const float *bias,
                  int bias_per_row, int relu)
{
    int64_t i, j;

    if (bias == NULL && !relu)
        return;
    for (i = 0; i < rows; i++)
        for (j = 0; j < cols; j++) {
            float v = out[i * cols + j];
            if (bias != NULL)
                v += bias[bias_per_row ? i : j];
            out[i * cols + j] = relu && v < 0.0f ? 0.0f : v;
        }
}

/* ---- FMA peak ------------------------------------------------------------ */

enum { FMA_CHAINS = 12 }; /* independent accumulators: > latency x FMA ports */

#if defined(__AVX512F__)
#define FMA_ISA "avx512"
#define FMA_LANES 16
typedef __m512 fma_vec;
#define FMA_SET1(x) _mm512_set1_ps(x)
#define FMA_FMADD(a, b, c) _mm512_fmadd_ps(a, b, c)
#define FMA_LANE0(v) _mm512_cvtss_f32(v)
#define FMA_LOAD(p) _mm512_loadu_ps(p)
#define FMA_STORE(p, v) _mm512_storeu_ps(p, v)
#define FMA_PIN(v) __asm__("" : "+v"(v))
#elif defined(__AVX2__) && defined(__FMA__)
#define FMA_ISA "avx2"
#define FMA_LANES 8
typedef __m256 fma_vec;
#define FMA_SET1(x) _mm256_set1_ps(x)
#define FMA_FMADD(a, b, c) _mm256_fmadd_ps(a, b, c)
#define FMA_LANE0(v) _mm256_cvtss_f32(v)
#define FMA_LOAD(p) _mm256_loadu_ps(p)
#define FMA_STORE(p, v) _mm256_storeu_ps(p, v)
#define FMA_PIN(v) __asm__("" : "+x"(v))
#else
#define FMA_ISA "scalar"
#define FMA_LANES 1
typedef float fma_vec;
#define FMA_SET1(x) (x)
#define FMA_FMADD(a, b, c) __builtin_fmaf(a, b, c)
#define FMA_LANE0(v) (v)
#define FMA_LOAD(p) (*(p))
#define FMA_STORE(p, v) (*(p) = (v))
#define FMA_PIN(v) ((void)(v))
#endif

struct fma_thread {
    long iters;
    float sink;
    double cpu_s; /* the thread's own CPU time in the loop */
};

static void *
fma_loop(void *arg)
{
    struct fma_thread *t = arg;
    const fma_vec m = FMA_SET1(0.9999999f), c = FMA_SET1(1e-7f);
    fma_vec acc[FMA_CHAINS];
    float sum = 0;
    double t0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    long i;
    int j;

    for (j = 0; j < FMA_CHAINS; j++)
        acc[j] = FMA_SET1((float)j);
    /* Fully unrolled so that acc[] lives in registers: at -O2 a rolled
     * inner loop keeps it in memory, and the store-to-load latency of
     * every chain, not the FMA units, would bound this loop. */
    for (i = 0; i < t->iters; i++) {
#pragma GCC unroll 16
        for (j = 0; j < FMA_CHAINS; j++)
            acc[j] = FMA_FMADD(acc[j], m, c);
    }
    for (j = 0; j < FMA_CHAINS; j++)
        sum += FMA_LANE0(acc[j]);
    t->sink = sum;
    t->cpu_s = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - t0;
    return NULL;
}

double
kt_bench_fma_peak(int threads, const char **isa)
{
    const long iters = 5000000;
    struct fma_thread t[64];
    pthread_t tid[64];
    double best = 0;
    int rep, i;

    if (threads < 1 || threads > 64)
        threads = 1;
    for (rep = 0; rep < 7; rep++) {
        double t0 = kt_now(), gflops;
        for (i = 0; i < threads; i++) {
            t[i].iters = iters;
            pthread_create(&tid[i], NULL, fma_loop, &t[i]);
        }
        for (i = 0; i < threads; i++)
            pthread_join(tid[i], NULL);
        gflops = 2.0 * FMA_LANES * FMA_CHAINS * (double)iters * threads /
                 (kt_now() - t0) / 1e9;
        if (bench_cpu_clock()) /* each thread on its own CPU time, as the
                                * kernels are timed (1 thread) */
            for (i = 0, gflops = 0; i < threads; i++)
                gflops += 2.0 * FMA_LANES * FMA_CHAINS * (double)iters /
                          t[i].cpu_s / 1e9;
        if (gflops > best)
            best = gflops;
    }
    if (isa != NULL)
        *isa = FMA_ISA;
    return best;
}

#define REG_TILE_K 64
#define REG_TILE_MAX_ROWS 14
#define REG_TILE_MAX_VECTORS 4

/* 'calls' calls of a register tile n rows x w vectors: n x w
 * accumulators, and per step of k w vectors of b and n broadcasts of a.
 * The b vectors are pinned to registers (the code generator pins those
 * that 3 or more FMAs share, ir/codegen_pin.c): gcc otherwise folds them
 * into the FMAs as memory operands (3 rows x 4 vectors then issue 15
 * loads per 12 FMAs and ran at 142 GFLOPS where pinned they ran at 165).
 * One function per shape, so that the accumulators are registers. */
#define REG_TILE_FN(n, w)                                                      \
    static void reg_tile_##n##x##w(long calls, const float *a, const float *b, \
                                   float *o)                                   \
    {                                                                          \
        long c;                                                                \
        int i, j, k;                                                           \
                                                                               \
        for (c = 0; c < calls; c++) {                                          \
            fma_vec acc[n][w];                                                 \
            _Pragma("GCC unroll 16") for (i = 0; i < n; i++)                   \
                _Pragma("GCC unroll 4") for (j = 0; j < w; j++)                \
                    acc[i][j] = FMA_SET1(0.0f);                                \
            for (k = 0; k < REG_TILE_K; k++) {                                 \
                fma_vec bk[w];                                                 \
                _Pragma("GCC unroll 4") for (j = 0; j < w; j++)                \
                {                                                              \
                    bk[j] = FMA_LOAD(b + (k * (w) + j) * FMA_LANES);           \
                    FMA_PIN(bk[j]);                                            \
                }                                                              \
                _Pragma("GCC unroll 16") for (i = 0; i < n; i++)               \
                {                                                              \
                    const fma_vec ai = FMA_SET1(a[i * REG_TILE_K + k]);        \
                    _Pragma("GCC unroll 4") for (j = 0; j < w; j++)            \
                        acc[i][j] = FMA_FMADD(ai, bk[j], acc[i][j]);           \
                }                                                              \
            }                                                                  \
            _Pragma("GCC unroll 16") for (i = 0; i < n; i++)                   \
                _Pragma("GCC unroll 4") for (j = 0; j < w; j++)                \
                    FMA_STORE(o + (i * (w) + j) * FMA_LANES, acc[i][j]);       \
            __asm__ volatile("" : : "r"(o) : "memory");                        \
        }                                                                      \
    }
REG_TILE_FN(4, 1)
REG_TILE_FN(5, 1)
REG_TILE_FN(6, 1)
REG_TILE_FN(7, 1)
REG_TILE_FN(8, 1)
REG_TILE_FN(9, 1)
REG_TILE_FN(10, 1)
REG_TILE_FN(11, 1)
REG_TILE_FN(12, 1)
REG_TILE_FN(13, 1)
REG_TILE_FN(14, 1)
REG_TILE_FN(3, 2)
REG_TILE_FN(4, 2)
REG_TILE_FN(5, 2)
REG_TILE_FN(6, 2)
REG_TILE_FN(7, 2)
REG_TILE_FN(8, 2)
REG_TILE_FN(2, 4)
REG_TILE_FN(3, 4)
REG_TILE_FN(4, 4)
REG_TILE_FN(5, 4)
REG_TILE_FN(6, 4)

typedef void reg_tile_fn(long, const float *, const float *, float *);
static reg_tile_fn
    *const reg_tiles[REG_TILE_MAX_VECTORS + 1][REG_TILE_MAX_ROWS + 1] = {
        [1] = {[4] = reg_tile_4x1,
               [5] = reg_tile_5x1,
               [6] = reg_tile_6x1,
               [7] = reg_tile_7x1,
               [8] = reg_tile_8x1,
               [9] = reg_tile_9x1,
               [10] = reg_tile_10x1,
               [11] = reg_tile_11x1,
               [12] = reg_tile_12x1,
               [13] = reg_tile_13x1,
               [14] = reg_tile_14x1},
        [2] = {[3] = reg_tile_3x2,
               [4] = reg_tile_4x2,
               [5] = reg_tile_5x2,
               [6] = reg_tile_6x2,
               [7] = reg_tile_7x2,
               [8] = reg_tile_8x2},
        [4] = {[2] = reg_tile_2x4,
               [3] = reg_tile_3x4,
               [4] = reg_tile_4x4,
               [5] = reg_tile_5x4,
               [6] = reg_tile_6x4},
};

int
kt_bench_reg_tile_rows(int vectors, int *lo, int *hi)
{
    int r;

    *lo = *hi = 0;
    if (vectors < 1 || vectors > REG_TILE_MAX_VECTORS)
        return 0;
    for (r = 1; r <= REG_TILE_MAX_ROWS; r++)
        if (reg_tiles[vectors][r] != NULL) {
            if (*lo == 0)
                *lo = r;
            *hi = r;
        }
    return *lo > 0;
}

double
kt_bench_reg_tile(int rows, int vectors)
{
    static float a[REG_TILE_MAX_ROWS * REG_TILE_K],
        b[REG_TILE_K * REG_TILE_MAX_VECTORS * FMA_LANES],
        o[REG_TILE_MAX_ROWS * REG_TILE_MAX_VECTORS * FMA_LANES];
    const long calls = 200000;
    reg_tile_fn *tile;
    double best = 0;
    int i, rep;

    if (rows < 1 || rows > REG_TILE_MAX_ROWS || vectors < 1 ||
        vectors > REG_TILE_MAX_VECTORS ||
        (tile = reg_tiles[vectors][rows]) == NULL)
        return 0;
    for (i = 0; i < REG_TILE_MAX_ROWS * REG_TILE_K; i++)
        a[i] = 1e-3f * (float)(i % 97);
    for (i = 0; i < REG_TILE_K * REG_TILE_MAX_VECTORS * FMA_LANES; i++)
        b[i] = 1e-3f * (float)(i % 89);
    tile(calls / 10, a, b, o); /* warm-up */
    for (rep = 0; rep < 7; rep++) {
        double t0 = bench_now(), gflops;
        tile(calls, a, b, o);
        gflops = 2.0 * rows * vectors * FMA_LANES * REG_TILE_K * (double)calls /
                 (bench_now() - t0) / 1e9;
        if (gflops > best)
            best = gflops;
    }
    return best;
}

int
kt_bench_env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v != NULL && *v ? atoi(v) : def;
}

double
kt_bench_env_double(const char *name, double def)
{
    const char *v = getenv(name);
    return v != NULL && *v ? atof(v) : def;
}

double
kt_bench_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The value of /proc/cpuinfo line "key<tabs>: value" into v, when line has
 * that key and v is still empty. */
static void
cpuinfo_field(const char *line, const char *key, char *v, size_t size)
{
    size_t n = strlen(key);
    const char *colon;

    if (v[0] != '\0' || strncmp(line, key, n) != 0 ||
        (line[n] != '\t' && line[n] != ' ' && line[n] != ':'))
        return;
    colon = strchr(line + n, ':');
    if (colon == NULL || strspn(line + n, "\t ") != (size_t)(colon - line - n))
        return;
    snprintf(v, size, "%s", colon + 1 + strspn(colon + 1, " "));
    v[strcspn(v, "\n")] = '\0';
}

void
kt_bench_cpu_model(char *buf, size_t size)
{
    char line[512], name[160] = "", family[16] = "", model[16] = "",
                    stepping[16] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");

    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        cpuinfo_field(line, "model name", name, sizeof(name));
        cpuinfo_field(line, "cpu family", family, sizeof(family));
        cpuinfo_field(line, "model", model, sizeof(model));
        cpuinfo_field(line, "stepping", stepping, sizeof(stepping));
    }
    if (f != NULL)
        fclose(f);
    if (family[0] == '\0')
        snprintf(buf, size, "%s", name[0] != '\0' ? name : "unknown CPU");
    else
        snprintf(buf, size, "%s (family %s, model %s, stepping %s)",
                 name[0] != '\0' ? name : "unknown CPU", family, model,
                 stepping);
}

static int
core_in(const char *core, const char *const *names)
{
    for (; *names != NULL; names++)
        if (strcmp(core, *names) == 0)
            return 1;
    return 0;
}

void
kt_bench_openblas_widest(char **argv)
{
    static const char *const avx512[] = {"SkylakeX", "Cooperlake",
                                         "SapphireRapids", NULL};
    static const char *const avx2[] = {"Haswell",        "Zen",
                                       "SkylakeX",       "Cooperlake",
                                       "SapphireRapids", NULL};
    const char *core = openblas_get_corename(), *want = NULL;

    if (getenv("OPENBLAS_CORETYPE") != NULL || core == NULL)
        return;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && !core_in(core, avx512))
        want = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             !core_in(core, avx2))
        want = "Haswell";
    if (want == NULL)
        return;
    fprintf(stderr,
            "bench: OpenBLAS chose its %s kernels on this CPU; running again "
            "with OPENBLAS_CORETYPE=%s (its kernels for this CPU's vectors)\n",
            core, want);
    fflush(NULL);
    if (setenv("OPENBLAS_CORETYPE", want, 1) == 0)
        execv("/proc/self/exe", argv);
    fprintf(stderr, "bench: cannot run again (%s): OpenBLAS keeps %s\n",
            strerror(errno), core);
}

void
kt_bench_openblas_describe(char *buf, size_t size)
{
    const char *config = openblas_get_config(), *core = openblas_get_corename();

    snprintf(buf, size, "%s, %s kernels%s", config ? config : "OpenBLAS",
             core ? core : "?",
             getenv("OPENBLAS_CORETYPE") ? " (OPENBLAS_CORETYPE)" : "");
}
