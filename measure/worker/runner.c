/* runner.c - what the forked runner child does with one kernel .so: set
 * the memory limit, dlopen, read the ABI symbols, fill inputs with seeded
 * random data, check kt_kernel against kt_reference (cached per workload
 * hash and seed in cache_dir), then time it with TVM's time-evaluator
 * semantics.  Crashes are not handled here: the child dies of the signal
 * and the worker reports it. */
#include "measure/worker/worker.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_BUFS 64
#define MAX_ELEMS (1LL << 31)

typedef void (*kernel_fn)(float *const *);
typedef void (*threads_fn)(int);

const char *
kt_signame(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGALRM: return "SIGALRM";
    case SIGPIPE: return "SIGPIPE";
    case SIGXCPU: return "SIGXCPU";
    case SIGSYS: return "SIGSYS";
    case SIGTRAP: return "SIGTRAP";
    default: return "SIG?";
    }
}

void
kt_run_summarize(const double *costs, int n, double *cost, double *cv)
{
    double sum = 0, mn = INFINITY, mx = -INFINITY, mean, var = 0;
    int i;

    *cost = 0;
    *cv = 0;
    if (n <= 0)
        return;
    for (i = 0; i < n; i++) {
        sum += costs[i];
        mn = costs[i] < mn ? costs[i] : mn;
        mx = costs[i] > mx ? costs[i] : mx;
    }
    mean = sum / n;
    *cost = n >= 3 ? (sum - mn - mx) / (n - 2) : mean;
    for (i = 0; i < n; i++)
        var += (costs[i] - mean) * (costs[i] - mean);
    if (n > 1 && mean > 0)
        *cv = sqrt(var / (n - 1)) / mean;
}

/* Bytes of address space in use now (Linux /proc/self/statm), 0 if
 * unknown.  Under ASan or qemu this is large, so the limit is added to it. */
static unsigned long long
vm_size(void)
{
    unsigned long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f == NULL)
        return 0;
    if (fscanf(f, "%llu", &pages) != 1)
        pages = 0;
    fclose(f);
    return pages * (unsigned long long)sysconf(_SC_PAGESIZE);
}

static void fail(struct kt_msg *out, int err_no, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
fail(struct kt_msg *out, int err_no, const char *fmt, ...)
{
    struct kt_buf b;
    va_list ap;

    kt_buf_init(&b);
    va_start(ap, fmt);
    kt_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    kt_msg_setf(out, "err_no", "%d", err_no);
    kt_msg_set(out, "err_text", b.p);
    kt_buf_free(&b);
}

static void
flush_cache(void)
{
    static unsigned char *junk;
    static size_t n = 64u << 20;
    size_t i;

    if (junk == NULL)
        junk = kt_xmalloc(n);
    for (i = 0; i < n; i += 64)
        junk[i]++;
}

static void
sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Reads or computes the reference outputs into ref (nout floats). */
static int
reference(const struct kt_run_req *r, const char *hash, kernel_fn fref,
          float **bufs, const long long *elems, const unsigned char *isout,
          int nbufs, float *ref, size_t nout)
{
    char path[600], tmp[620];
    size_t off = 0;
    int fd, i;

    snprintf(path, sizeof(path), "%s/ref-%.16s-%016llx.bin",
             r->cache_dir ? r->cache_dir : "/tmp", hash,
             (unsigned long long)r->seed);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t got = read(fd, ref, nout * sizeof(float));
        (void)futimens(fd, NULL); /* recently used: kept by the LRU trim */
        close(fd);
        if (got == (ssize_t)(nout * sizeof(float)))
            return 1;
    }
    fref(bufs);
    for (i = 0; i < nbufs; i++) {
        if (!isout[i])
            continue;
        memcpy(ref + off, bufs[i], (size_t)elems[i] * sizeof(float));
        off += (size_t)elems[i];
    }
    snprintf(tmp, sizeof(tmp), "%s.%ld", path, (long)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
        int ok = kt_wire_write_all(fd, ref, nout * sizeof(float)) == 0;
        close(fd);
        if (!ok || rename(tmp, path) < 0)
            (void)unlink(tmp);
    }
    return 0;
}

/* A module whose schedule rewrites a weight's layout exports kt_pack: it
 * fills the kernel's packed copy from the inputs once, before the check
 * and the timing (docs/measure.md).  Its time is reported apart, as
 * "pack_s", and is not part of the cost. */
static void
prepack(void *so, float *const *bufs, struct kt_msg *out)
{
    kernel_fn fpack;
    double t0;

    *(void **)&fpack = dlsym(so, "kt_pack");
    if (fpack == NULL)
        return;
    t0 = kt_now();
    fpack(bufs);
    kt_msg_setf(out, "pack_s", "%.6f", kt_now() - t0);
}

/* The loaded kernel and its buffers, shared by the runner's stages. */
struct loaded {
    void *so;
    const char *hash;
    const long long *elems;
    const unsigned char *isout;
    kernel_fn fker, fref;
    float *bufs[MAX_BUFS];
    int nbufs;
    double check_s;   /* wall time of the checked (first) call */
    double check_cpu; /* its CPU time (kt_cpu_now) */
    long cpus;        /* kt_usable_cpus before the threads were bound */
};

/* A kernel whose threads take every CPU the runner may use has those CPUs
 * to itself (the engine times such jobs one at a time), so its OpenMP
 * threads are bound one per CPU: a team created right after the fork
 * often starts with its second thread on its master's CPU and stays there
 * for 5-25 ms while another CPU idles, and the first repeats of a short
 * timing ran at half speed (docs/measure.md, "Threads bound").  Set
 * before dlopen loads libgomp, which reads them once; a binding the
 * worker's environment already asks for is kept. */
static void
bind_whole_machine_team(const struct kt_run_req *r, long cpus,
                        struct kt_msg *out)
{
    long threads = r->threads > 0 ? r->threads : cpus;

    if (threads < 2 || threads != cpus || getenv("OMP_PROC_BIND") != NULL ||
        getenv("OMP_PLACES") != NULL || getenv("GOMP_CPU_AFFINITY") != NULL)
        return;
    if (setenv("OMP_PROC_BIND", "close", 0) == 0 &&
        setenv("OMP_PLACES", "threads", 0) == 0)
        kt_msg_set(out, "threads_bound", "1");
}

/* Stage 1: limits, dlopen and the ABI symbols.  Returns 0 or fails out. */
static int
run_load(const struct kt_run_req *r, struct loaded *k, struct kt_msg *out)
{
    const int *pn;
    const double *flops;
    threads_fn fthr;
    int cpu[2];

    /* First: no team spins on the CPUs yet, and a bound master thread's
     * own mask will be one CPU (docs/measure.md, "Thread placement"). */
    if (r->threads != 1 && kt_first_two_cpus(cpu)) {
        double ns = kt_xcpu_round_trip_ns(cpu);
        if (ns > 0)
            kt_msg_setf(out, "xcpu_ns", "%.0f", ns);
    }
    if (r->mem_mb > 0) {
        struct rlimit rl;
        unsigned long long lim = vm_size() + (unsigned long long)r->mem_mb *
                                                 1024ULL * 1024ULL;
        rl.rlim_cur = rl.rlim_max = (rlim_t)lim;
        if (setrlimit(RLIMIT_AS, &rl) < 0)
            kt_msg_setf(out, "mem_limit", "setrlimit: %s", strerror(errno));
    }
    /* counted first: a bound master thread's own mask is one CPU */
    k->cpus = kt_usable_cpus();
    bind_whole_machine_team(r, k->cpus, out);
    k->so = dlopen(r->so_path, RTLD_NOW | RTLD_LOCAL);
    if (k->so == NULL) {
        fail(out, KT_MERR_RUNTIME_DEVICE, "dlopen: %s", dlerror());
        return -1;
    }
    k->hash = dlsym(k->so, "kt_workload_hash");
    pn = dlsym(k->so, "kt_nbufs");
    k->elems = dlsym(k->so, "kt_buf_elems");
    k->isout = dlsym(k->so, "kt_buf_is_output");
    flops = dlsym(k->so, "kt_flops");
    *(void **)&k->fker = dlsym(k->so, "kt_kernel");
    *(void **)&k->fref = dlsym(k->so, "kt_reference");
    *(void **)&fthr = dlsym(k->so, "kt_set_threads");
    if (!k->hash || !pn || !k->elems || !k->isout || !flops || !k->fker ||
        !k->fref) {
        fail(out, KT_MERR_RUNTIME_DEVICE,
             "the .so lacks a kernel ABI symbol (kt_workload_hash, kt_nbufs,"
             " kt_buf_elems, kt_buf_is_output, kt_flops, kt_kernel, "
             "kt_reference)");
        return -1;
    }
    k->nbufs = *pn;
    if (k->nbufs < 1 || k->nbufs > MAX_BUFS) {
        fail(out, KT_MERR_RUNTIME_DEVICE, "kt_nbufs=%d outside [1, %d]",
             k->nbufs, MAX_BUFS);
        k->nbufs = 0;
        return -1;
    }
    kt_msg_setf(out, "workload", "%.16s", k->hash);
    kt_msg_setf(out, "flops", "%.17g", *flops);
    if (fthr != NULL && r->threads > 0)
        fthr(r->threads);
    return 0;
}

static void
put_value(char *b, size_t n, float v)
{
    if (isnan(v))
        snprintf(b, n, "NaN");
    else
        snprintf(b, n, "%.9g", (double)v);
}

/* Output buffer i of n elements against the reference: its relative L2
 * error within r->tol, over the elements where the reference is a number.
 * Where the reference is NaN (log or sqrt of a negative input) the output
 * must be NaN too, and NaN only there: the buffer starts as NaN, so an
 * element the kernel never wrote is caught.  Returns 0 or fails out. */
static int
check_output(const struct kt_run_req *r, int i, const float *got,
             const float *want, long long n, struct kt_msg *out)
{
    double num = 0, den = 0, rel;
    long long j;

    for (j = 0; j < n; j++) {
        double d = (double)got[j] - (double)want[j];
        if (isnan(got[j]) != isnan(want[j])) {
            char g[32], w[32];
            put_value(g, sizeof(g), got[j]);
            put_value(w, sizeof(w), want[j]);
            fail(out, KT_MERR_WRONG_ANSWER,
                 "output buffer %d: element %lld is %s where the reference is "
                 "%s",
                 i, j, g, w);
            return -1;
        }
        if (isnan(want[j]) || got[j] == want[j]) /* equal infinities too */
            continue;
        num += d * d;
        den += (double)want[j] * want[j];
    }
    rel = sqrt(num) / (den > 0 ? sqrt(den) : 1.0);
    kt_msg_setf(out, "rel_err", "%.3g", rel);
    if (!(rel <= r->tol)) {
        fail(out, KT_MERR_WRONG_ANSWER,
             "output buffer %d: relative L2 error %.3g above %.3g", i, rel,
             r->tol);
        return -1;
    }
    return 0;
}

/* Stage 2: seeded inputs, the reference outputs and one checked call (the
 * warm-up for timing).  Returns 0 or fails out. */
static int
run_verify(const struct kt_run_req *r, struct loaded *k, struct kt_msg *out)
{
    float *ref = NULL;
    size_t nout = 0, off = 0;
    struct kt_rng rng;
    int i, cached, rc = -1;

    kt_rng_seed(&rng, r->seed);
    for (i = 0; i < k->nbufs; i++) {
        long long j;
        if (k->elems[i] < 1 || k->elems[i] > MAX_ELEMS) {
            fail(out, KT_MERR_RUNTIME_DEVICE,
                 "kt_buf_elems[%d]=%lld outside [1, 2^31]", i, k->elems[i]);
            return -1;
        }
        k->bufs[i] = aligned_alloc(64,
                                   ((size_t)k->elems[i] * 4 + 63) / 64 * 64);
        if (k->bufs[i] == NULL) {
            fail(out, KT_MERR_RUNTIME_DEVICE,
                 "cannot allocate buffer %d (%lld floats)", i, k->elems[i]);
            return -1;
        }
        for (j = 0; j < k->elems[i]; j++)
            k->bufs[i][j] = k->isout[i] ? NAN
                                        : (float)(kt_rng_unit(&rng) * 2 - 1);
        if (k->isout[i])
            nout += (size_t)k->elems[i];
    }
    ref = kt_xmalloc(nout * sizeof(float) + 1);
    cached = reference(r, k->hash, k->fref, k->bufs, k->elems, k->isout,
                       k->nbufs, ref, nout);
    kt_msg_setf(out, "ref_cached", "%d", cached);
    for (i = 0; i < k->nbufs; i++)
        if (k->isout[i])
            memset(k->bufs[i], 0xff,
                   (size_t)k->elems[i] * sizeof(float)); /* NaN */
    prepack(k->so, k->bufs, out);
    k->check_cpu = kt_cpu_now();
    k->check_s = kt_now();
    k->fker(k->bufs);
    k->check_s = kt_now() - k->check_s;
    k->check_cpu = kt_cpu_now() - k->check_cpu;
    for (i = 0; i < k->nbufs; i++) {
        if (!k->isout[i])
            continue;
        if (check_output(r, i, k->bufs[i], ref + off, k->elems[i], out) != 0)
            goto out;
        off += (size_t)k->elems[i];
    }
    rc = 0;
out:
    free(ref);
    return rc;
}

/* The first `number` for timing: what TVM's calibration (number 1 timed,
 * then raised to min_repeat_ms / per_call + 1) would pick, taken from the
 * checked call instead of one more untimed-for-cost call. */
static long long
first_number(const struct kt_run_req *r, const struct loaded *k)
{
    long long number = r->number > 0 ? r->number : 1;
    double per = k->check_s > 0 ? k->check_s : 1e-9;
    double want = r->min_repeat_ms / 1000.0 / per + 1;

    if (number == 1 && per * 1000 < r->min_repeat_ms && want > 1.618)
        number = want < (double)(1LL << 40) ? (long long)want : 1LL << 40;
    return number;
}

/* Early stop (off unless the request has stop_above): after the first
 * repeat, a candidate already slower than stop_above per call is not timed
 * again; it keeps that one cost and the note early_stop=1. */
static int
hopeless(const struct kt_run_req *r, double first, struct kt_msg *out)
{
    if (!(r->stop_above > 0) || !(first > r->stop_above) || r->repeat <= 1)
        return 0;
    kt_msg_set(out, "early_stop", "1");
    return 1;
}

/* One timed repeat: seconds per call, its calls, the wall time of the
 * timed loop and its occupancy (kt_occupancy). */
struct sample {
    double cost, wall, occ;
    long long calls;
};

/* The timing stage's state: the kept repeats and the re-timing budget. */
struct timing {
    struct sample s[KT_RUN_MAX_REPEAT];
    int n;       /* kept repeats */
    int threads; /* the kernel's threads, capped at the CPUs */
    long long number;
    int retimed;     /* repeats timed again because they were disturbed */
    int max_retime;  /* at most this many */
    double deadline; /* kt_now() after which nothing is timed again */
    long long calls; /* every timed call, re-timings included */
};

/* Settled (off unless the request has settle): with repeat 3 the cost is
 * the median of the three repeats (kt_run_summarize drops the fastest and
 * the slowest), and the median of three always lies between the first two
 * whatever the third is.  When those two differ by at most `settle`
 * (relative) the third cannot move the cost further than that, so it is
 * not timed: the cost is their mean, within settle / 2 of the median. */
static int
settled(const struct kt_run_req *r, const struct timing *tm)
{
    double lo, hi;

    if (!(r->settle > 0) || r->repeat != 3 || tm->n != 2)
        return 0;
    lo = fmin(tm->s[0].cost, tm->s[1].cost);
    hi = fmax(tm->s[0].cost, tm->s[1].cost);
    return hi <= lo * (1 + r->settle);
}

/* Calls still needed for a loop that has lasted `wall` over `done` calls to
 * reach min_s: at least one. */
static long long
calls_to_reach(double min_s, double wall, long long done)
{
    double per = wall > 0 ? wall / (double)done : 1e-9;
    double more = ceil((min_s - wall) / per);

    if (!(more >= 1))
        return 1;
    return more < (double)(1LL << 40) ? (long long)more : 1LL << 40;
}

/* One repeat (TVM's inner loop): back-to-back calls, `number` of them,
 * timed as one loop.  A loop still shorter than min_repeat_ms is not thrown
 * away and timed again with a raised `number`, as TVM does: it goes on
 * with the calls its own speed says are missing, under the same clock,
 * until it lasts min_repeat_ms (docs/measure.md).  `number` becomes the
 * repeat's calls, the first guess for the next repeat. */
static struct sample
time_repeat(const struct kt_run_req *r, struct loaded *k, struct timing *tm)
{
    struct sample s;
    double t0, c0, min_s = r->min_repeat_ms / 1000.0;
    long long n, chunk = tm->number;

    if (r->flush)
        flush_cache();
    s.calls = 0;
    c0 = kt_cpu_now();
    t0 = kt_now();
    for (;;) {
        for (n = 0; n < chunk; n++)
            k->fker(k->bufs);
        s.calls += chunk;
        s.wall = kt_now() - t0;
        if (s.wall >= min_s || s.calls >= (1LL << 40))
            break;
        chunk = calls_to_reach(min_s, s.wall, s.calls);
    }
    s.occ = kt_occupancy(kt_cpu_now() - c0, s.wall, tm->threads);
    s.cost = s.wall / (double)s.calls;
    tm->number = s.calls;
    tm->calls += s.calls;
    return s;
}

static void
pause_between(const struct kt_run_req *r)
{
    if (r->cooldown_ms > 0)
        sleep_ms(r->cooldown_ms);
}

/* 1 when some kept repeat ran undisturbed: the load comes and goes, so
 * timing a disturbed repeat again can find a clean one.  Under load that
 * lasts the whole run no repeat is clean and re-timing would only add
 * time (the result is marked contended at once). */
static int
any_clean(const struct timing *tm)
{
    int i;

    for (i = 0; i < tm->n; i++)
        if (tm->s[i].occ >= KT_OCCUPANCY_MIN)
            return 1;
    return 0;
}

/* Index of the most disturbed kept repeat (kt_repeat_disturbed against the
 * fastest), -1 when none is. */
static int
worst_disturbed(const struct timing *tm)
{
    double fastest = INFINITY;
    int i, worst = -1;

    for (i = 0; i < tm->n; i++)
        fastest = tm->s[i].cost < fastest ? tm->s[i].cost : fastest;
    for (i = 0; i < tm->n; i++)
        if (kt_repeat_disturbed(tm->s[i].cost, tm->s[i].occ, fastest) &&
            (worst < 0 || tm->s[i].cost > tm->s[worst].cost))
            worst = i;
    return worst;
}

/* Times repeat i again when the budget allows: the faster of the two is
 * kept, since load only adds time.  Returns 0 when out of budget. */
static int
retime(const struct kt_run_req *r, struct loaded *k, struct timing *tm, int i)
{
    struct sample again;

    if (tm->retimed >= tm->max_retime ||
        kt_now() + tm->s[i].wall > tm->deadline)
        return 0;
    pause_between(r);
    again = time_repeat(r, k, tm);
    tm->retimed++;
    if (again.cost < tm->s[i].cost)
        tm->s[i] = again;
    return 1;
}

/* The re-timing budget: at most `repeat` extra repeats (`retime` in the
 * request), and no more wall time than 1.5 x the kept repeats took, nor
 * past half of run_timeout_ms from the child's start, so re-timing never
 * causes a RUN_TIMEOUT. */
static void
set_budget(const struct kt_run_req *r, struct timing *tm, double t_all)
{
    double spent = 0, end;
    int i;

    for (i = 0; i < tm->n; i++)
        spent += tm->s[i].wall;
    end = kt_now() + 1.5 * spent;
    tm->max_retime = r->retime >= 0 ? r->retime : r->repeat;
    if (r->timeout_ms > 0 && t_all + r->timeout_ms / 2000.0 < end)
        end = t_all + r->timeout_ms / 2000.0;
    tm->deadline = end;
}

static void
report(const struct loaded *k, const struct timing *tm, struct kt_msg *out,
       double t_all, double t_time)
{
    double costs[KT_RUN_MAX_REPEAT], cpu[KT_RUN_MAX_REPEAT], cost, cv, cpu_cost,
        cpu_cv, occ = INFINITY;
    struct kt_buf cl, ol, nl;
    int i;

    kt_buf_init(&cl);
    kt_buf_init(&ol);
    kt_buf_init(&nl);
    for (i = 0; i < tm->n; i++) {
        costs[i] = tm->s[i].cost;
        cpu[i] = tm->s[i].cost * (tm->s[i].occ < 1 ? tm->s[i].occ : 1);
        occ = tm->s[i].occ < occ ? tm->s[i].occ : occ;
        kt_buf_printf(&cl, "%s%.9g", i ? "," : "", costs[i]);
        kt_buf_printf(&ol, "%s%.2f", i ? "," : "", tm->s[i].occ);
        kt_buf_printf(&nl, "%s%lld", i ? "," : "", tm->s[i].calls);
    }
    kt_run_summarize(costs, tm->n, &cost, &cv);
    kt_run_summarize(cpu, tm->n, &cpu_cost, &cpu_cv);
    kt_msg_set(out, "err_no", "0");
    kt_msg_set(out, "costs", cl.p);
    kt_msg_setf(out, "cost", "%.9g", cost);
    kt_msg_setf(out, "cv", "%.6g", cv);
    kt_msg_setf(out, "number", "%lld", tm->number);
    kt_msg_set(out, "numbers", nl.p);
    kt_msg_setf(out, "calls", "%lld", tm->calls);
    kt_msg_setf(out, "check_s", "%.6f", k->check_s);
    kt_msg_setf(out, "occupancy", "%.3f", tm->n > 0 ? occ : 0);
    kt_msg_setf(out, "cpu_cost", "%.9g", cpu_cost);
    kt_msg_set(out, "occupancies", ol.p);
    kt_msg_setf(out, "kernel_threads", "%d", tm->threads);
    kt_msg_setf(out, "retimed", "%d", tm->retimed);
    if (worst_disturbed(tm) >= 0 || (tm->n > 0 && occ < KT_OCCUPANCY_MIN))
        kt_msg_set(out, "contended", "1");
    kt_msg_setf(out, "time_s", "%.6f", kt_now() - t_time);
    kt_msg_setf(out, "run_s", "%.6f", kt_now() - t_all);
    kt_buf_free(&cl);
    kt_buf_free(&ol);
    kt_buf_free(&nl);
}

/* Stage 3: TVM's WrapTimeEvaluator (the checked call is the warm-up).  A
 * checked call that alone lasts min_repeat_ms is what TVM's first repeat
 * would time (number 1, nothing to raise), so it is kept as repeat 0
 * rather than run again (docs/measure.md).  Repeats that other processes
 * disturbed are timed again within a budget (docs/measure.md, "Timing on a
 * shared machine"). */
static void
run_time(const struct kt_run_req *r, struct loaded *k, struct kt_msg *out,
         double t_all)
{
    struct timing tm;
    double t_time = kt_now();
    int want = r->repeat < KT_RUN_MAX_REPEAT ? r->repeat : KT_RUN_MAX_REPEAT;
    int i;

    memset(&tm, 0, sizeof(tm));
    tm.number = first_number(r, k);
    tm.threads = kt_kernel_threads(r->threads, k->cpus);
    if (r->number <= 1 && !r->flush && r->repeat > 0 &&
        k->check_s * 1000 >= r->min_repeat_ms && r->min_repeat_ms > 0) {
        tm.s[tm.n].cost = tm.s[tm.n].wall = k->check_s;
        tm.s[tm.n].calls = 1;
        tm.s[tm.n++].occ = kt_occupancy(k->check_cpu, k->check_s, tm.threads);
        kt_msg_set(out, "check_is_repeat0", "1");
    } else if (want > 0) {
        tm.s[tm.n++] = time_repeat(r, k, &tm);
    }
    /* a first repeat that load made slower than stop_above gets one more
     * chance before it stops the timing */
    set_budget(r, &tm, t_all);
    if (tm.n > 0 && r->stop_above > 0 && tm.s[0].cost > r->stop_above &&
        tm.s[0].occ < KT_OCCUPANCY_MIN)
        (void)retime(r, k, &tm, 0);
    if (tm.n > 0 && hopeless(r, tm.s[0].cost, out)) {
        report(k, &tm, out, t_all, t_time);
        return;
    }
    while (tm.n < want) {
        if (settled(r, &tm)) {
            kt_msg_set(out, "settled", "1");
            break;
        }
        pause_between(r);
        tm.s[tm.n++] = time_repeat(r, k, &tm);
    }
    set_budget(r, &tm, t_all);
    while (any_clean(&tm) && (i = worst_disturbed(&tm)) >= 0)
        if (!retime(r, k, &tm, i))
            break;
    report(k, &tm, out, t_all, t_time);
}

void
kt_run_child(const struct kt_run_req *r, struct kt_msg *out)
{
    struct loaded k;
    double t_all = kt_now();
    int i;

    memset(&k, 0, sizeof(k));
    kt_msg_init(out, "result");
    if (run_load(r, &k, out) == 0 && run_verify(r, &k, out) == 0)
        run_time(r, &k, out, t_all);
    for (i = 0; i < k.nbufs; i++)
        free(k.bufs[i]);
    /* The .so stays loaded: the child exits right after. */
}
