/* daemon_conf.c - kerntuned.json: read through the key table, then split
 * and check "listen" and the paths. */
#include "config/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Splits "HOST:PORT" or "[v6]:PORT"; returns 0 or a message in why. */
int
kt_daemon_conf_parse(const char *path, const char *text,
                     struct kt_daemon_conf **out, char *err, size_t errlen)
{
    const struct kt__keytab *tabs[1] = {&kt__tab_daemon};
    static const char *const paths[] = {"token_file", "database", "log_dir",
                                        "model_dir", "control_socket"};
    struct kt_daemon_conf *d;
    struct kt__jdoc doc;
    char why[256];
    size_t i;
    int rc;

    *out = NULL;
    rc = kt__jdoc_parse(&doc, path, text, err, errlen);
    if (rc < 0)
        return rc;
    d = kt_xcalloc(1, sizeof(*d));
    d->path = kt_xstrdup(path);
    kt__keys_defaults(&kt__tab_daemon, d);
    rc = kt__keys_read(&doc, doc.root, "", tabs, 1, d);
    if (rc < 0)
        goto fail;
    /* Port 0 picks a free port: only local workers can find it then. */
    d->listen_host = kt_xmalloc(strlen(d->listen) + 1);
    if (kt_hostport_parse(d->listen, d->listen_host, strlen(d->listen) + 1,
                          &d->listen_port, why, sizeof(why)) != KT_OK) {
        rc = kt__jerr(&doc,
                      cJSON_GetObjectItemCaseSensitive(doc.root, "listen"),
                      "listen", "%s", why);
        goto fail;
    }
    for (i = 0; i < KT_ARRAY_LEN(paths); i++) {
        const struct kt__key *k = NULL;
        const char *v;
        int j;
        for (j = 0; j < kt__tab_daemon.nkeys; j++)
            if (strcmp(kt__tab_daemon.keys[j].name, paths[i]) == 0)
                k = &kt__tab_daemon.keys[j];
        v = *(char **)(void *)((char *)d + k->off);
        if (v[0] != '/') {
            rc = kt__jerr(&doc,
                          cJSON_GetObjectItemCaseSensitive(doc.root, paths[i]),
                          paths[i], "must be an absolute path (got \"%s\")", v);
            goto fail;
        }
    }
    /* The enum index counts from LOG_ERR in <syslog.h> order. */
    d->log_level += LOG_ERR;
    kt__jdoc_free(&doc);
    *out = d;
    return 0;
fail:
    kt__jdoc_free(&doc);
    kt_daemon_conf_free(d);
    return rc;
}

int
kt_daemon_conf_load(const char *path, struct kt_daemon_conf **out, char *err,
                    size_t errlen)
{
    char *text;
    int rc;
    *out = NULL;
    rc = kt__read_file(path, &text, err, errlen);
    if (rc < 0)
        return rc;
    rc = kt_daemon_conf_parse(path, text, out, err, errlen);
    free(text);
    return rc;
}

void
kt_daemon_conf_free(struct kt_daemon_conf *d)
{
    if (d == NULL)
        return;
    kt__keys_free(&kt__tab_daemon, d);
    free(d->listen_host);
    free(d->path);
    free(d);
}
