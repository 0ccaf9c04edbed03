/* net_rt.h - internal to compile/: fixed text of the compiled network's
 * files (net_rt.c). */
#ifndef KT_COMPILE_NET_RT_H
#define KT_COMPILE_NET_RT_H

/* The includes and thread-count helpers every <model>_net.c starts
 * with. */
extern const char kt__cc_rt_prelude[];
/* The static C functions for the untuned layout nodes (rt_transpose,
 * rt_gather for nearest Resize by other than whole factors, ...), by
 * name; the last has name NULL.  Elementwise nodes are loops of their own
 * (net_expr.c). */
struct kt_cc_rt_fn {
    const char *name, *text;
};
extern const struct kt_cc_rt_fn kt__cc_rt_fns[];
/* The body of DIR/<model>_infer.c after its NET_* definitions. */
extern const char kt__cc_rt_infer[];
/* DIR/ort_run.js. */
extern const char kt__cc_rt_ort[];

#endif /* KT_COMPILE_NET_RT_H */
