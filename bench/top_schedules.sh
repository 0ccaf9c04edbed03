#!/bin/sh
# Is each task's stored best the fastest of its best few schedules?  For
# every task (target and workload) of each tuning database, the K
# distinct schedules (sched_hash) with the lowest stored costs are
# rebuilt (`kerntune show --db DB --trial ID --module`) and timed side by
# side by build/bench/bench_modules (one process, interleaved rounds),
# the stored best first: a ratio above 1 is a runner-up that runs faster
# than the best the database keeps.  Run it twice: two programs within
# ~3% of each other trade places from one run to the next
# (docs/measure.md, "What the confirmation's noise costs").
# Usage: sh bench/top_schedules.sh [-k K] [-r ROUNDS] [-t THREADS] DB...
#   (defaults: 4 schedules, 6 rounds, 2 threads; $KT_BIN_DIR or build/)
set -eu
BIN=${KT_BIN_DIR:-build}
K=4 ROUNDS=6 THREADS=2
while getopts k:r:t: o; do
    case $o in
    k) K=$OPTARG ;;
    r) ROUNDS=$OPTARG ;;
    t) THREADS=$OPTARG ;;
    *) echo "usage: sh bench/top_schedules.sh [-k K] [-r ROUNDS] [-t THREADS] DB..." >&2
       exit 2 ;;
    esac
done
shift $((OPTIND - 1))
case $K$ROUNDS$THREADS in *[!0-9]*) K= ;; esac
if [ $# -lt 1 ] || [ "${K:-0}" -lt 2 ]; then
    echo "usage: sh bench/top_schedules.sh [-k K] [-r ROUNDS] [-t THREADS] DB..." >&2
    exit 2
fi
command -v sqlite3 >/dev/null || { echo "sqlite3 command not installed" >&2; exit 1; }
T=$(mktemp -d /tmp/kt-topsched.XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "CPU: $(sh "$(dirname "$0")/cpu.sh")"
for db in "$@"; do
    [ -r "$db" ] || { echo "$db: cannot read" >&2; exit 1; }
    # a task by the id of one of its trials: no target (a compiler line)
    # or hash goes through the shell
    for rep in $(sqlite3 "$db" "SELECT min(id) FROM logs WHERE err_no = 0
                                GROUP BY target, workload_hash"); do
        same="target = (SELECT target FROM logs WHERE id = $rep) AND
              workload_hash = (SELECT workload_hash FROM logs WHERE id = $rep)"
        ids=$(sqlite3 "$db" "SELECT id FROM (SELECT id, min(cost) AS c
            FROM logs WHERE err_no = 0 AND $same GROUP BY sched_hash)
            ORDER BY c LIMIT $K")
        task=$(sqlite3 "$db" "SELECT task_name || ' (' || target || ')'
            FROM logs WHERE id = $rep")
        if [ "$(echo "$ids" | wc -w)" -lt 2 ]; then
            echo "$(basename "$db"): $task: one schedule only"
            continue
        fi
        files=
        for id in $ids; do
            "$BIN/kerntune" show --db "$db" --trial "$id" --module > "$T/$id.c"
            files="$files $T/$id.c"
        done
        printf '%s: %s, trials %s:' "$(basename "$db")" "$task" \
            "$(echo "$ids" | tr '\n' ' ' | sed 's/ $//')"
        # shellcheck disable=SC2086 # one argument per module
        "$BIN/bench/bench_modules" --rounds "$ROUNDS" --threads "$THREADS" \
            $files > "$T/out" 2>&1 ||
            { echo; echo "bench_modules failed:"; tail -3 "$T/out"; exit 1; }
        # "2T module 2   433.1   0.981x of module 1"
        awk -v t="${THREADS}T" '$1 == t && $2 == "module" {
            if ($3 == 1) printf " best %s GFLOPS, the others", $4
            else printf " %s", $5 }' "$T/out"
        echo
    done
done
