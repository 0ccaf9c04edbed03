/* test_security.c - the worker protocol against hostile peers, with the
 * real tracker on 127.0.0.1 and real kerntune-rpc processes: a fake
 * tracker and a relay against a worker; oversized frames, a connection
 * flood and a silent peer before authentication; log injection; fake,
 * NaN and miscounted costs and results for jobs not given; tokens bound to
 * keys; rpc-status over many workers; a peer that does not read. */
#include "security_env.h"

#include <errno.h>

static int
listen_any(int *port)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    assert_true(fd >= 0);
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 8), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static int
accept_within(int lfd, int ms)
{
    struct pollfd pf = {.fd = lfd, .events = POLLIN};

    if (poll(&pf, 1, ms) <= 0)
        return -1;
    return accept(lfd, NULL, NULL);
}

/* A build job whose compiler leaves e->marker behind. */
static void
evil_build(struct env *e, struct kt_msg *m)
{
    kt_msg_init(m, "build");
    kt_msg_set(m, "id", "j666");
    kt_msg_set(m, "timeout_ms", "5000");
    kt_msg_set(m, "cc", e->evil_cc);
    kt_msg_set_payload(m, "int x;\n", 7);
}

/* 1 when fd reaches EOF (or an error) within ms. */
static int
closed_within(int fd, int ms)
{
    double end = kt_now() + ms / 1000.0;
    char buf[4096];

    while (kt_now() < end) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 50) > 0 && read(fd, buf, sizeof(buf)) <= 0)
            return 1;
    }
    return 0;
}

/* A stranger on the tracker's port (say, while kerntuned restarts) answers
 * the worker with a welcome it cannot prove and sends a job: the worker
 * must not run it, must hang up, and must keep trying (the real tracker
 * comes back). */
static void
test_security_fake_tracker(void **state)
{
    struct env *e = env_new(NULL);
    struct kt_msg m;
    char err[256];
    int lfd, port, fd, fd2;
    pid_t w;

    (void)state;
    lfd = listen_any(&port);
    w = start_worker(e, port);
    fd = accept_within(lfd, 10000);
    assert_true(fd >= 0);
    kt_msg_init(&m, "challenge");
    kt_msg_setf(&m, "proto", "%d", KT_WIRE_PROTO);
    kt_msg_set(&m, "nonce",
               "0123456789abcdef0123456789abcdef"
               "0123456789abcdef0123456789abcdef");
    assert_int_equal(kt_wire_send(fd, &m), 0);
    kt_msg_free(&m);
    if (kt_wire_recv(fd, &m, 10000, err, sizeof(err)) < 0)
        fail_msg("no hello from the worker: %s", err);
    assert_string_equal(kt_msg_type(&m), "hello");
    kt_msg_free(&m);
    kt_msg_init(&m, "welcome");
    kt_msg_set(&m, "name", "victim");
    kt_msg_set(&m, "mac",
               "00000000000000000000000000000000"
               "00000000000000000000000000000000");
    assert_int_equal(kt_wire_send(fd, &m), 0);
    kt_msg_free(&m);
    evil_build(e, &m);
    (void)kt_wire_send(fd, &m); /* may fail: the worker hung up */
    kt_msg_free(&m);
    assert_true(closed_within(fd, 10000));
    usleep(300 * 1000);
    assert_int_not_equal(access(e->marker, F_OK), 0);
    /* It reconnects rather than giving up. */
    fd2 = accept_within(lfd, 10000);
    assert_true(fd2 >= 0);
    close(fd2);
    close(fd);
    close(lfd);
    stop_worker(w);
    env_free(e);
}

/* The worker's log, when a tracker accepts it and hangs up at once (a
 * reset, as a closing tracker gives), with or without --exit-with-parent. */
static void
log_of_hangup_in_handshake(struct env *e, int with_parent, char *out,
                           size_t outlen)
{
    char tracker[64], path[] = "/tmp/kt-hangup.XXXXXX";
    struct linger hard = {1, 0};
    int lfd, port, fd, logfd, status;
    ssize_t n;
    pid_t p;

    lfd = listen_any(&port);
    logfd = mkstemp(path);
    assert_true(logfd >= 0);
    snprintf(tracker, sizeof(tracker), "--tracker=127.0.0.1:%d", port);
    p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        dup2(logfd, 2);
        setenv("KERNTUNE_TOKEN", TOKEN, 1);
        execl(e->rpc, e->rpc, "server", tracker, "--key=local",
              with_parent ? "--exit-with-parent" : "--name=plain",
              (char *)NULL);
        _exit(99);
    }
    fd = accept_within(lfd, 10000);
    assert_true(fd >= 0);
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
    close(fd);
    /* It retries: the next connection shows the failure was logged. */
    fd = accept_within(lfd, 10000);
    assert_true(fd >= 0);
    kill(p, SIGTERM);
    assert_int_equal(waitpid(p, &status, 0), p);
    close(fd);
    close(lfd);
    n = pread(logfd, out, outlen - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    close(logfd);
    unlink(path);
}

static void
test_security_local_worker_hangup_not_a_warning(void **state)
{
    struct env *e = env_new(NULL);
    char log[8192];

    (void)state;
    log_of_hangup_in_handshake(e, 1, log, sizeof(log));
    assert_non_null(strstr(log, "retrying in"));
    if (strstr(log, "WARN") != NULL)
        fail_msg("a local worker warned about its closing tracker:\n%s", log);
    log_of_hangup_in_handshake(e, 0, log, sizeof(log));
    if (strstr(log, "WARN rpc:") == NULL)
        fail_msg("a standalone worker did not warn:\n%s", log);
    env_free(e);
}

/* ---- a relay between a worker and the real tracker ---------------------- */

struct relay {
    int lfd;
    int tracker_port;
    struct env *e;
    volatile int injected;
    volatile int worker_hung_up;
    volatile int finished;
};

/* Forwards bytes both ways; right after the tracker's welcome reaches the
 * worker, writes an extra build job of its own into the worker's stream. */
static void *
relay_thread(void *arg)
{
    struct relay *r = arg;
    struct kt_buf from_tracker;
    char err[256];
    int wfd, tfd;
    double end = kt_now() + WAIT_S;

    kt_buf_init(&from_tracker);
    wfd = accept_within(r->lfd, 10000);
    tfd = kt_wire_connect("127.0.0.1", r->tracker_port, err, sizeof(err));
    while (wfd >= 0 && tfd >= 0 && kt_now() < end) {
        struct pollfd pf[2] = {{.fd = wfd, .events = POLLIN},
                               {.fd = tfd, .events = POLLIN}};
        char buf[65536];
        ssize_t n;

        if (poll(pf, 2, 100) <= 0)
            continue;
        if (pf[0].revents) {
            n = read(wfd, buf, sizeof(buf));
            if (n <= 0) {
                r->worker_hung_up = 1;
                break;
            }
            (void)kt_wire_write_all(tfd, buf, (size_t)n);
        }
        if (pf[1].revents) {
            struct kt_msg m;
            size_t used;
            n = read(tfd, buf, sizeof(buf));
            if (n <= 0)
                break;
            (void)kt_wire_write_all(wfd, buf, (size_t)n);
            kt_buf_put(&from_tracker, buf, (size_t)n);
            while (!r->injected && kt_wire_take((unsigned char *)from_tracker.p,
                                                from_tracker.len, &used, &m,
                                                err, sizeof(err)) == 1) {
                int welcome = strcmp(kt_msg_type(&m), "welcome") == 0;
                kt_msg_free(&m);
                memmove(from_tracker.p, from_tracker.p + used,
                        from_tracker.len - used);
                from_tracker.len -= used;
                if (welcome) {
                    struct kt_msg job;
                    evil_build(r->e, &job);
                    (void)kt_wire_send(wfd, &job);
                    kt_msg_free(&job);
                    r->injected = 1;
                }
            }
        }
    }
    if (wfd >= 0)
        close(wfd);
    if (tfd >= 0)
        close(tfd);
    kt_buf_free(&from_tracker);
    r->finished = 1;
    return NULL;
}

/* The relay passes the handshake through untouched, so both sides prove
 * the token to each other; the frame it adds carries no valid session
 * mac, so the worker drops the connection instead of running it. */
static void
test_security_relay_cannot_inject(void **state)
{
    struct env *e = env_new(NULL);
    struct relay r;
    pthread_t th;
    int port;
    pid_t w;

    (void)state;
    memset(&r, 0, sizeof(r));
    r.e = e;
    r.tracker_port = kt_tracker_port(e->t);
    r.lfd = listen_any(&port);
    assert_int_equal(pthread_create(&th, NULL, relay_thread, &r), 0);
    w = start_worker(e, port);
    spin(e, WAIT_S, &r.finished);
    pthread_join(th, NULL);
    assert_true(r.injected);
    assert_true(r.worker_hung_up);
    usleep(300 * 1000);
    if (access(e->marker, F_OK) == 0)
        fail_msg("the worker ran a job the relay injected");
    close(r.lfd);
    stop_worker(w);
    env_free(e);
}

/* ---- limits before authentication --------------------------------------- */

static int
raw_connect(struct env *e)
{
    char err[256];
    int fd = kt_wire_connect("127.0.0.1", kt_tracker_port(e->t), err,
                             sizeof(err));
    if (fd < 0)
        fail_msg("%s", err);
    return fd;
}

/* Spins the loop until fd is closed by the tracker or s seconds pass. */
static int
tracker_closes(struct env *e, int fd, double s)
{
    double end = kt_now() + s;
    char buf[4096];

    while (kt_now() < end) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        uv_run(&e->loop, UV_RUN_NOWAIT);
        if (poll(&pf, 1, 5) > 0 && read(fd, buf, sizeof(buf)) <= 0)
            return 1;
    }
    return 0;
}

static void
put_prefix(unsigned char *p, uint32_t hlen, uint32_t plen)
{
    memcpy(p, KT_WIRE_MAGIC, 4);
    p[4] = (unsigned char)(hlen >> 24);
    p[5] = (unsigned char)(hlen >> 16);
    p[6] = (unsigned char)(hlen >> 8);
    p[7] = (unsigned char)hlen;
    p[8] = (unsigned char)(plen >> 24);
    p[9] = (unsigned char)(plen >> 16);
    p[10] = (unsigned char)(plen >> 8);
    p[11] = (unsigned char)plen;
}

/* Before hello, a frame announcing a 5000-byte header or any payload is
 * refused on its prefix (the hello timeout is set far away, so only the
 * size check can close these). */
static void
test_security_large_frame_before_auth(void **state)
{
    struct kt_tracker_opts o;
    struct env *e;
    unsigned char pre[12];
    int fd1, fd2;

    (void)state;
    kt_tracker_default_opts(&o);
    o.hello_timeout_ms = 600000;
    e = env_new(&o);
    fd1 = raw_connect(e);
    put_prefix(pre, 5000, 0);
    assert_int_equal(kt_wire_write_all(fd1, pre, sizeof(pre)), 0);
    fd2 = raw_connect(e);
    put_prefix(pre, 100, 1u << 20);
    assert_int_equal(kt_wire_write_all(fd2, pre, sizeof(pre)), 0);
    assert_true(tracker_closes(e, fd1, 5.0));
    assert_true(tracker_closes(e, fd2, 5.0));
    close(fd1);
    close(fd2);
    env_free(e);
}

/* 150 connections that never say hello: beyond max_pending (64) they are
 * closed at once; once they go away a real worker joins. */
static void
test_security_connection_flood(void **state)
{
    struct kt_tracker_opts o;
    struct env *e;
    int fds[150], i, closed = 0;
    pid_t w;

    (void)state;
    kt_tracker_default_opts(&o);
    o.hello_timeout_ms = 600000;
    e = env_new(&o);
    for (i = 0; i < 150; i++) {
        fds[i] = raw_connect(e);
        uv_run(&e->loop, UV_RUN_NOWAIT);
    }
    spin(e, 1.0, NULL);
    for (i = 0; i < 150; i++)
        closed += tracker_closes(e, fds[i], 0.01);
    print_message("flood: %d of 150 unauthenticated connections closed\n",
                  closed);
    assert_true(closed >= 150 - 64);
    assert_true(closed < 150);
    for (i = 0; i < 150; i++)
        close(fds[i]);
    spin(e, 0.5, NULL);
    w = start_worker(e, kt_tracker_port(e->t));
    wait_workers(e, NULL, 1);
    stop_worker(w);
    env_free(e);
}

/* A peer that connects and says nothing is closed after hello_timeout_ms. */
static void
test_security_hello_timeout(void **state)
{
    struct kt_tracker_opts o;
    struct env *e;
    int fd;

    (void)state;
    kt_tracker_default_opts(&o);
    o.hello_timeout_ms = 300;
    e = env_new(&o);
    fd = raw_connect(e);
    /* Well before the 10 s default: the configured timeout closed it. */
    assert_true(tracker_closes(e, fd, 5.0));
    close(fd);
    env_free(e);
}

struct idle_client {
    int port;
    int fd;
    char err[256];
    volatile int finished;
};

/* Connects and authenticates as a client (the loop runs meanwhile in the
 * test's thread), then stays silent. */
static void *
idle_client_thread(void *arg)
{
    struct idle_client *ic = arg;
    struct kt_msg hello, welcome;
    struct kt_peer_hello ph;
    struct kt_session s;

    ic->fd = kt_wire_connect("127.0.0.1", ic->port, ic->err, sizeof(ic->err));
    if (ic->fd >= 0) {
        kt_msg_init(&hello, "hello");
        ph.token = TOKEN;
        ph.kind = "client";
        ph.hello = &hello;
        if (kt_session_connect(ic->fd, &ph, &welcome, &s, ic->err,
                               sizeof(ic->err)) == 0)
            kt_msg_free(&welcome);
        else {
            close(ic->fd);
            ic->fd = -1;
        }
        kt_msg_free(&hello);
    }
    ic->finished = 1;
    return NULL;
}

/* An authenticated client that sends nothing is closed after
 * client_idle_ms, so idle rpc-status connections do not pile up. */
static void
test_security_client_idle_timeout(void **state)
{
    struct kt_tracker_opts o;
    struct idle_client ic;
    struct env *e;
    pthread_t th;

    (void)state;
    kt_tracker_default_opts(&o);
    o.client_idle_ms = 300;
    e = env_new(&o);
    memset(&ic, 0, sizeof(ic));
    ic.port = kt_tracker_port(e->t);
    assert_int_equal(pthread_create(&th, NULL, idle_client_thread, &ic), 0);
    spin(e, WAIT_S, &ic.finished);
    pthread_join(th, NULL);
    if (ic.fd < 0)
        fail_msg("client did not authenticate: %s", ic.err);
    /* Well before the 30 s default: the configured idle time closed it. */
    assert_true(tracker_closes(e, ic.fd, 5.0));
    close(ic.fd);
    env_free(e);
}

/* ---- log injection ----------------------------------------------------- */

/* A peer's strings reach the log with control bytes escaped: a decoded
 * %0A cannot start a forged line (journald reads a leading "<N>" as the
 * line's priority). */
static void
test_security_log_injection(void **state)
{
    struct env *e = env_new(NULL);
    struct kt_msg m;
    char path[300], buf[65536];
    int fd, saved, logfd;
    ssize_t n;
    FILE *f;

    (void)state;
    snprintf(path, sizeof(path), "%s/log", e->tmp);
    logfd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(logfd >= 0);
    saved = dup(2);
    assert_int_equal(dup2(logfd, 2), 2);
    fd = raw_connect(e);
    kt_msg_init(&m, "evil\n<2>ERR forged line");
    assert_int_equal(kt_wire_send(fd, &m), 0);
    kt_msg_free(&m);
    assert_true(tracker_closes(e, fd, 5.0));
    close(fd);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    close(logfd);
    f = fopen(path, "r");
    assert_non_null(f);
    n = (ssize_t)fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n > 0 ? n : 0] = '\0';
    if (strstr(buf, "\n<2>ERR forged") != NULL)
        fail_msg("forged log line: %s", buf);
    assert_non_null(strstr(buf, "evil\\x0a<2>ERR forged line"));
    env_free(e);
}

/* ---- results that cannot be faked -------------------------------------- */

struct fake_worker {
    struct fake_thread worker;
    const char *const *costs; /* the costs answered to run job i */
    double stop_above[6];     /* the bound run job i was sent, 0 none */
    int lied;                 /* sent the result of a job it was not given */
};

static int
fake_reply(int fd, struct kt_session *s, const char *id, const char *stage,
           const char *costs)
{
    struct kt_msg r;
    int rc;

    kt_msg_init(&r, "result");
    kt_msg_set(&r, "id", id);
    kt_msg_set(&r, "stage", stage);
    kt_msg_set(&r, "err_no", "0");
    if (costs != NULL) {
        kt_msg_set(&r, "costs", costs);
        /* Claims that allow fewer costs, though the tracker asked for
         * neither an early stop nor settling: "1e-6,1e-6" stays refused,
         * and neither note is kept. */
        kt_msg_set(&r, "early_stop", "1");
        kt_msg_set(&r, "settled", "1");
        /* Keys only the tracker may set, and one it does not know. */
        kt_msg_set(&r, "lost_worker", "someone-else");
        kt_msg_set(&r, "build_worker", "spoofed");
        kt_msg_set(&r, "x_evil", "1");
    } else {
        kt_msg_set_payload(&r, "not really an ELF", 17);
    }
    rc = kt_wire_send_sealed(fd, &r, &s->tx);
    kt_msg_free(&r);
    return rc;
}

static void
answer_with_costs(int fd, struct kt_session *s, const struct kt_msg *job,
                  int run, void *arg)
{
    struct fake_worker *f = arg;
    const char *id = kt_msg_get(job, "id");
    const char *bound = kt_msg_get(job, "stop_above");

    if (run < 0) {
        /* first a result for a job it was never given */
        if (!f->lied)
            (void)fake_reply(fd, s, "j999", "build", NULL);
        f->lied = 1;
        (void)fake_reply(fd, s, id, "build", NULL);
        return;
    }
    if (run < 6 && bound != NULL)
        f->stop_above[run] = strtod(bound, NULL);
    (void)fake_reply(fd, s, id, "run", f->costs[run]);
    /* The same result again: counted once. */
    (void)fake_reply(fd, s, id, "run", f->costs[run]);
}

/* A fake worker answers run job i with costs[i] (claiming early_stop=1
 * and settled=1 on each); the tracker asked for repeat 3, `settle` and
 * `stop_ratio`.  A result is refused with why[i] in its text, or accepted
 * ("") with a cost of 2 us (7 us where it stopped early); the claims are
 * kept only where settling or stopping early was asked for. */
static void
fake_costs_run(const char *const *costs, const char *const *why, int n,
               double settle, double stop_ratio, struct fake_worker *out)
{
    struct env *e = env_new(NULL);
    struct fake_worker f;
    struct kt_candidate c[6];
    struct kt_measure_opts o;
    struct batch b;
    unsigned results;
    char err[256];
    int i;

    assert_true(n <= 6);
    memset(&f, 0, sizeof(f));
    f.costs = costs;
    /* a worker with the token that lies: a result for a job it was never
     * given, then the given costs for each run job */
    fake_worker_start(&f.worker, kt_tracker_port(e->t), "liar", n,
                      answer_with_costs, &f);
    memset(c, 0, sizeof(c));
    for (i = 0; i < n; i++) {
        c[i].source = "int x;";
        c[i].cc = "cc";
    }
    kt_measure_default_opts(&o);
    o.repeat = 3;
    o.settle = settle;
    o.stop_ratio = stop_ratio;
    memset(&b, 0, sizeof(b));
    if (kt_tracker_submit(e->t, "fake", c, n, &o, on_batch, &b, err,
                          sizeof(err)) < 0)
        fail_msg("submit: %s", err);
    spin(e, WAIT_S, &b.done);
    spin(e, 0.5, NULL); /* the duplicate of the last result */
    pthread_join(f.worker.th, NULL);
    assert_true(b.done);
    for (i = 0; i < n; i++) {
        if (why[i][0] == '\0') {
            if (b.err_no[i] != 0)
                fail_msg("candidate %d: %s", i, b.err_text[i]);
            double want = strchr(costs[i], ',') == NULL ? 7e-6 : 2e-6;
            assert_true(b.cost[i] > 0.95 * want && b.cost[i] < 1.05 * want);
        } else {
            assert_int_equal(b.err_no[i], KT_MERR_UNKNOWN);
            if (strstr(b.err_text[i], why[i]) == NULL)
                fail_msg("candidate %d: '%s' lacks '%s'", i, b.err_text[i],
                         why[i]);
            assert_true(b.cost[i] == 0);
        }
        /* Worker-supplied keys are whitelisted. */
        assert_string_equal(b.lost[i], "");
        assert_string_equal(b.build_worker[i], "liar");
        assert_int_equal(b.evil[i], 0);
        assert_int_equal(b.settled[i], settle > 0);
        assert_int_equal(b.early_stop[i], f.stop_above[i] > 0);
    }
    /* n builds and n runs; not the result for j999 nor the duplicates. */
    kt_tracker_counters(e->t, NULL, NULL, NULL, &results);
    assert_int_equal(results, 2 * (unsigned)n);
    env_free(e);
    if (out != NULL)
        *out = f;
}

static void
test_security_fake_costs(void **state)
{
    static const char *const costs[] = {"nan,nan,nan",     "0,0,0",
                                        "-1e-9,1e-6,1e-6", "1e-6,1e-6",
                                        "inf,1e-6,1e-6",   "1e-6,2e-6,3e-6"};
    static const char *const why[] = {"finite and positive",
                                      "finite and positive",
                                      "finite and positive",
                                      "2 costs for repeat=3",
                                      "finite and positive",
                                      ""};
    /* asked to settle: two costs within 2% pass, two further apart not */
    static const char *const settled_costs[] = {"2e-6,2.02e-6", "1e-6,2e-6",
                                                "1e-6,2e-6,3e-6"};
    static const char *const settled_why[] = {"", "two costs differ by 100%",
                                              ""};

    (void)state;
    /* asked to stop early at 3x the batch's best so far: the first run
     * gets no bound; after its 2 us, a single cost must exceed 6 us */
    static const char *const stop_costs[] = {"2e-6,2e-6,2e-6", "5e-6", "7e-6"};
    static const char *const stop_why[] = {"", "not above the bound", ""};
    struct fake_worker f;
    int i;

    (void)state;
    fake_costs_run(costs, why, 6, 0, 0, NULL);
    fake_costs_run(settled_costs, settled_why, 3, 0.02, 0, NULL);
    fake_costs_run(stop_costs, stop_why, 3, 0, 3, &f);
    assert_true(f.stop_above[0] == 0);
    for (i = 1; i < 3; i++)
        assert_true(f.stop_above[i] > 5.99e-6 && f.stop_above[i] < 6.01e-6);
}

/* ---- rpc-status with many workers --------------------------------------- */

struct crowd {
    int port;
    int n;
    int fds[200];
    volatile int joined;
    char out[65536];
    int rc;
    char err[256];
    volatile int finished;
};

static void *
crowd_thread(void *arg)
{
    struct crowd *c = arg;
    struct kt_session s;
    char name[32];
    FILE *f;
    int i;

    for (i = 0; i < c->n; i++) {
        snprintf(name, sizeof(name), "crowd-%03d", i);
        c->fds[i] = fake_join(c->port, name, "crowd", &s, c->err,
                              sizeof(c->err));
        if (c->fds[i] < 0)
            break;
        c->joined = i + 1;
    }
    f = fmemopen(c->out, sizeof(c->out) - 1, "w");
    c->rc = c->joined == c->n ? kt_rpc_status("127.0.0.1", c->port, TOKEN, f,
                                              c->err, sizeof(c->err))
                              : -1;
    fclose(f);
    c->finished = 1;
    return NULL;
}

/* 150 workers: 11 status lines each would pass the decoder's 1024-line
 * limit in one reply; the status comes in pages and lists them all. */
static void
test_security_status_many_workers(void **state)
{
    struct env *e = env_new(NULL);
    struct crowd *c = kt_xcalloc(1, sizeof(*c));
    pthread_t th;
    char name[32];
    int i;

    (void)state;
    c->port = kt_tracker_port(e->t);
    c->n = 150;
    assert_int_equal(pthread_create(&th, NULL, crowd_thread, c), 0);
    spin(e, WAIT_S, &c->finished);
    pthread_join(th, NULL);
    if (c->rc != 0)
        fail_msg("rpc-status with %d workers: %s", c->joined, c->err);
    for (i = 0; i < c->n; i++) {
        snprintf(name, sizeof(name), "crowd-%03d ", i);
        if (strstr(c->out, name) == NULL)
            fail_msg("%s missing from the status", name);
    }
    assert_non_null(strstr(c->out, "crowd           150"));
    for (i = 0; i < c->n; i++)
        close(c->fds[i]);
    free(c);
    env_free(e);
}

/* ---- write backpressure ------------------------------------------------- */

struct hog {
    int port;
    int fd;
    volatile int gave_up;
    int sent;
    int dropped;
    char err[256];
    volatile int finished;
};

/* An authenticated client that asks for the status over and over and
 * never reads a reply. It sends until the tracker drops it (a send fails
 * with EPIPE or a reset) or HOG_DEADLINE_S pass: reading anything would
 * drain the replies and defeat the point, and a fixed count of requests
 * can fit in the socket buffers when the tracker is slow (ASan). The
 * socket buffers stay at their defaults: a tiny SO_RCVBUF on loopback
 * drops segments and TCP's retransmit backoff then stalls the test. */
#define HOG_DEADLINE_S 100.0

static void *
hog_thread(void *arg)
{
    struct hog *h = arg;
    struct kt_msg hello, welcome, req;
    struct kt_peer_hello ph;
    struct kt_session s;
    int fd, rc;
    double end;

    fd = kt_wire_connect("127.0.0.1", h->port, h->err, sizeof(h->err));
    if (fd < 0)
        goto out;
    kt_msg_init(&hello, "hello");
    ph.token = TOKEN;
    ph.kind = "client";
    ph.hello = &hello;
    if (kt_session_connect(fd, &ph, &welcome, &s, h->err, sizeof(h->err)) == 0) {
        kt_msg_free(&welcome);
        h->fd = fd;
        end = kt_now() + HOG_DEADLINE_S;
        while (!h->dropped && !h->gave_up && kt_now() < end) {
            kt_msg_init(&req, "status_req");
            rc = kt_wire_send_sealed(fd, &req, &s.tx);
            kt_msg_free(&req);
            if (rc == -EPIPE || rc == -ECONNRESET)
                h->dropped = !h->gave_up;
            else if (rc < 0) {
                snprintf(h->err, sizeof(h->err), "send: %s", strerror(-rc));
                break;
            } else
                h->sent++;
        }
    }
    kt_msg_free(&hello);
    close(fd);
out:
    h->finished = 1;
    return NULL;
}

/* A peer that does not read is dropped once write_queue_max bytes wait for
 * it; the tracker keeps serving others. */
static void
test_security_write_backpressure(void **state)
{
    struct kt_tracker_opts o;
    struct env *e;
    struct hog h;
    pthread_t th;
    pid_t w;

    (void)state;
    kt_tracker_default_opts(&o);
    o.write_queue_max = 64 * 1024;
    e = env_new(&o);
    memset(&h, 0, sizeof(h));
    h.port = kt_tracker_port(e->t);
    h.fd = -1;
    assert_int_equal(pthread_create(&th, NULL, hog_thread, &h), 0);
    spin(e, HOG_DEADLINE_S + 20.0, &h.finished);
    if (!h.finished && h.fd >= 0) {
        /* A tracker that stopped reading leaves the hog blocked in send. */
        h.gave_up = 1;
        shutdown(h.fd, SHUT_RDWR);
    }
    pthread_join(th, NULL);
    print_message("backpressure: dropped after %d unread status requests%s%s\n",
                  h.sent, h.err[0] ? "; " : "", h.err);
    assert_true(h.dropped);
    w = start_worker(e, kt_tracker_port(e->t));
    wait_workers(e, NULL, 1);
    stop_worker(w);
    env_free(e);
}

/* ---- tokens bound to keys ---------------------------------------------- */

/* 1 when a kerntune-rpc --once with token and key joins the tracker, 0
 * when the tracker refuses it. */
static int
try_join(struct env *e, const char *key, const char *token)
{
    char tracker[64], keyarg[96];
    int before = kt_tracker_nworkers(e->t, key), status, joined = -1;
    double end = kt_now() + WAIT_S;
    pid_t p;

    snprintf(tracker, sizeof(tracker), "--tracker=127.0.0.1:%d",
             kt_tracker_port(e->t));
    snprintf(keyarg, sizeof(keyarg), "--key=%s", key);
    p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        setenv("KERNTUNE_TOKEN", token, 1);
        execl(e->rpc, e->rpc, "server", tracker, keyarg, "--once",
              (char *)NULL);
        _exit(99);
    }
    while (joined < 0 && kt_now() < end) {
        spin(e, 0.01, NULL);
        if (kt_tracker_nworkers(e->t, key) > before)
            joined = 1;
        else if (waitpid(p, &status, WNOHANG) == p)
            joined = 0;
    }
    if (joined == 1) {
        kill(p, SIGTERM);
        assert_int_equal(waitpid(p, &status, 0), p);
        spin(e, 0.2, NULL);
    } else {
        assert_int_equal(joined, 0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    }
    return joined;
}

/* The shared token may claim any key without a token of its own, but not
 * the local workers' key (their random token is bound to it) nor a key
 * with a configured token; a key token claims only its key. */
static void
test_security_tokens_bound_to_keys(void **state)
{
    static const struct kt_key_token kt[] = {{"rk3399", "rk-token"}};
    struct kt_tracker_opts o;
    struct env *e;
    char err[256];

    (void)state;
    kt_tracker_default_opts(&o);
    o.key_tokens = kt;
    o.nkey_tokens = 1;
    e = env_new(&o);
    /* A KERNTUNE_TOKEN the daemon was started with is replaced for its
     * local workers, not shadowed by a second entry. */
    setenv("KERNTUNE_TOKEN", "stale-token", 1);
    if (kt_tracker_spawn_local(e->t, 1, e->rpc, "local", "build,run", err,
                               sizeof(err)) < 0)
        fail_msg("%s", err);
    unsetenv("KERNTUNE_TOKEN");
    wait_workers(e, "local", 1);
    assert_int_equal(try_join(e, "board", TOKEN), 1);
    assert_int_equal(try_join(e, "local", TOKEN), 0);
    assert_int_equal(try_join(e, "rk3399", TOKEN), 0);
    assert_int_equal(try_join(e, "rk3399", "rk-token"), 1);
    assert_int_equal(try_join(e, "board", "rk-token"), 0);
    env_free(e);
}

/* A worker of key with roles and name, proving the shared token. */
static pid_t
start_keyed(struct env *e, const char *key, const char *roles, const char *name)
{
    char tracker[64], keyarg[96], rolearg[64], namearg[96];
    pid_t p;

    snprintf(tracker, sizeof(tracker), "--tracker=127.0.0.1:%d",
             kt_tracker_port(e->t));
    snprintf(keyarg, sizeof(keyarg), "--key=%s", key);
    snprintf(rolearg, sizeof(rolearg), "--roles=%s", roles);
    snprintf(namearg, sizeof(namearg), "--name=%s", name);
    p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        setenv("KERNTUNE_TOKEN", TOKEN, 1);
        execl(e->rpc, e->rpc, "server", tracker, keyarg, rolearg, namearg,
              (char *)NULL);
        _exit(99);
    }
    return p;
}

/* Builds a 4-candidate batch of key "board"; the builders' names. */
static void
board_batch(struct env *e, struct batch *b)
{
    struct kt_candidate c[4];
    struct kt_measure_opts o;
    char err[256];
    int i;

    memset(b, 0, sizeof(*b));
    memset(c, 0, sizeof(c));
    for (i = 0; i < 4; i++) {
        c[i].source = "int x;";
        c[i].cc = "cc";
    }
    kt_measure_default_opts(&o);
    o.run_timeout_ms = 5000;
    if (kt_tracker_submit(e->t, "board", c, 4, &o, on_batch, b, err,
                          sizeof(err)) < 0)
        fail_msg("submit: %s", err);
    spin(e, WAIT_S, &b->done);
    assert_true(b->done);
    assert_int_equal(b->n, 4);
}

/* Objects are built by workers of the key that runs them, unless
 * build_keys trusts another key's builders for it (a shared build host);
 * then those build and the key's own workers still run. */
static void
test_security_builders_of_other_keys(void **state)
{
    static const struct kt_key_builder kb[] = {{"board", "farm"}};
    struct kt_tracker_opts o;
    struct env *e;
    struct batch b;
    pid_t board, farm;
    int i;

    (void)state;
    e = env_new(NULL);
    board = start_keyed(e, "board", "build,run", "board-w");
    farm = start_keyed(e, "farm", "build", "farm-w");
    wait_workers(e, "board", 1);
    wait_workers(e, "farm", 1);
    board_batch(e, &b);
    for (i = 0; i < 4; i++)
        assert_string_equal(b.build_worker[i], "board-w");
    stop_worker(board);
    stop_worker(farm);
    env_free(e);

    kt_tracker_default_opts(&o);
    o.key_builders = kb;
    o.nkey_builders = 1;
    e = env_new(&o);
    board = start_keyed(e, "board", "run", "board-r");
    farm = start_keyed(e, "farm", "build", "farm-w");
    wait_workers(e, "board", 1);
    wait_workers(e, "farm", 1);
    board_batch(e, &b);
    for (i = 0; i < 4; i++) {
        assert_string_equal(b.build_worker[i], "farm-w");
        /* built, then run on board-r: "int x;" has no kernel to load */
        assert_int_equal(b.err_no[i], KT_MERR_RUNTIME_DEVICE);
    }
    stop_worker(board);
    stop_worker(farm);
    env_free(e);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_security_fake_tracker),
        cmocka_unit_test(test_security_relay_cannot_inject),
        cmocka_unit_test(test_security_large_frame_before_auth),
        cmocka_unit_test(test_security_connection_flood),
        cmocka_unit_test(test_security_hello_timeout),
        cmocka_unit_test(test_security_client_idle_timeout),
        cmocka_unit_test(test_security_log_injection),
        cmocka_unit_test(test_security_fake_costs),
        cmocka_unit_test(test_security_local_worker_hangup_not_a_warning),
        cmocka_unit_test(test_security_tokens_bound_to_keys),
        cmocka_unit_test(test_security_builders_of_other_keys),
        cmocka_unit_test(test_security_status_many_workers),
        cmocka_unit_test(test_security_write_backpressure),
    };
    signal(SIGPIPE, SIG_IGN);
    kt_log_init(getenv("KT_TEST_VERBOSE") ? LOG_DEBUG : LOG_WARNING);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
