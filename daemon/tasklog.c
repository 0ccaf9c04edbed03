/* tasklog.c - the task-table log: one block per tuning round appended to
 * <log_dir>/<job>.log in the layout of Ansor's PrintTableInfo and
 * SketchPolicy output (docs/design.md section 3), and one line per round appended to
 * <log_dir>/<job>.total_latency.tsv (Ansor's LogEstimatedLatency).  Each
 * block is one write(2), so `tail -f` never shows half a round. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/daemon.h"

/* Ansor's PrintTitle: 70 dashes, 30 dashes + "  [ title ]", 70 dashes. */
static void
title(struct kt_buf *b, const char *name)
{
    static const char line70[] = "---------------------------------------------"
                                 "-------------------------";
    kt_buf_printf(b, "%s\n%.30s  [ %s ]\n%s\n", line70, line70, name, line70);
}

static void
dashes(struct kt_buf *b, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        kt_buf_putc(b, '-');
    kt_buf_putc(b, '\n');
}

void
kt_tasklog_format_table(struct kt_buf *b, const struct kt_tasklog_table *t,
                        int flags)
{
    static const char head[] =
        "|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |";
    static const char extra[] = " Errors | Weight | Task";
    int ansor = (flags & KT_TASKLOG_ANSOR) != 0;
    char lat[32], speed[32], total[32];
    int i;

    kt_buf_printf(b, "%s%s\n", head, ansor ? "" : extra);
    dashes(b, sizeof(head) - 1 + (ansor ? 0 : sizeof(extra) - 1));
    for (i = 0; i < t->ntasks; i++) {
        const struct kt_tasklog_task *k = &t->tasks[i];
        if (k->latency_ms >= 0)
            snprintf(lat, sizeof(lat), "%.3f", k->latency_ms);
        else
            snprintf(lat, sizeof(lat), "-");
        if (k->gflops >= 0)
            snprintf(speed, sizeof(speed), "%.2f", k->gflops);
        else
            snprintf(speed, sizeof(speed), "-");
        kt_buf_printf(b, "| %4d | %12s | %14s | %6lld |", k->id, lat, speed,
                      (long long)k->trials);
        if (!ansor)
            kt_buf_printf(b, " %6lld | %6g | %s", (long long)k->errors,
                          k->weight,
                          k->name != NULL && k->name[0] ? k->name : "-");
        kt_buf_putc(b, '\n');
    }
    dashes(b, sizeof(head) - 1 + (ansor ? 0 : sizeof(extra) - 1));
    if (t->total_latency_ms >= 0)
        snprintf(total, sizeof(total), "%.3f", t->total_latency_ms);
    else
        snprintf(total, sizeof(total), "-");
    /* Ansor's format string ends with a tab; kept for parsers of it. */
    kt_buf_printf(b,
                  "Estimated total latency: %s ms\tTrials: %lld\t"
                  "Used time : %.0f s\tNext ID: %d\t\n",
                  total, (long long)t->trials, t->used_s, t->next_id);
    if (!ansor && t->budget > 0) {
        struct kt_progress p = {t->trials, t->budget, 0, t->eta_s};
        p.percent = 100.0 * (double)t->trials / (double)t->budget;
        kt_buf_printf(b, "Progress: ");
        kt_progress_format(b, &p);
        kt_buf_putc(b, '\n');
    }
}

void
kt_progress_compute(struct kt_progress *p, int64_t trials, int64_t budget,
                    int64_t resumed, double elapsed_s)
{
    int64_t done_now = trials - resumed;

    p->trials = trials;
    p->budget = budget;
    p->percent = -1;
    p->eta_s = -1;
    if (budget <= 0)
        return;
    p->percent = trials >= budget ? 100.0
                                  : 100.0 * (double)trials / (double)budget;
    if (trials >= budget)
        p->eta_s = 0;
    else if (done_now > 0 && elapsed_s > 0)
        p->eta_s = (double)(budget - trials) * elapsed_s / (double)done_now;
}

void
kt_duration_format(char *out, size_t len, double s)
{
    long long t = s > 0 ? (long long)(s + 0.5) : 0;

    if (t < 60)
        snprintf(out, len, "%llds", t);
    else if (t < 3600)
        snprintf(out, len, "%lldm%02llds", t / 60, t % 60);
    else if (t < 86400)
        snprintf(out, len, "%lldh%02lldm", t / 3600, t % 3600 / 60);
    else
        snprintf(out, len, "%lldd%02lldh", t / 86400, t % 86400 / 3600);
}

void
kt_progress_format(struct kt_buf *b, const struct kt_progress *p)
{
    char eta[32];

    if (p->budget <= 0) {
        kt_buf_printf(b, "%lld trials", (long long)p->trials);
        return;
    }
    kt_buf_printf(b, "%lld/%lld trials (%.1f%%), ", (long long)p->trials,
                  (long long)p->budget, p->percent);
    if (p->trials >= p->budget) {
        kt_buf_printf(b, "done");
    } else if (p->eta_s < 0) {
        kt_buf_printf(b, "ETA -");
    } else {
        kt_duration_format(eta, sizeof(eta), p->eta_s);
        kt_buf_printf(b, "ETA %s", eta);
    }
}

static void
format_search(struct kt_buf *b, const struct kt_tasklog_search *s)
{
    int i;

    title(b, "Search");
    if (s->sketches > 0)
        kt_buf_printf(b, "Generate Sketches\t\t#s: %lld\n",
                      (long long)s->sketches);
    kt_buf_printf(b,
                  "Sample Initial Population\t#s: %lld\tfail_ct: %lld\t"
                  "Time elapsed: %.2f\n",
                  (long long)s->init_samples, (long long)s->init_fail,
                  s->init_s);
    for (i = 0; i < s->niters; i++) {
        const struct kt_tasklog_ga_iter *g = &s->iters[i];
        kt_buf_printf(b,
                      "GA Iter: %d\tMax score: %.4f\tMin score: %.4f\t"
                      "#Pop: %lld\t#M+: %lld\t#M-: %lld\n",
                      g->iter, g->max_score, g->min_score, (long long)g->pop,
                      (long long)g->mut_ok, (long long)g->mut_fail);
    }
    kt_buf_printf(b, "EvolutionarySearch\t\t#s: %lld\tTime elapsed: %.2f\n",
                  (long long)s->out_states, s->time_s);
    kt_buf_printf(b, "Best predicted score: %.4f\n", s->best_score);
}

static void
mark(struct kt_buf *b, char step, int m)
{
    switch (m) {
    case KT_MARK_OK: kt_buf_putc(b, step); break;
    case KT_MARK_ERROR:
        kt_buf_putc(b, step);
        kt_buf_putc(b, 'E');
        break;
    case KT_MARK_TIMEOUT:
        kt_buf_putc(b, step);
        kt_buf_putc(b, 'T');
        break;
    default: break;
    }
}

static void
format_measure(struct kt_buf *b, const struct kt_tasklog_measure *m)
{
    int batch = m->batch > 0 ? m->batch : m->ncand;
    int i, j;

    title(b, "Measure");
    kt_buf_printf(b, "Get %d programs to measure:\n", m->ncand);
    for (i = 0; i < m->ncand; i += batch) {
        int end = i + batch < m->ncand ? i + batch : m->ncand;
        for (j = i; j < end; j++)
            mark(b, '.', m->cand[j].build);
        for (j = i; j < end; j++)
            mark(b, '*', m->cand[j].run);
        kt_buf_putc(b, '\n');
    }
    kt_buf_printf(b, "Time elapsed for measurement: %.2f s\n", m->time_s);
}

static void
format_train(struct kt_buf *b, const struct kt_tasklog_train *t)
{
    title(b, "Train cost model");
    kt_buf_printf(b, "Time elapsed for training: %.2f s\n", t->time_s);
    kt_buf_printf(b, "Training records: %lld\n", (long long)t->records);
}

void
kt_tasklog_format_round(struct kt_buf *b, const struct kt_tasklog_round *r,
                        int flags)
{
    time_t sec = (time_t)r->wall_time;
    struct tm tm;
    char when[32] = "?";

    if (gmtime_r(&sec, &tm) != NULL)
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    kt_buf_printf(b, "[ %s ] job %s round %lld\n", when,
                  r->job != NULL ? r->job : "-", (long long)r->round);
    title(b, "Task Scheduler");
    kt_tasklog_format_table(b, &r->table, flags);
    if (r->search != NULL)
        format_search(b, r->search);
    if (r->measure != NULL)
        format_measure(b, r->measure);
    if (r->train != NULL)
        format_train(b, r->train);
}

void
kt_tasklog_format_tsv(struct kt_buf *b, const struct kt_tasklog_table *t)
{
    char total[32];

    if (t->total_latency_ms >= 0)
        snprintf(total, sizeof(total), "%.3f", t->total_latency_ms);
    else
        snprintf(total, sizeof(total), "N/A");
    kt_buf_printf(b,
                  "ElapsedTime(s)\t%.0f\tEstimatedLatency(ms)\t%s\t"
                  "Trials\t%lld\n",
                  t->used_s, total, (long long)t->trials);
}

/* Appends text to path with one write(2) (retrying the rest after a short
 * write, which regular files only do on a full disk or a signal). */
static int
append_file(const char *path, const struct kt_buf *b, char *err, size_t errlen)
{
    size_t off = 0;
    int fd, rc = 0;

    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0)
        return kt_seterr(err, errlen, -errno, "task log %s: %s", path,
                         strerror(errno));
    while (off < b->len) {
        ssize_t n = write(fd, b->p + off, b->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = kt_seterr(err, errlen, n < 0 ? -errno : KT_EIO,
                           "task log %s: write: %s", path,
                           n < 0 ? strerror(errno) : "no progress");
            break;
        }
        off += (size_t)n;
    }
    if (close(fd) != 0 && rc == 0)
        rc = kt_seterr(err, errlen, -errno, "task log %s: close: %s", path,
                       strerror(errno));
    return rc;
}

int
kt_tasklog_write(const char *log_dir, const struct kt_tasklog_round *r,
                 int flags, char *err, size_t errlen)
{
    struct kt_buf text, path;
    int rc;

    if (r->job == NULL || r->job[0] == '\0' || r->job[0] == '.' ||
        strchr(r->job, '/') != NULL)
        return kt_seterr(err, errlen, KT_EINVAL,
                         "task log: bad job name "
                         "\"%s\" (empty, leading '.' or '/')",
                         r->job != NULL ? r->job : "");
    kt_buf_init(&text);
    kt_buf_init(&path);
    kt_tasklog_format_round(&text, r, flags);
    kt_buf_printf(&path, "%s/%s.log", log_dir, r->job);
    rc = append_file(path.p, &text, err, errlen);
    if (rc < 0)
        goto out;
    kt_buf_reset(&text);
    kt_buf_reset(&path);
    kt_tasklog_format_tsv(&text, &r->table);
    kt_buf_printf(&path, "%s/%s.total_latency.tsv", log_dir, r->job);
    rc = append_file(path.p, &text, err, errlen);
out:
    kt_buf_free(&path);
    kt_buf_free(&text);
    return rc;
}
