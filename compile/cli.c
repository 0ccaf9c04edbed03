/* cli.c - `kerntune compile` (see compile.h, docs/compile.md). */
#include "compile/compile.h"

#include <getopt.h>
#include <stdlib.h>

static void
compile_usage(FILE *f)
{
    fputs("usage: kerntune compile MODEL.json|MODEL.onnx -o DIR [--db FILE] "
          "[--require-tuned]\n"
          "                        [--untuned] [--input NAME=D1,D2,...] "
          "[--partial]\n"
          "                        [--serial-below MFLOP]\n"
          "  -o, --output DIR     where the library's sources and Makefile go "
          "(created)\n"
          "  --db FILE            the tuning database (default kerntune.db); "
          "read only\n"
          "  --require-tuned      fail when a task has no successful trial "
          "(default: warn\n"
          "                       and use the untuned default schedule)\n"
          "  --untuned            no database: every task gets the untuned "
          "default\n"
          "                       schedule (to check a network before "
          "tuning it)\n"
          "  --input, --partial   as for `kerntune tune` of an ONNX model\n"
          "  --serial-below M     the network runs kernels with less than M "
          "MFLOP per\n"
          "                       call on one thread (default 0.1; 0: every "
          "kernel on\n"
          "                       all threads)\n",
          f);
}

int
kt_compile_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"db", required_argument, NULL, 'd'},
        {"require-tuned", no_argument, NULL, 'r'},
        {"untuned", no_argument, NULL, 'U'},
        {"input", required_argument, NULL, 'I'},
        {"partial", no_argument, NULL, 'P'},
        {"serial-below", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct kt_compile_opts o = {.db_path = "kerntune.db"};
    struct kt_model_conf *conf = NULL;
    const char *inputs[16];
    int ninputs = 0, partial = 0, c, rc;
    char *end;
    char err[2048];

    optind = 1;
    while ((c = getopt_long(argc, argv, "o:d:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': o.out_dir = optarg; break;
        case 'd': o.db_path = optarg; break;
        case 'r': o.require_tuned = 1; break;
        case 'U': o.untuned = 1; break;
        case 'I':
            if (ninputs == (int)(sizeof(inputs) / sizeof(inputs[0]))) {
                fprintf(stderr, "kerntune: at most 16 --input options\n");
                return 2;
            }
            inputs[ninputs++] = optarg;
            break;
        case 'P': partial = 1; break;
        case 'S':
            o.serial_below_mflop = strtod(optarg, &end);
            if (*end || !(o.serial_below_mflop >= 0)) {
                fprintf(stderr,
                        "kerntune: --serial-below '%s': expected MFLOP >= "
                        "0\n",
                        optarg);
                return 2;
            }
            if (o.serial_below_mflop == 0)
                o.serial_below_mflop = -1; /* never */
            break;
        case 'h': compile_usage(stdout); return 0;
        default: compile_usage(stderr); return 2;
        }
    }
    if (optind != argc - 1 || o.out_dir == NULL ||
        (o.untuned && o.require_tuned)) {
        compile_usage(stderr);
        return 2;
    }
    if (o.untuned)
        o.db_path = "(none: --untuned)";
    rc = kt_model_conf_load_cli(argv[optind], inputs, ninputs, partial, &conf,
                                err, sizeof(err));
    if (rc == KT_OK)
        rc = kt_compile(conf, &o, stderr, err, sizeof(err));
    if (rc != KT_OK)
        fprintf(stderr, "kerntune: %s\n", err);
    kt_model_conf_free(conf);
    return rc == KT_OK ? 0 : 1;
}
