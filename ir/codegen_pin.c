/* codegen_pin.c - vector operands a micro-kernel's body shares, loaded
 * once into a register each.  A 4 x 100 register tile of a 1x1
 * convolution loads each of 7 input vectors per input channel and
 * multiplies it by 4 broadcast weights; gcc 12 folds the load into every
 * FMA that uses it (28 loads per 28 FMAs, most straddling two cache lines
 * on 400-byte rows), and that kernel ran at 73.6 GFLOPS on 1 thread where
 * the same code with the 7 loads kept in registers ran at 104.6
 * (docs/performance.md).  An empty asm that claims to change the value
 * (KT_PIN<lanes>, ir/module.c) makes the compiler keep it in a register,
 * so it cannot trade it for a reload at each use. */
#include "ir/codegen_int.h"

#include <stdlib.h>
#include <string.h>

/* Pinning pays for a tile of several shared vectors, each feeding a few
 * FMAs (the thresholds in ir/ir.h).  With one (the ViT's P x V column, a 3x3 convolution's vector of
 * weights) gcc keeps it in a register anyway and the pin only narrows its
 * scheduling (2.1-2.5% slower on 1 thread); a grouped convolution's 7
 * vectors feeding 2 FMAs each ran 1.8-3.2% slower pinned
 * (docs/performance.md). */

static struct pin *
find_pin(struct cg *g, int buf, const struct kt_affine *addr, int w)
{
    int i;

    for (i = 0; i < g->npins; i++)
        if (g->pins[i].buf == buf && g->pins[i].width == w &&
            kt__cg_aff_equal(&g->pins[i].addr, addr))
            return &g->pins[i];
    return NULL;
}

void
kt__cg_pins_clear(struct cg *g)
{
    int i;

    g->npins = 0;
    for (i = 0; i < g->nshares; i++)
        free(g->shares[i].text);
    g->nshares = 0;
}

void
kt__cg_pin_note(struct cg *g, int buf, const struct kt_affine *addr, int w)
{
    struct pin *p;

    if (g->pins == NULL || g->matching_init)
        return;
    p = find_pin(g, buf, addr, w);
    if (p == NULL && g->npins < KT_CG_MAX_PINS) {
        p = &g->pins[g->npins++];
        p->buf = buf;
        p->addr = *addr;
        p->width = w;
        p->uses = 0;
        p->declared = 0;
    }
    if (p != NULL)
        p->uses++;
}

int
kt__cg_pins_pay(const struct cg *g)
{
    int i, n = 0;

    for (i = 0; g->pins != NULL && i < g->npins; i++)
        if (g->pins[i].uses >= KT_CODEGEN_PIN_MIN_USES)
            n++;
    return n >= KT_CODEGEN_PIN_MIN_VECTORS;
}

int
kt__cg_pin_load(struct cg *g, struct kt_buf *b, int buf,
                const struct kt_affine *addr, int w)
{
    struct pin *p;
    struct kt_buf a;
    int id;

    /* A buffer the kernel writes may change between two loads; a vector
     * wider than the target's registers is no one register to pin. */
    if (!g->pinning || g->stored[buf] || w * 4 > g->o->vector_bytes)
        return 0;
    p = find_pin(g, buf, addr, w);
    if (p == NULL || p->uses < KT_CODEGEN_PIN_MIN_USES)
        return 0;
    id = (int)(p - g->pins);
    if (!p->declared) {
        kt_buf_init(&a);
        kt__cg_put_aff(g, &a, addr);
        kt__cg_line(g, "kt_v%d x%d = kt_ld%d(&t_%s[%s]); KT_PIN%d(x%d);", w, id,
                    w, g->lt->bufs[buf].name, a.p, w, id);
        kt_buf_free(&a);
        p->declared = 1;
    }
    kt_buf_printf(b, "x%d", id);
    return 1;
}

/* Guarded reads shared by the rows of a window: a depthwise convolution's
 * 8 output rows x 9 taps with the kernel rows expanded read each input row
 * vector up to 3 times, each a bounds check and a masked load at the
 * edges.  gcc does not merge such reads (each is a branch), so the body
 * made 72 loads where 30 are distinct; declared once each, with the
 * kernel rows expanded whole (codegen_kernel.c), the kernel ran 1.45x
 * faster (docs/performance.md).  No pin: a conditional read is never
 * folded into its FMA. */
static struct share *
find_share(struct cg *g, const char *text, int w)
{
    int i;

    for (i = 0; i < g->nshares; i++)
        if (g->shares[i].width == w && strcmp(g->shares[i].text, text) == 0)
            return &g->shares[i];
    return NULL;
}

void
kt__cg_share_note(struct cg *g, int buf, const char *text, int w,
                  int64_t weight)
{
    struct share *s;

    if (g->shares == NULL || g->matching_init || g->stored[buf])
        return;
    s = find_share(g, text, w);
    if (s == NULL && g->nshares < KT_CG_MAX_SHARES) {
        s = &g->shares[g->nshares++];
        s->text = kt_xstrdup(text);
        s->width = w;
        s->weight = weight;
        s->uses = 0;
        s->declared = 0;
    }
    if (s != NULL)
        s->uses++;
}

int
kt__cg_share_read(struct cg *g, struct kt_buf *b, int buf, const char *text,
                  int w)
{
    struct share *s;
    int id;

    /* A buffer the kernel writes may change between two reads. */
    if (!g->sharing || g->stored[buf])
        return 0;
    s = find_share(g, text, w);
    if (s == NULL || s->uses < 2)
        return 0;
    id = (int)(s - g->shares);
    if (!s->declared) {
        kt__cg_line(g, "kt_v%d g%d = %s;", w, id, text);
        s->declared = 1;
    }
    kt_buf_printf(b, "g%d", id);
    return 1;
}

int64_t
kt__cg_shares_saving(const struct cg *g)
{
    int64_t saving = 0;
    int i;

    for (i = 0; i < g->nshares; i++)
        if (g->shares[i].uses >= 2)
            saving += (g->shares[i].uses - 1) * g->shares[i].weight;
    return saving;
}
