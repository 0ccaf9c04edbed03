#!/bin/sh
# docs/boards.md on one machine, qemu-aarch64 standing in for the board:
# `make rpc-cross`, `kerntune check` of the example board config, kerntuned
# listening beyond loopback with a token, the documented builder and board
# worker command lines, an x86_64 worker wrongly started with --roles run
# under the board's key (refused, with the log line), and the job tuned to
# its budget with every successful trial timed on the board.
set -u
bin=${KT_BIN_DIR:-build}
here=$(cd "$(dirname "$0")/../.." && pwd)
for tool in aarch64-linux-gnu-gcc qemu-aarch64 sqlite3 python3; do
    command -v $tool >/dev/null 2>&1 || { echo "needs $tool (gcc-aarch64-linux-gnu, qemu-user)"; exit 77; }
done
[ -d /usr/aarch64-linux-gnu/lib ] || { echo "needs libc6-dev-arm64-cross"; exit 77; }
T=$(mktemp -d /tmp/kt-boards.XXXXXX)
PIDS=
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    for p in $PIDS; do wait "$p" 2>/dev/null; done
    [ "${KEEP:-0}" = 1 ] || rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- daemon log"; tail -30 "$T/daemon.log" 2>/dev/null; exit 1; }

# 1. The worker for the board.
make -s -C "$here" rpc-cross CROSS=aarch64-linux-gnu- BUILD="$T/xb" >"$T/cross.log" 2>&1 ||
    fail "make rpc-cross: $(tail -5 "$T/cross.log")"
board_rpc=$T/xb/aarch64-linux-gnu/kerntune-rpc
qemu-aarch64 -L /usr/aarch64-linux-gnu "$board_rpc" --version | grep -q '^kerntune-rpc ' ||
    fail "the cross-built worker does not run under qemu"

# 3. The example board config checks; the test tunes its target with one
# small task and a budget of 8.
"$bin/kerntune" check "$here/dist/board-model.json" >"$T/check.log" 2>&1 ||
    fail "kerntune check dist/board-model.json: $(cat "$T/check.log")"
mkdir -p "$T/models" "$T/logs"
python3 - "$here/dist/board-model.json" "$T/models/board.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["name"] = "board"
m["target"]["threads"] = 1
m["tuning"] = {"trials": 8, "measures_per_round": 8, "seed": 5}
m["measure"] = {"repeat": 1, "min_repeat_ms": 1, "run_timeout_s": 60}
del m["layers"]
m["tasks"] = [{"name": "mm", "compute": ["C[i,j] += A[i,k] * B[k,j]"],
               "shapes": {"A": [16, 16], "B": [16, 16]}}]
json.dump(m, open(sys.argv[2], "w"))
PY
key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["target"]["key"])' "$T/models/board.json")

# 2. The daemon listens for other hosts, with a token.
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/token"
chmod 600 "$T/token"
port=$((20000 + $$ % 20000))
cat > "$T/kerntuned.json" <<EOF
{ "listen": "0.0.0.0:$port", "token_file": "$T/token", "database": "$T/tune.db",
  "log_dir": "$T/logs", "model_dir": "$T/models", "control_socket": "$T/ctl.sock",
  "local_workers": 0, "threads": 2 }
EOF
"$bin/kerntuned" --config "$T/kerntuned.json" >"$T/daemon.log" 2>&1 &
PIDS="$!"
i=0
until grep -q "kerntuned: ready" "$T/daemon.log"; do
    i=$((i + 1)); [ $i -gt 100 ] && fail "kerntuned not ready"; sleep 0.1
done

# 4. The documented workers, and one that must be refused.
tracker=127.0.0.1:$port
"$bin/kerntune-rpc" server --tracker=$tracker --key=$key --roles build --jobs 2 \
    --token-file "$T/token" >"$T/builder.log" 2>&1 &
PIDS="$PIDS $!"
qemu-aarch64 -L /usr/aarch64-linux-gnu "$board_rpc" server --tracker=$tracker --key=$key \
    --roles run --token-file "$T/token" --name=board1 >"$T/board.log" 2>&1 &
PIDS="$PIDS $!"
"$bin/kerntune-rpc" server --tracker=$tracker --key=$key --roles run --name=wrong-arch \
    --token-file "$T/token" >"$T/wrong.log" 2>&1 &
PIDS="$PIDS $!"

job_done() { "$bin/kerntune" jobs --socket "$T/ctl.sock" 2>/dev/null | grep -Eq '^\| board +\| done +\|'; }
i=0
until job_done; do
    i=$((i + 1)); [ $i -gt 3000 ] && fail "the board job did not finish in 300 s"; sleep 0.1
done
grep -q "worker wrong-arch is x86_64-linux-gnu but the jobs of key $key target aarch64-linux-gnu: it cannot run their kernels; refused" \
    "$T/daemon.log" || fail "no refusal line for the x86_64 run worker"
grep -q "tracker refused us: worker wrong-arch is x86_64-linux-gnu" "$T/wrong.log" ||
    fail "the refused worker was not told why: $(tail -3 "$T/wrong.log")"
n=$(sqlite3 "$T/tune.db" "select count(*) from logs")
[ "$n" = 8 ] || fail "$n trials stored, want 8"
ok=$(sqlite3 "$T/tune.db" "select count(*) from logs where err_no = 0")
[ "$ok" -gt 0 ] || fail "no successful trial: $(sqlite3 "$T/tune.db" 'select err_no, err_text from logs limit 3')"
others=$(sqlite3 "$T/tune.db" "select count(*) from logs where err_no = 0 and worker != 'board1'")
[ "$others" = 0 ] || fail "$others successful trials were not timed on the board"
echo "board job: $ok of 8 trials timed on the qemu board, x86_64 run worker refused"
exit 0
