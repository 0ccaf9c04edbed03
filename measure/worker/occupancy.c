/* occupancy.c - telling a repeat that other processes disturbed from an
 * undisturbed one (docs/measure.md, "Timing on a shared machine").  The
 * kernel's process CPU time (every OpenMP thread, spinning at barriers
 * included) over wall time x threads is close to 1 while its threads own
 * their CPUs, and falls when the scheduler hands the CPUs to someone
 * else. */
#ifdef __linux__
#define _GNU_SOURCE /* sched_getaffinity */
#include <sched.h>
#endif
#include "measure/worker/worker.h"

#include <dirent.h>
#include <time.h>
#include <unistd.h>

double
kt_cpu_now(void)
{
    struct timespec ts;

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
