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
    static const char *names[] = {"EMERG", "ALERT",  "CRIT", "ERR",
                                  "WARN",  "NOTICE", "INFO", "DEBUG"};
    if (prio < 0 || prio > LOG_DEBUG)
        return "?";
    return names[prio];
}

/* Appends s to line[n..cap) with every control byte written as \xNN, so
 * a peer's name or key can never start a forged log line (journald reads
 * "<N>" at a line's start as its priority).  Returns the new length. */
static size_t
put_escaped(char *line, size_t n, size_t cap, const char *s)
{
    static const char hex[] = "0123456789abcdef";

    for (; *s && n < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != 0x7f) {
            line[n++] = (char)c;
        } else if (n + 4 <= cap) {
            line[n++] = '\\';
            line[n++] = 'x';
            line[n++] = hex[c >> 4];
            line[n++] = hex[c & 15];
        } else {
            break;
        }
    }
    return n;
}

static void vlog_line(int prio, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void
vlog_line(int prio, const char *fmt, va_list ap)
{
    char line[2048], msg[2048];
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
    r = vsnprintf(msg, sizeof(msg), fmt, ap);
    if (r > 0)
        n = put_escaped(line, n, sizeof(line) - 1, msg);
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
