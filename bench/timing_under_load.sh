#!/bin/sh
# Tuning under a deliberate CPU hog, old timing against new
# (docs/measure.md, "Timing on a shared machine").  Tunes CONFIG with
# OLD/kerntune and NEW/kerntune (each with its own kerntune-rpc) one after
# the other while a busy loop pinned to CPU 1 runs ON seconds, pauses OFF
# seconds (someone else's compiles), then times both found best kernels on
# the quiet machine in one bench/suite_time process (ratios in one run).
#
#   sh bench/timing_under_load.sh [--old /work/main/build] [--new build]
#       [--trials 64] [--on 3] [--off 2] [--new-first] [--keep] CONFIG
set -u
OLD=/work/main/build NEW=build TRIALS=64 ON=3 OFF=2 KEEP=0 ORDER="old new"
while [ $# -gt 1 ]; do
    case $1 in
    --old) OLD=$2; shift 2 ;;
    --new) NEW=$2; shift 2 ;;
    --trials) TRIALS=$2; shift 2 ;;
    --on) ON=$2; shift 2 ;;
    --off) OFF=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --new-first) ORDER="new old"; shift ;;
    *) echo "timing_under_load.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ $# = 1 ] || { echo "usage: timing_under_load.sh [options] CONFIG" >&2; exit 2; }
CONFIG=$1
T=$(mktemp -d /tmp/kt-timing-load.XXXXXX)
HOG=
stop_hog() {
    [ -n "$HOG" ] && kill "$HOG" 2>/dev/null && wait "$HOG" 2>/dev/null
    HOG=
}
cleanup() {
    stop_hog
    if [ "$KEEP" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The hog: a loop that spins ON s (pinned to CPU 1) and sleeps OFF s; its
# spinning child ends within ON s after the loop is killed.
hog() {
    while :; do
        taskset -c 1 timeout "$ON" sh -c 'while :; do :; done'
        sleep "$OFF"
    done
}

echo "== timing under load: $CONFIG, $TRIALS trials, hog on CPU 1 ${ON}s on / ${OFF}s off"
echo "CPU: $(sh "$(dirname "$0")/cpu.sh"); $(nproc) CPUs"
for side in $ORDER; do
    if [ $side = old ]; then BIN=$OLD; else BIN=$NEW; fi
    ( hog ) &
    HOG=$!
    echo "-- $side ($BIN/kerntune), load before: $(uptime | sed 's/.*load average/load average/')"
    start=$(date +%s)
    "$BIN/kerntune" tune "$CONFIG" --trials "$TRIALS" --db "$T/$side.db" \
        --quiet >"$T/$side.log" 2>&1 || { tail -5 "$T/$side.log"; exit 1; }
    echo "   tuned in $(($(date +%s) - start)) s; load after: $(uptime | sed 's/.*load average/load average/')"
    stop_hog
    sleep $((ON + 1)) # the spinning child of a killed hog ends by itself
done
q() { sqlite3 "$T/new.db" "$1"; }
echo "new timing: $(q "select count(*) from logs where err_no = 0") successes," \
    "$(q "select count(*) from kvs where k = 'contended' and v = '1'") stored contended," \
    "$(q "select count(*) from kvs where k = 'retimed' and v != '0'") with repeats timed again," \
    "$(q "select count(*) from kvs where k = 'timed_contended'") contended results timed again later"
echo "stored best (ms): old $(sqlite3 "$T/old.db" "select round(min(cost) * 1e3, 3) from logs where err_no = 0")," \
    "new $(q "select round(min(cost) * 1e3, 3) from logs where err_no = 0")"
echo "-- quiet timing of both bests (first: old, second: new), load: $(uptime | sed 's/.*load average/load average/')"
"$NEW/bench/suite_time" "$CONFIG" "$T/old.db" "$CONFIG" "$T/new.db"
