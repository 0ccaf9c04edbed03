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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <signal.h>
#include <sys/prctl.h>
#endif

static void
usage(void)
{
    fprintf(stderr,
            "usage: kerntune-rpc server --tracker=HOST:PORT --key=KEY "
            "[--token-file F]\n"
            "           [--roles build,run] [--jobs N] [--name NAME] "
            "[--heartbeat-ms MS] [--once]\n"
            "           [--exit-with-parent] [-v]\n");
}

/* Matches "--opt=value" or "--opt value"; advances *i past a value. */
static const char *
opt_value(int argc, char **argv, int *i, const char *opt)
{
    size_t n = strlen(opt);

    if (strncmp(argv[*i], opt, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] == '\0' && *i + 1 < argc)
        return argv[++*i];
    return NULL;
}

static int
parse_int(const char *opt, const char *s, int lo, int hi, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno || v < lo || v > hi) {
        fprintf(stderr, "kerntune-rpc: %s: '%s' is not an integer in "
                "[%d, %d]\n", opt, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int
main(int argc, char **argv)
{
    struct kt_server_opts o;
    char host[256], token[512], err[256];
    const char *tracker = NULL, *tokfile = NULL, *v;
    int i, rc;

    memset(&o, 0, sizeof(o));
    o.roles = KT_ROLE_BUILD | KT_ROLE_RUN;
    o.jobs = 1;
    o.heartbeat_ms = 2000;
    o.max_backoff_ms = 5000;
    kt_log_init(LOG_INFO);
    if (argc < 2 || strcmp(argv[1], "server") != 0) {
        usage();
        return 2;
    }
    for (i = 2; i < argc; i++) {
        if ((v = opt_value(argc, argv, &i, "--tracker")) != NULL)
            tracker = v;
        else if ((v = opt_value(argc, argv, &i, "--key")) != NULL)
            o.key = v;
        else if ((v = opt_value(argc, argv, &i, "--token-file")) != NULL)
            tokfile = v;
        else if ((v = opt_value(argc, argv, &i, "--name")) != NULL)
            o.name = v;
        else if ((v = opt_value(argc, argv, &i, "--roles")) != NULL) {
            if (kt_roles_parse(v, &o.roles, err, sizeof(err)) < 0) {
                fprintf(stderr, "kerntune-rpc: %s\n", err);
                return 2;
            }
        } else if ((v = opt_value(argc, argv, &i, "--jobs")) != NULL) {
            if (parse_int("--jobs", v, 1, 16, &o.jobs) < 0)
                return 2;
        } else if ((v = opt_value(argc, argv, &i, "--heartbeat-ms")) != NULL) {
            if (parse_int("--heartbeat-ms", v, 50, 600000, &o.heartbeat_ms) <
                0)
                return 2;
        } else if (strcmp(argv[i], "--exit-with-parent") == 0) {
#ifdef __linux__
            /* Local workers die with the daemon that started them. */
            (void)prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() == 1)
                return 0;
#endif
        } else if (strcmp(argv[i], "--once") == 0) {
            o.once = 1;
        } else if (strcmp(argv[i], "-v") == 0) {
            kt_log_init(LOG_DEBUG);
        } else {
            fprintf(stderr, "kerntune-rpc: unknown argument '%s'\n", argv[i]);
            usage();
            return 2;
        }
    }
    if (tracker == NULL || o.key == NULL || o.key[0] == '\0') {
        usage();
        return 2;
    }
    if (kt_wire_parse_hostport(tracker, host, sizeof(host), &o.port, err,
                               sizeof(err)) < 0) {
        fprintf(stderr, "kerntune-rpc: --tracker: %s\n", err);
        return 2;
    }
    o.host = host;
    if (tokfile != NULL) {
        if (kt_auth_read_token(tokfile, token, sizeof(token), err,
                               sizeof(err)) < 0) {
            fprintf(stderr, "kerntune-rpc: %s\n", err);
            return 2;
        }
        o.token = token;
    } else {
        o.token = getenv("KERNTUNE_TOKEN");
    }
    rc = kt_server_run(&o);
    return rc < 0 ? 1 : 0;
}
