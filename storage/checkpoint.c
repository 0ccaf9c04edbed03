/* checkpoint.c - WAL checkpoints on a background thread with its own
 * connection, so the loop thread's commits never wait for the copy into the
 * database file and its fsyncs.  The loop thread's connection has automatic
 * checkpoints off; its WAL hook wakes this thread when the WAL holds
 * KT__CKPT_FRAMES frames.  A failed checkpoint loses nothing (the WAL still
 * holds every commit); it is logged and retried on the next wake-up. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "storage/storage_int.h"

#define KT__CKPT_FRAMES 2000 /* about 8 MB of WAL */

struct kt__ckpt {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int wake, stop;
    sqlite3 *db;
    char *path;
};

static void *
ckpt_main(void *arg)
{
    struct kt__ckpt *c = arg;
    int rc, nlog = 0, nckpt = 0, stop;

    for (;;) {
        pthread_mutex_lock(&c->mu);
        while (!c->wake && !c->stop)
            pthread_cond_wait(&c->cv, &c->mu);
        c->wake = 0;
        stop = c->stop;
        pthread_mutex_unlock(&c->mu);
        if (stop)
            break;
        rc = sqlite3_wal_checkpoint_v2(c->db, "main", SQLITE_CHECKPOINT_PASSIVE,
                                       &nlog, &nckpt);
        if (rc != SQLITE_OK && rc != SQLITE_BUSY)
            log_warnx("storage: %s: checkpoint failed (the WAL keeps the "
                      "data; will retry): %s",
                      c->path, sqlite3_errmsg(c->db));
    }
    return NULL;
}

static int
wal_hook(void *arg, sqlite3 *db, const char *name, int nframes)
{
    struct kt__ckpt *c = arg;

    (void)db;
    (void)name;
    if (nframes >= KT__CKPT_FRAMES) {
        pthread_mutex_lock(&c->mu);
        c->wake = 1;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
    }
    return SQLITE_OK;
}

int
kt__ckpt_start(struct kt_storage *st, char *err, size_t errlen)
{
    struct kt__ckpt *c = kt_xcalloc(1, sizeof(*c));
    int rc;

    c->path = kt_xstrdup(st->path);
    rc = sqlite3_open_v2(st->path, &c->db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        rc = kt__dberr(c->db, rc, st->path, 0,
                       "opening the checkpoint connection", err, errlen);
        goto fail;
    }
    sqlite3_busy_timeout(c->db, st->busy_timeout_ms);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    rc = pthread_create(&c->thread, NULL, ckpt_main, c);
    if (rc != 0) {
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        rc = kt_seterr(err, errlen, -rc,
                       "storage: %s: cannot start the checkpoint thread: %s",
                       st->path, strerror(rc));
        goto fail;
    }
    /* Only now: the hook and the disabled auto-checkpoint go together. */
    sqlite3_wal_hook(st->db, wal_hook, c);
    st->ckpt = c;
    return 0;
fail:
    sqlite3_close(c->db);
    free(c->path);
    free(c);
    return rc;
}

void
kt__ckpt_stop(struct kt_storage *st)
{
    struct kt__ckpt *c = st->ckpt;

    if (c == NULL)
        return;
    sqlite3_wal_hook(st->db, NULL, NULL);
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    if (sqlite3_close(c->db) != SQLITE_OK)
        log_warnx("storage: %s: closing the checkpoint connection: %s", c->path,
                  sqlite3_errmsg(c->db));
    free(c->path);
    free(c);
    st->ckpt = NULL;
}
