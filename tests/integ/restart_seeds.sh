#!/bin/sh
# Stored records seed the search after a restart: tunes a GEMM for 32
# trials, stops, and tunes the same job again to 48 with another search
# seed (so its random initial population shares nothing with the first
# run's).  The second run's first round must contain mutations of stored
# records: trials whose kvs note seed_of names the schedule hash of a
# successful trial of the first run, checked in the database.
set -u
. "$(cd "$(dirname "$0")" && pwd)/db_common.inc"
. "$(cd "$(dirname "$0")" && pwd)/seeds_common.inc"

model() { # model SEED
    cat <<JSON
{"name": "seeds", "target": {"threads": 1},
 "tuning": {"trials": 48, "measures_per_round": 16, "seed": $1},
 "measure": {"repeat": 1, "min_repeat_ms": 1},
 "tasks": [{"name": "mm", "compute": ["C[i,j] += A[i,k] * B[k,j]"],
            "shapes": {"A": [128, 128], "B": [128, 128]}}]}
JSON
}
model 1 >"$tmp/run1.json"
model 2 >"$tmp/run2.json"
tune_first "$tmp/run1.json" 32
"$kt" tune "$tmp/run2.json" --trials 48 --db "$tmp/t.db" --quiet >"$tmp/tune2.log" 2>&1 ||
    fail "second tune: $(tail -20 "$tmp/tune2.log")"
n=$(sqlite3 "$tmp/t.db" "select count(*) from logs")
[ "$n" -eq 48 ] || fail "$n trials stored, want 48"
near=$(seeded_first_round)
echo "second run, first round: $near of 16 trials are mutations of stored ones"
[ "$near" -ge 1 ] || fail "no trial of the second run's first round is a mutation of a stored record"
# and the first run's own rounds after the first name only its own trials
bad=$(sqlite3 "$tmp/t.db" "
    select count(*) from kvs join logs l on l.id = kvs.log_id
    where kvs.k = 'seed_of' and l.id <= $last1
      and kvs.v not in (select sched_hash from logs where id < l.id and err_no = 0)")
[ "$bad" -eq 0 ] || fail "$bad trials name a seed that was not measured before them"
