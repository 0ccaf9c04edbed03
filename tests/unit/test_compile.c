/* test_compile.c - kt_compile on a real database file: a conv2d tuned with
 * a weight-layout rewrite and an untuned GEMM compile into a library whose
 * kernels (built with the real compiler) match naive loops, with the packed
 * weight a caller-owned argument; --require-tuned, a missing database, a
 * target mismatch and an unwritable directory fail with messages that name
 * the task, file or target. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compile/compile.h"
#include "scheduler/scheduler.h"
#include "tests/unit/test_compile_conv.h"
#include "tests/unit/test_storage_util.h"
#include "tests/support/ktt.h"

static const char model_text[] =
    "{\"name\": \"cm\", \"target\": {\"cflags\": [\"-O2\", \"-fopenmp\"]},\n"
    " \"layers\": [{\"op\": \"conv2d\", \"C\": 4, \"H\": 8, \"W\": 8, \"K\": "
    "8, \"R\": 3, \"S\": 3, \"pad\": 1, \"epilogue\": [\"bias\", "
    "\"relu\"]}],\n"
    " \"tasks\": [{\"name\": \"mm\", \"compute\": [\"C[i,j] += A[i,k] * "
    "B[k,j]\"], \"shapes\": {\"A\": [16, 12], \"B\": [12, 8]}}]}\n";

struct fx {
    char dir[4096];
    char db[4200];
    char out[4200];
    struct kt_model_conf *m;
    int64_t trial_id;
};

static int
setup(void **state)
{
    struct fx *f = kt_xcalloc(1, sizeof(*f));
    struct kt_storage *st;
    struct kt_tasks tasks = {0};
    struct kt_trial t = {0};
    struct kt_buf target;
    char err[512];

    ts_tmpdir(f->dir, sizeof(f->dir));
    snprintf(f->db, sizeof(f->db), "%s/t.db", f->dir);
    snprintf(f->out, sizeof(f->out), "%s/lib/sub", f->dir);
    assert_int_equal(kt_model_conf_parse("cm.json", model_text, &f->m, err,
                                         sizeof(err)),
                     KT_OK);
    assert_int_equal(kt_tasks_extract(f->m, &tasks, err, sizeof(err)), KT_OK);
    assert_int_equal(tasks.n, 2);
    kt_buf_init(&target);
    kt_target_id(&f->m->target, &target);
    assert_string_equal(target.p, "cpu:local:gcc -O2 -fopenmp");
    assert_int_equal(kt_storage_open(&st, f->db, NULL, err, sizeof(err)),
                     KT_OK);
    t.task_name = tasks.v[0].name;
    t.target = target.p;
    t.workload = tasks.v[0].dag->key;
    t.config = CONV_SCHEDULE;
    t.result.cost = 1e-4;
    assert_int_equal(kt_storage_write_batch(st, &t, 1, &f->trial_id, err,
                                            sizeof(err)),
                     KT_OK);
    kt_storage_close(st);
    kt_buf_free(&target);
    kt_tasks_free(&tasks);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    ts_rmrf(f->dir);
    kt_model_conf_free(f->m);
    free(f);
    return 0;
}

static void
test_compile_builds_and_matches(void **state)
{
    struct fx *f = *state;
    struct kt_compile_opts o = {.db_path = f->db, .out_dir = f->out};
    char err[1024], cmd[9000], want[64], *h, *man;

    assert_int_equal(kt_compile(f->m, &o, NULL, err, sizeof(err)), KT_OK);
    h = ktt_slurp(f->out, "cm.h", NULL);
    assert_non_null(h);
    /* The packed weight replaces W in the kernel's arguments. */
    assert_non_null(
        strstr(h, "void cm_conv2d_n1_c4_h8_w8_k8_r3_s3_st1_p1_d1_g1_bias_relu("
                  "const float *I, const float *W_pack, const float *B, float "
                  "*O);"));
    assert_non_null(strstr(h, "_pack(const float *W, float *W_pack);"));
    assert_non_null(strstr(h, "_W_PACK_ELEMS 288LL"));
    assert_non_null(strstr(h, "void cm_mm(const float *A, const float *B, "
                              "float *C);"));
    assert_non_null(strstr(h, "UNTUNED"));
    man = ktt_slurp(f->out, "manifest.json", NULL);
    assert_non_null(man);
    snprintf(want, sizeof(want), "\"trial_id\":\t%lld,",
             (long long)f->trial_id);
    assert_non_null(strstr(man, want));
    assert_non_null(strstr(man, "\"tuned\":\tfalse"));
    assert_non_null(strstr(man, "\"target\":\t\"cpu:local:gcc -O2 -fopenmp\""));
    free(h);
    free(man);
    /* The generated self-check, built with the real compiler, compares
     * every kernel with naive loops and fails on a mismatch. */
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && cc -O1 -Wno-psabi -fopenmp cm_check.c cm_kernels.c "
             "-lm -o chk "
             "&& ./chk > chk.out 2>&1",
             f->out);
    assert_int_equal(system(cmd), 0);
    h = ktt_slurp(f->out, "chk.out", NULL);
    assert_non_null(h);
    assert_non_null(strstr(h, "2 of 2 kernels match the reference"));
    free(h);
}

static void
test_compile_errors(void **state)
{
    struct fx *f = *state;
    struct kt_compile_opts o = {.db_path = f->db, .out_dir = f->out};
    struct kt_model_conf *other = NULL;
    char err[2048], path[4300];

    o.require_tuned = 1;
    assert_int_equal(kt_compile(f->m, &o, NULL, err, sizeof(err)), KT_ENOENT);
    assert_non_null(strstr(err, "task mm"));
    assert_non_null(strstr(err, "--require-tuned"));
    assert_int_equal(access(f->out, F_OK), -1);

    o.require_tuned = 0;
    snprintf(path, sizeof(path), "%s/none.db", f->dir);
    o.db_path = path;
    assert_int_equal(kt_compile(f->m, &o, NULL, err, sizeof(err)), -ENOENT);
    assert_non_null(strstr(err, "none.db: no such database"));
    assert_int_equal(access(path, F_OK), -1);

    /* An old schema is not upgraded (the file is only read); a file that
     * is no database is refused. */
    snprintf(path, sizeof(path), "%s/v1.db", f->dir);
    assert_int_equal(kt_storage_create_version(path, 1, err, sizeof(err)),
                     KT_OK);
    assert_int_equal(kt_compile(f->m, &o, NULL, err, sizeof(err)), KT_EDB);
    assert_non_null(strstr(err, "v1.db: not a kerntune database of schema "
                                "version 2 (found 1"));
    snprintf(path, sizeof(path), "%s/text.db", f->dir);
    {
        FILE *text = fopen(path, "w");
        assert_non_null(text);
        fputs("not a database, just text long enough to be read\n", text);
        fclose(text);
    }
    assert_int_equal(kt_compile(f->m, &o, NULL, err, sizeof(err)), KT_EDB);
    assert_non_null(strstr(err, "text.db: "));

    o.db_path = f->db;
    assert_int_equal(kt_model_conf_parse("cm.json", model_text, &other, err,
                                         sizeof(err)),
                     KT_OK);
    free(other->target.key);
    other->target.key = kt_xstrdup("board");
    assert_int_equal(kt_compile(other, &o, NULL, err, sizeof(err)), KT_EDB);
    assert_non_null(strstr(err, "cpu:board:gcc"));
    assert_non_null(strstr(err, "cpu:local:gcc -O2 -fopenmp"));
    kt_model_conf_free(other);

    snprintf(path, sizeof(path), "%s/t.db/sub", f->dir);
    o.out_dir = path;
    assert_int_equal(kt_compile(f->m, &o, NULL, err, sizeof(err)), -ENOTDIR);
    assert_non_null(strstr(err, "cannot write the output"));
}

/* With packed_args the packed copy is the caller's argument after the
 * kernel's own, not module storage. */
static void
test_codegen_packed_args(void **state)
{
    struct fx *f = *state;
    struct kt_tasks tasks = {0};
    struct kt_step *steps = NULL;
    struct kt_state *st = NULL;
    struct kt_looptree *lt = NULL;
    struct kt_codegen_opts o;
    struct kt_buf b;
    char err[512];
    int n = 0;

    assert_int_equal(kt_tasks_extract(f->m, &tasks, err, sizeof(err)), KT_OK);
    assert_int_equal(kt_steps_from_json(CONV_SCHEDULE, &steps, &n, err,
                                        sizeof(err)),
                     KT_OK);
    assert_int_equal(kt_state_replay(tasks.v[0].dag, steps, n, &st, err,
                                     sizeof(err)),
                     KT_OK);
    assert_int_equal(kt_lower(st, &lt, err, sizeof(err)), KT_OK);
    kt_codegen_default_opts(&o);
    assert_int_equal(o.packed_args, 0);
    o.packed_args = 1;
    kt_buf_init(&b);
    assert_int_equal(kt_codegen_function(lt, &o, "k", &b, err, sizeof(err)),
                     KT_OK);
    assert_null(strstr(b.p, "static float k_pk_"));
    assert_non_null(strstr(b.p, "t_W_pack = (float "
                                "*)__builtin_assume_aligned(args[4], 64);"));
    kt_buf_reset(&b);
    o.packed_args = 0;
    assert_int_equal(kt_codegen_function(lt, &o, "k", &b, err, sizeof(err)),
                     KT_OK);
    assert_non_null(strstr(b.p, "static float k_pk_W_pack[288]"));
    kt_buf_free(&b);
    kt_looptree_free(lt);
    kt_state_free(st);
    free(steps);
    kt_tasks_free(&tasks);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_compile_builds_and_matches, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_compile_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_codegen_packed_args, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("compile", tests, NULL, NULL);
}
