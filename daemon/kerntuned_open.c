/* kerntuned_open.c - what the daemon checks and opens before it serves:
 * the files of `kerntuned -t`, then the database, the tracker (with its
 * tokens and local workers), the engine and the control socket. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/kerntuned_int.h"

/* Entry i of a "KEY=VALUE" list: *key (malloc'd) and *value (in entry). */
static int
split_entry(const struct kt_strlist *l, int i, const char *form, char **key,
            const char **value, char *err, size_t errlen)
{
    const char *eq = strchr(l->v[i], '=');

    if (l->n > 32)
        return kt_seterr(err, errlen, KT_ECONFIG, "at most 32 entries");
    if (eq == NULL || eq == l->v[i] || eq[1] == '\0')
        return kt_seterr(err, errlen, KT_ECONFIG, "entry %d '%s' is not %s", i,
                         l->v[i], form);
    *key = kt_xstrdup(l->v[i]);
    (*key)[eq - l->v[i]] = '\0';
    *value = eq + 1;
    return 0;
}

/* "KEY=TOKEN_FILE" entries into tokens (their strings are malloc'd and
 * stay for the daemon's lifetime). */
static int
read_key_tokens(const struct kt_strlist *l, struct kt_key_token *tokens,
                char *err, size_t errlen)
{
    char buf[1024], *key;
    const char *file;
    int i;

    for (i = 0; i < l->n; i++) {
        if (split_entry(l, i, "KEY=TOKEN_FILE", &key, &file, err, errlen) < 0)
            return KT_ECONFIG;
        tokens[i].key = key;
        if (kt_token_read(file, buf, sizeof(buf), err, errlen) < 0)
            return KT_ECONFIG;
        tokens[i].token = kt_xstrdup(buf);
    }
    return 0;
}

/* "KEY=BUILD_KEY" entries into builders (keys malloc'd; build keys point
 * into the config). */
static int
read_build_keys(const struct kt_strlist *l, struct kt_key_builder *builders,
                char *err, size_t errlen)
{
    char *key;
    int i;

    for (i = 0; i < l->n; i++) {
        if (split_entry(l, i, "KEY=BUILD_KEY", &key, &builders[i].build_key,
                        err, errlen) < 0)
            return KT_ECONFIG;
        builders[i].key = key;
    }
    return 0;
}

static void
free_build_keys(struct kt_key_builder *builders, int n)
{
    int i;

    for (i = 0; i < n; i++)
        free((char *)builders[i].key);
}

static void
free_key_tokens(struct kt_key_token *tokens, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        free((char *)tokens[i].key);
        free((char *)tokens[i].token);
    }
}

/* 127.0.0.0/8, ::1, ::ffff:127.x.y.z or "localhost". */
static int
is_loopback(const char *host)
{
    unsigned char a[16];

    if (strcmp(host, "localhost") == 0)
        return 1;
    if (inet_pton(AF_INET, host, a) == 1)
        return a[0] == 127;
    if (inet_pton(AF_INET6, host, a) != 1)
        return 0;
    if (memcmp(a, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0)
        return a[12] == 127;
    return memcmp(a, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1", 16) == 0;
}

/* The daemon never starts without its token; off loopback, say why that
 * matters (err holds the token file's problem). */
static void
explain_token(const struct kt_daemon_conf *conf, char *err, size_t errlen)
{
    char why[1024];

    if (is_loopback(conf->listen_host))
        return;
    snprintf(why, sizeof(why),
             "listen %s accepts workers from other hosts, which must prove "
             "the token of token_file: refusing to listen without it: %s",
             conf->listen, err);
    snprintf(err, errlen, "%s", why);
}

static char *
read_token(const char *path, char *err, size_t errlen)
{
    char buf[1024];

    if (kt_token_read(path, buf, sizeof(buf), err, errlen) < 0)
        return NULL;
    return kt_xstrdup(buf);
}

int
kt__daemon_check_files(const struct kt_daemon_conf *conf, char *err,
                       size_t errlen)
{
    char **names = NULL, *token, path[4096];
    int n = 0, i;

    if (conf->token_file != NULL) {
        token = read_token(conf->token_file, err, errlen);
        if (token == NULL) {
            explain_token(conf, err, errlen);
            return KT_ECONFIG;
        }
        free(token);
    }
    if (kt__daemon_list_models(conf->model_dir, &names, &n, err, errlen) !=
        KT_OK)
        return KT_ECONFIG;
    for (i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (conf->local_workers > 0 && conf->worker_path != NULL &&
        strchr(conf->worker_path, '/') != NULL &&
        access(conf->worker_path, X_OK) != 0)
        return kt_seterr(err, errlen, KT_ECONFIG, "worker_path %s: %s",
                         conf->worker_path, strerror(errno));
    if (conf->local_workers > 0 && conf->worker_path == NULL) {
        kt_measure_find_rpc(path, sizeof(path));
        if (strchr(path, '/') == NULL)
            log_info("kerntuned: local workers: %s is looked up in PATH", path);
    }
    return KT_OK;
}

int
kt__daemon_open(struct daemon *d, char **token, char *err, size_t errlen)
{
    struct kt_storage_opts so;
    struct kt_tracker_opts to;
    struct kt_engine_opts eo;
    struct kt_key_token keytoks[32] = {{NULL, NULL}};
    struct kt_key_builder builders[32] = {{NULL, NULL}};
    int rc;

    memset(&so, 0, sizeof(so));
    so.busy_timeout_ms = KT_ENGINE_DB_BUSY_MS;
    if (kt_storage_open(&d->db, d->conf->database, &so, err, errlen) != KT_OK)
        return KT_EDB;
    if (d->conf->token_file != NULL &&
        (*token = read_token(d->conf->token_file, err, errlen)) == NULL) {
        explain_token(d->conf, err, errlen);
        return KT_ECONFIG;
    }
    if (read_key_tokens(&d->conf->key_tokens, keytoks, err, errlen) < 0 ||
        read_build_keys(&d->conf->build_keys, builders, err, errlen) < 0) {
        free_key_tokens(keytoks, (int)KT_ARRAY_LEN(keytoks));
        free_build_keys(builders, (int)KT_ARRAY_LEN(builders));
        return KT_ECONFIG;
    }
    kt_tracker_default_opts(&to);
    to.host = d->conf->listen_host;
    to.port = d->conf->listen_port;
    to.token = *token;
    to.key_tokens = keytoks; /* copied by the tracker */
    to.nkey_tokens = d->conf->key_tokens.n;
    to.key_builders = builders; /* copied by the tracker */
    to.nkey_builders = d->conf->build_keys.n;
    to.max_retries = (int)d->conf->max_job_retries;
    to.heartbeat_lost_ms = (int)(d->conf->worker_timeout_s * 1000);
    rc = kt_tracker_new(&d->tracker, &d->loop, &to, err, errlen);
    free_key_tokens(keytoks, (int)KT_ARRAY_LEN(keytoks));
    free_build_keys(builders, (int)KT_ARRAY_LEN(builders));
    if (rc != KT_OK)
        return KT_EIO;
    /* worker_path NULL: next to this program, then PATH (as kerntune tune) */
    if (d->conf->local_workers > 0 &&
        kt_tracker_spawn_local(d->tracker, (int)d->conf->local_workers,
                               d->conf->worker_path, d->conf->local_worker_key,
                               "build,run", err, errlen) != KT_OK)
        return KT_EIO;
    memset(&eo, 0, sizeof(eo));
    eo.loop = &d->loop;
    eo.db = d->db;
    eo.tracker = d->tracker;
    if (d->conf->local_workers > 0)
        eo.local_key = d->conf->local_worker_key;
    eo.log_dir = d->conf->log_dir;
    kt_engine_new(&d->engine, &eo);
    if (kt_ctl_new(&d->ctl, &d->loop, d->conf->control_socket,
                   kt__daemon_ctl_handle, d, err, errlen) != KT_OK)
        return KT_EIO;
    return KT_OK;
}
