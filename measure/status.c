/* status.c - `kerntune rpc-status`: ask a tracker for its workers and
 * queues and print them like TVM's query_rpc_tracker.  Blocking POSIX
 * sockets; used by the CLI, never on the loop thread. */
#include "measure/measure.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *
field(const struct kt_msg *m, const char *prefix, int i, const char *name)
{
    char k[64];
    const char *v;

    snprintf(k, sizeof(k), "%s.%d.%s", prefix, i, name);
    v = kt_msg_get(m, k);
    return v ? v : "?";
}

static void
print_status(const struct kt_msg *m, const char *host, int port, FILE *out)
{
    long long nw = 0, nq = 0;
    int i, j;

    (void)kt_msg_get_ll(m, "workers", 0, 0, 0, 100000, &nw, NULL, 0);
    (void)kt_msg_get_ll(m, "queues", 0, 0, 0, 100000, &nq, NULL, 0);
    fprintf(out, "Tracker address %s:%d\n\n", host, port);
    fprintf(out, "Server List\n");
    fprintf(out, "------------------------------------------------------------"
                 "------------------------------\n");
    fprintf(out, "%-12s %-20s %-14s %-10s %-8s %5s %6s  %s\n", "key", "name",
            "state", "roles", "arch", "cores", "done", "address");
    fprintf(out, "------------------------------------------------------------"
                 "------------------------------\n");
    /* Grouped by key, in the order keys first appear. */
    for (i = 0; i < nw; i++) {
        const char *key = field(m, "w", i, "key");
        int seen = 0;
        for (j = 0; j < i; j++)
            if (strcmp(field(m, "w", j, "key"), key) == 0)
                seen = 1;
        if (seen)
            continue;
        for (j = i; j < nw; j++) {
            if (strcmp(field(m, "w", j, "key"), key) != 0)
                continue;
            fprintf(out, "%-12s %-20s %-14s %-10s %-8s %5s %6s  %s\n", key,
                    field(m, "w", j, "name"), field(m, "w", j, "state"),
                    field(m, "w", j, "roles"), field(m, "w", j, "arch"),
                    field(m, "w", j, "cores"), field(m, "w", j, "done"),
                    field(m, "w", j, "peer"));
        }
    }
    fprintf(out, "------------------------------------------------------------"
                 "------------------------------\n\n");
    fprintf(out, "Queue Status\n");
    fprintf(out, "----------------------------------------------\n");
    fprintf(out, "%-12s %6s %6s %8s %8s\n", "key", "total", "free", "pending",
            "active");
    fprintf(out, "----------------------------------------------\n");
    for (i = 0; i < nw; i++) {
        const char *key = field(m, "w", i, "key");
        int seen = 0, total = 0, idle = 0;
        const char *pending = "0", *active = "0";
        for (j = 0; j < i; j++)
            if (strcmp(field(m, "w", j, "key"), key) == 0)
                seen = 1;
        if (seen)
            continue;
        for (j = i; j < nw; j++)
            if (strcmp(field(m, "w", j, "key"), key) == 0) {
                total++;
                idle += strcmp(field(m, "w", j, "state"), "idle") == 0;
            }
        for (j = 0; j < nq; j++)
            if (strcmp(field(m, "q", j, "key"), key) == 0) {
                pending = field(m, "q", j, "pending");
                active = field(m, "q", j, "active");
            }
        fprintf(out, "%-12s %6d %6d %8s %8s\n", key, total, idle, pending,
                active);
    }
    /* Keys with queued work and no worker at all. */
    for (j = 0; j < nq; j++) {
        const char *key = field(m, "q", j, "key");
        int has = 0;
        for (i = 0; i < nw; i++)
            if (strcmp(field(m, "w", i, "key"), key) == 0)
                has = 1;
        if (!has)
            fprintf(out, "%-12s %6d %6d %8s %8s\n", key, 0, 0,
                    field(m, "q", j, "pending"), field(m, "q", j, "active"));
    }
    fprintf(out, "----------------------------------------------\n");
}

/* Asks for the status page by page (the tracker sends 64 workers at a
 * time) and gathers the workers into all as w.0 ... w.N-1, with the
 * queues of the last page. */
static int
fetch_status(int fd, struct kt_session *sess, struct kt_msg *all, char *err,
             size_t errlen)
{
    long long from = 0, total = 0, n;
    struct kt_msg m;
    char k[64];
    int i, rc;

    do {
        kt_msg_init(&m, "status_req");
        kt_msg_setf(&m, "from", "%lld", from);
        rc = kt_wire_send_sealed(fd, &m, &sess->tx);
        kt_msg_free(&m);
        if (rc < 0)
            return kt_seterr(err, errlen, rc, "send: %s", kt_strerror(rc));
        rc = kt_wire_recv_sealed(fd, &m, &sess->rx, 10000, err, errlen);
        if (rc < 0)
            return rc;
        if (strcmp(kt_msg_type(&m), "status") != 0) {
            rc = kt_seterr(err, errlen, KT_EPROTO, "%s",
                           kt_msg_get(&m, "reason") ? kt_msg_get(&m, "reason")
                                                    : kt_msg_type(&m));
            kt_msg_free(&m);
            return rc;
        }
        if (kt_msg_get_ll(&m, "workers", 0, 0, 0, 100000, &n, err, errlen) < 0 ||
            kt_msg_get_ll(&m, "total", 0, n, 0, 1 << 30, &total, err, errlen) <
                0) {
            kt_msg_free(&m);
            return KT_EPROTO;
        }
        for (i = 0; i < m.nkv; i++) {
            int idx, off;
            if (sscanf(m.keys[i], "w.%d.%n", &idx, &off) == 1) {
                snprintf(k, sizeof(k), "w.%lld.%s", from + idx,
                         m.keys[i] + off);
                kt_msg_set(all, k, m.vals[i]);
            } else if (m.keys[i][0] == 'q' ||
                       strcmp(m.keys[i], "queues") == 0) {
                kt_msg_set(all, m.keys[i], m.vals[i]);
            }
        }
        kt_msg_free(&m);
        from += n;
    } while (n > 0 && from < total);
    kt_msg_setf(all, "workers", "%lld", from);
    return 0;
}

int
kt_rpc_status(const char *host, int port, const char *token, FILE *out,
              char *err, size_t errlen)
{
    struct kt_msg m, hello, all;
    struct kt_peer_hello ph;
    struct kt_session sess;
    int fd, rc;

    fd = kt_wire_connect(host, port, err, errlen);
    if (fd < 0)
        return fd;
    kt_msg_init(&hello, "hello");
    ph.token = token;
    ph.kind = "client";
    ph.hello = &hello;
    rc = kt_session_connect(fd, &ph, &m, &sess, err, errlen);
    kt_msg_free(&hello);
    if (rc < 0)
        goto out;
    kt_msg_free(&m);
    kt_msg_init(&all, "status");
    rc = fetch_status(fd, &sess, &all, err, errlen);
    if (rc < 0) {
        char why[256];
        snprintf(why, sizeof(why), "%s", err);
        kt_seterr(err, errlen, rc, "tracker %s:%d: %s", host, port, why);
    } else
        print_status(&all, host, port, out);
    kt_msg_free(&all);
out:
    close(fd);
    return rc;
}
