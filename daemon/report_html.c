/* report_html.c - `kerntune report`: one self-contained HTML page per
 * database (inline SVG and CSS, nothing from the network) with, per job,
 * the tuning curve against trials and wall time, each task's best GFLOPS
 * and share of the estimated latency, the err_no mix over time and the
 * workers' busy share over time (report.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/report.h"
#include "daemon/report_int.h"
#include "measure/measure.h"

#define TIME_BINS 24

static void
iso_time(char *out, size_t len, double t)
{
    time_t sec = (time_t)t;
    struct tm tm;

    snprintf(out, len, "-");
    if (t > 0 && gmtime_r(&sec, &tm) != NULL)
        strftime(out, len, "%Y-%m-%d %H:%M:%SZ", &tm);
}

static double
max_of(const double *v, int n)
{
    double m = 0;
    int i;

    for (i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* The smallest value > 0 (there is one when max_of is > 0). */
static double
min_positive(const double *v, int n)
{
    double m = 0;
    int i;

    for (i = 0; i < n; i++)
        if (v[i] > 0 && (m == 0 || v[i] < m))
            m = v[i];
    return m;
}

/* The tuning curve against trials and against minutes since the job's
 * first trial started. */
static void
curves(struct kt_buf *b, const struct kt_rep_job *j)
{
    int n = j->ntrials, i;
    double *y = kt_xcalloc((size_t)n + 1, sizeof(double));
    double *xt = kt_xcalloc((size_t)n + 1, sizeof(double));
    double *xw = kt_xcalloc((size_t)n + 1, sizeof(double));
    struct kt_plot p;

    kt_rep_curve(j, y);
    for (i = 0; i < n; i++) {
        xt[i] = i + 1;
        xw[i] = (j->trial[i].finished - j->first_started) / 60.0;
    }
    kt_buf_printf(b, "<h3>Tuning curve</h3>\n");
    if (max_of(y, n) <= 0) {
        kt_buf_printf(b, "<p class='note'>No estimate yet: some task has no "
                         "valid program.</p>\n");
    } else {
        /* A first estimate far above the rest would flatten the curve:
         * past a factor of 20 the axis is logarithmic. */
        double top = max_of(y, n), low = min_positive(y, n);
        int log_y = top > 20 * low;
        const char *label = log_y ? "estimated total latency (ms, log)"
                                  : "estimated total latency (ms)";
        double y0 = log_y ? low / 1.2 : 0, y1 = log_y ? top * 1.2 : top * 1.05;
        int flags = log_y ? KT_PLOT_LOG_Y : 0;

        kt_plot_begin(&p, b, "curve-trials", flags, "trials", label, 0, n, y0,
                      y1);
        kt_plot_steps(&p, xt, y, n, kt_plot_color(0));
        kt_plot_end(&p);
        kt_plot_begin(&p, b, "curve-time", flags, "wall time (minutes)", label,
                      0, max_of(xw, n), y0, y1);
        kt_plot_steps(&p, xw, y, n, kt_plot_color(1));
        kt_plot_end(&p);
    }
    free(y);
    free(xt);
    free(xw);
}

/* A horizontal bar of share (0..1) in an inline SVG. */
static void
bar(struct kt_buf *b, double share, const char *color)
{
    kt_buf_printf(b,
                  "<svg class='bar' width='100' height='12'>"
                  "<rect width='100' height='12' fill='#eee'/>"
                  "<rect width='%.1f' height='12' fill='%s'/></svg>",
                  100 * (share > 0 ? share : 0), color);
}

static void
task_table(struct kt_buf *b, const struct kt_rep_job *j)
{
    double total = 0, top = 0;
    int i;

    for (i = 0; i < j->ntasks; i++) {
        const struct kt_rep_task *t = &j->tasks[i];
        if (t->best_cost > 0) {
            total += t->weight * t->best_cost;
            top = fmax(top, t->flops / t->best_cost / 1e9);
        }
    }
    kt_buf_printf(b, "<h3>Best per task</h3>\n<table class='tasks'><tr>"
                     "<th>ID</th><th>Task</th><th>Weight</th><th>Trials</th>"
                     "<th>Errors</th><th>Latency (ms)</th><th>GFLOPS</th>"
                     "<th></th><th>Share of total latency</th><th></th></tr>"
                     "\n");
    for (i = 0; i < j->ntasks; i++) {
        const struct kt_rep_task *t = &j->tasks[i];
        double gflops = t->best_cost > 0 ? t->flops / t->best_cost / 1e9 : 0;
        double share = total > 0 ? t->weight * t->best_cost / total : 0;
        kt_buf_printf(b, "<tr><td>%d</td><td>", i);
        kt_html_escape(b, t->name);
        kt_buf_printf(b, "</td><td>%g</td><td>%lld</td><td>%lld</td>",
                      t->weight, (long long)t->trials, (long long)t->errors);
        if (t->best_cost > 0)
            kt_buf_printf(b, "<td>%.4f</td><td>%.2f</td><td>",
                          t->best_cost * 1e3, gflops);
        else
            kt_buf_printf(b, "<td>-</td><td>-</td><td>");
        bar(b, top > 0 ? gflops / top : 0, kt_plot_color(0));
        kt_buf_printf(b, "</td><td>%.1f%%</td><td>", 100 * share);
        bar(b, share, kt_plot_color(1));
        kt_buf_printf(b, "</td></tr>\n");
    }
    kt_buf_printf(b, "</table>\n");
}

/* Time bins of the job's span: bin i covers t0 + i*width. */
static double
bin_width(const struct kt_rep_job *j)
{
    double span = j->last_finished - j->first_started;
    return (span > 0 ? span : 1) / TIME_BINS;
}

static void
errors_over_time(struct kt_buf *b, const struct kt_rep_job *j)
{
    int counts[TIME_BINS][KT_MERR_COUNT];
    int seen[KT_MERR_COUNT] = {0};
    double w = bin_width(j), top = 0, tmin = w / 60;
    struct kt_plot p;
    int i, e, nleg = 0;

    memset(counts, 0, sizeof(counts));
    for (i = 0; i < j->ntrials; i++) {
        int k = (int)((j->trial[i].finished - j->first_started) / w);
        e = j->trial[i].err_no;
        if (e < 0 || e >= KT_MERR_COUNT)
            e = KT_MERR_UNKNOWN;
        k = k < 0 ? 0 : k >= TIME_BINS ? TIME_BINS - 1 : k;
        counts[k][e]++;
        seen[e] = 1;
    }
    for (i = 0; i < TIME_BINS; i++) {
        double sum = 0;
        for (e = 0; e < KT_MERR_COUNT; e++)
            sum += counts[i][e];
        top = fmax(top, sum);
    }
    kt_buf_printf(b, "<h3>Trials by err_no over time</h3>\n");
    kt_plot_begin(&p, b, "errors", 0, "wall time (minutes)", "trials per bin",
                  0, TIME_BINS * tmin, 0, top * 1.25);
    for (i = 0; i < TIME_BINS; i++) {
        double y = 0;
        for (e = 0; e < KT_MERR_COUNT; e++) {
            char title[64];
            if (counts[i][e] == 0)
                continue;
            snprintf(title, sizeof(title), "%s: %d", kt_measure_errname(e),
                     counts[i][e]);
            kt_plot_rect(&p, i * tmin, (i + 0.9) * tmin, y, y + counts[i][e],
                         kt_plot_color(e == 0 ? 2 : e + 2), title);
            y += counts[i][e];
        }
    }
    for (e = 0; e < KT_MERR_COUNT; e++)
        if (seen[e])
            kt_plot_legend(&p, nleg++, kt_measure_errname(e),
                           kt_plot_color(e == 0 ? 2 : e + 2));
    kt_plot_end(&p);
}

struct span {
    int worker;
    double t0, t1;
};

static int
span_cmp(const void *a, const void *b)
{
    const struct span *x = a, *y = b;

    if (x->worker != y->worker)
        return x->worker < y->worker ? -1 : 1;
    return x->t0 < y->t0 ? -1 : x->t0 > y->t0;
}

/* Adds the share of each time bin that [t0, t1) covers to row. */
static void
add_busy(const struct kt_rep_job *j, double *row, double t0, double t1)
{
    double w = bin_width(j);
    int k;

    for (k = 0; k < TIME_BINS; k++) {
        double b0 = j->first_started + k * w;
        double lo = fmax(b0, t0), hi = fmin(b0 + w, t1);
        if (hi > lo)
            row[k] += (hi - lo) / w;
    }
}

/* busy[worker * TIME_BINS + bin]: the share of the bin in which the worker
 * had a batch (the union of its trials' started..finished: the trials of a
 * batch share one span). */
static double *
busy_shares(const struct kt_rep_job *j)
{
    double *busy = kt_xcalloc((size_t)j->nworkers * TIME_BINS, sizeof(double));
    struct span *v = kt_xcalloc((size_t)j->ntrials + 1, sizeof(*v));
    int i, n = 0;

    for (i = 0; i < j->ntrials; i++) {
        const struct kt_rep_trial *t = &j->trial[i];
        if (t->worker >= 0 && t->finished > t->started)
            v[n++] = (struct span){t->worker, t->started, t->finished};
    }
    qsort(v, (size_t)n, sizeof(*v), span_cmp);
    for (i = 0; i < n;) {
        struct span u = v[i++];
        while (i < n && v[i].worker == u.worker && v[i].t0 <= u.t1)
            u.t1 = fmax(u.t1, v[i++].t1);
        add_busy(j, busy + (size_t)u.worker * TIME_BINS, u.t0, u.t1);
    }
    free(v);
    return busy;
}

/* Each worker's busy share per time bin as a heat map: one row per
 * worker. */
static void
workers_over_time(struct kt_buf *b, const struct kt_rep_job *j)
{
    double tmin = bin_width(j) / 60;
    double *busy;
    struct kt_plot p;
    int i, k;

    kt_buf_printf(b, "<h3>Worker utilisation</h3>\n");
    if (j->nworkers == 0) {
        kt_buf_printf(b, "<p class='note'>No trial names its worker.</p>\n");
        return;
    }
    busy = busy_shares(j);
    kt_plot_begin(&p, b, "workers", KT_PLOT_INT_Y, "wall time (minutes)",
                  "worker", 0, TIME_BINS * tmin, 0, j->nworkers);
    for (i = 0; i < j->nworkers; i++) {
        for (k = 0; k < TIME_BINS; k++) {
            double share = fmin(busy[i * TIME_BINS + k], 1.0);
            char color[32], title[512];
            int shade = (int)(255 - 200 * share);
            snprintf(color, sizeof(color), "rgb(%d,%d,255)", shade, shade);
            snprintf(title, sizeof(title), "%.200s: %.0f%% busy", j->workers[i],
                     100 * share);
            kt_plot_rect(&p, k * tmin, (k + 1) * tmin, i, i + 0.9, color,
                         title);
        }
    }
    kt_plot_end(&p);
    kt_buf_printf(b, "<p class='note'>Busy share per worker and time bin "
                     "(white 0%%, blue 100%%). Rows from the bottom:");
    for (i = 0; i < j->nworkers; i++) {
        kt_buf_printf(b, "%s %d = ", i ? "," : "", i);
        kt_html_escape(b, j->workers[i]);
    }
    kt_buf_printf(b, ".</p>\n");
    free(busy);
}

static void
job_section(struct kt_buf *b, const struct kt_rep_job *j)
{
    char t0[40], t1[40];

    iso_time(t0, sizeof(t0), j->first_started);
    iso_time(t1, sizeof(t1), j->last_finished);
    kt_buf_printf(b, "<section class='job'><h2>Job ");
    kt_html_escape(b, j->name);
    kt_buf_printf(b, "</h2>\n<p>Target <code>");
    kt_html_escape(b, j->target);
    kt_buf_printf(b, "</code>, state %s, %d tasks, %lld trials",
                  j->state ? j->state : "-", j->ntasks, (long long)j->trials);
    if (j->budget > 0)
        kt_buf_printf(b, " of %lld (%.1f%%)", (long long)j->budget,
                      100.0 * (double)j->trials / (double)j->budget);
    kt_buf_printf(b, ", %lld failed; from %s to %s.</p>\n",
                  (long long)j->errors, t0, t1);
    curves(b, j);
    task_table(b, j);
    errors_over_time(b, j);
    workers_over_time(b, j);
    kt_buf_printf(b, "</section>\n");
}

void
kt_report_html(FILE *out, const struct kt_rep *r)
{
    struct kt_buf b;
    char now[40];
    int i;

    kt_buf_init(&b);
    iso_time(now, sizeof(now), (double)time(NULL));
    kt_buf_printf(&b,
                  "<!DOCTYPE html>\n<html lang='en'><head><meta "
                  "charset='utf-8'>\n<title>kerntune report</title>\n"
                  "<style>body{font-family:sans-serif;margin:24px;"
                  "color:#222}table{border-collapse:collapse;font-size:13px}"
                  "td,th{padding:2px 8px;border-bottom:1px solid #ddd;"
                  "text-align:right}td:nth-child(2),th:nth-child(2){text-align:"
                  "left}"
                  "svg.plot{display:block;margin:8px 0}"
                  ".note{color:#666}</style>\n</head><body>\n"
                  "<h1>kerntune report</h1>\n<p>Database <code>");
    kt_html_escape(&b, r->db_path);
    kt_buf_printf(&b, "</code>, %d jobs, written %s.</p>\n", r->njobs, now);
    for (i = 0; i < r->njobs; i++)
        job_section(&b, &r->jobs[i]);
    kt_buf_printf(&b, "</body></html>\n");
    fwrite(b.p, 1, b.len, out);
    kt_buf_free(&b);
}
