/* net_rt.h - internal to compile/: fixed text of the compiled network's
 * files (net_rt.c). */
#ifndef KT_COMPILE_NET_RT_H
#define KT_COMPILE_NET_RT_H

/* Static C functions for the untuned nodes (rt_binary, rt_unary, ...). */
extern const char kt__cc_rt_ops[];
/* rt_gather (nearest Resize) and rt_bilinear (linear Resize). */
extern const char kt__cc_rt_resize[];
/* The body of DIR/<model>_infer.c after its NET_* definitions. */
extern const char kt__cc_rt_infer[];
/* DIR/ort_run.js. */
extern const char kt__cc_rt_ort[];

#endif /* KT_COMPILE_NET_RT_H */
