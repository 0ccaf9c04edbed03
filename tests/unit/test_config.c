/* test_config.c - model and daemon config loaders: the bundled models, the
 * defaults, the table of bad configs in tests/fixtures/config (each file
 * with its expected message in expected.txt), and docs/config.md being in
 * step with the key tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "tests/support/ktt.h"

#define FIXDIR "tests/fixtures/config"

static void
test_config_bundled_models(void **state)
{
    static const char *const files[] = {"models/resnet50.json",
                                        "models/mobilenet_v2.json",
                                        "models/bert_base_layer.json",
                                        "models/tiny.json"};
    char err[1024];
    size_t i;
    (void)state;
    for (i = 0; i < KT_ARRAY_LEN(files); i++) {
        struct kt_model_conf *m = NULL;
        int rc = kt_model_conf_load(files[i], &m, err, sizeof(err));
        if (rc != 0)
            print_error("%s\n", err);
        assert_int_equal(rc, 0);
        assert_non_null(m->source);
        assert_true(m->nlayers + m->ntasks > 0);
        kt_model_conf_free(m);
    }
}

static void
test_config_defaults(void **state)
{
    struct kt_model_conf *m = NULL;
    char err[512];
    (void)state;
    assert_int_equal(kt_model_conf_parse("dir/small.json",
                                         "{\"layers\": [{\"op\": \"conv2d\", "
                                         "\"C\": 3, \"H\": 8, \"W\": 8, "
                                         "\"K\": 4, \"R\": 3, \"S\": 3}]}",
                                         &m, err, sizeof(err)),
                     0);
    assert_string_equal(m->name, "small");
    assert_string_equal(m->target.kind, "cpu");
    assert_string_equal(m->target.cc, "gcc");
    assert_int_equal(m->target.cflags.n, 3);
    assert_string_equal(m->target.cflags.v[1], "-march=native");
    assert_null(m->target.sysroot);
    assert_string_equal(m->target.key, "local");
    assert_int_equal(m->tuning.trials, 2000);
    assert_int_equal(m->tuning.measures_per_round, 64);
    assert_int_equal(m->tuning.strategy, KT_STRATEGY_GRADIENT);
    assert_int_equal(m->tuning.policy, KT_POLICY_SKETCH_XGB);
    assert_true(m->tuning.alpha == 0.2 && m->tuning.beta == 2.0);
    assert_int_equal(m->tuning.backward_window_size, 3);
    assert_int_equal(m->measure.repeat, 3);
    assert_int_equal(m->measure.min_repeat_ms, 100);
    assert_true(m->measure.run_timeout_s == 10.0);
    assert_int_equal(m->layers[0].N, 1);
    assert_int_equal(m->layers[0].stride[0], 1);
    assert_int_equal(m->layers[0].dilation[1], 1);
    assert_int_equal(m->layers[0].groups, 1);
    assert_int_equal(m->layers[0].repeat, 1);
    assert_int_equal(m->layers[0].line, 1);
    kt_model_conf_free(m);
}

static void
test_config_values(void **state)
{
    struct kt_model_conf *m = NULL;
    char *text, err[512];
    (void)state;
    text = ktt_slurp(NULL, "models/tiny.json", NULL);
    assert_non_null(text);
    assert_int_equal(kt_model_conf_parse("models/tiny.json", text, &m, err,
                                         sizeof(err)),
                     0);
    free(text);
    assert_string_equal(m->name, "tiny");
    assert_int_equal(m->tuning.seed, 7);
    assert_int_equal(m->nlayers, 6);
    assert_int_equal(m->layers[0].op, KT_LAYER_CONV2D);
    assert_int_equal(m->layers[0].epilogue, 1);
    assert_int_equal(m->layers[0].pad[0], 1);
    assert_int_equal(m->layers[2].repeat, 2);
    assert_int_equal(m->layers[2].epilogue, 3);
    assert_int_equal(m->layers[3].stride[0], 2); /* defaults to kernel */
    assert_int_equal(m->layers[5].bias_operand, 1);
    assert_int_equal(m->layers[5].nshape, 2);
    assert_int_equal(m->ntasks, 1);
    assert_string_equal(m->tasks[0].name, "gemm32");
    assert_int_equal(m->tasks[0].nshapes, 2);
    assert_int_equal(m->tasks[0].shapes[1].dims[0], 32);
    kt_model_conf_free(m);
}

static int
load_fixture(const char *file, char *err, size_t errlen)
{
    char path[512];
    snprintf(path, sizeof(path), FIXDIR "/%s", file);
    if (strncmp(file, "daemon_", 7) == 0) {
        struct kt_daemon_conf *d = NULL;
        int rc = kt_daemon_conf_load(path, &d, err, errlen);
        kt_daemon_conf_free(d);
        return rc;
    } else {
        struct kt_model_conf *m = NULL;
        int rc = kt_model_conf_load(path, &m, err, errlen);
        kt_model_conf_free(m);
        return rc;
    }
}

/* Every fixture must be listed in expected.txt and fail with a message
 * containing its expected text. */
static void
test_config_bad_fixtures(void **state)
{
    char *exp = ktt_slurp(NULL, FIXDIR "/expected.txt", NULL);
    DIR *dir = opendir(FIXDIR);
    struct dirent *de;
    int nfiles = 0, bad = 0;
    (void)state;
    assert_non_null(exp);
    assert_non_null(dir);
    while ((de = readdir(dir)) != NULL) {
        char key[300], err[1024], want[512];
        const char *line, *tab, *eol;
        size_t n = strlen(de->d_name);
        int rc;
        if (n < 6 || strcmp(de->d_name + n - 5, ".json") != 0)
            continue;
        nfiles++;
        snprintf(key, sizeof(key), "\n%s\t", de->d_name);
        line = strstr(exp, key);
        if (line == NULL) {
            print_error("%s: not listed in expected.txt\n", de->d_name);
            bad++;
            continue;
        }
        tab = line + strlen(key);
        eol = strchr(tab, '\n');
        snprintf(want, sizeof(want), "%.*s",
                 (int)(eol != NULL ? eol - tab : (long)strlen(tab)), tab);
        err[0] = '\0';
        rc = load_fixture(de->d_name, err, sizeof(err));
        if (rc >= 0 || strstr(err, want) == NULL) {
            print_error("%s: rc=%d\n  got:  %s\n  want: %s\n", de->d_name, rc,
                        err, want);
            bad++;
        }
    }
    closedir(dir);
    free(exp);
    assert_true(nfiles >= 25);
    assert_int_equal(bad, 0);
}

static void
test_config_missing_file(void **state)
{
    struct kt_model_conf *m = NULL;
    char err[512];
    (void)state;
    assert_int_equal(kt_model_conf_load("tests/fixtures/none.json", &m, err,
                                        sizeof(err)),
                     KT_ENOENT);
    assert_null(m);
    assert_non_null(strstr(err, "tests/fixtures/none.json: cannot open"));
}

static void
test_config_daemon(void **state)
{
    struct kt_daemon_conf *d = NULL;
    char err[512];
    (void)state;
    assert_int_equal(kt_daemon_conf_parse("kerntuned.json", "{}", &d, err,
                                          sizeof(err)),
                     0);
    assert_string_equal(d->listen_host, "127.0.0.1");
    assert_int_equal(d->listen_port, 9190);
    assert_string_equal(d->database, "/var/lib/kerntune/tune.db");
    assert_int_equal(d->local_workers, 1);
    assert_int_equal(d->log_level, LOG_INFO);
    kt_daemon_conf_free(d);
    assert_int_equal(kt_daemon_conf_parse("k.json",
                                          "{\"listen\": \"[::1]:7000\", "
                                          "\"threads\": 4, \"log_level\": "
                                          "\"debug\", \"local_workers\": 0}",
                                          &d, err, sizeof(err)),
                     0);
    assert_string_equal(d->listen_host, "::1");
    assert_int_equal(d->listen_port, 7000);
    assert_int_equal(d->threads, 4);
    assert_int_equal(d->log_level, LOG_DEBUG);
    assert_int_equal(d->local_workers, 0);
    kt_daemon_conf_free(d);
}

/* Siblings differ only in optimiser flags (-O levels, --param). */
static void
test_config_target_siblings(void **state)
{
    static const char old_default[] =
        "cpu:local:gcc -O3 -march=native -fopenmp";
    (void)state;
    assert_true(kt_target_siblings(old_default,
                                   "cpu:local:gcc -O3 "
                                   "--param=max-completely-peel-times=4 "
                                   "-march=native -fopenmp"));
    assert_true(kt_target_siblings(old_default,
                                   "cpu:local:gcc -O2 -march=native -fopenmp"));
    assert_true(kt_target_siblings(old_default, old_default));
    assert_false(
        kt_target_siblings(old_default,
                           "cpu:local:gcc -O3 -march=znver4 -fopenmp"));
    assert_false(
        kt_target_siblings(old_default,
                           "cpu:local:gcc -Ofast -march=native -fopenmp"));
    assert_false(
        kt_target_siblings(old_default,
                           "cpu:board:gcc -O3 -march=native -fopenmp"));
    assert_false(
        kt_target_siblings(old_default,
                           "cpu:local:clang -O3 -march=native -fopenmp"));
    assert_false(
        kt_target_siblings(old_default, "cpu:local:gcc -O3 -march=native"));
    assert_false(kt_target_siblings(old_default, "cpu:local"));
}

/* docs/config.md must carry the generated key tables verbatim. */
static void
test_config_docs_in_sync(void **state)
{
    struct kt_buf b;
    char *doc = ktt_slurp(NULL, "docs/config.md", NULL);
    (void)state;
    assert_non_null(doc);
    kt_buf_init(&b);
    kt_config_keys_markdown(&b);
    if (strstr(doc, b.p) == NULL) {
        FILE *f = fopen("build/config-keys.md", "w");
        if (f != NULL) {
            fputs(b.p, f);
            fclose(f);
        }
        print_error("docs/config.md lacks the current key tables; they were "
                    "written to build/config-keys.md\n");
        fail();
    }
    kt_buf_free(&b);
    free(doc);
}

/* "{"name": "deep", "a": " then depth '[' and as many ']' then "}". */
static char *
nested(int depth)
{
    char *t = malloc((size_t)depth * 2 + 64);
    int n;

    assert_non_null(t);
    n = sprintf(t, "{\"name\": \"deep\", \"a\": ");
    memset(t + n, '[', (size_t)depth);
    memset(t + n + depth, ']', (size_t)depth);
    strcpy(t + n + 2 * depth, "}");
    return t;
}

/* Nesting deeper than KT_CONFIG_MAX_DEPTH is refused before parsing, with
 * the position of the first bracket too deep; brackets in strings do not
 * count. */
static void
test_config_depth_limit(void **state)
{
    struct kt_model_conf *m = NULL;
    char err[512], *t;
    const int depths[] = {KT_CONFIG_MAX_DEPTH, 200000};
    int i;

    (void)state;
    for (i = 0; i < 2; i++) {
        t = nested(depths[i]);
        assert_int_equal(kt_model_conf_parse("deep.json", t, &m, err,
                                             sizeof(err)),
                         KT_EPARSE);
        assert_null(m);
        assert_string_equal(err, "deep.json:1:54: nesting deeper than 32 "
                                 "levels");
        free(t);
    }
    /* At the limit (the object plus 31 arrays) the nesting is fine: the
     * error is about the key. */
    t = nested(KT_CONFIG_MAX_DEPTH - 1);
    assert_int_not_equal(kt_model_conf_parse("deep.json", t, &m, err,
                                             sizeof(err)),
                         KT_OK);
    assert_null(strstr(err, "nesting"));
    free(t);
    t = malloc(KT_CONFIG_MAX_DEPTH * 2 + 64);
    assert_non_null(t);
    memset(t, '[', KT_CONFIG_MAX_DEPTH * 2);
    t[0] = '"';
    t[KT_CONFIG_MAX_DEPTH * 2 - 1] = '"';
    t[KT_CONFIG_MAX_DEPTH * 2] = '\0';
    assert_int_not_equal(kt_model_conf_parse("str.json", t, &m, err,
                                             sizeof(err)),
                         KT_OK);
    assert_null(strstr(err, "nesting"));
    free(t);
}

/* A config file above KT_CONFIG_MAX_BYTES is refused before it is read,
 * for models and for the daemon's own file. */
static void
test_config_size_limit(void **state)
{
    char path[] = "/tmp/kt_config_big_XXXXXX", err[512], want[256];
    struct kt_model_conf *m = NULL;
    struct kt_daemon_conf *d = NULL;
    FILE *f;
    int fd;

    (void)state;
    fd = mkstemp(path);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_non_null(f);
    fputs("{\"name\": \"big\"}", f);
    assert_int_equal(fseek(f, KT_CONFIG_MAX_BYTES, SEEK_SET), 0);
    fputc(' ', f); /* KT_CONFIG_MAX_BYTES + 1 bytes */
    fclose(f);
    snprintf(want, sizeof(want), "%s: file larger than %u bytes", path,
             KT_CONFIG_MAX_BYTES);
    assert_int_equal(kt_model_conf_load(path, &m, err, sizeof(err)),
                     KT_ETOOBIG);
    assert_string_equal(err, want);
    assert_int_equal(kt_daemon_conf_load(path, &d, err, sizeof(err)),
                     KT_ETOOBIG);
    assert_string_equal(err, want);
    /* In memory too (kt_model_conf_parse of a text that big). */
    {
        char *t = malloc(KT_CONFIG_MAX_BYTES + 2);
        assert_non_null(t);
        memset(t, ' ', KT_CONFIG_MAX_BYTES + 1);
        t[0] = '{';
        t[KT_CONFIG_MAX_BYTES] = '}';
        t[KT_CONFIG_MAX_BYTES + 1] = '\0';
        assert_int_equal(kt_model_conf_parse("mem.json", t, &m, err,
                                             sizeof(err)),
                         KT_ETOOBIG);
        assert_non_null(strstr(err, "mem.json: file larger than"));
        free(t);
    }
    unlink(path);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_bundled_models),
        cmocka_unit_test(test_config_defaults),
        cmocka_unit_test(test_config_values),
        cmocka_unit_test(test_config_bad_fixtures),
        cmocka_unit_test(test_config_missing_file),
        cmocka_unit_test(test_config_daemon),
        cmocka_unit_test(test_config_docs_in_sync),
        cmocka_unit_test(test_config_target_siblings),
        cmocka_unit_test(test_config_depth_limit),
        cmocka_unit_test(test_config_size_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
