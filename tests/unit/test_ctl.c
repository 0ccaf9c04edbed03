/* test_ctl.c - the control socket over a real Unix socket in a temp dir:
 * the server runs on a libuv loop in a second thread, clients are the
 * blocking kt_ctl_request and raw sockets that misbehave.  Also checks the
 * table rendering and that dist/kerntuned.json loads. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config/config.h"
#include "daemon/daemon.h"

struct fix {
    char dir[64];
    char path[128];
    uv_loop_t loop;
    uv_async_t stop;
    uv_thread_t thread;
    struct kt_ctl *ctl;
    unsigned clients, requests, rejected; /* read after the loop stops */
    int handled;                          /* loop thread only */
};

/* The engine's part, as a test double: a few commands with fixed data. */
static void
handler(void *arg, const cJSON *req, cJSON *resp)
{
    struct fix *f = arg;
    const char *cmd = cJSON_GetObjectItemCaseSensitive(req, "cmd")->valuestring;
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(req, "job");
    cJSON *arr, *o;

    f->handled++;
    if (strcmp(cmd, "status") == 0) {
        cJSON_AddNumberToObject(resp, "jobs", 2);
        cJSON_AddStringToObject(resp, "version", "test");
        cJSON_AddNumberToObject(resp, "handled", f->handled);
    } else if (strcmp(cmd, "tasks") == 0) {
        if (!cJSON_IsString(job) || strcmp(job->valuestring, "tiny") != 0) {
            kt_ctl_fail(resp, "no job \"%s\"",
                        cJSON_IsString(job) ? job->valuestring : "");
            return;
        }
        cJSON_AddStringToObject(resp, "job", "tiny");
        arr = cJSON_AddArrayToObject(resp, "tasks");
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", 0);
        cJSON_AddStringToObject(o, "name", "gemm64");
        cJSON_AddNumberToObject(o, "weight", 2);
        cJSON_AddNumberToObject(o, "latency_ms", 0.08);
        cJSON_AddNumberToObject(o, "gflops", 103.92);
        cJSON_AddNumberToObject(o, "trials", 64);
        cJSON_AddNumberToObject(o, "errors", 3);
        cJSON_AddItemToArray(arr, o);
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", 1);
        cJSON_AddStringToObject(o, "name", "relu");
        cJSON_AddNumberToObject(o, "weight", 1);
        cJSON_AddNullToObject(o, "latency_ms");
        cJSON_AddNullToObject(o, "gflops");
        cJSON_AddNumberToObject(o, "trials", 0);
        cJSON_AddNumberToObject(o, "errors", 0);
        cJSON_AddItemToArray(arr, o);
        cJSON_AddNullToObject(resp, "total_latency_ms");
        cJSON_AddNumberToObject(resp, "trials", 64);
        cJSON_AddNumberToObject(resp, "used_s", 12.4);
        cJSON_AddNumberToObject(resp, "next_id", 1);
    } else if (strcmp(cmd, "error-only") == 0) {
        cJSON_AddStringToObject(resp, "error", "handler set only error");
    } else {
        kt_ctl_fail(resp, "unknown command \"%s\"", cmd);
    }
}

static void
on_stop(uv_async_t *a)
{
    struct fix *f = a->data;
    kt_ctl_counters(f->ctl, &f->clients, &f->requests, &f->rejected);
    kt_ctl_close(f->ctl);
    uv_close((uv_handle_t *)a, NULL);
}

static void
loop_thread(void *arg)
{
    struct fix *f = arg;
    uv_run(&f->loop, UV_RUN_DEFAULT);
}

static int
setup(void **state)
{
    struct fix *f = calloc(1, sizeof(*f));
    char err[256];

    snprintf(f->dir, sizeof(f->dir), "/tmp/kt_ctl_XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/control.sock", f->dir);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(uv_async_init(&f->loop, &f->stop, on_stop), 0);
    f->stop.data = f;
    if (kt_ctl_new(&f->ctl, &f->loop, f->path, handler, f, err, sizeof(err)) !=
        0)
        fail_msg("kt_ctl_new: %s", err);
    assert_int_equal(uv_thread_create(&f->thread, loop_thread, f), 0);
    *state = f;
    return 0;
}

/* Stops the server from its own thread and checks the loop is empty. */
static void
stop_server(struct fix *f)
{
    if (f->ctl == NULL)
        return;
    uv_async_send(&f->stop);
    uv_thread_join(&f->thread);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    f->ctl = NULL;
}

static int
teardown(void **state)
{
    struct fix *f = *state;
    stop_server(f);
    unlink(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* Fills sa for path (asserts it fits). */
static void
unix_addr(struct sockaddr_un *sa, const char *path)
{
    size_t n = strlen(path);
    assert_true(n < sizeof(sa->sun_path));
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path, path, n + 1);
}

static int
raw_connect(const char *path)
{
    struct sockaddr_un sa;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    unix_addr(&sa, path);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static void
raw_send(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        assert_true(w > 0);
        s += w;
        n -= (size_t)w;
    }
}

/* Reads one line (without '\n') into buf; returns its length, or -1 on
 * EOF before a newline.  Bounded wait. */
static int
raw_line(int fd, char *buf, size_t n)
{
    size_t len = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t r;
        char c;
        assert_int_equal(poll(&p, 1, 5000), 1);
        r = recv(fd, &c, 1, 0);
        if (r <= 0)
            return -1;
        if (c == '\n') {
            buf[len] = '\0';
            return (int)len;
        }
        assert_true(len + 1 < n);
        buf[len++] = c;
    }
}

static cJSON *
request(struct fix *f, const char *req)
{
    char err[256], *text = NULL;
    cJSON *r;
    if (kt_ctl_request(f->path, req, &text, err, sizeof(err)) != 0)
        fail_msg("kt_ctl_request: %s", err);
    r = cJSON_Parse(text);
    assert_non_null(r);
    free(text);
    return r;
}

static void
test_ctl_round_trip(void **state)
{
    struct fix *f = *state;
    cJSON *r = request(f, "{\"cmd\": \"status\", \"id\": 7}");

    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")));
    assert_string_equal(cJSON_GetObjectItem(r, "cmd")->valuestring, "status");
    assert_int_equal(cJSON_GetObjectItem(r, "id")->valueint, 7);
    assert_int_equal(cJSON_GetObjectItem(r, "jobs")->valueint, 2);
    cJSON_Delete(r);

    r = request(f, "{\"cmd\":\"tasks\",\"job\":\"nope\"}");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(r, "ok")));
    assert_string_equal(cJSON_GetObjectItem(r, "error")->valuestring,
                        "no job \"nope\"");
    cJSON_Delete(r);

    r = request(f, "{\"cmd\":\"error-only\"}");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(r, "ok")));
    cJSON_Delete(r);

    r = request(f, "{\"cmd\":\"frobnicate\"}");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(r, "ok")));
    cJSON_Delete(r);
}

static void
test_ctl_pipelined_and_many_clients(void **state)
{
    struct fix *f = *state;
    int fds[8];
    char line[4096];
    size_t i;

    for (i = 0; i < KT_ARRAY_LEN(fds); i++)
        fds[i] = raw_connect(f->path);
    /* Two requests in one write, answered in order. */
    for (i = 0; i < KT_ARRAY_LEN(fds); i++) {
        const char *two = "{\"cmd\":\"status\",\"id\":1}\r\n\n"
                          "{\"cmd\":\"x\",\"id\":2}\n";
        raw_send(fds[i], two, strlen(two));
    }
    for (i = 0; i < KT_ARRAY_LEN(fds); i++) {
        cJSON *r;
        assert_true(raw_line(fds[i], line, sizeof(line)) > 0);
        r = cJSON_Parse(line);
        assert_int_equal(cJSON_GetObjectItem(r, "id")->valueint, 1);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")));
        cJSON_Delete(r);
        assert_true(raw_line(fds[i], line, sizeof(line)) > 0);
        r = cJSON_Parse(line);
        assert_int_equal(cJSON_GetObjectItem(r, "id")->valueint, 2);
        assert_true(cJSON_IsFalse(cJSON_GetObjectItem(r, "ok")));
        cJSON_Delete(r);
    }
    for (i = 0; i < KT_ARRAY_LEN(fds); i++)
        close(fds[i]);
    stop_server(f);
    assert_int_equal(f->requests, 2 * KT_ARRAY_LEN(fds));
    assert_int_equal(f->rejected, 0);
}

/* Answers one status request on fd; 0, or -1 when the server closed it. */
static int
status_on(int fd)
{
    const char *req = "{\"cmd\":\"status\",\"id\":3}\n";
    char line[4096];

    if (send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req))
        return -1;
    if (raw_line(fd, line, sizeof(line)) < 0)
        return -1;
    assert_non_null(strstr(line, "\"id\":3"));
    return 0;
}

/* At most 64 clients at once: the 65th is closed at accept (the others
 * keep being served), and a slot is free again once a client leaves. */
static void
test_ctl_client_cap(void **state)
{
    struct fix *f = *state;
    int fds[64], extra, i, served = 0;

    for (i = 0; i < 64; i++) {
        fds[i] = raw_connect(f->path);
        assert_int_equal(status_on(fds[i]), 0);
    }
    extra = raw_connect(f->path); /* the kernel accepts it, the server not */
    assert_int_equal(status_on(extra), -1);
    close(extra);
    assert_int_equal(status_on(fds[10]), 0);
    close(fds[0]);
    /* The server sees fds[0] go at its own pace: try a few times. */
    for (i = 0; i < 200 && !served; i++) {
        extra = raw_connect(f->path);
        served = status_on(extra) == 0;
        close(extra);
        if (!served)
            usleep(10000);
    }
    assert_true(served);
    for (i = 1; i < 64; i++)
        close(fds[i]);
}

static void
test_ctl_malformed_json(void **state)
{
    struct fix *f = *state;
    char line[4096];
    cJSON *r;
    int fd = raw_connect(f->path);

    raw_send(fd, "{\"cmd\": stat\n", 13);
    assert_true(raw_line(fd, line, sizeof(line)) > 0);
    r = cJSON_Parse(line);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(r, "ok")));
    assert_non_null(strstr(cJSON_GetObjectItem(r, "error")->valuestring,
                           "malformed JSON at column 9"));
    cJSON_Delete(r);
    raw_send(fd, "[1,2]\n{\"cmd\":\"\"}\n", 17);
    assert_true(raw_line(fd, line, sizeof(line)) > 0);
    assert_non_null(strstr(line, "\"ok\":false"));
    assert_true(raw_line(fd, line, sizeof(line)) > 0);
    assert_non_null(strstr(line, "\"ok\":false"));
    /* The connection survives bad requests. */
    raw_send(fd, "{\"cmd\":\"status\"}\n", 17);
    assert_true(raw_line(fd, line, sizeof(line)) > 0);
    assert_non_null(strstr(line, "\"ok\":true"));
    close(fd);
    stop_server(f);
    assert_int_equal(f->rejected, 3);
}

static void
test_ctl_oversized_line(void **state)
{
    struct fix *f = *state;
    size_t n = KT_CTL_MAX_LINE + 100;
    char *big = malloc(n), line[4096];
    int fd;

    memset(big, ' ', n);
    memcpy(big, "{\"cmd\":\"status\",\"pad\":\"", 23);
    /* Without a newline: rejected once more than the cap is buffered. */
    fd = raw_connect(f->path);
    raw_send(fd, big, n);
    assert_true(raw_line(fd, line, sizeof(line)) > 0);
    assert_non_null(strstr(line, "request line over 65536 bytes"));
    assert_int_equal(raw_line(fd, line, sizeof(line)), -1); /* closed */
    close(fd);
    /* With a newline after it, in one write. */
    big[n - 1] = '\n';
    fd = raw_connect(f->path);
    raw_send(fd, big, n);
    assert_true(raw_line(fd, line, sizeof(line)) > 0);
    assert_non_null(strstr(line, "\"ok\":false"));
    assert_int_equal(raw_line(fd, line, sizeof(line)), -1);
    close(fd);
    free(big);
    /* A line just under the cap is fine. */
    {
        char *ok = malloc(KT_CTL_MAX_LINE + 1);
        size_t m = KT_CTL_MAX_LINE - 2;
        memset(ok, ' ', m);
        memcpy(ok, "{\"cmd\":\"status\"}", 16);
        ok[m] = '\n';
        fd = raw_connect(f->path);
        raw_send(fd, ok, m + 1);
        assert_true(raw_line(fd, line, sizeof(line)) > 0);
        assert_non_null(strstr(line, "\"ok\":true"));
        close(fd);
        free(ok);
    }
    stop_server(f);
    assert_int_equal(f->rejected, 2);
}

static void
test_ctl_client_disconnects_mid_line(void **state)
{
    struct fix *f = *state;
    cJSON *r;
    int fd = raw_connect(f->path);

    raw_send(fd, "{\"cmd\":\"sta", 11);
    close(fd);
    fd = raw_connect(f->path);
    raw_send(fd, "{\"cmd\":\"status\"}\n", 17);
    close(fd); /* gone before the response is written */
    r = request(f, "{\"cmd\":\"status\"}");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")));
    cJSON_Delete(r);
    stop_server(f); /* asserts uv_loop_close() == 0 */
    assert_int_equal(f->rejected, 0);
}

static void
test_ctl_socket_mode_0600(void **state)
{
    struct fix *f = *state;
    struct stat st;
    struct kt_ctl *c2 = NULL;
    uv_loop_t loop;
    char path2[160], err[256];
    mode_t old;

    assert_int_equal(stat(f->path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);

    /* Even with a permissive umask. */
    snprintf(path2, sizeof(path2), "%s/second.sock", f->dir);
    assert_int_equal(uv_loop_init(&loop), 0);
    old = umask(0);
    assert_int_equal(kt_ctl_new(&c2, &loop, path2, handler, f, err, sizeof(err)),
                     0);
    umask(old);
    assert_int_equal(stat(path2, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    kt_ctl_close(c2);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
    assert_int_equal(access(path2, F_OK), -1); /* removed on close */
}

static void
test_ctl_second_daemon_refused(void **state)
{
    struct fix *f = *state;
    struct kt_ctl *c2 = NULL;
    struct sockaddr_un sa;
    uv_loop_t loop;
    char err[256], other[160];
    cJSON *r;
    int fd;

    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(kt_ctl_new(&c2, &loop, f->path, handler, f, err,
                                sizeof(err)),
                     -EADDRINUSE);
    assert_null(c2);
    assert_non_null(strstr(err, "another kerntuned is listening"));
    /* The live daemon keeps its socket. */
    r = request(f, "{\"cmd\":\"status\"}");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r, "ok")));
    cJSON_Delete(r);

    /* A stale socket (bound, nobody listening) is replaced. */
    snprintf(other, sizeof(other), "%s/stale.sock", f->dir);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    unix_addr(&sa, other);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(fd);
    assert_int_equal(kt_ctl_new(&c2, &loop, other, handler, f, err, sizeof(err)),
                     0);
    kt_ctl_close(c2);

    /* A regular file is never removed. */
    fd = open(other, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(kt_ctl_new(&c2, &loop, other, handler, f, err, sizeof(err)),
                     -EEXIST);
    assert_int_equal(access(other, F_OK), 0);
    unlink(other);

    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void
test_ctl_request_errors(void **state)
{
    struct fix *f = *state;
    struct sockaddr_un sa;
    char err[256], path[160], *text = NULL;
    int fd;

    snprintf(path, sizeof(path), "%s/none.sock", f->dir);
    assert_int_equal(kt_ctl_request(path, "{\"cmd\":\"status\"}", &text, err,
                                    sizeof(err)),
                     -ENOENT);
    assert_non_null(strstr(err, "is kerntuned running?"));
    assert_int_equal(kt_ctl_request(f->path, "{\"cmd\":", &text, err,
                                    sizeof(err)),
                     KT_EPARSE);
    assert_int_equal(kt_ctl_request(f->path, "[]", &text, err, sizeof(err)),
                     KT_EPARSE);

    /* A listener that never answers: the client gives up. */
    snprintf(path, sizeof(path), "%s/mute.sock", f->dir);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    unix_addr(&sa, path);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(kt_ctl_request_timeout(path, "{\"cmd\":\"status\"}", 200,
                                            &text, err, sizeof(err)),
                     KT_ETIMEDOUT);
    assert_null(text);
    close(fd);
    unlink(path);
}

/* kt_ctl_print output for a response, as a string (caller frees). */
static char *
render(const char *cmd, const char *json, int *rc)
{
    char *out = NULL;
    size_t n = 0;
    FILE *fp = open_memstream(&out, &n);
    cJSON *r = cJSON_Parse(json);

    assert_non_null(r);
    *rc = kt_ctl_print(fp, cmd, r);
    fclose(fp);
    cJSON_Delete(r);
    return out;
}

/* The jobs and best tables, rendered from fixed replies. */
static void
check_jobs_and_best_tables(void)
{
    char *out;
    int rc;

    out = render("jobs",
                 "{\"ok\":true,\"cmd\":\"jobs\",\"jobs\":["
                 "{\"name\":\"resnet50\",\"state\":\"running\",\"tasks\":34,"
                 "\"trials\":1280,\"trials_target\":20000,\"percent\":6.4,"
                 "\"eta_s\":3725,\"errors\":17,"
                 "\"total_latency_ms\":9.4876,\"used_s\":600.4,\"key\":"
                 "\"local\"},"
                 "{\"name\":\"tiny\",\"state\":\"failed\",\"tasks\":1,"
                 "\"trials\":0,\"trials_target\":64,\"percent\":0,"
                 "\"eta_s\":-1,\"errors\":0,"
                 "\"total_latency_ms\":-1,\"used_s\":0,\"key\":\"rk3399\","
                 "\"error\":\"no worker\"}]}",
                 &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(out, "| Job      | State   | Tasks | Trials | Target | "
                             "Done | ETA   | "
                             "Errors | Latency (ms) | Used (s) | Key    |\n"
                             "-------------------------------------------------"
                             "-------------------------------------------"
                             "---------------\n"
                             "| resnet50 | running |    34 |   1280 |  20000 | "
                             "6.4% | 1h02m | "
                             "    17 |        9.488 |      600 | local  |\n"
                             "| tiny     | failed  |     1 |      0 |     64 | "
                             "0.0% |     - | "
                             "     0 |            - |        0 | rk3399 |\n"
                             "-------------------------------------------------"
                             "-------------------------------------------"
                             "---------------\n"
                             "error tiny: no worker\n");
    free(out);

    out =
        render("best",
               "{\"ok\":true,\"cmd\":\"best\",\"job\":\"tiny\","
               "\"best\":[{\"id\":0,\"name\":\"gemm64\",\"latency_ms\":0.0801,"
               "\"gflops\":6.55,\"trials\":64,\"errors\":2,"
               "\"config\":\"[[\\\"SP\\\",0]]\"}]}",
               &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(
        out,
        "job tiny\n"
        "| ID | Task   | Latency (ms) | Speed (GFLOPS) | Trials | Errors |\n"
        "-----------------------------------------------------------------\n"
        "|  0 | gemm64 |        0.080 |           6.55 |     64 |      2 |\n"
        "-----------------------------------------------------------------\n"
        "schedule 0: [[\"SP\",0]]\n");
    free(out);
}

static void
test_ctl_print_tables(void **state)
{
    struct fix *f = *state;
    char err[256], *text, *out;
    int rc;

    if (kt_ctl_request(f->path, "{\"cmd\":\"tasks\",\"job\":\"tiny\"}", &text,
                       err, sizeof(err)) != 0)
        fail_msg("%s", err);
    out = render("tasks", text, &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(out, "job tiny\n"
                             "|  ID  | Latency (ms) | Speed (GFLOPS) | Trials "
                             "| Errors | Weight | Task\n"
                             "-------------------------------------------------"
                             "-----------------------\n"
                             "|    0 |        0.080 |         103.92 |     64 "
                             "|      3 |      2 | gemm64\n"
                             "|    1 |            - |              - |      0 "
                             "|      0 |      1 | relu\n"
                             "-------------------------------------------------"
                             "-----------------------\n"
                             "Estimated total latency: - ms\tTrials: 64\tUsed "
                             "time : 12 s\tNext ID: 1\t\n");
    free(out);
    free(text);

    check_jobs_and_best_tables();

    out = render("pause",
                 "{\"ok\":true,\"cmd\":\"pause\",\"job\":\"tiny\","
                 "\"state\":\"paused\"}",
                 &rc);
    assert_string_equal(out, "job tiny: paused\n");
    free(out);

    out = render("status",
                 "{\"ok\":true,\"cmd\":\"status\",\"pid\":42,"
                 "\"db\":{\"path\":\"/var/lib/kerntune/tune.db\",\"trials\":9},"
                 "\"jobs\":[1,2]}",
                 &rc);
    assert_string_equal(out, "pid: 42\ndb.path: /var/lib/kerntune/tune.db\n"
                             "db.trials: 9\njobs: 2 entries\n");
    free(out);

    out = render("rpc-status",
                 "{\"ok\":true,\"cmd\":\"rpc-status\","
                 "\"workers\":[{\"key\":\"local\",\"name\":\"w1\","
                 "\"addr\":\"127.0.0.1:40000\",\"state\":\"busy\",\"done\":5}],"
                 "\"queues\":[{\"key\":\"local\",\"workers\":1,\"free\":0,"
                 "\"pending\":3,\"running\":1}]}",
                 &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(out,
                        "Workers\n"
                        "| Key   | Worker | Address         | State | Done |\n"
                        "---------------------------------------------------\n"
                        "| local | w1     | 127.0.0.1:40000 | busy  |    5 |\n"
                        "---------------------------------------------------\n"
                        "\nQueues\n"
                        "| Key   | Workers | Free | Pending | Running |\n"
                        "----------------------------------------------\n"
                        "| local |       1 |    0 |       3 |       1 |\n"
                        "----------------------------------------------\n");
    free(out);

    out = render("best",
                 "{\"ok\":false,\"cmd\":\"best\",\"error\":\"no job "
                 "\\\"x\\\"\"}",
                 &rc);
    assert_int_equal(rc, KT_EINVAL);
    assert_string_equal(out, "error: no job \"x\"\n");
    free(out);
}

/* The default daemon config shipped for /etc/kerntune loads, with the
 * paths the systemd units use. */
static void
test_ctl_dist_config_loads(void **state)
{
    struct kt_daemon_conf *d = NULL;
    char err[512], path[512];
    const char *src = __FILE__; /* .../tests/unit/test_ctl.c */
    const char *cut = strstr(src, "tests/unit/test_ctl.c");

    (void)state;
    snprintf(path, sizeof(path), "%.*sdist/kerntuned.json",
             (int)(cut != NULL ? cut - src : 0), src);
    if (kt_daemon_conf_load(path, &d, err, sizeof(err)) != 0)
        fail_msg("%s", err);
    assert_string_equal(d->database, "/var/lib/kerntune/tune.db");
    assert_string_equal(d->log_dir, "/var/log/kerntune");
    assert_string_equal(d->model_dir, "/etc/kerntune/models");
    assert_string_equal(d->control_socket, "/run/kerntune/control.sock");
    assert_string_equal(d->token_file, "/etc/kerntune/token");
    assert_string_equal(d->listen_host, "127.0.0.1");
    assert_int_equal(d->listen_port, 9190);
    kt_daemon_conf_free(d);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ctl_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctl_pipelined_and_many_clients,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctl_client_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctl_malformed_json, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ctl_oversized_line, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ctl_client_disconnects_mid_line,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctl_socket_mode_0600, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ctl_second_daemon_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ctl_request_errors, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ctl_print_tables, setup, teardown),
        cmocka_unit_test(test_ctl_dist_config_loads),
    };
    kt_log_init(LOG_WARNING);
    signal(SIGPIPE, SIG_IGN); /* as kerntuned does: the server writes to
                                 clients that may be gone */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
