/* test_schedule.c - schedule states, steps, their JSON form and hash, and
 * lowering: round trips, rejected steps with messages, garbage steps that
 * must never crash, and region inference for cache_write / compute_at. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/ktt.h"

static struct kt_dag *
build(const struct kt_op_def *d)
{
    struct kt_dag *dag = NULL;
    char err[256];

    if (kt_op_build(d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    return dag;
}

static struct kt_dag *
matmul(int64_t m, int64_t n, int64_t k)
{
    struct kt_op_def d;

    assert_int_equal(kt_op_matmul(&d, m, n, k), KT_OK);
    return build(&d);
}

static int
apply(struct kt_state *st, struct kt_step s, char *err, size_t len)
{
    return kt_state_apply(st, &s, err, len);
}

static void
test_schedule_json_round_trip(void **state)
{
    struct kt_op_def defs[4];
    struct kt_conv2d_params p = {.N = 1,
                                 .C = 4,
                                 .H = 14,
                                 .W = 14,
                                 .K = 8,
                                 .R = 3,
                                 .S = 3,
                                 .stride_h = 2,
                                 .stride_w = 2,
                                 .pad_h = 1,
                                 .pad_w = 1,
                                 .dilation_h = 1,
                                 .dilation_w = 1,
                                 .groups = 1,
                                 .epilogue = KT_EPI_BIAS | KT_EPI_RELU};
    struct kt_rng r;
    int i, k;
    (void)state;

    kt_op_dense(&defs[0], 16, 1000, 64, KT_EPI_BIAS);
    kt_op_conv2d(&defs[1], &p);
    kt_op_softmax(&defs[2], 7, 1000);
    kt_op_batch_matmul(&defs[3], 2, 14, 7, 56, 1);
    kt_rng_seed(&r, 7);
    for (k = 0; k < 4; k++) {
        struct kt_dag *dag = build(&defs[k]);
        for (i = 0; i < 50; i++) {
            struct kt_state *st = ktt_random_schedule(dag, &r), *st2 = NULL;
            struct kt_buf j1, j2, p1, p2;
            struct kt_looptree *l1 = NULL, *l2 = NULL;
            struct kt_step *steps;
            char err[256], h1[17], h2[17];
            int n;

            kt_buf_init(&j1);
            kt_buf_init(&j2);
            kt_buf_init(&p1);
            kt_buf_init(&p2);
            kt_steps_to_json(st->steps, st->nsteps, &j1);
            assert_int_equal(kt_steps_from_json(j1.p, &steps, &n, err,
                                                sizeof(err)),
                             KT_OK);
            assert_int_equal(n, st->nsteps);
            kt_steps_to_json(steps, n, &j2);
            assert_string_equal(j1.p, j2.p);
            kt_steps_hash(st->steps, st->nsteps, h1);
            kt_steps_hash(steps, n, h2);
            assert_string_equal(h1, h2);
            /* Replaying the parsed steps lowers to the same tree. */
            assert_int_equal(kt_state_replay(dag, steps, n, &st2, err,
                                             sizeof(err)),
                             KT_OK);
            if (kt_lower(st, &l1, err, sizeof(err)) == KT_OK) {
                assert_int_equal(kt_lower(st2, &l2, err, sizeof(err)), KT_OK);
                kt_looptree_print(l1, &p1);
                kt_looptree_print(l2, &p2);
                assert_string_equal(p1.p, p2.p);
            }
            kt_looptree_free(l1);
            kt_looptree_free(l2);
            kt_state_free(st);
            kt_state_free(st2);
            free(steps);
            kt_buf_free(&j1);
            kt_buf_free(&j2);
            kt_buf_free(&p1);
            kt_buf_free(&p2);
        }
        kt_dag_free(dag);
    }
}

static void
test_schedule_hash_is_stable(void **state)
{
    struct kt_step s[] = {
        {KT_STEP_SPLIT, 0, 0, 1, {8}},
        {KT_STEP_ANNOTATE, 0, 1, 0, {KT_ANN_VECTORIZE}},
    };
    struct kt_buf b;
    char h[17];
    (void)state;

    kt_buf_init(&b);
    kt_steps_to_json(s, 2, &b);
    assert_string_equal(b.p, "{\"v\":1,\"steps\":[[\"SP\",0,0,[8]],[\"AN\",0,1,"
                             "\"vectorize\"]]}");
    /* The identity of stored candidates (FNV-1a of the canonical JSON,
     * computed independently): it must never change. */
    kt_steps_hash(s, 2, h);
    assert_string_equal(h, "4399faea63d307d1");
    kt_buf_free(&b);
}

/* Every step kind, with numbers of several digits: the text and hash the
 * printf-based writer gave (the writer now formats numbers itself). */
static void
test_schedule_text_of_every_step(void **state)
{
    struct kt_step s[] = {
        {KT_STEP_CACHE_WRITE, 0, 0, 0, {0}},
        {KT_STEP_CACHE_READ, 1, 0, 0, {1}},
        {KT_STEP_SPLIT, 2, 0, 3, {1024, 16, 8}},
        {KT_STEP_REORDER, 2, 0, 4, {3, 0, 2, 1}},
        {KT_STEP_FUSE, 2, 0, 2, {0}},
        {KT_STEP_COMPUTE_AT, 1, 0, 2, {2, 10}},
        {KT_STEP_COMPUTE_INLINE, 3, 0, 0, {0}},
        {KT_STEP_COMPUTE_ROOT, 1, 0, 0, {0}},
        {KT_STEP_ANNOTATE, 2, 12, 0, {KT_ANN_UNROLL}},
        {KT_STEP_PRAGMA, 2, 0, 0, {512}},
        {KT_STEP_LAYOUT_REWRITE, 1, 0, 0, {0}},
    };
    struct kt_buf b;
    char h[17];
    (void)state;

    kt_buf_init(&b);
    kt_steps_to_json(s, (int)KT_ARRAY_LEN(s), &b);
    assert_string_equal(
        b.p, "{\"v\":1,\"steps\":[[\"CHW\",0],[\"CHR\",1,1],"
             "[\"SP\",2,0,[1024,16,8]],[\"RE\",2,[3,0,2,1]],[\"FU\",2,0,2],"
             "[\"CA\",1,2,10],[\"CI\",3],[\"CR\",1],[\"AN\",2,12,\"unroll\"],"
             "[\"PR\",2,0,512],[\"LR\",1]]}");
    kt_steps_hash(s, (int)KT_ARRAY_LEN(s), h);
    assert_string_equal(h, "d1ac55b6e0aa1ccf");
    kt_buf_free(&b);
}

struct bad_case {
    struct kt_step steps[4];
    int nsteps;
    const char *msg;
};

static void
test_schedule_rejects_invalid_steps(void **state)
{
    static const struct bad_case cases[] = {
        {{{KT_STEP_SPLIT, 0, 0, 1, {7}}}, 1, "do not divide the extent 64"},
        {{{KT_STEP_SPLIT, 0, 9, 1, {2}}}, 1, "has no iterator 9"},
        {{{KT_STEP_SPLIT, 0, 0, 1, {0}}}, 1, "not positive"},
        {{{KT_STEP_REORDER, 0, 0, 3, {0, 0, 1}}}, 1, "not a permutation"},
        {{{KT_STEP_REORDER, 0, 0, 2, {0, 1}}}, 1, "2 iterators given"},
        {{{KT_STEP_FUSE, 0, 2, 2, {0}}}, 1, "out of range"},
        {{{KT_STEP_FUSE, 0, 0, 2, {0}}, {KT_STEP_SPLIT, 0, 0, 1, {2}}},
         2,
         "is fused"},
        {{{KT_STEP_ANNOTATE, 0, 2, 0, {KT_ANN_PARALLEL}}}, 1, "is a reduction"},
        {{{KT_STEP_ANNOTATE, 0, 0, 0, {9}}}, 1, "unknown annotation"},
        {{{KT_STEP_PRAGMA, 0, 0, 0, {100000}}}, 1, "out of range"},
        {{{KT_STEP_COMPUTE_INLINE, 0, 0, 0, {0}}}, 1, "is a reduction"},
        {{{KT_STEP_COMPUTE_AT, 0, 0, 0, {0, 0}}}, 1, "bad target stage"},
        {{{KT_STEP_SPLIT, 3, 0, 1, {2}}}, 1, "no stage 3"},
        {{{KT_STEP_SPLIT, 0, 0, 1, {2}}, {KT_STEP_CACHE_WRITE, 0, 0, 0, {0}}},
         2,
         "must be untransformed"},
    };
    struct kt_dag *dag = matmul(64, 32, 16);
    unsigned i;
    (void)state;

    for (i = 0; i < KT_ARRAY_LEN(cases); i++) {
        struct kt_state *st = kt_state_new(dag);
        char err[256] = "";
        int k, rc = KT_OK;
        for (k = 0; k < cases[i].nsteps && rc == KT_OK; k++)
            rc = kt_state_apply(st, &cases[i].steps[k], err, sizeof(err));
        assert_int_equal(rc, KT_ESCHEDULE);
        if (strstr(err, cases[i].msg) == NULL)
            fail_msg("case %u: \"%s\" lacks \"%s\"", i, err, cases[i].msg);
        /* A failed step leaves the history as it was. */
        assert_int_equal(st->nsteps, cases[i].nsteps - 1);
        kt_state_free(st);
    }
    kt_dag_free(dag);
}

static void
test_schedule_compute_at_rules(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag;
    struct kt_state *st;
    char err[256];
    (void)state;

    assert_int_equal(kt_op_dense(&d, 16, 32, 8, KT_EPI_BIAS), KT_OK);
    dag = build(&d);
    st = kt_state_new(dag);
    /* T (stage 0) attached to O (stage 1): then O can no longer be split. */
    assert_int_equal(apply(st,
                           (struct kt_step){KT_STEP_COMPUTE_AT, 0, 0, 0, {1, 1}},
                           err, sizeof(err)),
                     KT_OK);
    assert_int_equal(apply(st, (struct kt_step){KT_STEP_SPLIT, 1, 0, 1, {4}},
                           err, sizeof(err)),
                     KT_ESCHEDULE);
    assert_non_null(strstr(err, "transform it before attaching"));
    /* O is an output: it cannot be attached or inlined. */
    assert_int_equal(apply(st,
                           (struct kt_step){KT_STEP_COMPUTE_INLINE, 1, 0, 0, {0}},
                           err, sizeof(err)),
                     KT_ESCHEDULE);
    assert_non_null(strstr(err, "is an output"));
    kt_state_free(st);
    kt_dag_free(dag);
}

static void
test_schedule_lowering_regions(void **state)
{
    struct kt_dag *dag = matmul(64, 64, 32);
    struct kt_state *st = kt_state_new(dag);
    struct kt_looptree *lt = NULL;
    struct kt_buf b;
    char err[256];
    struct kt_step steps[] = {
        {KT_STEP_CACHE_WRITE, 0, 0, 0, {0}},
        /* O (now stage 1): i -> [8, 8], j -> [2, 32]; order io jo ii ji */
        {KT_STEP_SPLIT, 1, 1, 1, {32}},
        {KT_STEP_SPLIT, 1, 0, 1, {8}},
        {KT_STEP_REORDER, 1, 0, 4, {0, 2, 1, 3}},
        /* O_local: i -> [.., 8], j -> [.., 2, 16], k -> [.., 4], the
         * outer k part around the tile's rows (so the tile is revisited
         * and kept, lower_elide.c) */
        {KT_STEP_SPLIT, 0, 2, 1, {4}},
        {KT_STEP_SPLIT, 0, 1, 2, {2, 16}},
        {KT_STEP_SPLIT, 0, 0, 1, {8}},
        {KT_STEP_REORDER, 0, 0, 7, {0, 2, 5, 1, 3, 4, 6}},
        {KT_STEP_COMPUTE_AT, 0, 0, 0, {1, 1}},
        {KT_STEP_ANNOTATE, 0, 5, 0, {KT_ANN_VECTORIZE}},
    };
    unsigned i;
    (void)state;

    for (i = 0; i < KT_ARRAY_LEN(steps); i++)
        if (kt_state_apply(st, &steps[i], err, sizeof(err)) != KT_OK)
            fail_msg("step %u: %s", i, err);
    assert_int_equal(kt_lower(st, &lt, err, sizeof(err)), KT_OK);
    kt_buf_init(&b);
    kt_looptree_print(lt, &b);
    /* The accumulator tile is the consumer's inner tile. */
    if (strstr(b.p, "alloc O_local[8, 32]") == NULL)
        fail_msg("no 8x32 tile in:\n%s", b.p);
    /* The init store comes before the reduction loop, inside the tile. */
    assert_true(strstr(b.p, "O_local[") < strstr(b.p, "(reduce)"));
    kt_buf_free(&b);
    kt_looptree_free(lt);
    kt_state_free(st);
    kt_dag_free(dag);
}

static void
test_schedule_lowering_rejects_nested_parallel(void **state)
{
    struct kt_dag *dag = matmul(16, 16, 16);
    struct kt_state *st = kt_state_new(dag);
    struct kt_looptree *lt = NULL;
    char err[256];
    (void)state;

    assert_int_equal(apply(st,
                           (struct kt_step){KT_STEP_ANNOTATE,
                                            0,
                                            0,
                                            0,
                                            {KT_ANN_PARALLEL}},
                           err, sizeof(err)),
                     KT_OK);
    assert_int_equal(apply(st,
                           (struct kt_step){KT_STEP_ANNOTATE,
                                            0,
                                            1,
                                            0,
                                            {KT_ANN_PARALLEL}},
                           err, sizeof(err)),
                     KT_OK);
    assert_int_equal(kt_lower(st, &lt, err, sizeof(err)), KT_ESCHEDULE);
    assert_non_null(strstr(err, "parallel loop inside a parallel loop"));
    assert_null(lt);
    kt_state_free(st);
    kt_dag_free(dag);
}

/* Random garbage: every step either applies or is refused with a message,
 * and every state that applies either lowers or is refused - never a crash
 * (this is the err_no 1 path, so it also runs under ASan). */
static void
test_schedule_garbage_never_crashes(void **state)
{
    struct kt_op_def d;
    struct kt_conv2d_params p = {.N = 1,
                                 .C = 4,
                                 .H = 7,
                                 .W = 7,
                                 .K = 4,
                                 .R = 3,
                                 .S = 3,
                                 .stride_h = 1,
                                 .stride_w = 1,
                                 .pad_h = 1,
                                 .pad_w = 1,
                                 .dilation_h = 1,
                                 .dilation_w = 1,
                                 .groups = 1,
                                 .epilogue = KT_EPI_BIAS | KT_EPI_RELU};
    struct kt_dag *dag;
    struct kt_rng r;
    int round, i, lowered = 0, refused = 0;
    (void)state;

    assert_int_equal(kt_op_conv2d(&d, &p), KT_OK);
    dag = build(&d);
    kt_rng_seed(&r, 99);
    for (round = 0; round < 300; round++) {
        struct kt_state *st = kt_state_new(dag);
        struct kt_looptree *lt = NULL;
        char err[256];
        for (i = 0; i < 12; i++) {
            struct kt_step s;
            int k;
            memset(&s, 0, sizeof(s));
            s.kind = (enum kt_step_kind)kt_rng_below(&r, KT_STEP_NKINDS + 1);
            s.stage = (int)kt_rng_below(&r, 6) - 1;
            s.iter = (int)kt_rng_below(&r, 12) - 1;
            s.n = (int)kt_rng_below(&r, 8);
            for (k = 0; k < s.n; k++)
                s.v[k] = (int64_t)kt_rng_below(&r, 16) - 1;
            if (s.kind == KT_STEP_SPLIT)
                for (k = 0; k < s.n; k++)
                    s.v[k] = 1 + (int64_t)kt_rng_below(&r, 4);
            if (kt_state_apply(st, &s, err, sizeof(err)) != KT_OK)
                assert_true(strlen(err) > 0);
        }
        if (kt_lower(st, &lt, err, sizeof(err)) == KT_OK) {
            struct kt_codegen_opts o;
            struct kt_buf b;
            kt_codegen_default_opts(&o);
            kt_buf_init(&b);
            kt_codegen_function(lt, &o, "k", &b, err, sizeof(err));
            kt_buf_free(&b);
            lowered++;
        } else {
            assert_true(strlen(err) > 0);
            refused++;
        }
        kt_looptree_free(lt);
        kt_state_free(st);
    }
    assert_true(lowered > 0);
    kt_dag_free(dag);
    (void)refused;
}

static void
test_schedule_json_errors(void **state)
{
    static const struct {
        const char *json;
        const char *msg;
    } cases[] = {
        {"{", "syntax error"},
        {"{\"v\":2,\"steps\":[]}", "expected {\"v\":1"},
        {"{\"v\":1,\"steps\":[[\"XX\",0]]}", "unknown step kind"},
        {"{\"v\":1,\"steps\":[[\"SP\",0,1]]}", "wrong number of fields"},
        {"{\"v\":1,\"steps\":[[\"AN\",0,1,\"sideways\"]]}", "malformed field"},
        {"{\"v\":1,\"steps\":[[\"SP\",-1,0,[2]]]}", "bad stage number"},
        /* Found by fuzz_schedule: out-of-range doubles must not be cast. */
        {"{\"v\":1,\"steps\":[[\"CHW\",8e100]]}", "bad stage number"},
        {"{\"v\":1,\"steps\":[[\"SP\",0,0,[1e300]]]}", "malformed field"},
    };
    unsigned i;
    (void)state;

    for (i = 0; i < KT_ARRAY_LEN(cases); i++) {
        struct kt_step *steps = NULL;
        char err[256] = "";
        int n;
        assert_int_equal(kt_steps_from_json(cases[i].json, &steps, &n, err,
                                            sizeof(err)),
                         KT_EPARSE);
        if (strstr(err, cases[i].msg) == NULL)
            fail_msg("\"%s\": \"%s\" lacks \"%s\"", cases[i].json, err,
                     cases[i].msg);
        assert_null(steps);
    }
}

/* Every operator's workload key rebuilds its DAG (warm start and reports
 * lower stored trials of any workload from the key alone). */
static void
test_schedule_dag_from_key(void **state)
{
    struct kt_conv2d_params p = {.N = 1,
                                 .C = 8,
                                 .H = 14,
                                 .W = 14,
                                 .K = 8,
                                 .R = 3,
                                 .S = 3,
                                 .stride_h = 2,
                                 .stride_w = 2,
                                 .pad_h = 1,
                                 .pad_w = 1,
                                 .dilation_h = 1,
                                 .dilation_w = 1,
                                 .groups = 8,
                                 .epilogue = KT_EPI_BIAS | KT_EPI_RELU};
    struct kt_op_def defs[6];
    struct kt_dag *d, *back;
    char err[256];
    int i;
    (void)state;

    kt_op_dense(&defs[0], 16, 1000, 64, KT_EPI_BIAS | KT_EPI_RELU);
    kt_op_conv2d(&defs[1], &p);
    kt_op_softmax(&defs[2], 7, 1000);
    kt_op_pool2d(&defs[3], 1, 1, 8, 14, 14, 3, 2, 1);
    kt_op_elementwise(&defs[4], "hardswish", 1, 8, 14, 14);
    kt_op_global_avg_pool(&defs[5], 1, 16, 7, 7);
    for (i = 0; i < 6; i++) {
        d = build(&defs[i]);
        if (kt_dag_from_key(d->key, &back, err, sizeof(err)) != KT_OK)
            fail_msg("%s: %s", d->key, err);
        assert_string_equal(back->key, d->key);
        assert_string_equal(back->hash, d->hash);
        assert_true(back->flops == d->flops);
        kt_dag_free(back);
        kt_dag_free(d);
    }
    assert_int_equal(kt_dag_from_key("O[a0]=A[a0];A:0", &back, err,
                                     sizeof(err)) != KT_OK,
                     1);
    assert_null(back);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schedule_json_round_trip),
        cmocka_unit_test(test_schedule_hash_is_stable),
        cmocka_unit_test(test_schedule_text_of_every_step),
        cmocka_unit_test(test_schedule_rejects_invalid_steps),
        cmocka_unit_test(test_schedule_compute_at_rules),
        cmocka_unit_test(test_schedule_lowering_regions),
        cmocka_unit_test(test_schedule_lowering_rejects_nested_parallel),
        cmocka_unit_test(test_schedule_garbage_never_crashes),
        cmocka_unit_test(test_schedule_json_errors),
        cmocka_unit_test(test_schedule_dag_from_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
