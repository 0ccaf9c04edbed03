/* log.c - line-at-a-time logging to stderr.  Each line is formatted into a
 * stack buffer and written with one write(2), so pool threads and forked
 * children may log without interleaving. */
#include "common/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int kt_log_level = LOG_INFO;
static int to_journal = -1;

void
kt_log_init(int level)
{
    kt_log_level = level;
    to_journal = getenv("JOURNAL_STREAM") != NULL;
}

static const char *
level_name(int prio)
{
    static const char *names[] = {"EMERG", "ALERT", "CRIT", "ERR",
                                  "WARN", "NOTICE", "INFO", "DEBUG"};
    if (prio < 0 || prio > LOG_DEBUG)
        return "?";
    return names[prio];
}

static void vlog_line(int prio, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void
vlog_line(int prio, const char *fmt, va_list ap)
{
    char line[2048];
    size_t n = 0;
    int saved = errno;
    int r;

    if (to_journal < 0)
        to_journal = getenv("JOURNAL_STREAM") != NULL;
    if (to_journal) {
        r = snprintf(line, sizeof(line), "<%d>", prio);
    } else {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        r = snprintf(line, sizeof(line),
                     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                     level_name(prio));
    }
    n = r > 0 ? (size_t)r : 0;
    r = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    if (r > 0)
        n += (size_t)r < sizeof(line) - n - 1 ? (size_t)r : sizeof(line) - n - 2;
    line[n++] = '\n';
    (void)!write(STDERR_FILENO, line, n);
    errno = saved;
}

void
kt_log(int prio, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vlog_line(prio, fmt, ap);
    va_end(ap);
}

void
kt_fatalx(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vlog_line(LOG_CRIT, fmt, ap);
    va_end(ap);
    abort();
}
