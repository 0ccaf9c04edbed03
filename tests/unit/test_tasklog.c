/* test_tasklog.c - golden output of the task-table log: Ansor's layout
 * (docs/design.md section 3) (table, search, measure, train sections), the extra
 * columns, total_latency.tsv, and the files kt_tasklog_write appends. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "tests/support/ktt.h"

static const struct kt_tasklog_task seed_rows[] = {
    {0, "conv2d_relu", 1, 0.050, 19.95, 58, 0},
    {1, "dense", 2, 0.042, 2.96, 58, 1},
    {16, "conv2d_add", 1, 0.551, 28.89, 116, 12},
};

static const char dash70[] =
    "----------------------------------------------------------------------";

static void
title_line(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s\n------------------------------  [ %s ]\n%s\n", dash70,
             name, dash70);
}

/* trials / budget, percent and ETA: the rate is this run's (resumed trials
 * took no time now); the Ansor layout never prints the line. */
static void
test_tasklog_progress(void **state)
{
    struct kt_tasklog_table t = {3, seed_rows, 9.488, 2999, 10782.4, 16, 0, -1};
    struct kt_progress p;
    struct kt_buf b;
    char d[32];

    (void)state;
    kt_progress_compute(&p, 2999, 20000, 999, 1000.0);
    assert_true(p.percent > 14.99 && p.percent < 15.0);
    assert_true(p.eta_s > 8500.4 && p.eta_s < 8500.6); /* 17001 at 2/s */
    t.budget = 20000;
    t.eta_s = p.eta_s;
    kt_buf_init(&b);
    kt_tasklog_format_table(&b, &t, 0);
    assert_non_null(strstr(b.p, "Next ID: 16\t\nProgress: 2999/20000 trials "
                                "(15.0%), ETA 2h21m\n"));
    kt_buf_reset(&b);
    kt_tasklog_format_table(&b, &t, KT_TASKLOG_ANSOR);
    assert_null(strstr(b.p, "Progress"));
    kt_progress_compute(&p, 999, 20000, 999, 30.0); /* nothing new yet */
    assert_true(p.eta_s < 0);
    kt_buf_reset(&b);
    kt_progress_format(&b, &p);
    assert_string_equal(b.p, "999/20000 trials (5.0%), ETA -");
    kt_progress_compute(&p, 64, 64, 0, 30.0);
    kt_buf_reset(&b);
    kt_progress_format(&b, &p);
    assert_string_equal(b.p, "64/64 trials (100.0%), done");
    kt_progress_compute(&p, 64, 0, 0, 30.0);
    assert_true(p.percent < 0);
    kt_buf_free(&b);
    kt_duration_format(d, sizeof(d), 59.4);
    assert_string_equal(d, "59s");
    kt_duration_format(d, sizeof(d), 725);
    assert_string_equal(d, "12m05s");
    kt_duration_format(d, sizeof(d), 2 * 86400 + 4 * 3600 + 1);
    assert_string_equal(d, "2d04h");
}

static void
test_tasklog_ansor_table(void **state)
{
    struct kt_tasklog_table t = {3, seed_rows, 9.488, 2999, 10782.4, 16, 0, -1};
    struct kt_buf b;

    (void)state;
    kt_buf_init(&b);
    kt_tasklog_format_table(&b, &t, KT_TASKLOG_ANSOR);
    /* Lines in Ansor's exact format; Ansor's format ends the last with \t. */
    assert_string_equal(b.p,
                        "|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |\n"
                        "-------------------------------------------------\n"
                        "|    0 |        0.050 |          19.95 |     58 |\n"
                        "|    1 |        0.042 |           2.96 |     58 |\n"
                        "|   16 |        0.551 |          28.89 |    116 |\n"
                        "-------------------------------------------------\n"
                        "Estimated total latency: 9.488 ms\tTrials: 2999\tUsed "
                        "time : 10782 s"
                        "\tNext ID: 16\t\n");
    kt_buf_free(&b);
}

static void
test_tasklog_extra_columns_and_missing(void **state)
{
    struct kt_tasklog_task rows[2] = {
        {0, "gemm1024", 1.5, 0.080, 103.92, 64, 3},
        {1, NULL, 1, -1, -1, 0, 0},
    };
    struct kt_tasklog_table t = {2, rows, -1, 64, 205.2, 1, 0, -1};
    struct kt_buf b;

    (void)state;
    kt_buf_init(&b);
    kt_tasklog_format_table(&b, &t, 0);
    assert_string_equal(b.p, "|  ID  | Latency (ms) | Speed (GFLOPS) | Trials "
                             "| Errors | Weight | Task\n"
                             "-------------------------------------------------"
                             "-----------------------\n"
                             "|    0 |        0.080 |         103.92 |     64 "
                             "|      3 |    1.5 | gemm1024\n"
                             "|    1 |            - |              - |      0 "
                             "|      0 |      1 | -\n"
                             "-------------------------------------------------"
                             "-----------------------\n"
                             "Estimated total latency: - ms\tTrials: 64\tUsed "
                             "time : 205 s\tNext ID: 1\t\n");
    kt_buf_reset(&b);
    kt_tasklog_format_tsv(&b, &t);
    assert_string_equal(b.p, "ElapsedTime(s)\t205\tEstimatedLatency(ms)\tN/A\t"
                             "Trials\t64\n");
    t.total_latency_ms = 1.3514;
    kt_buf_reset(&b);
    kt_tasklog_format_tsv(&b, &t);
    assert_string_equal(b.p, "ElapsedTime(s)\t205\tEstimatedLatency(ms)\t1.351"
                             "\tTrials\t64\n");
    kt_buf_free(&b);
}

/* Candidates of an Ansor round: 58 in batches of 24, one build error. */
static struct kt_tasklog_cand *
seed_cands(void)
{
    struct kt_tasklog_cand *c = calloc(58, sizeof(*c));
    int i;
    for (i = 0; i < 58; i++) {
        c[i].build = KT_MARK_OK;
        c[i].run = KT_MARK_OK;
    }
    c[47].build = KT_MARK_ERROR;
    c[47].run = KT_MARK_NONE;
    return c;
}

static void
test_tasklog_round_sections(void **state)
{
    static const struct kt_tasklog_ga_iter ga[] = {
        {0, 0.8888, 0.6143, 116, 0, 0},
        {4, 0.9487, 0.7730, 116, 1381, 37},
    };
    struct kt_tasklog_search s = {0, 1444, 0, 17.69, 2, ga, 116, 83.24, 0.9487};
    struct kt_tasklog_cand *c = seed_cands();
    struct kt_tasklog_measure m = {58, c, 24, 106.66};
    struct kt_tasklog_train tr = {4.57, 2999};
    struct kt_tasklog_round r;
    struct kt_buf b, want;
    char t[512];
    int i;

    (void)state;
    memset(&r, 0, sizeof(r));
    r.job = "resnet50";
    r.round = 52;
    r.wall_time = 1700000000.0; /* 2023-11-14T22:13:20Z */
    r.table.ntasks = 1;
    r.table.tasks = seed_rows;
    r.table.total_latency_ms = 9.488;
    r.table.trials = 2999;
    r.table.used_s = 10782;
    r.table.next_id = 16;
    r.search = &s;
    r.measure = &m;
    r.train = &tr;
    kt_buf_init(&b);
    kt_tasklog_format_round(&b, &r, KT_TASKLOG_ANSOR);

    kt_buf_init(&want);
    kt_buf_puts(&want, "[ 2023-11-14T22:13:20Z ] job resnet50 round 52\n");
    title_line(t, sizeof(t), "Task Scheduler");
    kt_buf_puts(&want, t);
    kt_buf_puts(&want, "|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |\n"
                       "-------------------------------------------------\n"
                       "|    0 |        0.050 |          19.95 |     58 |\n"
                       "-------------------------------------------------\n"
                       "Estimated total latency: 9.488 ms\tTrials: 2999\tUsed "
                       "time : 10782 s"
                       "\tNext ID: 16\t\n");
    title_line(t, sizeof(t), "Search");
    kt_buf_puts(&want, t);
    /* The next four lines are Ansor's format, byte for byte. */
    kt_buf_puts(&want, "Sample Initial Population\t#s: 1444\tfail_ct: 0\tTime "
                       "elapsed: 17.69\n"
                       "GA Iter: 0\tMax score: 0.8888\tMin score: "
                       "0.6143\t#Pop: 116\t#M+: 0\t#M-: 0\n"
                       "GA Iter: 4\tMax score: 0.9487\tMin score: "
                       "0.7730\t#Pop: 116\t#M+: 1381\t#M-: 37\n"
                       "EvolutionarySearch\t\t#s: 116\tTime elapsed: 83.24\n"
                       "Best predicted score: 0.9487\n");
    title_line(t, sizeof(t), "Measure");
    kt_buf_puts(&want, t);
    kt_buf_puts(&want, "Get 58 programs to measure:\n");
    for (i = 0; i < 24; i++)
        kt_buf_putc(&want, '.');
    for (i = 0; i < 24; i++)
        kt_buf_putc(&want, '*');
    kt_buf_putc(&want, '\n');
    for (i = 0; i < 23; i++)
        kt_buf_putc(&want, '.');
    kt_buf_puts(&want, ".E");
    for (i = 0; i < 23; i++)
        kt_buf_putc(&want, '*');
    kt_buf_putc(&want, '\n');
    for (i = 0; i < 10; i++)
        kt_buf_putc(&want, '.');
    for (i = 0; i < 10; i++)
        kt_buf_putc(&want, '*');
    kt_buf_puts(&want, "\nTime elapsed for measurement: 106.66 s\n");
    title_line(t, sizeof(t), "Train cost model");
    kt_buf_puts(&want, t);
    kt_buf_puts(&want, "Time elapsed for training: 4.57 s\n"
                       "Training records: 2999\n");
    assert_string_equal(b.p, want.p);

    /* Run errors, timeouts, the sketch line, and one batch. */
    kt_buf_reset(&b);
    kt_buf_reset(&want);
    c[0].run = KT_MARK_ERROR;
    c[1].build = KT_MARK_TIMEOUT;
    c[1].run = KT_MARK_NONE;
    c[2].run = KT_MARK_TIMEOUT;
    m.ncand = 4;
    m.batch = 0;
    s.sketches = 3;
    s.niters = 0;
    r.search = &s;
    r.train = NULL;
    kt_tasklog_format_round(&b, &r, KT_TASKLOG_ANSOR);
    assert_non_null(strstr(b.p, "\nGenerate Sketches\t\t#s: 3\n"
                                "Sample Initial Population\t#s: 1444"));
    assert_non_null(strstr(b.p, "Get 4 programs to measure:\n"
                                "..T..*E*T*\nTime elapsed for measurement"));
    assert_null(strstr(b.p, "Train cost model"));
    kt_buf_free(&want);
    kt_buf_free(&b);
    free(c);
}

static void
test_tasklog_write_appends(void **state)
{
    char dir[] = "/tmp/kt_tasklog_XXXXXX";
    char path[128], tsv[128], err[256];
    struct kt_tasklog_round r;
    struct kt_buf one, two;
    char *got;

    (void)state;
    assert_non_null(mkdtemp(dir));
    memset(&r, 0, sizeof(r));
    r.job = "tiny";
    r.round = 1;
    r.table.ntasks = 3;
    r.table.tasks = seed_rows;
    r.table.total_latency_ms = -1;
    r.table.trials = 64;
    r.table.used_s = 3;
    r.table.next_id = 1;
    kt_buf_init(&one);
    kt_buf_init(&two);
    kt_tasklog_format_round(&one, &r, 0);
    assert_int_equal(kt_tasklog_write(dir, &r, 0, err, sizeof(err)), 0);
    r.round = 2;
    r.table.total_latency_ms = 0.5;
    r.table.trials = 128;
    r.table.used_s = 7;
    kt_tasklog_format_round(&two, &r, 0);
    assert_int_equal(kt_tasklog_write(dir, &r, 0, err, sizeof(err)), 0);

    snprintf(path, sizeof(path), "%s/tiny.log", dir);
    got = ktt_slurp(NULL, path, NULL);
    assert_non_null(got);
    kt_buf_puts(&one, two.p);
    assert_string_equal(got, one.p);
    free(got);
    snprintf(tsv, sizeof(tsv), "%s/tiny.total_latency.tsv", dir);
    got = ktt_slurp(NULL, tsv, NULL);
    assert_non_null(got);
    assert_string_equal(
        got, "ElapsedTime(s)\t3\tEstimatedLatency(ms)\tN/A\tTrials\t64\n"
             "ElapsedTime(s)\t7\tEstimatedLatency(ms)\t0.500\tTrials\t128\n");
    free(got);

    /* A job name cannot escape the log dir. */
    r.job = "../etc/x";
    assert_int_equal(kt_tasklog_write(dir, &r, 0, err, sizeof(err)), KT_EINVAL);
    r.job = "";
    assert_int_equal(kt_tasklog_write(dir, &r, 0, err, sizeof(err)), KT_EINVAL);
    /* A missing log dir is an error naming the file. */
    r.job = "tiny";
    snprintf(path, sizeof(path), "%s/missing", dir);
    assert_int_equal(kt_tasklog_write(path, &r, 0, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "/missing/tiny.log"));

    snprintf(path, sizeof(path), "%s/tiny.log", dir);
    unlink(path);
    unlink(tsv);
    rmdir(dir);
    kt_buf_free(&one);
    kt_buf_free(&two);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tasklog_ansor_table),
        cmocka_unit_test(test_tasklog_progress),
        cmocka_unit_test(test_tasklog_extra_columns_and_missing),
        cmocka_unit_test(test_tasklog_round_sections),
        cmocka_unit_test(test_tasklog_write_appends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
