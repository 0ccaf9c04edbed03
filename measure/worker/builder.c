/* builder.c - starts the target's compiler on one candidate.  The caller
 * (the worker loop) owns the child: it reads the pipe, enforces the
 * deadline by killing the process group, and reaps it. */
#include "measure/worker/worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define MAX_ARGS 128

static int
write_file(const char *path, const void *p, size_t n, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc;

    if (fd < 0)
        return kt_seterr(err, errlen, -errno, "open %s: %s", path,
                         strerror(errno));
    rc = kt_wire_write_all(fd, p, n);
    close(fd);
    if (rc < 0)
        return kt_seterr(err, errlen, rc, "write %s: %s", path,
                         kt_strerror(rc));
    return 0;
}

/* Offset just past the first occurrence of marker in p[0, n), or 0. */
static size_t
marker_end(const char *p, size_t n, const char *marker)
{
    size_t m = strlen(marker), i;

    for (i = 0; i + m <= n; i++)
        if (p[i] == marker[0] && memcmp(p + i, marker, m) == 0)
            return i + m;
    return 0;
}

/* A module in parts (KT_MODULE_PRELUDE_END, KT_MODULE_SHARED_END) is built
 * as two translation units: prelude + shared part (metadata and reference
 * kernel, the same for every candidate of a workload) into an object kept
 * in the cache directory, and prelude + kernel per candidate, linked with
 * it.  About a fifth of a conv module's compiler time is its reference. */
struct shared_obj {
    int use;           /* build in two units */
    int cached;        /* obj is a link to the cached object: no compile */
    char obj[512];     /* dir/shared.o */
    char cache[600];   /* cache_dir/ref-obj-<hash of cc and the part>.o */
    char publish[640]; /* cache + ".<job>", renamed onto cache */
};

static int
split_module(const char *dir, const char *cache_dir, const char *cc,
             const char *src, size_t n, const char *srcpath,
             struct shared_obj *so, char *err, size_t errlen)
{
    size_t prelude = marker_end(src, n, KT_MODULE_PRELUDE_END);
    size_t shared = marker_end(src, n, KT_MODULE_SHARED_END);
    char path[512], hex[17];
    struct kt_buf kernel;
    int rc;

    memset(so, 0, sizeof(*so));
    if (cache_dir == NULL || prelude == 0 || shared <= prelude)
        return write_file(srcpath, src, n, err, errlen);
    kt_hash_hex(kt_hash64(src, shared) ^ kt_hash_mix(kt_hash64(cc, strlen(cc))),
                hex);
    snprintf(so->obj, sizeof(so->obj), "%s/shared.o", dir);
    snprintf(so->cache, sizeof(so->cache), "%s/ref-obj-%s.o", cache_dir, hex);
    /* Unique per job: two builds of one worker may publish at once. */
    snprintf(so->publish, sizeof(so->publish), "%s.%s", so->cache,
             strrchr(dir, '/') != NULL ? strrchr(dir, '/') + 1 : dir);
    kt_buf_init(&kernel);
    kt_buf_put(&kernel, src, prelude);
    kt_buf_put(&kernel, src + shared, n - shared);
    rc = write_file(srcpath, kernel.p, kernel.len, err, errlen);
    kt_buf_free(&kernel);
    if (rc < 0)
        return rc;
    so->use = 1;
    /* A link, not the cached path itself: the cache trim may remove that
     * while the compiler runs. */
    if (link(so->cache, so->obj) == 0) {
        (void)utimensat(AT_FDCWD, so->cache, NULL, 0); /* for the LRU trim */
        so->cached = 1;
        return 0;
    }
    snprintf(path, sizeof(path), "%s/shared.c", dir);
    return write_file(path, src, shared, err, errlen);
}

/* In the builder's child: compiles shared.c into shared.o and offers the
 * object to the cache; exits like the compiler when that fails. */
static void
compile_shared(char *const *argv, const struct shared_obj *so)
{
    int status;
    pid_t c = fork();

    if (c < 0)
        _exit(126);
    if (c == 0) {
        execvp(argv[0], argv);
        dprintf(2, "cannot run compiler '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    while (waitpid(c, &status, 0) < 0)
        if (errno != EINTR)
            _exit(126);
    if (WIFSIGNALED(status)) {
        /* Dies of the same signal: kt_build_cpu_limited sees SIGXCPU. */
        signal(WTERMSIG(status), SIG_DFL);
        raise(WTERMSIG(status));
        _exit(128 + WTERMSIG(status));
    }
    if (WEXITSTATUS(status) != 0)
        _exit(WEXITSTATUS(status));
    if (link(so->obj, so->publish) == 0 && rename(so->publish, so->cache) < 0)
        (void)unlink(so->publish);
}

int
kt_build_start(const char *dir, const char *cache_dir, const char *cc,
               const void *src, size_t srclen, int cpu_ms, pid_t *pid, int *fd,
               char *err, size_t errlen)
{
    char srcpath[512], sopath[512], sharedsrc[512];
    char *words = NULL, *save = NULL, *w;
    char *argv[MAX_ARGS + 8], *argv_shared[MAX_ARGS + 8];
    int argc = 0, nwords, pfd[2] = {-1, -1}, rc;
    struct shared_obj so;
    pid_t p;

    snprintf(srcpath, sizeof(srcpath), "%s/kernel.c", dir);
    snprintf(sopath, sizeof(sopath), "%s/kernel.so", dir);
    snprintf(sharedsrc, sizeof(sharedsrc), "%s/shared.c", dir);
    (void)unlink(sopath);
    rc = split_module(dir, cache_dir, cc, src, srclen, srcpath, &so, err,
                      errlen);
    if (rc < 0)
        return rc;
    words = kt_xstrdup(cc);
    for (w = strtok_r(words, " \t", &save); w != NULL;
         w = strtok_r(NULL, " \t", &save)) {
        if (argc == MAX_ARGS) {
            free(words);
            return kt_seterr(err, errlen, KT_EINVAL,
                             "compiler command has more than %d words",
                             MAX_ARGS);
        }
        argv_shared[argc] = w;
        argv[argc++] = w;
    }
    if (argc == 0) {
        free(words);
        return kt_seterr(err, errlen, KT_EINVAL, "empty compiler command");
    }
    nwords = argc;
    argv_shared[nwords] = "-fPIC";
    argv_shared[nwords + 1] = "-c";
    argv_shared[nwords + 2] = "-o";
    argv_shared[nwords + 3] = so.obj;
    argv_shared[nwords + 4] = sharedsrc;
    argv_shared[nwords + 5] = NULL;
    argv[argc++] = "-shared";
    argv[argc++] = "-fPIC";
    argv[argc++] = "-o";
    argv[argc++] = sopath;
    argv[argc++] = srcpath;
    if (so.use)
        argv[argc++] = so.obj;
    argv[argc] = NULL;
    if (pipe(pfd) < 0) {
        rc = kt_seterr(err, errlen, -errno, "pipe: %s", strerror(errno));
        free(words);
        return rc;
    }
    p = fork();
    if (p < 0) {
        rc = kt_seterr(err, errlen, -errno, "fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        free(words);
        return rc;
    }
    if (p == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        struct rlimit cpu;
        (void)setpgid(0, 0);
        /* Inherited by cc1, as and ld: each gets SIGXCPU past the limit. */
        cpu.rlim_cur = (rlim_t)(cpu_ms + 999) / 1000;
        cpu.rlim_max = cpu.rlim_cur + 1;
        (void)setrlimit(RLIMIT_CPU, &cpu);
#ifdef __linux__
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        if (devnull >= 0)
            dup2(devnull, 0);
        dup2(pfd[1], 1);
        dup2(pfd[1], 2);
        close(pfd[0]);
        if (chdir(dir) < 0)
            _exit(126);
        /* The compiler's temporaries go to the job directory, which the
         * worker removes whole even when the compiler was SIGKILLed. */
        (void)setenv("TMPDIR", dir, 1);
        if (so.use && !so.cached)
            compile_shared(argv_shared, &so);
        execvp(argv[0], argv);
        dprintf(2, "cannot run compiler '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    (void)setpgid(p, p);
    close(pfd[1]);
    (void)fcntl(pfd[0], F_SETFL, O_NONBLOCK);
    (void)fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
    free(words);
    *pid = p;
    *fd = pfd[0];
    return 0;
}

int
kt_build_cpu_limited(int status, const char *out)
{
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU)
        return 1;
    /* gcc's driver survives and reports its cc1's signal by name. */
    return out != NULL && strstr(out, strsignal(SIGXCPU)) != NULL;
}
