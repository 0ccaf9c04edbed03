/* test_strided_stores.c - vector stores at a constant lane stride of 2 to
 * 4 (a transposed convolution's output phases, O[..., x, b] with x along
 * the lanes) go out, for an AVX-512 target, as that many masked stores of
 * shuffled vectors instead of a scalar store per lane
 * (kt__cg_put_strided_store, ir/codegen_store.c): from a stage's own store
 * and from a register tile stored after its reduction; and the search's
 * fused consumers take that stride rather than vectors of 2 to 4 lanes
 * (follow_vector_axis, scheduler/search_build.c).  Every form is compiled
 * and checked against the interpreter (ktt_checked_c_at, ktt_check_many);
 * the output's last store ends the buffer, so a write past it would hit
 * the canary after it (ktt_bufs_intact) and, under valgrind, be seen. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "scheduler/scheduler.h"
#include "tests/support/ktt.h"

/* A 2 x 2 stride-2 transposed convolution, 4 -> 3 channels, 4 x W input:
 * O[n,f,y,a,x,b] (8 x 2W output, each output row's phases b interleaved)
 * with stride_w = b's extent; relu: Y, then O = max(Y + B[f], 0). */
static struct kt_dag *
conv_t(int64_t W, int64_t stride_w, int relu)
{
    const struct kt_shape bias = {"B", 1, {3}};
    const struct kt_conv_t_params p = {1, 4,        4,           W,        3,
                                       2, stride_w, 2,           stride_w, 0,
                                       0, 8,        W * stride_w};
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    int64_t ch, cw;
    char err[256];

    assert_int_equal(kt_op_conv2d_transpose(&d, &p, &ch, &cw), KT_OK);
    if (relu)
        assert_int_equal(kt_op_epilogue(&d,
                                        "O[n,f,y,a,x,b]=max(Y[n,f,y,a,x,b]+"
                                        "B[f],0)",
                                        &bias, 1),
                         KT_OK);
    if (kt_op_build(&d, &dag, err, sizeof(err)) != KT_OK)
        fail_msg("kt_op_build: %s", err);
    return dag;
}

/* The output computed in a local tile (cache_write), then copied out with
 * its loops over x and b swapped and x vectorized. */
#define COPY_ALONG_X                                                           \
    "{\"v\":1,\"steps\":[[\"CHW\",0],[\"RE\",1,[0,1,2,3,5,4]],"                \
    "[\"AN\",1,5,\"vectorize\"]]}"

/* The C of the program json for vector_bytes-wide vectors, checked
 * against the interpreter; caller frees. */
static char *
checked(struct kt_dag *dag, const char *json, int vector_bytes)
{
    struct kt_state *st = ktt_replay_json(dag, json);
    char *c;

    assert_non_null(st);
    c = ktt_checked_c_at(dag, st, vector_bytes, 7);
    assert_non_null(c);
    kt_state_free(st);
    return c;
}

/* The output computed in a local tile, then copied out with x along the
 * lanes: each 16-lane row of the copy is two masked stores of the lanes
 * shuffled to the even elements, no loop over its lanes. */
static void
test_strided_store_copy(void **state)
{
    struct kt_dag *dag = conv_t(16, 2, 0);
    char *c = checked(dag, COPY_ALONG_X, 64);
    (void)state;

    assert_int_equal(ktt_count(c, "kt_stm16(&t_O["), 2);
    assert_non_null(strstr(c, "__builtin_shufflevector(s_, s_, 0, 0, 1, 0, "
                              "2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0), "
                              "0x5555u)"));
    assert_non_null(strstr(c, "__builtin_shufflevector(s_, s_, 8, 0, 9, 0, "
                              "10, 0, 11, 0, 12, 0, 13, 0, 14, 0, 15, 0), "
                              "0x5555u)"));
    assert_null(strstr(c, "*l_] = "));
    free(c);
    kt_dag_free(dag);
}

/* Stride 3 at 8 lanes: three masked stores, the last one's lanes ending
 * at the last element written (lane 7 at element 21 = 16 + 5). */
static void
test_strided_store_stride3(void **state)
{
    struct kt_dag *dag = conv_t(8, 3, 0);
    char *c = checked(dag, COPY_ALONG_X, 64);
    (void)state;

    assert_int_equal(ktt_count(c, "kt_stm8(&t_O["), 3);
    assert_non_null(strstr(c, "0, 0, 0, 1, 0, 0, 2, 0), 0x49u)"));
    assert_non_null(strstr(c, "0, 3, 0, 0, 4, 0, 0, 5), 0x92u)"));
    assert_non_null(strstr(c, "0, 0, 6, 0, 0, 7, 0, 0), 0x24u)"));
    assert_null(strstr(c, "*l_] = "));
    free(c);
    kt_dag_free(dag);
}

/* A register tile of 3 channels x 2 phases, x along the lanes, held over
 * the reduction and stored after it: each register is stored as two
 * masked stores. */
static void
test_strided_store_register_tile(void **state)
{
    struct kt_dag *dag = conv_t(16, 2, 0);
    char *c = checked(dag,
                      "{\"v\":1,\"steps\":[["
                      "\"RE\",0,[0,2,3,6,7,8,1,5,4]],"
                      "[\"AN\",0,6,\"unroll\"],[\"AN\",0,7,\"unroll\"],"
                      "[\"AN\",0,8,\"vectorize\"]]}",
                      64);
    (void)state;

    assert_non_null(strstr(c, "kt_v16 s_ = r"));
    assert_int_equal(ktt_count(c, "kt_stm16(&t_O["), 12);
    assert_null(strstr(c, "*l_] = "));
    free(c);
    kt_dag_free(dag);
}

/* A target without masked stores keeps the lane loop (an AVX2 build: a
 * masked store would be a loop over the lanes too). */
static void
test_strided_store_avx2_scatters(void **state)
{
    struct kt_dag *dag = conv_t(16, 2, 0);
    char *c = checked(dag, COPY_ALONG_X, 32);
    (void)state;

    assert_null(strstr(c, "kt_stm8(&t_O["));
    assert_non_null(strstr(c, "*l_] = "));
    free(c);
    kt_dag_free(dag);
}

/* The vectorized axis of stage ss's innermost iterator, or -1. */
static int
vector_axis(const struct kt_sstage *ss)
{
    const struct kt_iter *it;

    if (ss->inlined || ss->niters == 0)
        return -1;
    it = &ss->iters[ss->niters - 1];
    return it->ann == KT_ANN_VECTORIZE ? it->parts[0].axis : -1;
}

/* Samples 64 programs of a search for vector_bytes and counts those
 * whose output stage has its producer, vectorized along x (axis 4),
 * computed at one of its loops (fused) and its own vectors along x and
 * along b (axis 5); compiles and checks up to 4 of the former. */
static void
sample_follows(const struct kt_dag *dag, int vector_bytes, int *along_x,
               int *along_b)
{
    struct kt_search_opts o;
    struct kt_search *s = NULL;
    struct kt_search_batch b;
    struct kt_state *cands[4];
    char err[512];
    int i, n = 0, skipped = 0;

    kt_search_opts_default(&o);
    o.policy = KT_POLICY_RANDOM;
    o.population = 128;
    o.seed = 3;
    o.vector_bytes = vector_bytes;
    if (kt_search_new(&s, dag, &o, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 64, &b, NULL, err,
                                          sizeof(err)),
                     KT_OK);
    *along_x = *along_b = 0;
    for (i = 0; i < b.n; i++) {
        const struct kt_state *st = b.v[i].state;
        int last = st->nstages - 1, out = vector_axis(&st->stages[last]);
        if (last == 0 || st->stages[last - 1].attach_stage != last ||
            vector_axis(&st->stages[last - 1]) != 4)
            continue;
        *along_x += out == 4;
        *along_b += out == 5;
        if (out == 4 && n < 4)
            assert_int_equal(kt_state_replay(dag, b.v[i].steps, b.v[i].nsteps,
                                             &cands[n++], err, sizeof(err)),
                             KT_OK);
    }
    if (n > 0) {
        ktt_vector_bytes = vector_bytes;
        assert_int_equal(ktt_check_many(dag, cands, n, 5, &skipped), 0);
        ktt_vector_bytes = 0;
        assert_int_equal(skipped, 0);
    }
    for (i = 0; i < n; i++)
        kt_state_free(cands[i]);
    kt_search_batch_free(&b);
    kt_search_free(s);
}

/* The bias + relu fused into a transposed convolution whose register
 * tile is vectorized along x: with AVX-512 the epilogue's vectors run
 * along x too (two masked stores each), never along b (2-lane vectors
 * gathered from the local tile at a stride of 16); with AVX2 (masked
 * stores are lane loops there) along b as before. */
static void
test_strided_store_search_follows(void **state)
{
    struct kt_dag *dag = conv_t(16, 2, 1);
    int x, b;
    (void)state;

    sample_follows(dag, 64, &x, &b);
    if (x == 0 || b != 0)
        fail_msg("AVX-512: %d copies along x, %d along b", x, b);
    sample_follows(dag, 32, &x, &b);
    if (x != 0 || b == 0)
        fail_msg("AVX2: %d copies along x, %d along b", x, b);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strided_store_copy),
        cmocka_unit_test(test_strided_store_stride3),
        cmocka_unit_test(test_strided_store_register_tile),
        cmocka_unit_test(test_strided_store_avx2_scatters),
        cmocka_unit_test(test_strided_store_search_follows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
