#!/bin/sh
# Stored records seed the search after a restart: tunes a GEMM for 64
# trials, stops, and tunes the same job again to 128 with another search
# seed (so its random initial population shares nothing with the first
# run's).  The second run's first round must contain mutations of stored
# records: trials whose steps differ from a stored successful trial's in
# at most two steps (one gene; a tile change also re-splits a fused
# consumer), checked in the database.
set -u
bin=${KT_BIN_DIR:-build}
kt=$bin/kerntune
[ -x "$kt" ] || { echo "no $kt"; exit 1; }
command -v sqlite3 >/dev/null || { echo "sqlite3 command not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

model() { # model SEED
    cat <<JSON
{"name": "seeds", "target": {"threads": 1},
 "tuning": {"trials": 128, "measures_per_round": 16, "seed": $1},
 "measure": {"repeat": 1, "min_repeat_ms": 1},
 "tasks": [{"name": "mm", "compute": ["C[i,j] += A[i,k] * B[k,j]"],
            "shapes": {"A": [128, 128], "B": [128, 128]}}]}
JSON
}
model 1 >"$tmp/run1.json"
model 2 >"$tmp/run2.json"
"$kt" tune "$tmp/run1.json" --trials 64 --db "$tmp/t.db" --quiet >"$tmp/tune1.log" 2>&1 ||
    fail "first tune: $(tail -20 "$tmp/tune1.log")"
last1=$(sqlite3 "$tmp/t.db" "select max(id) from logs")
ok1=$(sqlite3 "$tmp/t.db" "select count(*) from logs where err_no = 0")
[ "$ok1" -gt 0 ] || fail "the first run stored no successful trial"
"$kt" tune "$tmp/run2.json" --trials 128 --db "$tmp/t.db" --quiet >"$tmp/tune2.log" 2>&1 ||
    fail "second tune: $(tail -20 "$tmp/tune2.log")"
n=$(sqlite3 "$tmp/t.db" "select count(*) from logs")
[ "$n" -eq 128 ] || fail "$n trials stored, want 128"
# steps of stored trials (run 1) and of run 2's first round, one row each
near=$(sqlite3 "$tmp/t.db" "
    with r2 as (select id, config from logs where id > $last1 order by id limit 16),
         r1 as (select id, config from logs where id <= $last1 and err_no = 0)
    select count(distinct r2.id) from r2, r1
    where json_array_length(r2.config, '\$.steps') = json_array_length(r1.config, '\$.steps')
      and (select count(*) from json_each(r2.config, '\$.steps') a
           join json_each(r1.config, '\$.steps') b on a.key = b.key
           where a.value != b.value) between 1 and 2")
echo "second run, first round: $near of 16 trials are mutations of stored ones"
[ "$near" -ge 1 ] || fail "no trial of the second run's first round is a mutation of a stored record"
