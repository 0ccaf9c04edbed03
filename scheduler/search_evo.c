/* search_evo.c - scoring a population (build the state, lower, extract
 * features, predict; on several threads). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/search_int.h"

/* ---- scoring ----------------------------------------------------------- */

static size_t
slot_of(uint64_t k, size_t cap)
{
    return (size_t)kt_hash_mix(k) & (cap - 1);
}

struct work {
    struct kt_search *s;
    struct sk_member *m;
    float **rows;
    int *nrows;
    int lo, hi;
    int features;
};

static uint64_t
hash_steps(const struct kt_state *st)
{
    char hex[17];
    uint64_t h = 0;

    kt_steps_hash(st->steps, st->nsteps, hex);
    kt_hash_parse(hex, &h);
    return h;
}

/* Code-size bound, checked before anything is built: a candidate whose
 * code (after the generator clamps its unroll pragmas) still weighs more
 * than this many times the micro-kernel statement budget takes gcc
 * seconds (on a loaded machine, past the builder's deadline), so it is
 * dropped here instead of timing out in the builder.  The fastest
 * programs are far smaller (docs/search.md). */
#define SK_MAX_WEIGHT_PER_STMT 2

static int
code_size_ok(const struct kt_search *s, const struct kt_looptree *lt)
{
    struct kt_codegen_opts o;
    int64_t total;

    kt_codegen_default_opts(&o);
    if (s->o.vector_bytes > 0)
        o.vector_bytes = s->o.vector_bytes;
    kt_codegen_block_size(lt, &o, &total);
    return total <= SK_MAX_WEIGHT_PER_STMT * (int64_t)o.max_unrolled_stmts;
}

/* Builds and lowers m: 1 when its program is one the search may measure,
 * -1 when it weighs more than the code-size bound, 0 when it is not
 * valid otherwise; *lt gets the loop tree of a valid one. */
static int
lower_member(struct kt_search *s, struct sk_member *m, struct kt_looptree **lt)
{
    char err[256];
    struct kt_state *st = sk_build(s, &m->g, err, sizeof(err));
    int ok = 0;

    *lt = NULL;
    if (st == NULL)
        return 0;
    m->hash = hash_steps(st);
    if (kt_lower(st, lt, err, sizeof(err)) == KT_OK)
        ok = !code_size_ok(s, *lt) ? -1 : sk_parallel_ok(s, *lt);
    kt_state_free(st);
    if (ok != 1) {
        kt_looptree_free(*lt);
        *lt = NULL;
    }
    return ok;
}

static void *
work_run(void *arg)
{
    struct work *w = arg;
    char err[256];
    int i;

    for (i = w->lo; i < w->hi; i++) {
        struct sk_member *m = &w->m[i];
        struct kt_looptree *lt = NULL;
        int ok = lower_member(w->s, m, &lt);
        m->valid = 0;
        m->rolled = 0;
        w->rows[i] = NULL;
        w->nrows[i] = 0;
        /* A register tile grown with its reduction unroll kept can weigh
         * more than the code-size bound in all (the unroll budget counts
         * the micro-kernel, not the packs and copies around it): its
         * rolled form stands for it.  Without it, the CLIP attention
         * scores' runs that started on an 11 x 16 tile never measured
         * 11 x 32 (558 against 512) and stayed ~20% slower for 100 trials
         * or more (docs/search.md, One round). */
        if (ok == -1 && sk_roll_reductions(w->s, &m->g) == 0) {
            ok = lower_member(w->s, m, &lt);
            m->rolled = 1;
        }
        if (ok == 1) {
            if (!w->features)
                m->valid = 1;
            else if (kt_features_extract(lt, &w->rows[i], &w->nrows[i], err,
                                         sizeof(err)) == KT_OK &&
                     w->nrows[i] > 0)
                m->valid = 1;
        }
        kt_looptree_free(lt);
    }
    return NULL;
}

static int
score_raw(struct sk_score_ctx *c, struct sk_member *m, int n, char *err,
          size_t errlen)
{
    struct kt_search *s = c->s;
    int nt = s->o.nthreads > 0 ? s->o.nthreads : 1, t, i, nv = 0, rc = KT_OK;
    float **rows = kt_xcalloc((size_t)n + 1, sizeof(*rows));
    int *nrows = kt_xcalloc((size_t)n + 1, sizeof(*nrows));
    struct kt_prog_rows *progs = NULL;
    float *sc = NULL;
    int *idx = NULL;
    pthread_t th[64];
    struct work w[64];
    double t0 = kt_now();

    if (nt > 64)
        nt = 64;
    if (nt > n)
        nt = n > 0 ? n : 1;
    for (t = 0; t < nt; t++) {
        w[t].s = s;
        w[t].m = m;
        w[t].rows = rows;
        w[t].nrows = nrows;
        w[t].lo = (int)((int64_t)n * t / nt);
        w[t].hi = (int)((int64_t)n * (t + 1) / nt);
        w[t].features = c->model != NULL;
    }
    for (t = 1; t < nt; t++)
        if (pthread_create(&th[t], NULL, work_run, &w[t]) != 0) {
            /* run it here instead */
            work_run(&w[t]);
            th[t] = 0;
            w[t].lo = -1;
        }
    work_run(&w[0]);
    for (t = 1; t < nt; t++)
        if (w[t].lo >= 0)
            pthread_join(th[t], NULL);
    c->t_build += kt_now() - t0;
    c->nscored += n;

    t0 = kt_now();
    progs = kt_xcalloc((size_t)n + 1, sizeof(*progs));
    idx = kt_xcalloc((size_t)n + 1, sizeof(*idx));
    sc = kt_xcalloc((size_t)n + 1, sizeof(*sc));
    for (i = 0; i < n; i++) {
        m[i].score = -INFINITY;
        if (!m[i].valid)
            continue;
        progs[nv].rows = rows[i];
        progs[nv].nrows = c->model != NULL ? nrows[i] : 1;
        idx[nv++] = i;
    }
    if (nv > 0) {
        if (c->model != NULL)
            rc = kt_xgb_predict(c->model, progs, nv, sc, err, errlen);
        else
            kt_random_model_predict(s->rmodel, progs, nv, sc);
        if (rc == KT_OK)
            for (i = 0; i < nv; i++)
                m[idx[i]].score = isnan(sc[i]) ? -INFINITY : sc[i];
    }
    c->t_score += kt_now() - t0;
    for (i = 0; i < n; i++)
        free(rows[i]);
    free(rows);
    free(nrows);
    free(progs);
    free(idx);
    free(sc);
    return rc;
}

/* ---- cached scoring ---------------------------------------------------- */

/* A genome's key in the score cache, never 0, which stands for the
 * genome as kt_hash64's did (63 bits): hashed a word at a time, since the
 * 944-byte genome through kt_hash64's byte loop took 3% of a network
 * tuning's CPU time, at every scoring pass. */
static uint64_t
genome_key(const struct sk_genome *g)
{
    const unsigned char *p = (const unsigned char *)g;
    uint64_t h = 0xcbf29ce484222325ULL, w;
    size_t i;

    for (i = 0; i + sizeof(w) <= sizeof(*g); i += sizeof(w)) {
        memcpy(&w, p + i, sizeof(w));
        h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
    }
    for (; i < sizeof(*g); i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return kt_hash_mix(h) | 1;
}

static struct sk_cache_ent *
cache_slot(struct sk_score_ctx *c, uint64_t key)
{
    size_t i;

    if ((c->cn + 1) * 2 > c->ccap) {
        struct sk_cache_ent *old = c->cache;
        size_t oc = c->ccap, j;
        c->ccap = oc ? oc * 2 : 4096;
        c->cache = kt_xcalloc(c->ccap, sizeof(*c->cache));
        for (j = 0; j < oc; j++) {
            if (old[j].key == 0)
                continue;
            for (i = slot_of(old[j].key, c->ccap); c->cache[i].key != 0;
                 i = (i + 1) & (c->ccap - 1))
                ;
            c->cache[i] = old[j];
        }
        free(old);
    }
    for (i = slot_of(key, c->ccap); c->cache[i].key != 0;
         i = (i + 1) & (c->ccap - 1))
        if (c->cache[i].key == key)
            return &c->cache[i];
    return &c->cache[i]; /* empty slot */
}

int
sk_score(struct sk_score_ctx *c, struct sk_member *m, int n, char *err,
         size_t errlen)
{
    struct sk_member *todo = kt_xcalloc((size_t)n + 1, sizeof(*todo));
    uint64_t *keys = kt_xcalloc((size_t)n + 1, sizeof(*keys));
    uint64_t *todo_keys = kt_xcalloc((size_t)n + 1, sizeof(*todo_keys));
    int i, nt = 0, rc;

    for (i = 0; i < n; i++) {
        struct sk_cache_ent *e;
        keys[i] = genome_key(&m[i].g);
        e = cache_slot(c, keys[i]);
        if (e->key == 0) {
            e->key = keys[i];
            e->valid = -1; /* pending */
            c->cn++;
            todo_keys[nt] = keys[i];
            todo[nt++] = m[i];
        }
    }
    rc = score_raw(c, todo, nt, err, errlen);
    if (rc == KT_OK) {
        for (i = 0; i < nt; i++) {
            struct sk_cache_ent *e = cache_slot(c, todo_keys[i]);
            e->hash = todo[i].hash;
            e->score = todo[i].score;
            e->valid = todo[i].valid;
            e->rolled = todo[i].rolled;
        }
        for (i = 0; i < n; i++) {
            const struct sk_cache_ent *e = cache_slot(c, keys[i]);
            m[i].hash = e->hash;
            m[i].score = e->score;
            m[i].valid = e->valid > 0;
            m[i].rolled = e->rolled;
            if (e->rolled)
                sk_roll_reductions(c->s, &m[i].g);
        }
    }
    free(todo);
    free(keys);
    free(todo_keys);
    return rc;
}

void
sk_score_ctx_free(struct sk_score_ctx *c)
{
    free(c->cache);
    c->cache = NULL;
    c->ccap = c->cn = 0;
}
