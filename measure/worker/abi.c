/* abi.c - which machine code a worker runs and a compiler produces, as a
 * target triple ("aarch64-linux-gnu"), so the tracker sends a run job only
 * to a worker that can load the job's kernels (docs/boards.md).  Plain
 * POSIX: part of kerntune-rpc. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "measure/worker/worker.h"

#if defined(__x86_64__) && defined(__ILP32__)
#define KT_ABI_ARCH "x86_64"
#define KT_ABI_X32 "x32"
#elif defined(__x86_64__)
#define KT_ABI_ARCH "x86_64"
#elif defined(__aarch64__)
#define KT_ABI_ARCH "aarch64"
#elif defined(__arm__)
#define KT_ABI_ARCH "arm"
#elif defined(__i386__)
#define KT_ABI_ARCH "i386"
#elif defined(__riscv) && __riscv_xlen == 64
#define KT_ABI_ARCH "riscv64"
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
#define KT_ABI_ARCH "powerpc64le"
#else
#define KT_ABI_ARCH "unknown"
#endif
#ifndef KT_ABI_X32
#define KT_ABI_X32 ""
#endif

#if defined(__ANDROID__)
#define KT_ABI_LIBC "android"
#elif defined(__GLIBC__)
#define KT_ABI_LIBC "gnu"
#elif defined(__linux__)
#define KT_ABI_LIBC "musl"
#else
#define KT_ABI_LIBC "unknown"
#endif

#if defined(__arm__) && defined(__ARM_PCS_VFP)
#define KT_ABI_FLOAT "eabihf"
#elif defined(__arm__)
#define KT_ABI_FLOAT "eabi"
#else
#define KT_ABI_FLOAT ""
#endif

const char *
kt_abi_self(void)
{
    return KT_ABI_ARCH "-linux-" KT_ABI_LIBC KT_ABI_FLOAT KT_ABI_X32;
}

/* The architecture part of a triple or `uname -m`, with aliases folded:
 * amd64 = x86_64, arm64 = aarch64, i686 = i386, armv7l = arm. */
static void
abi_arch(const char *triple, char *out, size_t len)
{
    size_t n = strcspn(triple, "-");

    snprintf(out, len, "%.*s", (int)n, triple);
    if (strcmp(out, "amd64") == 0)
        snprintf(out, len, "x86_64");
    else if (strcmp(out, "arm64") == 0)
        snprintf(out, len, "aarch64");
    else if (n == 4 && out[0] == 'i' && strcmp(out + 2, "86") == 0)
        snprintf(out, len, "i386");
    else if (strncmp(out, "arm", 3) == 0 && strcmp(out, "arm64") != 0)
        snprintf(out, len, "arm");
}

/* The environment (libc and float ABI: gnu, gnueabihf, musl, ...) of a
 * triple with at least three parts, else "". */
static const char *
abi_env(const char *triple)
{
    const char *last = strrchr(triple, '-');
    const char *first = strchr(triple, '-');

    return last != NULL && last != first ? last + 1 : "";
}

int
kt_abi_match(const char *a, const char *b)
{
    char aa[32], ab[32];
    const char *ea = abi_env(a), *eb = abi_env(b);

    abi_arch(a, aa, sizeof(aa));
    abi_arch(b, ab, sizeof(ab));
    if (strcmp(aa, ab) != 0 || strcmp(aa, "unknown") == 0)
        return 0;
    return ea[0] == '\0' || eb[0] == '\0' || strcmp(ea, eb) == 0;
}

/* `cc -dumpmachine` without a shell; 0 with its first line in out. */
static int
dumpmachine(const char *cc, char *out, size_t len)
{
    int fd[2], status;
    ssize_t n, got = 0;
    pid_t pid;

    if (pipe(fd) != 0)
        return -1;
    pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        execlp(cc, cc, "-dumpmachine", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    while ((size_t)got < len - 1 &&
           ((n = read(fd[0], out + got, len - 1 - (size_t)got)) > 0 ||
            (n < 0 && errno == EINTR)))
        got += n > 0 ? n : 0;
    close(fd[0]);
    out[got] = '\0';
    out[strcspn(out, "\r\n")] = '\0';
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && out[0] ? 0 : -1;
}

int
kt_abi_of_compiler(const char *cc, char *out, size_t len)
{
    const char *base = strrchr(cc, '/') ? strrchr(cc, '/') + 1 : cc;
    const char *dash = strrchr(base, '-');

    if (len < 2)
        return -1;
    if (dumpmachine(cc, out, len) == 0)
        return 0;
    /* Not runnable here (the builder may be another host): a cross
     * compiler's name starts with its triple. */
    if (dash != NULL && strchr(base, '-') != dash) {
        snprintf(out, len, "%.*s", (int)(dash - base), base);
        return 0;
    }
    return -1;
}
