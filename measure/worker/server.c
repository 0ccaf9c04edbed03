/* server.c - the kerntune-rpc worker loop: connect out to the tracker,
 * answer the token challenge, then serve build and run jobs in child
 * processes while sending heartbeats.  One poll(2) loop watches the tracker
 * socket and each child's pipe; deadlines kill the child's process group.
 * A lost tracker kills the children and reconnects with backoff. */
#include "measure/worker/server_int.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_flag;
/* The connection in its handshake, shut down by a stop signal: a signal
 * that lands just before the handshake's poll would not interrupt it, and
 * the worker would wait out the handshake's timeout. */
static volatile sig_atomic_t handshake_fd = -1;

static void
on_stop(int sig)
{
    int saved = errno;

    (void)sig;
    stop_flag = 1;
    if (handshake_fd >= 0)
        (void)shutdown(handshake_fd, SHUT_RDWR);
    errno = saved;
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
int
kt__srv_send(struct srv *v, const struct kt_msg *m)
{
    int rc = kt_wire_send_sealed(v->fd, m, &v->sess.tx);
    if (rc < 0)
        log_warnx("rpc: send to tracker failed: %s", kt_strerror(rc));
    return rc;
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
        kt__start_build(v, m, id);
    else if (strcmp(t, "run") == 0)
        kt__start_run(v, m, id);
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
    kt_msg_set(&h, "abi", kt_abi_self());
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
            (void)kt__slot_poll(v, &v->slots[map[i]],
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
                KT_LOG(r == 0 && v->o->exit_with_parent ? LOG_INFO
                                                        : LOG_WARNING,
                       "rpc: tracker closed the connection");
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
            rc = kt__srv_send(v, &p);
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
        handshake_fd = v.fd;
        rc = v.fd < 0    ? v.fd
             : stop_flag ? KT_ECANCELED
                         : handshake(&v, err, sizeof(err));
        handshake_fd = -1;
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
        } else if (stop_flag) {
            /* asked to stop while connecting: nothing went wrong */
        } else if (o->once) {
            log_err("rpc: %s", err);
        } else if (rc == KT_EAUTH) {
            log_err("rpc: %s:%d: %s; retrying in %d ms", o->host, o->port, err,
                    backoff);
        } else {
            /* A local worker's tracker is its parent's: one that hangs up
             * during the handshake is closing, not broken. */
            KT_LOG(v.fd >= 0 && o->exit_with_parent ? LOG_INFO : LOG_WARNING,
                   "rpc: %s; retrying in %d ms", err, backoff);
        }
        rc = served ? 0 : KT_EIO;
        for (i = 0; i < v.nslots; i++)
            kt__slot_kill(&v.slots[i]);
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
        kt__slot_kill(&v.slots[i]);
    kt_rm_tree(v.tmp);
    kt_reader_free(&v.rd);
    return rc;
}
