/* config.h - the per-model configs (one JSON file per model) and the daemon
 * config (kerntuned.json): plain structs, loaders with defaults and range
 * checks, and error messages that name the file, line:column and key path:
 *
 *   models/x.json:12:5: layers[3].stride: must be >= 1 (got 0)
 *   models/x.json:9:7: layers[2]: unknown key "strides" (did you mean "stride"?)
 *
 * Every key, its type, range and default lives in one table (config/keys.c);
 * kt_config_keys_markdown() prints those tables and docs/config.md carries
 * them.  The loaders build a fresh struct; on error nothing is half-applied.
 * Config structs are plain values owned by the caller; free them with the
 * matching _free function.  Not thread-safe; no global state. */
#ifndef KT_CONFIG_H
#define KT_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#define KT_CONFIG_MAX_BYTES (4u << 20) /* larger config files are refused */
#define KT_CONFIG_MAX_DEPTH 32 /* deeper nesting of [ and { is refused */
#define KT_CONFIG_MAX_LAYERS 4096
#define KT_CONFIG_MAX_TASKS 1024

/* A list of strings, each malloc'd, owned by the list. */
struct kt_strlist {
    int n;
    char **v;
};

/* ---- Model config ------------------------------------------------------ */

enum kt_strategy { KT_STRATEGY_GRADIENT, KT_STRATEGY_ROUND_ROBIN };

enum kt_policy {
    KT_POLICY_SKETCH_XGB,
    KT_POLICY_SKETCH_RANDOM,
    KT_POLICY_RANDOM
};

struct kt_target_conf {
    char *kind; /* "cpu" */
    char *cc;   /* compiler command, e.g. "gcc" */
    struct kt_strlist cflags;
    char *sysroot;        /* NULL when not given */
    int64_t threads;      /* 0 = all cores of the worker */
    char *key;            /* worker key ("local") */
    int64_t vector_bytes; /* 0 = detect on the host; else 16, 32, 64 */
};

struct kt_tuning_conf {
    int64_t trials; /* total measured trials for the model */
    int64_t measures_per_round;
    int strategy;               /* enum kt_strategy */
    int policy;                 /* enum kt_policy */
    int64_t early_stopping;     /* per task: trials without gain; 0 = off */
    int64_t early_stopping_all; /* whole model; 0 = off */
    int64_t
        max_failed_rounds; /* rounds with no valid program -> dead; 0 = never */
    int64_t seed;
    double alpha;
    double beta;
    int64_t backward_window_size;
    int64_t population;   /* evolutionary search population */
    int64_t train_window; /* cost model: recent programs trained on */
};

struct kt_measure_conf {
    int64_t number;
    int64_t repeat;
    int64_t min_repeat_ms;
    int64_t cooldown_ms;
    int flush_cache; /* boolean */
    double build_timeout_s;
    double run_timeout_s;
    double tolerance;  /* relative error allowed against the reference */
    double stop_ratio; /* early stop above this x the task's best; 0 off */
    double settle;     /* repeat 3: two repeats this close end the timing */
    double placement_wait_s; /* longest hold per spell of CPUs apart */
};

enum kt_layer_op {
    KT_LAYER_CONV2D,
    KT_LAYER_DENSE,
    KT_LAYER_MATMUL,
    KT_LAYER_BATCH_MATMUL,
    KT_LAYER_MAXPOOL,
    KT_LAYER_AVGPOOL,
    KT_LAYER_GLOBAL_AVG_POOL,
    KT_LAYER_ADD,
    KT_LAYER_MUL,
    KT_LAYER_RELU,
    KT_LAYER_HARDSWISH,
    KT_LAYER_SIGMOID,
    KT_LAYER_SOFTMAX,
    KT_LAYER_NOPS
};

/* One entry of "layers".  Only the fields of its op are meaningful; the
 * others stay 0.  For "add", bias_operand says the second operand is a
 * per-channel bias (so the add can fuse into a producer's epilogue). */
struct kt_layer {
    int op;     /* enum kt_layer_op */
    char *name; /* optional "name", else NULL */
    int index;  /* position in the "layers" array */
    int line;   /* line of the layer object in the file */
    int64_t repeat;
    int64_t N, C, H, W, K, R, S, B, M;
    int64_t stride[2], pad[2], dilation[2];
    int64_t groups;
    int epilogue; /* KT_EPI_* bits of ir.h: 1 bias, 2 relu */
    int transpose_b;
    int const_b;        /* matmul: B is a constant weight */
    int64_t kernel;     /* pools */
    int64_t rows, cols; /* softmax */
    int nshape;         /* elementwise shape, 1..4 dims */
    int64_t shape[4];
    int bias_operand; /* add: "operand": "bias" */
};

/* One tensor shape of an explicit task. */
struct kt_task_shape {
    char *name;
    int ndim;
    int64_t dims[8];
};

/* One entry of "tasks": an explicit compute definition. */
struct kt_task_conf {
    char *name;
    struct kt_strlist compute; /* one statement per entry */
    int nshapes;
    struct kt_task_shape *shapes;
    double weight;
    char *group; /* similarity group tag, NULL = none */
    int index;
};

struct kt_model_conf {
    char *path; /* the file it was read from */
    char *name;
    char *source; /* free text, NULL when absent */
    struct kt_target_conf target;
    struct kt_tuning_conf tuning;
    struct kt_measure_conf measure;
    int nlayers;
    struct kt_layer *layers;
    int ntasks;
    struct kt_task_conf *tasks;
    char *onnx;  /* ONNX model path (resolved against the
                                * config's directory), NULL when absent */
    int ninputs; /* "inputs": shapes of ONNX graph inputs */
    struct kt_task_shape *inputs;
    int onnx_partial; /* "partial": unsupported nodes run untuned */
    int winograd;     /* "winograd": convolutions in Winograd form where
                         kt_winograd_choose says it pays; -1 unset: for
                         onnx models only */
};

/* Name of a layer op ("conv2d", ...) or "?". */
const char *kt_layer_op_name(int op);
const char *kt_strategy_name(int strategy);
const char *kt_policy_name(int policy);

/* Reads and validates the model config at path.  On success *out is a new
 * config (caller frees with kt_model_conf_free).  On failure returns
 * KT_ECONFIG (bad content), KT_EPARSE (JSON syntax), -errno (cannot read)
 * or KT_ETOOBIG, writes "path:line:col: key.path: problem" to err, and
 * leaves *out NULL. */
int kt_model_conf_load(const char *path, struct kt_model_conf **out, char *err,
                       size_t errlen);
/* As kt_model_conf_load, from text in memory; 'path' names it in
 * messages and gives the default model name.  Copies text. */
int kt_model_conf_parse(const char *path, const char *text,
                        struct kt_model_conf **out, char *err, size_t errlen);
void kt_model_conf_free(struct kt_model_conf *m); /* NULL is a no-op */
/* The model of a command line: a JSON config, or an .onnx file taken with
 * default settings (as `tvmc tune model.onnx`).  input_specs are
 * "NAME=D1,D2,..." (--input), which set or replace ONNX input shapes;
 * partial sets "partial".  Same contract as kt_model_conf_load. */
int kt_model_conf_load_cli(const char *path, const char *const *input_specs,
                           int ninputs, int partial, struct kt_model_conf **out,
                           char *err, size_t errlen);

/* The compiler command line of a target ("gcc -O3 -march=native -fopenmp",
 * then --sysroot=PATH when set), appended to b. */
void kt_target_cc_line(const struct kt_target_conf *t, struct kt_buf *b);
/* The target's identity in the database, appended to b: "KIND:KEY:" and
 * the compiler line (the logs.target column of trials tuned for it). */
void kt_target_id(const struct kt_target_conf *t, struct kt_buf *b);
/* 1 if the two target identities (kt_target_id) are siblings: the same
 * kind, key and compiler line once optimiser-only flags (-O0..-O3, -Os,
 * -Oz, -Og, --param=...) are left out, e.g. records tuned before a model's
 * -O level or a --param changed.  A sibling's records warm-start the cost
 * model and seed the search but are not this target's trials
 * (docs/measure.md, "Compiler flags and stored records"). */
int kt_target_siblings(const char *a, const char *b);

/* ---- Daemon config ----------------------------------------------------- */

struct kt_daemon_conf {
    char *path;
    char *listen;      /* "HOST:PORT" as written */
    char *listen_host; /* split from listen */
    int listen_port;
    char *token_file;
    struct kt_strlist key_tokens; /* "KEY=TOKEN_FILE": that key's own token */
    struct kt_strlist build_keys; /* "KEY=BUILD_KEY": trusted builders */
    char *database;
    char *log_dir;
    char *model_dir;
    char *control_socket;
    char *worker_path; /* kerntune-rpc binary for local workers */
    char *local_worker_key;
    int64_t local_workers;
    int64_t threads;         /* libuv thread-pool size */
    int log_level;           /* LOG_ERR .. LOG_DEBUG */
    int64_t max_job_retries; /* re-queues of a lost worker's job */
    double worker_timeout_s; /* silent worker declared lost */
};

/* Reads and validates kerntuned.json; same contract as kt_model_conf_load
 * (caller frees *out with kt_daemon_conf_free). */
int kt_daemon_conf_load(const char *path, struct kt_daemon_conf **out,
                        char *err, size_t errlen);
int kt_daemon_conf_parse(const char *path, const char *text,
                         struct kt_daemon_conf **out, char *err, size_t errlen);
void kt_daemon_conf_free(struct kt_daemon_conf *d); /* NULL is a no-op */

/* Appends Markdown tables of every accepted key (name, type, default,
 * range, meaning) for docs/config.md.  The tables are generated from the
 * same key tables the loaders use. */
void kt_config_keys_markdown(struct kt_buf *b);

#endif /* KT_CONFIG_H */
