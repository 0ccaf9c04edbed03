/* status.c - `kerntune rpc-status`: ask a tracker for its workers and
 * queues and print them like TVM's query_rpc_tracker.  Blocking POSIX
 * sockets; used by the CLI, never on the loop thread. */
#include "measure/measure.h"

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
    fprintf(out, "%-12s %6s %6s %8s %8s\n", "key", "total", "free",
            "pending", "active");
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

int
kt_rpc_status(const char *host, int port, const char *token, FILE *out,
              char *err, size_t errlen)
{
    struct kt_msg m, hello;
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
    kt_msg_init(&m, "status_req");
    rc = kt_wire_send_sealed(fd, &m, &sess.tx);
    kt_msg_free(&m);
    if (rc < 0) {
        kt_seterr(err, errlen, rc, "send to %s:%d: %s", host, port,
                  kt_strerror(rc));
        goto out;
    }
    rc = kt_wire_recv_sealed(fd, &m, &sess.rx, 10000, err, errlen);
    if (rc < 0)
        goto out;
    if (strcmp(kt_msg_type(&m), "status") != 0) {
        rc = kt_seterr(err, errlen, KT_EPROTO, "tracker %s:%d: %s", host,
                       port,
                       kt_msg_get(&m, "reason") ? kt_msg_get(&m, "reason")
                                                : kt_msg_type(&m));
        kt_msg_free(&m);
        goto out;
    }
    print_status(&m, host, port, out);
    kt_msg_free(&m);
out:
    close(fd);
    return rc;
}
