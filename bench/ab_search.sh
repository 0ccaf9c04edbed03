#!/bin/sh
# Compares builds of the tuner on one suite task (docs/performance.md,
# "Comparing search changes").
#
# Tunes the task N times with each build, the builds taking turns run by
# run, each run into a fresh database of its own; then times every run's
# best stored kernel in one process (build/bench/suite_time) next to
# OpenBLAS and oneDNN, and prints per build the mean, lowest and highest
# ratio to the better library on 1 and 2 threads.  A whole tuning run can
# measure 10% slow when the machine's other tenants are busy, so the
# tuner's own (stored) figures of separate runs do not compare; timed
# together in one process, the runs' kernels do.
#
# A build that changes an operator's definition changes its workload key,
# which the other build's suite_time does not compute: --own-timers times
# each database with its own build's suite_time instead, one process per
# database, the builds taking turns (each process times the libraries
# beside the kernel, so the ratios still compare).
#
#   sh bench/ab_search.sh [--runs N] [--trials N] [--task NAME] [--out DIR]
#                         [--own-timers] [--time-only]
#                         TAG=BUILD_DIR [TAG=BUILD_DIR ...]
#
#   --runs N     tuning runs per build (default 6)
#   --trials N   trials per run (default 200)
#   --task NAME  a config of bench/suite/ or bench/shapes/ without .json
#                (default gemm_nn_1024)
#   --out DIR    databases, logs and ab.jsonl (default build/ab-search)
#   --own-timers time each database with TAG's BUILD_DIR/bench/suite_time
#   --time-only  time the databases a previous run left in --out again
#   TAG=DIR      a name for the build and its build directory (the one
#                holding kerntune); the timing uses KT_BIN_DIR (default
#                build) for suite_time unless --own-timers
set -eu
BIN=${KT_BIN_DIR:-build}
RUNS=6
TRIALS=200
TASK=gemm_nn_1024
OUT=$BIN/ab-search
OWN_TIMERS=0
TIME_ONLY=0
usage() {
    sed -n '20,33p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case $1 in
    --runs) [ $# -ge 2 ] || usage; RUNS=$2; shift 2 ;;
    --trials) [ $# -ge 2 ] || usage; TRIALS=$2; shift 2 ;;
    --task) [ $# -ge 2 ] || usage; TASK=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
    --own-timers) OWN_TIMERS=1; shift ;;
    --time-only) TIME_ONLY=1; shift ;;
    -h | --help) usage ;;
    -*) echo "ab_search: unknown option $1" >&2; usage ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || usage
CFG=bench/suite/$TASK.json
[ -f "$CFG" ] || CFG=bench/shapes/$TASK.json
if [ ! -f "$CFG" ]; then
    echo "ab_search: $TASK: no such config in bench/suite or bench/shapes" >&2
    exit 2
fi
for v in "$@"; do
    case ${v%%=*} in
    "" | *[!A-Za-z0-9_]*)
        echo "ab_search: $v: want TAG=BUILD_DIR, TAG of letters, digits and _" >&2
        exit 2
        ;;
    esac
    case $v in
    *=*) ;;
    *) echo "ab_search: $v: want TAG=BUILD_DIR" >&2; exit 2 ;;
    esac
    if [ ! -x "${v#*=}/kerntune" ]; then
        echo "ab_search: ${v#*=}/kerntune: not built" >&2
        exit 2
    fi
done
timers=$BIN
[ "$OWN_TIMERS" = 0 ] || timers="$*"
for t in $timers; do
    if [ ! -x "${t#*=}/bench/suite_time" ]; then
        echo "ab_search: ${t#*=}/bench/suite_time: not built (make bench-build)" >&2
        exit 2
    fi
    # plain `make` rebuilds kerntune but not suite_time, whose code
    # generator would then time every build's picks as the old one did
    if [ "${t#*=}/bench/suite_time" -ot "${t#*=}/kerntune" ]; then
        echo "ab_search: ${t#*=}/bench/suite_time is older than ${t#*=}/kerntune (make bench-build)" >&2
        exit 2
    fi
done
mkdir -p "$OUT"

pairs=
[ "$TIME_ONLY" = 1 ] || rm -f "$OUT/tune-seconds"
i=1
while [ "$i" -le "$RUNS" ]; do
    for v in "$@"; do
        tag=${v%%=*} dir=${v#*=}
        db=$OUT/$tag-$i.db
        pairs="$pairs $CFG $db"
        if [ "$TIME_ONLY" = 1 ]; then
            if [ ! -f "$db" ]; then
                echo "ab_search: $db: no such database to time" >&2
                exit 2
            fi
            continue
        fi
        rm -f "$db" "$db-wal" "$db-shm"
        echo "ab_search: run $i of $RUNS, $tag ($dir), $(uptime | sed 's/.*load/load/')"
        t0=$(date +%s)
        if ! "$dir/kerntune" tune "$CFG" --trials "$TRIALS" --db "$db" \
            --quiet >"$OUT/$tag-$i.log" 2>&1; then
            echo "ab_search: $tag run $i failed, see $OUT/$tag-$i.log" >&2
            exit 1
        fi
        echo "$tag $(($(date +%s) - t0))" >>"$OUT/tune-seconds"
    done
    i=$((i + 1))
done

# suite_time appends; the summary below reads this comparison's lines only
rm -f "$OUT/ab.jsonl"
if [ "$OWN_TIMERS" = 0 ]; then
    # shellcheck disable=SC2086 # pairs is a list of words without blanks
    "$BIN/bench/suite_time" --json "$OUT/ab.jsonl" $pairs
else
    i=1
    while [ "$i" -le "$RUNS" ]; do
        for v in "$@"; do
            "${v#*=}/bench/suite_time" --json "$OUT/ab.jsonl" \
                "$CFG" "$OUT/${v%%=*}-$i.db"
        done
        i=$((i + 1))
    done
fi

echo
how="in one process"
[ "$OWN_TIMERS" = 0 ] || how="by each build's own suite_time"
echo "$TASK, $RUNS runs of $TRIALS trials per build, timed $how:"
echo "ratio to the better of OpenBLAS and oneDNN (above 1: kerntune faster)"
printf '%-12s %2s %6s %6s %6s %9s\n' build T mean low high "GFLOPS"
awk -v tags="$*" '
function field(line, key,   m) {
    if (match(line, "\"" key "\":(\"[^\"]*\"|[^,}]*)") == 0)
        return ""
    m = substr(line, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
    gsub(/"/, "", m)
    return m
}
{
    db = field($0, "db"); t = field($0, "threads")
    r = field($0, "ratio_vs_best_library"); g = field($0, "kerntune_gflops")
    n = split(db, p, "/"); tag = p[n]; sub(/-[0-9]+\.db$/, "", tag)
    if (r == "null" || r == "") { bad[tag]++; next }
    k = tag SUBSEP t
    cnt[k]++; sum[k] += r; gs[k] += g
    if (!(k in lo) || r < lo[k]) lo[k] = r
    if (!(k in hi) || r > hi[k]) hi[k] = r
}
END {
    nt = split(tags, tv, " ")
    for (i = 1; i <= nt; i++) {
        tag = tv[i]; sub(/=.*/, "", tag)
        for (t = 1; t <= 2; t++) {
            k = tag SUBSEP t
            if (cnt[k] == 0) { printf "%-12s %2d   (no timing)\n", tag, t; continue }
            printf "%-12s %2d %6.3f %6.3f %6.3f %9.1f\n", tag, t,
                sum[k] / cnt[k], lo[k], hi[k], gs[k] / cnt[k]
        }
        if (bad[tag] > 0)
            printf "%-12s    %d timings without a ratio\n", tag, bad[tag]
    }
}' "$OUT/ab.jsonl"
if [ -s "$OUT/tune-seconds" ]; then
    echo "tuning time per run, seconds (the machine's load moves it too):"
    awk '{ n[$1]++; s[$1] += $2; v[$1] = v[$1] " " $2 }
        END {
            for (t in n)
                printf "%-12s mean %6.1f:%s\n", t, s[t] / n[t], v[t]
        }' "$OUT/tune-seconds"
fi
echo "JSON lines: $OUT/ab.jsonl"
