#!/bin/sh
# measure.stop_ratio end to end: with an aggressive ratio (1.5), candidates
# whose first repeat is slower than 1.5 x the task's best so far (stored,
# or measured earlier in the same round) get one repeat: stored as
# successes (err_no 0) with one cost and the kvs note early_stop=1; a
# candidate whose first two repeats agree within measure.settle (default
# 0.05) has two and the note settled=1; every other success has all three.
# Then with "settle": 0 and "stop_ratio": 0 every success has three.
set -u
. "$(cd "$(dirname "$0")" && pwd)/db_common.inc"

cat >"$tmp/m.json" <<'JSON'
{"name": "early", "target": {"threads": 1},
 "tuning": {"trials": 48, "measures_per_round": 16, "seed": 1},
 "measure": {"repeat": 3, "min_repeat_ms": 1, "stop_ratio": 1.5},
 "tasks": [{"name": "mm", "compute": ["C[i,j] += A[i,k] * B[k,j]"],
            "shapes": {"A": [128, 128], "B": [128, 128]}}]}
JSON
"$kt" tune "$tmp/m.json" --db "$tmp/t.db" --quiet >"$tmp/tune.log" 2>&1 ||
    fail "tune: $(tail -20 "$tmp/tune.log")"
q() { sqlite3 "$tmp/t.db" "$1"; }
early=$(q "select count(*) from kvs where k = 'early_stop' and v = '1'")
[ "$early" -ge 1 ] || fail "no candidate was stopped early"
bad=$(q "select count(*) from logs l join kvs k on k.log_id = l.id and k.k = 'early_stop'
         where l.err_no != 0 or json_array_length(l.costs) != 1")
[ "$bad" -eq 0 ] || fail "$bad early-stopped trials are not one-cost successes"
settled=$(q "select count(*) from kvs where k = 'settled' and v = '1'")
bad=$(q "select count(*) from logs l join kvs k on k.log_id = l.id and k.k = 'settled'
         where l.err_no != 0 or json_array_length(l.costs) != 2")
[ "$bad" -eq 0 ] || fail "$bad settled trials are not two-cost successes"
bad=$(q "select count(*) from logs l join kvs k on k.log_id = l.id and k.k = 'settled'
         where (select max(value) / min(value) from json_each(l.costs)) > 1.05 + 1e-9")
[ "$bad" -eq 0 ] || fail "$bad settled trials have repeats further apart than 5%"
full=$(q "select count(*) from logs l where l.err_no = 0 and json_array_length(l.costs) != 3
          and not exists (select 1 from kvs where log_id = l.id and k in ('early_stop', 'settled'))")
[ "$full" -eq 0 ] || fail "$full successes without early_stop or settled lack repeats"
lost=$(q "select count(*) from logs where err_no = 8")
[ "$lost" -eq 0 ] || fail "$lost trials with err_no 8: $(q "select err_text from logs where err_no = 8 limit 1")"
# each early stop was above 1.5 x the best before it: the best of the
# earlier rounds or of its own round's trials timed before it (runs follow
# the builds, so not in storage order: any other trial of its round), by
# the fastest of a trial's timings (a re-timed one names the other in
# timed_also or timed_contended: "COST s on WORKER")
bad=$(q "with timing(id, cost) as (
             select id, cost from logs where err_no = 0
             union all
             select k.log_id, cast(k.v as real) from kvs k join logs p on p.id = k.log_id
             where p.err_no = 0 and k.k in ('timed_also', 'timed_contended')
                   and k.v like '% s on %')
         select count(*) from logs l join kvs k on k.log_id = l.id and k.k = 'early_stop'
         where l.cost <= 1.5 * (select min(t.cost) from timing t join logs p on p.id = t.id
                                where p.id != l.id and p.trial_no / 16 <= l.trial_no / 16)")
[ "$bad" -eq 0 ] || fail "$bad early stops below 1.5 x the best before them"
first=$(q "select count(*) from kvs k join logs l on l.id = k.log_id
           where k.k = 'early_stop' and l.id <= 16")
echo "$early of 48 candidates stopped after one repeat ($first in the first round), $settled settled after two"

# settle 0, stop_ratio 0: every success timed three times, nothing settled
sed 's/"stop_ratio": 1.5/"settle": 0, "stop_ratio": 0/' "$tmp/m.json" >"$tmp/m0.json"
"$kt" tune "$tmp/m0.json" --trials 16 --db "$tmp/t0.db" --quiet >"$tmp/tune0.log" 2>&1 ||
    fail "tune with settle 0: $(tail -20 "$tmp/tune0.log")"
n=$(sqlite3 "$tmp/t0.db" "select count(*) from logs where err_no = 0 and json_array_length(costs) = 3")
[ "$n" -eq 16 ] || fail "settle 0: $n of 16 successes with three costs"
n=$(sqlite3 "$tmp/t0.db" "select count(*) from kvs where k in ('settled', 'early_stop')")
[ "$n" -eq 0 ] || fail "settle 0: $n trials settled or stopped early"
