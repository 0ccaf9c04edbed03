#!/bin/sh
# kerntune check on ONNX files (the fuzz seeds): --input, --graph, --partial
# and their errors; a JSON config naming the model relative to itself, and
# kerntuned tuning that config from its model dir.
set -u
bin=${KT_BIN_DIR:-build}
kt=$bin/kerntune
[ -x "$kt" ] || { echo "no $kt"; exit 1; }
command -v sqlite3 >/dev/null 2>&1 || { echo "needs sqlite3"; exit 77; }
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

# kerntuned takes the same config from its model dir and tunes it.
rm "$tmp/models/bad.json"
cat >"$tmp/models/cnn.json" <<JSON
{ "onnx": "cnn.onnx", "inputs": {"x": [1, 3, 8, 8]}, "target": {"threads": 1},
  "tuning": {"trials": 10, "seed": 2}, "measure": {"repeat": 1, "min_repeat_ms": 2} }
JSON
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/token"
chmod 600 "$tmp/token"
cat >"$tmp/kerntuned.json" <<JSON
{ "listen": "127.0.0.1:0", "token_file": "$tmp/token", "database": "$tmp/tune.db",
  "log_dir": "$tmp", "model_dir": "$tmp/models", "control_socket": "$tmp/ctl.sock",
  "worker_path": "$bin/kerntune-rpc", "local_workers": 1, "threads": 2 }
JSON
"$bin/kerntuned" --config "$tmp/kerntuned.json" >"$tmp/daemon.log" 2>&1 &
dpid=$!
i=0
until "$kt" jobs --socket "$tmp/ctl.sock" 2>/dev/null | grep -Eq '^\| cnn +\| done +\|'; do
    i=$((i + 1))
    if [ $i -gt 1800 ] || ! kill -0 $dpid 2>/dev/null; then
        kill $dpid 2>/dev/null
        fail "job cnn did not finish: $(tail -20 "$tmp/daemon.log")"
    fi
    sleep 0.1
done
kill -TERM $dpid
wait $dpid || fail "kerntuned exited $?: $(tail -20 "$tmp/daemon.log")"
n=$(sqlite3 "$tmp/tune.db" "select count(*) from logs where err_no = 0;" 2>&1)
[ "$n" = 10 ] || fail "the daemon stored $n valid trials, want 10: $(tail -20 "$tmp/daemon.log")"
echo ok
