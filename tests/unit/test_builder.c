/* test_builder.c - the worker's builder with the real compiler: a module in
 * parts (common.h's markers) has its shared part (metadata and reference)
 * compiled once per workload into the cache directory and linked into every
 * candidate's object, once even for candidates built at once; a module
 * without markers is built whole; a compile error in the shared part fails
 * the build and caches nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "measure/worker/worker.h"

#define PRELUDE                                                                \
    "#include <stdlib.h>\nstatic inline float twice(float x) "                 \
    "{ return x + x; }\n" KT_MODULE_PRELUDE_END

/* The shared part of a doubling workload; `extra` varies its text. */
static void
module(char *out, size_t n, const char *extra, const char *kernel_expr)
{
    snprintf(out, n,
             PRELUDE "const char kt_workload_hash[17] = \"00112233445566%s\";\n"
                     "const int kt_nbufs = 2;\n"
                     "void kt_reference(float *const *b) {\n"
                     "  for (int i = 0; i < 8; i++) b[1][i] = twice(b[0][i]); "
                     "}\n" KT_MODULE_SHARED_END
                     "void kt_reference(float *const *b);\n"
                     "void kt_kernel(float *const *b) {\n"
                     "  for (int i = 0; i < 8; i++) b[1][i] = %s; }\n",
             extra, kernel_expr);
}

/* Starts the build of src with compiler command cc in a fresh job
 * directory under root. */
static void
build_begin(const char *root, const char *cache, const char *cc,
            const char *src, char *job, size_t joblen, pid_t *pid, int *fd)
{
    static int seq;
    char err[256];

    snprintf(job, joblen, "%s/job%d", root, seq++);
    assert_int_equal(mkdir(job, 0700), 0);
    assert_int_equal(kt_build_start(job, cache, cc, src, strlen(src), 20000,
                                    pid, fd, err, sizeof(err)),
                     0);
}

/* Waits for a started build; returns the compiler's exit status and its
 * output in out. */
static int
build_end(pid_t pid, int fd, char *out, size_t outlen)
{
    size_t got = 0;
    int status;

    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        ssize_t r;
        (void)poll(&p, 1, 1000);
        r = read(fd, out + got, outlen - 1 - got);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            break;
        if (r > 0)
            got += (size_t)r;
    }
    out[got] = '\0';
    close(fd);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Builds src in a fresh job directory under root; returns the compiler's
 * exit status and its output in out. */
static int
build(const char *root, const char *cache, const char *src, char *job,
      size_t joblen, char *out, size_t outlen)
{
    pid_t pid;
    int fd;

    build_begin(root, cache, "cc -O1", src, job, joblen, &pid, &fd);
    return build_end(pid, fd, out, outlen);
}

/* How many cached shared objects ("ref-obj-*") dir holds. */
static int
cached_objects(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, "ref-obj-", 8) == 0;
    closedir(d);
    return n;
}

/* Loads job/kernel.so and checks kt_kernel and kt_reference on 1..8. */
static void
check_so(const char *job, float factor)
{
    char path[300];
    float in[8], out[8];
    float *bufs[2] = {in, out};
    void (*fn)(float *const *);
    void *so;
    int i;

    snprintf(path, sizeof(path), "%s/kernel.so", job);
    so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(so);
    for (i = 0; i < 8; i++)
        in[i] = (float)(i + 1);
    *(void **)&fn = dlsym(so, "kt_kernel");
    assert_non_null(fn);
    fn(bufs);
    for (i = 0; i < 8; i++)
        assert_true(out[i] == factor * in[i]);
    *(void **)&fn = dlsym(so, "kt_reference");
    assert_non_null(fn);
    fn(bufs);
    for (i = 0; i < 8; i++)
        assert_true(out[i] == 2 * in[i]);
    dlclose(so);
}

static int
exists(const char *job, const char *name)
{
    char path[512];

    snprintf(path, sizeof(path), "%s/%s", job, name);
    return access(path, F_OK) == 0;
}

/* A fresh root directory with an empty cache directory in it. */
static void
fresh_root(char *root, char *cache, size_t cachelen)
{
    assert_non_null(mkdtemp(root));
    snprintf(cache, cachelen, "%s/cache", root);
    assert_int_equal(mkdir(cache, 0700), 0);
}

static void
test_builder_shared_part_compiled_once(void **state)
{
    char root[] = "/tmp/kt-test-build.XXXXXX", cache[64], job[128];
    char src[2048], out[8192];

    (void)state;
    fresh_root(root, cache, sizeof(cache));

    /* First candidate: the shared part is compiled and cached. */
    module(src, sizeof(src), "77", "twice(b[0][i])");
    assert_int_equal(build(root, cache, src, job, sizeof(job), out, sizeof(out)),
                     0);
    check_so(job, 2);
    assert_true(exists(job, "shared.c"));
    assert_int_equal(cached_objects(cache), 1);

    /* Second candidate of the workload: linked with the cached object,
     * its shared part never written out, let alone compiled. */
    module(src, sizeof(src), "77", "3 * b[0][i]");
    assert_int_equal(build(root, cache, src, job, sizeof(job), out, sizeof(out)),
                     0);
    check_so(job, 3);
    assert_false(exists(job, "shared.c"));
    assert_true(exists(job, "shared.o"));
    assert_int_equal(cached_objects(cache), 1);

    /* Another workload gets its own object. */
    module(src, sizeof(src), "88", "twice(b[0][i])");
    assert_int_equal(build(root, cache, src, job, sizeof(job), out, sizeof(out)),
                     0);
    assert_true(exists(job, "shared.c"));
    assert_int_equal(cached_objects(cache), 2);

    /* A shared part that does not compile fails the build, names the
     * file, and leaves nothing in the cache. */
    module(src, sizeof(src), "99\" syntax error", "twice(b[0][i])");
    assert_int_not_equal(build(root, cache, src, job, sizeof(job), out,
                               sizeof(out)),
                         0);
    assert_non_null(strstr(out, "shared.c"));
    assert_false(exists(job, "kernel.so"));
    assert_int_equal(cached_objects(cache), 2);

    /* The objects are trimmed with the reference outputs. */
    assert_int_equal(kt_ref_cache_trim(cache, 0), 2);
    assert_int_equal(cached_objects(cache), 0);
    kt_rm_tree(root);
}

/* Candidates of one workload built at once (a task's first round) compile
 * the shared part once: the others wait for it and link the cached object;
 * a kernel that does not compile fails its own build only.  The compiler is
 * slowed by a wrapper so the builds surely overlap; a shared part that does
 * not compile fails every build that waited for it too. */
static void
test_builder_concurrent_builds_share_one_compile(void **state)
{
    char root[] = "/tmp/kt-test-build.XXXXXX", cache[64], cc[160];
    char job[3][128], src[2048], out[8192], path[64];
    const char *expr[3] = {"twice(b[0][i])", "3 * b[0][i]", "4 * no_such[i]"};
    pid_t pid[3];
    int fd[3], i, compiled_shared = 0;
    FILE *f;

    (void)state;
    fresh_root(root, cache, sizeof(cache));
    snprintf(path, sizeof(path), "%s/slowcc", root);
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\necho \"$*\" >> %s/cc.log\nsleep 0.3\nexec \"$@\"\n",
            root);
    fclose(f);
    assert_int_equal(chmod(path, 0700), 0);
    snprintf(cc, sizeof(cc), "%s cc -O1", path);

    for (i = 0; i < 3; i++) {
        module(src, sizeof(src), "77", expr[i]);
        build_begin(root, cache, cc, src, job[i], sizeof(job[i]), &pid[i],
                    &fd[i]);
    }
    for (i = 0; i < 2; i++) {
        assert_int_equal(build_end(pid[i], fd[i], out, sizeof(out)), 0);
        check_so(job[i], (float)(i + 2));
    }
    /* A kernel that does not compile fails its own build only. */
    assert_int_not_equal(build_end(pid[2], fd[2], out, sizeof(out)), 0);
    assert_non_null(strstr(out, "kernel.c"));
    assert_false(exists(job[2], "kernel.so"));
    snprintf(path, sizeof(path), "%s/cc.log", root);
    f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(out, sizeof(out), f) != NULL)
        compiled_shared += strstr(out, "shared.c") != NULL;
    fclose(f);
    assert_int_equal(compiled_shared, 1);
    assert_int_equal(cached_objects(cache), 1);

    for (i = 0; i < 2; i++) {
        module(src, sizeof(src), "99\" syntax error", expr[i]);
        build_begin(root, cache, cc, src, job[i], sizeof(job[i]), &pid[i],
                    &fd[i]);
    }
    for (i = 0; i < 2; i++) {
        assert_int_not_equal(build_end(pid[i], fd[i], out, sizeof(out)), 0);
        assert_non_null(strstr(out, "shared.c"));
        assert_false(exists(job[i], "kernel.so"));
    }
    assert_int_equal(cached_objects(cache), 1);
    kt_rm_tree(root);
}

/* Without a cache directory, or without the markers, a module is built as
 * one unit (what a worker did before modules had parts). */
static void
test_builder_whole_module(void **state)
{
    char root[] = "/tmp/kt-test-build.XXXXXX", cache[64], job[128];
    char src[2048], out[8192];

    (void)state;
    fresh_root(root, cache, sizeof(cache));
    module(src, sizeof(src), "77", "twice(b[0][i])");
    assert_int_equal(build(root, NULL, src, job, sizeof(job), out, sizeof(out)),
                     0);
    check_so(job, 2);
    assert_false(exists(job, "shared.o"));

    snprintf(src, sizeof(src),
             "const char kt_workload_hash[17] = \"0011223344556677\";\n"
             "void kt_reference(float *const *b) {\n"
             "  for (int i = 0; i < 8; i++) b[1][i] = 2 * b[0][i]; }\n"
             "void kt_kernel(float *const *b) {\n"
             "  for (int i = 0; i < 8; i++) b[1][i] = 4 * b[0][i]; }\n");
    assert_int_equal(build(root, cache, src, job, sizeof(job), out, sizeof(out)),
                     0);
    check_so(job, 4);
    assert_false(exists(job, "shared.o"));
    assert_int_equal(cached_objects(cache), 0);
    kt_rm_tree(root);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builder_shared_part_compiled_once),
        cmocka_unit_test(test_builder_concurrent_builds_share_one_compile),
        cmocka_unit_test(test_builder_whole_module),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
