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
#elif defined(__AVX2__) && defined(__FMA__)
#define FMA_ISA "avx2"
#define FMA_LANES 8
typedef __m256 fma_vec;
#define FMA_SET1(x) _mm256_set1_ps(x)
#define FMA_FMADD(a, b, c) _mm256_fmadd_ps(a, b, c)
#define FMA_LANE0(v) _mm256_cvtss_f32(v)
#define FMA_LOAD(p) _mm256_loadu_ps(p)
#define FMA_STORE(p, v) _mm256_storeu_ps(p, v)
#else
#define FMA_ISA "scalar"
#define FMA_LANES 1
typedef float fma_vec;
#define FMA_SET1(x) (x)
#define FMA_FMADD(a, b, c) __builtin_fmaf(a, b, c)
#define FMA_LANE0(v) (v)
#define FMA_LOAD(p) (*(p))
#define FMA_STORE(p, v) (*(p) = (v))
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

#define ROW_TILE_K 64
#define ROW_TILE_MAX 16

/* 'calls' calls of a register tile n rows x one vector: n accumulators,
 * and per step of k one vector of b and n broadcasts of a.  One function
 * per n, so that the accumulators are registers. */
#define ROW_TILE_FN(n)                                                         \
    static void row_tile_##n(long calls, const float *a, const float *b,       \
                             float *o)                                         \
    {                                                                          \
        long c;                                                                \
        int i, k;                                                              \
                                                                               \
        for (c = 0; c < calls; c++) {                                          \
            fma_vec acc[n];                                                    \
            _Pragma("GCC unroll 16") for (i = 0; i < n; i++)                   \
                acc[i] = FMA_SET1(0.0f);                                       \
            for (k = 0; k < ROW_TILE_K; k++) {                                 \
                const fma_vec bk = FMA_LOAD(b + k * FMA_LANES);                \
                _Pragma("GCC unroll 16") for (i = 0; i < n; i++)               \
                    acc[i] = FMA_FMADD(FMA_SET1(a[i * ROW_TILE_K + k]), bk,    \
                                       acc[i]);                                \
            }                                                                  \
            _Pragma("GCC unroll 16") for (i = 0; i < n; i++)                   \
                FMA_STORE(o + i * FMA_LANES, acc[i]);                          \
            __asm__ volatile("" : : "r"(o) : "memory");                        \
        }                                                                      \
    }
ROW_TILE_FN(1)
ROW_TILE_FN(2)
ROW_TILE_FN(3)
ROW_TILE_FN(4)
ROW_TILE_FN(5)
ROW_TILE_FN(6)
ROW_TILE_FN(7)
ROW_TILE_FN(8)
ROW_TILE_FN(9)
ROW_TILE_FN(10)
ROW_TILE_FN(11)
ROW_TILE_FN(12)
ROW_TILE_FN(13)
ROW_TILE_FN(14)
ROW_TILE_FN(15)
ROW_TILE_FN(16)

static void (*const row_tiles[ROW_TILE_MAX + 1])(long, const float *,
                                                 const float *, float *) = {
    NULL,        row_tile_1,  row_tile_2,  row_tile_3,  row_tile_4,
    row_tile_5,  row_tile_6,  row_tile_7,  row_tile_8,  row_tile_9,
    row_tile_10, row_tile_11, row_tile_12, row_tile_13, row_tile_14,
    row_tile_15, row_tile_16,
};

double
kt_bench_row_tile(int rows)
{
    static float a[ROW_TILE_MAX * ROW_TILE_K], b[ROW_TILE_K * FMA_LANES],
        o[ROW_TILE_MAX * FMA_LANES];
    const long calls = 200000;
    double best = 0;
    int i, rep;

    if (rows < 1 || rows > ROW_TILE_MAX)
        return 0;
    for (i = 0; i < ROW_TILE_MAX * ROW_TILE_K; i++)
        a[i] = 1e-3f * (float)(i % 97);
    for (i = 0; i < ROW_TILE_K * FMA_LANES; i++)
        b[i] = 1e-3f * (float)(i % 89);
    row_tiles[rows](calls / 10, a, b, o); /* warm-up */
    for (rep = 0; rep < 7; rep++) {
        double t0 = bench_now(), gflops;
        row_tiles[rows](calls, a, b, o);
        gflops = 2.0 * rows * FMA_LANES * ROW_TILE_K * (double)calls /
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
