#!/bin/sh
# Stored records of another workload of the same target seed the search
# where their steps decode (the same sketch, tiles that divide the new
# extents): tunes a 128^3 GEMM for 32 trials, then, as another job in the
# same database, a 256x128x256 GEMM.  The second job's first round must
# contain mutations of the first job's successful programs (kvs note
# seed_of naming their schedule hash), checked in the database.  Then both
# GEMMs as two tasks of one job in a fresh database: a task's new best
# program is offered to the other task's search, so some rounds of one
# task hold mutations of programs measured only for the other.  The 128^3
# task has weight 8, so it is warmed up first (largest weight x flops
# first): its programs always decode into the 256x128x256 task (tiles of
# 128 divide 256), not always the other way.  The kernels take every CPU,
# so the engine does not search ahead (docs/measure.md): the 256x128x256
# task's warm-up is searched after the 128^3 task's programs were shared,
# and they are the only measured ones it has, whatever the gradient does
# with two tasks near the FMA peak afterwards.
set -u
. "$(cd "$(dirname "$0")" && pwd)/db_common.inc"
. "$(cd "$(dirname "$0")" && pwd)/seeds_common.inc"

task() { # task NAME M N K [WEIGHT]
    printf '{"name": "%s", "compute": ["C[i,j] += A[i,k] * B[k,j]"], "shapes": {"A": [%s, %s], "B": [%s, %s]}, "weight": %s}' \
        "$1" "$2" "$4" "$4" "$3" "${5:-1}"
}
model() { # model NAME M N K
    cat <<JSON
{"name": "$1", "target": {"threads": 1},
 "tuning": {"trials": 32, "measures_per_round": 16, "seed": 1},
 "measure": {"repeat": 1, "min_repeat_ms": 1},
 "tasks": [$(task mm "$2" "$3" "$4")]}
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

cat >"$tmp/both.json" <<JSON
{"name": "both", "target": {"threads": 0},
 "tuning": {"trials": 96, "measures_per_round": 16, "seed": 1},
 "measure": {"repeat": 1, "min_repeat_ms": 1},
 "tasks": [$(task small 128 128 128 8), $(task big 256 128 256 1)]}
JSON
"$kt" tune "$tmp/both.json" --db "$tmp/both.db" --quiet >"$tmp/tune3.log" 2>&1 ||
    fail "two-task tune: $(tail -20 "$tmp/tune3.log")"
shared=$(sqlite3 "$tmp/both.db" "
    select count(*) from logs l join kvs on kvs.log_id = l.id and kvs.k = 'seed_of'
    where kvs.v in (select sched_hash from logs o
                    where o.workload_hash != l.workload_hash
                      and o.err_no = 0 and o.id < l.id)
      and kvs.v not in (select sched_hash from logs s
                        where s.workload_hash = l.workload_hash and s.id < l.id)")
echo "one job of two tasks: $shared trials descend from programs measured only for the other task"
[ "$shared" -ge 1 ] || fail "no trial of one task descends from the other task's programs"
