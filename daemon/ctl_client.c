/* ctl_client.c - the blocking side of the control socket, for the kerntune
 * CLI: send one request line, wait (bounded) for one response line, and
 * render responses as tables. */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/ctl_int.h"
#include "daemon/daemon.h"

/* Milliseconds left until deadline (kt_now seconds), at least 0. */
static int
left_ms(double deadline)
{
    double d = (deadline - kt_now()) * 1000.0;
    return d <= 0 ? 0 : (int)d + 1;
}

static int
wait_fd(int fd, short ev, double deadline)
{
    struct pollfd p;
    int rc;

    p.fd = fd;
    p.events = ev;
    for (;;) {
        int ms = left_ms(deadline);
        if (ms == 0)
            return KT_ETIMEDOUT;
        rc = poll(&p, 1, ms);
        if (rc > 0)
            return 0;
        if (rc < 0 && errno != EINTR)
            return -errno;
    }
}

static int
connect_path(const char *path, int timeout_ms, char *err, size_t errlen)
{
    struct sockaddr_un sa;
    struct timeval tv;
    int fd, rc;

    if ((fd = kt__ctl_socket(path, &sa, err, errlen)) < 0)
        return fd;
    /* A Unix connect waits for room in the listen backlog for at most the
     * send timeout. */
    tv.tv_sec = timeout_ms / 1000;
    tv.tv_usec = (timeout_ms % 1000) * 1000;
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int e = errno;
        close(fd);
        if (e == EAGAIN || e == EINPROGRESS)
            return kt_seterr(err, errlen, KT_ETIMEDOUT,
                             "control socket %s:"
                             " connect timed out",
                             path);
        if (e == ENOENT || e == ECONNREFUSED)
            return kt_seterr(err, errlen, -e,
                             "control socket %s: %s (is "
                             "kerntuned running?)",
                             path, strerror(e));
        return kt_seterr(err, errlen, -e, "control socket %s: %s", path,
                         strerror(e));
    }
    rc = fcntl(fd, F_GETFL);
    if (rc < 0 || fcntl(fd, F_SETFL, rc | O_NONBLOCK) < 0) {
        rc = kt_seterr(err, errlen, -errno, "fcntl: %s", strerror(errno));
        close(fd);
        return rc;
    }
    return fd;
}

int
kt_ctl_request_timeout(const char *path, const char *request_json,
                       int timeout_ms, char **response_json, char *err,
                       size_t errlen)
{
    double deadline = kt_now() + timeout_ms / 1000.0;
    struct kt_buf in;
    const char *end = NULL;
    char *line = NULL, *nl;
    cJSON *req;
    size_t off = 0, len;
    int fd = -1, rc = 0;

    *response_json = NULL;
    kt_buf_init(&in);
    if (timeout_ms <= 0)
        return kt_seterr(err, errlen, KT_EINVAL, "timeout must be > 0");
    req = cJSON_ParseWithOpts(request_json, &end, 1);
    if (!cJSON_IsObject(req)) {
        rc = kt_seterr(err, errlen, KT_EPARSE,
                       "request is not a JSON "
                       "object (column %ld)",
                       end != NULL ? (long)(end - request_json) + 1 : 0L);
        goto out;
    }
    line = cJSON_PrintUnformatted(req);
    len = strlen(line);
    line = kt_xrealloc(line, len + 2);
    line[len++] = '\n';
    line[len] = '\0';

    fd = connect_path(path, timeout_ms, err, errlen);
    if (fd < 0) {
        rc = fd;
        goto out;
    }
    while (off < len) {
        ssize_t n = send(fd, line + off, len - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
            rc = kt_seterr(err, errlen, -errno,
                           "control socket %s: send: "
                           "%s",
                           path, strerror(errno));
            goto out;
        }
        rc = wait_fd(fd, POLLOUT, deadline);
        if (rc < 0) {
            kt_seterr(err, errlen, rc,
                      "control socket %s: sending the "
                      "request: %s",
                      path, kt_strerror(rc));
            goto out;
        }
    }
    for (;;) {
        char chunk[4096];
        ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
        if (n > 0) {
            kt_buf_put(&in, chunk, (size_t)n);
            nl = memchr(in.p, '\n', in.len);
            if (nl != NULL) {
                *nl = '\0';
                in.len = (size_t)(nl - in.p);
                break;
            }
            if (in.len > KT_CTL_MAX_RESPONSE) {
                rc = kt_seterr(err, errlen, KT_ETOOBIG,
                               "control socket %s: "
                               "response over %d bytes",
                               path, KT_CTL_MAX_RESPONSE);
                goto out;
            }
            continue;
        }
        if (n == 0) {
            rc = kt_seterr(err, errlen, KT_EPROTO,
                           "control socket %s: the "
                           "daemon closed the connection %s",
                           path,
                           in.len ? "in the middle of a response"
                                  : "without answering");
            goto out;
        }
        if (errno != EAGAIN && errno != EINTR) {
            rc = kt_seterr(err, errlen, -errno,
                           "control socket %s: recv: "
                           "%s",
                           path, strerror(errno));
            goto out;
        }
        rc = wait_fd(fd, POLLIN, deadline);
        if (rc < 0) {
            kt_seterr(err, errlen, rc,
                      "control socket %s: no response "
                      "within %d ms",
                      path, timeout_ms);
            goto out;
        }
    }
    *response_json = kt_buf_take(&in);
out:
    if (fd >= 0)
        close(fd);
    free(line);
    cJSON_Delete(req);
    kt_buf_free(&in);
    return rc;
}

int
kt_ctl_request(const char *path, const char *request_json, char **response_json,
               char *err, size_t errlen)
{
    return kt_ctl_request_timeout(path, request_json, KT_CTL_TIMEOUT_MS,
                                  response_json, err, errlen);
}

cJSON *
kt_ctl_ask(const char *path, const char *cmd, const char *job, char *err,
           size_t errlen)
{
    cJSON *req = cJSON_CreateObject(), *r;
    char *text, *resp = NULL;
    int rc;

    cJSON_AddStringToObject(req, "cmd", cmd);
    if (job != NULL)
        cJSON_AddStringToObject(req, "job", job);
    text = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    rc = kt_ctl_request(path, text, &resp, err, errlen);
    cJSON_free(text);
    if (rc != KT_OK)
        return NULL;
    r = cJSON_Parse(resp);
    free(resp);
    if (r == NULL)
        snprintf(err, errlen, "the daemon sent malformed JSON");
    return r;
}

const char *
kt_ctl_error(const cJSON *r)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");

    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "ok")))
        return NULL;
    return cJSON_IsString(e) ? e->valuestring : "request failed";
}

/* ---- rendering ------------------------------------------------------------ */

enum col_kind { COL_STR, COL_INT, COL_MS, COL_F2, COL_S, COL_PCT, COL_ETA };

struct col {
    const char *field;
    const char *head;
    int kind;
};

/* Text of one cell: "-" for missing/null/negative numbers. */
static void
cell(char *out, size_t n, const cJSON *obj, const struct col *c)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, c->field);

    snprintf(out, n, "-");
    if (cJSON_IsString(v)) {
        snprintf(out, n, "%s", v->valuestring);
    } else if (cJSON_IsBool(v)) {
        snprintf(out, n, "%s", cJSON_IsTrue(v) ? "yes" : "no");
    } else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (c->kind != COL_INT && c->kind != COL_STR && d < 0)
            return;
        switch (c->kind) {
        case COL_MS: snprintf(out, n, "%.3f", d); break;
        case COL_F2: snprintf(out, n, "%.2f", d); break;
        case COL_S: snprintf(out, n, "%.0f", d); break;
        case COL_PCT: snprintf(out, n, "%.1f%%", d); break;
        case COL_ETA:
            if (d == 0)
                snprintf(out, n, "done");
            else
                kt_duration_format(out, n, d);
            break;
        default: snprintf(out, n, "%.15g", d); break;
        }
    }
}

/* Prints the objects of arr as a table with the given columns; numbers
 * are right-aligned, text left-aligned. */
static void
print_table(FILE *out, const cJSON *arr, const struct col *cols, int ncol)
{
    size_t w[16];
    char text[256];
    const cJSON *row;
    size_t total = 1;
    int i;

    for (i = 0; i < ncol; i++)
        w[i] = strlen(cols[i].head);
    cJSON_ArrayForEach (row, arr) {
        for (i = 0; i < ncol; i++) {
            cell(text, sizeof(text), row, &cols[i]);
            if (strlen(text) > w[i])
                w[i] = strlen(text);
        }
    }
    for (i = 0; i < ncol; i++) {
        fprintf(out, "| %-*s ", (int)w[i], cols[i].head);
        total += w[i] + 3;
    }
    fprintf(out, "|\n");
    for (i = 0; (size_t)i < total; i++)
        fputc('-', out);
    fputc('\n', out);
    cJSON_ArrayForEach (row, arr) {
        for (i = 0; i < ncol; i++) {
            cell(text, sizeof(text), row, &cols[i]);
            if (cols[i].kind == COL_STR)
                fprintf(out, "| %-*s ", (int)w[i], text);
            else
                fprintf(out, "| %*s ", (int)w[i], text);
        }
        fprintf(out, "|\n");
    }
    for (i = 0; (size_t)i < total; i++)
        fputc('-', out);
    fputc('\n', out);
}

/* "key: value" for every scalar member except ok/cmd/id; nested objects
 * with a dotted prefix; arrays by their length. */
static void
print_kv(FILE *out, const cJSON *obj, const char *prefix)
{
    const cJSON *v;
    char *s;

    cJSON_ArrayForEach (v, obj) {
        if (prefix[0] == '\0' &&
            (strcmp(v->string, "ok") == 0 || strcmp(v->string, "cmd") == 0 ||
             strcmp(v->string, "id") == 0))
            continue;
        if (cJSON_IsObject(v)) {
            char p[128];
            snprintf(p, sizeof(p), "%s%s.", prefix, v->string);
            print_kv(out, v, p);
        } else if (cJSON_IsArray(v)) {
            fprintf(out, "%s%s: %d entries\n", prefix, v->string,
                    cJSON_GetArraySize(v));
        } else if (cJSON_IsString(v)) {
            fprintf(out, "%s%s: %s\n", prefix, v->string, v->valuestring);
        } else {
            s = cJSON_PrintUnformatted(v);
            fprintf(out, "%s%s: %s\n", prefix, v->string, s ? s : "?");
            cJSON_free(s);
        }
    }
}

/* After a table: "<label> <key>: <text>" for each row that has a string
 * member field (long values that do not fit in a column). */
static void
print_notes(FILE *out, const cJSON *arr, const char *key, const char *field,
            const char *label)
{
    const cJSON *row;

    cJSON_ArrayForEach (row, arr) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(row, key);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, field);
        if (!cJSON_IsString(v) || v->valuestring[0] == '\0')
            continue;
        if (cJSON_IsString(k))
            fprintf(out, "%s %s: %s\n", label, k->valuestring, v->valuestring);
        else
            fprintf(out, "%s %.15g: %s\n", label,
                    cJSON_IsNumber(k) ? k->valuedouble : -1.0, v->valuestring);
    }
}

static double
num(const cJSON *o, const char *k, double def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static const char *
str(const cJSON *o, const char *k, const char *def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : def;
}

void
kt_ctl_add_progress(cJSON *o, int64_t trials, int64_t budget, int64_t resumed,
                    double elapsed_s)
{
    struct kt_progress p;

    kt_progress_compute(&p, trials, budget, resumed, elapsed_s);
    cJSON_AddNumberToObject(o, "trials_target", (double)budget);
    cJSON_AddNumberToObject(o, "percent", p.percent);
    cJSON_AddNumberToObject(o, "eta_s", p.eta_s);
}

/* The task table in the log's layout (daemon.h, kt_tasklog_format_table). */
static void
print_tasks(FILE *out, const cJSON *r)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(r, "tasks");
    struct kt_tasklog_table t;
    struct kt_tasklog_task *rows;
    const cJSON *o;
    struct kt_buf b;
    int i = 0, n = cJSON_GetArraySize(arr);

    rows = kt_xcalloc((size_t)n + 1, sizeof(*rows));
    cJSON_ArrayForEach (o, arr) {
        rows[i].id = (int)num(o, "id", i);
        rows[i].name = str(o, "name", NULL);
        rows[i].weight = num(o, "weight", 1);
        rows[i].latency_ms = num(o, "latency_ms", -1);
        rows[i].gflops = num(o, "gflops", -1);
        rows[i].trials = (int64_t)num(o, "trials", 0);
        rows[i].errors = (int64_t)num(o, "errors", 0);
        i++;
    }
    t.ntasks = i;
    t.tasks = rows;
    t.total_latency_ms = num(r, "total_latency_ms", -1);
    t.trials = (int64_t)num(r, "trials", 0);
    t.used_s = num(r, "used_s", 0);
    t.next_id = (int)num(r, "next_id", -1);
    t.budget = (int64_t)num(r, "trials_target", 0);
    t.eta_s = num(r, "eta_s", -1);
    kt_buf_init(&b);
    if (str(r, "job", NULL) != NULL)
        kt_buf_printf(&b, "job %s\n", str(r, "job", ""));
    kt_tasklog_format_table(&b, &t, 0);
    fputs(b.p, out);
    kt_buf_free(&b);
    free(rows);
}

int
kt_ctl_print(FILE *out, const char *cmd, const cJSON *r)
{
    static const struct col jobs[] = {
        {"name", "Job", COL_STR},
        {"state", "State", COL_STR},
        {"tasks", "Tasks", COL_INT},
        {"trials", "Trials", COL_INT},
        {"trials_target", "Target", COL_INT},
        {"percent", "Done", COL_PCT},
        {"eta_s", "ETA", COL_ETA},
        {"errors", "Errors", COL_INT},
        {"total_latency_ms", "Latency (ms)", COL_MS},
        {"used_s", "Used (s)", COL_S},
        {"key", "Key", COL_STR},
    };
    static const struct col best[] = {
        {"id", "ID", COL_INT},
        {"name", "Task", COL_STR},
        {"latency_ms", "Latency (ms)", COL_MS},
        {"gflops", "Speed (GFLOPS)", COL_F2},
        {"trials", "Trials", COL_INT},
        {"errors", "Errors", COL_INT},
    };
    static const struct col workers[] = {
        {"key", "Key", COL_STR},      {"name", "Worker", COL_STR},
        {"addr", "Address", COL_STR}, {"state", "State", COL_STR},
        {"done", "Done", COL_INT},
    };
    static const struct col queues[] = {
        {"key", "Key", COL_STR},         {"workers", "Workers", COL_INT},
        {"free", "Free", COL_INT},       {"pending", "Pending", COL_INT},
        {"running", "Running", COL_INT},
    };
    const cJSON *ok = cJSON_GetObjectItemCaseSensitive(r, "ok");
    const cJSON *arr;
    char *s;

    if (!cJSON_IsObject(r)) {
        fprintf(out, "error: the response is not a JSON object\n");
        return KT_EPROTO;
    }
    if (!cJSON_IsTrue(ok)) {
        fprintf(out, "error: %s\n", str(r, "error", "request failed"));
        return KT_EINVAL;
    }
    if (strcmp(cmd, "status") == 0) {
        print_kv(out, r, "");
    } else if (strcmp(cmd, "jobs") == 0 &&
               cJSON_IsArray(
                   arr = cJSON_GetObjectItemCaseSensitive(r, "jobs"))) {
        print_table(out, arr, jobs, (int)KT_ARRAY_LEN(jobs));
        print_notes(out, arr, "name", "error", "error");
    } else if (strcmp(cmd, "tasks") == 0 &&
               cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(r, "tasks"))) {
        print_tasks(out, r);
    } else if (strcmp(cmd, "best") == 0 &&
               cJSON_IsArray(
                   arr = cJSON_GetObjectItemCaseSensitive(r, "best"))) {
        if (str(r, "job", NULL) != NULL)
            fprintf(out, "job %s\n", str(r, "job", ""));
        print_table(out, arr, best, (int)KT_ARRAY_LEN(best));
        print_notes(out, arr, "id", "config", "schedule");
    } else if (strcmp(cmd, "pause") == 0 || strcmp(cmd, "resume") == 0) {
        fprintf(out, "job %s: %s\n", str(r, "job", "?"),
                str(r, "state",
                    strcmp(cmd, "pause") == 0 ? "paused" : "running"));
    } else if (strcmp(cmd, "rpc-status") == 0 &&
               cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(r, "workers"))) {
        fprintf(out, "Workers\n");
        print_table(out, cJSON_GetObjectItemCaseSensitive(r, "workers"),
                    workers, (int)KT_ARRAY_LEN(workers));
        arr = cJSON_GetObjectItemCaseSensitive(r, "queues");
        if (cJSON_IsArray(arr)) {
            fprintf(out, "\nQueues\n");
            print_table(out, arr, queues, (int)KT_ARRAY_LEN(queues));
        }
    } else {
        s = cJSON_Print(r);
        fprintf(out, "%s\n", s != NULL ? s : "?");
        cJSON_free(s);
    }
    return 0;
}
