/* builder.c - starts the target's compiler on one candidate.  The caller
 * (the worker loop) owns the child: it reads the pipe, enforces the
 * deadline by killing the process group, and reaps it. */
#include "measure/worker/worker.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

int
kt_build_start(const char *dir, const char *cc, const void *src, size_t srclen,
               int cpu_ms, pid_t *pid, int *fd, char *err, size_t errlen)
{
    char srcpath[512], sopath[512];
    char *words = NULL, *save = NULL, *w;
    char *argv[MAX_ARGS + 8];
    int argc = 0, pfd[2] = {-1, -1}, rc;
    pid_t p;

    snprintf(srcpath, sizeof(srcpath), "%s/kernel.c", dir);
    snprintf(sopath, sizeof(sopath), "%s/kernel.so", dir);
    (void)unlink(sopath);
    rc = write_file(srcpath, src, srclen, err, errlen);
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
        argv[argc++] = w;
    }
    if (argc == 0) {
        free(words);
        return kt_seterr(err, errlen, KT_EINVAL, "empty compiler command");
    }
    argv[argc++] = "-shared";
    argv[argc++] = "-fPIC";
    argv[argc++] = "-o";
    argv[argc++] = sopath;
    argv[argc++] = srcpath;
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
