/* fuzz_config.c - libFuzzer target for the config loaders: the input is
 * the text of a file, read both as a model config and as kerntuned.json.
 * A load either succeeds with a complete config whose counts and enums are
 * in range, or fails with no config and a message that names the file; it
 * never crashes, whatever the nesting, size or encoding of the text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_PATH "fuzz.json"

/* Failures must leave nothing behind and say which file is wrong. */
static void
check_failure(int rc, const void *out, const char *err)
{
    if (rc >= 0 || out != NULL || strncmp(err, FUZZ_PATH, strlen(FUZZ_PATH)))
        abort();
}

static void
check_model(const struct kt_model_conf *m)
{
    struct kt_buf b;
    int i;

    if (m->name == NULL || m->target.cc == NULL || m->target.key == NULL ||
        m->nlayers < 0 || m->nlayers > KT_CONFIG_MAX_LAYERS || m->ntasks < 0 ||
        m->ntasks > KT_CONFIG_MAX_TASKS)
        abort();
    for (i = 0; i < m->nlayers; i++)
        if (m->layers[i].op < 0 || m->layers[i].op >= KT_LAYER_NOPS ||
            m->layers[i].index != i)
            abort();
    for (i = 0; i < m->ntasks; i++)
        if (m->tasks[i].name == NULL || m->tasks[i].compute.n < 0)
            abort();
    /* Every string of the target is read when building its identity. */
    kt_buf_init(&b);
    kt_target_id(&m->target, &b);
    kt_buf_free(&b);
}

static void
check_daemon(const struct kt_daemon_conf *d)
{
    if (d->listen == NULL || d->listen_host == NULL || d->listen_port < 0 ||
        d->listen_port > 65535 || d->database == NULL ||
        d->control_socket == NULL)
        abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kt_model_conf *m;
    struct kt_daemon_conf *d;
    char *text, err[512];
    int rc;

    text = kt_xmalloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';

    err[0] = '\0';
    rc = kt_model_conf_parse(FUZZ_PATH, text, &m, err, sizeof(err));
    if (rc == KT_OK && m != NULL)
        check_model(m);
    else
        check_failure(rc, m, err);
    kt_model_conf_free(m);

    err[0] = '\0';
    rc = kt_daemon_conf_parse(FUZZ_PATH, text, &d, err, sizeof(err));
    if (rc == KT_OK && d != NULL)
        check_daemon(d);
    else
        check_failure(rc, d, err);
    kt_daemon_conf_free(d);

    free(text);
    return 0;
}
