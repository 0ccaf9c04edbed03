/* ctl.c - the control socket server: a Unix stream socket on the daemon's
 * libuv loop, one JSON request per line in, one JSON response per line
 * out, answered synchronously by the engine's handler.  The protocol is in
 * docs/daemon.md; the blocking client is in ctl_client.c. */
#define _GNU_SOURCE /* struct ucred, SO_PEERCRED */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/ctl_int.h"
#include "daemon/daemon.h"

#define CTL_MAX_CLIENTS 64
#define CTL_READ_CHUNK 65536

struct ctl_client {
    uv_pipe_t pipe; /* pipe.data == this */
    struct kt_ctl *ctl;
    struct ctl_client *prev, *next;
    struct kt_buf in; /* bytes of the unfinished line */
    char peer[64];    /* "pid 123 uid 1000", for log lines */
    int closing;
};

struct kt_ctl {
    uv_loop_t *loop;
    uv_pipe_t server;
    char *path;
    dev_t dev; /* identity of the socket file we bound */
    ino_t ino;
    kt_ctl_handler_fn fn;
    void *arg;
    struct ctl_client *clients;
    int nhandles; /* open handles; c is freed when 0 */
    int closing;
    unsigned nclients, nrequests, nrejected;
    char rbuf[CTL_READ_CHUNK];
};

struct ctl_write {
    uv_write_t req;
    char *text;
};

static void
maybe_free(struct kt_ctl *c)
{
    if (!c->closing || c->nhandles > 0)
        return;
    free(c->path);
    free(c);
}

static void
client_closed(uv_handle_t *h)
{
    struct ctl_client *cl = h->data;
    struct kt_ctl *c = cl->ctl;

    if (cl->prev != NULL)
        cl->prev->next = cl->next;
    else
        c->clients = cl->next;
    if (cl->next != NULL)
        cl->next->prev = cl->prev;
    c->nclients--;
    kt_buf_free(&cl->in);
    free(cl);
    c->nhandles--;
    maybe_free(c);
}

static void
client_close(struct ctl_client *cl)
{
    if (cl->closing)
        return;
    cl->closing = 1;
    uv_close((uv_handle_t *)&cl->pipe, client_closed);
}

static void
write_done(uv_write_t *req, int status)
{
    struct ctl_write *w = (struct ctl_write *)req;
    struct ctl_client *cl = req->handle->data;

    if (status < 0 && status != UV_ECANCELED && !cl->closing) {
        log_info("ctl: %s: write failed: %s", cl->peer, uv_strerror(status));
        client_close(cl);
    }
    free(w->text);
    free(w);
}

/* Queues text + '\n' to the client; takes ownership of text. */
static void
client_send(struct ctl_client *cl, char *text)
{
    struct ctl_write *w = kt_xmalloc(sizeof(*w));
    size_t n = strlen(text);
    uv_buf_t buf;
    int rc;

    w->text = kt_xrealloc(text, n + 2);
    w->text[n] = '\n';
    w->text[n + 1] = '\0';
    buf = uv_buf_init(w->text, (unsigned)(n + 1));
    rc = uv_write(&w->req, (uv_stream_t *)&cl->pipe, &buf, 1, write_done);
    if (rc < 0) {
        log_info("ctl: %s: write failed: %s", cl->peer, uv_strerror(rc));
        free(w->text);
        free(w);
        client_close(cl);
        return;
    }
    if (uv_stream_get_write_queue_size((uv_stream_t *)&cl->pipe) >
        KT_CTL_MAX_BACKLOG) {
        log_warnx("ctl: %s: more than %d bytes of responses unread, closing",
                  cl->peer, KT_CTL_MAX_BACKLOG);
        client_close(cl);
    }
}

void
kt_ctl_fail(cJSON *response, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (cJSON_GetObjectItemCaseSensitive(response, "ok") != NULL)
        cJSON_ReplaceItemInObjectCaseSensitive(response, "ok",
                                               cJSON_CreateFalse());
    else
        cJSON_AddFalseToObject(response, "ok");
    if (cJSON_GetObjectItemCaseSensitive(response, "error") != NULL)
        cJSON_ReplaceItemInObjectCaseSensitive(response, "error",
                                               cJSON_CreateString(msg));
    else
        cJSON_AddStringToObject(response, "error", msg);
}

/* Sends {"ok":false,"error":msg} (and "cmd" when known). */
static void
send_error(struct ctl_client *cl, const char *cmd, const char *msg)
{
    cJSON *r = cJSON_CreateObject();
    char *text;

    cJSON_AddFalseToObject(r, "ok");
    if (cmd != NULL)
        cJSON_AddStringToObject(r, "cmd", cmd);
    cJSON_AddStringToObject(r, "error", msg);
    text = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    client_send(cl, text);
}

/* Handles one complete request line (NUL terminated, no '\n'). */
static void
handle_line(struct ctl_client *cl, char *line, size_t len)
{
    struct kt_ctl *c = cl->ctl;
    const char *end = NULL;
    const cJSON *cmd, *id, *ok, *error;
    cJSON *req, *resp;
    char msg[160];
    char *text;
    size_t i;

    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' ||
                       line[len - 1] == '\t'))
        line[--len] = '\0';
    for (i = 0; i < len && (line[i] == ' ' || line[i] == '\t'); i++)
        ;
    if (i == len)
        return; /* blank lines are allowed between requests */

    req = cJSON_ParseWithOpts(line, &end, 1);
    if (req == NULL) {
        long col = end != NULL && end >= line ? (long)(end - line) + 1 : 0;
        c->nrejected++;
        log_warnx("ctl: %s: malformed JSON request at column %ld", cl->peer,
                  col);
        snprintf(msg, sizeof(msg), "malformed JSON at column %ld", col);
        send_error(cl, NULL, msg);
        return;
    }
    cmd = cJSON_GetObjectItemCaseSensitive(req, "cmd");
    if (!cJSON_IsObject(req) || !cJSON_IsString(cmd) ||
        cmd->valuestring[0] == '\0') {
        c->nrejected++;
        log_warnx("ctl: %s: request without a string \"cmd\"", cl->peer);
        send_error(cl, NULL,
                   "a request is a JSON object with a string "
                   "\"cmd\"");
        cJSON_Delete(req);
        return;
    }

    resp = cJSON_CreateObject();
    cJSON_AddTrueToObject(resp, "ok");
    cJSON_AddStringToObject(resp, "cmd", cmd->valuestring);
    id = cJSON_GetObjectItemCaseSensitive(req, "id");
    if (id != NULL)
        cJSON_AddItemToObject(resp, "id", cJSON_Duplicate(id, 1));
    c->fn(c->arg, req, resp);
    ok = cJSON_GetObjectItemCaseSensitive(resp, "ok");
    error = cJSON_GetObjectItemCaseSensitive(resp, "error");
    if (ok == NULL)
        cJSON_AddBoolToObject(resp, "ok", error == NULL);
    else if (error != NULL && cJSON_IsTrue(ok))
        cJSON_ReplaceItemInObjectCaseSensitive(resp, "ok", cJSON_CreateFalse());
    text = cJSON_PrintUnformatted(resp);
    cJSON_Delete(resp);
    c->nrequests++;
    if (text == NULL || strlen(text) > KT_CTL_MAX_RESPONSE) {
        log_warnx("ctl: %s: response to \"%s\" over %d bytes, not sent",
                  cl->peer, cmd->valuestring, KT_CTL_MAX_RESPONSE);
        free(text);
        send_error(cl, cmd->valuestring, "response too large");
    } else {
        client_send(cl, text);
    }
    cJSON_Delete(req);
}

static void
reject_oversize(struct ctl_client *cl)
{
    char msg[96];

    cl->ctl->nrejected++;
    log_warnx("ctl: %s: request line over %d bytes, closing the connection",
              cl->peer, KT_CTL_MAX_LINE);
    snprintf(msg, sizeof(msg), "request line over %d bytes", KT_CTL_MAX_LINE);
    send_error(cl, NULL, msg);
    client_close(cl);
}

static void
alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct ctl_client *cl = h->data;

    (void)suggested;
    *buf = uv_buf_init(cl->ctl->rbuf, sizeof(cl->ctl->rbuf));
}

static void
read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct ctl_client *cl = s->data;
    size_t off = 0;
    char *nl;

    if (nread < 0) {
        if (nread != UV_EOF)
            log_info("ctl: %s: read failed: %s", cl->peer,
                     uv_strerror((int)nread));
        else if (cl->in.len > 0)
            log_warnx("ctl: %s: closed the connection in the middle of a "
                      "request (%zu bytes dropped)",
                      cl->peer, cl->in.len);
        client_close(cl);
        return;
    }
    if (nread == 0 || cl->closing)
        return;
    kt_buf_put(&cl->in, buf->base, (size_t)nread);
    while (!cl->closing &&
           (nl = memchr(cl->in.p + off, '\n', cl->in.len - off)) != NULL) {
        size_t len = (size_t)(nl - (cl->in.p + off));
        if (len > KT_CTL_MAX_LINE) {
            reject_oversize(cl);
            return;
        }
        *nl = '\0';
        handle_line(cl, cl->in.p + off, len);
        off += len + 1;
    }
    if (cl->closing)
        return;
    if (off > 0) {
        memmove(cl->in.p, cl->in.p + off, cl->in.len - off);
        cl->in.len -= off;
        cl->in.p[cl->in.len] = '\0';
    }
    if (cl->in.len > KT_CTL_MAX_LINE)
        reject_oversize(cl);
}

static void
describe_peer(struct ctl_client *cl)
{
    struct ucred uc;
    socklen_t len = sizeof(uc);
    uv_os_fd_t fd;

    snprintf(cl->peer, sizeof(cl->peer), "client");
    if (uv_fileno((uv_handle_t *)&cl->pipe, &fd) == 0 &&
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) == 0)
        snprintf(cl->peer, sizeof(cl->peer), "pid %ld uid %ld", (long)uc.pid,
                 (long)uc.uid);
}

static void
on_connection(uv_stream_t *server, int status)
{
    struct kt_ctl *c = server->data;
    struct ctl_client *cl;
    int rc;

    if (status < 0) {
        log_warnx("ctl: accept on %s failed: %s", c->path, uv_strerror(status));
        return;
    }
    cl = kt_xcalloc(1, sizeof(*cl));
    cl->ctl = c;
    kt_buf_init(&cl->in);
    uv_pipe_init(c->loop, &cl->pipe, 0);
    cl->pipe.data = cl;
    c->nhandles++;
    c->nclients++;
    cl->next = c->clients;
    if (c->clients != NULL)
        c->clients->prev = cl;
    c->clients = cl;
    rc = uv_accept(server, (uv_stream_t *)&cl->pipe);
    if (rc < 0) {
        log_warnx("ctl: accept on %s failed: %s", c->path, uv_strerror(rc));
        client_close(cl);
        return;
    }
    describe_peer(cl);
    if (c->nclients > CTL_MAX_CLIENTS) {
        log_warnx("ctl: %s: more than %d clients, closing", cl->peer,
                  CTL_MAX_CLIENTS);
        client_close(cl);
        return;
    }
    rc = uv_read_start((uv_stream_t *)&cl->pipe, alloc_cb, read_cb);
    if (rc < 0) {
        log_warnx("ctl: %s: read failed: %s", cl->peer, uv_strerror(rc));
        client_close(cl);
    }
}

int
kt__ctl_socket(const char *path, struct sockaddr_un *sa, char *err,
               size_t errlen)
{
    int fd;

    if (strlen(path) >= sizeof(sa->sun_path))
        return kt_seterr(err, errlen, KT_EINVAL,
                         "control socket %s: path "
                         "too long",
                         path);
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return kt_seterr(err, errlen, -errno, "socket: %s", strerror(errno));
    return fd;
}

/* Returns 0 when path is free (absent, or a stale socket now removed). */
static int
clear_stale(const char *path, char *err, size_t errlen)
{
    struct sockaddr_un sa;
    struct stat st;
    int fd, rc, e;

    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        return kt_seterr(err, errlen, -errno, "control socket %s: %s", path,
                         strerror(errno));
    }
    if (!S_ISSOCK(st.st_mode))
        return kt_seterr(err, errlen, -EEXIST,
                         "control socket %s: exists "
                         "and is not a socket; not removing it",
                         path);
    if ((fd = kt__ctl_socket(path, &sa, err, errlen)) < 0)
        return fd;
    rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    e = errno;
    close(fd);
    if (rc == 0 || e == EAGAIN)
        return kt_seterr(err, errlen, -EADDRINUSE,
                         "another kerntuned is "
                         "listening on %s",
                         path);
    if (e != ECONNREFUSED)
        return kt_seterr(err, errlen, -e, "control socket %s: %s", path,
                         strerror(e));
    if (unlink(path) != 0 && errno != ENOENT)
        return kt_seterr(err, errlen, -errno,
                         "removing stale control "
                         "socket %s: %s",
                         path, strerror(errno));
    log_info("ctl: removed stale control socket %s", path);
    return 0;
}

/* Binds and listens on path with mode 0600; returns the fd or -errno. */
static int
bind_socket(const char *path, char *err, size_t errlen)
{
    struct sockaddr_un sa;
    mode_t old;
    int fd, rc;

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return kt_seterr(err, errlen, -errno, "socket: %s", strerror(errno));
    /* The umask is process-wide: call this before starting other threads
     * that create files (kerntuned does, at startup). */
    old = umask(0177);
    rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (rc != 0) {
        rc = kt_seterr(err, errlen, -errno, "control socket %s: bind: %s", path,
                       strerror(errno));
        close(fd);
        return rc;
    }
    if (chmod(path, 0600) != 0 || listen(fd, 16) != 0) {
        rc = kt_seterr(err, errlen, -errno, "control socket %s: %s", path,
                       strerror(errno));
        unlink(path);
        close(fd);
        return rc;
    }
    return fd;
}

static void
server_closed(uv_handle_t *h)
{
    struct kt_ctl *c = h->data;

    c->nhandles--;
    maybe_free(c);
}

int
kt_ctl_new(struct kt_ctl **out, uv_loop_t *loop, const char *path,
           kt_ctl_handler_fn fn, void *arg, char *err, size_t errlen)
{
    struct sockaddr_un sa;
    struct kt_ctl *c;
    struct stat st;
    int fd, rc;

    *out = NULL;
    if (path == NULL || path[0] == '\0' || fn == NULL)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "control socket: no path "
                         "or no handler");
    if (strlen(path) >= sizeof(sa.sun_path))
        return kt_seterr(err, errlen, KT_EINVAL,
                         "control socket %s: path "
                         "longer than %zu bytes",
                         path, sizeof(sa.sun_path) - 1);
    rc = clear_stale(path, err, errlen);
    if (rc < 0)
        return rc;
    fd = bind_socket(path, err, errlen);
    if (fd < 0)
        return fd;
    if (stat(path, &st) != 0) {
        rc = kt_seterr(err, errlen, -errno, "control socket %s: %s", path,
                       strerror(errno));
        close(fd);
        return rc;
    }

    c = kt_xcalloc(1, sizeof(*c));
    c->loop = loop;
    c->path = kt_xstrdup(path);
    c->dev = st.st_dev;
    c->ino = st.st_ino;
    c->fn = fn;
    c->arg = arg;
    uv_pipe_init(loop, &c->server, 0);
    c->server.data = c;
    c->nhandles = 1;
    rc = uv_pipe_open(&c->server, fd);
    if (rc < 0)
        close(fd); /* not owned by the handle */
    else
        rc = uv_listen((uv_stream_t *)&c->server, 16, on_connection);
    if (rc < 0) {
        kt_seterr(err, errlen, rc, "control socket %s: %s", path,
                  uv_strerror(rc));
        kt_ctl_close(c); /* run the loop to finish closing */
        return rc;
    }
    log_info("ctl: listening on %s", path);
    *out = c;
    return 0;
}

void
kt_ctl_close(struct kt_ctl *c)
{
    struct ctl_client *cl;
    struct stat st;

    if (c == NULL || c->closing)
        return;
    c->closing = 1;
    /* Remove the file only if it is still ours: a newer daemon may have
     * replaced it. */
    if (stat(c->path, &st) == 0 && st.st_dev == c->dev && st.st_ino == c->ino)
        unlink(c->path);
    for (cl = c->clients; cl != NULL; cl = cl->next)
        client_close(cl);
    uv_close((uv_handle_t *)&c->server, server_closed);
}

void
kt_ctl_counters(const struct kt_ctl *c, unsigned *clients, unsigned *requests,
                unsigned *rejected)
{
    if (clients != NULL)
        *clients = c->nclients;
    if (requests != NULL)
        *requests = c->nrequests;
    if (rejected != NULL)
        *rejected = c->nrejected;
}
