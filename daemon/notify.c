/* notify.c - systemd readiness, status, reload, stop and watchdog messages
 * (sd_notify protocol: one AF_UNIX datagram of KEY=VALUE lines to the socket
 * named by $NOTIFY_SOCKET).  Through libsystemd when it is available, else
 * through kt_notify_send_raw. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifdef KT_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "daemon/daemon.h"

/* Sends msg to $NOTIFY_SOCKET: a filesystem path or, with a leading '@',
 * an abstract socket.  Returns 1 sent, 0 unset, or -errno. */
int
kt_notify_send_raw(const char *msg)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa;
    size_t plen;
    socklen_t salen;
    ssize_t n;
    int fd, rc;

    if (path == NULL || path[0] == '\0')
        return 0;
    plen = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || plen >= sizeof(sa.sun_path))
        return -EINVAL;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, plen);
    if (path[0] == '@')
        sa.sun_path[0] = '\0';
    salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen +
                        (path[0] == '@' ? 0 : 1));
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    n = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa,
               salen);
    rc = n < 0 ? -errno : 1;
    close(fd);
    return rc;
}

static int
notify(const char *msg)
{
#ifdef KT_HAVE_SYSTEMD
    return sd_notify(0, msg);
#else
    return kt_notify_send_raw(msg);
#endif
}

int
kt_notify_ready(void)
{
    return notify("READY=1");
}

int
kt_notify_stopping(void)
{
    return notify("STOPPING=1");
}

int
kt_notify_watchdog(void)
{
    return notify("WATCHDOG=1");
}

int
kt_notify_reloading(void)
{
    struct timespec ts;
    char msg[64];

    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ull +
                 (unsigned long long)ts.tv_nsec / 1000ull);
    return notify(msg);
}

int
kt_notify_status(const char *fmt, ...)
{
    char msg[1024 + 8];
    va_list ap;
    char *nl;

    memcpy(msg, "STATUS=", 7);
    va_start(ap, fmt);
    vsnprintf(msg + 7, sizeof(msg) - 7, fmt, ap);
    va_end(ap);
    nl = strchr(msg, '\n');
    if (nl != NULL)
        *nl = '\0';
    return notify(msg);
}

uint64_t
kt_notify_watchdog_usec(void)
{
#ifdef KT_HAVE_SYSTEMD
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0)
        return usec;
    return 0;
#else
    const char *s = getenv("WATCHDOG_USEC");
    const char *p = getenv("WATCHDOG_PID");
    unsigned long long v;
    char *end;

    if (s == NULL || *s == '\0')
        return 0;
    if (p != NULL && *p != '\0') {
        unsigned long long pid;
        errno = 0;
        pid = strtoull(p, &end, 10);
        if (errno != 0 || *end != '\0' || pid != (unsigned long long)getpid())
            return 0;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || *s == '-')
        return 0;
    return (uint64_t)v;
#endif
}
