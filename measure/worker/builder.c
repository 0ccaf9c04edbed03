/* builder.c - starts the target's compiler on one candidate.  The caller
 * (the worker loop) owns the child: it reads the pipe, enforces the
 * deadline by killing the process group, and reaps it. */
#include "measure/worker/worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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
    char lock[600];    /* cache_dir/lock-<the same hash>: one compiles it */
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
    snprintf(so->lock, sizeof(so->lock), "%s/lock-%s", cache_dir, hex);
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

/* In the builder's child: starts the compiler command argv. */
static pid_t
spawn(char *const *argv)
{
    pid_t c = fork();

    if (c < 0)
        _exit(126);
    if (c == 0) {
        execvp(argv[0], argv);
        dprintf(2, "cannot run compiler '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    return c;
}

/* In the builder's child: waits for the compiler c and returns when it
 * succeeded; otherwise stops `other` (a compiler running beside it, or 0)
 * and exits like c (the same signal: kt_build_cpu_limited sees SIGXCPU). */
static void
finish(pid_t c, pid_t other)
{
    int status;

    while (waitpid(c, &status, 0) < 0)
        if (errno != EINTR)
            _exit(126);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return;
    if (other > 0) {
        (void)kill(other, SIGKILL);
        (void)waitpid(other, NULL, 0);
    }
    if (WIFSIGNALED(status)) {
        signal(WTERMSIG(status), SIG_DFL);
        raise(WTERMSIG(status));
        _exit(128 + WTERMSIG(status));
    }
    _exit(WEXITSTATUS(status));
}

/* The compiler commands of one build: the words of cc, then what each
 * step adds. */
struct build_cmds {
    char *shared[MAX_ARGS + 8];     /* shared.c -> shared.o */
    char *whole[MAX_ARGS + 8];      /* kernel.c (+ shared.o) -> kernel.so */
    char *kernel_obj[MAX_ARGS + 8]; /* kernel.c -> kernel.o */
    char *link[MAX_ARGS + 8];       /* kernel.o + shared.o -> kernel.so */
};

/* In the builder's child, for a module whose shared object is not cached:
 * compiles the kernel into kernel.o and, beside it, makes so->obj.  Builds
 * of one workload that start together take turns on a lock beside the
 * cached object: the first compiles the shared part and caches it, the
 * others link the object it cached.  (Before, a task's first round
 * compiled its reference once per candidate, each before its kernel.) */
static void
compile_with_shared(const struct build_cmds *cmd, const struct shared_obj *so)
{
    int fd = open(so->lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    pid_t kernel = spawn(cmd->kernel_obj);

    while (fd >= 0 && flock(fd, LOCK_EX) < 0)
        if (errno != EINTR) {
            close(fd);
            fd = -1;
        }
    /* The lock's holder before us may have cached it, or failed. */
    if (link(so->cache, so->obj) != 0) {
        finish(spawn(cmd->shared), kernel);
        if (link(so->obj, so->publish) == 0 &&
            rename(so->publish, so->cache) < 0)
            (void)unlink(so->publish);
    }
    if (fd >= 0) {
        /* Whoever opens the name later finds the object cached. */
        (void)unlink(so->lock);
        close(fd);
    }
    finish(kernel, 0);
}

/* dst = words[0, n) followed by the NULL-terminated tail. */
static void
command(char **dst, char *const *words, int n, ...)
{
    va_list ap;
    char *w;
    int i;

    for (i = 0; i < n; i++)
        dst[i] = words[i];
    va_start(ap, n);
    while ((w = va_arg(ap, char *)) != NULL)
        dst[i++] = w;
    va_end(ap);
    dst[i] = NULL;
}

int
kt_build_start(const char *dir, const char *cache_dir, const char *cc,
               const void *src, size_t srclen, int cpu_ms, pid_t *pid, int *fd,
               char *err, size_t errlen)
{
    char srcpath[512], sopath[512], sharedsrc[512], objpath[512];
    char *words = NULL, *save = NULL, *w, *word[MAX_ARGS];
    int nwords = 0, pfd[2] = {-1, -1}, rc;
    struct build_cmds cmd;
    struct shared_obj so;
    pid_t p;

    snprintf(srcpath, sizeof(srcpath), "%s/kernel.c", dir);
    snprintf(sopath, sizeof(sopath), "%s/kernel.so", dir);
    snprintf(sharedsrc, sizeof(sharedsrc), "%s/shared.c", dir);
    snprintf(objpath, sizeof(objpath), "%s/kernel.o", dir);
    (void)unlink(sopath);
    rc = split_module(dir, cache_dir, cc, src, srclen, srcpath, &so, err,
                      errlen);
    if (rc < 0)
        return rc;
    words = kt_xstrdup(cc);
    for (w = strtok_r(words, " \t", &save); w != NULL;
         w = strtok_r(NULL, " \t", &save)) {
        if (nwords == MAX_ARGS) {
            free(words);
            return kt_seterr(err, errlen, KT_EINVAL,
                             "compiler command has more than %d words",
                             MAX_ARGS);
        }
        word[nwords++] = w;
    }
    if (nwords == 0) {
        free(words);
        return kt_seterr(err, errlen, KT_EINVAL, "empty compiler command");
    }
    command(cmd.shared, word, nwords, "-fPIC", "-c", "-o", so.obj, sharedsrc,
            (char *)NULL);
    command(cmd.whole, word, nwords, "-shared", "-fPIC", "-o", sopath, srcpath,
            so.use ? so.obj : NULL, (char *)NULL);
    command(cmd.kernel_obj, word, nwords, "-fPIC", "-c", "-o", objpath, srcpath,
            (char *)NULL);
    command(cmd.link, word, nwords, "-shared", "-fPIC", "-o", sopath, objpath,
            so.obj, (char *)NULL);
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
        char *const *last = cmd.whole;
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
        if (so.use && !so.cached) {
            compile_with_shared(&cmd, &so);
            last = cmd.link;
        }
        execvp(last[0], last);
        dprintf(2, "cannot run compiler '%s': %s\n", last[0], strerror(errno));
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
