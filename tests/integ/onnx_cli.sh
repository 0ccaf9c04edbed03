#!/bin/sh
# kerntune check on ONNX files (the fuzz seeds): --input, --graph, --partial
# and their errors; a JSON config naming the model relative to itself.
set -u
kt=${KT_BIN_DIR:-build}/kerntune
[ -x "$kt" ] || { echo "no $kt"; exit 1; }
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

expect() { # expect CODE PATTERN ARGS...
    code=$1; pat=$2; shift 2
    "$kt" "$@" >"$tmp/out" 2>&1
    rc=$?
    [ $rc -eq "$code" ] || fail "kerntune $*: exit $rc, want $code: $(cat "$tmp/out")"
    grep -q -- "$pat" "$tmp/out" || fail "kerntune $*: output lacks '$pat': $(cat "$tmp/out")"
}

cp "$here/tests/fuzz/corpus/onnx/cnn.onnx" "$tmp/cnn.onnx"
expect 1 "input 'x' dim 0 is dynamic (N): give the shape with --input x=" check "$tmp/cnn.onnx"
expect 0 "model cnn, 5 tasks" check "$tmp/cnn.onnx" --input x=2,3,8,8
expect 0 "Clip .*fused into task 0" check "$tmp/cnn.onnx" --input x=1,3,8,8 --graph
expect 0 "Softmax .*task 4" check "$tmp/cnn.onnx" --input x=1,3,8,8 --graph
expect 1 "--input 'x=1,3,': expected NAME=D1" check "$tmp/cnn.onnx" --input x=1,3,
expect 1 "--input 'y': the model has no input of that name" check "$tmp/cnn.onnx" --input y=1
expect 1 "dim 1 is 4 but the model fixes it to 3" check "$tmp/cnn.onnx" --input x=1,4,8,8
expect 1 "apply to ONNX models only" check "$here/models/tiny.json" --partial
head -c 500 "$tmp/cnn.onnx" >"$tmp/cut.onnx"
expect 1 "cut.onnx: not an ONNX model (the protobuf is malformed or truncated" \
    check "$tmp/cut.onnx" --input x=1,3,8,8
expect 1 "nothere.onnx: cannot open" check "$tmp/nothere.onnx"

mkdir "$tmp/models"
mv "$tmp/cnn.onnx" "$tmp/models/"
printf '{"onnx": "cnn.onnx", "inputs": {"x": [1, 3, 8, 8]}}\n' >"$tmp/models/cnn.json"
expect 0 "model cnn, 5 tasks" check "$tmp/models/cnn.json"
printf '{"inputs": {"x": [1, 3, 8, 8]}, "layers": []}\n' >"$tmp/models/bad.json"
expect 1 "bad.json:1:12: inputs: input shapes need an \"onnx\" model" check "$tmp/models/bad.json"
echo ok
