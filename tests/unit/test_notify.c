/* test_notify.c - sd_notify messages arrive on a real datagram socket bound
 * by the test in place of systemd's (a path and an abstract address), for
 * the libsystemd path and the raw fallback. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "daemon/daemon.h"

struct sink {
    char dir[64];
    char path[128];
    int fd;
};

/* Binds a datagram socket at addr ('@' = abstract) and exports it. */
static int
sink_open(struct sink *s, const char *addr)
{
    struct sockaddr_un sa;
    socklen_t len;
    size_t n = strlen(addr);

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, addr, n);
    if (addr[0] == '@')
        sa.sun_path[0] = '\0';
    len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
                      (addr[0] == '@' ? 0 : 1));
    s->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(s->fd >= 0);
    assert_int_equal(bind(s->fd, (struct sockaddr *)&sa, len), 0);
    assert_int_equal(setenv("NOTIFY_SOCKET", addr, 1), 0);
    return 0;
}

static int
setup(void **state)
{
    struct sink *s = calloc(1, sizeof(*s));
    snprintf(s->dir, sizeof(s->dir), "/tmp/kt_notify_XXXXXX");
    assert_non_null(mkdtemp(s->dir));
    snprintf(s->path, sizeof(s->path), "%s/notify.sock", s->dir);
    s->fd = -1;
    *state = s;
    return 0;
}

static int
teardown(void **state)
{
    struct sink *s = *state;
    if (s->fd >= 0)
        close(s->fd);
    unlink(s->path);
    rmdir(s->dir);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    free(s);
    return 0;
}

/* Receives one datagram (bounded wait: the message was sent already). */
static void
expect_msg(struct sink *s, const char *want_prefix, char *got, size_t n)
{
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    ssize_t r;

    assert_int_equal(poll(&p, 1, 5000), 1);
    r = recv(s->fd, got, n - 1, 0);
    assert_true(r > 0);
    got[r] = '\0';
    if (strncmp(got, want_prefix, strlen(want_prefix)) != 0)
        fail_msg("got \"%s\", want prefix \"%s\"", got, want_prefix);
}

static void
test_notify_messages_arrive(void **state)
{
    struct sink *s = *state;
    char got[2048];

    sink_open(s, s->path);
    assert_int_equal(kt_notify_ready(), 1);
    expect_msg(s, "READY=1", got, sizeof(got));
    assert_string_equal(got, "READY=1");
    assert_int_equal(kt_notify_status("jobs=%d queued=%d model=%s", 2, 64,
                                      "resnet50"),
                     1);
    expect_msg(s, "STATUS=", got, sizeof(got));
    assert_string_equal(got, "STATUS=jobs=2 queued=64 model=resnet50");
    assert_int_equal(kt_notify_watchdog(), 1);
    expect_msg(s, "WATCHDOG=1", got, sizeof(got));
    assert_string_equal(got, "WATCHDOG=1");
    assert_int_equal(kt_notify_stopping(), 1);
    expect_msg(s, "STOPPING=1", got, sizeof(got));
    assert_string_equal(got, "STOPPING=1");
}

static void
test_notify_reloading_has_monotonic_usec(void **state)
{
    struct sink *s = *state;
    struct timespec ts;
    unsigned long long usec, now;
    char got[256], *end;

    sink_open(s, s->path);
    assert_int_equal(kt_notify_reloading(), 1);
    expect_msg(s, "RELOADING=1\nMONOTONIC_USEC=", got, sizeof(got));
    usec = strtoull(got + strlen("RELOADING=1\nMONOTONIC_USEC="), &end, 10);
    assert_true(*end == '\0');
    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (unsigned long long)ts.tv_sec * 1000000ull +
          (unsigned long long)ts.tv_nsec / 1000ull;
    assert_true(usec > 0);
    assert_true(usec <= now);
}

static void
test_notify_status_cut_at_newline(void **state)
{
    struct sink *s = *state;
    char got[2048], big[3000];

    sink_open(s, s->path);
    assert_int_equal(kt_notify_status("first\nREADY=1"), 1);
    expect_msg(s, "STATUS=", got, sizeof(got));
    assert_string_equal(got, "STATUS=first");
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(kt_notify_status("%s", big), 1);
    expect_msg(s, "STATUS=xxx", got, sizeof(got));
    assert_int_equal(strlen(got), 7 + 1024);
}

static void
test_notify_raw_path_and_abstract(void **state)
{
    struct sink *s = *state;
    char got[256], abs[64];

    sink_open(s, s->path);
    assert_int_equal(kt_notify_send_raw("READY=1"), 1);
    expect_msg(s, "READY=1", got, sizeof(got));
    close(s->fd);

    snprintf(abs, sizeof(abs), "@kt-test-notify-%ld", (long)getpid());
    sink_open(s, abs);
    assert_int_equal(kt_notify_send_raw("WATCHDOG=1"), 1);
    expect_msg(s, "WATCHDOG=1", got, sizeof(got));
    assert_int_equal(kt_notify_ready(), 1);
    expect_msg(s, "READY=1", got, sizeof(got));
}

static void
test_notify_noop_when_unset(void **state)
{
    (void)state;
    unsetenv("NOTIFY_SOCKET");
    assert_int_equal(kt_notify_ready(), 0);
    assert_int_equal(kt_notify_send_raw("READY=1"), 0);
    assert_int_equal(kt_notify_status("x"), 0);
    assert_int_equal(kt_notify_reloading(), 0);
}

static void
test_notify_error_when_nobody_listens(void **state)
{
    struct sink *s = *state;

    /* A path where no socket is bound: the send fails with -errno. */
    assert_int_equal(setenv("NOTIFY_SOCKET", s->path, 1), 0);
    assert_true(kt_notify_send_raw("READY=1") < 0);
    assert_true(kt_notify_ready() < 0);
    assert_int_equal(setenv("NOTIFY_SOCKET", "relative/path", 1), 0);
    assert_true(kt_notify_send_raw("READY=1") < 0);
}

static void
test_notify_watchdog_usec(void **state)
{
    char pid[32];

    (void)state;
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    assert_true(kt_notify_watchdog_usec() == 0);
    setenv("WATCHDOG_USEC", "30000000", 1);
    assert_true(kt_notify_watchdog_usec() == 30000000u);
    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    setenv("WATCHDOG_PID", pid, 1);
    assert_true(kt_notify_watchdog_usec() == 30000000u);
    snprintf(pid, sizeof(pid), "%ld", (long)getpid() + 1);
    setenv("WATCHDOG_PID", pid, 1);
    assert_true(kt_notify_watchdog_usec() == 0); /* meant for another pid */
    unsetenv("WATCHDOG_PID");
    setenv("WATCHDOG_USEC", "soon", 1);
    assert_true(kt_notify_watchdog_usec() == 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_notify_messages_arrive, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_notify_reloading_has_monotonic_usec,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_notify_status_cut_at_newline,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_notify_raw_path_and_abstract,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_notify_noop_when_unset, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_notify_error_when_nobody_listens,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_notify_watchdog_usec, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
