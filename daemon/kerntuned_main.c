/* kerntuned_main.c - the tuning daemon.
 *
 *   kerntuned --config /etc/kerntune/kerntuned.json [-t]
 *
 * Every *.json in the model dir is a job.  SIGHUP re-reads the model dir
 * (new files start, changed ones restart, removed ones stop); SIGTERM and
 * SIGINT stop every job after the batch in flight is committed, then exit 0.
 * Under systemd (Type=notify) it reports READY=1, STATUS=, WATCHDOG=1 and
 * STOPPING=1.  A control socket answers `kerntune status|jobs|tasks|best|
 * pause|resume|rpc-status`. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/kerntuned_int.h"

/* Signals and timers; then the jobs of the model dir. */
static void
daemon_start(struct daemon *d)
{
    uint64_t wd;

    uv_signal_init(&d->loop, &d->sighup);
    uv_signal_init(&d->loop, &d->sigterm);
    uv_signal_init(&d->loop, &d->sigint);
    d->sighup.data = d->sigterm.data = d->sigint.data = d;
    uv_signal_start(&d->sighup, kt__daemon_on_signal, SIGHUP);
    uv_signal_start(&d->sigterm, kt__daemon_on_signal, SIGTERM);
    uv_signal_start(&d->sigint, kt__daemon_on_signal, SIGINT);
    uv_timer_init(&d->loop, &d->status_timer);
    uv_timer_init(&d->loop, &d->watchdog_timer);
    uv_timer_init(&d->loop, &d->grace_timer);
    d->status_timer.data = d->watchdog_timer.data = d->grace_timer.data = d;
    uv_timer_start(&d->status_timer, kt__daemon_status_tick, 1000, 5000);
    wd = kt_notify_watchdog_usec();
    if (wd > 0)
        uv_timer_start(&d->watchdog_timer, kt__daemon_watchdog_tick, 0,
                       wd / 2000 ? wd / 2000 : 1);
    kt__daemon_scan_models(d);
    log_info("kerntuned: ready: workers on %s, %d jobs, database %s",
             d->conf->listen, kt__daemon_running_jobs(d), d->conf->database);
    kt_notify_ready();
}

static void
usage(FILE *f)
{
    fprintf(f, "usage: kerntuned [--config FILE] [-t|--test]\n"
               "       kerntuned --help | --version\n"
               "Exit status: 0 stopped cleanly (or --test passed), 1 failed, "
               "2 bad usage (kerntuned(8)).\n");
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"test", no_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *conf_path = "/etc/kerntune/kerntuned.json";
    struct daemon d;
    char err[1024], *token = NULL, nthreads[32];
    int c, test = 0, i, status = 1;

    kt_log_init(LOG_INFO);
    signal(SIGPIPE, SIG_IGN);
    while ((c = getopt_long(argc, argv, "c:thV", opts, NULL)) != -1) {
        switch (c) {
        case 'c': conf_path = optarg; break;
        case 't': test = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("kerntuned %s\n", KT_VERSION); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "kerntuned: unexpected argument \"%s\"\n",
                argv[optind]);
        usage(stderr);
        return 2;
    }
    memset(&d, 0, sizeof(d));
    if (kt_daemon_conf_load(conf_path, &d.conf, err, sizeof(err)) != KT_OK) {
        log_err("kerntuned: %s", err);
        return 1;
    }
    kt_log_init(d.conf->log_level);
    if (test) {
        status = kt__daemon_check_files(d.conf, err, sizeof(err));
        if (status == KT_OK)
            printf("%s: configuration OK\n", conf_path);
        else
            fprintf(stderr, "kerntuned: %s: %s\n", conf_path, err);
        kt_daemon_conf_free(d.conf);
        return status == KT_OK ? 0 : 1;
    }
    /* The pool runs searches and training; size it before the first job. */
    snprintf(nthreads, sizeof(nthreads), "%lld",
             (long long)(d.conf->threads > 0 ? d.conf->threads : 4));
    setenv("UV_THREADPOOL_SIZE", nthreads, 1);
    d.started = kt_now();
    uv_loop_init(&d.loop);
    if (kt__daemon_open(&d, &token, err, sizeof(err)) != KT_OK) {
        log_err("kerntuned: %s", err);
        kt_ctl_close(d.ctl);
        kt_tracker_close(d.tracker);
        d.tracker = NULL;
        goto out;
    }
    daemon_start(&d);
    uv_run(&d.loop, UV_RUN_DEFAULT);
    status = 0;
out:
    uv_run(&d.loop, UV_RUN_DEFAULT);
    for (i = 0; i < d.njobs; i++) {
        kt_job_free(d.jobs[i].job);
        free(d.jobs[i].file);
    }
    kt_engine_free(d.engine);
    if (uv_loop_close(&d.loop) != 0) {
        log_err("kerntuned: event loop still had handles at exit");
        status = 1;
    }
    kt_storage_close(d.db);
    free(token);
    kt_daemon_conf_free(d.conf);
    log_info("kerntuned: exit %d", status);
    return status;
}
