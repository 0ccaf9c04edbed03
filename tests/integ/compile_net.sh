#!/bin/sh
# The whole network of an ONNX model: two small models of the fuzz corpus
# (a conv + folded batch norm + hardswish / pools / flatten / matmul /
# softmax network, tuned a few trials; a layer-norm + matmul + GELU +
# transpose + reshape one, untuned) and, when it is cached or can be
# fetched, the PP-OCR classifier (untuned) are compiled with their network,
# built with the generated Makefile and run with `kerntune run`.  Their
# outputs are checked against ONNX Runtime (onnxruntime-node 1.30.0,
# installed into the cache dir with npm) within 1e-4; without npm or the
# registry that check is skipped with a message and the softmax outputs
# are checked to sum to 1.  Errors: a library without a network, weights
# of another model, --check without ONNX Runtime.
set -u
bin=${KT_BIN_DIR:-build}
kt=$bin/kerntune
[ -x "$kt" ] || { echo "no $kt"; exit 1; }
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cache=${KT_CACHE_DIR:-${HOME:-/tmp}/.cache/kerntune}

# ONNX Runtime for node, once per cache dir (its install script only
# fetches GPU libraries: skipped).
ort=${KT_ORT_DIR:-$cache/ort}
have_ort=0
if [ -f "$ort/node_modules/onnxruntime-node/package.json" ]; then
    have_ort=1
elif command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
    mkdir -p "$ort" &&
        timeout 300 npm install --prefix "$ort" --ignore-scripts --no-audit \
            --no-fund --fetch-retries 1 onnxruntime-node@1.30.0 >"$tmp/npm.log" 2>&1 &&
        have_ort=1
fi
[ $have_ort -eq 1 ] || echo "note: ONNX Runtime cannot be installed ($(grep -m1 error "$tmp/npm.log" 2>/dev/null || echo no npm)); outputs checked without it"
export KT_ORT_DIR=$ort

# softmax_sums FILE ROWS COLS: every row of the float32 file sums to 1.
softmax_sums() {
    od -An -v -f -w4 "$1" | awk -v c="$3" -v r="$2" '
        { s += $1; n++; if (n % c == 0) { if (s < 0.9999 || s > 1.0001) bad = 1; s = 0 } }
        END { exit (bad || n != r * c) }'
}

# strict LIB: the generated network and inference program build
# warning-free with -Wall -Wextra (gcc, and clang when installed).
strict() {
    m=$(sed -n 's/^LIB *= *//p' "$1/Makefile")
    for c in cc clang; do
        # clang without OpenMP's header (libomp-dev) is left out
        printf '#include <omp.h>\nint f(void);\nint f(void) { return omp_get_max_threads(); }\n' >"$tmp/omp.c"
        $c -fopenmp -c "$tmp/omp.c" -o "$tmp/omp.o" >/dev/null 2>&1 || continue
        for f in "${m}_net.c" "${m}_infer.c"; do
            $c -O2 -fopenmp -Wall -Wextra -Werror -c "$1/$f" -o "$tmp/strict.o" \
                2>"$tmp/cc.log" || fail "$c -Wall -Wextra -Werror $f: $(head -20 "$tmp/cc.log")"
        done
    done
}

# profile LIB: --profile prints one line per step, their shares of the
# best times add up to 100 %, within the rounding of each share to 0.1 %
# (a network of 76 steps, many under 0.05 %, read 99.3-99.9).
profile() {
    "$kt" run "$1" --repeat 3 --threads 1 --profile >"$tmp/prof.log" 2>&1 ||
        fail "run --profile $1: $(cat "$tmp/prof.log")"
    steps=$(sed -n 's/.*profile: \([0-9]*\) steps, their best times add up to .*/\1/p' "$tmp/prof.log")
    [ -n "$steps" ] || fail "run --profile $1: $(cat "$tmp/prof.log")"
    grep 'profile: *[0-9][0-9]* *[0-9.]* *[0-9.]* *[0-9.]*%  ' "$tmp/prof.log" |
        awk -v n="$steps" '{ match($0, /[0-9.]+%/); s += substr($0, RSTART, RLENGTH - 1); k++ }
            END { r = 0.05 * k + 0.01; exit (k != n || s < 100 - r || s > 100 + r) }' ||
        fail "run --profile $1: not $steps steps adding up to 100%: $(cat "$tmp/prof.log")"
}

# check LIB: runs the network; with ONNX Runtime, compares.
check() {
    strict "$1"
    profile "$1"
    "$kt" run "$1" --repeat 3 --threads 1 --output "$tmp/out.bin" >"$tmp/run.log" 2>&1 ||
        fail "run $1: $(cat "$tmp/run.log")"
    grep -q "latency: best .* ms, median .* ms over 3 runs" "$tmp/run.log" ||
        fail "run $1: $(cat "$tmp/run.log")"
    grep -q "memory: [0-9]* bytes of activations (peak)" "$tmp/run.log" ||
        fail "run $1: $(cat "$tmp/run.log")"
    [ $have_ort -eq 1 ] || return 0
    "$kt" run "$1" --repeat 3 --threads 1 --check >"$tmp/check.log" 2>&1 ||
        fail "run --check $1: $(cat "$tmp/check.log")"
    grep -q "check: largest relative error .*, tolerance 0.0001: ok" "$tmp/check.log" ||
        fail "run --check $1: $(cat "$tmp/check.log")"
    grep "check:" "$tmp/check.log"
}

cp "$here/tests/fuzz/corpus/onnx/cnn.onnx" "$here/tests/fuzz/corpus/onnx/transformer.onnx" "$tmp/"
cat >"$tmp/cnn.json" <<'JSON'
{ "onnx": "cnn.onnx", "inputs": {"x": [2, 3, 8, 8]}, "target": {"threads": 1},
  "tuning": {"trials": 10, "seed": 3}, "measure": {"repeat": 1, "min_repeat_ms": 1} }
JSON
# Under the sanitizers (make integ-asan) the network is compiled untuned;
# the plain build tunes it first (schedules with packed weights).
case $bin in
*asan*) db="--untuned" ;;
*)
    # --log-dir names a directory that does not exist yet: tune creates it
    "$kt" tune "$tmp/cnn.json" --db "$tmp/t.db" --log-dir "$tmp/logs" --workers 1 --quiet \
        >"$tmp/tune.log" 2>&1 || fail "tune: $(tail -20 "$tmp/tune.log")"
    ls "$tmp/logs"/*.log >/dev/null 2>&1 || fail "tune --log-dir wrote no task table"
    ! grep -q "task-table log" "$tmp/tune.log" || fail "tune: $(grep "task-table log" "$tmp/tune.log")"
    db="--db=$tmp/t.db"
    ;;
esac
"$kt" compile "$tmp/cnn.json" "$db" -o "$tmp/cnn" >"$tmp/c.log" 2>&1 ||
    fail "compile: $(cat "$tmp/c.log")"
grep -q "network: 6 steps, peak activation memory [0-9]* bytes" "$tmp/c.log" ||
    fail "compile: $(cat "$tmp/c.log")"
for f in cnn_net.c cnn_infer.c cnn.weights ort_run.js; do
    [ -s "$tmp/cnn/$f" ] || fail "compile wrote no $f"
done
grep -q '"peak_activation_bytes"' "$tmp/cnn/manifest.json" || fail "manifest: no network"
grep -q "int cnn_run(struct cnn_net \*net" "$tmp/cnn/cnn.h" || fail "cnn.h lacks cnn_run"
grep -q "void cnn_profile(struct cnn_net \*net, double \*step_ms)" "$tmp/cnn/cnn.h" ||
    fail "cnn.h lacks cnn_profile"
make -C "$tmp/cnn" >"$tmp/make.log" 2>&1 || fail "make: $(tail -20 "$tmp/make.log")"
make -C "$tmp/cnn" check >"$tmp/make.log" 2>&1 || fail "make check: $(tail -20 "$tmp/make.log")"
check "$tmp/cnn"
softmax_sums "$tmp/out.bin" 2 4 || fail "cnn: softmax rows do not sum to 1"

# The same inputs give the same outputs (--input); a short file is refused.
"$kt" run "$tmp/cnn" --input "$tmp/out.bin" >"$tmp/run.log" 2>&1 &&
    fail "run with a short input passed"
grep -q "exactly the input's" "$tmp/run.log" || fail "short input: $(cat "$tmp/run.log")"
(cd "$tmp/cnn" && ./cnn_infer -s "$tmp/in.bin" -n 1 >/dev/null) || fail "cnn_infer -s"
"$kt" run "$tmp/cnn" --input "$tmp/in.bin" --output "$tmp/o1.bin" >/dev/null 2>&1 &&
    "$kt" run "$tmp/cnn" --input "$tmp/in.bin" --output "$tmp/o2.bin" >/dev/null 2>&1 ||
    fail "run --input"
cmp -s "$tmp/o1.bin" "$tmp/o2.bin" || fail "the same input gave different outputs"

# The network cross-built for aarch64 and run under qemu gives the native
# outputs on the same input (skipped without the cross tools).
if command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && command -v qemu-aarch64 >/dev/null 2>&1; then
    cp -r "$tmp/cnn" "$tmp/cnn64"
    make -C "$tmp/cnn64" clean >/dev/null
    make -C "$tmp/cnn64" CC=aarch64-linux-gnu-gcc CFLAGS="-O2 -fopenmp" infer \
        >"$tmp/make.log" 2>&1 || fail "aarch64 build: $(tail -20 "$tmp/make.log")"
    (cd "$tmp/cnn64" && qemu-aarch64 -L /usr/aarch64-linux-gnu ./cnn_infer \
        -i "$tmp/in.bin" -o "$tmp/o64.bin" -n 1) >"$tmp/run.log" 2>&1 ||
        fail "qemu-aarch64 cnn_infer: $(cat "$tmp/run.log")"
    od -An -v -f -w4 "$tmp/o1.bin" >"$tmp/o1.txt"
    od -An -v -f -w4 "$tmp/o64.bin" >"$tmp/o64.txt"
    paste "$tmp/o1.txt" "$tmp/o64.txt" | awk '
        { d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5) bad = 1; n++ }
        END { exit (bad || n != 8) }' || fail "aarch64 outputs differ: $(paste "$tmp/o1.txt" "$tmp/o64.txt")"
    echo "aarch64 (qemu): the same outputs"
else
    echo "note: aarch64-linux-gnu-gcc or qemu-aarch64 missing; cross build not checked"
fi

# Weights of another model are refused by init.
"$kt" compile "$tmp/transformer.onnx" --untuned -o "$tmp/tf" >"$tmp/c.log" 2>&1 ||
    fail "compile --untuned: $(cat "$tmp/c.log")"
grep -q "warning: --untuned: all 2 tasks" "$tmp/c.log" || fail "$(cat "$tmp/c.log")"
check "$tmp/tf"
cp "$tmp/tf/transformer.weights" "$tmp/cnn/cnn.weights"
"$kt" run "$tmp/cnn" >"$tmp/run.log" 2>&1 && fail "run with foreign weights passed"
grep -q "not the weights of this library" "$tmp/run.log" || fail "$(cat "$tmp/run.log")"

# A library without a network; --check without ONNX Runtime.
printf '{"name": "g", "tasks": [{"name": "mm", "compute": ["C[i,j] += A[i,k] * B[k,j]"], "shapes": {"A": [4, 4], "B": [4, 4]}}]}\n' >"$tmp/g.json"
"$kt" compile "$tmp/g.json" --untuned -o "$tmp/g" >/dev/null 2>&1 || fail "compile g"
"$kt" run "$tmp/g" >"$tmp/run.log" 2>&1 && fail "run without a network passed"
grep -q "no compiled network (the model is not an ONNX model)" "$tmp/run.log" ||
    fail "$(cat "$tmp/run.log")"
KT_ORT_DIR=$tmp/none "$kt" run "$tmp/tf" --check >"$tmp/run.log" 2>&1
[ $? -eq 77 ] || fail "--check without ONNX Runtime: $(cat "$tmp/run.log")"
grep -q "needs onnxruntime-node, not found in $tmp/none" "$tmp/run.log" || fail "$(cat "$tmp/run.log")"

# The PP-OCR classifier (tests/integ/onnx_model.sh fetches it), untuned.
model=$cache/ch_ppocr_mobile_v2.0_cls_infer.onnx
if [ -s "$model" ]; then
    "$kt" compile "$model" --input x=1,3,48,192 --untuned -o "$tmp/cls" >"$tmp/c.log" 2>&1 ||
        fail "compile cls: $(cat "$tmp/c.log")"
    grep -q "network: 76 steps" "$tmp/c.log" || fail "cls: $(cat "$tmp/c.log")"
    check "$tmp/cls"
    softmax_sums "$tmp/out.bin" 1 2 || fail "cls: softmax does not sum to 1"
else
    echo "note: $model is not cached (onnx_model.sh fetches it); classifier not checked"
fi
echo "ok"
