/* placement.c - how far apart the CPUs of a kernel's threads are: the
 * round trip of one cache line between threads pinned to the first two
 * CPUs the runner may use (docs/measure.md, "Thread placement").  A VM's
 * two vCPUs on one CCX hand a line back and forth in ~50 ns; when the
 * host moves one to another CCX (or socket) it takes ~300 ns, and a
 * kernel whose threads exchange data through a shared cache runs up to
 * 2.4x slower while its single-thread speed and every cache's bandwidth
 * stay the same.  Round trips are timed four at a time and the fastest
 * four kept, so that threads descheduled for a while (a loaded machine:
 * the occupancy's business) do not read as a placement as long as they
 * share a moment on their CPUs; the whole probe gives up after 50 ms. */
#ifdef __linux__
#define _GNU_SOURCE /* pthread_setaffinity_np, sched_getaffinity */
#include <sched.h>
#endif
#include "measure/worker/worker.h"

#include "common/common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define TRIPS 1000
#define TIMED_TOGETHER 4 /* round trips per clock read: ~5 ns of it each */
#define GIVE_UP_S 0.05

struct pingpong {
    /* even: the first thread's turn, odd: the other's */
    _Alignas(64) atomic_long turn;
    _Alignas(64) atomic_int ready;
    atomic_int stop;
    int cpu[2];
    double give_up_at; /* the initiator's deadline (kt_now) */
    double best_ns;
};

static void
pin_self(int cpu)
{
#ifdef __linux__
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
#else
    (void)cpu;
#endif
}

/* Waits until turn == want; 0 when told to stop instead, or (deadline >
 * 0) past it: a partner that does not get its CPU (valgrind runs one
 * thread at a time; a real-time hog) must not hang the runner. */
static int
await_turn(struct pingpong *p, long want, double deadline)
{
    unsigned spins = 0;

    while (atomic_load_explicit(&p->turn, memory_order_acquire) != want) {
        if (atomic_load_explicit(&p->stop, memory_order_relaxed))
            return 0;
        if (deadline > 0 && ++spins % 1024 == 0 && kt_now() > deadline) {
            atomic_store(&p->stop, 1);
            return 0;
        }
    }
    return 1;
}

static void *
responder(void *arg)
{
    struct pingpong *p = arg;
    long t;

    pin_self(p->cpu[1]);
    atomic_store(&p->ready, 1);
    for (t = 1;; t += 2) {
        if (!await_turn(p, t, 0))
            break;
        atomic_store_explicit(&p->turn, t + 1, memory_order_release);
    }
    return NULL;
}

static void *
initiator(void *arg)
{
    struct pingpong *p = arg;
    double t0, trip;
    long t;
    int i;

    pin_self(p->cpu[0]);
    p->give_up_at = kt_now() + GIVE_UP_S;
    while (!atomic_load(&p->ready))
        if (kt_now() > p->give_up_at)
            return NULL;
    for (t = 0; t < 2 * TRIPS && kt_now() < p->give_up_at;) {
        t0 = kt_now();
        for (i = 0; i < TIMED_TOGETHER; i++, t += 2) {
            atomic_store_explicit(&p->turn, t + 1, memory_order_release);
            if (!await_turn(p, t + 2, p->give_up_at))
                return NULL;
        }
        trip = (kt_now() - t0) * 1e9 / TIMED_TOGETHER;
        if (p->best_ns == 0 || trip < p->best_ns)
            p->best_ns = trip;
    }
    atomic_store(&p->stop, 1);
    return NULL;
}

int
kt_first_two_cpus(int cpu[2])
{
#ifdef __linux__
    cpu_set_t set;
    int i, n = 0;

    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 0;
    for (i = 0; i < CPU_SETSIZE && n < 2; i++)
        if (CPU_ISSET(i, &set))
            cpu[n++] = i;
    return n == 2;
#else
    (void)cpu;
    return 0;
#endif
}

double
kt_xcpu_round_trip_ns(const int cpu[2])
{
    struct pingpong p;
    pthread_t th[2];

    memset(&p, 0, sizeof(p));
    if (cpu[0] < 0 || cpu[1] < 0 || cpu[0] == cpu[1])
        return 0;
    p.cpu[0] = cpu[0];
    p.cpu[1] = cpu[1];
    atomic_init(&p.turn, 0);
    atomic_init(&p.ready, 0);
    atomic_init(&p.stop, 0);
    if (pthread_create(&th[1], NULL, responder, &p) != 0)
        return 0;
    if (pthread_create(&th[0], NULL, initiator, &p) != 0) {
        atomic_store(&p.stop, 1);
        pthread_join(th[1], NULL);
        return 0;
    }
    pthread_join(th[0], NULL);
    atomic_store(&p.stop, 1);
    pthread_join(th[1], NULL);
    return p.best_ns;
}
