/* test_show.c - the library half of `kerntune show` on a real database
 * file: the best trial of a workload is the fastest successful one of any
 * target (failed trials never count), trials load by id with their error
 * text, the stored schedule rebuilds into a build unit whose kernel matches
 * the DAG interpreter, and a stored schedule that no longer replays or a
 * missing file give errors naming the trial or the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dlfcn.h>
#include <unistd.h>

#include "daemon/show.h"
#include "tests/support/ktt.h"
#include "tests/unit/test_storage_util.h"

struct fx {
    char dir[4096];
    char db[4200];
    struct kt_dag *dag;
    char *good, *faster; /* schedule JSON of two candidates */
    int64_t first_id;
};

/* A tiled, vectorized schedule of the test GEMM with tile ti x tj. */
static char *
schedule_json(const struct kt_dag *dag, int ti, int tj)
{
    struct kt_step steps[] = {
        {KT_STEP_SPLIT, 0, 0, 1, {ti}},
        {KT_STEP_SPLIT, 0, 2, 1, {tj}},
        {KT_STEP_REORDER, 0, 0, 5, {0, 2, 4, 1, 3}},
        {KT_STEP_ANNOTATE, 0, 4, 0, {KT_ANN_VECTORIZE}},
        {KT_STEP_ANNOTATE, 0, 0, 0, {KT_ANN_PARALLEL}},
    };
    struct kt_state *st = kt_state_new(dag);
    struct kt_buf b;
    char err[256];
    unsigned i;

    for (i = 0; i < KT_ARRAY_LEN(steps); i++)
        assert_int_equal(kt_state_apply(st, &steps[i], err, sizeof(err)),
                         KT_OK);
    kt_buf_init(&b);
    kt_steps_to_json(st->steps, st->nsteps, &b);
    kt_state_free(st);
    return kt_buf_take(&b);
}

static void
put_trial(struct kt_storage *st, const struct fx *f, const char *target,
          const char *config, int err_no, double cost, int64_t *id)
{
    struct kt_trial t = {0};
    char err[512];

    t.task_name = "mm";
    t.target = target;
    t.workload = f->dag->key;
    t.config = config;
    t.result.err_no = err_no;
    t.result.err_text = err_no ? "kernel.c:1: error: boom" : NULL;
    t.result.cost = cost;
    assert_int_equal(kt_storage_write_batch(st, &t, 1, id, err, sizeof(err)),
                     KT_OK);
}

static int
setup(void **state)
{
    struct fx *f = kt_xcalloc(1, sizeof(*f));
    struct kt_storage *st;
    struct kt_op_def d;
    char err[512];
    int64_t id;

    ts_tmpdir(f->dir, sizeof(f->dir));
    snprintf(f->db, sizeof(f->db), "%s/tune.db", f->dir);
    kt_op_matmul(&d, 48, 64, 40);
    if (kt_op_build(&d, &f->dag, err, sizeof(err)) != KT_OK ||
        kt_storage_open(&st, f->db, NULL, err, sizeof(err)) != KT_OK) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    f->good = schedule_json(f->dag, 4, 16);
    f->faster = schedule_json(f->dag, 8, 32);
    /* in id order: good 2 ms, failed (cost 0), faster 1 ms on another
     * target, a schedule that does not replay at 0.5 ms, good 3 ms */
    put_trial(st, f, "cpu:local:gcc", f->good, 0, 2e-3, &f->first_id);
    put_trial(st, f, "cpu:local:gcc", f->faster, 6, 0, &id);
    put_trial(st, f, "cpu:other:clang", f->faster, 0, 1e-3, &id);
    put_trial(st, f, "cpu:local:gcc", "{\"v\":1,\"steps\":[[\"SP\",0,9,[4]]]}",
              0, 5e-4, &id);
    put_trial(st, f, "cpu:local:gcc", f->good, 0, 3e-3, &id);
    kt_storage_close(st);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    ts_rmrf(f->dir);
    kt_dag_free(f->dag);
    free(f->good);
    free(f->faster);
    free(f);
    return 0;
}

static void
test_show_best_and_by_id(void **state)
{
    struct fx *f = *state;
    struct kt_shown t;
    struct sqlite3 *db;
    char err[512];

    assert_int_equal(kt_show_open_db(f->db, &db, err, sizeof(err)), KT_OK);
    /* the 0.5 ms row is the fastest successful one even though it no longer
     * replays: best is what was measured, replay errors come later */
    assert_int_equal(kt_show_load_best(db, f->db, f->dag->hash, &t, err,
                                       sizeof(err)),
                     KT_OK);
    assert_int_equal(t.id, f->first_id + 3);
    assert_true(t.cost == 5e-4);
    kt_shown_free(&t);

    assert_int_equal(kt_show_load_trial(db, f->db, f->first_id + 1, &t, err,
                                        sizeof(err)),
                     KT_OK);
    assert_int_equal(t.err_no, 6);
    assert_string_equal(t.err_text, "kernel.c:1: error: boom");
    assert_string_equal(t.task_name, "mm");
    assert_null(t.job_name);
    assert_string_equal(t.workload, f->dag->key);
    assert_string_equal(t.workload_hash, f->dag->hash);
    kt_shown_free(&t);

    assert_int_equal(kt_show_load_trial(db, f->db, f->first_id + 2, &t, err,
                                        sizeof(err)),
                     KT_OK);
    assert_string_equal(t.target, "cpu:other:clang");
    assert_string_equal(t.config, f->faster);
    kt_shown_free(&t);

    assert_int_equal(kt_show_load_trial(db, f->db, 12345, &t, err, sizeof(err)),
                     KT_ENOENT);
    assert_non_null(strstr(err, "no trial with id 12345"));
    assert_non_null(strstr(err, f->db));
    assert_int_equal(kt_show_load_best(db, f->db, "0123456789abcdef", &t, err,
                                       sizeof(err)),
                     KT_ENOENT);
    assert_non_null(
        strstr(err, "no successful trial of workload 0123456789abcdef"));
    sqlite3_close(db);
}

/* The stored schedule rebuilds into a build unit whose kernel computes what
 * the interpreter computes. */
static void
test_show_module_runs(void **state)
{
    struct fx *f = *state;
    struct kt_codegen_opts cg;
    struct kt_shown t;
    struct ktt_bufs got, want;
    struct sqlite3 *db;
    float *args[KT_MAX_TENSORS];
    char err[4096], *src = NULL;
    void *h;
    int out;

    kt_codegen_default_opts(&cg);
    assert_int_equal(kt_show_open_db(f->db, &db, err, sizeof(err)), KT_OK);
    assert_int_equal(kt_show_load_trial(db, f->db, f->first_id + 2, &t, err,
                                        sizeof(err)),
                     KT_OK);
    assert_int_equal(kt_show_module(&t, &cg, &src, err, sizeof(err)), KT_OK);
    assert_non_null(strstr(src, "void kt_kernel("));
    h = ktt_build(src, err, sizeof(err));
    if (h == NULL)
        fail_msg("%s", err);
    ktt_bufs_init(&got, f->dag, 7);
    ktt_bufs_init(&want, f->dag, 7);
    kt_dag_interpret(f->dag, want.t);
    ktt_args(f->dag, &got, args);
    ((void (*)(float *const *))dlsym(h, "kt_kernel"))(args);
    out = kt_dag_find_tensor(f->dag, "O");
    assert_true(ktt_rel_l2(got.t[out], want.t[out], got.elems[out]) < 1e-5);
    ktt_bufs_free(&got);
    ktt_bufs_free(&want);
    free(src);
    kt_shown_free(&t);

    /* a stored schedule that no longer replays names the trial */
    assert_int_equal(kt_show_load_trial(db, f->db, f->first_id + 3, &t, err,
                                        sizeof(err)),
                     KT_OK);
    assert_int_not_equal(kt_show_module(&t, &cg, &src, err, sizeof(err)),
                         KT_OK);
    assert_null(src);
    assert_non_null(strstr(err, "the schedule does not replay"));
    kt_shown_free(&t);
    sqlite3_close(db);
}

static void
test_show_missing_or_foreign_file(void **state)
{
    struct fx *f = *state;
    struct kt_shown t;
    struct sqlite3 *db;
    char path[4300], err[512];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/none.db", f->dir);
    assert_int_equal(kt_show_open_db(path, &db, err, sizeof(err)), KT_ENOENT);
    assert_non_null(strstr(err, path));
    assert_int_equal(access(path, F_OK), -1); /* not created */

    snprintf(path, sizeof(path), "%s/notes.txt", f->dir);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("not a database, but long enough to have a first page of text.....\n",
          fp);
    fclose(fp);
    assert_int_equal(kt_show_open_db(path, &db, err, sizeof(err)), KT_OK);
    assert_int_equal(kt_show_load_trial(db, path, 1, &t, err, sizeof(err)),
                     KT_EDB);
    assert_non_null(strstr(err, path));
    sqlite3_close(db);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_show_best_and_by_id, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_show_module_runs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_show_missing_or_foreign_file,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
