/* hold.c - results marked, or runs held, while a host's CPUs sit far apart
 * (docs/measure.md, "Thread placement").  A worker reports with each run
 * on two threads or more how long a cache line took between the kernel's
 * first two CPUs (xcpu_ns).  On a VM
 * whose host moves one vCPU to another CCX for a minute or two, that goes
 * from ~60 ns to ~300 ns and kernels that pass data between their threads
 * through the shared cache run up to 2.4x slower, while nothing else (the
 * threads' CPU time, single-thread speed, bandwidth) changes.  Timings
 * from such a spell do not compare with the others: the tracker marks
 * them contended, and with `placement_wait_s` > 0 times those candidates
 * again once the CPUs are close: it holds the host's runs (builds go on)
 * for 0.5 s, doubling to 2 s, for at most that long per spell.  The
 * quiet level is the lowest round trip of the last two 5-minute windows,
 * so a host that moved for good is the new normal within 10 minutes. */
#include "measure/tracker_int.h"

#include "common/common.h"

#include <string.h>

static struct kt__host_place *
place_of(struct kt_tracker *t, const char *host)
{
    struct kt__host_place *p;
    int i;

    for (i = 0; i < t->nplace; i++)
        if (strcmp(t->place[i].host, host) == 0)
            return &t->place[i];
    if (t->nplace == KT__MAX_HOSTS)
        return NULL;
    p = &t->place[t->nplace++];
    memset(p, 0, sizeof(*p));
    snprintf(p->host, sizeof(p->host), "%s", host);
    return p;
}

static double
quiet_level(const struct kt__host_place *p)
{
    double a = p->quiet_ns[0], b = p->quiet_ns[1];

    if (a > 0 && b > 0)
        return a < b ? a : b;
    return a > 0 ? a : b;
}

/* Starts a new window when the current one is over. */
static void
rotate_windows(struct kt__host_place *p, double now)
{
    if (p->window_start == 0)
        p->window_start = now;
    if (now - p->window_start <= KT__XCPU_WINDOW_S)
        return;
    /* after a quiet while (a daemon between jobs) both windows are over:
     * nothing is remembered */
    p->quiet_ns[1] = now - p->window_start > 2 * KT__XCPU_WINDOW_S
                         ? 0
                         : p->quiet_ns[0];
    p->quiet_ns[0] = 0;
    p->window_start = now;
}

int
kt__place_judge(struct kt_tracker *t, const char *host, double xcpu_ns,
                double wait_s, int may_hold, double now, double *quiet_ns)
{
    struct kt__host_place *p = place_of(t, host);
    double quiet;

    *quiet_ns = 0;
    if (p == NULL || !(xcpu_ns > 0))
        return KT__PLACE_NEAR;
    rotate_windows(p, now);
    quiet = quiet_level(p);
    if (p->quiet_ns[0] == 0 || xcpu_ns < p->quiet_ns[0])
        p->quiet_ns[0] = xcpu_ns;
    if (quiet == 0 || xcpu_ns <= KT__XCPU_APART * quiet) {
        if (p->apart_since > 0)
            log_warnx("tracker: host %s: its CPUs are close again (%.0f ns "
                      "round trip) after %.0f s",
                      host, xcpu_ns, now - p->apart_since);
        p->apart_since = 0;
        p->hold_ms = 0;
        return KT__PLACE_NEAR;
    }
    *quiet_ns = quiet;
    if (p->apart_since == 0) {
        p->apart_since = now;
        if (wait_s > 0)
            log_warnx("tracker: host %s: a cache line takes %.0f ns between "
                      "the kernel's CPUs, %.1fx its quiet %.0f ns (the VM's "
                      "CPUs moved apart); runs held up to %.0f s and timed "
                      "again",
                      host, xcpu_ns, xcpu_ns / quiet, quiet, wait_s);
        else
            log_warnx("tracker: host %s: a cache line takes %.0f ns between "
                      "the kernel's CPUs, %.1fx its quiet %.0f ns (the VM's "
                      "CPUs moved apart); results marked contended until "
                      "they are close (measure.placement_wait_s holds runs "
                      "instead)",
                      host, xcpu_ns, xcpu_ns / quiet, quiet);
    }
    if (!may_hold || !(wait_s > 0) || now - p->apart_since >= wait_s)
        return KT__PLACE_APART;
    p->hold_ms = p->hold_ms == 0                    ? KT__HOLD_MIN_MS
                 : p->hold_ms * 2 > KT__HOLD_MAX_MS ? KT__HOLD_MAX_MS
                                                    : p->hold_ms * 2;
    if (now - p->apart_since + p->hold_ms / 1000.0 > wait_s)
        p->hold_ms = (int)((wait_s - (now - p->apart_since)) * 1000) + 1;
    p->hold_until = now + p->hold_ms / 1000.0;
    return KT__PLACE_HOLD;
}

int
kt__place_held(struct kt_tracker *t, const char *host, double now)
{
    int i;

    for (i = 0; i < t->nplace; i++)
        if (strcmp(t->place[i].host, host) == 0)
            return t->place[i].hold_until > now;
    return 0;
}

int
kt__place_release(struct kt_tracker *t, double now)
{
    int i, released = 0;

    for (i = 0; i < t->nplace; i++)
        if (t->place[i].hold_until > 0 && t->place[i].hold_until <= now) {
            t->place[i].hold_until = 0;
            released = 1;
        }
    return released;
}
