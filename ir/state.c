/* state.c - schedule states: replaying transform steps on a DAG.
 *
 * A state copies the DAG's stages and gives every axis a list of parts
 * (outer to inner) and every stage a list of iterators over those parts.
 * Steps are validated completely before anything changes, so a failed step
 * leaves the state as it was. */
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const step_names[KT_STEP_NKINDS] = {
    [KT_STEP_SPLIT] = "SP",          [KT_STEP_REORDER] = "RE",
    [KT_STEP_FUSE] = "FU",           [KT_STEP_COMPUTE_AT] = "CA",
    [KT_STEP_COMPUTE_INLINE] = "CI", [KT_STEP_COMPUTE_ROOT] = "CR",
    [KT_STEP_CACHE_WRITE] = "CHW",   [KT_STEP_ANNOTATE] = "AN",
    [KT_STEP_PRAGMA] = "PR",         [KT_STEP_CACHE_READ] = "CHR",
    [KT_STEP_LAYOUT_REWRITE] = "LR",
};

static void
init_iters(struct kt_sstage *s)
{
    int a;

    s->niters = s->naxes;
    for (a = 0; a < s->naxes; a++) {
        struct kt_iter *it = &s->iters[a];
        memset(it, 0, sizeof(*it));
        it->extent = s->axes[a].extent;
        it->reduce = s->axes[a].reduce;
        it->nparts = 1;
        it->parts[0].axis = a;
        it->parts[0].part = 0;
        s->nparts[a] = 1;
        s->part_extent[a][0] = s->axes[a].extent;
    }
}

struct kt_state *
kt_state_new(const struct kt_dag *dag)
{
    struct kt_state *st = kt_xcalloc(1, sizeof(*st));
    int i;

    st->dag = dag;
    st->ntensors = dag->ntensors;
    memcpy(st->tensors, dag->tensors, sizeof(dag->tensors));
    st->nstages = dag->nstages;
    st->stages = kt_xcalloc((size_t)KT_MAX_STAGES, sizeof(*st->stages));
    for (i = 0; i < dag->nstages; i++) {
        const struct kt_stage *d = &dag->stages[i];
        struct kt_sstage *s = &st->stages[i];
        memcpy(s->name, d->name, sizeof(s->name));
        s->out = d->out;
        s->naxes = d->naxes;
        s->nspatial = d->nspatial;
        memcpy(s->axes, d->axes, sizeof(s->axes));
        s->op = d->op;
        s->body = kt_expr_clone(d->body);
        s->is_pad = d->is_pad;
        s->attach_stage = -1;
        init_iters(s);
    }
    return st;
}

struct kt_state *
kt_state_clone(const struct kt_state *src)
{
    struct kt_state *st = kt_xmalloc(sizeof(*st));
    int i;

    *st = *src;
    st->stages = kt_xmalloc((size_t)KT_MAX_STAGES * sizeof(*st->stages));
    memcpy(st->stages, src->stages, (size_t)src->nstages * sizeof(*st->stages));
    for (i = 0; i < st->nstages; i++)
        st->stages[i].body = kt_expr_clone(src->stages[i].body);
    st->capsteps = src->nsteps;
    st->steps = kt_xmalloc(sizeof(*st->steps) *
                           (size_t)(st->capsteps ? st->capsteps : 1));
    if (src->nsteps > 0)
        memcpy(st->steps, src->steps, sizeof(*st->steps) * (size_t)src->nsteps);
    return st;
}

void
kt_state_free(struct kt_state *st)
{
    int i;

    if (st == NULL)
        return;
    for (i = 0; i < st->nstages; i++)
        kt_expr_free(st->stages[i].body);
    free(st->stages);
    free(st->steps);
    free(st);
}

/* ---- helpers ------------------------------------------------------------ */

static int
is_output(const struct kt_state *st, int s)
{
    return st->tensors[st->stages[s].out].kind == KT_TENSOR_OUTPUT;
}

/* Is stage s attached, directly or through others, to stage anc? */
static int
attached_under(const struct kt_state *st, int s, int anc)
{
    int guard = 0;

    while (s >= 0 && guard++ <= st->nstages) {
        if (s == anc)
            return 1;
        s = st->stages[s].attach_stage;
    }
    return 0;
}

/* Replaces, in e, every load of tensor t by a copy of body with the
 * producer's axis variables replaced by the load's index expressions. */
static int
subst_loads(struct kt_expr **pe, int t, const struct kt_expr *body)
{
    struct kt_expr *e = *pe;
    int rc;

    if (e == NULL)
        return KT_OK;
    if (e->op == KT_X_LOAD && e->src == t) {
        struct kt_expr *copy = kt_expr_clone(body);
        rc = kt_expr_subst_axes(copy, e->idx, e->ndim);
        if (rc != KT_OK) {
            kt_expr_free(copy);
            return rc;
        }
        kt_expr_free(e);
        *pe = copy;
        return KT_OK;
    }
    rc = subst_loads(&e->a, t, body);
    if (rc == KT_OK)
        rc = subst_loads(&e->b, t, body);
    return rc;
}

#define FAIL(...) kt_seterr(err, errlen, KT_ESCHEDULE, __VA_ARGS__)

/* ---- steps ------------------------------------------------------------- */

static int
check_iter(const struct kt_sstage *s, int iter, const char *what, char *err,
           size_t errlen)
{
    if (iter < 0 || iter >= s->niters)
        return FAIL("%s: stage %s has no iterator %d (it has %d)", what,
                    s->name, iter, s->niters);
    return KT_OK;
}

/* Iterator positions are what compute_at points at, so a stage that
 * already has stages attached keeps its iterator list. */
static int
check_no_attached(const struct kt_state *st, int stage, const char *what,
                  char *err, size_t errlen)
{
    int i;

    for (i = 0; i < st->nstages; i++)
        if (!st->stages[i].inlined && st->stages[i].attach_stage == stage)
            return FAIL("%s: %s has stage %s attached; transform it before "
                        "attaching",
                        what, st->stages[stage].name, st->stages[i].name);
    return KT_OK;
}

static int
do_split(struct kt_state *st, const struct kt_step *sp, char *err,
         size_t errlen)
{
    struct kt_sstage *s = &st->stages[sp->stage];
    struct kt_iter *it;
    int64_t prod = 1;
    int axis, part, i, j, n = sp->n;

    if (check_iter(s, sp->iter, "split", err, errlen) ||
        check_no_attached(st, sp->stage, "split", err, errlen))
        return KT_ESCHEDULE;
    it = &s->iters[sp->iter];
    if (it->nparts != 1)
        return FAIL("split: iterator %d of %s is fused", sp->iter, s->name);
    if (it->ann != KT_ANN_NONE)
        return FAIL("split: iterator %d of %s is annotated", sp->iter, s->name);
    axis = it->parts[0].axis;
    part = it->parts[0].part;
    if (n < 1 || s->nparts[axis] + n > KT_MAX_PARTS)
        return FAIL("split: %d lengths would give axis %s more than %d parts",
                    n, s->axes[axis].name, KT_MAX_PARTS);
    if (s->niters + n > KT_MAX_ITERS)
        return FAIL("split: stage %s would have more than %d iterators",
                    s->name, KT_MAX_ITERS);
    for (i = 0; i < n; i++) {
        if (sp->v[i] < 1)
            return FAIL("split: length %lld is not positive",
                        (long long)sp->v[i]);
        prod *= sp->v[i];
        if (prod > it->extent)
            break;
    }
    if (prod > it->extent || it->extent % prod != 0)
        return FAIL("split: lengths of product %lld do not divide the extent "
                    "%lld of iterator %d of %s",
                    (long long)prod, (long long)it->extent, sp->iter, s->name);

    /* Parts of this axis after 'part' move n places inward. */
    for (j = s->nparts[axis] - 1; j > part; j--)
        s->part_extent[axis][j + n] = s->part_extent[axis][j];
    s->part_extent[axis][part] = it->extent / prod;
    for (i = 0; i < n; i++)
        s->part_extent[axis][part + 1 + i] = sp->v[i];
    s->nparts[axis] += n;
    for (j = 0; j < s->niters; j++) {
        struct kt_iter *o = &s->iters[j];
        int p;
        for (p = 0; p < o->nparts; p++)
            if (o->parts[p].axis == axis && o->parts[p].part > part)
                o->parts[p].part += n;
    }
    /* Insert n new iterators after the split one. */
    memmove(&s->iters[sp->iter + 1 + n], &s->iters[sp->iter + 1],
            sizeof(*s->iters) * (size_t)(s->niters - sp->iter - 1));
    s->niters += n;
    for (i = 0; i <= n; i++) {
        struct kt_iter *o = &s->iters[sp->iter + i];
        int red = s->axes[axis].reduce;
        memset(o, 0, sizeof(*o));
        o->extent = s->part_extent[axis][part + i];
        o->reduce = red;
        o->nparts = 1;
        o->parts[0].axis = axis;
        o->parts[0].part = part + i;
    }
    s->transformed = 1;
    return KT_OK;
}

static int
do_reorder(struct kt_state *st, const struct kt_step *sp, char *err,
           size_t errlen)
{
    struct kt_sstage *s = &st->stages[sp->stage];
    struct kt_iter tmp[KT_MAX_ITERS];
    int seen[KT_MAX_ITERS] = {0};
    int i;

    if (check_no_attached(st, sp->stage, "reorder", err, errlen))
        return KT_ESCHEDULE;
    if (sp->n != s->niters)
        return FAIL("reorder: %d iterators given, stage %s has %d", sp->n,
                    s->name, s->niters);
    for (i = 0; i < sp->n; i++) {
        if (sp->v[i] < 0 || sp->v[i] >= s->niters || seen[sp->v[i]])
            return FAIL("reorder: order is not a permutation of 0..%d",
                        s->niters - 1);
        seen[sp->v[i]] = 1;
    }
    for (i = 0; i < sp->n; i++)
        tmp[i] = s->iters[sp->v[i]];
    memcpy(s->iters, tmp, sizeof(*tmp) * (size_t)s->niters);
    s->transformed = 1;
    return KT_OK;
}

static int
do_fuse(struct kt_state *st, const struct kt_step *sp, char *err, size_t errlen)
{
    struct kt_sstage *s = &st->stages[sp->stage];
    struct kt_iter f;
    int i, n = sp->n, kinds = 0;

    if (check_no_attached(st, sp->stage, "fuse", err, errlen))
        return KT_ESCHEDULE;
    if (n < 2 || sp->iter < 0 || sp->iter + n > s->niters)
        return FAIL("fuse: iterators %d..%d out of range for %s", sp->iter,
                    sp->iter + n - 1, s->name);
    memset(&f, 0, sizeof(f));
    f.extent = 1;
    for (i = 0; i < n; i++) {
        const struct kt_iter *it = &s->iters[sp->iter + i];
        if (it->ann != KT_ANN_NONE)
            return FAIL("fuse: iterator %d of %s is annotated", sp->iter + i,
                        s->name);
        if (f.nparts + it->nparts > (int)KT_ARRAY_LEN(f.parts))
            return FAIL("fuse: too many parts");
        memcpy(&f.parts[f.nparts], it->parts,
               sizeof(*it->parts) * (size_t)it->nparts);
        f.nparts += it->nparts;
        f.extent *= it->extent;
        kinds |= it->reduce == 2 ? 3 : (1 << it->reduce);
    }
    f.reduce = kinds == 1 ? 0 : kinds == 2 ? 1 : 2;
    s->iters[sp->iter] = f;
    memmove(&s->iters[sp->iter + 1], &s->iters[sp->iter + n],
            sizeof(*s->iters) * (size_t)(s->niters - sp->iter - n));
    s->niters -= n - 1;
    s->transformed = 1;
    return KT_OK;
}

static int
do_compute_at(struct kt_state *st, const struct kt_step *sp, char *err,
              size_t errlen)
{
    struct kt_sstage *s = &st->stages[sp->stage];
    int target = (int)sp->v[0], titer = (int)sp->v[1], c;

    if (target < 0 || target >= st->nstages || target == sp->stage)
        return FAIL("compute_at: bad target stage %d", target);
    if (st->stages[target].inlined)
        return FAIL("compute_at: target %s is inlined",
                    st->stages[target].name);
    if (check_iter(&st->stages[target], titer, "compute_at", err, errlen))
        return KT_ESCHEDULE;
    if (is_output(st, sp->stage))
        return FAIL("compute_at: %s is an output", s->name);
    if (attached_under(st, target, sp->stage))
        return FAIL("compute_at: %s is attached inside %s",
                    st->stages[target].name, s->name);
    for (c = 0; c < st->nstages; c++) {
        if (c == sp->stage || st->stages[c].inlined)
            continue;
        /* another reader must sit at the same loop of the target (a row
         * buffer read by the row's sum and by the row's output) */
        if (kt_expr_reads(st->stages[c].body, s->out) && c != target &&
            (st->stages[c].attach_stage != target ||
             st->stages[c].attach_iter != titer))
            return FAIL("compute_at: %s is also read by %s, not only by %s "
                        "(or by stages computed at the same loop of it)",
                        s->name, st->stages[c].name, st->stages[target].name);
    }
    if (!kt_expr_reads(st->stages[target].body, s->out))
        return FAIL("compute_at: %s does not read %s", st->stages[target].name,
                    s->name);
    s->attach_stage = target;
    s->attach_iter = titer;
    return KT_OK;
}

static int
do_compute_inline(struct kt_state *st, const struct kt_step *sp, char *err,
                  size_t errlen)
{
    struct kt_sstage *s = &st->stages[sp->stage];
    int c, rc;

    if (s->naxes != s->nspatial || s->op != KT_ASSIGN)
        return FAIL("compute_inline: %s is a reduction", s->name);
    if (is_output(st, sp->stage))
        return FAIL("compute_inline: %s is an output", s->name);
    for (c = 0; c < st->nstages; c++)
        if (!st->stages[c].inlined && st->stages[c].attach_stage == sp->stage)
            return FAIL("compute_inline: %s has stages attached to it",
                        s->name);
    /* Substitute into copies first so a failure changes nothing. */
    {
        struct kt_expr *nb[KT_MAX_STAGES] = {0};
        for (c = 0; c < st->nstages; c++) {
            if (c == sp->stage || st->stages[c].inlined ||
                !kt_expr_reads(st->stages[c].body, s->out))
                continue;
            nb[c] = kt_expr_clone(st->stages[c].body);
            rc = subst_loads(&nb[c], s->out, s->body);
            if (rc != KT_OK) {
                for (c = 0; c < st->nstages; c++)
                    kt_expr_free(nb[c]);
                return FAIL("compute_inline: index expressions too long");
            }
        }
        for (c = 0; c < st->nstages; c++) {
            if (nb[c] == NULL)
                continue;
            kt_expr_free(st->stages[c].body);
            st->stages[c].body = nb[c];
        }
    }
    s->inlined = 1;
    s->attach_stage = -1;
    return KT_OK;
}

void
kt__state_open_stage(struct kt_state *st, int idx)
{
    int i;

    memmove(&st->stages[idx + 1], &st->stages[idx],
            sizeof(*st->stages) * (size_t)(st->nstages - idx));
    st->nstages++;
    for (i = 0; i < st->nstages; i++)
        if (st->stages[i].attach_stage >= idx && i != idx)
            st->stages[i].attach_stage++;
    for (i = 0; i < st->ntensors; i++)
        if (st->tensors[i].producer >= idx)
            st->tensors[i].producer++;
}

static int
do_cache_write(struct kt_state *st, const struct kt_step *sp, char *err,
               size_t errlen)
{
    struct kt_sstage *s = &st->stages[sp->stage];
    struct kt_sstage local, copy;
    struct kt_tensor *t;
    int idx = sp->stage, i, lt;

    if (s->transformed || s->inlined || s->attach_stage >= 0)
        return FAIL("cache_write: %s must be untransformed and at root",
                    s->name);
    if (s->is_pad || s->cache_read)
        return FAIL("cache_write: %s is a padding or pack stage", s->name);
    for (i = 0; i < st->nstages; i++)
        if (st->stages[i].attach_stage == idx)
            return FAIL("cache_write: %s has stages attached to it", s->name);
    if (st->nstages == KT_MAX_STAGES || st->ntensors == KT_MAX_TENSORS)
        return FAIL("cache_write: too many stages");

    lt = st->ntensors++;
    t = &st->tensors[lt];
    *t = st->tensors[s->out];
    snprintf(t->name, sizeof(t->name), "%.24s_local", s->name);
    t->kind = KT_TENSOR_INTERMEDIATE;
    /* a stage padded past its output computes its whole padding locally;
     * the copy drops it */
    for (i = 0; i < s->nspatial; i++)
        t->shape[i] = s->axes[i].extent;

    local = *s;
    snprintf(local.name, sizeof(local.name), "%.24s_local", s->name);
    local.out = lt;

    copy = *s;
    copy.naxes = s->nspatial;
    copy.op = KT_ASSIGN;
    copy.body = kt_expr_new(KT_X_LOAD);
    copy.body->src = lt;
    copy.body->ndim = s->nspatial;
    copy.body->idx = kt_xcalloc((size_t)s->nspatial, sizeof(struct kt_affine));
    for (i = 0; i < s->nspatial; i++)
        kt_aff_var(&copy.body->idx[i], i, 1);
    init_iters(&copy);

    kt__state_open_stage(st, idx);
    st->stages[idx] = local;
    st->stages[idx + 1] = copy;
    t->producer = idx;
    return KT_OK;
}

int
kt_state_apply(struct kt_state *st, const struct kt_step *sp, char *err,
               size_t errlen)
{
    struct kt_sstage *s;
    char msg[200];
    int rc;

    if (sp->kind < 0 || sp->kind >= KT_STEP_NKINDS)
        return kt_seterr(err, errlen, KT_ESCHEDULE, "step %d: unknown kind",
                         st->nsteps);
    if (sp->stage < 0 || sp->stage >= st->nstages)
        return kt_seterr(err, errlen, KT_ESCHEDULE, "step %d (%s): no stage %d",
                         st->nsteps, step_names[sp->kind], sp->stage);
    if (sp->n < 0 || sp->n > KT_MAX_STEP_ARGS)
        return kt_seterr(err, errlen, KT_ESCHEDULE,
                         "step %d (%s): bad argument count", st->nsteps,
                         step_names[sp->kind]);
    s = &st->stages[sp->stage];
    msg[0] = '\0';
    if (s->inlined && sp->kind != KT_STEP_COMPUTE_ROOT) {
        rc = KT_ESCHEDULE;
        snprintf(msg, sizeof(msg), "stage %s is inlined", s->name);
        goto out;
    }
    switch (sp->kind) {
    case KT_STEP_SPLIT: rc = do_split(st, sp, msg, sizeof(msg)); break;
    case KT_STEP_REORDER: rc = do_reorder(st, sp, msg, sizeof(msg)); break;
    case KT_STEP_FUSE: rc = do_fuse(st, sp, msg, sizeof(msg)); break;
    case KT_STEP_COMPUTE_AT:
        rc = do_compute_at(st, sp, msg, sizeof(msg));
        break;
    case KT_STEP_COMPUTE_INLINE:
        rc = do_compute_inline(st, sp, msg, sizeof(msg));
        break;
    case KT_STEP_COMPUTE_ROOT:
        rc = KT_OK;
        if (s->inlined) {
            rc = KT_ESCHEDULE;
            snprintf(msg, sizeof(msg), "stage %s is inlined", s->name);
        } else {
            s->attach_stage = -1;
        }
        break;
    case KT_STEP_CACHE_WRITE:
        rc = do_cache_write(st, sp, msg, sizeof(msg));
        break;
    case KT_STEP_CACHE_READ:
        rc = kt__do_cache_read(st, sp, msg, sizeof(msg));
        break;
    case KT_STEP_LAYOUT_REWRITE:
        rc = kt__do_layout_rewrite(st, sp, msg, sizeof(msg));
        break;
    case KT_STEP_ANNOTATE:
        rc = check_iter(s, sp->iter, "annotate", msg, sizeof(msg));
        if (rc == KT_OK &&
            (sp->v[0] < KT_ANN_NONE || sp->v[0] > KT_ANN_UNROLL)) {
            rc = KT_ESCHEDULE;
            snprintf(msg, sizeof(msg), "annotate: unknown annotation %lld",
                     (long long)sp->v[0]);
        }
        if (rc == KT_OK && sp->v[0] == KT_ANN_PARALLEL &&
            s->iters[sp->iter].reduce != 0) {
            rc = KT_ESCHEDULE;
            snprintf(msg, sizeof(msg),
                     "annotate: iterator %d of %s is a reduction; it cannot "
                     "be parallel",
                     sp->iter, s->name);
        }
        if (rc == KT_OK)
            s->iters[sp->iter].ann = (enum kt_annot)sp->v[0];
        break;
    case KT_STEP_PRAGMA:
        rc = check_iter(s, sp->iter, "pragma", msg, sizeof(msg));
        if (rc == KT_OK && (sp->v[0] < 0 || sp->v[0] > 4096)) {
            rc = KT_ESCHEDULE;
            snprintf(msg, sizeof(msg),
                     "pragma: auto_unroll_max_step %lld "
                     "out of range 0..4096",
                     (long long)sp->v[0]);
        }
        if (rc == KT_OK)
            s->iters[sp->iter].auto_unroll_max_step = (int)sp->v[0];
        break;
    default: rc = KT_ESCHEDULE; break;
    }
out:
    if (rc != KT_OK)
        return kt_seterr(err, errlen, KT_ESCHEDULE, "step %d (%s): %s",
                         st->nsteps, step_names[sp->kind], msg);
    if (st->nsteps == st->capsteps) {
        st->capsteps = st->capsteps ? st->capsteps * 2 : 16;
        st->steps = kt_xrealloc(st->steps,
                                sizeof(*st->steps) * (size_t)st->capsteps);
    }
    st->steps[st->nsteps++] = *sp;
    return KT_OK;
}

int
kt_state_replay(const struct kt_dag *dag, const struct kt_step *steps,
                int nsteps, struct kt_state **out, char *err, size_t errlen)
{
    struct kt_state *st = kt_state_new(dag);
    int i, rc;

    for (i = 0; i < nsteps; i++) {
        rc = kt_state_apply(st, &steps[i], err, errlen);
        if (rc != KT_OK) {
            kt_state_free(st);
            *out = NULL;
            return rc;
        }
    }
    *out = st;
    return KT_OK;
}

const char *
kt_step_name(enum kt_step_kind k)
{
    if ((int)k < 0 || k >= KT_STEP_NKINDS)
        return "?";
    return step_names[k];
}
