/* report_svg.c - inline SVG charts for `kerntune report` (report_int.h):
 * no scripts, no fonts or styles from the network. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "daemon/report_int.h"

const char *
kt_plot_color(int n)
{
    static const char *const palette[] = {
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    };
    return palette[(n < 0 ? -n : n) % (int)KT_ARRAY_LEN(palette)];
}

void
kt_html_escape(struct kt_buf *b, const char *s)
{
    for (; s != NULL && *s; s++) {
        switch (*s) {
        case '&': kt_buf_printf(b, "&amp;"); break;
        case '<': kt_buf_printf(b, "&lt;"); break;
        case '>': kt_buf_printf(b, "&gt;"); break;
        case '"': kt_buf_printf(b, "&quot;"); break;
        default: kt_buf_putc(b, *s); break;
        }
    }
}

static double
px(const struct kt_plot *p, double x)
{
    double span = p->x1 > p->x0 ? p->x1 - p->x0 : 1;
    return p->left + (x - p->x0) / span * (p->w - p->left - p->right);
}

static double
py(const struct kt_plot *p, double y)
{
    double y0 = p->log_y ? log10(p->y0) : p->y0;
    double y1 = p->log_y ? log10(p->y1) : p->y1;
    double span = y1 > y0 ? y1 - y0 : 1;

    if (p->log_y)
        y = log10(y > 0 ? y : p->y0);
    return p->h - p->bottom - (y - y0) / span * (p->h - p->top - p->bottom);
}

static void
ytick(struct kt_plot *p, double v, double zero)
{
    kt_buf_printf(p->b,
                  "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' "
                  "stroke='#eee'/><text x='%d' y='%.1f' "
                  "text-anchor='end'>%g</text>\n",
                  p->left, py(p, v), p->w - p->right, py(p, v), p->left - 4,
                  py(p, v) + 4, fabs(v) < zero ? 0 : v);
}

/* 1, 2 and 5 times each power of ten inside the axis. */
static void
log_ticks(struct kt_plot *p)
{
    static const double mult[] = {1, 2, 5};
    double d;
    size_t i;

    for (d = floor(log10(p->y0)); d <= ceil(log10(p->y1)); d++)
        for (i = 0; i < KT_ARRAY_LEN(mult); i++) {
            double v = mult[i] * pow(10, d);
            if (v >= p->y0 && v <= p->y1)
                ytick(p, v, 0);
        }
}

/* A round step (1, 2 or 5 times a power of ten) giving about 5 ticks. */
static double
tick_step(double span)
{
    double raw = span > 0 ? span / 5 : 1;
    double mag = pow(10, floor(log10(raw)));
    double f = raw / mag;

    return mag * (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10);
}

static void
ticks(struct kt_plot *p)
{
    double s, v;
    int h = p->h - p->bottom;

    s = tick_step(p->x1 - p->x0);
    for (v = ceil(p->x0 / s) * s; v <= p->x1 + s * 1e-9; v += s)
        kt_buf_printf(p->b,
                      "<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' "
                      "stroke='#999'/><text x='%.1f' y='%d' "
                      "text-anchor='middle'>%g</text>\n",
                      px(p, v), h, px(p, v), h + 4, px(p, v), h + 16,
                      fabs(v) < s * 1e-9 ? 0 : v);
    if (p->log_y) {
        log_ticks(p);
        return;
    }
    s = tick_step(p->y1 - p->y0);
    if (p->int_y)
        s = s < 1 ? 1 : ceil(s);
    for (v = ceil(p->y0 / s) * s; v <= p->y1 + s * 1e-9; v += s)
        ytick(p, v, s * 1e-9);
}

void
kt_plot_begin(struct kt_plot *p, struct kt_buf *b, const char *cls, int flags,
              const char *xlabel, const char *ylabel, double x0, double x1,
              double y0, double y1)
{
    memset(p, 0, sizeof(*p));
    p->int_y = (flags & KT_PLOT_INT_Y) != 0;
    p->log_y = (flags & KT_PLOT_LOG_Y) != 0 && y0 > 0;
    p->b = b;
    p->w = 640;
    p->h = 300;
    p->left = 64;
    p->right = 16;
    p->top = 12;
    p->bottom = 44;
    p->x0 = x0;
    p->x1 = x1 > x0 ? x1 : x0 + 1;
    p->y0 = y0;
    p->y1 = y1 > y0 ? y1 : y0 + 1;
    kt_buf_printf(b,
                  "<svg class='plot %s' xmlns='http://www.w3.org/2000/svg' "
                  "width='%d' height='%d' viewBox='0 0 %d %d' "
                  "font-size='11' font-family='sans-serif'>\n"
                  "<rect width='100%%' height='100%%' fill='#fff'/>\n",
                  cls, p->w, p->h, p->w, p->h);
    ticks(p);
    kt_buf_printf(b,
                  "<rect x='%d' y='%d' width='%d' height='%d' fill='none' "
                  "stroke='#333'/>\n",
                  p->left, p->top, p->w - p->left - p->right,
                  p->h - p->top - p->bottom);
    kt_buf_printf(b, "<text x='%d' y='%d' text-anchor='middle'>",
                  (p->w + p->left) / 2, p->h - 6);
    kt_html_escape(b, xlabel);
    kt_buf_printf(b,
                  "</text>\n<text transform='translate(14,%d) rotate(-90)' "
                  "text-anchor='middle'>",
                  (p->h - p->bottom + p->top) / 2);
    kt_html_escape(b, ylabel);
    kt_buf_printf(b, "</text>\n");
}

void
kt_plot_steps(struct kt_plot *p, const double *x, const double *y, int n,
              const char *color)
{
    int i, open = 0;
    double last = 0;

    for (i = 0; i < n; i++) {
        if (y[i] < 0)
            continue;
        if (!open) {
            kt_buf_printf(p->b,
                          "<polyline fill='none' stroke='%s' "
                          "stroke-width='2' points='%.1f,%.1f",
                          color, px(p, x[i]), py(p, y[i]));
            open = 1;
        } else if (y[i] != last || i == n - 1) {
            /* Only where the value changes: a step, not every trial. */
            kt_buf_printf(p->b, " %.1f,%.1f %.1f,%.1f", px(p, x[i]),
                          py(p, last), px(p, x[i]), py(p, y[i]));
        }
        last = y[i];
    }
    if (open)
        kt_buf_printf(p->b, "'/>\n");
}

void
kt_plot_rect(struct kt_plot *p, double x0, double x1, double y0, double y1,
             const char *color, const char *title)
{
    double top = py(p, y1), bottom = py(p, y0);

    kt_buf_printf(p->b,
                  "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' "
                  "fill='%s'>",
                  px(p, x0), top, px(p, x1) - px(p, x0), bottom - top, color);
    if (title != NULL) {
        kt_buf_printf(p->b, "<title>");
        kt_html_escape(p->b, title);
        kt_buf_printf(p->b, "</title>");
    }
    kt_buf_printf(p->b, "</rect>\n");
}

void
kt_plot_legend(struct kt_plot *p, int n, const char *label, const char *color)
{
    int x = p->w - p->right - 170, y = p->top + 8 + 15 * n;

    kt_buf_printf(p->b,
                  "<rect x='%d' y='%d' width='10' height='10' fill='%s'/>"
                  "<text x='%d' y='%d'>",
                  x, y, color, x + 14, y + 9);
    kt_html_escape(p->b, label);
    kt_buf_printf(p->b, "</text>\n");
}

void
kt_plot_end(struct kt_plot *p)
{
    kt_buf_printf(p->b, "</svg>\n");
}
