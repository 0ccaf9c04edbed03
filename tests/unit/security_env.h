/* security_env.h - what test_security.c, test_worker_limits.c and
 * test_placement.c share: a tracker on 127.0.0.1 with a token, its loop,
 * real kerntune-rpc worker processes, fake workers that answer jobs as a
 * test scripts them, and a batch callback that keeps each result's text
 * and kvs.
 * Header-only (static inline) so each test binary takes what it uses. */
#ifndef KT_TESTS_SECURITY_ENV_H
#define KT_TESTS_SECURITY_ENV_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "measure/measure.h"

#define TOKEN "s3cret-token"
#define WAIT_S 30.0

struct env {
    uv_loop_t loop;
    struct kt_tracker *t;
    char rpc[512];
    char tmp[256];
    char marker[300]; /* created by evil_cc when a worker runs it */
    char evil_cc[300];
};

static inline struct env *
env_new(const struct kt_tracker_opts *opts)
{
    struct env *e = kt_xcalloc(1, sizeof(*e));
    struct kt_tracker_opts o;
    const char *b = getenv("BUILD");
    char err[256];
    FILE *f;

    snprintf(e->rpc, sizeof(e->rpc), "%s/kerntune-rpc", b ? b : "build");
    snprintf(e->tmp, sizeof(e->tmp), "/tmp/kt-test-security.XXXXXX");
    assert_non_null(mkdtemp(e->tmp));
    setenv("TMPDIR", e->tmp, 1);
    snprintf(e->marker, sizeof(e->marker), "%s/pwned", e->tmp);
    snprintf(e->evil_cc, sizeof(e->evil_cc), "%s/evilcc.sh", e->tmp);
    f = fopen(e->evil_cc, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\ntouch %s\nexit 1\n", e->marker);
    fclose(f);
    assert_int_equal(chmod(e->evil_cc, 0755), 0);
    assert_int_equal(uv_loop_init(&e->loop), 0);
    if (opts != NULL) {
        o = *opts;
    } else {
        kt_tracker_default_opts(&o);
    }
    o.port = 0;
    o.token = TOKEN;
    if (kt_tracker_new(&e->t, &e->loop, &o, err, sizeof(err)) < 0)
        fail_msg("tracker: %s", err);
    return e;
}

static inline void
env_free(struct env *e)
{
    char cmd[300];

    kt_tracker_close(e->t);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&e->loop), 0);
    unsetenv("TMPDIR");
    snprintf(cmd, sizeof(cmd), "rm -rf %s", e->tmp);
    assert_int_equal(system(cmd), 0);
    free(e);
}

/* Runs the tracker's loop for up to s seconds or until *flag. */
static inline void
spin(struct env *e, double s, volatile int *flag)
{
    double end = kt_now() + s;

    while (kt_now() < end && !(flag && *flag))
        uv_run(&e->loop, UV_RUN_NOWAIT), usleep(1000);
}

/* Spins until key (NULL: any) has n workers; fails after WAIT_S. */
static inline void
wait_workers(struct env *e, const char *key, int n)
{
    double end = kt_now() + WAIT_S;

    while (kt_tracker_nworkers(e->t, key) < n && kt_now() < end)
        spin(e, 0.01, NULL);
    assert_int_equal(kt_tracker_nworkers(e->t, key), n);
}

/* A worker process with the right token that connects to port. */
static inline pid_t
start_worker(struct env *e, int port)
{
    char tracker[64];
    pid_t p;

    snprintf(tracker, sizeof(tracker), "--tracker=127.0.0.1:%d", port);
    p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        setenv("KERNTUNE_TOKEN", TOKEN, 1);
        execl(e->rpc, e->rpc, "server", tracker, "--key=local",
              "--roles=build,run", "--name=victim", (char *)NULL);
        _exit(99);
    }
    return p;
}

static inline void
stop_worker(pid_t p)
{
    int status;

    kill(p, SIGTERM);
    assert_int_equal(waitpid(p, &status, 0), p);
}

/* A worker of key with the token, as far as the handshake: returns the
 * connected fd with the session in *s, or <0. */
static inline int
fake_join(int port, const char *name, const char *key, struct kt_session *s,
          char *err, size_t errlen)
{
    struct kt_msg hello, welcome;
    struct kt_peer_hello ph;
    int fd, rc;

    fd = kt_wire_connect("127.0.0.1", port, err, errlen);
    if (fd < 0)
        return fd;
    kt_msg_init(&hello, "hello");
    kt_msg_set(&hello, "name", name);
    kt_msg_set(&hello, "key", key);
    kt_msg_set(&hello, "roles", "build,run");
    kt_msg_set(&hello, "host", "fake-host");
    ph.token = TOKEN;
    ph.kind = "worker";
    ph.hello = &hello;
    rc = kt_session_connect(fd, &ph, &welcome, s, err, errlen);
    kt_msg_free(&hello);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    kt_msg_free(&welcome);
    return fd;
}

/* A fake worker's job loop on fd: answer(fd, s, job, i, arg) for every
 * job, i the run's index or -1 for a build, until nruns runs were
 * answered or the tracker goes quiet for 20 s. */
typedef void (*fake_answer_fn)(int fd, struct kt_session *s,
                               const struct kt_msg *job, int run, void *arg);

static inline void
fake_serve(int fd, struct kt_session *s, int nruns, fake_answer_fn answer,
           void *arg, char *err, size_t errlen)
{
    struct kt_msg m;
    int runs = 0;

    while (runs < nruns &&
           kt_wire_recv_sealed(fd, &m, &s->rx, 20000, err, errlen) == 0) {
        if (strcmp(kt_msg_type(&m), "build") == 0)
            answer(fd, s, &m, -1, arg);
        else if (strcmp(kt_msg_type(&m), "run") == 0)
            answer(fd, s, &m, runs++, arg);
        kt_msg_free(&m);
    }
}

/* A worker of key "fake" named name: joins port and answers its jobs
 * (fake_serve) until nruns runs were answered; 0, or <0 when it could
 * not join (err says why). */
static inline int
fake_worker(int port, const char *name, int nruns, fake_answer_fn answer,
            void *arg, char *err, size_t errlen)
{
    struct kt_session s;
    int fd = fake_join(port, name, "fake", &s, err, errlen);

    if (fd < 0)
        return fd;
    fake_serve(fd, &s, nruns, answer, arg, err, errlen);
    close(fd);
    return 0;
}

/* fake_worker on a thread of its own, started by fake_worker_start (the
 * caller joins th); err says why it could not join. */
struct fake_thread {
    pthread_t th;
    int port, nruns;
    const char *name;
    fake_answer_fn answer;
    void *arg;
    char err[256];
};

static inline void *
fake_thread_main(void *p)
{
    struct fake_thread *t = p;

    (void)fake_worker(t->port, t->name, t->nruns, t->answer, t->arg, t->err,
                      sizeof(t->err));
    return NULL;
}

static inline void
fake_worker_start(struct fake_thread *t, int port, const char *name, int nruns,
                  fake_answer_fn answer, void *arg)
{
    memset(t, 0, sizeof(*t));
    t->port = port;
    t->name = name;
    t->nruns = nruns;
    t->answer = answer;
    t->arg = arg;
    assert_int_equal(pthread_create(&t->th, NULL, fake_thread_main, t), 0);
}

struct batch {
    int done;
    int n;
    int err_no[8];
    char err_text[8][2048];
    double cost[8];
    char lost[8][64];
    char build_worker[8][64];
    int evil[8];       /* a key from the worker that the tracker must drop */
    int settled[8];    /* the worker's settled note, kept */
    int early_stop[8]; /* the worker's early_stop note, kept */
};

static inline void
on_batch(void *arg, const struct kt_result *res, int n)
{
    struct batch *b = arg;
    int i, k;

    b->done = 1;
    b->n = n;
    for (i = 0; i < n && i < 8; i++) {
        b->err_no[i] = res[i].err_no;
        snprintf(b->err_text[i], sizeof(b->err_text[i]), "%s", res[i].err_text);
        b->cost[i] = res[i].cost;
        for (k = 0; k < res[i].nkvs; k++) {
            if (strcmp(res[i].kvs[k].k, "lost_worker") == 0)
                snprintf(b->lost[i], sizeof(b->lost[i]), "%s", res[i].kvs[k].v);
            if (strcmp(res[i].kvs[k].k, "build_worker") == 0)
                snprintf(b->build_worker[i], sizeof(b->build_worker[i]), "%s",
                         res[i].kvs[k].v);
            b->evil[i] |= strcmp(res[i].kvs[k].k, "x_evil") == 0;
            b->early_stop[i] |= strcmp(res[i].kvs[k].k, "early_stop") == 0;
            b->settled[i] |= strcmp(res[i].kvs[k].k, "settled") == 0;
        }
    }
}

#endif
