/* test_task_extract.c - task extraction on the bundled models (task counts
 * and FLOPs checked against the layer shapes and the literature) and on
 * small configs for each fusion and dedup rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "scheduler/scheduler.h"

static struct kt_model_conf *
load(const char *path)
{
    struct kt_model_conf *m = NULL;
    char err[1024];
    int rc = kt_model_conf_load(path, &m, err, sizeof(err));
    if (rc != 0)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    return m;
}

static struct kt_model_conf *
parse(const char *text)
{
    struct kt_model_conf *m = NULL;
    char err[1024];
    int rc = kt_model_conf_parse("inline.json", text, &m, err, sizeof(err));
    if (rc != 0)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    return m;
}

static void
extract(const struct kt_model_conf *m, struct kt_tasks *t)
{
    char err[1024];
    int rc = kt_tasks_extract(m, t, err, sizeof(err));
    if (rc != 0)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
}

/* Multiply-adds of the conv2d, dense and batch_matmul layers, from the
 * config alone (independent of the IR). */
static double
config_macs(const struct kt_model_conf *m)
{
    double macs = 0;
    int i;
    for (i = 0; i < m->nlayers; i++) {
        const struct kt_layer *l = &m->layers[i];
        double r = (double)l->repeat;
        if (l->op == KT_LAYER_CONV2D) {
            int64_t oh = (l->H + 2 * l->pad[0] - l->R) / l->stride[0] + 1;
            int64_t ow = (l->W + 2 * l->pad[1] - l->S) / l->stride[1] + 1;
            macs += r * (double)(l->N * l->K * oh * ow * (l->C / l->groups) *
                                 l->R * l->S);
        } else if (l->op == KT_LAYER_DENSE) {
            macs += r * (double)(l->M * l->N * l->K);
        } else if (l->op == KT_LAYER_BATCH_MATMUL) {
            macs += r * (double)(l->B * l->M * l->N * l->K);
        }
    }
    return macs;
}

/* FLOPs of the tasks that came from conv2d/dense/batch_matmul layers. */
static double
task_flops_of(const struct kt_model_conf *m, const struct kt_tasks *t)
{
    double f = 0;
    int i;
    for (i = 0; i < t->n; i++) {
        int op;
        if (t->v[i].first_layer < 0)
            continue;
        op = m->layers[t->v[i].first_layer].op;
        if (op == KT_LAYER_CONV2D || op == KT_LAYER_DENSE ||
            op == KT_LAYER_BATCH_MATMUL)
            f += t->v[i].weight * t->v[i].flops;
    }
    return f;
}

static double
sum_weights(const struct kt_tasks *t)
{
    double w = 0;
    int i;
    for (i = 0; i < t->n; i++)
        w += t->v[i].weight;
    return w;
}

static void
test_task_extract_resnet50(void **state)
{
    struct kt_model_conf *m = load("models/resnet50.json");
    struct kt_tasks t;
    double macs, f;
    int i, j, grouped = 0;
    (void)state;
    extract(m, &t);
    /* 88 layers: 53 convs, a maxpool, 16 adds, 16 relus, the global pool
     * and the classifier; 34 distinct workloads (no fusion applies: the
     * relus follow the residual adds). */
    assert_int_equal(m->nlayers, 88);
    assert_int_equal(t.n, 34);
    assert_true(sum_weights(&t) == 88.0);
    /* torchvision reports 4.09 GMACs for ResNet-50 (v1.5) at 224x224. */
    macs = config_macs(m);
    assert_true(macs > 4.08e9 && macs < 4.10e9);
    /* The DAGs count a multiply-add as 2 plus the bias/relu epilogues. */
    f = task_flops_of(m, &t);
    print_message("resnet50: %d tasks, conv+dense %.4f GMACs, task FLOPs "
                  "%.4f G (conv+dense), %.4f G (all)\n",
                  t.n, macs / 1e9, f / 1e9, kt_tasks_total_flops(&t) / 1e9);
    assert_true(f >= 2 * macs && f < 2 * macs * 1.005);
    assert_true(kt_tasks_total_flops(&t) > f);
    for (i = 0; i < t.n; i++)
        for (j = i + 1; j < t.n; j++)
            if (t.v[i].tag[0] && strcmp(t.v[i].tag, t.v[j].tag) == 0)
                grouped++;
    assert_true(grouped > 0);
    kt_tasks_free(&t);
    kt_model_conf_free(m);
}

static void
test_task_extract_mobilenet_v2(void **state)
{
    struct kt_model_conf *m = load("models/mobilenet_v2.json");
    struct kt_tasks t;
    double macs;
    int i, dw = 0;
    (void)state;
    extract(m, &t);
    assert_int_equal(t.n, 37);
    /* Sandler et al. 2018, Table 3: 300M multiply-adds. */
    macs = config_macs(m);
    print_message("mobilenet_v2: %d tasks, %.4f GMACs, task FLOPs %.4f G\n",
                  t.n, macs / 1e9, kt_tasks_total_flops(&t) / 1e9);
    assert_true(macs > 0.295e9 && macs < 0.305e9);
    assert_true(task_flops_of(m, &t) >= 2 * macs);
    for (i = 0; i < t.n; i++)
        if (strstr(t.v[i].tag, "_dw_") != NULL)
            dw++;
    assert_true(dw >= 8);
    kt_tasks_free(&t);
    kt_model_conf_free(m);
}

static void
test_task_extract_bert(void **state)
{
    struct kt_model_conf *m = load("models/bert_base_layer.json");
    struct kt_tasks t;
    double macs;
    (void)state;
    extract(m, &t);
    /* QKV + output dense 768->768 (x4), scores, softmax, context,
     * residual add (x2), FFN up, FFN down. */
    assert_int_equal(t.n, 7);
    assert_true(t.v[0].weight == 4.0);
    assert_non_null(strstr(t.v[0].name, "dense_128x768x768_bias"));
    macs = config_macs(m);
    /* 4 x 128x768x768 + 2 x 128x768x3072 + 2 x 12x128x128x64. */
    assert_true(macs == 931135488.0);
    assert_true(task_flops_of(m, &t) >= 2 * macs);
    kt_tasks_free(&t);
    kt_model_conf_free(m);
}

static void
test_task_extract_tiny(void **state)
{
    struct kt_model_conf *m = load("models/tiny.json");
    struct kt_tasks t;
    (void)state;
    extract(m, &t);
    /* conv+bias+relu (relu fused), conv+bias+relu x2, maxpool,
     * dense+bias (bias add fused), the explicit gemm. */
    assert_int_equal(t.n, 5);
    assert_non_null(strstr(t.v[0].name, "_bias_relu"));
    assert_true(t.v[1].weight == 2.0);
    assert_non_null(strstr(t.v[2].name, "pool"));
    assert_non_null(strstr(t.v[3].name, "dense"));
    assert_non_null(strstr(t.v[3].name, "_bias"));
    assert_string_equal(t.v[4].name, "gemm32");
    assert_int_equal(t.v[4].first_layer, -1);
    assert_true(t.v[4].flops == 2.0 * 32 * 32 * 32);
    kt_tasks_free(&t);
    kt_model_conf_free(m);
}

#define CONV                                                                   \
    "{\"op\": \"conv2d\", \"C\": 4, \"H\": 8, \"W\": 8, \"K\": 8, "            \
    "\"R\": 3, \"S\": 3, \"pad\": 1"

static void
test_task_extract_fusion_rules(void **state)
{
    static const struct {
        const char *layers;
        int ntasks;
        const char *first_name_has;
    } cases[] = {
        /* bias add then relu: both fold. */
        {CONV "}, {\"op\": \"add\", \"operand\": \"bias\", \"shape\": "
              "[1, 8, 8, 8]}, {\"op\": \"relu\", \"shape\": [1, 8, 8, 8]}",
         1, "_bias_relu"},
        /* relu on a conv that already has one: stays separate. */
        {CONV ", \"epilogue\": [\"relu\"]}, {\"op\": \"relu\", \"shape\": "
              "[1, 8, 8, 8]}",
         2, "_relu"},
        /* different shape: not fused. */
        {CONV "}, {\"op\": \"relu\", \"shape\": [1, 8, 4, 4]}", 2, NULL},
        /* bias after relu cannot be expressed: the add stays. */
        {CONV "}, {\"op\": \"relu\", \"shape\": [1, 8, 8, 8]}, {\"op\": "
              "\"add\", \"operand\": \"bias\", \"shape\": [1, 8, 8, 8]}",
         2, "_relu"},
        /* a residual (tensor) add is not a bias. */
        {"{\"op\": \"dense\", \"N\": 8, \"K\": 8}, {\"op\": \"add\", "
         "\"shape\": [1, 8]}",
         2, NULL},
        /* only the last copy of a repeated conv is followed by the relu. */
        {CONV ", \"repeat\": 3}, {\"op\": \"relu\", \"shape\": [1, 8, 8, "
              "8]}",
         2, NULL},
    };
    size_t c;
    (void)state;
    for (c = 0; c < KT_ARRAY_LEN(cases); c++) {
        char text[1024];
        struct kt_model_conf *m;
        struct kt_tasks t;
        snprintf(text, sizeof(text), "{\"layers\": [%s]}", cases[c].layers);
        m = parse(text);
        extract(m, &t);
        if (t.n != cases[c].ntasks)
            print_error("case %zu: %d tasks\n", c, t.n);
        assert_int_equal(t.n, cases[c].ntasks);
        if (cases[c].first_name_has != NULL)
            assert_non_null(strstr(t.v[0].name, cases[c].first_name_has));
        if (c == 5) {
            assert_true(t.v[0].weight == 2.0);
            assert_non_null(strstr(t.v[1].name, "_relu"));
        }
        kt_tasks_free(&t);
        kt_model_conf_free(m);
    }
}

static void
test_task_extract_explicit_merges(void **state)
{
    struct kt_model_conf *m;
    struct kt_tasks t;
    (void)state;
    m = parse("{\"layers\": [{\"op\": \"matmul\", \"M\": 16, \"N\": 16, "
              "\"K\": 16}], \"tasks\": [{\"name\": \"mm\", \"compute\": "
              "\"O[i,j] += A[i,k] * B[k,j]\", \"shapes\": {\"A\": [16, 16], "
              "\"B\": [16, 16]}, \"weight\": 2.5, \"group\": \"g\"}, "
              "{\"name\": \"mm2\", \"compute\": [\"O[i,j] += A[i,k] * "
              "B[k,j]\"], \"shapes\": {\"A\": [16, 8], \"B\": [8, 16]}}]}");
    extract(m, &t);
    assert_int_equal(t.n, 2);
    assert_true(t.v[0].weight == 3.5);
    assert_string_equal(t.v[1].name, "mm2");
    assert_string_equal(t.v[1].tag, "");
    kt_tasks_free(&t);
    kt_model_conf_free(m);
}

/* The same convolution with and without bias + relu: two tasks, one
 * similarity group (the epilogue is not in the tag); another stride is
 * another group. */
static void
test_task_extract_epilogue_same_group(void **state)
{
    struct kt_model_conf *m;
    struct kt_tasks t;
    (void)state;
    m = parse("{\"layers\": [{\"op\": \"conv2d\", \"C\": 32, \"H\": 28, "
              "\"W\": 28, \"K\": 32, \"R\": 3, \"S\": 3, \"pad\": 1, "
              "\"epilogue\": [\"bias\", \"relu\"]}, {\"op\": \"conv2d\", "
              "\"C\": 32, \"H\": 28, \"W\": 28, \"K\": 32, \"R\": 3, "
              "\"S\": 3, \"pad\": 1}, {\"op\": \"conv2d\", \"C\": 32, "
              "\"H\": 56, \"W\": 56, \"K\": 32, \"R\": 3, \"S\": 3, "
              "\"pad\": 1, \"stride\": 2}]}");
    extract(m, &t);
    assert_int_equal(t.n, 3);
    assert_string_not_equal(t.v[0].dag->key, t.v[1].dag->key);
    assert_string_equal(t.v[0].tag, t.v[1].tag);
    assert_string_not_equal(t.v[0].tag, t.v[2].tag);
    kt_tasks_free(&t);
    kt_model_conf_free(m);
}

/* "winograd": true puts a 3x3 conv worth it in Winograd form; a 3-channel
 * one and a stride-2 one stay direct, as does everything by default. */
static void
test_task_extract_winograd(void **state)
{
    static const char *const layers =
        "\"layers\": [{\"op\": \"conv2d\", \"C\": 64, \"H\": 56, "
        "\"W\": 56, \"K\": 64, \"R\": 3, \"S\": 3, \"pad\": 1, "
        "\"epilogue\": [\"bias\", \"relu\"]}, {\"op\": \"conv2d\", "
        "\"C\": 3, \"H\": 56, \"W\": 56, \"K\": 16, \"R\": 3, "
        "\"S\": 3, \"pad\": 1}, {\"op\": \"conv2d\", \"C\": 64, "
        "\"H\": 56, \"W\": 56, \"K\": 64, \"R\": 3, \"S\": 3, "
        "\"pad\": 1, \"stride\": 2}]";
    struct kt_model_conf *m;
    struct kt_tasks t;
    char text[1024];
    int on;
    (void)state;
    for (on = 0; on < 2; on++) {
        snprintf(text, sizeof(text), "{%s%s}", layers,
                 on ? ", \"winograd\": true" : "");
        m = parse(text);
        extract(m, &t);
        assert_int_equal(t.n, 3);
        assert_int_equal(strstr(t.v[0].name, "_bias_relu_wino4") != NULL, on);
        assert_null(strstr(t.v[1].name, "wino"));
        assert_null(strstr(t.v[2].name, "wino"));
        kt_tasks_free(&t);
        kt_model_conf_free(m);
    }
}

static void
test_task_extract_errors(void **state)
{
    struct kt_model_conf *m;
    struct kt_tasks t;
    char err[1024];
    (void)state;
    m = parse("{\"layers\": [{\"op\": \"relu\", \"shape\": [4]}],\n"
              " \"tasks\": [{\"name\": \"bad\", \"compute\": \"O[i] = "
              "A[i] +\", \"shapes\": {\"A\": [4]}}]}");
    assert_true(kt_tasks_extract(m, &t, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "inline.json: tasks[0] (bad): compute: "));
    assert_int_equal(t.n, 0);
    kt_tasks_free(&t);
    kt_model_conf_free(m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_task_extract_resnet50),
        cmocka_unit_test(test_task_extract_mobilenet_v2),
        cmocka_unit_test(test_task_extract_bert),
        cmocka_unit_test(test_task_extract_tiny),
        cmocka_unit_test(test_task_extract_fusion_rules),
        cmocka_unit_test(test_task_extract_explicit_merges),
        cmocka_unit_test(test_task_extract_epilogue_same_group),
        cmocka_unit_test(test_task_extract_winograd),
        cmocka_unit_test(test_task_extract_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
