/* run.c - `kerntune run DIR`: builds and runs the inference program of a
 * compiled network, and with --check runs the source model under ONNX
 * Runtime on the same inputs and compares (docs/compile.md). */
#include "compile/compile.h"

#include <cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"

struct run_opts {
    const char *dir, *input, *output;
    const char *emulator; /* command prefix running the inference program */
    int repeat, threads, check, profile;
    double tolerance;
};

static void
run_usage(FILE *f)
{
    fputs("usage: kerntune run DIR [--input FILE] [--output FILE] "
          "[--repeat N] [--threads N]\n"
          "                    [--check [--tolerance X]] [--emulator CMD] "
          "[--profile]\n"
          "  DIR                  a library written by kerntune compile "
          "from an ONNX model\n"
          "  --input FILE         the inputs' float32 values (little endian, "
          "one after the\n"
          "                       other); default: random in [-1, 1)\n"
          "  --output FILE        where the outputs go (same format)\n"
          "  --repeat N           timed runs after one warm-up (default 10)\n"
          "  --threads N          OpenMP threads (default: the model's "
          "target threads;\n"
          "                       0 = every core)\n"
          "  --check              also run the ONNX model under ONNX Runtime "
          "(node and\n"
          "                       onnxruntime-node, from $KT_ORT_DIR or "
          "~/.cache/kerntune/ort)\n"
          "                       on the same inputs: latency, ratio and "
          "the largest\n"
          "                       relative error (max |ours - ort| / max "
          "|ort| per output)\n"
          "  --tolerance X        --check fails above it (default 1e-4)\n"
          "  --profile            also times every step (kernel or untuned "
          "node) of the\n"
          "                       timed runs: best and mean per step, its "
          "share of the\n"
          "                       steps' best times, largest first\n"
          "  --emulator CMD       runs the inference program under CMD "
          "(default for a\n"
          "                       program built for another machine: "
          "qemu-ARCH -L\n"
          "                       /usr/TRIPLE, e.g. qemu-aarch64 -L "
          "/usr/aarch64-linux-gnu)\n"
          "Exit status: 0 ok, 1 failure or error above tolerance, 2 bad "
          "usage,\n"
          "77 ONNX Runtime not installed (--check).\n",
          f);
}

/* Runs argv with stdout into out_path (NULL: inherited); exit status, or
 * -1 when it could not start. */
static int
spawn(char *const *argv, const char *out_path, const char *node_path)
{
    pid_t pid;
    int status;

    fflush(stdout); /* else the child flushes our buffered lines again */
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (out_path != NULL && freopen(out_path, "w", stdout) == NULL)
            _exit(126);
        if (node_path != NULL)
            setenv("NODE_PATH", node_path, 1);
        execvp(argv[0], argv);
        fprintf(stderr, "kerntune: %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char *
slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct kt_buf b;
    char chunk[4096];
    size_t n;

    if (f == NULL)
        return NULL;
    kt_buf_init(&b);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        kt_buf_put(&b, chunk, n);
    fclose(f);
    if (len != NULL)
        *len = b.len;
    if (b.p == NULL)
        kt_buf_puts(&b, "");
    return kt_buf_take(&b);
}

/* Prints the program's output file; its best and median latency (ms) in
 * t[0], t[1] (left alone when it printed none). */
static void
show_output(const char *path, const char *who, double *t)
{
    char *text = slurp(path, NULL), *line, *save = NULL;
    double best, median;

    for (line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        printf("%s%s\n", who, line);
        if (sscanf(line, "latency: best %lf ms, median %lf ms", &best,
                   &median) == 2) {
            t[0] = best;
            t[1] = median;
        }
    }
    free(text);
}

/* The largest |a - r| / max |r| over each output; -1 on a size mismatch. */
static double
compare(const char *ours, const char *ref, const cJSON *outputs)
{
    size_t na, nr, at = 0;
    char *a = slurp(ours, &na), *r = slurp(ref, &nr);
    double worst = -1;
    const cJSON *o;

    if (a != NULL && r != NULL && na == nr && na % 4 == 0) {
        worst = 0;
        cJSON_ArrayForEach (o, outputs) {
            const cJSON *d, *shape = cJSON_GetObjectItem(o, "shape");
            size_t n = 1, i;
            double diff = 0, mag = 0;
            cJSON_ArrayForEach (d, shape)
                n *= (size_t)d->valuedouble;
            for (i = 0; i < n && (at + i + 1) * 4 <= na; i++) {
                float x, y;
                memcpy(&x, a + (at + i) * 4, 4);
                memcpy(&y, r + (at + i) * 4, 4);
                if (!(fabs((double)x - y) <= diff))
                    diff = fabs((double)x - y);
                mag = fmax(mag, fabs(y));
            }
            at += n;
            printf("output %-24s max |ours - ort| %.3g, max |ort| %.3g, "
                   "relative %.3g\n",
                   cJSON_GetStringValue(cJSON_GetObjectItem(o, "name")), diff,
                   mag, diff / (mag > 0 ? mag : 1));
            worst = fmax(worst, diff / (mag > 0 ? mag : 1));
            if (isnan(diff))
                worst = INFINITY;
        }
    }
    free(a);
    free(r);
    return worst;
}

/* ONNX Runtime on the inputs saved in tmp/in.bin; its best and median
 * (ms) in t[0], t[1].  77 when onnxruntime-node is not installed. */
static int
run_ort(const struct run_opts *o, const cJSON *man, const char *tmp, double *t)
{
    const cJSON *net = cJSON_GetObjectItem(man, "network"), *in;
    const char *onnx = cJSON_GetStringValue(cJSON_GetObjectItem(man, "onnx"));
    const char *env = getenv("KT_ORT_DIR"), *home = getenv("HOME");
    struct kt_buf nodepath, probe, script, inp, outp, out, thr, rep;
    char *argv[64];
    int argc = 0, rc;

    kt_buf_init(&nodepath);
    kt_buf_init(&probe);
    if (env != NULL)
        kt_buf_printf(&nodepath, "%s/node_modules", env);
    else
        kt_buf_printf(&nodepath, "%s/.cache/kerntune/ort/node_modules",
                      home ? home : "");
    kt_buf_printf(&probe, "%s/onnxruntime-node/package.json", nodepath.p);
    if (access(probe.p, R_OK) != 0) {
        fprintf(stderr,
                "kerntune: --check needs onnxruntime-node, not found in %s:\n"
                "  npm install --prefix %s --ignore-scripts "
                "onnxruntime-node@1.30.0\n"
                "(or set KT_ORT_DIR to the prefix it was installed in)\n",
                nodepath.p, env ? env : "~/.cache/kerntune/ort");
        kt_buf_free(&nodepath);
        kt_buf_free(&probe);
        return 77;
    }
    kt_buf_init(&script);
    kt_buf_init(&inp);
    kt_buf_init(&outp);
    kt_buf_init(&out);
    kt_buf_init(&thr);
    kt_buf_init(&rep);
    kt_buf_printf(&script, "%s/ort_run.js", o->dir);
    kt_buf_printf(&inp, "%s/in.bin", tmp);
    kt_buf_printf(&outp, "%s/ort.bin", tmp);
    kt_buf_printf(&out, "%s/ort.txt", tmp);
    kt_buf_printf(&thr, "%d", o->threads);
    kt_buf_printf(&rep, "%d", o->repeat);
    argv[argc++] = "node";
    argv[argc++] = script.p;
    argv[argc++] = (char *)onnx;
    argv[argc++] = inp.p;
    argv[argc++] = outp.p;
    argv[argc++] = thr.p;
    argv[argc++] = rep.p;
    cJSON_ArrayForEach (in, cJSON_GetObjectItem(net, "inputs")) {
        struct kt_buf spec;
        const cJSON *d;
        int first = 1;
        if (argc == 62)
            break;
        kt_buf_init(&spec);
        kt_buf_printf(&spec, "%s=",
                      cJSON_GetStringValue(cJSON_GetObjectItem(in, "name")));
        cJSON_ArrayForEach (d, cJSON_GetObjectItem(in, "shape")) {
            kt_buf_printf(&spec, "%s%lld", first ? "" : ",",
                          (long long)d->valuedouble);
            first = 0;
        }
        argv[argc++] = kt_buf_take(&spec);
    }
    argv[argc] = NULL;
    rc = spawn(argv, out.p, nodepath.p);
    show_output(out.p, "onnxruntime: ", t);
    if (rc != 0)
        fprintf(stderr, "kerntune: node %s: exit status %d\n", script.p, rc);
    while (argc > 7)
        free(argv[--argc]);
    kt_buf_free(&nodepath);
    kt_buf_free(&probe);
    kt_buf_free(&script);
    kt_buf_free(&inp);
    kt_buf_free(&outp);
    kt_buf_free(&out);
    kt_buf_free(&thr);
    kt_buf_free(&rep);
    return rc == 0 ? 0 : 1;
}

/* The e_machine of ELF file path, or -1. */
static int
elf_machine(const char *path)
{
    unsigned char h[20];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(h, 1, sizeof(h), f) : 0;

    if (f != NULL)
        fclose(f);
    if (n != sizeof(h) || memcmp(h, "\177ELF", 4) != 0)
        return -1;
    return h[5] == 2 ? h[18] << 8 | h[19] : h[19] << 8 | h[18];
}

/* The user-mode emulator and sysroot of the machines a Debian cross
 * toolchain builds for. */
static const struct {
    int machine;
    const char *qemu, *sysroot;
} emulators[] = {
    {183, "qemu-aarch64", "/usr/aarch64-linux-gnu"},
    {40, "qemu-arm", "/usr/arm-linux-gnueabihf"},
    {243, "qemu-riscv64", "/usr/riscv64-linux-gnu"},
    {62, "qemu-x86_64", "/usr/x86_64-linux-gnu"},
};

/* The first words of the inference program's command line: the emulator
 * (--emulator, or qemu for a program built for another machine), then
 * prog.  Their count, -1 with a message when prog cannot run here; *emu
 * is the emulator's text (caller frees). */
static int
emulator_argv(const struct run_opts *o, char *prog, char **argv, char **emu)
{
    int want = elf_machine(prog), host = elf_machine("/proc/self/exe");
    int argc = 0;
    size_t i;
    char *save = NULL, *word;

    *emu = NULL;
    if (o->emulator != NULL)
        *emu = kt_xstrdup(o->emulator);
    else if (want >= 0 && host >= 0 && want != host) {
        for (i = 0; i < sizeof(emulators) / sizeof(emulators[0]); i++)
            if (emulators[i].machine == want) {
                struct kt_buf b;
                kt_buf_init(&b);
                kt_buf_printf(&b, "%s -L %s", emulators[i].qemu,
                              emulators[i].sysroot);
                *emu = kt_buf_take(&b);
            }
        if (*emu == NULL) {
            fprintf(stderr,
                    "kerntune: %s is built for another machine (ELF machine "
                    "%d): run it there, or give --emulator CMD\n",
                    prog, want);
            return -1;
        }
    }
    if (*emu != NULL) {
        printf("kerntune:    emulator: %s (latency is the emulator's)\n", *emu);
        for (word = strtok_r(*emu, " ", &save); word != NULL && argc < 16;
             word = strtok_r(NULL, " ", &save))
            argv[argc++] = word;
    }
    argv[argc++] = prog;
    return argc;
}

/* make -C DIR infer, then DIR/<lib>_infer; its best and median (ms) in
 * t[0], t[1]. */
static int
run_ours(const struct run_opts *o, const char *lib, const char *tmp, double *tm)
{
    struct kt_buf prog, w, n, t, sv, outp, txt;
    char *argv[40], *emu = NULL;
    int argc, rc;
    char *make[] = {"make", "-s", "-C", (char *)o->dir, "infer", NULL};

    if ((rc = spawn(make, NULL, NULL)) != 0) {
        fprintf(stderr, "kerntune: make -C %s infer: exit status %d\n", o->dir,
                rc);
        return 1;
    }
    kt_buf_init(&prog);
    kt_buf_init(&w);
    kt_buf_init(&n);
    kt_buf_init(&t);
    kt_buf_init(&sv);
    kt_buf_init(&outp);
    kt_buf_init(&txt);
    kt_buf_printf(&prog, "%s/%s_infer", o->dir, lib);
    if ((argc = emulator_argv(o, prog.p, argv, &emu)) < 0) {
        kt_buf_free(&prog);
        return 1;
    }
    kt_buf_printf(&w, "%s/%s.weights", o->dir, lib);
    kt_buf_printf(&n, "%d", o->repeat);
    kt_buf_printf(&t, "%d", o->threads);
    kt_buf_printf(&sv, "%s/in.bin", tmp);
    kt_buf_printf(&txt, "%s/ours.txt", tmp);
    if (o->output != NULL)
        kt_buf_puts(&outp, o->output);
    else
        kt_buf_printf(&outp, "%s/ours.bin", tmp);
    argv[argc++] = "-w";
    argv[argc++] = w.p;
    argv[argc++] = "-n";
    argv[argc++] = n.p;
    argv[argc++] = "-t";
    argv[argc++] = t.p;
    argv[argc++] = "-s";
    argv[argc++] = sv.p;
    argv[argc++] = "-o";
    argv[argc++] = outp.p;
    if (o->profile)
        argv[argc++] = "-p";
    if (o->input != NULL) {
        argv[argc++] = "-i";
        argv[argc++] = (char *)o->input;
    }
    argv[argc] = NULL;
    rc = spawn(argv, txt.p, NULL);
    show_output(txt.p, "kerntune:    ", tm);
    if (rc != 0)
        fprintf(stderr, "kerntune: %s: exit status %d\n", prog.p, rc);
    kt_buf_free(&prog);
    kt_buf_free(&w);
    kt_buf_free(&n);
    kt_buf_free(&t);
    kt_buf_free(&sv);
    kt_buf_free(&outp);
    kt_buf_free(&txt);
    free(emu);
    return rc == 0 ? 0 : 1;
}

static int
parse_run_args(int argc, char **argv, struct run_opts *o)
{
    static const struct option opts[] = {
        {"input", required_argument, NULL, 'i'},
        {"output", required_argument, NULL, 'o'},
        {"repeat", required_argument, NULL, 'n'},
        {"threads", required_argument, NULL, 't'},
        {"check", no_argument, NULL, 'c'},
        {"tolerance", required_argument, NULL, 'T'},
        {"emulator", required_argument, NULL, 'E'},
        {"profile", no_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char *end;
    long v;
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "i:o:n:t:h", opts, NULL)) != -1) {
        switch (c) {
        case 'i': o->input = optarg; break;
        case 'o': o->output = optarg; break;
        case 'n':
            /* Range first: 4294967297 must not wrap to 1. */
            v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end || v < 1 || v > 1000000) {
                fprintf(stderr,
                        "kerntune: --repeat '%s': expected 1 to "
                        "1000000\n",
                        optarg);
                return 2;
            }
            o->repeat = (int)v;
            break;
        case 't':
            v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end || v < 0 || v > 4096) {
                fprintf(stderr,
                        "kerntune: --threads '%s': expected 0 to "
                        "4096\n",
                        optarg);
                return 2;
            }
            o->threads = (int)v;
            break;
        case 'c': o->check = 1; break;
        case 'E': o->emulator = optarg; break;
        case 'p': o->profile = 1; break;
        case 'T':
            o->tolerance = strtod(optarg, &end);
            if (*end || !(o->tolerance > 0)) {
                fprintf(stderr,
                        "kerntune: --tolerance '%s': expected a "
                        "positive number\n",
                        optarg);
                return 2;
            }
            break;
        case 'h': run_usage(stdout); return 0;
        default: run_usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        run_usage(stderr);
        return 2;
    }
    o->dir = argv[optind];
    return -1;
}

static cJSON *
load_manifest(const char *dir, const char **lib)
{
    struct kt_buf path;
    char *text;
    cJSON *man = NULL, *net;

    kt_buf_init(&path);
    kt_buf_printf(&path, "%s/manifest.json", dir);
    text = slurp(path.p, NULL);
    if (text == NULL)
        fprintf(stderr,
                "kerntune: %s: %s (not a directory written by "
                "kerntune compile)\n",
                path.p, strerror(errno));
    else if ((man = cJSON_Parse(text)) == NULL)
        fprintf(stderr, "kerntune: %s: not valid JSON\n", path.p);
    free(text);
    if (man != NULL) {
        net = cJSON_GetObjectItem(man, "network");
        *lib = cJSON_GetStringValue(cJSON_GetObjectItem(man, "library"));
        if (net == NULL || *lib == NULL) {
            const char *why = cJSON_GetStringValue(
                cJSON_GetObjectItem(man, "network_skipped"));
            fprintf(stderr, "kerntune: %s: no compiled network (%s)\n", path.p,
                    why ? why : "the model is not an ONNX model");
            cJSON_Delete(man);
            man = NULL;
        }
    }
    kt_buf_free(&path);
    return man;
}

int
kt_run_main(int argc, char **argv)
{
    struct run_opts o = {.repeat = 10, .threads = -1, .tolerance = 1e-4};
    const char *lib = NULL;
    char tmp[] = "/tmp/kerntune-run-XXXXXX";
    double ours[2] = {-1, -1}, ort[2] = {-1, -1}, err;
    struct kt_buf f;
    cJSON *man;
    int rc = parse_run_args(argc, argv, &o);

    if (rc >= 0)
        return rc;
    if ((man = load_manifest(o.dir, &lib)) == NULL)
        return 1;
    if (o.threads < 0)
        o.threads = (int)cJSON_GetNumberValue(
            cJSON_GetObjectItem(man, "threads"));
    if (mkdtemp(tmp) == NULL) {
        fprintf(stderr, "kerntune: %s: %s\n", tmp, strerror(errno));
        cJSON_Delete(man);
        return 1;
    }
    rc = run_ours(&o, lib, tmp, ours);
    if (rc == 0 && o.check)
        rc = run_ort(&o, man, tmp, ort);
    if (rc == 0 && o.check) {
        struct kt_buf a, r;
        kt_buf_init(&a);
        kt_buf_init(&r);
        kt_buf_printf(&a, "%s", o.output ? o.output : "");
        if (o.output == NULL)
            kt_buf_printf(&a, "%s/ours.bin", tmp);
        kt_buf_printf(&r, "%s/ort.bin", tmp);
        err = compare(a.p, r.p,
                      cJSON_GetObjectItem(cJSON_GetObjectItem(man, "netw"
                                                                   "ork"),
                                          "outputs"));
        if (ours[0] > 0 && ort[0] > 0)
            printf("ratio: onnxruntime / kerntune = %.3f (best), %.3f "
                   "(median); threads %d\n",
                   ort[0] / ours[0], ort[1] / ours[1], o.threads);
        printf("check: largest relative error %.3g, tolerance %g: %s\n", err,
               o.tolerance, err >= 0 && err <= o.tolerance ? "ok" : "FAILED");
        rc = err >= 0 && err <= o.tolerance ? 0 : 1;
        kt_buf_free(&a);
        kt_buf_free(&r);
    }
    kt_buf_init(&f);
    const char *names[] = {"in.bin", "ours.bin", "ort.bin", "ours.txt",
                           "ort.txt"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        kt_buf_reset(&f);
        kt_buf_printf(&f, "%s/%s", tmp, names[i]);
        unlink(f.p);
    }
    kt_buf_free(&f);
    rmdir(tmp);
    cJSON_Delete(man);
    return rc;
}
