/* compile.c - `kerntune compile`: choose each task's schedule from the
 * database and write the library (see compile.h, docs/compile.md). */
#include "compile/compile_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* s as a C identifier: lower case, [a-z0-9_], not starting with a digit. */
static void
c_ident(const char *s, char *out, size_t n)
{
    size_t i = 0;

    if (isdigit((unsigned char)*s) && n > 2)
        out[i++] = 'm';
    for (; *s && i + 1 < n; s++)
        out[i++] = isalnum((unsigned char)*s) ? (char)tolower((unsigned char)*s)
                                              : '_';
    out[i] = '\0';
}

const struct kt_lbuf *
kt__cc_arg(const struct kt_cc_task *t, int i)
{
    return &t->lt->bufs[t->lt->args[i]];
}

int
kt__cc_arg_is_output(const struct kt_cc_task *t, int i)
{
    return t->task->dag->tensors[kt__cc_arg(t, i)->tensor].kind ==
           KT_TENSOR_OUTPUT;
}

static int
expr_reads_buf(const struct kt_expr *e, int buf)
{
    if (e == NULL)
        return 0;
    if (e->op == KT_X_LOAD && e->src == buf)
        return 1;
    return expr_reads_buf(e->a, buf) || expr_reads_buf(e->b, buf);
}

static int
tree_reads_buf(const struct kt_node *n, int buf)
{
    int i;

    if (n == NULL)
        return 0;
    if (n->kind == KT_N_STORE && expr_reads_buf(n->expr, buf))
        return 1;
    for (i = 0; i < n->nkids; i++)
        if (tree_reads_buf(n->kids[i], buf))
            return 1;
    return 0;
}

/* The packed copies of t's schedule, each with the argument it copies and
 * its size as the kernel for vectors of vector_bytes lays it out; which
 * arguments the kernel itself still reads. */
static int
find_packed(struct kt_cc_task *t, int vector_bytes, char *err, size_t errlen)
{
    const struct kt_looptree *lt = t->lt;
    int b, s, a;

    t->arg_read = kt_xcalloc((size_t)lt->nargs, sizeof(int));
    for (a = 0; a < lt->nargs; a++)
        t->arg_read[a] = tree_reads_buf(lt->root, lt->args[a]);
    for (b = 0; b < lt->nbufs; b++) {
        struct kt_cc_packed *p = &t->packed[t->npacked];
        int src = -1;
        if (lt->bufs[b].scope != KT_BUF_PACKED)
            continue;
        if (t->npacked == KT_CC_MAX_PACKED)
            return kt_seterr(err, errlen, KT_ETOOBIG,
                             "task %s: more than %d packed weights",
                             t->task->name, KT_CC_MAX_PACKED);
        for (s = 0; s < t->st->nstages; s++)
            if (t->st->stages[s].out == lt->bufs[b].tensor &&
                t->st->stages[s].cache_read)
                src = t->st->stages[s].body->src;
        p->buf = b;
        p->arg = -1;
        for (a = 0; a < lt->nargs; a++)
            if (lt->bufs[lt->args[a]].tensor == src)
                p->arg = a;
        if (p->arg < 0)
            return kt_seterr(err, errlen, KT_ESCHEDULE,
                             "task %s: packed buffer %s copies no argument",
                             t->task->name, lt->bufs[b].name);
        p->elems = kt_lbuf_stored_elems(&lt->bufs[b], vector_bytes);
        t->npacked++;
    }
    return KT_OK;
}

/* The stored schedule of trial best, replayed on t's DAG. */
static int
replay_best(struct kt_cc_task *t, char *why, size_t whylen)
{
    struct kt_step *steps = NULL;
    int nsteps = 0, rc;

    rc = kt_steps_from_json(t->best.config, &steps, &nsteps, why, whylen);
    if (rc == KT_OK)
        rc = kt_state_replay(t->task->dag, steps, nsteps, &t->st, why, whylen);
    free(steps);
    if (rc == KT_OK) {
        rc = kt_lower(t->st, &t->lt, why, whylen);
        if (rc != KT_OK) {
            kt_state_free(t->st);
            t->st = NULL;
        }
    }
    return rc;
}

/* Picks t's schedule: its best trial on the target (t->best, loaded by
 * the caller), else the default (no steps) with a warning, or an error
 * under require_tuned. */
static int
choose_schedule(struct kt_cc *c, struct kt_cc_task *t, FILE *log, char *err,
                size_t errlen)
{
    const struct kt_dag *dag = t->task->dag;
    /* why there is no tuned schedule, formatted apart from err: err into
     * itself overlapped vsnprintf's arguments (found by valgrind) */
    char why[512] = "", reason[640];
    int rc;

    if (t->best.config != NULL && replay_best(t, why, sizeof(why)) == KT_OK) {
        c->ntuned++;
        return find_packed(t, c->cg.vector_bytes, err, errlen);
    }

    if (t->best.config != NULL)
        snprintf(reason, sizeof(reason),
                 "trial %lld's schedule does not rebuild (%s)",
                 (long long)t->best.id, why);
    else
        snprintf(reason, sizeof(reason), "no successful trial for target %s",
                 c->target);
    kt_best_trial_free(&t->best);
    if (c->o->require_tuned)
        return kt_seterr(err, errlen, KT_ENOENT,
                         "task %s (workload %s): %.400s (--require-tuned)",
                         t->task->name, dag->hash, reason);
    snprintf(err, errlen, "%s", reason);
    if (log != NULL)
        fprintf(log,
                "kerntune: warning: task %s (workload %s): %s; using the "
                "untuned default schedule\n",
                t->task->name, dag->hash, reason);
    t->st = kt_state_new(dag);
    rc = kt_lower(t->st, &t->lt, err, errlen);
    return rc == KT_OK ? find_packed(t, c->cg.vector_bytes, err, errlen) : rc;
}

/* The message when no task of the model has a trial for its target: which
 * targets the database has for them instead, if any. */
static int
mismatch(struct kt_cc *c, struct kt_storage_reader *r, char *err, size_t errlen)
{
    struct kt_buf b;
    int i, rc = KT_OK;

    kt_buf_init(&b);
    for (i = 0; i < c->tasks.n && rc == KT_OK && b.len == 0; i++)
        rc = kt_storage_reader_targets(r, c->tasks.v[i].dag->hash, &b, err,
                                       errlen);
    if (rc == KT_OK && b.len > 0)
        rc = kt_seterr(err, errlen, KT_EDB,
                       "%s: no successful trial of any task of %s for its "
                       "target %s; its tasks were tuned for:\n%s(the model's "
                       "target section must match the one it was tuned with)",
                       c->o->db_path, c->m->path, c->target, b.p);
    else if (rc == KT_OK)
        rc = kt_seterr(err, errlen, KT_EDB,
                       "%s: no trial of any task of %s (tune it first: "
                       "kerntune tune %s --db %s)",
                       c->o->db_path, c->m->path, c->m->path, c->o->db_path);
    kt_buf_free(&b);
    return rc;
}

/* Public names: <model>_<task>, unique. */
static void
name_tasks(struct kt_cc *c)
{
    int i, j;

    for (i = 0; i < c->tasks.n; i++) {
        char task[96];
        c_ident(c->tasks.v[i].name, task, sizeof(task));
        snprintf(c->t[i].fname, sizeof(c->t[i].fname), "%.63s_%.95s", c->model,
                 task);
        for (j = 0; j < i; j++)
            if (strcmp(c->t[j].fname, c->t[i].fname) == 0)
                snprintf(c->t[i].fname, sizeof(c->t[i].fname), "%.63s_%.95s_%d",
                         c->model, task, i);
    }
}

static int
make_dirs(const char *dir, char *err, size_t errlen)
{
    char *p = kt_xstrdup(dir), *s;
    int rc = 0;

    for (s = p + 1; rc == 0; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char end = *s;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            rc = -errno;
        *s = end;
        if (end == '\0')
            break;
    }
    free(p);
    if (rc == 0 && access(dir, W_OK | X_OK) != 0)
        rc = -errno;
    if (rc != 0)
        return kt_seterr(err, errlen, rc, "%s: cannot write the output: %s",
                         dir, strerror(-rc));
    return KT_OK;
}

int
kt__cc_write_bytes(const struct kt_cc *c, const char *name, const void *data,
                   size_t len, char *err, size_t errlen)
{
    struct kt_buf path, tmp;
    FILE *f;
    int rc = KT_OK;

    kt_buf_init(&path);
    kt_buf_init(&tmp);
    kt_buf_printf(&path, "%s/%s", c->o->out_dir, name);
    kt_buf_printf(&tmp, "%s.tmp", path.p);
    f = fopen(tmp.p, "wb");
    if (f == NULL || fwrite(data, 1, len, f) != len || fflush(f) != 0)
        rc = -errno;
    if (f != NULL && fclose(f) != 0 && rc == KT_OK)
        rc = -errno;
    if (rc == KT_OK && rename(tmp.p, path.p) != 0)
        rc = -errno;
    if (rc != KT_OK) {
        kt_seterr(err, errlen, rc, "%s: %s", path.p, strerror(-rc));
        unlink(tmp.p);
    }
    kt_buf_free(&path);
    kt_buf_free(&tmp);
    return rc;
}

int
kt__cc_write(const struct kt_cc *c, const char *name, const char *text,
             char *err, size_t errlen)
{
    return kt__cc_write_bytes(c, name, text, strlen(text), err, errlen);
}

static void
cc_free(struct kt_cc *c)
{
    int i;

    for (i = 0; c->t != NULL && i < c->tasks.n; i++) {
        kt_state_free(c->t[i].st);
        kt_looptree_free(c->t[i].lt);
        kt_looptree_free(c->t[i].ref_lt);
        kt_best_trial_free(&c->t[i].best);
        free(c->t[i].arg_read);
    }
    free(c->t);
    kt__cc_net_free(c->net);
    kt_tasks_free(&c->tasks);
    free(c->target);
}

static void
cc_init(struct kt_cc *c, const struct kt_model_conf *m,
        const struct kt_compile_opts *o)
{
    struct kt_buf b;

    memset(c, 0, sizeof(*c));
    c->m = m;
    c->o = o;
    c_ident(m->name, c->model, sizeof(c->model));
    kt_buf_init(&b);
    kt_target_id(&m->target, &b);
    c->target = kt_buf_take(&b);
    kt_codegen_default_opts(&c->cg);
    if (m->target.vector_bytes > 0)
        c->cg.vector_bytes = (int)m->target.vector_bytes;
    c->cg.packed_args = 1;
}

/* Every task's schedule and its naive reference loops. */
static int
choose_all(struct kt_cc *c, struct kt_storage_reader *r, FILE *log, char *err,
           size_t errlen)
{
    int i, rc, found = 0;

    c->t = kt_xcalloc((size_t)c->tasks.n, sizeof(*c->t));
    for (i = 0; i < c->tasks.n; i++)
        c->t[i].task = &c->tasks.v[i];
    name_tasks(c);
    for (i = 0; i < c->tasks.n; i++) {
        struct kt_state *plain = kt_state_new(c->tasks.v[i].dag);
        rc = kt_lower(plain, &c->t[i].ref_lt, err, errlen);
        kt_state_free(plain);
        if (rc != KT_OK)
            return rc;
    }
    for (i = 0; r != NULL && i < c->tasks.n; i++) {
        rc = kt_storage_reader_best(r, c->target, c->tasks.v[i].dag->hash,
                                    &c->t[i].best, err, errlen);
        if (rc != KT_OK && rc != KT_ENOENT)
            return rc;
        found += rc == KT_OK;
    }
    if (r != NULL && found == 0)
        return mismatch(c, r, err, errlen);
    if (r == NULL && log != NULL)
        fprintf(log,
                "kerntune: warning: --untuned: all %d tasks get the untuned "
                "default schedule\n",
                c->tasks.n);
    for (i = 0; i < c->tasks.n; i++) {
        rc = choose_schedule(c, &c->t[i], r != NULL ? log : NULL, err, errlen);
        if (rc != KT_OK)
            return rc;
    }
    return KT_OK;
}

int
kt_compile(const struct kt_model_conf *m, const struct kt_compile_opts *o,
           FILE *log, char *err, size_t errlen)
{
    struct kt_storage_reader *r = NULL;
    struct kt_cc c;
    int rc;

    cc_init(&c, m, o);
    rc = o->untuned ? KT_OK
                    : kt_storage_reader_open(o->db_path, &r, err, errlen);
    if (rc == KT_OK)
        rc = kt_tasks_extract(m, &c.tasks, err, errlen);
    if (rc == KT_OK)
        rc = choose_all(&c, r, log, err, errlen);
    kt_storage_reader_close(r);
    if (rc == KT_OK)
        rc = kt__cc_net_plan(&c, log, err, errlen);
    if (rc == KT_OK)
        rc = make_dirs(o->out_dir, err, errlen);
    if (rc == KT_OK)
        rc = kt__cc_emit_sources(&c, err, errlen);
    if (rc == KT_OK)
        rc = kt__cc_emit_net(&c, err, errlen);
    if (rc == KT_OK)
        rc = kt__cc_emit_build(&c, err, errlen);
    if (rc == KT_OK && log != NULL)
        fprintf(log,
                "kerntune: %s: %d tasks (%d tuned, %d untuned) -> %s/%s.h, "
                "%s/%s_kernels.c, %s/Makefile\n",
                m->name, c.tasks.n, c.ntuned, c.tasks.n - c.ntuned, o->out_dir,
                c.model, o->out_dir, c.model, o->out_dir);
    if (rc == KT_OK && log != NULL && c.net != NULL)
        fprintf(log,
                "kerntune: network: %d steps, peak activation memory %lld "
                "bytes, weights %lld bytes -> %s/%s_net.c, %s/%s.weights\n",
                c.net->nsteps, (long long)c.net->arena_bytes,
                (long long)c.net->nw * 4, o->out_dir, c.model, o->out_dir,
                c.model);
    cc_free(&c);
    return rc;
}
