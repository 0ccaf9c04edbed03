/* occupancy.c - telling a repeat that other processes disturbed from an
 * undisturbed one (docs/measure.md, "Timing on a shared machine").  The
 * CPU time of the kernel's threads (every OpenMP thread, spinning at
 * barriers included) over wall time x threads is close to 1 while its
 * threads own their CPUs, and falls when the scheduler hands the CPUs to
 * someone else. */
#ifdef __linux__
#define _GNU_SOURCE /* sched_getaffinity */
#include <sched.h>
#endif
#include "measure/worker/worker.h"

#include <dirent.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#ifdef __linux__
/* Linux's CPU clock of thread tid (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)
 * of the kernel's ABI; glibc's pthread_getcpuclockid builds the same). */
static clockid_t
thread_cpu_clock(long tid)
{
    return (clockid_t)((~(unsigned long)tid << 3) | 6);
}

/* The process's threads' CPU clocks added up; -1 when /proc is missing.
 * CLOCK_PROCESS_CPUTIME_ID adds the time of a thread running on another
 * CPU only up to its last tick (4 ms at HZ 250): over 5 ms repeats of
 * 2-thread kernels it read occupancies of 0.62-1.29 where the threads'
 * own clocks, which the kernel brings up to date when read, read
 * 0.91-1.01 (docs/measure.md, Occupancy). */
static double
threads_cpu_now(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    struct timespec ts;
    double sum = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' &&
            clock_gettime(thread_cpu_clock(atol(e->d_name)), &ts) == 0)
            sum += (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    closedir(d);
    return sum;
}
#endif

double
kt_cpu_now(void)
{
    struct timespec ts;

#ifdef __linux__
    double threads = threads_cpu_now();

    if (threads >= 0)
        return threads;
#endif
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) < 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Threads of this process now: the runner child is single-threaded until
 * the kernel's first parallel region starts the OpenMP pool, which then
 * stays; 0 when unknown. */
static int
process_threads(void)
{
    int n = 0;
#ifdef __linux__
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
#endif
    return n;
}

/* CPUs this process may run on: a worker pinned (taskset, cgroup cpuset)
 * to fewer CPUs than are online has its threads share those. */
long
kt_usable_cpus(void)
{
#ifdef __linux__
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    return sysconf(_SC_NPROCESSORS_ONLN);
}

int
kt_kernel_threads(int requested, long cpus)
{
    int n = process_threads();

    if (n < 1)
        n = requested > 0 ? requested : 1;
    if (cpus > 0 && n > cpus)
        n = (int)cpus;
    return n;
}

double
kt_occupancy(double cpu_s, double wall_s, int threads)
{
    if (!(wall_s > 0) || threads < 1 || !(cpu_s >= 0))
        return 0;
    return cpu_s / (wall_s * threads);
}

int
kt_repeat_disturbed(double cost, double occ, double fastest)
{
    return occ < KT_OCCUPANCY_MIN && cost > fastest * KT_DISTURBED_SLOWER;
}
