/* prescore.c - an analytic roofline estimate of a loop tree's run time
 * (Pruner's idea: FLOPs, bytes moved per cache level, vector width and
 * cores), usable to pre-filter candidates before the learned model.  Pure
 * and thread-safe. */
#include "costmodel/cm_internal.h"

#include <math.h>
#include <string.h>

void
kt_machine_default(struct kt_machine *m)
{
    /* The reference VM (docs/design.md section 6): 2 vCPUs, AVX-512 with two FMA
     * ports, ~2 GHz sustained; bandwidths are rough per-core figures. */
    m->cores = 2;
    m->vector_lanes = 16;
    m->flops_per_cycle = 64;
    m->ghz = 2.0;
    m->cache_bytes[0] = 48e3;
    m->cache_bytes[1] = 2e6;
    m->cache_bytes[2] = 8e6;
    m->bw_bytes_per_s[0] = 200e9;
    m->bw_bytes_per_s[1] = 100e9;
    m->bw_bytes_per_s[2] = 30e9;
    m->bw_bytes_per_s[3] = 12e9;
}

struct pre {
    struct kt_machine m;
    double seconds;
};

static double
vector_eff(const struct kt__store_ctx *c, int lanes)
{
    const struct kt_node *in;
    double e;

    if (c->depth == 0)
        return 1.0 / lanes;
    in = c->loops[c->depth - 1].n;
    e = (double)(in->extent < lanes ? in->extent : lanes) / lanes;
    if (in->ann == KT_ANN_VECTORIZE)
        return e;
    /* A unit-stride innermost loop may still be auto-vectorized. */
    if (fabs(kt__stride(c, &c->acc[0], c->depth - 1)) == 1.0)
        return e * 0.5 > 1.0 / lanes ? e * 0.5 : 1.0 / lanes;
    return 1.0 / lanes;
}

static int
store_time(const struct kt__store_ctx *c, void *arg)
{
    struct pre *p = arg;
    const struct kt_machine *m = &p->m;
    struct kt__ops o;
    double outer = 1, flops, mixf, rate, tc, t, par = 1, cores, eff;
    double lvb[KT__MAX_DEPTH + 1], iters, need;
    int l, lev, fit;

    for (l = 0; l < c->depth; l++) {
        outer *= (double)kt__ext(c, l);
        if (c->loops[l].n->ann == KT_ANN_PARALLEL && par == 1)
            par = (double)kt__ext(c, l);
    }
    kt__count_ops(c->store, &o);
    flops = kt__ops_flops(&o) * outer;
    /* Cores in use, with the imbalance of the last wave. */
    cores = par < m->cores ? par : m->cores;
    eff = par / (ceil(par / cores) * cores);
    /* FMAs run at the full rate, other ops at half of it. */
    mixf = kt__ops_flops(&o) > 0
               ? (2.0 * o.mad + 0.5 * (kt__ops_flops(&o) - 2.0 * o.mad)) /
                     kt__ops_flops(&o)
               : 1;
    rate = m->flops_per_cycle * m->ghz * 1e9 * cores * eff * mixf *
           vector_eff(c, m->vector_lanes);
    tc = flops / rate;
    /* Memory: for each cache level, the outermost loop level whose working
     * set fits decides how often that set is refilled from below. */
    for (l = 0; l <= c->depth; l++)
        lvb[l] = kt__level_bytes(c, l);
    for (lev = 0; lev < 3; lev++) {
        need = m->cache_bytes[lev] / (lev == 2 ? cores : 1);
        fit = c->depth;
        for (l = 0; l <= c->depth; l++)
            if (lvb[l] <= need) {
                fit = l;
                break;
            }
        iters = 1;
        for (l = 0; l < fit; l++)
            iters *= (double)kt__ext(c, l);
        t = lvb[fit] * iters /
            (m->bw_bytes_per_s[lev + 1] * (lev + 1 < 3 ? cores * eff : 1));
        if (t > tc)
            tc = t;
    }
    p->seconds += tc;
    return 0;
}

int
kt_prescore(const struct kt_looptree *lt, const struct kt_machine *m,
            double *seconds, char *err, size_t errlen)
{
    struct pre p;
    struct kt_machine d;
    int i, rc;

    kt_machine_default(&d);
    memset(&p, 0, sizeof(p));
    p.m = m != NULL ? *m : d;
    if (p.m.cores <= 0)
        p.m.cores = d.cores;
    if (p.m.vector_lanes <= 0)
        p.m.vector_lanes = d.vector_lanes;
    if (p.m.flops_per_cycle <= 0)
        p.m.flops_per_cycle = d.flops_per_cycle;
    if (p.m.ghz <= 0)
        p.m.ghz = d.ghz;
    for (i = 0; i < 3; i++)
        if (p.m.cache_bytes[i] <= 0)
            p.m.cache_bytes[i] = d.cache_bytes[i];
    for (i = 0; i < 4; i++)
        if (p.m.bw_bytes_per_s[i] <= 0)
            p.m.bw_bytes_per_s[i] = d.bw_bytes_per_s[i];
    *seconds = 0;
    rc = kt__walk(lt, store_time, &p, err, errlen);
    if (rc < 0)
        return rc;
    *seconds = p.seconds;
    return 0;
}
