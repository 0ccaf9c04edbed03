#!/bin/sh
# Tunes bench/gemm1024.json with the XGBoost-guided search and with random
# search (same budget, same seed), each into its own database, and prints
# the best GFLOPS of each and the trials each needed to reach 90% of the
# better final result.  Usage: sh bench/compare_policies.sh [TRIALS] [SEED]
set -eu
BIN=${KT_BIN_DIR:-build}
TRIALS=${1:-256}
SEED=${2:-1}
T=$(mktemp -d /tmp/kt-compare.XXXXXX)
trap 'rm -rf "$T"' EXIT
for policy in sketch.xgb random; do
    sed -e "s/\"policy\": \"sketch.xgb\"/\"policy\": \"$policy\"/" \
        -e "s/\"seed\": 1/\"seed\": $SEED/" bench/gemm1024.json > "$T/$policy.json"
    start=$(date +%s)
    "$BIN/kerntune" tune "$T/$policy.json" --trials "$TRIALS" --db "$T/$policy.db" --quiet \
        > "$T/$policy.out" 2>&1
    echo "$policy: $(( $(date +%s) - start )) s wall"
done
gflops() {  # db -> one line per trial: trial index, best GFLOPS so far
    sqlite3 "$1" "select id, case when err_no=0 then 2.0*1024*1024*1024/cost/1e9 else 0 end from logs order by id;" |
        awk -F'|' '{ if ($2 > best) best = $2; n++; print n, best }'
}
gflops "$T/sketch.xgb.db" > "$T/xgb.curve"
gflops "$T/random.db" > "$T/random.curve"
bx=$(tail -1 "$T/xgb.curve" | cut -d' ' -f2)
br=$(tail -1 "$T/random.curve" | cut -d' ' -f2)
better=$(echo "$bx $br" | awk '{print ($1 > $2) ? $1 : $2}')
reach() { awk -v t="$better" '$2 >= 0.9 * t { print $1; exit }' "$1"; }
printf '%-12s %10s %28s\n' policy "best GFLOPS" "trials to 90% of the better"
printf '%-12s %10.1f %28s\n' sketch.xgb "$bx" "$(reach "$T/xgb.curve")"
printf '%-12s %10.1f %28s\n' random "$br" "$(reach "$T/random.curve")"
for n in 32 64 128 200 256; do
    printf 'after %3d trials: xgb %6.1f  random %6.1f GFLOPS\n' $n \
        "$(awk -v n=$n '$1 == n {print $2}' "$T/xgb.curve")" \
        "$(awk -v n=$n '$1 == n {print $2}' "$T/random.curve")"
done
# How well the cost model ranks these real programs (held-out 20%).
"$BIN/bench/bench_rank" "$T/sketch.xgb.db" "$T/random.db"
