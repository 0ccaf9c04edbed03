/* fake_worker.c - a test-only worker for the load test (bench/load.sh): N
 * connections to a tracker under one key, each speaking the real protocol
 * (the token handshake and sealed frames of measure/worker/), that answer
 * a build job at once with a small stand-in shared object and a run job at
 * once with `repeat` plausible costs.  Nothing is compiled or timed: the
 * load is on the tracker and the daemon, not on this machine's compiler.
 *
 * The dispatch latency it reports is, per connection, the time from sending
 * a result to receiving the next job: the tracker's turnaround as a worker
 * sees it (round boundaries, where the daemon searches, included).
 *
 *   fake_worker --tracker HOST:PORT --key KEY --token-file F --conns N
 *               [--stats FILE]
 * Runs until SIGTERM/SIGINT, then prints its counts and latency
 * percentiles (to --stats FILE too). */
#include "measure/worker/worker.h"

#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CONNS 256
#define PING_S 2.0

struct fconn {
    int fd;
    struct kt_session sess;
    struct kt_reader rd;
    double last_ping;
    double last_result; /* 0: no result sent yet, or a job is in hand */
};

struct stats {
    unsigned long builds, runs, bad;
    double *lat;
    size_t nlat, caplat;
};

static volatile sig_atomic_t stop_flag;

static void
on_stop(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static int
conn_open(struct fconn *c, const char *host, int port, const char *key,
          const char *token, int idx)
{
    struct kt_msg h, w;
    struct kt_peer_hello ph;
    char err[256];
    int rc;

    memset(c, 0, sizeof(*c));
    c->fd = kt_wire_connect(host, port, err, sizeof(err));
    if (c->fd < 0) {
        fprintf(stderr, "fake_worker: connect %s:%d: %s\n", host, port, err);
        return -1;
    }
    kt_msg_init(&h, "hello");
    kt_msg_setf(&h, "name", "fake-%d", idx);
    kt_msg_set(&h, "key", key);
    kt_msg_set(&h, "roles", "build,run");
    kt_msg_set(&h, "jobs", "1");
    kt_msg_set(&h, "abi", kt_abi_self());
    kt_msg_set(&h, "cores", "1");
    kt_msg_set(&h, "host", "fake");
    kt_msg_setf(&h, "pid", "%ld", (long)getpid());
    ph.token = token;
    ph.kind = "worker";
    ph.hello = &h;
    rc = kt_session_connect(c->fd, &ph, &w, &c->sess, err, sizeof(err));
    kt_msg_free(&h);
    if (rc < 0) {
        fprintf(stderr, "fake_worker: connection %d refused: %s\n", idx, err);
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    kt_msg_free(&w);
    kt_reader_init(&c->rd, KT_WIRE_HDR_MAX, KT_WIRE_PAYLOAD_MAX, &c->sess.rx);
    c->last_ping = kt_now();
    return 0;
}

static void
note_latency(struct stats *st, struct fconn *c)
{
    if (c->last_result > 0) {
        if (st->nlat == st->caplat) {
            st->caplat = st->caplat ? st->caplat * 2 : 4096;
            st->lat = realloc(st->lat, st->caplat * sizeof(double));
            if (st->lat == NULL)
                abort();
        }
        st->lat[st->nlat++] = kt_now() - c->last_result;
    }
    c->last_result = 0;
}

/* Costs around 100 us, spread like real repeats: finite and positive, as
 * the tracker requires (one per repeat). */
static void
set_costs(struct kt_msg *r, long long repeat, unsigned *seed)
{
    char buf[64 * 24];
    size_t n = 0;
    double base = 5e-5 + (rand_r(seed) % 1000) * 1e-7;
    long long i;

    for (i = 0; i < repeat; i++)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%.9g", i ? "," : "",
                              base * (1 + (rand_r(seed) % 100) * 1e-4));
    kt_msg_set(r, "costs", buf);
    kt_msg_setf(r, "cost", "%.9g", base);
    kt_msg_set(r, "cv", "0.005");
}

static int
answer(struct fconn *c, const struct kt_msg *m, struct stats *st,
       unsigned *seed)
{
    static const unsigned char fake_so[] = "\177ELF fake kernel for load tests";
    const char *t = kt_msg_type(m), *id = kt_msg_get(m, "id");
    struct kt_msg r;
    char err[200];
    long long repeat;
    int rc;

    if (strcmp(t, "build") != 0 && strcmp(t, "run") != 0)
        return 0; /* pong */
    note_latency(st, c);
    if (id == NULL) {
        st->bad++;
        return -1;
    }
    kt_msg_init(&r, "result");
    kt_msg_set(&r, "id", id);
    kt_msg_set(&r, "err_no", "0");
    if (strcmp(t, "build") == 0) {
        st->builds++;
        kt_msg_set(&r, "stage", "build");
        kt_msg_set(&r, "build_s", "0.001");
        kt_msg_set_payload(&r, fake_so, sizeof(fake_so));
    } else {
        st->runs++;
        if (kt_msg_get_ll(m, "repeat", 0, 3, 1, KT_RUN_MAX_REPEAT, &repeat, err,
                          sizeof(err)) < 0) {
            st->bad++;
            repeat = 3;
        }
        kt_msg_set(&r, "stage", "run");
        kt_msg_set(&r, "run_s", "0.001");
        set_costs(&r, repeat, seed);
    }
    rc = kt_wire_send_sealed(c->fd, &r, &c->sess.tx);
    kt_msg_free(&r);
    c->last_result = kt_now();
    return rc;
}

/* Reads what the tracker sent on c and answers every whole job. */
static int
conn_readable(struct fconn *c, struct stats *st, unsigned *seed)
{
    unsigned char *room;
    size_t cap;
    ssize_t n;
    struct kt_msg m;
    char err[256];
    int rc;

    if (kt_reader_room(&c->rd, &room, &cap) < 0)
        return -1;
    n = read(c->fd, room, cap);
    if (n <= 0)
        return n < 0 && errno == EINTR ? 0 : -1;
    kt_reader_commit(&c->rd, (size_t)n);
    while ((rc = kt_reader_next(&c->rd, &m, err, sizeof(err))) == 1) {
        rc = answer(c, &m, st, seed);
        kt_msg_free(&m);
        if (rc < 0)
            return rc;
    }
    if (rc < 0)
        fprintf(stderr, "fake_worker: bad frame: %s\n", err);
    return rc;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double
pct(const struct stats *st, double p)
{
    size_t i;

    if (st->nlat == 0)
        return NAN;
    i = (size_t)(p / 100.0 * (double)(st->nlat - 1) + 0.5);
    return st->lat[i];
}

static void
report(FILE *f, struct stats *st, int conns)
{
    qsort(st->lat, st->nlat, sizeof(double), cmp_double);
    fprintf(f,
            "connections %d builds %lu runs %lu bad %lu\n"
            "dispatch_latency_ms n %zu p50 %.3f p90 %.3f p99 %.3f max %.3f\n",
            conns, st->builds, st->runs, st->bad, st->nlat, pct(st, 50) * 1e3,
            pct(st, 90) * 1e3, pct(st, 99) * 1e3, pct(st, 100) * 1e3);
}

static void
ping_due(struct fconn *c, double now)
{
    struct kt_msg p;

    if (now - c->last_ping < PING_S)
        return;
    kt_msg_init(&p, "ping");
    if (kt_wire_send_sealed(c->fd, &p, &c->sess.tx) < 0)
        fprintf(stderr, "fake_worker: ping failed\n");
    kt_msg_free(&p);
    c->last_ping = now;
}

static int
serve(struct fconn *cs, int n, struct stats *st)
{
    struct pollfd pf[MAX_CONNS];
    unsigned seed = 12345;
    int i, live = n;

    while (!stop_flag && live > 0) {
        double now = kt_now();
        for (i = 0; i < n; i++) {
            pf[i].fd = cs[i].fd;
            pf[i].events = POLLIN;
            pf[i].revents = 0;
            if (cs[i].fd >= 0)
                ping_due(&cs[i], now);
        }
        if (poll(pf, (nfds_t)n, 200) < 0 && errno != EINTR)
            return -1;
        for (i = 0; i < n; i++) {
            if (cs[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (conn_readable(&cs[i], st, &seed) < 0) {
                fprintf(stderr, "fake_worker: connection %d closed\n", i);
                close(cs[i].fd);
                cs[i].fd = -1;
                live--;
            }
        }
    }
    return live == n ? 0 : -1;
}

static const char *
arg(int argc, char **argv, const char *name)
{
    int i;

    for (i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return NULL;
}

int
main(int argc, char **argv)
{
    const char *tracker = arg(argc, argv, "--tracker");
    const char *key = arg(argc, argv, "--key");
    const char *tokf = arg(argc, argv, "--token-file");
    const char *conns_s = arg(argc, argv, "--conns");
    const char *stats_path = arg(argc, argv, "--stats");
    char host[256], err[256], token[512];
    struct fconn *cs;
    struct stats st;
    struct sigaction sa;
    int port, n, i, rc;

    if (!tracker || !key || !tokf || !conns_s) {
        fprintf(stderr, "usage: fake_worker --tracker HOST:PORT --key KEY "
                        "--token-file F --conns N [--stats FILE]\n");
        return 2;
    }
    n = atoi(conns_s);
    if (n < 1 || n > MAX_CONNS ||
        kt_hostport_parse(tracker, host, sizeof(host), &port, err,
                          sizeof(err)) < 0 ||
        kt_token_read(tokf, token, sizeof(token), err, sizeof(err)) < 0) {
        fprintf(stderr,
                "fake_worker: bad --conns (1..%d), --tracker or "
                "--token-file: %s\n",
                MAX_CONNS, err);
        return 2;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    memset(&st, 0, sizeof(st));
    cs = calloc((size_t)n, sizeof(*cs));
    for (i = 0; i < n; i++)
        if (conn_open(&cs[i], host, port, key, token, i) < 0)
            return 1;
    fprintf(stderr, "fake_worker: %d connections registered under key %s\n", n,
            key);
    rc = serve(cs, n, &st);
    report(stdout, &st, n);
    if (stats_path) {
        FILE *f = fopen(stats_path, "w");
        if (f) {
            report(f, &st, n);
            fclose(f);
        }
    }
    for (i = 0; i < n; i++) {
        if (cs[i].fd >= 0)
            close(cs[i].fd);
        kt_reader_free(&cs[i].rd);
    }
    free(cs);
    free(st.lat);
    return rc < 0 || st.bad ? 1 : 0;
}
