/* report_int.h - the SVG plotting pieces of `kerntune report`, shared by
 * report_svg.c and report_html.c only. */
#ifndef KT_REPORT_INT_H
#define KT_REPORT_INT_H

#include "common/common.h"

/* One x/y chart: axes with round ticks, labels, then marks in data
 * coordinates.  Written into b as an inline <svg> element. */
struct kt_plot {
    struct kt_buf *b;
    double x0, x1, y0, y1; /* data ranges of the axes */
    int w, h;              /* pixels */
    int left, right, top, bottom;
    int int_y; /* y ticks on whole numbers only (rows of a heat map) */
    int log_y; /* logarithmic y axis (y0 > 0) */
};

#define KT_PLOT_INT_Y 1
#define KT_PLOT_LOG_Y 2
void kt_plot_begin(struct kt_plot *p, struct kt_buf *b, const char *cls,
                   int flags, const char *xlabel, const char *ylabel, double x0,
                   double x1, double y0, double y1);
/* A step line through the points whose y is >= 0 (a missing value ends
 * the run: nothing is drawn before the first valid point). */
void kt_plot_steps(struct kt_plot *p, const double *x, const double *y, int n,
                   const char *color);
void kt_plot_rect(struct kt_plot *p, double x0, double x1, double y0, double y1,
                  const char *color, const char *title);
/* A legend entry, n-th from the top right. */
void kt_plot_legend(struct kt_plot *p, int n, const char *label,
                    const char *color);
void kt_plot_end(struct kt_plot *p);

/* The n-th colour of a qualitative palette (cycles). */
const char *kt_plot_color(int n);
/* Appends s with &, <, >, " escaped. */
void kt_html_escape(struct kt_buf *b, const char *s);

#endif /* KT_REPORT_INT_H */
