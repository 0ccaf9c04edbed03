#!/bin/sh
# Stored records of another workload of the same target seed the search
# where their steps decode (the same sketch, tiles that divide the new
# extents): tunes a 128^3 GEMM for 32 trials, then, as another job in the
# same database, a 256x128x256 GEMM.  The second job's first round must
# contain mutations of the first job's successful programs (kvs note
# seed_of naming their schedule hash), checked in the database.
set -u
bin=${KT_BIN_DIR:-build}
kt=$bin/kerntune
[ -x "$kt" ] || { echo "no $kt"; exit 1; }
command -v sqlite3 >/dev/null || { echo "sqlite3 command not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
. "$(cd "$(dirname "$0")" && pwd)/seeds_common.inc"

model() { # model NAME M N K
    cat <<JSON
{"name": "$1", "target": {"threads": 1},
 "tuning": {"trials": 32, "measures_per_round": 16, "seed": 1},
 "measure": {"repeat": 1, "min_repeat_ms": 1},
 "tasks": [{"name": "mm", "compute": ["C[i,j] += A[i,k] * B[k,j]"],
            "shapes": {"A": [$2, $4], "B": [$4, $3]}}]}
JSON
}
model small 128 128 128 >"$tmp/small.json"
model big 256 128 256 >"$tmp/big.json"
tune_first "$tmp/small.json" 32
"$kt" tune "$tmp/big.json" --trials 16 --db "$tmp/t.db" --quiet >"$tmp/tune2.log" 2>&1 ||
    fail "second tune: $(tail -20 "$tmp/tune2.log")"
w=$(sqlite3 "$tmp/t.db" "select count(distinct workload_hash) from logs")
[ "$w" -eq 2 ] || fail "$w workloads stored, want 2"
near=$(seeded_first_round)
echo "second job, first round: $near of 16 trials are mutations of the other workload's programs"
[ "$near" -ge 1 ] || fail "no trial of the second job's first round descends from the other workload's records"
