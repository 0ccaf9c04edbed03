/* jobdir.c - what the worker leaves on disk and how many processes a kernel
 * may start: job directories are removed whole (compilers write their
 * temporaries there, see builder.c), the cache of reference outputs is kept
 * under a size cap by evicting the least recently used file, a kernel
 * process gets an RLIMIT_NPROC just above what our user already runs, and
 * what a kernel or compiler forked and left behind (even in a new session)
 * comes back to the worker as an orphan and is killed. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "measure/worker/worker.h"

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)f;
    if (flag == FTW_DP || flag == FTW_D || flag == FTW_DNR)
        (void)rmdir(path);
    else
        (void)unlink(path);
    return 0;
}

void
kt_rm_tree(const char *dir)
{
    /* FTW_PHYS: a symlink a compiler or kernel left is removed, not
     * followed. */
    (void)nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

struct ref_file {
    char name[256]; /* a d_name */
    off_t size;
    double used; /* mtime: the runner touches a file when it reads it */
};

static int
by_use(const void *a, const void *b)
{
    const struct ref_file *x = a, *y = b;
    return x->used < y->used ? -1 : x->used > y->used;
}

int
kt_ref_cache_trim(const char *dir, unsigned long long max_bytes)
{
    struct ref_file *files = NULL;
    size_t n = 0, cap = 0, i;
    unsigned long long total = 0;
    struct dirent *e;
    char p[700];
    int removed = 0;
    DIR *d = opendir(dir);

    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (strncmp(e->d_name, "ref-", 4) != 0 ||
            strlen(e->d_name) >= sizeof(files->name) ||
            (size_t)snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) >=
                sizeof(p) ||
            lstat(p, &st) < 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            files = kt_xrealloc(files, cap * sizeof(*files));
        }
        snprintf(files[n].name, sizeof(files[n].name), "%s", e->d_name);
        files[n].size = st.st_size;
        files[n].used = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
        total += (unsigned long long)st.st_size;
        n++;
    }
    closedir(d);
    if (total > max_bytes) {
        qsort(files, n, sizeof(*files), by_use);
        for (i = 0; i < n && total > max_bytes; i++) {
            snprintf(p, sizeof(p), "%s/%s", dir, files[i].name);
            if (unlink(p) == 0) {
                total -= (unsigned long long)files[i].size;
                removed++;
            }
        }
    }
    free(files);
    return removed;
}

/* Tasks (threads included, as RLIMIT_NPROC counts them) of our real uid,
 * from /proc; -1 where there is no /proc. */
static long
user_tasks(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    uid_t me = getuid();
    long n = 0;

    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        char p[300], line[256];
        long uid = -1, threads = 0;
        FILE *f;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(p, sizeof(p), "/proc/%s/status", e->d_name);
        f = fopen(p, "r");
        if (f == NULL)
            continue;
        while (fgets(line, sizeof(line), f) != NULL) {
            if (strncmp(line, "Uid:", 4) == 0)
                uid = strtol(line + 4, NULL, 10);
            else if (strncmp(line, "Threads:", 8) == 0)
                threads = strtol(line + 8, NULL, 10);
        }
        fclose(f);
        if (uid == (long)me)
            n += threads > 0 ? threads : 1;
    }
    closedir(d);
    return n;
}

long
kt_kernel_nproc_limit(int threads)
{
    static long cached = -1;
    static double at;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    long room = (threads > ncpu ? threads : ncpu) * 2 + 16;

    /* Counting walks /proc: at most once every 10 s. */
    if (cached < 0 || kt_now() - at > 10.0) {
        cached = user_tasks();
        at = kt_now();
    }
    return cached < 0 ? -1 : cached + room;
}

int
kt_adopt_orphans(void)
{
#ifdef PR_SET_CHILD_SUBREAPER
    return prctl(PR_SET_CHILD_SUBREAPER, 1) == 0 ? 0 : -errno;
#else
    return KT_EINVAL;
#endif
}

int
kt_kill_strays(const pid_t *keep, int nkeep)
{
    char path[64];
    long pid;
    int i, n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/self/task/%ld/children",
             (long)getpid());
    f = fopen(path, "r");
    if (f == NULL)
        return 0;
    while (fscanf(f, "%ld", &pid) == 1) {
        for (i = 0; i < nkeep; i++)
            if (keep[i] == (pid_t)pid)
                break;
        if (i < nkeep)
            continue;
        (void)kill((pid_t)pid, SIGKILL);
        while (waitpid((pid_t)pid, NULL, 0) < 0 && errno == EINTR)
            ;
        n++;
    }
    fclose(f);
    return n;
}
