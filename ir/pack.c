/* pack.c - the cache_read ("CHR") and layout_rewrite ("LR") steps.
 *
 * cache_read inserts, before a reading stage, a "_pack" stage that copies
 * one tensor the reader reads; the reader then reads the copy.  Attached
 * with compute_at, the copy covers only the region the reader's inner
 * loops read, laid out contiguously in the reader's loop order (panel
 * packing).  layout_rewrite moves such a copy of a constant weight out of
 * the kernel into the module's pack routine, run once before the kernel:
 * the kernel then reads the weights already in its tiled layout. */
#include "ir/ir.h"

#include <stdio.h>
#include <string.h>

#define FAIL(...) kt_seterr(err, errlen, KT_ESCHEDULE, __VA_ARGS__)

static void
retarget_loads(struct kt_expr *e, int from, int to)
{
    if (e == NULL)
        return;
    if (e->op == KT_X_LOAD && e->src == from)
        e->src = to;
    retarget_loads(e->a, from, to);
    retarget_loads(e->b, from, to);
}

static int
name_taken(const struct kt_state *st, const char *name)
{
    int i;

    for (i = 0; i < st->ntensors; i++)
        if (strcmp(st->tensors[i].name, name) == 0)
            return 1;
    return 0;
}

/* The copy stage: pack[d0, d1, ...] = src[d0, d1, ...]. */
static void
init_pack_stage(struct kt_sstage *s, const struct kt_tensor *src, int src_t,
                int out_t)
{
    int d;

    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", src->name);
    s->out = out_t;
    s->naxes = s->nspatial = src->ndim;
    s->op = KT_ASSIGN;
    s->body = kt_expr_new(KT_X_LOAD);
    s->body->src = src_t;
    s->body->ndim = src->ndim;
    s->body->idx = kt_xcalloc((size_t)src->ndim, sizeof(struct kt_affine));
    s->niters = src->ndim;
    for (d = 0; d < src->ndim; d++) {
        struct kt_iter *it = &s->iters[d];
        snprintf(s->axes[d].name, sizeof(s->axes[d].name), "d%d", d);
        s->axes[d].extent = src->shape[d];
        kt_aff_var(&s->body->idx[d], d, 1);
        it->extent = src->shape[d];
        it->nparts = 1;
        it->parts[0].axis = d;
        s->nparts[d] = 1;
        s->part_extent[d][0] = src->shape[d];
    }
    s->attach_stage = -1;
    s->cache_read = 1;
}

int
kt__do_cache_read(struct kt_state *st, const struct kt_step *sp, char *err,
                  size_t errlen)
{
    struct kt_sstage *c = &st->stages[sp->stage];
    int t = (int)sp->v[0], idx = sp->stage, pt;
    struct kt_tensor *nt;
    char name[KT_MAX_NAME];

    if (t < 0 || t >= st->ntensors)
        return FAIL("cache_read: no tensor %d", t);
    if (c->is_pad || c->cache_read)
        return FAIL("cache_read: %s is a padding or pack stage", c->name);
    if (!kt_expr_reads(c->body, t))
        return FAIL("cache_read: %s does not read %s", c->name,
                    st->tensors[t].name);
    if (st->nstages == KT_MAX_STAGES || st->ntensors == KT_MAX_TENSORS)
        return FAIL("cache_read: too many stages");

    snprintf(name, sizeof(name), "%.24s_pack", st->tensors[t].name);
    if (name_taken(st, name))
        snprintf(name, sizeof(name), "%.16s_pack%d", st->tensors[t].name,
                 st->ntensors % 100);
    pt = st->ntensors++;
    nt = &st->tensors[pt];
    *nt = st->tensors[t];
    memcpy(nt->name, name, sizeof(name));
    nt->kind = KT_TENSOR_INTERMEDIATE;
    nt->is_const = 0;

    kt__state_open_stage(st, idx);
    init_pack_stage(&st->stages[idx], &st->tensors[t], t, pt);
    snprintf(st->stages[idx].name, sizeof(st->stages[idx].name), "%s", name);
    retarget_loads(st->stages[idx + 1].body, t, pt);
    nt->producer = idx;
    return KT_OK;
}

int
kt__do_layout_rewrite(struct kt_state *st, const struct kt_step *sp, char *err,
                      size_t errlen)
{
    struct kt_sstage *s = &st->stages[sp->stage];
    const struct kt_tensor *src;

    if (!s->cache_read)
        return FAIL("layout_rewrite: %s is not a cache_read stage", s->name);
    src = &st->tensors[s->body->src];
    if (src->kind != KT_TENSOR_INPUT || !src->is_const)
        return FAIL("layout_rewrite: %s is not a constant weight", src->name);
    if (s->prepacked)
        return FAIL("layout_rewrite: %s is already rewritten", s->name);
    s->prepacked = 1;
    return KT_OK;
}
