/* test_pack_hoist.c - a pack attached inside loops that do not move its
 * region is copied once outside them, the loops it crosses that move it
 * becoming lead dims of its buffer (ir/lower_hoist.c): the loop tree, the
 * buffer's shape and the kernels checked against the interpreter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "tests/support/ktt.h"

/* Dense T[i,j] += A[i,k] * W[j,k], 32 x 128 x 64, tiled i0 j0 k0 k1 i1 j1
 * (8 x 32 register tiles): W's 32 x 64 panel packed at j0, inside i0,
 * which does not move it. */
#define PANEL_AT_J0                                                            \
    "[\"CHR\",0,1],[\"SP\",1,0,[8]],[\"SP\",1,2,[32]],[\"SP\",1,4,[16]],"      \
    "[\"RE\",1,[0,2,4,5,1,3]],[\"CA\",0,1,1],[\"AN\",1,4,\"unroll\"],"         \
    "[\"AN\",1,5,\"vectorize\"],[\"AN\",0,1,\"vectorize\"]"

static const char panel_hoisted[] = "{\"v\":1,\"steps\":[" PANEL_AT_J0 "]}";
/* the same with i0 parallel: the copy stays in each thread's iteration */
static const char panel_parallel[] = "{\"v\":1,\"steps\":[" PANEL_AT_J0
                                     ",[\"AN\",1,0,\"parallel\"]]}";
/* packed at k0 (under i0 j0 k0): the 32 x 16 tile moves with j0 and k0
 * and is copied once, as [j0][k0][16][32] */
static const char tile_at_k0[] =
    "{\"v\":1,\"steps\":[[\"CHR\",0,1],[\"SP\",1,0,[8]],[\"SP\",1,2,[32]],"
    "[\"SP\",1,4,[16]],[\"RE\",1,[0,2,4,5,1,3]],[\"CA\",0,1,2],"
    "[\"AN\",1,5,\"vectorize\"]]}";

static struct kt_looptree *
lower(const struct kt_state *st)
{
    struct kt_looptree *lt = NULL;
    char err[512];

    assert_non_null(st);
    if (kt_lower(st, &lt, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    return lt;
}

static const struct kt_lbuf *
find_buf(const struct kt_looptree *lt, const char *name, int *index)
{
    int i;

    for (i = 0; i < lt->nbufs; i++)
        if (strcmp(lt->bufs[i].name, name) == 0) {
            *index = i;
            return &lt->bufs[i];
        }
    fail_msg("no buffer %s", name);
    return NULL;
}

/* The alloc node of buffer b, or NULL; *loops_above counts the loops
 * around it. */
static const struct kt_node *
find_alloc(const struct kt_node *n, int b, int depth, int *loops_above)
{
    int i;

    if (n->kind == KT_N_ALLOC && n->buf == b) {
        *loops_above = depth;
        return n;
    }
    for (i = 0; i < n->nkids; i++) {
        const struct kt_node *f = find_alloc(n->kids[i], b,
                                             depth + (n->kind == KT_N_LOOP),
                                             loops_above);
        if (f != NULL)
            return f;
    }
    return NULL;
}

/* Stores into buffer b below n, each counted once per iteration. */
static int64_t
stores_into(const struct kt_node *n, int b)
{
    int64_t sum = 0;
    int i;

    if (n->kind == KT_N_STORE)
        return n->buf == b;
    for (i = 0; i < n->nkids; i++)
        sum += stores_into(n->kids[i], b);
    return n->kind == KT_N_LOOP ? sum * n->extent : sum;
}

static void
test_pack_hoist_panel_out_of_row_loop(void **state)
{
    struct kt_dag *dag = ktt_dense(32, 128, 64);
    struct kt_state *st = ktt_replay_json(dag, panel_hoisted);
    struct kt_looptree *lt = lower(st);
    const struct kt_lbuf *b;
    const struct kt_node *alloc;
    int bi, depth = -1, skipped;

    (void)state;
    b = find_buf(lt, "W_pack", &bi);
    /* [j0][k][j1]: the four 32-column panels, each k-major */
    assert_int_equal(b->ndim, 3);
    assert_int_equal(b->shape[0], 4);
    assert_int_equal(b->shape[1], 64);
    assert_int_equal(b->shape[2], 32);
    alloc = find_alloc(lt->root, bi, 0, &depth);
    assert_non_null(alloc);
    assert_int_equal(depth, 0); /* outside the row loop i0 */
    /* W copied once: 128 x 64 stores, not once per row block */
    assert_int_equal(stores_into(lt->root, bi), 128 * 64);
    kt_looptree_free(lt);
    assert_int_equal(ktt_check_many(dag, &st, 1, 23, &skipped), 0);
    assert_int_equal(skipped, 0);
    kt_state_free(st);
    kt_dag_free(dag);
}

static void
test_pack_hoist_stays_inside_parallel_loop(void **state)
{
    struct kt_dag *dag = ktt_dense(32, 128, 64);
    struct kt_state *st = ktt_replay_json(dag, panel_parallel);
    struct kt_looptree *lt = lower(st);
    const struct kt_lbuf *b;
    int bi, depth = -1, skipped;

    (void)state;
    b = find_buf(lt, "W_pack", &bi);
    assert_int_equal(b->ndim, 2);
    assert_int_equal(b->shape[0], 64);
    assert_int_equal(b->shape[1], 32);
    assert_non_null(find_alloc(lt->root, bi, 0, &depth));
    assert_int_equal(depth, 2); /* under i0 (parallel) and j0 */
    assert_int_equal(stores_into(lt->root, bi), 4 * 128 * 64);
    kt_looptree_free(lt);
    assert_int_equal(ktt_check_many(dag, &st, 1, 29, &skipped), 0);
    assert_int_equal(skipped, 0);
    kt_state_free(st);
    kt_dag_free(dag);
}

static void
test_pack_hoist_tiles_become_lead_dims(void **state)
{
    struct kt_dag *dag = ktt_dense(32, 128, 64);
    struct kt_state *st = ktt_replay_json(dag, tile_at_k0);
    struct kt_looptree *lt = lower(st);
    const struct kt_lbuf *b;
    int bi, depth = -1, skipped;

    (void)state;
    b = find_buf(lt, "W_pack", &bi);
    assert_int_equal(b->ndim, 4);
    assert_int_equal(b->shape[0], 4);
    assert_int_equal(b->shape[1], 4);
    assert_int_equal(b->shape[2], 16);
    assert_int_equal(b->shape[3], 32);
    assert_non_null(find_alloc(lt->root, bi, 0, &depth));
    assert_int_equal(depth, 0);
    assert_int_equal(stores_into(lt->root, bi), 128 * 64);
    kt_looptree_free(lt);
    assert_int_equal(ktt_check_many(dag, &st, 1, 31, &skipped), 0);
    assert_int_equal(skipped, 0);
    kt_state_free(st);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_hoist_panel_out_of_row_loop),
        cmocka_unit_test(test_pack_hoist_stays_inside_parallel_loop),
        cmocka_unit_test(test_pack_hoist_tiles_become_lead_dims),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
