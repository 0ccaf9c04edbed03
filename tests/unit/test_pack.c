/* test_pack.c - the cache_read (CHR) and layout_rewrite (LR) steps: JSON
 * round trip, validation, lowering (packed tile shapes and dim order),
 * generated kernels and pack routines checked against the interpreter,
 * the cost-model features that see them, and the search's pack genes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "costmodel/costmodel.h"
#include "measure/worker/worker.h"
#include "scheduler/scheduler.h"
#include "tests/support/ktt.h"
#include "tests/unit/test_dense_rows40.h"

/* Dense T[i,j] += A[i,k] * W[j,k]: W is packed at the k0 loop of the
 * order j0 k0 i0 k1 i1 j1 (an 8 x 32 register tile, k tiles of 64). */
#define DENSE_PACKED                                                           \
    "[\"CHR\",0,1],[\"SP\",1,0,[8]],[\"SP\",1,2,[32]],[\"SP\",1,4,[64]],"      \
    "[\"RE\",1,[2,4,0,5,1,3]],[\"CA\",0,1,1],"
#define DENSE_ANN                                                              \
    "[\"AN\",1,4,\"unroll\"],[\"AN\",1,5,\"vectorize\"],"                      \
    "[\"AN\",1,0,\"parallel\"],[\"AN\",0,1,\"vectorize\"]"

static const char dense_in_kernel[] = "{\"v\":1,\"steps\":[" DENSE_PACKED DENSE_ANN
                                      "]}";
static const char dense_rewritten[] = "{\"v\":1,\"steps\":[" DENSE_PACKED
                                      "[\"LR\",0]," DENSE_ANN "]}";

static struct kt_state *
replay(const struct kt_dag *dag, const char *json)
{
    struct kt_step *steps;
    struct kt_state *st = NULL;
    char err[256];
    int n;

    assert_int_equal(kt_steps_from_json(json, &steps, &n, err, sizeof(err)),
                     KT_OK);
    if (kt_state_replay(dag, steps, n, &st, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    free(steps);
    return st;
}

static void
test_pack_json_round_trip(void **state)
{
    struct kt_step *steps;
    struct kt_buf b;
    char err[256];
    int n;

    (void)state;
    assert_int_equal(kt_steps_from_json(dense_rewritten, &steps, &n, err,
                                        sizeof(err)),
                     KT_OK);
    assert_int_equal(steps[0].kind, KT_STEP_CACHE_READ);
    assert_int_equal(steps[0].v[0], 1);
    assert_int_equal(steps[6].kind, KT_STEP_LAYOUT_REWRITE);
    kt_buf_init(&b);
    kt_steps_to_json(steps, n, &b);
    assert_string_equal(b.p, dense_rewritten);
    kt_buf_free(&b);
    free(steps);
    assert_int_equal(kt_steps_from_json("{\"v\":1,\"steps\":[[\"CHR\",0]]}",
                                        &steps, &n, err, sizeof(err)),
                     KT_EPARSE);
    assert_non_null(strstr(err, "CHR: wrong number of fields"));
    assert_int_equal(kt_steps_from_json("{\"v\":1,\"steps\":[[\"LR\",0,1]]}",
                                        &steps, &n, err, sizeof(err)),
                     KT_EPARSE);
}

static void
test_pack_validation(void **state)
{
    struct kt_dag *dag = ktt_dense(16, 64, 32), *mm;
    struct kt_state *st = kt_state_new(dag);
    struct kt_op_def d;
    char err[256];

    (void)state;
    /* the weight is constant, the activations are not */
    assert_true(dag->tensors[kt_dag_find_tensor(dag, "W")].is_const);
    assert_false(dag->tensors[kt_dag_find_tensor(dag, "A")].is_const);
    assert_non_null(strstr(dag->key, ";W:64x32:const"));
    assert_int_equal(kt_state_apply(st,
                                    &(struct kt_step){KT_STEP_CACHE_READ,
                                                      0,
                                                      0,
                                                      0,
                                                      {2}},
                                    err, sizeof(err)),
                     KT_ESCHEDULE);
    assert_non_null(strstr(err, "does not read"));
    assert_int_equal(kt_state_apply(st,
                                    &(struct kt_step){KT_STEP_LAYOUT_REWRITE,
                                                      0,
                                                      0,
                                                      0,
                                                      {0}},
                                    err, sizeof(err)),
                     KT_ESCHEDULE);
    assert_non_null(strstr(err, "not a cache_read stage"));
    /* pack A (not constant): inserted before the reader, no rewrite */
    assert_int_equal(kt_state_apply(st,
                                    &(struct kt_step){KT_STEP_CACHE_READ,
                                                      0,
                                                      0,
                                                      0,
                                                      {0}},
                                    err, sizeof(err)),
                     KT_OK);
    assert_int_equal(st->nstages, 2);
    assert_string_equal(st->stages[0].name, "A_pack");
    assert_true(kt_expr_reads(st->stages[1].body, st->stages[0].out));
    assert_false(kt_expr_reads(st->stages[1].body, 0));
    assert_int_equal(kt_state_apply(st,
                                    &(struct kt_step){KT_STEP_LAYOUT_REWRITE,
                                                      0,
                                                      0,
                                                      0,
                                                      {0}},
                                    err, sizeof(err)),
                     KT_ESCHEDULE);
    assert_non_null(strstr(err, "not a constant weight"));
    assert_int_equal(kt_state_apply(st,
                                    &(struct kt_step){KT_STEP_CACHE_WRITE,
                                                      0,
                                                      0,
                                                      0,
                                                      {0}},
                                    err, sizeof(err)),
                     KT_ESCHEDULE);
    kt_state_free(st);
    /* a key with ":const" rebuilds to itself */
    assert_int_equal(kt_dag_from_key(dag->key, &mm, err, sizeof(err)), KT_OK);
    assert_true(mm->tensors[kt_dag_find_tensor(mm, "W")].is_const);
    kt_dag_free(mm);
    kt_dag_free(dag);
    /* a plain matmul has no weights */
    assert_int_equal(kt_op_matmul(&d, 8, 8, 8), KT_OK);
    assert_int_equal(kt_op_build(&d, &mm, err, sizeof(err)), KT_OK);
    assert_null(strstr(mm->key, ":const"));
    kt_dag_free(mm);
}

static const struct kt_lbuf *
find_buf(const struct kt_looptree *lt, const char *name)
{
    int i;

    for (i = 0; i < lt->nbufs; i++)
        if (strcmp(lt->bufs[i].name, name) == 0)
            return &lt->bufs[i];
    fail_msg("no buffer %s", name);
    return NULL;
}

static void
test_pack_lowering_shapes(void **state)
{
    struct kt_dag *dag = ktt_dense(16, 64, 128);
    struct kt_state *st = replay(dag, dense_in_kernel);
    struct kt_looptree *lt;
    const struct kt_lbuf *b;
    char err[256];

    (void)state;
    assert_int_equal(kt_lower(st, &lt, err, sizeof(err)), KT_OK);
    b = find_buf(lt, "W_pack");
    /* W[j,k] tile 32 x 64 stored k-major: the reader's j1 is innermost */
    assert_int_equal(b->scope, KT_BUF_LOCAL);
    assert_int_equal(b->ndim, 2);
    assert_int_equal(b->shape[0], 64);
    assert_int_equal(b->shape[1], 32);
    assert_null(lt->pack_root);
    kt_looptree_free(lt);
    kt_state_free(st);

    st = replay(dag, dense_rewritten);
    assert_int_equal(kt_lower(st, &lt, err, sizeof(err)), KT_OK);
    b = find_buf(lt, "W_pack");
    /* every tile: [j0 = 2][k0 = 2][64][32], built by the pack routine */
    assert_int_equal(b->scope, KT_BUF_PACKED);
    assert_int_equal(b->ndim, 4);
    assert_int_equal(b->shape[0] * b->shape[1], 4);
    assert_int_equal(b->shape[2], 64);
    assert_int_equal(b->shape[3], 32);
    assert_non_null(lt->pack_root);
    assert_int_equal(kt_lbuf_elems(b), 64 * 128);
    kt_looptree_free(lt);
    kt_state_free(st);
    kt_dag_free(dag);
}

static void
test_pack_kernels_match(void **state)
{
    struct kt_dag *dag = ktt_dense(16, 64, 128);
    struct kt_state *c[2];
    struct kt_codegen_opts o;
    struct kt_buf src;
    char err[512];
    int skipped;

    (void)state;
    c[0] = replay(dag, dense_in_kernel);
    c[1] = replay(dag, dense_rewritten);
    assert_int_equal(ktt_check_many(dag, c, 2, 11, &skipped), 0);
    assert_int_equal(skipped, 0);
    /* the module exports the pack routine only with a rewrite (the code
     * for 16-lane vectors, whatever the host's) */
    kt_codegen_default_opts(&o);
    o.vector_bytes = 64;
    kt_buf_init(&src);
    assert_int_equal(kt_codegen_module(c[0], dag, &o, &src, err, sizeof(err)),
                     KT_OK);
    assert_null(strstr(src.p, "kt_pack("));
    /* the 32 x 64 tile of W[j, k] is copied into [k][j] by 16 x 16 blocks
     * transposed in registers, not by one scalar store per element */
    assert_non_null(strstr(src.p, "__builtin_shufflevector(x0_0, x0_8, "));
    assert_non_null(strstr(src.p, "kt_st16(&t_W_pack["));
    kt_buf_reset(&src);
    assert_int_equal(kt_codegen_module(c[1], dag, &o, &src, err, sizeof(err)),
                     KT_OK);
    assert_non_null(strstr(src.p, "void kt_pack(float *const *bufs)"));
    assert_non_null(strstr(src.p, "const long long kt_pack_elems = 8192LL;"));
    assert_non_null(strstr(src.p, "__builtin_shufflevector(x0_0, x0_8, "));
    kt_buf_free(&src);
    kt_state_free(c[0]);
    kt_state_free(c[1]);
    kt_dag_free(dag);
}

/* A rewrite attached under 7 loops that index W[j, k] needs 7 tile
 * dims and W's 2, more than a buffer has: the outermost tile variables
 * share one dim (the same addresses).  Winograd's 4-dim U packed 5 loops
 * deep failed to lower in 362 of 5,120 samples before. */
static const char dense_rewritten_deep[] =
    "{\"v\":1,\"steps\":[[\"CHR\",0,1],[\"SP\",1,1,[4,2,4]],"
    "[\"SP\",1,5,[2,2,2,4]],[\"RE\",1,[1,5,2,6,3,7,8,0,9,4]],"
    "[\"CA\",0,1,6],[\"LR\",0],[\"AN\",1,9,\"vectorize\"],"
    "[\"AN\",1,0,\"parallel\"]]}";

static void
test_pack_rewrite_folds_tile_dims(void **state)
{
    struct kt_dag *dag = ktt_dense(16, 64, 128);
    struct kt_state *st = replay(dag, dense_rewritten_deep);
    struct kt_looptree *lt;
    const struct kt_lbuf *b;
    char err[512];
    int skipped;

    (void)state;
    if (kt_lower(st, &lt, err, sizeof(err)) != KT_OK)
        fail_msg("%s", err);
    b = find_buf(lt, "W_pack");
    /* j0 k0 j1 k1 j2 k2 k3 = 2 4 4 2 2 2 2: j0 and k0 share dim 0 */
    assert_int_equal(b->scope, KT_BUF_PACKED);
    assert_int_equal(b->ndim, KT_MAX_DIMS);
    assert_int_equal(b->shape[0], 2 * 4);
    assert_int_equal(b->shape[1], 4);
    assert_int_equal(b->shape[5], 2);
    assert_int_equal(kt_lbuf_elems(b), 64 * 128);
    kt_looptree_free(lt);
    assert_int_equal(ktt_check_many(dag, &st, 1, 13, &skipped), 0);
    assert_int_equal(skipped, 0);
    kt_state_free(st);
    kt_dag_free(dag);
}

/* The pack routine of a rewritten weight sets up only what it writes: the
 * classifier's best stored schedule (128 x 1000 x 2048 + bias, padded to
 * 1008) keeps T, 516 KB, on the heap for the kernel, and its pack routine
 * allocated and freed that too on every call (the suite's dense_fc1000). */
static void
test_pack_routine_allocates_nothing(void **state)
{
    static const char json[] =
        "{\"v\":1,\"steps\":[[\"CI\",2],[\"CHR\",1,3],[\"CHR\",2,0],"
        "[\"CI\",0],[\"SP\",3,2,[1024]],[\"SP\",3,1,[21,48]],"
        "[\"SP\",3,0,[1,8]],[\"RE\",3,[0,3,6,1,4,7,2,5]],[\"FU\",3,0,2],"
        "[\"CA\",2,3,1],[\"CA\",1,3,3],[\"LR\",1],"
        "[\"AN\",1,1,\"vectorize\"],[\"AN\",2,1,\"vectorize\"],"
        "[\"AN\",3,0,\"parallel\"],[\"AN\",3,6,\"vectorize\"],"
        "[\"AN\",3,5,\"unroll\"],[\"PR\",3,0,512],"
        "[\"AN\",5,0,\"parallel\"],[\"AN\",5,1,\"vectorize\"]]}";
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_state *st;
    struct kt_codegen_opts o;
    struct kt_buf src;
    char err[512], *pack, *kernel;
    (void)state;

    assert_int_equal(kt_op_dense(&d, 128, 1000, 2048, KT_EPI_BIAS), KT_OK);
    assert_int_equal(kt_op_build(&d, &dag, err, sizeof(err)), KT_OK);
    st = replay(dag, json);
    kt_codegen_default_opts(&o);
    kt_buf_init(&src);
    assert_int_equal(kt_codegen_module(st, dag, &o, &src, err, sizeof(err)),
                     KT_OK);
    pack = strstr(src.p, "_pack(float *const *args)");
    kernel = pack != NULL ? strstr(pack, "static void\n") : NULL;
    assert_non_null(kernel);
    assert_non_null(strstr(kernel, "t_T = kt_scratch("));
    kernel[0] = '\0'; /* the pack routine's text ends here */
    if (strstr(pack, "kt_scratch(") != NULL || strstr(pack, "alloc(") != NULL)
        fail_msg("the pack routine allocates:\n%s", pack);
    kt_buf_free(&src);
    kt_state_free(st);
    kt_dag_free(dag);
}

/* Attention scores O[b,i,j] += A[b,i,k] * B[b,j,k], 2 x 16 x 32 x 32:
 * the order b j0 k0 i k1 j1 with B packed at k0 stores its tj x tk tile
 * [k][j], a transposing copy; tiles of 16 x 32, 8 x 16 and 4 x 8 are
 * copied by 16-, 8- and 4-lane blocks transposed in registers, and every
 * kernel matches the interpreter. */
static void
test_pack_transposed_copies(void **state)
{
    static const int tiles[][3] = {{16, 32, 16}, {8, 16, 8}, {4, 8, 4}};
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_state *c[3];
    struct kt_codegen_opts o;
    struct kt_buf src;
    char err[512], json[512], want[64];
    int t, skipped;

    (void)state;
    assert_int_equal(kt_op_batch_matmul(&d, 2, 16, 32, 32, 1), KT_OK);
    assert_int_equal(kt_op_build(&d, &dag, err, sizeof(err)), KT_OK);
    kt_codegen_default_opts(&o);
    o.vector_bytes = 64; /* the widths above are 16-lane code's */
    kt_buf_init(&src);
    for (t = 0; t < 3; t++) {
        snprintf(json, sizeof(json),
                 "{\"v\":1,\"steps\":[[\"CHR\",0,1],[\"SP\",1,2,[%d]],"
                 "[\"SP\",1,4,[%d]],[\"RE\",1,[0,2,4,1,5,3]],"
                 "[\"CA\",0,1,2],[\"AN\",0,2,\"vectorize\"],"
                 "[\"AN\",1,5,\"vectorize\"],[\"AN\",1,0,\"parallel\"]]}",
                 tiles[t][0], tiles[t][1]);
        c[t] = replay(dag, json);
        kt_buf_reset(&src);
        assert_int_equal(kt_codegen_module(c[t], dag, &o, &src, err,
                                           sizeof(err)),
                         KT_OK);
        snprintf(want, sizeof(want), "kt_v%d x1_0 = __builtin_shufflevector(",
                 tiles[t][2]);
        if (strstr(src.p, want) == NULL)
            fail_msg("tile %d x %d: no '%s' in\n%s", tiles[t][0], tiles[t][1],
                     want, src.p);
    }
    assert_int_equal(ktt_check_many(dag, c, 3, 13, &skipped), 0);
    assert_int_equal(skipped, 0);
    for (t = 0; t < 3; t++)
        kt_state_free(c[t]);
    kt_buf_free(&src);
    kt_dag_free(dag);
}

/* ViT's P V product per head (197 x 197 by 197 x 64, rows padded to
 * 200), a 5 x 64 register tile: B packed per head copies B[h] whole, in
 * its own layout, and is dropped, the tile reading B in place
 * (ir/lower_elide.c); B packed per 32-column panel changes its layout
 * and stays, hoisted out of the row-block loop (both panels copied once,
 * ir/lower_hoist.c).  Both kernels match the interpreter. */
#define PV_SCHEDULE(n_split, at)                                               \
    "{\"v\":1,\"steps\":[[\"CHR\",1,1],[\"CHR\",2,2],[\"CI\",0],"              \
    "[\"SP\",4,2,[64]],[\"SP\",4,1,[200]],[\"SP\",4,0,[1]],"                   \
    "[\"RE\",4,[0,2,4,1,3,5]],[\"FU\",4,0,3],[\"SP\",3,3,[197]],"              \
    "[\"SP\",3,2," n_split "],[\"SP\",3,1,[40,5]],[\"SP\",3,0,[1,1]],"         \
    "[\"RE\",3,[0,3,6,9,1,4,7,10,2,5,8]],[\"CA\",3,4,0],[\"CI\",2],"           \
    "[\"CA\",1,3," at "],[\"AN\",1,2,\"vectorize\"],"                          \
    "[\"AN\",3,10,\"vectorize\"],[\"AN\",3,9,\"unroll\"],"                     \
    "[\"AN\",4,0,\"parallel\"],[\"AN\",4,3,\"vectorize\"]]}"

static void
test_pack_identity_copy_elided(void **state)
{
    static const char *const scheds[] = {PV_SCHEDULE("[1,64]", "0"),
                                         PV_SCHEDULE("[2,32]", "6")};
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_state *c[2];
    struct kt_looptree *lt;
    struct kt_buf tree;
    char err[512];
    int i, skipped;

    (void)state;
    assert_int_equal(kt_op_batch_matmul(&d, 2, 197, 64, 197, 0), KT_OK);
    assert_int_equal(kt_op_build(&d, &dag, err, sizeof(err)), KT_OK);
    kt_buf_init(&tree);
    for (i = 0; i < 2; i++) {
        c[i] = replay(dag, scheds[i]);
        assert_int_equal(kt_lower(c[i], &lt, err, sizeof(err)), KT_OK);
        kt_buf_reset(&tree);
        kt_looptree_print(lt, &tree);
        if (i == 0 && strstr(tree.p, "B_pack") != NULL)
            fail_msg("B copied whole per head, not dropped:\n%s", tree.p);
        if (i == 0 && strstr(tree.p, "* B[1*b0_l1, 1*k1_l7") == NULL)
            fail_msg("the tile does not read B in place:\n%s", tree.p);
        if (i == 1 && strstr(tree.p, "alloc B_pack[2, 1, 197, 32]") == NULL)
            fail_msg("B's 32-column panel not packed:\n%s", tree.p);
        kt_looptree_free(lt);
    }
    kt_buf_free(&tree);
    assert_int_equal(ktt_check_many(dag, c, 2, 19, &skipped), 0);
    assert_int_equal(skipped, 0);
    kt_state_free(c[0]);
    kt_state_free(c[1]);
    kt_dag_free(dag);
}

/* Packed weights whose rows vectors do not fill are laid out in rows
 * padded to whole vectors (40 -> 48 on AVX-512), the module's
 * kt_pack_elems counts them so, and a register tile that reads only such
 * rows and a local accumulator runs 16-lane vectors into the padding (3
 * per row, not 5 of 8 lanes); the epilogue reading the bias and the
 * output, arguments with 80-float rows, keeps 8 lanes.  The kernel matches the
 * interpreter. */
static void
test_pack_padded_rows(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_state *c[1];
    struct kt_looptree *lt;
    const struct kt_lbuf *b;
    struct kt_codegen_opts o;
    struct kt_buf src;
    char err[512], want[64];
    int skipped;

    (void)state;
    assert_int_equal(kt_op_dense(&d, 8, 80, 64, 1), KT_OK);
    assert_int_equal(kt_op_build(&d, &dag, err, sizeof(err)), KT_OK);
    c[0] = replay(dag, DENSE_ROWS40_SCHEDULE);
    assert_int_equal(kt_lower(c[0], &lt, err, sizeof(err)), KT_OK);
    b = find_buf(lt, "W_pack");
    assert_int_equal(b->scope, KT_BUF_PACKED);
    assert_int_equal(b->shape[b->ndim - 1], 40);
    assert_int_equal(kt_lbuf_elems(b), 80 * 64);
    assert_int_equal(kt_lbuf_stored_elems(b, 64), 80 * 64 / 40 * 48);
    assert_int_equal(kt_lbuf_stored_elems(b, 32), 80 * 64);
    kt_looptree_free(lt);

    kt_codegen_default_opts(&o);
    kt_buf_init(&src);
    assert_int_equal(kt_codegen_module(c[0], dag, &o, &src, err, sizeof(err)),
                     KT_OK);
    snprintf(want, sizeof(want), "const long long kt_pack_elems = %dLL;",
             o.vector_bytes >= 64 ? 80 * 64 / 40 * 48 : 80 * 64);
    assert_non_null(strstr(src.p, want));
    if (o.vector_bytes >= 64) {
        assert_non_null(strstr(src.p, "kt_ld16(&t_W_pack["));
        assert_null(strstr(src.p, "kt_ld8(&t_W_pack["));
        assert_non_null(strstr(src.p, "kt_ld8(&t_B["));
    }
    kt_buf_free(&src);
    assert_int_equal(ktt_check_many(dag, c, 1, 17, &skipped), 0);
    assert_int_equal(skipped, 0);
    kt_state_free(c[0]);
    kt_dag_free(dag);
}

/* A conv 8 -> 32 channels, 14x14, 3x3 pad 1 (+bias+relu) whose register
 * tile is 7 output columns x 32 output channels, the channels vectorized
 * over a layout rewrite of W ([f0][c][r][s][32]), the reduction c r s
 * outside the tile; T computed per output row inside O (CONV_FUSED) or
 * at root (CONV_ROOT). */
#define CONV_CV_O                                                              \
    "[\"CHR\",1,1],[\"SP\",3,1,[32]],[\"RE\",3,[0,1,3,2,4]],"                  \
    "[\"FU\",3,0,3],[\"SP\",2,3,[7]],[\"SP\",2,1,[32]],"                       \
    "[\"RE\",2,[0,1,3,4,6,7,8,5,2]],"
#define CONV_CV_ANN                                                            \
    "[\"CA\",1,2,3],[\"LR\",1],[\"AN\",0,3,\"vectorize\"],"                    \
    "[\"AN\",2,8,\"vectorize\"],[\"AN\",2,7,\"unroll\"],"                      \
    "[\"AN\",3,0,\"parallel\"],[\"AN\",3,2,\"vectorize\"]"
static const char conv_cv_fused[] = "{\"v\":1,\"steps\":[" CONV_CV_O
                                    "[\"CA\",2,3,0]," CONV_CV_ANN "]}";
static const char conv_cv_root[] = "{\"v\":1,\"steps\":[" CONV_CV_O CONV_CV_ANN
                                   "]}";

/* Channel-vectorized conv register tiles: attached (a local tile) or at
 * root (T an intermediate on the heap), the accumulator buffer is laid
 * out channels last, so the 14 accumulators are vector loads and stores
 * around the whole c r s reduction, never read and written lane by lane
 * per FMA.  Both match the interpreter. */
static void
test_pack_channel_vector_conv(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_state *c[2];
    struct kt_looptree *lt;
    const struct kt_lbuf *b;
    struct kt_codegen_opts o;
    struct kt_buf src;
    char err[512];
    int skipped, k;

    (void)state;
    assert_int_equal(ktt_conv_def(&d, 8, 14, 32, 3, 1, 1, 1, 1,
                                  KT_EPI_BIAS | KT_EPI_RELU),
                     KT_OK);
    assert_int_equal(kt_op_build(&d, &dag, err, sizeof(err)), KT_OK);
    c[0] = replay(dag, conv_cv_fused);
    c[1] = replay(dag, conv_cv_root);
    kt_codegen_default_opts(&o);
    o.vector_bytes = 64;
    for (k = 0; k < 2; k++) {
        assert_int_equal(kt_lower(c[k], &lt, err, sizeof(err)), KT_OK);
        kt_buf_init(&src);
        assert_int_equal(kt_codegen_function(lt, &o, "k", &src, err,
                                             sizeof(err)),
                         KT_OK);
        /* T[1, 32, 1, 14] stored [1][1][14][32]; at root T[1, 32, 14,
         * 14] stored [1][14][14][32] */
        b = find_buf(lt, "T");
        assert_int_equal(b->scope, k == 0 ? KT_BUF_LOCAL : KT_BUF_HEAP);
        assert_int_equal(b->shape[3], 32);
        assert_int_equal(b->shape[2], 14);
        /* whole-vector accumulators, started at 0 in registers (the
         * init folded) and stored back contiguously */
        assert_non_null(strstr(src.p, "kt_v16 r13 = kt_bc16(0.0f);"));
        assert_non_null(strstr(src.p, "kt_st16(&t_T["));
        assert_null(strstr(src.p, "+= v_[l_]"));
        kt_buf_free(&src);
        kt_looptree_free(lt);
    }
    assert_int_equal(ktt_check_many(dag, c, 2, 13, &skipped), 0);
    assert_int_equal(skipped, 0);
    kt_state_free(c[0]);
    kt_state_free(c[1]);
    kt_dag_free(dag);
}

static void
test_pack_features(void **state)
{
    struct kt_dag *dag = ktt_dense(16, 64, 128);
    const char *json[2] = {dense_in_kernel, dense_rewritten};
    int k;

    (void)state;
    for (k = 0; k < 2; k++) {
        struct kt_state *st = replay(dag, json[k]);
        struct kt_looptree *lt;
        float *rows;
        char err[256];
        int n, i, prepacked = 0;
        assert_int_equal(kt_lower(st, &lt, err, sizeof(err)), KT_OK);
        assert_int_equal(kt_features_extract(lt, &rows, &n, err, sizeof(err)),
                         0);
        for (i = 0; i < n; i++)
            if (rows[(size_t)i * KT_FEATURE_LEN + KT_F_PREPACKED] == 1.0f) {
                prepacked++;
                assert_true(
                    rows[(size_t)i * KT_FEATURE_LEN + KT_F_PREPACKED_BYTES] >
                    10.0f);
            }
        /* rewritten: only the update reads the packed tiles (the copy
         * runs in the pack routine, which is not timed nor scored) */
        assert_int_equal(prepacked, k == 1 ? 1 : 0);
        assert_int_equal(n, k == 1 ? 2 : 3);
        free(rows);
        kt_looptree_free(lt);
        kt_state_free(st);
    }
    kt_dag_free(dag);
}

/* Forks the worker's runner child on so, as the worker does; returns its
 * result message (caller frees with kt_msg_free). */
static void
run_child(const char *so, const char *dir, struct kt_msg *m)
{
    struct kt_run_req r;
    char buf[8192], err[256];
    int pfd[2], status;
    size_t used, got = 0;
    ssize_t n;
    pid_t p;

    memset(&r, 0, sizeof(r));
    r.so_path = so;
    r.cache_dir = dir;
    r.number = 1;
    r.repeat = 2;
    r.min_repeat_ms = 1;
    r.threads = 1;
    r.seed = 5;
    r.tol = 1e-4;
    assert_int_equal(pipe(pfd), 0);
    p = fork();
    if (p == 0) {
        struct kt_msg res;
        struct kt_buf b;
        close(pfd[0]);
        kt_run_child(&r, &res);
        kt_buf_init(&b);
        kt_msg_encode(&res, &b);
        (void)!write(pfd[1], b.p, b.len);
        _exit(0);
    }
    close(pfd[1]);
    while ((n = read(pfd[0], buf + got, sizeof(buf) - got)) > 0)
        got += (size_t)n;
    close(pfd[0]);
    assert_int_equal(waitpid(p, &status, 0), p);
    assert_int_equal(kt_wire_take((unsigned char *)buf, got, &used, m, err,
                                  sizeof(err)),
                     1);
}

/* The runner packs the weights with the module's kt_pack once, checks the
 * kernel (reading the packed tiles) against the reference on the original
 * layout and reports the pack time apart. */
static void
test_pack_runner_calls_pack(void **state)
{
    struct kt_dag *dag = ktt_dense(16, 64, 128);
    struct kt_state *st = replay(dag, dense_rewritten);
    struct kt_codegen_opts o;
    struct kt_buf src;
    char dir[] = "/tmp/kt-test-pack.XXXXXX", path[128], so[128], cmd[400],
         err[512];
    struct kt_msg m;
    FILE *f;

    (void)state;
    assert_non_null(mkdtemp(dir));
    kt_codegen_default_opts(&o);
    kt_buf_init(&src);
    assert_int_equal(kt_codegen_module(st, dag, &o, &src, err, sizeof(err)),
                     KT_OK);
    snprintf(path, sizeof(path), "%s/k.c", dir);
    snprintf(so, sizeof(so), "%s/k.so", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(src.p, f);
    fclose(f);
    /* the flags the other tests build kernels with (make valgrind: AVX2) */
    snprintf(cmd, sizeof(cmd), "cc %s -shared -fPIC -o %s %s",
             getenv("KT_TEST_CFLAGS") != NULL ? getenv("KT_TEST_CFLAGS")
                                              : "-O2 -march=native -fopenmp",
             so, path);
    assert_int_equal(system(cmd), 0);
    run_child(so, dir, &m);
    if (strcmp(kt_msg_get(&m, "err_no"), "0") != 0)
        fail_msg("runner: %s", kt_msg_get(&m, "err_text"));
    assert_non_null(kt_msg_get(&m, "pack_s"));
    assert_true(atof(kt_msg_get(&m, "rel_err")) < 1e-5);
    kt_msg_free(&m);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    kt_buf_free(&src);
    kt_state_free(st);
    kt_dag_free(dag);
}

/* The sketches read the dense layer's weights through a pack, and the
 * first batch holds schedules without a pack, with one in the kernel and
 * with a layout rewrite. */
static void
test_pack_search_reaches_modes(void **state)
{
    struct kt_dag *dag = ktt_dense(64, 256, 256);
    struct kt_search_opts o;
    struct kt_search *s;
    struct kt_search_batch b;
    char err[256];
    int i, j, seen[3] = {0, 0, 0};

    (void)state;
    kt_search_opts_default(&o);
    assert_int_equal(kt_search_new(&s, dag, &o, err, sizeof(err)), KT_OK);
    for (i = 0; i < kt_search_nsketches(s); i++)
        assert_non_null(strstr(kt_search_sketch_desc(s, i), "W_pack"));
    assert_int_equal(kt_search_next_batch(s, NULL, NULL, 0, 64, &b, NULL, err,
                                          sizeof(err)),
                     KT_OK);
    assert_true(b.n >= 32);
    for (i = 0; i < b.n; i++) {
        int ci = 0, lr = 0;
        for (j = 0; j < b.v[i].nsteps; j++) {
            ci += b.v[i].steps[j].kind == KT_STEP_COMPUTE_INLINE;
            lr += b.v[i].steps[j].kind == KT_STEP_LAYOUT_REWRITE;
        }
        seen[lr ? 2 : ci ? 0 : 1]++;
    }
    if (seen[0] == 0 || seen[1] == 0 || seen[2] == 0)
        fail_msg("of %d samples: %d no pack, %d in the kernel, %d rewritten",
                 b.n, seen[0], seen[1], seen[2]);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* The first batch of n samples of a default search over d's DAG. */
static void
first_batch(struct kt_op_def *d, struct kt_dag **dag, struct kt_search **s,
            struct kt_search_batch *b, int n)
{
    struct kt_search_opts o;
    char err[256];

    assert_int_equal(kt_op_build(d, dag, err, sizeof(err)), KT_OK);
    kt_search_opts_default(&o);
    assert_int_equal(kt_search_new(s, *dag, &o, err, sizeof(err)), KT_OK);
    assert_int_equal(kt_search_next_batch(*s, NULL, NULL, 0, n, b, NULL, err,
                                          sizeof(err)),
                     KT_OK);
}

/* A GEMM's A[i, k] is broadcast from rows read in order along k: most
 * samples read it in place (the A_pack stage, 1 after B_pack at 0, is
 * inlined back), and the in-kernel pack stays reachable. */
static void
test_pack_search_reads_rows_in_place(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_search *s;
    struct kt_search_batch b;
    int i, j, inlined = 0;

    (void)state;
    kt_op_matmul(&d, 256, 256, 256);
    first_batch(&d, &dag, &s, &b, 128);
    assert_true(b.n >= 64);
    for (i = 0; i < b.n; i++)
        for (j = 0; j < b.v[i].nsteps; j++)
            inlined += b.v[i].steps[j].kind == KT_STEP_COMPUTE_INLINE &&
                       b.v[i].steps[j].stage == 1;
    if (inlined * 3 < b.n * 2 || inlined == b.n)
        fail_msg("A read in place in %d of %d samples", inlined, b.n);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* The attention batch matmul reads K^T (B[b, j, k]) along its vectorized
 * axis j with a stride: its multi-level tilings keep the B_pack stage
 * (0), a transposing copy, in all samples but those with no place to
 * attach it; inlined, each B vector was gathered lane by lane and the
 * search spent its trials there.  The rfactor sketch (order SSRSR, k
 * vectorized) reads B along k and may inline it. */
static void
test_pack_search_packs_strided_vector_operand(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_search *s;
    struct kt_search_batch b;
    int i, j, tiled = 0, inlined = 0;

    (void)state;
    kt_op_batch_matmul(&d, 12, 128, 128, 64, 1);
    first_batch(&d, &dag, &s, &b, 128);
    for (i = 0; i < b.n; i++) {
        int mlt = 0, b_inlined = 0;
        for (j = 0; j < b.v[i].nsteps; j++) {
            const struct kt_step *st = &b.v[i].steps[j];
            /* SSRSRS: 14 loops; SRSRS: 11 with k0 (9) fourth */
            if (st->kind == KT_STEP_REORDER)
                mlt = st->n == 14 || (st->n == 11 && st->v[3] == 9);
            b_inlined |= st->kind == KT_STEP_COMPUTE_INLINE && st->stage == 0;
        }
        tiled += mlt;
        inlined += mlt && b_inlined;
    }
    if (tiled < b.n / 4 || inlined * 4 > tiled)
        fail_msg("B inlined in %d of %d tiled samples (%d in all)", inlined,
                 tiled, b.n);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

/* B of a 40 x 250 x 120 product, its 250 columns padded to 256: the copy
 * of a zero-padded operand was always kept (in place, every read in the
 * register tile checked its bounds); its checks now fail in the last
 * column chunk only (ir/codegen_peel.c), and half the samples read it in
 * place, within the code-size bound, computing what the reference
 * does. */
static void
test_pack_search_reads_padded_b_in_place(void **state)
{
    struct kt_op_def d;
    struct kt_dag *dag = NULL;
    struct kt_search *s;
    struct kt_search_batch b;
    struct kt_state *in_place[4];
    char err[256];
    int i, j, n_in_place = 0, checked = 0, skipped;

    (void)state;
    kt_op_matmul(&d, 40, 250, 120);
    first_batch(&d, &dag, &s, &b, 128);
    assert_true(b.n >= 64);
    for (i = 0; i < b.n; i++) {
        struct kt_state *st = NULL;
        struct kt_looptree *lt = NULL;
        int packed = 0;
        if (kt_state_replay(dag, b.v[i].steps, b.v[i].nsteps, &st, err,
                            sizeof(err)) != KT_OK ||
            kt_lower(st, &lt, err, sizeof(err)) != KT_OK)
            fail_msg("sample %d: %s", i, err);
        for (j = 0; j < lt->nbufs; j++)
            packed |= strcmp(lt->bufs[j].name, "B_pad_pack") == 0;
        kt_looptree_free(lt);
        n_in_place += !packed;
        if (!packed && checked < 4)
            in_place[checked++] = st;
        else
            kt_state_free(st);
    }
    if (n_in_place < b.n / 4 || n_in_place > b.n * 3 / 4)
        fail_msg("B read in place in %d of %d samples", n_in_place, b.n);
    assert_int_equal(ktt_check_many(dag, in_place, checked, 17, &skipped), 0);
    assert_int_equal(skipped, 0);
    for (i = 0; i < checked; i++)
        kt_state_free(in_place[i]);
    kt_search_batch_free(&b);
    kt_search_free(s);
    kt_dag_free(dag);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_json_round_trip),
        cmocka_unit_test(test_pack_validation),
        cmocka_unit_test(test_pack_lowering_shapes),
        cmocka_unit_test(test_pack_kernels_match),
        cmocka_unit_test(test_pack_rewrite_folds_tile_dims),
        cmocka_unit_test(test_pack_routine_allocates_nothing),
        cmocka_unit_test(test_pack_transposed_copies),
        cmocka_unit_test(test_pack_padded_rows),
        cmocka_unit_test(test_pack_identity_copy_elided),
        cmocka_unit_test(test_pack_channel_vector_conv),
        cmocka_unit_test(test_pack_features),
        cmocka_unit_test(test_pack_runner_calls_pack),
        cmocka_unit_test(test_pack_search_reaches_modes),
        cmocka_unit_test(test_pack_search_reads_rows_in_place),
        cmocka_unit_test(test_pack_search_packs_strided_vector_operand),
        cmocka_unit_test(test_pack_search_reads_padded_b_in_place),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
