/* u64set.c - the set of 64-bit hashes (schedules measured, proposed or
 * picked): open addressing with linear probing, at most half full. */
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

void
kt_u64set_init(struct kt_u64set *s)
{
    memset(s, 0, sizeof(*s));
}

void
kt_u64set_free(struct kt_u64set *s)
{
    free(s->v);
    memset(s, 0, sizeof(*s));
}

uint64_t
kt_hash_mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
}

static size_t
slot_of(uint64_t k, size_t cap)
{
    return (size_t)kt_hash_mix(k) & (cap - 1);
}

int
kt_u64set_has(const struct kt_u64set *s, uint64_t k)
{
    size_t i;

    if (k == 0)
        return s->has_zero;
    if (s->cap == 0)
        return 0;
    for (i = slot_of(k, s->cap); s->v[i] != 0; i = (i + 1) & (s->cap - 1))
        if (s->v[i] == k)
            return 1;
    return 0;
}

int
kt_u64set_add(struct kt_u64set *s, uint64_t k)
{
    size_t i;

    if (k == 0) {
        int was = s->has_zero;
        s->has_zero = 1;
        return !was;
    }
    if ((s->n + 1) * 2 > s->cap) {
        struct kt_u64set ns;
        size_t j;
        kt_u64set_init(&ns);
        ns.cap = s->cap ? s->cap * 2 : 256;
        ns.v = kt_xcalloc(ns.cap, sizeof(uint64_t));
        ns.has_zero = s->has_zero;
        for (j = 0; j < s->cap; j++)
            if (s->v[j] != 0)
                kt_u64set_add(&ns, s->v[j]);
        free(s->v);
        *s = ns;
    }
    for (i = slot_of(k, s->cap); s->v[i] != 0; i = (i + 1) & (s->cap - 1))
        if (s->v[i] == k)
            return 0;
    s->v[i] = k;
    s->n++;
    return 1;
}

size_t
kt_u64set_count(const struct kt_u64set *s)
{
    return s->n + (s->has_zero ? 1 : 0);
}
