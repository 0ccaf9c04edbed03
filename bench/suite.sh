#!/bin/sh
# The kernel benchmark suite (`make bench-suite`, docs/performance.md).
#
# Tunes every model config of bench/suite/ with `kerntune tune` into a fresh
# database of its own, then times in one process (build/bench/suite_time) the
# best stored kernel of each task against OpenBLAS, oneDNN and the machine's
# FMA peak on 1 and 2 threads, and prints the table (JSON lines are
# appended to OUT/suite.jsonl, one per task and thread count per run).
#
#   sh bench/suite.sh [--trials N | --long] [--only a,b,...] [--out DIR]
#                     [--no-tune] [--configs DIR]
#
#   --trials N   trials per task (default 200); --long is --trials 1000
#   --only LIST  only these configs (file names without .json)
#   --out DIR    databases, tuning logs and suite.jsonl (default build/bench-suite)
#   --no-tune    keep the databases of an earlier run in DIR and only time
#   --configs DIR  the model configs (default bench/suite; bench/shapes holds
#                shapes of the same kinds the suite was not tuned on)
set -eu
BIN=${KT_BIN_DIR:-build}
TRIALS=200
OUT=$BIN/bench-suite
ONLY=
TUNE=1
CONFIGS=bench/suite
usage() {
    sed -n '10,18p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case $1 in
    --trials) [ $# -ge 2 ] || usage; TRIALS=$2; shift 2 ;;
    --long) TRIALS=1000; shift ;;
    --only) [ $# -ge 2 ] || usage; ONLY=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
    --no-tune) TUNE=0; shift ;;
    --configs) [ $# -ge 2 ] || usage; CONFIGS=$2; shift 2 ;;
    *) usage ;;
    esac
done
case $TRIALS in '' | *[!0-9]*) echo "suite: --trials wants a number, got '$TRIALS'" >&2; exit 2 ;; esac
mkdir -p "$OUT"
# suite_time generates the tuned kernels' C with its own copy of the code
# generator: one older than the library times different code than the
# tuner measured (and may not replay newer schedules).
for f in "$BIN/kerntune" "$BIN/bench/suite_time"; do
    [ -x "$f" ] || { echo "suite: $f is missing: run make bench-build" >&2; exit 2; }
done
if [ "$BIN/libkerntune.a" -nt "$BIN/bench/suite_time" ]; then
    echo "suite: $BIN/bench/suite_time is older than $BIN/libkerntune.a: run make bench-build" >&2
    exit 2
fi

configs=
for cfg in "$CONFIGS"/*.json; do
    case $cfg in *.sched.json) continue ;; esac # a schedule, not a model
    name=$(basename "$cfg" .json)
    if [ -n "$ONLY" ]; then
        case ",$ONLY," in *",$name,"*) ;; *) continue ;; esac
    fi
    configs="$configs $cfg"
done
[ -n "$configs" ] || { echo "suite: no config matches --only '$ONLY'" >&2; exit 2; }

echo "kerntune bench suite, $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "CPU: $(sh "$(dirname "$0")/cpu.sh"), $(nproc) threads; load: $(uptime | sed 's/.*load average/load average/')"

if [ "$TUNE" = 1 ]; then
    for cfg in $configs; do
        name=$(basename "$cfg" .json)
        rm -f "$OUT/$name.db" "$OUT/$name.db-wal" "$OUT/$name.db-shm"
        start=$(date +%s)
        if ! "$BIN/kerntune" tune "$cfg" --trials "$TRIALS" --db "$OUT/$name.db" --quiet \
            > "$OUT/$name.tune.log" 2>&1; then
            echo "suite: tuning $name failed; see $OUT/$name.tune.log" >&2
            tail -5 "$OUT/$name.tune.log" >&2
        fi
        # The tuner stops early when a task's space is exhausted: say what ran.
        ran=$(sed -n 's/^trials: \([0-9]*\).*/\1/p' "$OUT/$name.tune.log")
        echo "tuned $name: ${ran:-?} of $TRIALS trials in $(( $(date +%s) - start )) s (load: $(cut -d' ' -f1-3 /proc/loadavg))"
    done
fi

pairs=
for cfg in $configs; do
    pairs="$pairs $cfg $OUT/$(basename "$cfg" .json).db"
done
# shellcheck disable=SC2086  # word splitting of the pairs is intended
"$BIN/bench/suite_time" --json "$OUT/suite.jsonl" $pairs
