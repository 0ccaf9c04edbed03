/* test_codegen_init.c - where a reduction's init goes and when the code
 * generator folds it into the register tile (ir/lower.c, ir/codegen.c):
 * the init store sits just before the outermost reduction loop that is a
 * loop (extent > 1); an init nest directly before a micro-kernel that
 * keeps every element it stores in registers becomes the registers' start
 * value (no zero stores, no reloads), and its stores into a kernel argument
 * are prefetched for writing.  Every schedule is also compiled and
 * checked against the interpreter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ktt.h"

/* Operator d's DAG with steps json replayed. */
static void
build_op(const struct kt_op_def *d, const char *json, struct kt_dag **dag,
         struct kt_state **st)
{
    char err[512];

    if (kt_op_build(d, dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    *st = ktt_replay_json(*dag, json);
    assert_non_null(*st);
}

/* The 64 x 64 x k matmul O[i,j] += A[i,k] * B[k,j] (stage 0) with steps
 * json. */
static void
build_k(const char *json, int64_t k, struct kt_dag **dag, struct kt_state **st)
{
    struct kt_op_def d;

    assert_int_equal(kt_op_matmul(&d, 64, 64, k), KT_OK);
    build_op(&d, json, dag, st);
}

/* The 64^3 matmul with steps json. */
static void
build(const char *json, struct kt_dag **dag, struct kt_state **st)
{
    build_k(json, 64, dag, st);
}

/* The candidate's C (checked against the interpreter); caller frees. */
static char *
candidate_c(const struct kt_dag *dag, struct kt_state *st)
{
    char *c = ktt_checked_c(dag, st, 11);

    assert_non_null(c);
    return c;
}

/* The first reduction loop under n (depth first) and its parent. */
static const struct kt_node *
first_reduce_loop(const struct kt_node *n, const struct kt_node **parent,
                  int *index)
{
    int i;

    for (i = 0; i < n->nkids; i++) {
        const struct kt_node *k = n->kids[i], *f;
        if (k->kind == KT_N_LOOP && k->reduce) {
            *parent = n;
            *index = i;
            return k;
        }
        if ((f = first_reduce_loop(k, parent, index)) != NULL)
            return f;
    }
    return NULL;
}

/* Whether n holds an init store (a store of a constant). */
static int
holds_init(const struct kt_node *n)
{
    int i;

    if (n->kind == KT_N_STORE)
        return n->op == KT_ASSIGN && n->expr->op == KT_X_CONST;
    for (i = 0; i < n->nkids; i++)
        if (holds_init(n->kids[i]))
            return 1;
    return 0;
}

/* An 8 x 32 tile (two 16-lane vectors per row on AVX-512) over the whole
 * k: the accumulators start at zero in registers; O is only written, once,
 * after the reduction. */
#define WHOLE_K                                                                \
    "{\"v\":1,\"steps\":[[\"SP\",0,0,[8]],[\"SP\",0,2,[32]],"                  \
    "[\"RE\",0,[0,2,4,1,3]],[\"AN\",0,3,\"unroll\"],"                          \
    "[\"AN\",0,4,\"vectorize\"]]}"

/* The same tile under a multi-level tiling whose outer k part is 1 (k
 * split [64]): that part is no loop, so the init goes inside the spatial
 * loops around the inner k loop, right before the tile. */
#define OUTER_K_ONE                                                            \
    "{\"v\":1,\"steps\":[[\"SP\",0,0,[2,8]],[\"SP\",0,3,[1,32]],"              \
    "[\"SP\",0,6,[64]],[\"RE\",0,[0,3,6,1,4,7,2,5]],"                          \
    "[\"AN\",0,6,\"unroll\"],[\"AN\",0,7,\"vectorize\"]]}"

/* k split 2 x 32 with a spatial loop between the two: the tile sees each
 * accumulator twice, so O is zeroed first and the tile loads it. */
#define SPLIT_K                                                                \
    "{\"v\":1,\"steps\":[[\"SP\",0,0,[2,8]],[\"SP\",0,3,[32]],"                \
    "[\"SP\",0,5,[32]],[\"RE\",0,[0,3,5,1,6,2,4]],"                            \
    "[\"AN\",0,5,\"unroll\"],[\"AN\",0,6,\"vectorize\"]]}"

/* WHOLE_K as a cache-write tile of the 8 x 32 block of O it is computed
 * at: each element is finished in one pass, so the tile is dropped and the
 * kernel stores into O (ir/lower_elide.c). */
#define WHOLE_K_CHW                                                            \
    "{\"v\":1,\"steps\":[[\"CHW\",0],[\"SP\",1,0,[8]],[\"SP\",1,2,[32]],"      \
    "[\"RE\",1,[0,2,1,3]],[\"SP\",0,0,[8]],[\"SP\",0,2,[32]],"                 \
    "[\"RE\",0,[0,2,4,1,3]],[\"AN\",0,3,\"unroll\"],"                          \
    "[\"AN\",0,4,\"vectorize\"],[\"CA\",0,1,1]]}"

/* The same with k split 2 x 32 around the tile's rows: every element is
 * visited twice, and the tile stays. */
#define SPLIT_K_CHW                                                            \
    "{\"v\":1,\"steps\":[[\"CHW\",0],[\"SP\",1,0,[8]],[\"SP\",1,2,[32]],"      \
    "[\"RE\",1,[0,2,1,3]],[\"SP\",0,0,[8]],[\"SP\",0,2,[32]],"                 \
    "[\"SP\",0,4,[32]],[\"RE\",0,[0,2,4,1,5,3]],"                              \
    "[\"AN\",0,5,\"vectorize\"],[\"CA\",0,1,1]]}"

static int
vector_bytes(void)
{
    struct kt_codegen_opts o;

    kt_codegen_default_opts(&o);
    return o.vector_bytes;
}

/* The zero stores and reloads of O are gone where the init folds. */
static void
test_codegen_init_folds_whole_k(void **state)
{
    static const char *const scheds[] = {WHOLE_K, OUTER_K_ONE};
    unsigned i;
    (void)state;

    for (i = 0; i < KT_ARRAY_LEN(scheds); i++) {
        struct kt_dag *dag = NULL;
        struct kt_state *st = NULL;
        char *c;
        build(scheds[i], &dag, &st);
        c = candidate_c(dag, st);
        if (vector_bytes() == 64)
            assert_non_null(strstr(c, "kt_v16 r0 = kt_bc16(0.0f);"));
        assert_null(strstr(c, "(0.0f));"));      /* a zero store */
        assert_null(strstr(c, "kt_ld16(&t_O[")); /* a load of O */
        assert_null(strstr(c, "kt_ld8(&t_O["));
        assert_non_null(strstr(c, "kt_st")); /* the stores after the tile */
        free(c);
        kt_state_free(st);
        kt_dag_free(dag);
    }
}

/* With k split around a spatial loop, O is zeroed before the outer k
 * loop and every pass of the tile loads and stores its accumulators. */
static void
test_codegen_init_split_k_zeroes(void **state)
{
    struct kt_dag *dag = NULL;
    struct kt_state *st = NULL;
    char *c;
    (void)state;

    build(SPLIT_K, &dag, &st);
    c = candidate_c(dag, st);
    assert_non_null(strstr(c, "(0.0f));"));
    assert_non_null(
        strstr(c, vector_bytes() == 64 ? "kt_ld16(&t_O[" : "kt_ld8(&t_O["));
    free(c);
    kt_state_free(st);
    kt_dag_free(dag);
}

/* Where the init folds and the tile then stores into O after 64 steps of
 * k, each stored vector's line is prefetched for writing before the
 * loops; not where the tile loads its accumulators (from O, or from the
 * cache-write tile that stays: the load brings the line), nor where the
 * loops run only 8 steps. */
static void
test_codegen_init_prefetches_stores(void **state)
{
    static const struct {
        const char *json;
        int64_t k;
        int prefetches; /* 1: one per store of O; 0: none */
    } cases[] = {
        {WHOLE_K, 64, 1}, {OUTER_K_ONE, 64, 1}, {WHOLE_K_CHW, 64, 1},
        {SPLIT_K, 64, 0}, {SPLIT_K_CHW, 64, 0}, {WHOLE_K, 8, 0},
    };
    unsigned i;
    (void)state;

    for (i = 0; i < KT_ARRAY_LEN(cases); i++) {
        struct kt_dag *dag = NULL;
        struct kt_state *st = NULL;
        char *c;
        int stores, prefetches;
        build_k(cases[i].json, cases[i].k, &dag, &st);
        c = candidate_c(dag, st);
        stores = ktt_count(c, "kt_st16(&t_O[") + ktt_count(c, "kt_st8(&t_O[");
        prefetches = ktt_count(c, "__builtin_prefetch(&t_O[");
        if (cases[i].prefetches) {
            assert_true(stores > 0);
            assert_int_equal(prefetches, stores);
        } else {
            assert_int_equal(ktt_count(c, "__builtin_prefetch("), 0);
        }
        free(c);
        kt_state_free(st);
        kt_dag_free(dag);
    }
}

/* The 64^3 dense layer with a bias, T[i,j] += A[i,k] * W[j,k] (stage 0)
 * then O = T + bias (stage 1), with steps json. */
static void
build_dense_bias(const char *json, struct kt_dag **dag, struct kt_state **st)
{
    struct kt_op_def d;

    assert_int_equal(kt_op_dense(&d, 64, 64, 64, KT_EPI_BIAS), KT_OK);
    build_op(&d, json, dag, st);
}

/* WHOLE_K's tile for the product T, computed at each 8 x 32 block of O:
 * T is a local tile the bias step reads right after. */
#define DENSE_LOCAL_T                                                          \
    "{\"v\":1,\"steps\":[[\"SP\",1,0,[8]],[\"SP\",1,2,[32]],"                  \
    "[\"RE\",1,[0,2,1,3]],[\"SP\",0,0,[8]],[\"SP\",0,2,[32]],"                 \
    "[\"RE\",0,[0,2,4,1,3]],[\"AN\",0,3,\"unroll\"],"                          \
    "[\"AN\",0,4,\"vectorize\"],[\"CA\",0,1,1],[\"AN\",1,3,\"vectorize\"]]}"

/* The same tile at the root: T is written whole into its own per-call
 * buffer before the bias step. */
#define DENSE_ROOT_T                                                           \
    "{\"v\":1,\"steps\":[[\"SP\",0,0,[8]],[\"SP\",0,2,[32]],"                  \
    "[\"RE\",0,[0,2,4,1,3]],[\"AN\",0,3,\"unroll\"],"                          \
    "[\"AN\",0,4,\"vectorize\"],[\"AN\",1,1,\"vectorize\"]]}"

/* A tile that starts at zero and runs 64 steps, but stores into a buffer
 * of the kernel's own (a local tile, a per-call intermediate), gets no
 * prefetch: the local tile is hot, and a per-call product ran slower
 * with it. */
static void
test_codegen_init_no_prefetch_into_own_buffers(void **state)
{
    static const char *const scheds[] = {DENSE_LOCAL_T, DENSE_ROOT_T};
    unsigned i;
    (void)state;

    for (i = 0; i < KT_ARRAY_LEN(scheds); i++) {
        struct kt_dag *dag = NULL;
        struct kt_state *st = NULL;
        char *c;
        build_dense_bias(scheds[i], &dag, &st);
        c = candidate_c(dag, st);
        if (vector_bytes() == 64) /* the init folded into the registers */
            assert_non_null(strstr(c, "kt_v16 r0 = kt_bc16(0.0f);"));
        assert_int_equal(ktt_count(c, "__builtin_prefetch("), 0);
        free(c);
        kt_state_free(st);
        kt_dag_free(dag);
    }
}

/* The init nest is placed in the innermost spatial loop around all the
 * reduction loops, right before the outermost one that is a loop (with k
 * split [64], not before the k part of extent 1 further out). */
static void
test_codegen_init_placement(void **state)
{
    static const char *const scheds[] = {WHOLE_K, OUTER_K_ONE, SPLIT_K};
    unsigned i;
    (void)state;

    for (i = 0; i < KT_ARRAY_LEN(scheds); i++) {
        struct kt_dag *dag = NULL;
        struct kt_state *st = NULL;
        struct kt_looptree *lt = NULL;
        const struct kt_node *parent = NULL;
        char err[512];
        int at = -1;
        build(scheds[i], &dag, &st);
        assert_int_equal(kt_lower(st, &lt, err, sizeof(err)), KT_OK);
        assert_non_null(first_reduce_loop(lt->root, &parent, &at));
        assert_true(at > 0);
        assert_true(holds_init(parent->kids[at - 1]));
        kt_looptree_free(lt);
        kt_state_free(st);
        kt_dag_free(dag);
    }
}

/* A cache-write tile that is only copied out goes when its producer
 * finishes each element in one pass, and stays otherwise; both kernels
 * match the interpreter (candidate_c). */
static void
test_codegen_init_cache_write_copy_elided(void **state)
{
    static const char *const scheds[] = {WHOLE_K_CHW, SPLIT_K_CHW};
    unsigned i;
    (void)state;

    for (i = 0; i < KT_ARRAY_LEN(scheds); i++) {
        struct kt_dag *dag = NULL;
        struct kt_state *st = NULL;
        struct kt_looptree *lt = NULL;
        struct kt_buf tree;
        char err[512], *c;
        build(scheds[i], &dag, &st);
        assert_int_equal(kt_lower(st, &lt, err, sizeof(err)), KT_OK);
        kt_buf_init(&tree);
        kt_looptree_print(lt, &tree);
        c = candidate_c(dag, st);
        if (i == 0) {
            assert_null(strstr(tree.p, "O_local"));
            assert_null(strstr(c, "t_O_local"));
            if (vector_bytes() == 64)
                assert_non_null(strstr(c, "kt_v16 r0 = kt_bc16(0.0f);"));
        } else {
            assert_non_null(strstr(tree.p, "alloc O_local[8, 32]"));
            assert_non_null(strstr(c, "t_O_local"));
        }
        free(c);
        kt_buf_free(&tree);
        kt_looptree_free(lt);
        kt_state_free(st);
        kt_dag_free(dag);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codegen_init_folds_whole_k),
        cmocka_unit_test(test_codegen_init_split_k_zeroes),
        cmocka_unit_test(test_codegen_init_prefetches_stores),
        cmocka_unit_test(test_codegen_init_no_prefetch_into_own_buffers),
        cmocka_unit_test(test_codegen_init_placement),
        cmocka_unit_test(test_codegen_init_cache_write_copy_elided),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
