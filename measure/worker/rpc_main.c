/* rpc_main.c - entry point of kerntune-rpc, the worker program:
 *
 *   kerntune-rpc server --tracker=HOST:PORT --key=KEY [--token-file F]
 *                       [--roles build,run] [--jobs N] [--name NAME]
 *                       [--heartbeat-ms MS] [--once] [--exit-with-parent]
 *                       [-v]
 *
 * The token comes from --token-file or the KERNTUNE_TOKEN environment
 * variable (used by daemons that spawn local workers).  Plain POSIX only. */
#include "measure/worker/worker.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <signal.h>
#include <sys/prctl.h>
#endif

static void
usage(FILE *f)
{
    fprintf(f, "usage: kerntune-rpc server --tracker=HOST:PORT --key=KEY "
               "[--token-file F]\n"
               "           [--roles build,run] [--jobs N] [--name NAME] "
               "[--heartbeat-ms MS] [--once]\n"
               "           [--exit-with-parent] [-v]\n"
               "       kerntune-rpc --help | --version\n"
               "Exit status: 0 done, 1 the server failed, 2 bad usage "
               "or token file (kerntune-rpc(1)).\n");
}

/* --help / --version anywhere in argv: 1 after printing, else 0. */
static int
help_or_version(int argc, char **argv)
{
    int i;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("kerntune-rpc %s\n", KT_VERSION);
            return 1;
        }
    }
    return 0;
}

static int
parse_int(const char *opt, const char *s, int lo, int hi, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno || v < lo || v > hi) {
        fprintf(stderr,
                "kerntune-rpc: %s: '%s' is not an integer in "
                "[%d, %d]\n",
                opt, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

enum {
    OPT_TRACKER = 256,
    OPT_KEY,
    OPT_TOKEN_FILE,
    OPT_NAME,
    OPT_ROLES,
    OPT_JOBS,
    OPT_HEARTBEAT,
    OPT_ONCE,
    OPT_EXIT_WITH_PARENT
};

static const struct option long_opts[] = {
    {"tracker", required_argument, NULL, OPT_TRACKER},
    {"key", required_argument, NULL, OPT_KEY},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"name", required_argument, NULL, OPT_NAME},
    {"roles", required_argument, NULL, OPT_ROLES},
    {"jobs", required_argument, NULL, OPT_JOBS},
    {"heartbeat-ms", required_argument, NULL, OPT_HEARTBEAT},
    {"once", no_argument, NULL, OPT_ONCE},
    {"exit-with-parent", no_argument, NULL, OPT_EXIT_WITH_PARENT},
    {NULL, 0, NULL, 0},
};

/* Parses argv after "server"; 0, or 2 (usage error), or 3 (exit 0 now). */
static int
parse_args(int argc, char **argv, struct kt_server_opts *o,
           const char **tracker, const char **tokfile)
{
    char err[256];
    int c;

    opterr = 0;
    optind = 2;
    while ((c = getopt_long(argc, argv, ":v", long_opts, NULL)) != -1) {
        switch (c) {
        case OPT_TRACKER: *tracker = optarg; break;
        case OPT_KEY: o->key = optarg; break;
        case OPT_TOKEN_FILE: *tokfile = optarg; break;
        case OPT_NAME: o->name = optarg; break;
        case OPT_ROLES:
            if (kt_roles_parse(optarg, &o->roles, err, sizeof(err)) < 0) {
                fprintf(stderr, "kerntune-rpc: %s\n", err);
                return 2;
            }
            break;
        case OPT_JOBS:
            if (parse_int("--jobs", optarg, 1, 16, &o->jobs) < 0)
                return 2;
            break;
        case OPT_HEARTBEAT:
            if (parse_int("--heartbeat-ms", optarg, 50, 600000,
                          &o->heartbeat_ms) < 0)
                return 2;
            break;
        case OPT_ONCE: o->once = 1; break;
        case OPT_EXIT_WITH_PARENT: o->exit_with_parent = 1;
#ifdef __linux__
            /* Local workers die with the daemon that started them. */
            (void)prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() == 1)
                return 3;
#endif
            break;
        case 'v': kt_log_init(LOG_DEBUG); break;
        default:
            fprintf(stderr, "kerntune-rpc: %s '%s'\n",
                    c == ':' ? "missing value for" : "unknown argument",
                    argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kerntune-rpc: unexpected argument '%s'\n",
                argv[optind]);
        usage(stderr);
        return 2;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    struct kt_server_opts o;
    char host[256], token[512], err[256];
    const char *tracker = NULL, *tokfile = NULL, *env;
    int rc;

    memset(&o, 0, sizeof(o));
    o.roles = KT_ROLE_BUILD | KT_ROLE_RUN;
    o.jobs = 1;
    o.heartbeat_ms = 2000;
    o.max_backoff_ms = 5000;
    kt_log_init(LOG_INFO);
    if (help_or_version(argc, argv))
        return 0;
    if (argc < 2 || strcmp(argv[1], "server") != 0) {
        usage(stderr);
        return 2;
    }
    rc = parse_args(argc, argv, &o, &tracker, &tokfile);
    if (rc != 0)
        return rc == 3 ? 0 : rc;
    if (tracker == NULL || o.key == NULL || o.key[0] == '\0') {
        usage(stderr);
        return 2;
    }
    if (kt_hostport_parse(tracker, host, sizeof(host), &o.port, err,
                          sizeof(err)) < 0) {
        fprintf(stderr, "kerntune-rpc: --tracker: %s\n", err);
        return 2;
    }
    o.host = host;
    env = getenv("KERNTUNE_TOKEN");
    if (tokfile != NULL) {
        if (kt_token_read(tokfile, token, sizeof(token), err, sizeof(err)) < 0) {
            fprintf(stderr, "kerntune-rpc: %s\n", err);
            return 2;
        }
        o.token = token;
    } else if (env != NULL) {
        if (strlen(env) >= sizeof(token)) {
            fprintf(stderr,
                    "kerntune-rpc: KERNTUNE_TOKEN longer than %zu "
                    "bytes\n",
                    sizeof(token) - 1);
            return 2;
        }
        snprintf(token, sizeof(token), "%s", env);
        o.token = token;
    }
    /* Compilers and kernels we start must not inherit the secret. */
    unsetenv("KERNTUNE_TOKEN");
    rc = kt_server_run(&o);
    return rc < 0 ? 1 : 0;
}
