#!/bin/sh
# The service under load (make bench-load): a real kerntuned on 127.0.0.1
# with JOBS small matmul jobs whose budgets sum to TRIALS, and CONNS worker
# connections of bench/fake_worker (the real protocol, answers at once).
# Checks in SQLite that every trial is stored exactly once, then reports the
# daemon's CPU share, its memory over time and the dispatch latency the
# workers saw.  Exit 1 on a lost or doubled trial.
#
#   sh bench/load.sh [--bin build] [--trials 20000] [--jobs 8] [--conns 64]
#                    [--train-window 512] [--keep] [--wrap 'valgrind ...']
# A job's cost model keeps its last --train-window measured programs, so the
# heap grows until every job's window is full; the check needs the windows
# to fill early (the default window, 4096, would not fill in 2,500 trials
# per job).
# --wrap runs the daemon under a command (a profiler); the daemon is then
# stopped with SIGTERM at the end so the tool writes its output.
set -u
BIN=build
TRIALS=20000
JOBS=8
CONNS=64
TRAIN_WINDOW=512
KEEP=0
WRAP=
while [ $# -gt 0 ]; do
    case $1 in
    --bin) BIN=$2; shift 2 ;;
    --trials) TRIALS=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --conns) CONNS=$2; shift 2 ;;
    --train-window) TRAIN_WINDOW=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --wrap) WRAP=$2; shift 2 ;;
    *) echo "load.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
command -v sqlite3 >/dev/null 2>&1 || { echo "load.sh: needs sqlite3" >&2; exit 2; }
[ $((TRIALS % JOBS)) = 0 ] || { echo "load.sh: --trials must be a multiple of --jobs" >&2; exit 2; }
PER_JOB=$((TRIALS / JOBS))

T=$(mktemp -d /tmp/kt-load.XXXXXX)
DPID= WPID= SPID=
cleanup() {
    [ -n "$SPID" ] && kill "$SPID" 2>/dev/null
    [ -n "$WPID" ] && kill "$WPID" 2>/dev/null
    [ -n "$DPID" ] && kill -9 "$DPID" 2>/dev/null
    # the fake worker writes its stats as it goes: wait before removing
    for p in $SPID $WPID $DPID; do wait "$p" 2>/dev/null; done
    if [ "$KEEP" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
# A failed run keeps its directory (database, logs, samples.txt).
fail() { echo "FAIL: $*"; echo "--- daemon log"; tail -30 "$T/daemon.log"; KEEP=1; exit 1; }

mkdir -p "$T/models" "$T/logs"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/token"
chmod 600 "$T/token"
cat > "$T/kerntuned.json" <<EOF
{ "listen": "127.0.0.1:0", "token_file": "$T/token", "database": "$T/tune.db",
  "log_dir": "$T/logs", "model_dir": "$T/models", "control_socket": "$T/ctl.sock",
  "worker_path": "$BIN/kerntune-rpc", "local_workers": 0, "threads": 2 }
EOF
# One matmul task per job, each of another shape (so another workload).
j=0
while [ $j -lt "$JOBS" ]; do
    m=$((32 + 8 * j)) n=$((48 + 8 * j)) k=$((40 + 4 * j))
    cat > "$T/models/load$j.json" <<EOF
{ "name": "load$j", "target": {"threads": 1, "key": "load"},
  "tuning": {"trials": $PER_JOB, "measures_per_round": 64, "seed": $((j + 1)),
             "train_window": $TRAIN_WINDOW},
  "measure": {"repeat": 3, "min_repeat_ms": 1},
  "tasks": [ {"name": "mm", "compute": ["O[i,j] += A[i,k] * B[k,j]"],
              "shapes": {"A": [$m, $k], "B": [$k, $n]}} ] }
EOF
    j=$((j + 1))
done

echo "== kerntune load test: $JOBS jobs x $PER_JOB trials = $TRIALS, $CONNS worker connections"
echo "CPU: $(sh "$(dirname "$0")/cpu.sh"); $(nproc) CPUs"
echo "load before: $(uptime | sed 's/.*load average/load average/')"

: >"$T/daemon.log"
# shellcheck disable=SC2086
$WRAP "$BIN/kerntuned" --config "$T/kerntuned.json" >"$T/daemon.log" 2>&1 &
DPID=$!
i=0
PORT=
while [ $i -lt 600 ] && [ -z "$PORT" ]; do
    PORT=$(sed -n 's/.*tracker: listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$T/daemon.log" | head -1)
    sleep 0.1
    i=$((i + 1))
done
[ -n "$PORT" ] || fail "the daemon never said which port its tracker listens on"

# RSS (kB) and utime+stime (ticks) of the daemon every second, what its
# allocations hold and the trials it has measured (`kerntune status`).
HZ=$(getconf CLK_TCK)
status_field() { # NAME JSON
    printf '%s\n' "$2" | sed -n "s/.*\"$1\":[[:space:]]*\([0-9.e+]*\).*/\1/p" | head -1
}
sample() {
    while kill -0 "$DPID" 2>/dev/null; do
        rss=$(sed -n 's/^VmRSS:[^0-9]*\([0-9]*\).*/\1/p' /proc/$DPID/status 2>/dev/null)
        # fields 14 and 15 of stat, after the ")" that ends the command name
        cpu=$(sed 's/.*) //' /proc/$DPID/stat 2>/dev/null | awk '{print $12 + $13}')
        st=$("$BIN/kerntune" status --json --socket "$T/ctl.sock" 2>/dev/null)
        heap=$(status_field heap_bytes "$st")
        trials=$(status_field trials "$st")
        [ -n "$rss" ] && echo "$(date +%s.%N) $rss $cpu ${heap:-0} ${trials:-0}"
        sleep 1
    done
}
sample > "$T/samples.txt" &
SPID=$!

START=$(date +%s.%N)
"$BIN/bench/fake_worker" --tracker "127.0.0.1:$PORT" --key load \
    --token-file "$T/token" --conns "$CONNS" --stats "$T/worker.txt" \
    >/dev/null 2>"$T/worker.log" &
WPID=$!

all_done() {
    [ "$(sqlite3 "$T/tune.db" "select count(*) from jobs where state='done';" 2>/dev/null)" = "$JOBS" ]
}
LIMIT=${LOAD_TIMEOUT_S:-3600}
t0=$(date +%s)
last=-1
while ! all_done; do
    kill -0 "$DPID" 2>/dev/null || fail "the daemon died"
    kill -0 "$WPID" 2>/dev/null || { cat "$T/worker.log"; fail "the fake worker died"; }
    now=$(date +%s)
    [ $((now - t0)) -lt "$LIMIT" ] || fail "not done after $LIMIT s"
    if [ $(((now - t0) / 60)) != "$last" ]; then
        last=$(((now - t0) / 60))
        echo "  $((now - t0)) s: $(sqlite3 "$T/tune.db" 'select count(*) from logs;' 2>/dev/null) trials stored"
    fi
    sleep 1
done
END=$(date +%s.%N)
CPU_END=$(sed 's/.*) //' /proc/$DPID/stat | awk '{print $12 + $13}')
kill "$WPID"
wait "$WPID"
WPID=
kill "$SPID" 2>/dev/null
SPID=
# What the daemon keeps once every job is done and the workers are gone.
sleep 5
RSS_IDLE=$(sed -n 's/^VmRSS:[^0-9]*\([0-9]*\).*/\1/p' /proc/$DPID/status)
HEAP_IDLE=$(status_field heap_bytes "$("$BIN/kerntune" status --json --socket "$T/ctl.sock" 2>/dev/null)")
HEAP_IDLE=${HEAP_IDLE:-0}
echo "load after: $(uptime | sed 's/.*load average/load average/')"
# A clean stop (and a profiler's output) once the jobs are done.
kill -TERM "$DPID"
i=0
while kill -0 "$DPID" 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
kill -0 "$DPID" 2>/dev/null && fail "the daemon did not stop within 120 s of SIGTERM"
wait "$DPID"
STOP_RC=$?
DPID=
[ "$STOP_RC" = 0 ] || fail "the daemon exited with status $STOP_RC on SIGTERM"

# ---- every trial stored exactly once
q() { sqlite3 "$T/tune.db" "$1"; }
total=$(q "select count(*) from logs;")
dup=$(q "select count(*) from (select job_id, workload_hash, trial_no from logs
         group by 1, 2, 3 having count(*) > 1);")
bad_range=$(q "select count(*) from (select job_id, min(trial_no) lo, max(trial_no) hi,
               count(*) n from logs group by job_id)
               where lo != 0 or hi != $PER_JOB - 1 or n != $PER_JOB;")
jobs_seen=$(q "select count(distinct job_id) from logs;")
errs=$(q "select count(*) from logs where err_no != 0;")
echo "trials stored: $total (want $TRIALS) in $jobs_seen jobs; doubled (job, task, trial_no): $dup;" \
    "jobs whose trial_no is not exactly 0..$((PER_JOB - 1)): $bad_range; err_no != 0: $errs"
q "select e.name, count(*) from logs l join err_names e using(err_no)
   where l.err_no != 0 group by 1;" | sed 's/^/  errors: /'

# ---- CPU share, memory, latency
awk -v s="$START" -v e="$END" -v c="$CPU_END" -v hz="$HZ" 'BEGIN {
    w = e - s; printf "wall %.1f s; daemon CPU %.1f s = %.1f%% of one core over the run\n",
        w, c / hz, 100 * c / hz / w }'
awk -v trials="$TRIALS" -v s="$START" -v e="$END" 'BEGIN {
    printf "throughput %.1f trials/s\n", trials / (e - s) }'
awk -v idle="$RSS_IDLE" -v idle_heap="$HEAP_IDLE" '{ r[NR] = $2; h[NR] = $4; n[NR] = $5 } END {
    q = int(NR / 4); if (q < 1) { print "memory: too few samples"; exit }
    for (k = 0; k < 4; k++) { m[k] = 0; mh[k] = 0
        for (i = k * q + 1; i <= (k + 1) * q; i++) {
            m[k] += r[i] / q / 1024; mh[k] += h[i] / q / 1048576 } }
    max = 0; for (i = 1; i <= NR; i++) if (r[i] > max) max = r[i]
    printf "daemon RSS by quarter of the run (mean MiB): %.1f %.1f %.1f %.1f; last vs first quarter %+.1f%%, peak %.1f MiB, %d samples\n",
        m[0], m[1], m[2], m[3], 100 * (m[3] - m[0]) / m[0], max / 1024, NR
    printf "daemon heap in use by quarter (mean MiB): %.1f %.1f %.1f %.1f\n",
        mh[0], mh[1], mh[2], mh[3]
    # least squares of heap in use against trials measured
    for (i = 1; i <= NR; i++) if (n[i] > 0) {
        c++; sx += n[i]; sy += h[i]; sxx += n[i] * n[i]; sxy += n[i] * h[i] }
    if (c > 2 && c * sxx - sx * sx > 0)
        printf "daemon heap growth with the trials of the running jobs: %.1f KiB per trial\n",
            (c * sxy - sx * sy) / (c * sxx - sx * sx) / 1024
    printf "daemon 5 s after the last job finished (workers gone): RSS %.1f MiB, heap in use %.1f MiB\n",
        idle / 1024, idle_heap / 1048576
    # A sample often lands inside a search round, whose population is
    # freed when it ends (tens of MiB with 8 jobs), so the lowest sample of
    # each quarter is the heap the run keeps.  Flat: the last quarter keeps
    # at most 25% more than the second, by when every job has filled its
    # bounded state (its training window, the measured seeds of its search).
    for (k = 0; k < 4; k++) { lo[k] = -1
        for (i = k * q + 1; i <= (k + 1) * q; i++) if (lo[k] < 0 || h[i] < lo[k]) lo[k] = h[i]
        lo[k] /= 1048576 }
    printf "daemon heap kept (lowest sample) by quarter (MiB): %.1f %.1f %.1f %.1f\n",
        lo[0], lo[1], lo[2], lo[3]
    printf "memory flat: %s; returned after the jobs: %s\n",
        lo[3] <= 1.25 * lo[1] ? "yes" : "no (the heap kept grows after the second quarter)",
        idle / 1024 <= 1.1 * m[0] ? "yes" : "no" }' "$T/samples.txt"
# The daemon's own view: per round, the time from handing its candidates to
# the tracker to having every result back (builds and runs of the round),
# and the time its search took before that.
cat "$T"/logs/*.log | awk '
    /^Time elapsed for measurement:/ { m[++nm] = $5 }
    /^EvolutionarySearch/ { s[++ns] = $NF }
    function sort(a, n,   i, j, t) { for (i = 2; i <= n; i++) { t = a[i];
        for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t } }
    function sum(a, n,   i, t) { for (i = 1; i <= n; i++) t += a[i]; return t }
    END { sort(m, nm); sort(s, ns)
        printf "daemon rounds: %d; measurement of a round (its builds and runs): median %.3f s, p90 %.3f s, max %.3f s, total %.1f s\n",
            nm, m[int((nm + 1) / 2)], m[int(0.9 * nm + 0.5)], m[nm], sum(m, nm)
        printf "daemon search per round: median %.2f s, max %.2f s, total %.1f s\n",
            s[int((ns + 1) / 2)], s[ns], sum(s, ns) }'
retimed=$(q "select count(*) from kvs where k = 'timed_also';")
echo "new bests timed again (stored as the trial's timed_also key, not as trials): $retimed"
sed 's/^/fake worker: /' "$T/worker.txt"
runs=$(sed -n 's/.* runs \([0-9]*\) .*/\1/p' "$T/worker.txt")
[ "$runs" = $((total + retimed)) ] ||
    fail "the workers ran $runs jobs, the database holds $total trials and $retimed re-timings"

[ "$total" = "$TRIALS" ] && [ "$dup" = 0 ] && [ "$bad_range" = 0 ] ||
    fail "trials lost or stored twice"
# Ended jobs keep their figures and best configs, nothing of their tuning.
# (No heap figures under valgrind's allocator or without glibc.)
if [ "$HEAP_IDLE" = 0 ]; then
    echo "heap after the jobs not checked: the daemon reports no heap figures"
else
    awk -v h="$HEAP_IDLE" 'BEGIN { exit !(h <= 32 * 1048576) }' ||
        fail "the daemon holds $((${HEAP_IDLE%.*} / 1048576)) MiB of heap after every job ended (want <= 32)"
fi
echo "OK: $TRIALS trials, none lost or stored twice"
