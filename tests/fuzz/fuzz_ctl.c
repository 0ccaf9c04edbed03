/* fuzz_ctl.c - libFuzzer target for the control socket: its server
 * (daemon/ctl.c) and the daemon's commands (kt__daemon_ctl_handle in
 * daemon/kerntuned_ctl.c) against a real daemon state.  At start-up the
 * target opens a daemon as kerntuned does (a SQLite database, a tracker on
 * 127.0.0.1, the engine) on a temporary directory whose model dir holds
 * three jobs (fz_a and fz_b on key "fz", fz_c on key "other") and a model
 * file that does not load.  bench/fake_worker ($KT_FUZZ_FAKE_WORKER, set
 * by run.sh) serves key "fz": fz_a and fz_b are measured to their budget
 * and end (their tuning state freed, their figures kept) while the inputs
 * come in; fz_c keeps waiting for a worker.  Each input is written to a real Unix
 * socket as one client's byte stream, then end of file, while the loop
 * runs.
 *
 * Input: the bytes of the stream.  When the first byte is 0xff, the stream
 * is the bytes after the third, then the third byte repeated (second byte +
 * 1) * 8 KiB times (up to 2 MiB: oversized lines, deep nesting, runs of
 * blank lines), then a newline.  Checked: the handler is given only objects
 * with a non-empty string "cmd" and a response that echoes it; one
 * response line per non-blank request line, each a JSON object with a
 * boolean "ok" that is false exactly when there is an "error"; a line over
 * KT_CTL_MAX_LINE closes the connection; after every input a new client
 * gets the daemon's status with every job listed and no connection is left
 * open. */
#define _GNU_SOURCE /* MSG_NOSIGNAL */
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/kerntuned_int.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define AMPLIFY_UNIT (8 * 1024)
#define NJOBS 3 /* that load; the fourth model file does not */

static struct daemon d;
static char *token;
static struct kt_ctl *ctl;
static pid_t worker_pid;
static char dir[] = "/tmp/kt-fuzz-ctl-XXXXXX";
static char sock_path[64];

/* The server's contract to its handler, then the daemon's commands. */
static void
handler(void *arg, const cJSON *req, cJSON *resp)
{
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(req, "cmd");
    const cJSON *rcmd = cJSON_GetObjectItemCaseSensitive(resp, "cmd");

    if (!cJSON_IsObject(req) || !cJSON_IsString(cmd) ||
        cmd->valuestring[0] == '\0' ||
        !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "ok")) ||
        !cJSON_IsString(rcmd) || strcmp(rcmd->valuestring, cmd->valuestring))
        abort();
    kt__daemon_ctl_handle(arg, req, resp);
}

static void
write_file(const char *name, const char *text)
{
    char path[128];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if ((f = fopen(path, "w")) == NULL || fputs(text, f) < 0 || fclose(f))
        kt_fatalx("write %s: %s", path, strerror(errno));
}

static void
write_model(const char *name, const char *key, int m)
{
    char path[64], text[1024];

    snprintf(path, sizeof(path), "models/%s.json", name);
    snprintf(text, sizeof(text),
             "{\"name\": \"%s\", \"target\": {\"threads\": 1, \"key\": "
             "\"%s\"},\n \"tuning\": {\"trials\": 16, "
             "\"measures_per_round\": 8, \"policy\": \"random\"},\n "
             "\"tasks\": [{\"name\": \"mm\", \"compute\": "
             "[\"O[i,j] += A[i,k] * B[k,j]\"],\n \"shapes\": {\"A\": [%d, 16], "
             "\"B\": [16, 24]}}]}\n",
             name, key, m);
    write_file(path, text);
}

/* Two connections of the fake worker under key "fz"; it leaves with us. */
static void
start_worker(void)
{
    const char *path = getenv("KT_FUZZ_FAKE_WORKER");
    char tracker[64], token_file[128];

    if (path == NULL)
        kt_fatalx("KT_FUZZ_FAKE_WORKER: set it to the path of "
                  "bench/fake_worker (tests/fuzz/run.sh does)");
    snprintf(tracker, sizeof(tracker), "127.0.0.1:%d",
             kt_tracker_port(d.tracker));
    snprintf(token_file, sizeof(token_file), "%s/token", dir);
    worker_pid = fork();
    if (worker_pid < 0)
        kt_fatalx("fork: %s", strerror(errno));
    if (worker_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        execl(path, path, "--tracker", tracker, "--key", "fz", "--token-file",
              token_file, "--conns", "2", (char *)NULL);
        _exit(127);
    }
}

/* The daemon of kerntuned_main.c without its signals and timers. */
static void
open_daemon(void)
{
    char path[128], conf[1024], err[1024];

    snprintf(path, sizeof(path), "%s/models", dir);
    if (mkdir(path, 0700) != 0)
        kt_fatalx("mkdir %s: %s", path, strerror(errno));
    write_file("token", "fuzz-token-0123456789abcdef\n");
    snprintf(path, sizeof(path), "%s/token", dir);
    chmod(path, 0600);
    snprintf(conf, sizeof(conf),
             "{\"listen\": \"127.0.0.1:0\", \"token_file\": \"%s/token\",\n"
             " \"database\": \"%s/tune.db\", \"log_dir\": \"%s\",\n"
             " \"model_dir\": \"%s/models\", \"local_workers\": 0,\n"
             " \"control_socket\": \"%s/daemon.sock\"}\n",
             dir, dir, dir, dir, dir);
    write_file("kerntuned.json", conf);
    write_model("fz_a", "fz", 8);
    write_model("fz_b", "fz", 12);
    write_model("fz_c", "other", 16);
    write_file("models/fz_bad.json", "{\"name\": \"fz_bad\", \"tasks\": 3}\n");
    snprintf(path, sizeof(path), "%s/kerntuned.json", dir);
    if (kt_daemon_conf_load(path, &d.conf, err, sizeof(err)) != KT_OK)
        kt_fatalx("%s", err);
    d.started = kt_now();
    uv_loop_init(&d.loop);
    if (kt__daemon_open(&d, &token, err, sizeof(err)) != KT_OK)
        kt_fatalx("kt__daemon_open: %s", err);
    start_worker();
    kt__daemon_scan_models(&d);
    if (kt__daemon_running_jobs(&d) != NJOBS)
        kt_fatalx("%d jobs started, want %d", kt__daemon_running_jobs(&d),
                  NJOBS);
}

/* The worker and the files go; the daemon's threads may still search. */
static void
remove_dir(void)
{
    char cmd[128];

    if (worker_pid > 0) {
        kill(worker_pid, SIGTERM);
        waitpid(worker_pid, NULL, 0);
    }

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz_ctl: could not remove %s\n", dir);
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
    atexit(remove_dir);
    open_daemon();
    /* The daemon's own socket serves too; this one checks the contract. */
    if (kt_ctl_new(&ctl, &d.loop, sock_path, handler, &d, err, sizeof(err)) != 0)
        kt_fatalx("kt_ctl_new: %s", err);
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
        uv_run(&d.loop, UV_RUN_NOWAIT);
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
            p[1].fd = uv_backend_fd(&d.loop);
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

/* A new client gets the daemon's status, and every connection gets
 * closed. */
static void
check_still_serving(void)
{
    static const char probe[] = "{\"cmd\":\"status\",\"id\":7}\n";
    struct kt_buf out;
    const char *state;
    cJSON *r;
    unsigned clients = 1;

    kt_buf_init(&out);
    exchange(probe, strlen(probe), &out);
    r = cJSON_Parse(out.p != NULL ? out.p : "");
    state = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "state"));
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")) ||
        cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(r, "id")) != 7 ||
        cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(r, "jobs")) !=
            NJOBS ||
        state == NULL || strcmp(state, "running") != 0) {
        fprintf(stderr, "the daemon no longer answers: %s\n", out.p);
        abort();
    }
    cJSON_Delete(r);
    kt_buf_free(&out);
    while (clients > 0) {
        uv_run(&d.loop, UV_RUN_NOWAIT);
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
    if (getenv("KT_FUZZ_SHOW") != NULL && out.p != NULL) /* for a seed */
        fputs(out.p, stderr);
    if (oversize ? got > want : got != want) {
        fprintf(stderr, "%zu responses for %zu requests\n", got, want);
        abort();
    }
    kt_buf_free(&out);
    free(amplified);
    check_still_serving();
    return 0;
}
