/* fuzz_ctl.c - libFuzzer target for the control socket's server
 * (daemon/ctl.c): a real server on a libuv loop in this process, a real
 * Unix socket, and the input written to it as one client's byte stream,
 * then end of file.  The handler stands in for the daemon's commands and
 * checks the contract the server promises it.
 *
 * Input: the bytes of the stream.  When the first byte is 0xff, the stream
 * is the bytes after the third, then the third byte repeated (second byte +
 * 1) * 8 KiB times (up to 2 MiB: oversized lines, deep nesting, runs of
 * blank lines), then a newline.  Checked: one response line per non-blank request line, each
 * a JSON object with a boolean "ok" that is false exactly when there is an
 * "error"; a line over KT_CTL_MAX_LINE closes the connection; after every
 * input a new client is still answered and no connection is left open. */
#define _GNU_SOURCE /* MSG_NOSIGNAL */
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/daemon.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define AMPLIFY_UNIT (8 * 1024)

static uv_loop_t loop;
static struct kt_ctl *ctl;
static char dir[] = "/tmp/kt-fuzz-ctl-XXXXXX";
static char sock_path[64];

static void
handler(void *arg, const cJSON *req, cJSON *resp)
{
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(req, "cmd");
    const cJSON *rcmd = cJSON_GetObjectItemCaseSensitive(resp, "cmd");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(req, "args");

    (void)arg;
    if (!cJSON_IsObject(req) || !cJSON_IsString(cmd) ||
        cmd->valuestring[0] == '\0' ||
        !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "ok")) ||
        !cJSON_IsString(rcmd) || strcmp(rcmd->valuestring, cmd->valuestring))
        abort();
    if (strcmp(cmd->valuestring, "status") == 0) {
        cJSON_AddNumberToObject(resp, "jobs", 0);
        cJSON_AddStringToObject(resp, "state", "running");
    } else if (strcmp(cmd->valuestring, "echo") == 0) {
        if (args != NULL)
            cJSON_AddItemToObject(resp, "args", cJSON_Duplicate(args, 1));
    } else if (strcmp(cmd->valuestring, "error-only") == 0) {
        cJSON_AddStringToObject(resp, "error", "handler set only error");
    } else {
        kt_ctl_fail(resp, "unknown command \"%s\"", cmd->valuestring);
    }
}

static void
remove_dir(void)
{
    kt_ctl_close(ctl);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    rmdir(dir);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char err[256];

    (void)argc;
    (void)argv;
    kt_log_init(LOG_ERR);     /* refusals are logged as warnings: too many */
    signal(SIGPIPE, SIG_IGN); /* as kerntuned: clients leave mid-answer */
    if (mkdtemp(dir) == NULL)
        kt_fatalx("mkdtemp %s: %s", dir, strerror(errno));
    snprintf(sock_path, sizeof(sock_path), "%s/ctl.sock", dir);
    uv_loop_init(&loop);
    if (kt_ctl_new(&ctl, &loop, sock_path, handler, NULL, err, sizeof(err)) != 0)
        kt_fatalx("kt_ctl_new: %s", err);
    atexit(remove_dir);
    return 0;
}

static int
connect_client(void)
{
    struct sockaddr_un sa;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        kt_fatalx("connect %s: %s", sock_path, strerror(errno));
    return fd;
}

/* Writes in[0..n) to a new connection, then shuts down writing, while
 * running the server's loop; returns what the server sent until it closed
 * the connection (NUL terminated). */
static void
exchange(const char *in, size_t n, struct kt_buf *out)
{
    struct pollfd p[2];
    char buf[65536];
    size_t off = 0;
    int fd = connect_client(), writing = 1, open = 1;
    ssize_t r;

    while (open) {
        int progress = 0;
        uv_run(&loop, UV_RUN_NOWAIT);
        if (writing && off < n) {
            r = send(fd, in + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (r > 0) {
                off += (size_t)r;
                progress = 1;
            } else if (r < 0 && errno != EAGAIN) {
                writing = 0; /* the server closed it: oversized line */
            }
        }
        if (writing && off == n) {
            shutdown(fd, SHUT_WR);
            writing = 0;
        }
        r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (r > 0) {
            kt_buf_put(out, buf, (size_t)r);
            progress = 1;
        } else if (r == 0 || errno != EAGAIN) {
            open = 0;
        }
        if (!progress && open) {
            p[0].fd = fd;
            p[0].events = POLLIN | (writing ? POLLOUT : 0);
            p[1].fd = uv_backend_fd(&loop);
            p[1].events = POLLIN;
            poll(p, 2, 10);
        }
    }
    close(fd);
}

static int
is_blank(const char *line, size_t len)
{
    size_t i;

    for (i = 0; i < len; i++)
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
            return 0;
    return 1;
}

/* Responses the server owes for the stream; *oversize when a line (or the
 * unfinished tail) is over the limit, which closes the connection. */
static size_t
expected_responses(const char *in, size_t n, int *oversize)
{
    size_t off = 0, count = 0;

    *oversize = 0;
    while (off < n) {
        const char *nl = memchr(in + off, '\n', n - off);
        size_t len = nl != NULL ? (size_t)(nl - (in + off)) : n - off;
        if (len > KT_CTL_MAX_LINE) {
            *oversize = 1;
            return count + 1;
        }
        if (nl == NULL)
            break; /* dropped at end of file */
        count += !is_blank(in + off, len);
        off += len + 1;
    }
    return count;
}

/* Checks each complete response line; returns how many there are. */
static size_t
check_responses(const struct kt_buf *out, int complete)
{
    const char *p = out->p, *end = out->p + out->len, *nl;
    size_t count = 0;

    while (p < end && (nl = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        cJSON *r = cJSON_ParseWithLength(p, (size_t)(nl - p));
        const cJSON *ok = cJSON_GetObjectItemCaseSensitive(r, "ok");
        const cJSON *error = cJSON_GetObjectItemCaseSensitive(r, "error");
        const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(r, "cmd");
        if (!cJSON_IsObject(r) || !cJSON_IsBool(ok) ||
            cJSON_IsFalse(ok) != cJSON_IsString(error) ||
            (cmd != NULL && !cJSON_IsString(cmd))) {
            fprintf(stderr, "bad response: %.*s\n", (int)(nl - p), p);
            abort();
        }
        cJSON_Delete(r);
        count++;
        p = nl + 1;
    }
    if (complete && p != end)
        abort(); /* a response cut short although nothing was closed */
    return count;
}

/* A new client is answered, and every connection gets closed. */
static void
check_still_serving(void)
{
    static const char probe[] = "{\"cmd\":\"status\",\"id\":7}\n";
    struct kt_buf out;
    unsigned clients = 1;

    kt_buf_init(&out);
    exchange(probe, strlen(probe), &out);
    if (strcmp(out.p != NULL ? out.p : "",
               "{\"ok\":true,\"cmd\":\"status\",\"id\":7,\"jobs\":0,"
               "\"state\":\"running\"}\n") != 0) {
        fprintf(stderr, "server no longer answers: %s\n", out.p);
        abort();
    }
    kt_buf_free(&out);
    while (clients > 0) {
        uv_run(&loop, UV_RUN_NOWAIT);
        kt_ctl_counters(ctl, &clients, NULL, NULL);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data;
    char *amplified = NULL;
    struct kt_buf out;
    size_t n = size, want, got;
    int oversize;

    if (size >= 3 && data[0] == 0xff) {
        size_t run = ((size_t)data[1] + 1) * AMPLIFY_UNIT;
        n = size - 3 + run + 1;
        amplified = kt_xmalloc(n);
        memcpy(amplified, data + 3, size - 3);
        memset(amplified + size - 3, data[2], run);
        amplified[n - 1] = '\n';
        in = amplified;
    }
    kt_buf_init(&out);
    exchange(in, n, &out);
    want = expected_responses(in, n, &oversize);
    /* Every response is owed, unless an oversized line closed the
     * connection: that may drop responses still queued, never add one. */
    got = check_responses(&out, !oversize);
    if (oversize ? got > want : got != want) {
        fprintf(stderr, "%zu responses for %zu requests\n", got, want);
        abort();
    }
    kt_buf_free(&out);
    free(amplified);
    check_still_serving();
    return 0;
}
