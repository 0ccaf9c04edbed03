/* test_worker_limits.c - what a kernel or a compiler can do to its worker:
 * crash by the thousand (no files, descriptors, children or cores left),
 * fork stragglers, kill the worker, or look for the tracker socket and the
 * token; with real kerntune-rpc processes and the tracker on 127.0.0.1. */
#include "security_env.h"

/* ---- kernels and compilers that crash, fork or kill ---------------------- */

static const char *
kernel_source(const char *body)
{
    static char src[4096];

    snprintf(src, sizeof(src),
             "#include <signal.h>\n#include <stdio.h>\n#include <unistd.h>\n"
             "const char kt_workload_hash[17] = \"00000000000000aa\";\n"
             "const int kt_nbufs = 2;\n"
             "const long long kt_buf_elems[] = {16, 16};\n"
             "const unsigned char kt_buf_is_output[] = {0, 1};\n"
             "const double kt_flops = 16;\n"
             "void kt_reference(float *const *b) {\n"
             "  for (int i = 0; i < 16; i++) b[1][i] = b[0][i] * 2; }\n"
             "void kt_kernel(float *const *b) {\n%s\n"
             "  for (int i = 0; i < 16; i++) b[1][i] = b[0][i] * 2; }\n",
             body);
    return src;
}

struct many {
    int done;
    int n;
    int *err_no;
    int attempts_max;
};

static void
on_many(void *arg, const struct kt_result *res, int n)
{
    struct many *m = arg;
    int i;

    m->done = 1;
    m->n = n;
    for (i = 0; i < n; i++) {
        m->err_no[i] = res[i].err_no;
        if (res[i].attempts > m->attempts_max)
            m->attempts_max = res[i].attempts;
    }
}

static int
count_fds(pid_t pid)
{
    char p[64];
    DIR *d;
    struct dirent *de;
    int n = 0;

    snprintf(p, sizeof(p), "/proc/%d/fd", (int)pid);
    d = opendir(p);
    assert_non_null(d);
    while ((de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The worker's open files once transient ones are closed: the fewest of
 * ten counts 20 ms apart.  Under ASan a count caught the worker with one
 * file more at registration than after the jobs (7, then 6): a leak shows
 * in every count, a file held for a moment not in all. */
static int
settled_fds(pid_t pid)
{
    int i, n, least = count_fds(pid);

    for (i = 1; i < 10; i++) {
        usleep(20000);
        n = count_fds(pid);
        least = n < least ? n : least;
    }
    return least;
}

static int
count_children(pid_t parent)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int n = 0;

    assert_non_null(d);
    while ((de = readdir(d)) != NULL) {
        char p[300], buf[512], *rp;
        FILE *f;
        int ppid;
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(p, sizeof(p), "/proc/%s/stat", de->d_name);
        f = fopen(p, "r");
        if (f == NULL)
            continue;
        if (fgets(buf, sizeof(buf), f) != NULL &&
            (rp = strrchr(buf, ')')) != NULL &&
            sscanf(rp + 2, "%*c %d", &ppid) == 1 && ppid == (int)parent)
            n++;
        fclose(f);
    }
    closedir(d);
    return n;
}

/* Everything under dir except the reference cache ("ref-*" files). */
static int
count_leftovers(const char *dir, char *first, size_t len)
{
    char cmd[600];
    FILE *p;
    int n = 0;

    snprintf(cmd, sizeof(cmd),
             "find %s -mindepth 1 ! -name 'ref-*' -print 2>/dev/null", dir);
    p = popen(cmd, "r");
    assert_non_null(p);
    while (fgets(cmd, sizeof(cmd), p) != NULL) {
        if (n++ == 0)
            snprintf(first, len, "%s", cmd);
    }
    pclose(p);
    return n;
}

/* Crashing kernels (one of them forks a straggler first) and a compiler
 * that leaves a temporary file and dies of SIGSEGV, N times over: the
 * worker ends with no job files, no extra descriptors, no children, no
 * straggler, and core dumps off for good. */
static void
test_worker_crashing_jobs_leave_nothing(void **state)
{
    const char *level = getenv("KT_TEST_LEVEL");
    int n = level && strcmp(level, "long") == 0 ? 2000 : 60;
    struct env *e = env_new(NULL);
    struct kt_candidate *c = kt_xcalloc((size_t)n, sizeof(*c));
    struct kt_measure_opts o;
    struct many m;
    char err[256], crashcc[300], wtmp[300], first[600] = "", body[600];
    char *segv, *forker, line[256];
    int i, pid, fds0;
    unsigned lost;
    FILE *f;

    (void)state;
    snprintf(crashcc, sizeof(crashcc), "%s/crashcc.sh", e->tmp);
    f = fopen(crashcc, "w");
    assert_non_null(f);
    fputs("#!/bin/sh\necho partial > \"${TMPDIR:-/tmp}/cc-temp-$$\"\n"
          "kill -SEGV $$\n",
          f);
    fclose(f);
    assert_int_equal(chmod(crashcc, 0755), 0);
    segv = kt_xstrdup(kernel_source("  *(volatile int *)0 = 1;"));
    snprintf(body, sizeof(body),
             "  pid_t p = fork();\n"
             "  if (p == 0) { setsid(); sleep(300); _exit(0); }\n"
             "  FILE *f = fopen(\"%s/stragglers\", \"a\");\n"
             "  if (f) { fprintf(f, \"%%d\\n\", (int)p); fclose(f); }\n"
             "  raise(SIGSEGV);",
             e->tmp);
    forker = kt_xstrdup(kernel_source(body));
    if (kt_tracker_spawn_local(e->t, 1, e->rpc, "local", "build,run", err,
                               sizeof(err)) < 0)
        fail_msg("%s", err);
    wait_workers(e, NULL, 1);
    assert_int_equal(kt_tracker_local_pids(e->t, &pid, 1), 1);
    fds0 = settled_fds(pid);
    for (i = 0; i < n; i++) {
        c[i].source = i % 3 == 2 ? "int x;" : i % 6 == 1 ? forker : segv;
        c[i].cc = i % 3 == 2 ? crashcc : "cc -O0";
    }
    kt_measure_default_opts(&o);
    o.repeat = 1;
    o.min_repeat_ms = 0;
    memset(&m, 0, sizeof(m));
    m.err_no = kt_xcalloc((size_t)n, sizeof(int));
    if (kt_tracker_submit(e->t, "local", c, n, &o, on_many, &m, err,
                          sizeof(err)) < 0)
        fail_msg("submit: %s", err);
    spin(e, n * 2.0 + 60, &m.done);
    assert_true(m.done);
    for (i = 0; i < n; i++)
        if (m.err_no[i] !=
            (i % 3 == 2 ? KT_MERR_COMPILE_HOST : KT_MERR_RUNTIME_DEVICE))
            fail_msg("job %d: err_no %d", i, m.err_no[i]);
    /* The worker never died: one build and one run dispatch at most. */
    assert_true(m.attempts_max <= 2);
    kt_tracker_counters(e->t, NULL, NULL, &lost, NULL);
    assert_int_equal(lost, 0);
    spin(e, 0.3, NULL);
    /* The same worker, with nothing left behind. */
    assert_int_equal(kt_tracker_local_pids(e->t, &i, 1), 1);
    assert_int_equal(i, pid);
    assert_int_equal(settled_fds(pid), fds0);
    assert_int_equal(count_children(pid), 0);
    /* e->tmp holds the worker's directory, our scripts and the list. */
    {
        glob_t g;
        snprintf(wtmp, sizeof(wtmp), "%s/kerntune-rpc.*", e->tmp);
        assert_int_equal(glob(wtmp, 0, NULL, &g), 0);
        assert_int_equal(g.gl_pathc, 1);
        if (count_leftovers(g.gl_pathv[0], first, sizeof(first)) != 0)
            fail_msg("left in the worker's directory: %s", first);
        globfree(&g);
        snprintf(wtmp, sizeof(wtmp), "%s/cc-temp-*", e->tmp);
        if (glob(wtmp, 0, NULL, &g) != GLOB_NOMATCH)
            fail_msg("compiler temporaries left in the worker's TMPDIR");
        globfree(&g);
    }
    snprintf(body, sizeof(body), "%s/stragglers", e->tmp);
    f = fopen(body, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        int sp = atoi(line);
        char st[64], buf[256];
        FILE *sf;
        snprintf(st, sizeof(st), "/proc/%d/stat", sp);
        sf = fopen(st, "r");
        if (sf != NULL) { /* gone, or a zombie waiting for init */
            if (fgets(buf, sizeof(buf), sf) != NULL &&
                strstr(buf, ") Z") == NULL)
                fail_msg("a kernel's child %d outlived its kernel", sp);
            fclose(sf);
        }
    }
    fclose(f);
    /* Core dumps are off in the worker (and so in everything it starts). */
    {
        char lim[64];
        snprintf(lim, sizeof(lim), "/proc/%d/limits", pid);
        f = fopen(lim, "r");
        assert_non_null(f);
        while (fgets(line, sizeof(line), f) != NULL)
            if (strncmp(line, "Max core file size", 18) == 0)
                assert_non_null(strstr(line, " 0                    0 "));
        fclose(f);
    }
    print_message("%d crashing jobs: nothing left behind\n", n);
    free(m.err_no);
    free(segv);
    free(forker);
    free(c);
    env_free(e);
}

/* A kernel that kills its worker: the job is re-queued, fails for good
 * after max_retries, the local worker is started again each time, and the
 * other candidates are measured. */
static void
test_worker_kernel_kills_worker(void **state)
{
    struct env *e = env_new(NULL);
    struct kt_candidate c[3];
    struct kt_measure_opts o;
    struct many m;
    char err[256], *good, *killer;
    int i, errs[3];

    (void)state;
    good = kt_xstrdup(kernel_source(""));
    killer = kt_xstrdup(kernel_source("  kill(getppid(), SIGKILL);"));
    if (kt_tracker_spawn_local(e->t, 1, e->rpc, "local", "build,run", err,
                               sizeof(err)) < 0)
        fail_msg("%s", err);
    memset(c, 0, sizeof(c));
    for (i = 0; i < 3; i++) {
        c[i].source = i == 1 ? killer : good;
        c[i].cc = "cc -O0";
    }
    kt_measure_default_opts(&o);
    o.repeat = 1;
    o.min_repeat_ms = 0;
    memset(&m, 0, sizeof(m));
    m.err_no = errs;
    if (kt_tracker_submit(e->t, "local", c, 3, &o, on_many, &m, err,
                          sizeof(err)) < 0)
        fail_msg("submit: %s", err);
    spin(e, 90.0, &m.done);
    assert_true(m.done);
    assert_int_equal(errs[0], 0);
    assert_int_equal(errs[1], KT_MERR_UNKNOWN);
    assert_int_equal(errs[2], 0);
    wait_workers(e, NULL, 1);
    free(good);
    free(killer);
    env_free(e);
}

/* ---- what a compiler inherits ----------------------------------------- */

/* A compiler sees neither the tracker socket nor the token. */
static void
test_worker_compiler_inherits_nothing(void **state)
{
    struct env *e = env_new(NULL);
    struct kt_candidate c;
    struct kt_measure_opts o;
    struct batch b;
    char err[256], spy[300];
    pid_t w;
    FILE *f;

    (void)state;
    snprintf(spy, sizeof(spy), "%s/spycc.sh", e->tmp);
    f = fopen(spy, "w");
    assert_non_null(f);
    fputs("#!/bin/sh\nls -l /proc/$$/fd >&2\n"
          "echo \"token=${KERNTUNE_TOKEN:-none}\" >&2\nexit 1\n",
          f);
    fclose(f);
    assert_int_equal(chmod(spy, 0755), 0);
    w = start_worker(e, kt_tracker_port(e->t));
    wait_workers(e, NULL, 1);
    memset(&c, 0, sizeof(c));
    c.source = "int x;";
    c.cc = spy;
    kt_measure_default_opts(&o);
    memset(&b, 0, sizeof(b));
    if (kt_tracker_submit(e->t, "local", &c, 1, &o, on_batch, &b, err,
                          sizeof(err)) < 0)
        fail_msg("submit: %s", err);
    spin(e, WAIT_S, &b.done);
    assert_true(b.done);
    assert_int_equal(b.err_no[0], KT_MERR_COMPILE_HOST);
    assert_non_null(strstr(b.err_text[0], "token=none"));
    if (strstr(b.err_text[0], "socket:") != NULL)
        fail_msg("the compiler inherited a socket: %s", b.err_text[0]);
    stop_worker(w);
    env_free(e);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worker_compiler_inherits_nothing),
        cmocka_unit_test(test_worker_crashing_jobs_leave_nothing),
        cmocka_unit_test(test_worker_kernel_kills_worker),
    };
    signal(SIGPIPE, SIG_IGN);
    kt_log_init(getenv("KT_TEST_VERBOSE") ? LOG_DEBUG : LOG_WARNING);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
