/* test_kerntuned.c - the daemon's model-dir listing: every *.json file,
 * sorted, however many there are (more than the daemon runs at once), and a
 * clear error for a dir that cannot be read. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/kerntuned_int.h"

static void
touch(const char *dir, const char *name)
{
    char path[256];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{}\n", f);
    fclose(f);
}

static void
test_list_models_has_no_cap(void **state)
{
    char dir[] = "/tmp/kt_models_XXXXXX", name[64], cmd[128], err[256];
    char **names = NULL;
    int n = 0, i, nfiles = KT_DAEMON_MAX_JOBS + 44;

    (void)state;
    assert_non_null(mkdtemp(dir));
    for (i = 0; i < nfiles; i++) {
        snprintf(name, sizeof(name), "m%04d.json", i);
        touch(dir, name);
    }
    touch(dir, ".hidden.json");
    touch(dir, "notes.txt");
    touch(dir, "x.json~");
    assert_int_equal(kt__daemon_list_models(dir, &names, &n, err, sizeof(err)),
                     KT_OK);
    assert_int_equal(n, nfiles);
    for (i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "%s/m%04d.json", dir, i);
        assert_string_equal(names[i], name); /* sorted */
        free(names[i]);
    }
    free(names);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void
test_list_models_missing_dir(void **state)
{
    char **names = NULL, err[256];
    int n = 7;

    (void)state;
    assert_int_equal(kt__daemon_list_models("/nonexistent/kt-models", &names,
                                            &n, err, sizeof(err)),
                     KT_ENOENT);
    assert_null(names);
    assert_int_equal(n, 0);
    assert_non_null(strstr(err, "/nonexistent/kt-models"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_models_has_no_cap),
        cmocka_unit_test(test_list_models_missing_dir),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
