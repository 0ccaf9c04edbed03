/* objcache.c - the objects the tracker's workers built, kept by what
 * built them (key, compiler line, source) for the tracker's lifetime up to
 * a byte cap, the least recently used dropped first.  A candidate
 * submitted again (a would-be best timed a second time, the best timed
 * beside it, a revisit) goes straight to its run: the compiler is
 * deterministic, so the build would only cost seconds of the workers'
 * CPUs (docs/measure.md, "Objects built once").  A match compares every
 * byte, not a hash, so no source can take another's object; an object
 * whose run fails is dropped, so a broken build is not reused. */
#include "measure/tracker_int.h"

#include <stdlib.h>
#include <string.h>

struct kt__obj {
    struct kt__obj *prev, *next; /* most recently used first */
    uint64_t hash;
    char *key, *cc, *source;
    unsigned char *so;
    size_t solen;
    size_t bytes; /* what it holds, for the cap */
    char builder[96];
};

static uint64_t
obj_hash(const char *key, const char *cc, const char *source)
{
    return kt_hash64(source, strlen(source)) ^
           kt_hash_mix(kt_hash64(cc, strlen(cc)) ^
                       kt_hash_mix(kt_hash64(key, strlen(key))));
}

static void
unlink_obj(struct kt_tracker *t, struct kt__obj *o)
{
    if (o->prev != NULL)
        o->prev->next = o->next;
    else
        t->objs = o->next;
    if (o->next != NULL)
        o->next->prev = o->prev;
    else
        t->objs_tail = o->prev;
    o->prev = o->next = NULL;
}

static void
push_front(struct kt_tracker *t, struct kt__obj *o)
{
    o->prev = NULL;
    o->next = t->objs;
    if (t->objs != NULL)
        t->objs->prev = o;
    t->objs = o;
    if (t->objs_tail == NULL)
        t->objs_tail = o;
}

static void
free_obj(struct kt_tracker *t, struct kt__obj *o)
{
    unlink_obj(t, o);
    t->obj_bytes -= o->bytes;
    free(o->key);
    free(o->cc);
    free(o->source);
    free(o->so);
    free(o);
}

static struct kt__obj *
lookup(struct kt_tracker *t, const char *key, const char *cc,
       const char *source)
{
    uint64_t h = obj_hash(key, cc, source);
    struct kt__obj *o;

    for (o = t->objs; o != NULL; o = o->next)
        if (o->hash == h && strcmp(o->source, source) == 0 &&
            strcmp(o->cc, cc) == 0 && strcmp(o->key, key) == 0)
            return o;
    return NULL;
}

const unsigned char *
kt__obj_find(struct kt_tracker *t, const char *key, const char *cc,
             const char *source, size_t *solen, const char **builder)
{
    struct kt__obj *o = lookup(t, key, cc, source);

    if (o == NULL)
        return NULL;
    unlink_obj(t, o);
    push_front(t, o);
    t->builds_reused++;
    *solen = o->solen;
    *builder = o->builder;
    return o->so;
}

void
kt__obj_put(struct kt_tracker *t, const char *key, const char *cc,
            const char *source, const unsigned char *so, size_t solen,
            const char *builder)
{
    struct kt__obj *o;
    size_t bytes;

    if (t->closing || solen == 0)
        return;
    bytes = sizeof(*o) + solen + strlen(source) + strlen(cc) + strlen(key) + 3;
    if (bytes > t->o.object_cache_bytes || lookup(t, key, cc, source) != NULL)
        return;
    while (t->obj_bytes + bytes > t->o.object_cache_bytes)
        free_obj(t, t->objs_tail);
    o = kt_xcalloc(1, sizeof(*o));
    o->hash = obj_hash(key, cc, source);
    o->key = kt_xstrdup(key);
    o->cc = kt_xstrdup(cc);
    o->source = kt_xstrdup(source);
    o->so = kt_xmalloc(solen);
    memcpy(o->so, so, solen);
    o->solen = solen;
    o->bytes = bytes;
    snprintf(o->builder, sizeof(o->builder), "%s", builder);
    t->obj_bytes += bytes;
    push_front(t, o);
}

void
kt__obj_drop(struct kt_tracker *t, const char *key, const char *cc,
             const char *source)
{
    struct kt__obj *o = lookup(t, key, cc, source);

    if (o != NULL)
        free_obj(t, o);
}

void
kt__obj_clear(struct kt_tracker *t)
{
    while (t->objs != NULL)
        free_obj(t, t->objs);
}

unsigned
kt_tracker_builds_reused(const struct kt_tracker *t)
{
    return t->builds_reused;
}
