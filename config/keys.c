/* keys.c - every accepted config key: name, type, range, default and
 * meaning.  The loaders read objects through these tables (keys_read.c:
 * so an unknown key is always an error), defaults are applied from them,
 * and kt_config_keys_markdown() prints them for docs/config.md. */
#include "config/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIM_MAX 16777216.0 /* 2^24: any one tensor dimension */
#define NOLIM 0.0, 0.0

/* ---- model: top level -------------------------------------------------- */
static const struct kt__key model_keys[] = {
    {"name", KT_K_STR, offsetof(struct kt_model_conf, name), NOLIM,
     "(file name without .json)", NULL,
     "Model name: letters, digits, '_', '-', '.'; names the job, its log "
     "file and its rows in the database."},
    {"source", KT_K_STR, offsetof(struct kt_model_conf, source), NOLIM, "null",
     NULL, "Where the layer shapes come from (paper, code); free text."},
    {"comment", KT_K_IGNORED, 0, NOLIM, "null", NULL,
     "Free text (string, or array of strings), ignored."},
    {"target", KT_K_OBJECT, 0, NOLIM, "{}", NULL,
     "Compiler and worker "
     "selection; see *target*."},
    {"tuning", KT_K_OBJECT, 0, NOLIM, "{}", NULL,
     "Search budget and "
     "strategy; see *tuning*."},
    {"measure", KT_K_OBJECT, 0, NOLIM, "{}", NULL,
     "Timing options; see "
     "*measure*."},
    {"layers", KT_K_ARRAY, 0, NOLIM, "[]", NULL,
     "The model as a list of "
     "layers; they go through task extraction (fusion, dedup, weights)."},
    {"tasks", KT_K_ARRAY, 0, NOLIM, "[]", NULL,
     "Explicit compute "
     "definitions, taken as written. At least one layer or task (or an "
     "onnx model) is required."},
    {"onnx", KT_K_STR, offsetof(struct kt_model_conf, onnx), NOLIM, "null", NULL,
     "An ONNX model file (relative to this config) whose operators "
     "become the tasks; see docs/onnx.md."},
    {"inputs", KT_K_OBJECT, 0, NOLIM, "{}", NULL,
     "ONNX: shapes of graph "
     "inputs, {\"x\": [1, 3, 224, 224]}; required for dynamic dims."},
    {"partial", KT_K_BOOL, offsetof(struct kt_model_conf, onnx_partial), NOLIM,
     "false", NULL,
     "ONNX: import a model with unsupported operators; "
     "those nodes run untuned."},
    {"winograd", KT_K_BOOL, offsetof(struct kt_model_conf, winograd), NOLIM,
     "null", NULL,
     "Convolutions with stride 1 along the rows in Winograd form where that "
     "pays (docs/compute.md). null: true for an onnx model (the compiled "
     "network transforms the weights), false for layers (a library kernel "
     "would take transformed weights)."},
};

static const char *const target_kinds[] = {"cpu", NULL};

static const struct kt__key target_keys[] = {
    {"kind", KT_K_STR, offsetof(struct kt_target_conf, kind), NOLIM, "\"cpu\"",
     target_kinds, "Target kind. Only \"cpu\" exists today."},
    {"cc", KT_K_STR, offsetof(struct kt_target_conf, cc), NOLIM, "\"gcc\"", NULL,
     "Compiler command (a cross compiler for a board, e.g. "
     "\"aarch64-linux-gnu-gcc\"); run without a shell."},
    {"cflags", KT_K_STRLIST, offsetof(struct kt_target_conf, cflags), NOLIM,
     "[\"-O3\", \"-march=native\", \"-fopenmp\"]", NULL,
     "Compiler flags, one argument per string (-shared -fPIC are added)."},
    {"sysroot", KT_K_STR, offsetof(struct kt_target_conf, sysroot), NOLIM,
     "null", NULL, "Passed as --sysroot=PATH when set."},
    {"threads", KT_K_INT, offsetof(struct kt_target_conf, threads), 0, 1024,
     "0", NULL, "OpenMP threads per kernel; 0 = every core of the worker."},
    {"key", KT_K_STR, offsetof(struct kt_target_conf, key), NOLIM, "\"local\"",
     NULL,
     "Worker key: the workers (kerntune-rpc --key=KEY) "
     "that build and run this model's candidates."},
    {"vector_bytes", KT_K_INT, offsetof(struct kt_target_conf, vector_bytes), 0,
     64, "0", NULL,
     "SIMD width for code generation: 16, 32 or 64; 0 = "
     "detect on the host (set it when cross compiling)."},
};

static const char *const strategies[] = {"gradient", "round-robin", NULL};
/* enum kt_policy order; the one table of policy names */
const char *const kt__policy_names[] = {"sketch.xgb", "sketch.random", "random",
                                        NULL};

static const struct kt__key tuning_keys[] = {
    {"trials", KT_K_INT, offsetof(struct kt_tuning_conf, trials), 1, 1e9,
     "2000", NULL, "Total measured trials for the whole model."},
    {"measures_per_round", KT_K_INT,
     offsetof(struct kt_tuning_conf, measures_per_round), 1, 4096, "64", NULL,
     "Trials per round of one task; the scheduler uses min(this, "
     "trials / number of tasks), and for a task's first round at most "
     "trials / (2 x number of tasks), at least 8."},
    {"strategy", KT_K_ENUM, offsetof(struct kt_tuning_conf, strategy), NOLIM,
     "\"gradient\"", strategies,
     "Task scheduler: Ansor's gradient strategy "
     "or round-robin."},
    {"policy", KT_K_ENUM, offsetof(struct kt_tuning_conf, policy), NOLIM,
     "\"sketch.xgb\"", kt__policy_names,
     "Search policy: sketches + evolutionary "
     "search scored by XGBoost, the same with a random model, or plain "
     "random sampling."},
    {"early_stopping", KT_K_INT,
     offsetof(struct kt_tuning_conf, early_stopping), 0, 1e9, "0", NULL,
     "Per task: a task that has gone this many trials without a better "
     "program is done (dead). 0 = off."},
    {"early_stopping_all", KT_K_INT,
     offsetof(struct kt_tuning_conf, early_stopping_all), 0, 1e9, "0", NULL,
     "Whole model: stop when the estimated total latency has not improved "
     "for this many trials (only once every task has a valid program). 0 = "
     "off. This is TVM's TuningOptions.early_stopping."},
    {"max_failed_rounds", KT_K_INT,
     offsetof(struct kt_tuning_conf, max_failed_rounds), 0, 1e6, "3", NULL,
     "A task whose first N rounds gave no valid program is dead. 0 = never "
     "(Ansor's behaviour, where such a task takes the whole budget)."},
    {"seed", KT_K_INT, offsetof(struct kt_tuning_conf, seed), 0, 9.0e15, "1",
     NULL, "Seed of every random choice (search and scheduler ties)."},
    {"alpha", KT_K_NUM, offsetof(struct kt_tuning_conf, alpha), 0, 1, "0.2",
     NULL,
     "Gradient strategy: weight of the backward gradient against the "
     "forward gradient."},
    {"beta", KT_K_NUM, offsetof(struct kt_tuning_conf, beta), 1, 1000, "2", NULL,
     "Gradient strategy: similar-task speed-up factor and the threshold "
     "for leaving a group."},
    {"backward_window_size", KT_K_INT,
     offsetof(struct kt_tuning_conf, backward_window_size), 1, 1000, "3", NULL,
     "Gradient strategy: window (rounds) of the backward gradient."},
    {"population", KT_K_INT, offsetof(struct kt_tuning_conf, population), 16,
     65536, "2048", NULL,
     "Evolutionary search: population of each generation (Ansor's "
     "default). Smaller searches a round faster and less widely."},
    {"train_window", KT_K_INT, offsetof(struct kt_tuning_conf, train_window), 1,
     1e7, "4096", NULL,
     "Cost model: it trains on the last train_window measured programs and "
     "the 16 fastest of each task (at most train_window of those), which "
     "bounds the memory and training time of a long job."},
};

static const struct kt__key measure_keys[] = {
    {"number", KT_K_INT, offsetof(struct kt_measure_conf, number), 1, 1e6, "1",
     NULL,
     "Kernel calls per repeat (raised until a repeat lasts "
     "min_repeat_ms)."},
    {"repeat", KT_K_INT, offsetof(struct kt_measure_conf, repeat), 1, 1000, "3",
     NULL,
     "Repeats; with 3 or more the fastest and slowest are dropped "
     "from the mean."},
    {"min_repeat_ms", KT_K_INT, offsetof(struct kt_measure_conf, min_repeat_ms),
     0, 60000, "100", NULL, "Minimum duration of one repeat, in milliseconds."},
    {"cooldown_ms", KT_K_INT, offsetof(struct kt_measure_conf, cooldown_ms), 0,
     60000, "0", NULL, "Pause between repeats, in milliseconds."},
    {"flush_cache", KT_K_BOOL, offsetof(struct kt_measure_conf, flush_cache),
     NOLIM, "false", NULL, "Flush the CPU caches before each repeat."},
    {"stop_ratio", KT_K_NUM, offsetof(struct kt_measure_conf, stop_ratio), 0,
     1e6, "3", NULL,
     "Early stop: a candidate whose first repeat is more than this many "
     "times slower than the task's best so far (stored, or measured earlier "
     "in the same round) gets no more repeats (stored with the kvs note "
     "early_stop); 0 = off."},
    {"settle", KT_K_NUM, offsetof(struct kt_measure_conf, settle), 0, 1, "0.05",
     NULL,
     "With repeat 3 the cost is the median of three repeats, which always "
     "lies between the first two: when those two differ by at most this "
     "fraction the third is not timed (cost = their mean, off by at most "
     "half this; kvs note settled); 0 times all three."},
    {"placement_wait_s", KT_K_NUM,
     offsetof(struct kt_measure_conf, placement_wait_s), 0, 3600, "0", NULL,
     "While a host's CPUs sit apart (a cache line between the kernel's "
     "first two CPUs takes over twice its quiet time: a VM's vCPUs on "
     "different CCXs), its results are marked contended; with this > 0 its "
     "runs are held instead and those candidates timed again once the CPUs "
     "are close, for at most this many seconds per spell (docs/measure.md, "
     "Thread placement)."},
    {"build_timeout_s", KT_K_NUM,
     offsetof(struct kt_measure_conf, build_timeout_s), 0.1, 3600, "15", NULL,
     "Compiler CPU time per candidate, seconds (err_no 6 after; wall time "
     "is cut off at 4 times this)."},
    {"run_timeout_s", KT_K_NUM, offsetof(struct kt_measure_conf, run_timeout_s),
     0.1, 3600, "10", NULL,
     "Run deadline per candidate, seconds (err_no 7 after)."},
    {"tolerance", KT_K_NUM, offsetof(struct kt_measure_conf, tolerance), 1e-9,
     0.5, "0.001", NULL,
     "Relative error allowed against the reference "
     "kernel before err_no 5 (WRONG_ANSWER)."},
};

static const struct kt__key task_keys[] = {
    {"name", KT_K_STR, offsetof(struct kt_task_conf, name), NOLIM, NULL, NULL,
     "Task name."},
    {"compute", KT_K_STRLIST, offsetof(struct kt_task_conf, compute), NOLIM,
     NULL, NULL,
     "Compute definition, one statement per string (or one string)."},
    {"shapes", KT_K_OBJECT, 0, NOLIM, NULL, NULL,
     "Tensor shapes: {\"A\": [1024, 1024], ...}; inputs are required, "
     "others are inferred when omitted."},
    {"weight", KT_K_NUM, offsetof(struct kt_task_conf, weight), 1e-9, 1e9, "1",
     NULL, "How many times the task runs per model inference."},
    {"group", KT_K_STR, offsetof(struct kt_task_conf, group), NOLIM, "null",
     NULL,
     "Similarity group tag for the gradient scheduler (tasks with the "
     "same tag form a group); null = no group."},
    {"comment", KT_K_IGNORED, 0, NOLIM, "null", NULL, "Ignored."},
};

/* ---- layers ------------------------------------------------------------ */
#define L(f) offsetof(struct kt_layer, f)

const char *const kt__layer_ops[KT_LAYER_NOPS + 1] =
    {"conv2d",  "dense",   "matmul",          "batch_matmul",
     "maxpool", "avgpool", "global_avg_pool", "add",
     "mul",     "relu",    "hardswish",       "sigmoid",
     "softmax", NULL};

static const struct kt__key layer_common_keys[] = {
    {"op", KT_K_ENUM, L(op), NOLIM, NULL, kt__layer_ops, "The operator."},
    {"name", KT_K_STR, L(name), NOLIM, "null", NULL, "Label for messages."},
    {"repeat", KT_K_INT, L(repeat), 1, 100000, "1", NULL,
     "The layer occurs "
     "this many times in a row (a stack of identical layers)."},
    {"comment", KT_K_IGNORED, 0, NOLIM, "null", NULL, "Ignored."},
};

#define K_N(def)                                                               \
    {                                                                          \
        "N", KT_K_INT, L(N), 1, DIM_MAX, def, NULL, "Batch."                   \
    }
#define K_DIM(nm, f, doc)                                                      \
    {                                                                          \
        nm, KT_K_INT, L(f), 1, DIM_MAX, NULL, NULL, doc                        \
    }
#define K_EPI                                                                  \
    {                                                                          \
        "epilogue", KT_K_EPILOGUE, L(epilogue), NOLIM, "[]", NULL,             \
            "Fused elementwise tail: [], [\"bias\"], [\"relu\"] or "           \
            "[\"bias\", \"relu\"] (in that order)."                            \
    }

static const struct kt__key conv2d_keys[] = {
    K_N("1"),
    K_DIM("C", C, "Input channels."),
    K_DIM("H", H, "Input height."),
    K_DIM("W", W, "Input width."),
    K_DIM("K", K, "Output channels."),
    K_DIM("R", R, "Kernel height."),
    K_DIM("S", S, "Kernel width."),
    {"stride", KT_K_PAIR, L(stride), 1, 64, "1", NULL,
     "Stride: a number, or [h, w]."},
    {"pad", KT_K_PAIR, L(pad), 0, 64, "0", NULL,
     "Zero padding on each side: "
     "a number, or [h, w]."},
    {"dilation", KT_K_PAIR, L(dilation), 1, 64, "1", NULL,
     "Dilation: a number, or [h, w]."},
    {"groups", KT_K_INT, L(groups), 1, DIM_MAX, "1", NULL,
     "Groups; C and K "
     "must be multiples. groups = C = K is a depthwise convolution."},
    K_EPI,
};

static const struct kt__key dense_keys[] = {
    {"M", KT_K_INT, L(M), 1, DIM_MAX, "1", NULL, "Rows of the input (batch)."},
    K_DIM("N", N, "Output features."),
    K_DIM("K", K, "Input features (reduction)."),
    K_EPI,
};

static const struct kt__key matmul_keys[] = {
    K_DIM("M", M, "Rows of A and C."),
    K_DIM("N", N, "Columns of B and C."),
    K_DIM("K", K, "Reduction."),
    {"const_b", KT_K_BOOL, L(const_b), NOLIM, "false", NULL,
     "B is a constant weight (a layer's parameters, as an ONNX MatMul "
     "reading an initializer): a schedule may store it in the layout it "
     "reads, packed once outside the timed call."},
};

static const struct kt__key bmm_keys[] = {
    K_DIM("B", B, "Batch (e.g. attention heads)."),
    K_DIM("M", M, "Rows."),
    K_DIM("N", N, "Columns."),
    K_DIM("K", K, "Reduction."),
    {"transpose_b", KT_K_BOOL, L(transpose_b), NOLIM, "false", NULL,
     "B is given as [batch, N, K] (Q x K^T in attention)."},
};

static const struct kt__key pool_keys[] = {
    K_N("1"),
    K_DIM("C", C, "Channels."),
    K_DIM("H", H, "Input height."),
    K_DIM("W", W, "Input width."),
    {"kernel", KT_K_INT, L(kernel), 1, 64, NULL, NULL, "Window size."},
    {"stride", KT_K_PAIR, L(stride), 1, 64, "(kernel)", NULL,
     "Stride; defaults to the window size. Both values must be equal."},
    {"pad", KT_K_PAIR, L(pad), 0, 64, "0", NULL,
     "Padding; both values must "
     "be equal."},
};

static const struct kt__key gap_keys[] = {
    K_N("1"),
    K_DIM("C", C, "Channels."),
    K_DIM("H", H, "Input height."),
    K_DIM("W", W, "Input width."),
};

#define K_SHAPE                                                                \
    {                                                                          \
        "shape", KT_K_SHAPE, L(nshape), 1, DIM_MAX, NULL, NULL,                \
            "Tensor shape, 1 to 4 dimensions (NCHW, or [M, N] after "          \
            "a dense layer)."                                                  \
    }

static const char *const add_operands[] = {"tensor", "bias", NULL};

static const struct kt__key add_keys[] = {
    K_SHAPE,
    {"operand", KT_K_ENUM, L(bias_operand), NOLIM, "\"tensor\"", add_operands,
     "\"tensor\": a same-shape add (residual); \"bias\": a per-channel "
     "bias, fused into a directly preceding conv2d/dense."},
};

static const struct kt__key unary_keys[] = {
    K_SHAPE,
};

static const struct kt__key softmax_keys[] = {
    K_DIM("rows", rows, "Rows (softmax over each row)."),
    K_DIM("cols", cols, "Columns."),
};

#define TAB(sec, arr)                                                          \
    {                                                                          \
        sec, arr, (int)KT_ARRAY_LEN(arr)                                       \
    }

const struct kt__keytab kt__tab_model = TAB("model (top level)", model_keys);
const struct kt__keytab kt__tab_target = TAB("target", target_keys);
const struct kt__keytab kt__tab_tuning = TAB("tuning", tuning_keys);
const struct kt__keytab kt__tab_measure = TAB("measure", measure_keys);
const struct kt__keytab kt__tab_task = TAB("tasks[]", task_keys);
const struct kt__keytab kt__tab_layer_common = TAB("layers[] (every op)",
                                                   layer_common_keys);
const struct kt__keytab kt__tab_layer[KT_LAYER_NOPS] = {
    TAB("layers[] op conv2d", conv2d_keys),
    TAB("layers[] op dense", dense_keys),
    TAB("layers[] op matmul", matmul_keys),
    TAB("layers[] op batch_matmul", bmm_keys),
    TAB("layers[] op maxpool", pool_keys),
    TAB("layers[] op avgpool", pool_keys),
    TAB("layers[] op global_avg_pool", gap_keys),
    TAB("layers[] op add", add_keys),
    TAB("layers[] op mul", unary_keys),
    TAB("layers[] op relu", unary_keys),
    TAB("layers[] op hardswish", unary_keys),
    TAB("layers[] op sigmoid", unary_keys),
    TAB("layers[] op softmax", softmax_keys),
};

/* ---- daemon ------------------------------------------------------------ */
#define D(f) offsetof(struct kt_daemon_conf, f)
static const char *const log_levels[] = {"err",  "warning", "notice",
                                         "info", "debug",   NULL};

static const struct kt__key daemon_keys[] = {
    {"listen", KT_K_STR, D(listen), NOLIM, "\"127.0.0.1:9190\"", NULL,
     "Tracker address workers connect to, HOST:PORT ([v6addr]:PORT for "
     "IPv6); port 0 picks a free port (then only local workers can join)."},
    {"token_file", KT_K_STR, D(token_file), NOLIM, "\"/etc/kerntune/token\"",
     NULL,
     "Shared secret for worker "
     "authentication (challenge-response), accepted for every worker key "
     "that has no token of its own."},
    {"key_tokens", KT_K_STRLIST, D(key_tokens), NOLIM, "[]", NULL,
     "\"KEY=TOKEN_FILE\" entries: workers of KEY must prove that token "
     "(and it proves no other key). Local workers always get a random token "
     "bound to local_worker_key."},
    {"build_keys", KT_K_STRLIST, D(build_keys), NOLIM, "[]", NULL,
     "\"KEY=BUILD_KEY\" entries: workers of BUILD_KEY may also build what "
     "workers of KEY run (a shared build host). Otherwise an object is "
     "built by a worker of the key that runs it."},
    {"database", KT_K_STR, D(database), NOLIM, "\"/var/lib/kerntune/tune.db\"",
     NULL, "SQLite database of all trials."},
    {"log_dir", KT_K_STR, D(log_dir), NOLIM, "\"/var/log/kerntune\"", NULL,
     "Task-table logs and total_latency.tsv, one set per job."},
    {"model_dir", KT_K_STR, D(model_dir), NOLIM, "\"/etc/kerntune/models\"",
     NULL, "Each *.json here is one tuning job (re-read on SIGHUP)."},
    {"control_socket", KT_K_STR, D(control_socket), NOLIM,
     "\"/run/kerntune/control.sock\"", NULL,
     "Unix socket used by the "
     "kerntune CLI."},
    {"worker_path", KT_K_STR, D(worker_path), NOLIM, "null", NULL,
     "The worker program started for local workers; null: kerntune-rpc "
     "next to kerntuned, else in PATH (as `kerntune tune`); a name without "
     "'/' is looked up in PATH."},
    {"local_worker_key", KT_K_STR, D(local_worker_key), NOLIM, "\"local\"",
     NULL, "Key of the local workers."},
    {"local_workers", KT_K_INT, D(local_workers), 0, 16, "1", NULL,
     "Workers the daemon starts itself; 0 = remote workers only (the "
     "production setup runs kerntune-rpc@local.service instead)."},
    {"threads", KT_K_INT, D(threads), 1, 128, "2", NULL,
     "Thread-pool size "
     "for search, features and training (UV_THREADPOOL_SIZE)."},
    {"log_level", KT_K_ENUM, D(log_level), NOLIM, "\"info\"", log_levels,
     "Least important level logged."},
    {"max_job_retries", KT_K_INT, D(max_job_retries), 0, 100, "2", NULL,
     "Times a lost worker's job is re-queued before err_no 8."},
    {"worker_timeout_s", KT_K_NUM, D(worker_timeout_s), 1, 86400, "30", NULL,
     "A worker silent this long is declared lost."},
    {"comment", KT_K_IGNORED, 0, NOLIM, "null", NULL, "Ignored."},
};

const struct kt__keytab kt__tab_daemon = TAB("kerntuned.json", daemon_keys);

/* ---- documentation ----------------------------------------------------- */

static const char *
doc_type(const struct kt__key *k)
{
    switch (k->type) {
    case KT_K_INT: return "integer";
    case KT_K_NUM: return "number";
    case KT_K_BOOL: return "boolean";
    case KT_K_STR: return k->enums ? "string (enum)" : "string";
    case KT_K_ENUM: return "string (enum)";
    case KT_K_STRLIST: return "array of strings";
    case KT_K_PAIR: return "integer or [h, w]";
    case KT_K_EPILOGUE: return "array of strings";
    case KT_K_SHAPE: return "array of integers";
    case KT_K_OBJECT: return "object";
    case KT_K_ARRAY: return "array";
    case KT_K_IGNORED: return "any";
    }
    return "?";
}

static void
doc_table(struct kt_buf *b, const struct kt__keytab *tab)
{
    int i, j;
    kt_buf_printf(b,
                  "#### %s\n\n| key | type | default | range | meaning "
                  "|\n|---|---|---|---|---|\n",
                  tab->section);
    for (i = 0; i < tab->nkeys; i++) {
        const struct kt__key *k = &tab->keys[i];
        char lo[32], hi[32];
        kt_buf_printf(b, "| `%s` | %s | %s | ", k->name, doc_type(k),
                      k->def ? k->def : "**required**");
        if (k->enums != NULL) {
            for (j = 0; k->enums[j] != NULL; j++)
                kt_buf_printf(b, "%s`%s`", j ? ", " : "", k->enums[j]);
        } else if (k->min < k->max) {
            kt__fmt_num(k->min, lo, sizeof(lo));
            kt__fmt_num(k->max, hi, sizeof(hi));
            kt_buf_printf(b, "%s .. %s", lo, hi);
        }
        kt_buf_printf(b, " | %s |\n", k->doc);
    }
    kt_buf_puts(b, "\n");
}

void
kt_config_keys_markdown(struct kt_buf *b)
{
    int i;
    doc_table(b, &kt__tab_model);
    doc_table(b, &kt__tab_target);
    doc_table(b, &kt__tab_tuning);
    doc_table(b, &kt__tab_measure);
    doc_table(b, &kt__tab_layer_common);
    for (i = 0; i < KT_LAYER_NOPS; i++)
        doc_table(b, &kt__tab_layer[i]);
    doc_table(b, &kt__tab_task);
    doc_table(b, &kt__tab_daemon);
}
