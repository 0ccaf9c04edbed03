#!/bin/sh
# A task's new best program reaches another task of the job whose steps it
# is no schedule of, stage by stage (docs/search.md, "carried over"): one
# job of two tasks, a 128^3 GEMM followed by bias + relu and the same GEMM
# alone.  The fused task has weight 8, so it is warmed up first; programs
# that fuse the product into the bias + relu name a stage the plain GEMM
# does not have, so only the transfer carries them over.  Some trials of
# the plain task must carry the kvs note transfer_of naming a program
# measured before for the fused task, and at most one per program.
set -u
. "$(cd "$(dirname "$0")" && pwd)/db_common.inc"

cat >"$tmp/pair.json" <<JSON
{"name": "pair", "target": {"threads": 0},
 "tuning": {"trials": 160, "measures_per_round": 16, "seed": 1},
 "measure": {"repeat": 1, "min_repeat_ms": 1},
 "tasks": [
  {"name": "fused", "weight": 8,
   "compute": ["C[i,j] += A[i,k] * B[k,j]", "D[i,j] = max(C[i,j] + b[j], 0)"],
   "shapes": {"A": [128, 128], "B": [128, 128], "b": [128]}},
  {"name": "plain", "compute": ["C[i,j] += A[i,k] * B[k,j]"],
   "shapes": {"A": [128, 128], "B": [128, 128]}}]}
JSON
"$kt" tune "$tmp/pair.json" --db "$tmp/pair.db" --quiet >"$tmp/tune.log" 2>&1 ||
    fail "tune: $(tail -20 "$tmp/tune.log")"
q() { sqlite3 "$tmp/pair.db" "$1"; }
carried=$(q "select count(*) from logs l join kvs on kvs.log_id = l.id and kvs.k = 'transfer_of'
             where l.task_name = 'plain'")
named=$(q "select count(*) from logs l join kvs on kvs.log_id = l.id and kvs.k = 'transfer_of'
           where l.task_name = 'plain'
             and kvs.v in (select sched_hash from logs o
                           where o.task_name = 'fused' and o.err_no = 0 and o.id < l.id)")
per_program=$(q "select coalesce(max(n), 0) from (select count(*) n from kvs
                 where k = 'transfer_of' group by v)")
echo "plain GEMM: $carried trials carried over from the fused task's programs ($named name one measured before)"
[ "$carried" -ge 1 ] || fail "no trial of the plain task was carried over from the fused task"
[ "$named" -eq "$carried" ] || fail "$carried carried over, only $named name a program of the fused task measured before"
[ "$per_program" -le 1 ] || fail "a program was carried over $per_program times"
