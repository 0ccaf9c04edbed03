/* server_int.h - private to the worker: the connection and job-slot state
 * shared by server.c (connect, handshake, the poll loop) and
 * server_slots.c (build and run jobs in child processes). */
#ifndef KT_SERVER_INT_H
#define KT_SERVER_INT_H

#include "measure/worker/worker.h"

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

/* server.c */
int kt__srv_send(struct srv *v, const struct kt_msg *m);
/* server_slots.c */
void kt__slot_kill(struct slot *s);
void kt__start_build(struct srv *v, const struct kt_msg *m, const char *id);
void kt__start_run(struct srv *v, const struct kt_msg *m, const char *id);
/* Drains a child's pipe and reaps it; returns 1 when the slot finished. */
int kt__slot_poll(struct srv *v, struct slot *s, int readable);

#endif /* KT_SERVER_INT_H */
