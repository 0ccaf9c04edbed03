#!/bin/sh
# kerntuned end to end: the real daemon with a local worker in a temp state
# dir, two jobs tuning at once, SIGHUP adding a third, a broken config next
# to them, SIGTERM in the middle of a job and a restart that resumes it, and
# a fake NOTIFY_SOCKET that must see READY=1 and STOPPING=1.  Every number is
# checked against the database.
set -u
BIN=${KT_BIN_DIR:?}
for tool in sqlite3 python3; do
    command -v $tool >/dev/null 2>&1 || { echo "needs $tool"; exit 77; }
done
T=$(mktemp -d /tmp/kt-daemon.XXXXXX)
DPID=
cleanup() {
    [ -n "$DPID" ] && kill -9 "$DPID" 2>/dev/null
    [ -n "${SINKPID:-}" ] && kill "$SINKPID" 2>/dev/null
    [ "${KEEP:-0}" = 1 ] || rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- daemon log"; tail -40 "$T/daemon.log"; exit 1; }

mkdir -p "$T/models" "$T/logs"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/token"
chmod 600 "$T/token"
cat > "$T/kerntuned.json" <<EOF
{ "listen": "127.0.0.1:0", "token_file": "$T/token", "database": "$T/tune.db",
  "log_dir": "$T/logs", "model_dir": "$T/models", "control_socket": "$T/ctl.sock",
  "worker_path": "$BIN/kerntune-rpc", "local_workers": 1, "threads": 2 }
EOF
model() {  # name trials M N K
    cat > "$T/$1.json.tmp" <<EOF
{ "name": "$1", "target": {"threads": 1},
  "tuning": {"trials": $2, "measures_per_round": 8, "seed": 3},
  "measure": {"repeat": 3, "min_repeat_ms": 2},
  "tasks": [ {"name": "mm", "compute": ["O[i,j] += A[i,k] * B[k,j]"],
              "shapes": {"A": [$3, $5], "B": [$5, $4]}} ] }
EOF
    mv "$T/$1.json.tmp" "$T/models/$1.json"
}
trials_of() {
    sqlite3 "$T/tune.db" "select count(*) from logs where job_id=(select id from jobs where name='$1');"
}
dups_of() {
    sqlite3 "$T/tune.db" "select count(*) - count(distinct sched_hash) from logs where job_id=(select id from jobs where name='$1');"
}
wait_for() {  # seconds command...
    limit=$1; shift
    i=0
    while [ $i -lt $((limit * 10)) ]; do
        "$@" && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}
state_is() {  # job state
    "$BIN/kerntune" jobs --socket "$T/ctl.sock" 2>/dev/null | grep -E "^\| $1 +\| $2 +\|" >/dev/null
}
notified() { grep -q "$1" "$T/notify.txt" 2>/dev/null; }
start_daemon() {
    NOTIFY_SOCKET="$T/notify.sock" "$BIN/kerntuned" --config "$T/kerntuned.json" \
        >>"$T/daemon.log" 2>&1 &
    DPID=$!
}

# Fake systemd: a datagram socket that records every notification.
python3 - "$T/notify.sock" "$T/notify.txt" <<'EOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as f:
    while True:
        f.write(s.recv(4096).decode() + "\n")
EOF
SINKPID=$!
wait_for 5 test -S "$T/notify.sock" || fail "notify sink did not start"

model a 16 32 32 32
model b 16 24 40 16
start_daemon
wait_for 20 notified READY=1 || fail "no READY=1"
wait_for 20 test -S "$T/ctl.sock" || fail "no control socket"

# A broken config next to the good ones: named with file, line and key.
cat > "$T/models/d.json" <<EOF
{ "name": "d",
  "tuning": {"trials": 8, "measures_per_roud": 8},
  "tasks": [ {"name": "mm", "compute": ["O[i,j] += A[i,k] * B[k,j]"],
              "shapes": {"A": [8, 8], "B": [8, 8]}} ] }
EOF
# SIGHUP with a third config added starts it.
model c 8 16 16 16
kill -HUP $DPID
wait_for 120 state_is a done || fail "job a did not finish"
wait_for 120 state_is b done || fail "job b did not finish"
wait_for 120 state_is c done || fail "job c (added by SIGHUP) did not finish"
grep -q 'd.json:2:[0-9]*: tuning: unknown key "measures_per_roud" (did you mean "measures_per_round"?)' \
    "$T/daemon.log" || fail "the broken config was not reported with file, line and key"
for j in a b c; do
    want=16; [ $j = c ] && want=8
    [ "$(trials_of $j)" = $want ] || fail "job $j: $(trials_of $j) trials in the database, want $want"
    [ "$(dups_of $j)" = 0 ] || fail "job $j measured a schedule twice"
    # The task table and the tsv agree with the database.
    grep -q '|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |' "$T/logs/$j.log" || fail "$j.log has no task table"
    last=$(grep -o 'Trials: [0-9]*' "$T/logs/$j.log" | tail -1 | cut -d' ' -f2)
    [ "$last" = $want ] || fail "$j.log ends at $last trials, want $want"
    rounds=$(grep -c . "$T/logs/$j.total_latency.tsv")
    [ "$rounds" = $((want / 8)) ] || fail "$j tsv has $rounds lines, want $((want / 8))"
    tsv=$(tail -1 "$T/logs/$j.total_latency.tsv" | awk -F'\t' '{print $6}')
    [ "$tsv" = $want ] || fail "$j tsv ends at $tsv trials, want $want"
    best_db=$(sqlite3 "$T/tune.db" "select printf('%.3f', min(cost)*1e3) from logs where err_no=0 and job_id=(select id from jobs where name='$j');")
    best_log=$(grep -E '^\|    0 \|' "$T/logs/$j.log" | tail -1 | awk -F'|' '{gsub(/ /,"",$3); print $3}')
    [ "$best_db" = "$best_log" ] || fail "$j: best latency $best_log ms in the log, $best_db ms in the database"
done
echo "three jobs tuned to their budgets; broken config reported"

# Progress: trials / budget, percent and ETA in the log, STATUS= and the CLI,
# the same figures from the database alone (--db) while the daemon runs.
grep -q '^Progress: 16/16 trials (100.0%), done$' "$T/logs/a.log" || fail "a.log has no progress line"
grep -Eq '^Progress: 8/16 trials \(50.0%\), ETA [0-9]+[smhd]' "$T/logs/a.log" || fail "a.log has no ETA half way"
status_done() { grep -q '^STATUS=.*: .*a 16/16 trials (100.0%), done.*c 8/8 trials (100.0%), done' "$T/notify.txt"; }
wait_for 12 status_done || fail "STATUS= lacks the jobs' progress: $(grep STATUS= "$T/notify.txt" | tail -2)"
for src in "--socket $T/ctl.sock" "--db $T/tune.db"; do
    "$BIN/kerntune" tasks a $src --json > "$T/a.json" || fail "tasks a $src --json"
    python3 - "$T/a.json" <<'PY' || fail "tasks a $src --json: $(cat "$T/a.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"] and r["job"] == "a" and r["trials"] == 16, r
assert r["trials_target"] == 16 and r["percent"] == 100 and r["eta_s"] == 0, r
assert len(r["tasks"]) == 1 and r["tasks"][0]["trials"] == 16, r
PY
    "$BIN/kerntune" jobs $src | grep -Eq '^\| b +\| done +\| +1 \| +16 \| +16 \| 100.0% \| done \|' ||
        fail "jobs $src: $("$BIN/kerntune" jobs $src 2>&1)"
done

# SIGTERM in the middle of a job, then a restart resumes it.
model e 48 48 48 48
kill -HUP $DPID
got_some() { cnt=$(trials_of e 2>/dev/null); [ "${cnt:-0}" -gt 0 ] && [ "$cnt" -lt 48 ]; }
wait_for 60 got_some || fail "job e did not start measuring"
kill -TERM $DPID
i=0
while kill -0 $DPID 2>/dev/null && [ $i -lt 1500 ]; do sleep 0.1; i=$((i + 1)); done
kill -0 $DPID 2>/dev/null && fail "daemon did not exit within 150 s of SIGTERM"
wait $DPID; rc=$?
DPID=
[ $rc = 0 ] || fail "daemon exited $rc after SIGTERM"
notified STOPPING=1 || fail "no STOPPING=1"
before=$(trials_of e)
[ "$(sqlite3 "$T/tune.db" 'pragma integrity_check;')" = ok ] || fail "database integrity"
echo "stopped with $before of 48 trials of job e committed"
start_daemon
wait_for 180 state_is e done || fail "job e did not finish after the restart"
[ "$(trials_of e)" = 48 ] || fail "job e: $(trials_of e) trials after resume, want exactly 48"
grep -Eq "^STATUS=.* e $before/48 trials \([0-9.]+%\), ETA -" "$T/notify.txt" ||
    grep -Eq "^STATUS=.* e [0-9]+/48 trials \([0-9.]+%\), ETA [0-9]" "$T/notify.txt" ||
    fail "STATUS= never showed job e's progress: $(grep STATUS= "$T/notify.txt" | tail -3)"
[ "$(dups_of e)" = 0 ] || fail "job e measured a schedule twice across the restart"
[ "$(trials_of a)" = 16 ] || fail "job a was tuned again after the restart"
kill -TERM $DPID
wait $DPID; rc=$?
DPID=
[ $rc = 0 ] || fail "daemon exited $rc"
grep -E 'Sanitizer|runtime error' "$T/daemon.log" && fail "sanitizer output in the daemon log"
echo "resumed job e to exactly 48 trials with no repeats"
exit 0
