/* test_winograd.c - Winograd convolutions along the rows (ir/winograd.c):
 * the Cook-Toom matrices compute the correlation they stand for, the row
 * tile a convolution gets, parameter errors, and the definition
 * interpreted with real transforms against a direct convolution. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "tests/support/ktt.h"

static double
rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* y = AT [(G g) . (BT d)] against y_i = sum_j g_j d_(i+j), every m and r
 * whose alpha fits. */
static void
test_winograd_matrices_correlate(void **state)
{
    struct kt_winograd w;
    uint64_t seed = 7;
    int m, r, i, j, t, trial, checked = 0;

    (void)state;
    for (m = 1; m <= 7; m++)
        for (r = 1; r <= 7; r++) {
            if (m + r - 1 > KT_WINO_MAX_ALPHA) {
                assert_int_equal(kt_winograd_matrices(m, r, &w), KT_EINVAL);
                continue;
            }
            assert_int_equal(kt_winograd_matrices(m, r, &w), KT_OK);
            assert_int_equal(w.alpha, m + r - 1);
            for (trial = 0; trial < 4; trial++) {
                double d[KT_WINO_MAX_ALPHA], g[KT_WINO_MAX_ALPHA];
                double gg[KT_WINO_MAX_ALPHA], bd[KT_WINO_MAX_ALPHA];
                for (j = 0; j < w.alpha; j++)
                    d[j] = rnd(&seed);
                for (j = 0; j < r; j++)
                    g[j] = rnd(&seed);
                for (t = 0; t < w.alpha; t++) {
                    gg[t] = bd[t] = 0;
                    for (j = 0; j < r; j++)
                        gg[t] += w.g[t][j] * g[j];
                    for (j = 0; j < w.alpha; j++)
                        bd[t] += w.bt[t][j] * d[j];
                }
                for (i = 0; i < m; i++) {
                    double want = 0, got = 0;
                    for (j = 0; j < r; j++)
                        want += g[j] * d[i + j];
                    for (t = 0; t < w.alpha; t++)
                        got += w.at[i][t] * gg[t] * bd[t];
                    if (fabs(got - want) > 1e-9)
                        fail_msg("F(%d,%d) output %d: %g, want %g", m, r, i,
                                 got, want);
                }
            }
            checked++;
        }
    assert_int_equal(checked, 34); /* (m, r) with m + r - 1 <= 8 */
}

/* F(4,3)'s input transform has whole entries, as in the literature: the
 * fractions live in G, applied once to the weights. */
static void
test_winograd_input_transform_is_whole(void **state)
{
    struct kt_winograd w;
    int t, j;

    (void)state;
    assert_int_equal(kt_winograd_matrices(4, 3, &w), KT_OK);
    for (t = 0; t < w.alpha; t++)
        for (j = 0; j < w.alpha; j++)
            assert_true(w.bt[t][j] == nearbyint(w.bt[t][j]));
    assert_true(fabs(w.g[0][0]) < 1.0); /* the scale of row 0 moved to G */
}

#define CONVP(n, c, h, w, k, r, s, sth, stw, p, dw, g, epi)                    \
    (struct kt_conv2d_params)                                                  \
    {                                                                          \
        n, c, h, w, k, r, s, sth, stw, p, p, 1, dw, g, epi                     \
    }

/* The row tile of each convolution and whether it is worth it: ResNet-50's
 * 3x3 convolutions (231 MFLOP each, m 4 and 2) and PP-OCRv4's 96 -> 24 at
 * 80x80 and 40x40 (66 MFLOP) are; the same at 20x20 (16.6 MFLOP), a
 * 3-channel stem and layers with no row tile (7 rows; a stride or groups
 * along the rows) are not. */
static void
test_winograd_tile_and_choice(void **state)
{
    static const struct {
        struct kt_conv2d_params p;
        int tile, chosen;
    } cases[] = {
        {CONVP(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, KT_EPI_BIAS), 4, 4},
        {CONVP(1, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, 1, 0), 2, 2},
        {CONVP(1, 96, 80, 80, 24, 3, 3, 1, 1, 1, 1, 1, 0), 4, 4},
        {CONVP(1, 96, 40, 40, 24, 3, 3, 1, 1, 1, 1, 1, 0), 4, 4},
        {CONVP(1, 96, 20, 20, 24, 3, 3, 1, 1, 1, 1, 1, 0), 4, 0},
        {CONVP(1, 3, 224, 224, 64, 3, 3, 1, 1, 1, 1, 1, 0), 4, 0},
        {CONVP(1, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1, 1, 0), 0, 0},
        {CONVP(1, 64, 16, 16, 64, 3, 3, 2, 1, 1, 1, 1, 0), 0, 0},
        /* a stride across: the rows still tile */
        {CONVP(1, 64, 16, 16, 64, 3, 3, 1, 2, 1, 1, 1, 0), 4, 0},
        {CONVP(1, 64, 16, 16, 64, 3, 3, 1, 1, 1, 1, 2, 0), 0, 0},
        /* one row in the window: nothing to save */
        {CONVP(1, 64, 16, 16, 64, 1, 3, 1, 1, 0, 1, 1, 0), 0, 0},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (kt_winograd_tile(&cases[i].p) != cases[i].tile ||
            kt_winograd_choose(&cases[i].p) != cases[i].chosen)
            fail_msg("case %zu: tile %d, chosen %d; want %d, %d", i,
                     kt_winograd_tile(&cases[i].p),
                     kt_winograd_choose(&cases[i].p), cases[i].tile,
                     cases[i].chosen);
    }
}

/* Each error names what is wrong (NULL: the direct form's own check). */
static void
test_winograd_bad_params(void **state)
{
    static const struct {
        struct kt_conv2d_params p;
        int m;
        const char *says;
    } cases[] = {
        {CONVP(1, 8, 8, 8, 8, 3, 3, 2, 1, 1, 1, 1, 0), 2,
         "stride and dilation 1 along the rows"},
        {CONVP(1, 8, 6, 8, 8, 3, 3, 1, 1, 1, 1, 1, 0), 4,
         "divides the 6 output rows"},
        {CONVP(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 1, 2, 0), 2, "needs one group"},
        {CONVP(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 1, 1, 0), 8, "(m=8 R=3)"},
        {CONVP(1, 0, 8, 8, 8, 3, 3, 1, 1, 1, 1, 1, 0), 2, NULL},
    };
    struct kt_op_def d;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(kt_op_conv2d_winograd(&d, &cases[i].p, cases[i].m),
                         KT_EINVAL);
        assert_string_equal(d.name, "invalid");
        if (cases[i].says != NULL && strstr(d.text, cases[i].says) == NULL)
            fail_msg("case %zu: '%s' does not say '%s'", i, d.text,
                     cases[i].says);
    }
}

/* The definition interpreted with U = G W and the real BT and AT gives the
 * direct convolution. */
static void
check_against_naive(const struct kt_conv2d_params *p, int m)
{
    struct kt_winograd w;
    struct kt_op_def od;
    struct kt_dag *d = NULL;
    struct ktt_bufs b;
    float *want, *weights;
    char err[256] = "";
    int64_t n, e, i, j;
    int o, u, bt, at, bi;

    assert_int_equal(kt_op_conv2d_winograd(&od, p, m), KT_OK);
    if (kt_op_build(&od, &d, err, sizeof(err)) != KT_OK)
        fail_msg("%s: %s\n%s", od.name, err, od.text);
    assert_non_null(strstr(od.name, m == 4 ? "_wino4" : "_wino2"));
    assert_int_equal(kt_winograd_matrices(m, (int)p->R, &w), KT_OK);
    ktt_bufs_init(&b, d, 3);
    u = kt_dag_find_tensor(d, "U");
    bt = kt_dag_find_tensor(d, "BT");
    at = kt_dag_find_tensor(d, "AT");
    bi = kt_dag_find_tensor(d, "B");
    o = kt_dag_find_tensor(d, "O");
    assert_true(u >= 0 && bt >= 0 && at >= 0 && o >= 0);
    assert_true(d->tensors[u].is_const && !d->tensors[bt].is_const);
    n = p->K * p->C * p->R * p->S;
    weights = malloc((size_t)n * sizeof(float));
    assert_non_null(weights);
    for (e = 0; e < n; e++)
        weights[e] = (float)((e * 29) % 13) / 6.0f - 1.0f;
    kt_winograd_weights(&w, p->K, p->C, p->S, weights, b.t[u]);
    for (i = 0; i < w.alpha; i++)
        for (j = 0; j < w.alpha; j++)
            b.t[bt][i * w.alpha + j] = (float)w.bt[i][j];
    for (i = 0; i < m; i++)
        for (j = 0; j < w.alpha; j++)
            b.t[at][i * w.alpha + j] = (float)w.at[i][j];
    kt_dag_interpret(d, b.t);
    n = kt_tensor_elems(&d->tensors[o]);
    want = malloc((size_t)n * sizeof(float));
    assert_non_null(want);
    ktt_naive_conv(p, b.t[kt_dag_find_tensor(d, "I")], weights,
                   bi >= 0 ? b.t[bi] : NULL, want);
    for (e = 0; e < n; e++)
        if (fabsf(want[e] - b.t[o][e]) > 1e-4f * (1.0f + fabsf(want[e])))
            fail_msg("%s: element %lld is %g, want %g", od.name, (long long)e,
                     (double)b.t[o][e], (double)want[e]);
    free(want);
    free(weights);
    ktt_bufs_free(&b);
    kt_dag_free(d);
}

static void
test_winograd_conv_against_naive(void **state)
{
    (void)state;
    check_against_naive(&CONVP(1, 5, 8, 7, 3, 3, 3, 1, 1, 1, 1, 1,
                               KT_EPI_BIAS | KT_EPI_RELU),
                        4);
    check_against_naive(&CONVP(2, 3, 6, 9, 4, 3, 3, 1, 2, 1, 1, 1, KT_EPI_BIAS),
                        2);
    /* dilation across, a 5-row window (alpha 8), no padding */
    check_against_naive(&CONVP(1, 2, 12, 10, 3, 5, 3, 1, 1, 0, 2, 1, 0), 4);
    /* a window of 3 x 1 */
    check_against_naive(&CONVP(1, 4, 8, 5, 2, 3, 1, 1, 1, 1, 1, 1, 0), 2);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_winograd_matrices_correlate),
        cmocka_unit_test(test_winograd_input_transform_is_whole),
        cmocka_unit_test(test_winograd_tile_and_choice),
        cmocka_unit_test(test_winograd_bad_params),
        cmocka_unit_test(test_winograd_conv_against_naive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
