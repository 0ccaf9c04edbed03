/* server.c - the kerntune-rpc worker loop: connect out to the tracker,
 * answer the token challenge, then serve build and run jobs in child
 * processes while sending heartbeats.  One poll(2) loop watches the tracker
 * socket and each child's pipe; deadlines kill the child's process group.
 * A lost tracker kills the children and reconnects with backoff. */
#include "measure/worker/worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define MAX_SLOTS 16
#define RESULT_MAX (256u * 1024)

enum { SLOT_FREE, SLOT_BUILD, SLOT_RUN };

struct slot {
    int kind;
    char id[64];
    pid_t pid;
    int fd;
    int eof;
    int timed_out;
    int timeout_ms;
    double start;
    double deadline;
    struct kt_buf out;
    size_t dropped;
    char dir[256];
};

struct srv {
    const struct kt_server_opts *o;
    int fd;
    char name[128];
    char tmp[256];
    struct kt_reader rd;
    struct slot slots[MAX_SLOTS];
    int nslots;
    double last_rx;
    double last_ping;
    unsigned long jobs_seen;
    struct kt_session sess; /* sealed frames once the tracker proved */
};

static volatile sig_atomic_t stop_flag;

static void
on_stop(int sig)
{
    (void)sig;
    stop_flag = 1;
}

int
kt_roles_parse(const char *s, int *roles, char *err, size_t errlen)
{
    char *dup = kt_xstrdup(s), *save = NULL, *w;
    int r = 0;

    for (w = strtok_r(dup, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        if (strcmp(w, "build") == 0)
            r |= KT_ROLE_BUILD;
        else if (strcmp(w, "run") == 0)
            r |= KT_ROLE_RUN;
        else {
            kt_seterr(err, errlen, KT_EINVAL,
                      "--roles: unknown role '%s' (want build, run)", w);
            free(dup);
            return KT_EINVAL;
        }
    }
    free(dup);
    if (r == 0)
        return kt_seterr(err, errlen, KT_EINVAL, "--roles: empty");
    *roles = r;
    return 0;
}

static void
slot_release(struct slot *s)
{
    if (s->fd >= 0)
        close(s->fd);
    if (s->dir[0])
        kt_rm_tree(s->dir);
    kt_buf_free(&s->out);
    memset(s, 0, sizeof(*s));
    s->fd = -1;
    s->kind = SLOT_FREE;
}

static void
slot_kill(struct slot *s)
{
    if (s->kind == SLOT_FREE)
        return;
    if (s->pid > 0) {
        (void)kill(-s->pid, SIGKILL);
        (void)kill(s->pid, SIGKILL);
        while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    slot_release(s);
}

static int
send_msg(struct srv *v, const struct kt_msg *m)
{
    int rc = kt_wire_send_sealed(v->fd, m, &v->sess.tx);
    if (rc < 0)
        log_warnx("rpc: send to tracker failed: %s", kt_strerror(rc));
    return rc;
}

static void
reply_error(struct srv *v, const char *id, const char *stage, int err_no,
            const char *text)
{
    struct kt_msg m;

    kt_msg_init(&m, "result");
    kt_msg_set(&m, "id", id);
    kt_msg_set(&m, "stage", stage);
    kt_msg_setf(&m, "err_no", "%d", err_no);
    kt_msg_set(&m, "err_text", text);
    (void)send_msg(v, &m);
    kt_msg_free(&m);
}

static struct slot *
slot_new(struct srv *v, int kind, const char *id, int timeout_ms)
{
    int i, busy = 0, building = 0;
    struct slot *s = NULL;

    for (i = 0; i < v->nslots; i++) {
        if (v->slots[i].kind == SLOT_FREE) {
            if (s == NULL)
                s = &v->slots[i];
        } else {
            busy++;
            building += v->slots[i].kind == SLOT_BUILD;
        }
    }
    /* Never time while anything else of ours runs, never build beside a
     * timing run. */
    if (s == NULL || (kind == SLOT_RUN && busy > 0) ||
        (kind == SLOT_BUILD && busy > building))
        return NULL;
    memset(s, 0, sizeof(*s));
    s->kind = kind;
    s->fd = -1;
    snprintf(s->id, sizeof(s->id), "%s", id);
    kt_buf_init(&s->out);
    s->timeout_ms = timeout_ms;
    s->start = kt_now();
    s->deadline = s->start + timeout_ms / 1000.0;
    if ((size_t)snprintf(s->dir, sizeof(s->dir), "%s/job%lu", v->tmp,
                         ++v->jobs_seen) >= sizeof(s->dir) ||
        mkdir(s->dir, 0700) < 0) {
        s->dir[0] = '\0';
        slot_release(s);
        return NULL;
    }
    return s;
}

static void
start_build(struct srv *v, const struct kt_msg *m, const char *id)
{
    char err[256];
    long long tmo;
    const char *cc = kt_msg_get(m, "cc");
    struct slot *s;

    if (!(v->o->roles & KT_ROLE_BUILD) || cc == NULL ||
        kt_msg_get_ll(m, "timeout_ms", 1, 0, 1, 3600000, &tmo, err,
                      sizeof(err)) < 0) {
        reply_error(v, id, "build", KT_MERR_UNKNOWN,
                    cc == NULL ? "build job without 'cc'"
                               : "worker has no build role or bad timeout");
        return;
    }
    s = slot_new(v, SLOT_BUILD, id, (int)tmo);
    if (s == NULL) {
        reply_error(v, id, "build", KT_MERR_UNKNOWN, "worker busy");
        return;
    }
    if (kt_build_start(s->dir, cc, m->payload, m->payload_len, &s->pid, &s->fd,
                       err, sizeof(err)) < 0) {
        reply_error(v, id, "build", KT_MERR_COMPILE_HOST, err);
        slot_release(s);
    }
}

static int
write_so(const char *path, const struct kt_msg *m)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
    int rc;

    if (fd < 0)
        return -errno;
    rc = kt_wire_write_all(fd, m->payload, m->payload_len);
    close(fd);
    return rc;
}

/* In the kernel's process: no core dumps (a crash is a normal outcome),
 * and no fork bomb beyond nproc tasks of our user. */
static void
limit_kernel(long nproc)
{
    struct rlimit rl = {0, 0};

    (void)setrlimit(RLIMIT_CORE, &rl);
    if (nproc > 0) {
        rl.rlim_cur = rl.rlim_max = (rlim_t)nproc;
        (void)setrlimit(RLIMIT_NPROC, &rl);
    }
}

static void
start_run(struct srv *v, const struct kt_msg *m, const char *id)
{
    struct kt_run_req r;
    char err[256], so[320];
    long long tmo, number, repeat, minms, cool, flush, thr, mem;
    double tol, seed, stop_above;
    int pfd[2];
    long nproc;
    struct slot *s;
    pid_t p;

    if (!(v->o->roles & KT_ROLE_RUN)) {
        reply_error(v, id, "run", KT_MERR_UNKNOWN, "worker has no run role");
        return;
    }
    if (kt_msg_get_ll(m, "timeout_ms", 1, 0, 1, 3600000, &tmo, err,
                      sizeof(err)) < 0 ||
        kt_msg_get_ll(m, "number", 0, 1, 1, 1000000000, &number, err,
                      sizeof(err)) < 0 ||
        kt_msg_get_ll(m, "repeat", 0, 3, 1, KT_RUN_MAX_REPEAT, &repeat, err,
                      sizeof(err)) < 0 ||
        kt_msg_get_ll(m, "min_repeat_ms", 0, 0, 0, 600000, &minms, err,
                      sizeof(err)) < 0 ||
        kt_msg_get_ll(m, "cooldown_ms", 0, 0, 0, 600000, &cool, err,
                      sizeof(err)) < 0 ||
        kt_msg_get_ll(m, "flush", 0, 0, 0, 1, &flush, err, sizeof(err)) < 0 ||
        kt_msg_get_ll(m, "threads", 0, 0, 0, 4096, &thr, err, sizeof(err)) < 0 ||
        kt_msg_get_ll(m, "mem_mb", 0, 2048, 0, 1LL << 30, &mem, err,
                      sizeof(err)) < 0 ||
        kt_msg_get_double(m, "tol", 0, 1e-4, 0, 1e300, &tol, err, sizeof(err)) <
            0 ||
        kt_msg_get_double(m, "seed", 0, 1, 0, 1.8e19, &seed, err, sizeof(err)) <
            0 ||
        kt_msg_get_double(m, "stop_above", 0, 0, 0, 1e9, &stop_above, err,
                          sizeof(err)) < 0) {
        reply_error(v, id, "run", KT_MERR_UNKNOWN, err);
        return;
    }
    if (m->payload_len == 0) {
        reply_error(v, id, "run", KT_MERR_UNKNOWN, "run job without a .so");
        return;
    }
    s = slot_new(v, SLOT_RUN, id, (int)tmo);
    if (s == NULL) {
        reply_error(v, id, "run", KT_MERR_UNKNOWN, "worker busy");
        return;
    }
    snprintf(so, sizeof(so), "%s/kernel.so", s->dir);
    if (write_so(so, m) < 0 || pipe(pfd) < 0) {
        reply_error(v, id, "run", KT_MERR_UNKNOWN, "cannot stage the .so");
        slot_release(s);
        return;
    }
    memset(&r, 0, sizeof(r));
    r.so_path = so;
    r.cache_dir = v->tmp;
    r.number = (int)number;
    r.repeat = (int)repeat;
    r.min_repeat_ms = (int)minms;
    r.cooldown_ms = (int)cool;
    r.flush = (int)flush;
    r.threads = (int)thr;
    r.seed = (uint64_t)seed;
    r.tol = tol;
    r.mem_mb = mem;
    r.stop_above = stop_above;
    nproc = kt_kernel_nproc_limit((int)thr);
    p = fork();
    if (p < 0) {
        close(pfd[0]);
        close(pfd[1]);
        reply_error(v, id, "run", KT_MERR_UNKNOWN, "fork failed");
        slot_release(s);
        return;
    }
    if (p == 0) {
        static const int sigs[] = {SIGSEGV, SIGBUS,  SIGFPE, SIGILL,
                                   SIGABRT, SIGTERM, SIGINT, SIGPIPE};
        struct kt_msg res;
        struct kt_buf b;
        size_t i;

        (void)setpgid(0, 0);
#ifdef __linux__
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        limit_kernel(nproc);
        for (i = 0; i < KT_ARRAY_LEN(sigs); i++)
            signal(sigs[i], SIG_DFL);
        close(v->fd);
        close(pfd[0]);
        kt_run_child(&r, &res);
        kt_buf_init(&b);
        kt_msg_encode(&res, &b);
        (void)kt_wire_write_all(pfd[1], b.p, b.len);
        _exit(0);
    }
    (void)setpgid(p, p);
    close(pfd[1]);
    (void)fcntl(pfd[0], F_SETFL, O_NONBLOCK);
    (void)fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
    s->pid = p;
    s->fd = pfd[0];
}

static void
finish_build(struct srv *v, struct slot *s, int status)
{
    struct kt_msg m;
    char so[320];

    kt_msg_init(&m, "result");
    kt_msg_set(&m, "id", s->id);
    kt_msg_set(&m, "stage", "build");
    kt_msg_setf(&m, "build_s", "%.6f", kt_now() - s->start);
    if (s->dropped)
        kt_buf_printf(&s->out,
                      "\n[... %zu more bytes of compiler output "
                      "dropped]",
                      s->dropped);
    if (s->timed_out) {
        kt_msg_setf(&m, "err_no", "%d", KT_MERR_BUILD_TIMEOUT);
        kt_msg_setf(&m, "err_text", "build exceeded its %d ms deadline",
                    s->timeout_ms);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        kt_msg_setf(&m, "err_no", "%d", KT_MERR_COMPILE_HOST);
        kt_msg_set(&m, "err_text",
                   s->out.len ? s->out.p : "compiler failed without output");
        if (WIFEXITED(status))
            kt_msg_setf(&m, "compiler_status", "%d", WEXITSTATUS(status));
        else
            kt_msg_set(&m, "signal", kt_signame(WTERMSIG(status)));
    } else {
        struct kt_buf data;
        int fd;
        snprintf(so, sizeof(so), "%s/kernel.so", s->dir);
        fd = open(so, O_RDONLY | O_CLOEXEC);
        kt_buf_init(&data);
        data.cap_limit = KT_WIRE_PAYLOAD_MAX;
        if (fd >= 0) {
            char chunk[65536];
            ssize_t n;
            while ((n = read(fd, chunk, sizeof(chunk))) > 0)
                kt_buf_put(&data, chunk, (size_t)n);
            close(fd);
        }
        if (fd < 0 || data.len == 0 || data.overflow) {
            kt_msg_setf(&m, "err_no", "%d", KT_MERR_COMPILE_HOST);
            kt_msg_set(&m, "err_text",
                       data.overflow
                           ? "shared object above the 64 MiB payload limit"
                           : "the compiler wrote no kernel.so");
        } else {
            kt_msg_set(&m, "err_no", "0");
            kt_msg_set_payload(&m, data.p, data.len);
            if (s->out.len)
                kt_msg_set(&m, "compiler_output", s->out.p);
        }
        kt_buf_free(&data);
    }
    (void)send_msg(v, &m);
    kt_msg_free(&m);
}

static void
finish_run(struct srv *v, struct slot *s, int status)
{
    struct kt_msg m, res;
    char err[256];
    size_t used;
    int i, got = 0;

    kt_msg_init(&m, "result");
    if (!s->timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
        kt_wire_take((unsigned char *)s->out.p, s->out.len, &used, &res, err,
                     sizeof(err)) == 1) {
        for (i = 0; i < res.nkv; i++)
            if (strcmp(res.keys[i], "type") != 0)
                kt_msg_set(&m, res.keys[i], res.vals[i]);
        kt_msg_free(&res);
        got = 1;
    }
    kt_msg_set(&m, "id", s->id);
    kt_msg_set(&m, "stage", "run");
    kt_msg_setf(&m, "run_s", "%.6f", kt_now() - s->start);
    if (s->timed_out) {
        kt_msg_setf(&m, "err_no", "%d", KT_MERR_RUN_TIMEOUT);
        kt_msg_setf(&m, "err_text", "run exceeded its %d ms deadline",
                    s->timeout_ms);
    } else if (WIFSIGNALED(status)) {
        kt_msg_setf(&m, "err_no", "%d", KT_MERR_RUNTIME_DEVICE);
        kt_msg_setf(&m, "err_text", "kernel process died of %s",
                    kt_signame(WTERMSIG(status)));
        kt_msg_set(&m, "signal", kt_signame(WTERMSIG(status)));
    } else if (!got) {
        kt_msg_setf(&m, "err_no", "%d", KT_MERR_RUNTIME_DEVICE);
        kt_msg_setf(&m, "err_text",
                    "runner exited with status %d and no "
                    "result",
                    WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    (void)send_msg(v, &m);
    kt_msg_free(&m);
    (void)kt_ref_cache_trim(v->tmp, KT_REF_CACHE_MAX);
}

/* Orphans a finished job left (they escaped its process group) are ours
 * as the subreaper: everything that is not a running job goes. */
static void
kill_strays(struct srv *v)
{
    pid_t keep[MAX_SLOTS];
    int i, n = 0;

    for (i = 0; i < v->nslots; i++)
        if (v->slots[i].kind != SLOT_FREE && v->slots[i].pid > 0)
            keep[n++] = v->slots[i].pid;
    if (kt_kill_strays(keep, n) > 0)
        log_info("rpc: killed what a finished job left running");
}

static void
slot_drain(struct slot *s)
{
    char chunk[8192];
    ssize_t n;

    while (!s->eof && (n = read(s->fd, chunk, sizeof(chunk))) != 0) {
        size_t lim = s->kind == SLOT_BUILD ? KT_BUILD_STDERR_MAX : RESULT_MAX;
        size_t room = s->out.len < lim ? lim - s->out.len : 0;
        size_t take;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return; /* EAGAIN: nothing more for now */
        }
        take = (size_t)n < room ? (size_t)n : room;
        kt_buf_put(&s->out, chunk, take);
        s->dropped += (size_t)n - take;
    }
    s->eof = 1;
}

/* Drains a child's pipe and reaps it; returns 1 when the slot finished.
 * The child's exit, not the pipe's EOF, ends the job: something the
 * kernel or compiler forked may hold the pipe open. */
static int
slot_poll(struct srv *v, struct slot *s, int readable)
{
    int status = 0;
    pid_t w;

    if (readable)
        slot_drain(s);
    if (!s->timed_out && kt_now() >= s->deadline) {
        s->timed_out = 1;
        (void)kill(-s->pid, SIGKILL);
        (void)kill(s->pid, SIGKILL);
    }
    w = waitpid(s->pid, &status, s->timed_out ? 0 : WNOHANG);
    if (w == 0)
        return 0;
    slot_drain(s); /* all it wrote before exiting */
    if (s->kind == SLOT_BUILD)
        finish_build(v, s, status);
    else
        finish_run(v, s, status);
    /* Whatever the compiler or kernel left running in its process group
     * (the group outlives its reaped leader while members remain). */
    (void)kill(-s->pid, SIGKILL);
    s->pid = 0;
    slot_release(s);
    kill_strays(v);
    return 1;
}

static int
handle(struct srv *v, struct kt_msg *m)
{
    const char *t = kt_msg_type(m);
    const char *id = kt_msg_get(m, "id");

    if (strcmp(t, "pong") == 0)
        return 0;
    if ((strcmp(t, "build") == 0 || strcmp(t, "run") == 0) &&
        (id == NULL || strlen(id) >= 64)) {
        log_warnx("rpc: tracker sent a %s job without a valid id", t);
        return KT_EPROTO;
    }
    if (strcmp(t, "build") == 0)
        start_build(v, m, id);
    else if (strcmp(t, "run") == 0)
        start_run(v, m, id);
    else
        log_warnx("rpc: ignoring message type '%s' from the tracker", t);
    return 0;
}

static int
handshake(struct srv *v, char *err, size_t errlen)
{
    struct kt_msg h, w;
    struct kt_peer_hello ph;
    struct utsname u;
    char host[64] = "unknown";
    int rc;

    (void)gethostname(host, sizeof(host) - 1);
    if (uname(&u) < 0)
        snprintf(u.machine, sizeof(u.machine), "unknown");
    kt_msg_init(&h, "hello");
    kt_msg_set(&h, "name", v->name);
    kt_msg_set(&h, "key", v->o->key);
    kt_msg_set(&h, "roles",
               (v->o->roles & KT_ROLE_BUILD)
                   ? ((v->o->roles & KT_ROLE_RUN) ? "build,run" : "build")
                   : "run");
    kt_msg_setf(&h, "jobs", "%d", v->nslots);
    kt_msg_set(&h, "arch", u.machine);
    kt_msg_setf(&h, "cores", "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    kt_msg_set(&h, "host", host);
    kt_msg_setf(&h, "pid", "%ld", (long)getpid());
    ph.token = v->o->token;
    ph.kind = "worker";
    ph.hello = &h;
    rc = kt_session_connect(v->fd, &ph, &w, &v->sess, err, errlen);
    kt_msg_free(&h);
    if (rc < 0)
        return rc;
    log_info("rpc: registered as %s key=%s with %s:%d",
             kt_msg_get(&w, "name") ? kt_msg_get(&w, "name") : v->name,
             v->o->key, v->o->host, v->o->port);
    kt_msg_free(&w);
    return 0;
}

/* Serves one connection until it breaks or we are told to stop. */
static void
serve(struct srv *v)
{
    struct pollfd pf[MAX_SLOTS + 1];
    int map[MAX_SLOTS + 1];
    char err[256];

    kt_reader_init(&v->rd, KT_WIRE_HDR_MAX, KT_WIRE_PAYLOAD_MAX, &v->sess.rx);
    v->last_rx = v->last_ping = kt_now();
    while (!stop_flag) {
        int n = 1, i, ms, rc;
        double now = kt_now(), next = v->last_ping + v->o->heartbeat_ms / 1e3;

        pf[0].fd = v->fd;
        pf[0].events = POLLIN;
        for (i = 0; i < v->nslots; i++) {
            struct slot *s = &v->slots[i];
            if (s->kind == SLOT_FREE)
                continue;
            if (s->deadline < next)
                next = s->deadline;
            /* Children are reaped by polling waitpid: wake at least
             * every 20 ms while one runs (1 ms once its pipe closed). */
            if (next > now + (s->eof ? 0.001 : 0.02))
                next = now + (s->eof ? 0.001 : 0.02);
            pf[n].fd = s->eof ? -1 : s->fd;
            pf[n].events = POLLIN;
            map[n++] = i;
        }
        ms = (int)((next - now) * 1000) + 1;
        ms = ms < 0 ? 0 : ms;
        rc = poll(pf, (nfds_t)n, ms);
        if (rc < 0 && errno != EINTR)
            break;
        for (i = 1; i < n; i++)
            (void)slot_poll(v, &v->slots[map[i]],
                            rc > 0 && (pf[i].revents & (POLLIN | POLLHUP)));
        if (rc > 0 && (pf[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            unsigned char *room;
            size_t cap;
            ssize_t r;
            if (kt_reader_room(&v->rd, &room, &cap) < 0) {
                log_warnx("rpc: no memory for the tracker's input");
                break;
            }
            r = read(v->fd, room, cap);
            if (r <= 0 && !(r < 0 && errno == EINTR)) {
                log_warnx("rpc: tracker closed the connection");
                break;
            }
            if (r > 0) {
                struct kt_msg m;
                kt_reader_commit(&v->rd, (size_t)r);
                v->last_rx = kt_now();
                while ((rc = kt_reader_next(&v->rd, &m, err, sizeof(err))) ==
                       1) {
                    rc = handle(v, &m);
                    kt_msg_free(&m);
                    if (rc < 0)
                        break;
                }
                if (rc < 0) {
                    log_warnx("rpc: bad frame from the tracker: %s", err);
                    break;
                }
            }
        }
        now = kt_now();
        if (now - v->last_rx > 4.0 * v->o->heartbeat_ms / 1e3) {
            log_warnx("rpc: no word from the tracker for %.1f s",
                      now - v->last_rx);
            break;
        }
        if (now >= v->last_ping + v->o->heartbeat_ms / 1e3) {
            struct kt_msg p;
            kt_msg_init(&p, "ping");
            rc = send_msg(v, &p);
            kt_msg_free(&p);
            if (rc < 0)
                break;
            v->last_ping = now;
        }
    }
}

int
kt_server_run(const struct kt_server_opts *o)
{
    struct srv v;
    struct sigaction sa;
    char err[256], host[64] = "host";
    int backoff = 100, i, rc = 0;

    memset(&v, 0, sizeof(v));
    v.o = o;
    v.fd = -1;
    v.nslots = o->jobs < 1 ? 1 : o->jobs > MAX_SLOTS ? MAX_SLOTS : o->jobs;
    for (i = 0; i < MAX_SLOTS; i++)
        v.slots[i].fd = -1;
    (void)gethostname(host, sizeof(host) - 1);
    if (o->name)
        snprintf(v.name, sizeof(v.name), "%s", o->name);
    else
        snprintf(v.name, sizeof(v.name), "%s-%ld", host, (long)getpid());
    snprintf(v.tmp, sizeof(v.tmp), "%s/kerntune-rpc.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(v.tmp) == NULL) {
        log_err("rpc: mkdtemp %s: %s", v.tmp, strerror(errno));
        return KT_EIO;
    }
    {
        /* Compilers and kernels crash as a matter of course: no cores. */
        struct rlimit rl = {0, 0};
        (void)setrlimit(RLIMIT_CORE, &rl);
        (void)kt_adopt_orphans();
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    while (!stop_flag) {
        int served = 0;
        v.fd = kt_wire_connect(o->host, o->port, err, sizeof(err));
        rc = v.fd < 0 ? v.fd : handshake(&v, err, sizeof(err));
        if (rc == 0) {
            backoff = 100;
            serve(&v);
            served = 1;
        } else if (v.fd >= 0 && rc == KT_EPROTO) {
            log_err("rpc: %s", err);
            close(v.fd);
            v.fd = -1;
            rc = KT_EPROTO;
            break;
        } else if (o->once) {
            log_err("rpc: %s", err);
        } else if (rc == KT_EAUTH) {
            log_err("rpc: %s:%d: %s; retrying in %d ms", o->host, o->port, err,
                    backoff);
        } else {
            log_warnx("rpc: %s; retrying in %d ms", err, backoff);
        }
        rc = served ? 0 : KT_EIO;
        for (i = 0; i < v.nslots; i++)
            slot_kill(&v.slots[i]);
        if (v.fd >= 0)
            close(v.fd);
        v.fd = -1;
        kt_reader_free(&v.rd);
        memset(&v.sess, 0, sizeof(v.sess));
        if (stop_flag || o->once)
            break;
        {
            struct timespec ts = {backoff / 1000,
                                  (long)(backoff % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
        backoff = backoff * 2 > o->max_backoff_ms ? o->max_backoff_ms
                                                  : backoff * 2;
    }
    if (stop_flag && rc != KT_EPROTO)
        rc = 0; /* asked to stop: a clean exit */
    for (i = 0; i < v.nslots; i++)
        slot_kill(&v.slots[i]);
    kt_rm_tree(v.tmp);
    kt_reader_free(&v.rd);
    return rc;
}
