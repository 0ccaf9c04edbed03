/* test_report.c - the database-only views and the HTML report on a real
 * SQLite file written through storage/: job and task figures, the tuning
 * curve, the responses `kerntune jobs|tasks|best --db` print, and the
 * page's plots (busy shares, err_no bins). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/report.h"
#include "storage/storage.h"

struct fix {
    char dir[64];
    char db[128];
};

static void
put_trial(struct kt_storage *st, int64_t job, const char *wl, int err_no,
          double cost, const char *worker, double t0, double t1)
{
    struct kt_trial t;
    char e[256];
    static int no;

    memset(&t, 0, sizeof(t));
    t.job_id = job;
    t.task_name = wl;
    t.target = "cpu:local:gcc";
    t.workload = wl;
    t.config = "{\"v\":1,\"steps\":[]}";
    t.result.err_no = err_no;
    t.result.err_text = err_no ? "failed" : NULL;
    t.trial_no = no++;
    t.result.cost = cost;
    t.result.worker = worker;
    t.started = t0;
    t.finished = t1;
    assert_int_equal(kt_storage_write_batch(st, &t, 1, NULL, e, sizeof(e)), 0);
}

/* Job "j" with tasks a (weight 2, 2e6 FLOP) and b (1e6 FLOP); trials in
 * finishing order: a 2 ms, b fails, b 1 ms, a 1 ms; worker w0 busy over
 * [100, 110] and [110, 120], w1 over [100, 105]. */
static int
setup(void **state)
{
    struct fix *f = calloc(1, sizeof(*f));
    struct kt_storage *st;
    struct kt_task_info ti;
    int64_t job;
    char e[256];

    snprintf(f->dir, sizeof(f->dir), "/tmp/kt-report.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->db, sizeof(f->db), "%s/t.db", f->dir);
    assert_int_equal(kt_storage_open(&st, f->db, NULL, e, sizeof(e)), 0);
    assert_int_equal(kt_storage_job_open(st, "j", "/nonexistent/j.json",
                                         "cpu:local:gcc", &job, e, sizeof(e)),
                     0);
    memset(&ti, 0, sizeof(ti));
    ti.job_id = job;
    ti.target = "cpu:local:gcc";
    ti.task_name = ti.workload = "a";
    ti.weight = 2;
    ti.flops = 2e6;
    assert_int_equal(kt_storage_task_put(st, &ti, e, sizeof(e)), 0);
    ti.task_name = ti.workload = "b";
    ti.weight = 1;
    ti.flops = 1e6;
    assert_int_equal(kt_storage_task_put(st, &ti, e, sizeof(e)), 0);
    put_trial(st, job, "a", 0, 2e-3, "w0", 100, 110);
    put_trial(st, job, "b", 4, 0, "w1", 100, 105);
    put_trial(st, job, "b", 0, 1e-3, "w0", 110, 120);
    put_trial(st, job, "a", 0, 1e-3, "w0", 110, 120);
    kt_storage_close(st);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fix *f = *state;
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static void
test_report_load_and_curve(void **state)
{
    struct fix *f = *state;
    struct kt_rep r;
    double curve[4];
    char e[256];

    assert_int_equal(kt_rep_load(f->db, "j", KT_REP_TRIALS, &r, e, sizeof(e)),
                     0);
    assert_int_equal(r.njobs, 1);
    assert_int_equal(r.jobs[0].ntasks, 2);
    assert_int_equal(r.jobs[0].trials, 4);
    assert_int_equal(r.jobs[0].errors, 1);
    assert_int_equal(r.jobs[0].budget, 0); /* the model file is gone */
    assert_int_equal(r.jobs[0].nworkers, 2);
    assert_true(r.jobs[0].tasks[0].best_cost == 1e-3);
    kt_rep_curve(&r.jobs[0], curve);
    /* No estimate until b has a valid program; then 2x2 + 1, then 2x1 + 1. */
    assert_true(curve[0] < 0 && curve[1] < 0);
    assert_true(curve[2] > 4.999 && curve[2] < 5.001);
    assert_true(curve[3] > 2.999 && curve[3] < 3.001);
    kt_rep_free(&r);
    assert_int_equal(kt_rep_load(f->db, "nosuch", 0, &r, e, sizeof(e)),
                     KT_ENOENT);
    assert_non_null(strstr(e, "no job \"nosuch\""));
    kt_rep_free(&r);
}

static void
test_report_responses(void **state)
{
    struct fix *f = *state;
    struct kt_rep r;
    cJSON *resp, *rows;
    char e[256], *text;

    assert_int_equal(kt_rep_load(f->db, NULL, 0, &r, e, sizeof(e)), 0);
    resp = kt_rep_response(&r, "best", "j");
    rows = cJSON_GetObjectItem(resp, "best");
    assert_int_equal(cJSON_GetArraySize(rows), 2);
    /* a: 2e6 FLOP in 1 ms = 2 GFLOPS; the total is 2 x 1 + 1 ms. */
    assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "gflops")
                    ->valuedouble == 2.0);
    assert_true(
        cJSON_GetObjectItem(resp, "total_latency_ms")->valuedouble > 2.999 &&
        cJSON_GetObjectItem(resp, "total_latency_ms")->valuedouble < 3.001);
    assert_int_equal(cJSON_GetObjectItem(resp, "eta_s")->valuedouble, -1);
    cJSON_Delete(resp);
    resp = kt_rep_response(&r, "jobs", NULL);
    rows = cJSON_GetObjectItem(resp, "jobs");
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "key")
                            ->valuestring,
                        "local");
    cJSON_Delete(resp);
    resp = kt_rep_response(&r, "tasks", "nosuch");
    text = cJSON_PrintUnformatted(resp);
    assert_non_null(strstr(text, "\"ok\":false"));
    assert_non_null(strstr(text, "no job \\\"nosuch\\\""));
    cJSON_free(text);
    cJSON_Delete(resp);
    kt_rep_free(&r);
}

static void
test_report_html(void **state)
{
    struct fix *f = *state;
    struct kt_rep r;
    char e[256], *page = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&page, &len);

    assert_int_equal(kt_rep_load(f->db, NULL, KT_REP_TRIALS, &r, e, sizeof(e)),
                     0);
    kt_report_html(out, &r);
    fclose(out);
    assert_non_null(strstr(page, "<h2>Job j</h2>"));
    assert_non_null(strstr(page, "<svg class='plot curve-trials"));
    assert_non_null(strstr(page, "<svg class='plot curve-time"));
    assert_non_null(strstr(page, "<title>RUNTIME_DEVICE: 1</title>"));
    /* w0 had a batch from 100 to 120: busy in every bin; w1 only in the
     * first quarter of the span. */
    assert_non_null(strstr(page, "<title>w0: 100% busy</title>"));
    assert_null(strstr(page, "<title>w0: 0% busy</title>"));
    assert_non_null(strstr(page, "<title>w1: 100% busy</title>"));
    assert_non_null(strstr(page, "<title>w1: 0% busy</title>"));
    assert_non_null(strstr(page, "<td>66.7%</td>")); /* a: 2 of 3 ms */
    assert_null(strstr(page, "<script"));
    assert_null(strstr(page, "(ms, log)")); /* 5 to 3 ms: a linear axis */
    free(page);
    kt_rep_free(&r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_report_load_and_curve, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_report_responses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_html, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
