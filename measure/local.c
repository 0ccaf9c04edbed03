/* local.c - local worker processes: the embedded default, where the daemon
 * starts kerntune-rpc itself and the workers connect back over 127.0.0.1
 * with the tracker's token in their environment (never on the command
 * line, where ps would show it). */
#include "measure/tracker_int.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

#define KILL_AFTER_MS 3000

void
kt_measure_find_rpc(char *out, size_t len)
{
    const char *env = getenv("KERNTUNE_RPC");
    char exe[4096];
    size_t n = sizeof(exe);

    if (env != NULL && env[0] != '\0') {
        snprintf(out, len, "%s", env);
        return;
    }
    if (uv_exepath(exe, &n) == 0) {
        char *slash = strrchr(exe, '/');
        if (slash != NULL) {
            slash[1] = '\0';
            if ((size_t)snprintf(out, len, "%skerntune-rpc", exe) < len &&
                access(out, X_OK) == 0)
                return;
        }
    }
    snprintf(out, len, "kerntune-rpc");
}

static void
proc_closed(uv_handle_t *h)
{
    struct kt__local *l = (struct kt__local *)h;

    l->closed = 1;
    kt__handle_closed(h);
}

static int
all_exited(const struct kt_tracker *t)
{
    int i;

    for (i = 0; i < t->nlocal; i++)
        if (t->local[i].running)
            return 0;
    return 1;
}

static void
finish_stop(struct kt_tracker *t)
{
    uv_timer_stop(&t->killer);
    if (!uv_is_closing((uv_handle_t *)&t->killer))
        uv_close((uv_handle_t *)&t->killer, kt__handle_closed);
}

static void
on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
    struct kt__local *l = (struct kt__local *)p;
    struct kt_tracker *t = l->t;
    double now = kt_now();

    l->running = 0;
    if (!t->closing) {
        /* A kernel may kill its worker (kill(getppid())): start another,
         * backing off while it keeps dying young. */
        l->backoff_ms = now - l->started > KT__LOCAL_STABLE_S
                            ? KT__LOCAL_BACKOFF_MIN_MS
                        : l->backoff_ms * 2 > KT__LOCAL_BACKOFF_MAX_MS
                            ? KT__LOCAL_BACKOFF_MAX_MS
                            : l->backoff_ms * 2;
        l->restart_at = now + l->backoff_ms / 1000.0;
        log_warnx("tracker: local worker pid %d exited (status %lld, "
                  "signal %d); restarting it in %d ms",
                  p->pid, (long long)status, sig, l->backoff_ms);
    }
    if (!l->closing) {
        l->closing = 1;
        uv_close((uv_handle_t *)p, proc_closed);
    }
    if (t->closing && all_exited(t))
        finish_stop(t);
}

/* The token bound to the local workers' key, NULL before one is. */
static const char *
local_token(const struct kt_tracker *t)
{
    int i;

    for (i = 0; i < t->nkeytok; i++)
        if (strcmp(t->keytok[i].key, t->local_key) == 0)
            return t->keytok[i].token;
    return NULL;
}

/* Starts local worker l (index i) with the tracker's spawn settings. */
static int
spawn_one(struct kt_tracker *t, struct kt__local *l, int i, char *err,
          size_t errlen)
{
    char tracker[96], keyarg[96], rolesarg[64], namearg[64], jobsarg[32];
    char tokenv[300];
    char **env;
    char *args[9];
    size_t ne = 0, k;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    uv_process_options_t po;
    uv_stdio_container_t stdio[3];
    int rc;

    while (environ[ne] != NULL)
        ne++;
    env = kt_xcalloc(ne + 2, sizeof(char *));
    /* Our token replaces any KERNTUNE_TOKEN we were started with: a
     * worker reads the first one. */
    for (k = 0, ne = 0; environ[k] != NULL; k++)
        if (strncmp(environ[k], "KERNTUNE_TOKEN=", 15) != 0)
            env[ne++] = environ[k];
    snprintf(tokenv, sizeof(tokenv), "KERNTUNE_TOKEN=%s", local_token(t));
    env[ne] = tokenv;
    snprintf(tracker, sizeof(tracker), "--tracker=127.0.0.1:%d", t->port);
    snprintf(keyarg, sizeof(keyarg), "--key=%.80s", t->local_key);
    snprintf(rolesarg, sizeof(rolesarg), "--roles=%.50s", t->local_roles);
    snprintf(namearg, sizeof(namearg), "--name=local-%d", i);
    /* One build slot per core: the tracker still never builds beside a
     * timing run on this host, so builds overlap only each other. */
    snprintf(jobsarg, sizeof(jobsarg), "--jobs=%ld",
             ncpu < 1    ? 1L
             : ncpu > 16 ? 16L
                         : ncpu);
    args[0] = t->local_path;
    args[1] = "server";
    args[2] = tracker;
    args[3] = keyarg;
    args[4] = rolesarg;
    args[5] = namearg;
    args[6] = "--exit-with-parent";
    args[7] = jobsarg;
    args[8] = NULL;
    memset(&po, 0, sizeof(po));
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = 2;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = 2;
    po.file = t->local_path;
    po.args = args;
    po.env = env;
    po.stdio = stdio;
    po.stdio_count = 3;
    po.exit_cb = on_exit_cb;
    l->t = t;
    l->closing = l->closed = 0;
    l->restart_at = 0;
    l->started = kt_now();
    rc = uv_spawn(t->loop, &l->proc, &po);
    l->proc.data = t;
    t->open_handles++;
    free(env);
    if (rc < 0) {
        l->closing = 1;
        uv_close((uv_handle_t *)&l->proc, proc_closed);
        return kt_seterr(err, errlen, rc, "cannot start local worker %s: %s",
                         t->local_path, uv_strerror(rc));
    }
    l->running = 1;
    log_info("tracker: started local worker %s pid %d", t->local_path,
             l->proc.pid);
    return 0;
}

int
kt_tracker_spawn_local(struct kt_tracker *t, int n, const char *rpc_path,
                       const char *key, const char *roles, char *err,
                       size_t errlen)
{
    int k, rc = 0;

    if (n < 0 || t->nlocal + n > KT__MAX_LOCAL)
        return kt_seterr(err, errlen, KT_EINVAL, "local workers: at most %d",
                         KT__MAX_LOCAL);
    if (rpc_path == NULL)
        kt_measure_find_rpc(t->local_path, sizeof(t->local_path));
    else
        snprintf(t->local_path, sizeof(t->local_path), "%s", rpc_path);
    snprintf(t->local_key, sizeof(t->local_key), "%s", key ? key : "local");
    snprintf(t->local_roles, sizeof(t->local_roles), "%s",
             roles ? roles : "build,run");
    if (local_token(t) == NULL) {
        if (kt_auth_nonce(t->local_token) < 0)
            return kt_seterr(err, errlen, KT_EIO,
                             "no random bytes for the "
                             "local workers' token (getrandom failed)");
        if (kt__bind_key_token(t, t->local_key, t->local_token) < 0)
            return kt_seterr(err, errlen, KT_EINVAL,
                             "cannot bind a token to "
                             "local key '%s'",
                             t->local_key);
    }
    for (k = 0; k < n && rc == 0; k++) {
        struct kt__local *l = &t->local[t->nlocal];
        memset(l, 0, sizeof(*l));
        l->backoff_ms = KT__LOCAL_BACKOFF_MIN_MS;
        rc = spawn_one(t, l, t->nlocal, err, errlen);
        t->nlocal++;
    }
    return rc;
}

void
kt__local_tick(struct kt_tracker *t, double now)
{
    char err[256];
    int i;

    for (i = 0; i < t->nlocal && !t->closing; i++) {
        struct kt__local *l = &t->local[i];
        if (l->running || l->restart_at <= 0 || now < l->restart_at ||
            !l->closed)
            continue;
        if (spawn_one(t, l, i, err, sizeof(err)) < 0) {
            log_warnx("tracker: %s", err);
            l->restart_at = now + KT__LOCAL_BACKOFF_MAX_MS / 1000.0;
        }
    }
}

int
kt_tracker_local_pids(const struct kt_tracker *t, int *pids, int max)
{
    int i, n = 0;

    for (i = 0; i < t->nlocal && n < max; i++)
        if (t->local[i].running)
            pids[n++] = t->local[i].proc.pid;
    return n;
}

static void
on_killer(uv_timer_t *h)
{
    struct kt_tracker *t = h->data;
    int i;

    for (i = 0; i < t->nlocal; i++)
        if (t->local[i].running) {
            log_warnx("tracker: local worker pid %d ignored SIGTERM; "
                      "killing it",
                      t->local[i].proc.pid);
            uv_process_kill(&t->local[i].proc, SIGKILL);
        }
}

void
kt__local_stop(struct kt_tracker *t)
{
    int i;

    for (i = 0; i < t->nlocal; i++)
        if (t->local[i].running)
            uv_process_kill(&t->local[i].proc, SIGTERM);
    if (all_exited(t))
        finish_stop(t);
    else
        uv_timer_start(&t->killer, on_killer, KILL_AFTER_MS, 0);
}
