/* ktt_compile.c - see ktt_compile.h. */
#include "tests/support/ktt_compile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/compile.h"
#include "scheduler/scheduler.h"
#include "storage/storage.h"
#include "tests/support/ktt.h"

static int
store_trial(const char *db, const struct kt_model_conf *m,
            const struct kt_tasks *tasks, const char *config, char *err,
            size_t errlen)
{
    struct kt_trial t = {0};
    struct kt_storage *st;
    struct kt_buf target;
    int64_t id;
    int rc;

    kt_buf_init(&target);
    kt_target_id(&m->target, &target);
    rc = kt_storage_open(&st, db, NULL, err, errlen);
    if (rc == KT_OK) {
        t.task_name = tasks->v[0].name;
        t.target = target.p;
        t.workload = tasks->v[0].dag->key;
        t.config = config;
        t.result.cost = 1e-4;
        rc = kt_storage_write_batch(st, &t, 1, &id, err, errlen);
        kt_storage_close(st);
    }
    kt_buf_free(&target);
    return rc;
}

int
ktt_compile_tuned(const char *model_json, const char *db, const char *config,
                  const char *const *out, const double *serial_below, int nout,
                  char *err, size_t errlen)
{
    struct kt_model_conf *m = NULL;
    struct kt_tasks tasks = {0};
    struct kt_compile_opts o = {0};
    int rc, k;

    rc = kt_model_conf_parse("m.json", model_json, &m, err, errlen);
    if (rc == KT_OK)
        rc = kt_tasks_extract(m, &tasks, err, errlen);
    if (rc == KT_OK && tasks.n != 1)
        rc = kt_seterr(err, errlen, KT_EINVAL, "%d tasks, want 1", tasks.n);
    if (rc == KT_OK)
        rc = store_trial(db, m, &tasks, config, err, errlen);
    o.db_path = db;
    o.require_tuned = 1;
    for (k = 0; k < nout && rc == KT_OK; k++) {
        o.out_dir = out[k];
        o.serial_below_mflop = serial_below[k];
        rc = kt_compile(m, &o, NULL, err, errlen);
    }
    kt_tasks_free(&tasks);
    kt_model_conf_free(m);
    return rc;
}

int
ktt_run_in(const char *dir, const char *cmd, char *log, size_t loglen)
{
    char full[9000], *out;
    int rc;

    snprintf(full, sizeof(full), "cd '%s' && (%s) >cmd.out 2>&1", dir, cmd);
    rc = system(full);
    if (rc != 0 && loglen > 0) {
        out = ktt_slurp(dir, "cmd.out", NULL);
        snprintf(log, loglen, "%s\n%.3000s", full, out ? out : "");
        free(out);
    }
    return rc;
}

double
ktt_json_number(const char *text, const char *key)
{
    char want[64];
    const char *p;

    snprintf(want, sizeof(want), "\"%s\":", key);
    p = strstr(text, want);
    return p ? strtod(p + strlen(want), NULL) : -1;
}

/* Packs W (WEIGHT floats) with PACK into PACKED floats, to argv[1]. */
static const char pack_prog[] =
    "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
    "#include \"m.h\"\n"
    "int main(int argc, char **argv) {\n"
    "    float *w = aligned_alloc(64, (WEIGHT * 4 + 63) / 64 * 64);\n"
    "    float *p = aligned_alloc(64, (PACKED * 4 + 63) / 64 * 64);\n"
    "    memset(p, 0xff, PACKED * 4); /* NaN: padding is the routine's */\n"
    "    for (long i = 0; i < WEIGHT; i++)\n"
    "        w[i] = 0.01f * (float)(i % 100) + 0.5f; /* ktt_onnx_fill */\n"
    "    PACK(w, p);\n"
    "    FILE *f = fopen(argv[1], \"wb\");\n"
    "    return argc == 2 && f && fwrite(p, 4, PACKED, f) == PACKED && "
    "fclose(f) == 0 ? 0 : 1;\n}\n";

int
ktt_library_pack(const char *dir, long long weight_elems,
                 long long packed_elems, char *log, size_t loglen)
{
    char path[4200], fn[256], cmd[1024], *h;
    const char *p, *paren;
    FILE *fp;
    int ok;

    h = ktt_slurp(dir, "m.h", NULL);
    p = h != NULL ? strstr(h, "_pack(const float *W, float *W_pack);") : NULL;
    if (p == NULL) {
        snprintf(log, loglen, "%s/m.h declares no *_pack(W, W_pack)", dir);
        free(h);
        return 1;
    }
    while (p > h && p[-1] != ' ')
        p--;
    paren = strchr(p, '(');
    snprintf(fn, sizeof(fn), "%.*s", (int)(paren - p), p);
    free(h);
    snprintf(path, sizeof(path), "%s/pack_prog.c", dir);
    fp = fopen(path, "w");
    ok = fp != NULL && fputs(pack_prog, fp) >= 0;
    if (fp != NULL && fclose(fp) != 0)
        ok = 0;
    if (!ok) {
        snprintf(log, loglen, "cannot write %s", path);
        return 1;
    }
    snprintf(cmd, sizeof(cmd),
             "make -s && cc -O1 -DPACK=%s -DWEIGHT=%lldL -DPACKED=%lldL "
             "pack_prog.c -I. libm.a -fopenmp -lm -o pack_prog && "
             "./pack_prog mine.bin",
             fn, weight_elems, packed_elems);
    return ktt_run_in(dir, cmd, log, loglen);
}
