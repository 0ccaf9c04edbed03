/* server_slots.c - the worker's jobs: a build or run job gets a slot, a
 * job directory and a child process in its own process group; its pipe is
 * drained and the child reaped by the poll loop in server.c, and the result
 * goes back to the tracker.  Deadlines kill the child's process group. */
#include "measure/worker/server_int.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

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

void
kt__slot_kill(struct slot *s)
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
    (void)kt__srv_send(v, &m);
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
    s->deadline = s->start +
                  timeout_ms / 1000.0 *
                      (kind == SLOT_BUILD ? KT_BUILD_WALL_FACTOR : 1);
    if ((size_t)snprintf(s->dir, sizeof(s->dir), "%s/job%lu", v->tmp,
                         ++v->jobs_seen) >= sizeof(s->dir) ||
        mkdir(s->dir, 0700) < 0) {
        s->dir[0] = '\0';
        slot_release(s);
        return NULL;
    }
    return s;
}

void
kt__start_build(struct srv *v, const struct kt_msg *m, const char *id)
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
    if (kt_build_start(s->dir, v->tmp, cc, m->payload, m->payload_len, (int)tmo,
                       &s->pid, &s->fd, err, sizeof(err)) < 0) {
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

void
kt__start_run(struct srv *v, const struct kt_msg *m, const char *id)
{
    struct kt_run_req r;
    char err[256], so[320];
    long long tmo, number, repeat, minms, cool, flush, thr, mem, retime;
    double tol, seed, stop_above, settle;
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
                          sizeof(err)) < 0 ||
        kt_msg_get_double(m, "settle", 0, 0, 0, 1, &settle, err, sizeof(err)) <
            0 ||
        kt_msg_get_ll(m, "retime", 0, -1, -1, KT_RUN_MAX_REPEAT, &retime, err,
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
    r.settle = settle;
    r.timeout_ms = (int)tmo;
    r.retime = (int)retime;
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
finish_build(struct srv *v, struct slot *s, int status, double cpu_s)
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
    kt_msg_setf(&m, "build_cpu_s", "%.6f", cpu_s);
    if (s->timed_out) {
        kt_msg_setf(&m, "err_no", "%d", KT_MERR_BUILD_TIMEOUT);
        kt_msg_setf(&m, "err_text",
                    "build still running after %d x its %d ms budget "
                    "of wall time (a hung compiler?)",
                    KT_BUILD_WALL_FACTOR, s->timeout_ms);
    } else if (kt_build_cpu_limited(status, s->out.p)) {
        kt_msg_setf(&m, "err_no", "%d", KT_MERR_BUILD_TIMEOUT);
        kt_msg_setf(&m, "err_text",
                    "build used more than its %d ms of CPU time",
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
    (void)kt__srv_send(v, &m);
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
    (void)kt__srv_send(v, &m);
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
int
kt__slot_poll(struct srv *v, struct slot *s, int readable)
{
    struct rusage ru;
    int status = 0;
    pid_t w;

    memset(&ru, 0, sizeof(ru));
    if (readable)
        slot_drain(s);
    if (!s->timed_out && kt_now() >= s->deadline) {
        s->timed_out = 1;
        (void)kill(-s->pid, SIGKILL);
        (void)kill(s->pid, SIGKILL);
    }
    /* wait4: the CPU time of the compiler and everything it reaped */
    w = wait4(s->pid, &status, s->timed_out ? 0 : WNOHANG, &ru);
    if (w == 0)
        return 0;
    slot_drain(s); /* all it wrote before exiting */
    if (s->kind == SLOT_BUILD)
        finish_build(v, s, status,
                     (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
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
