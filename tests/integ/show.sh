#!/bin/sh
# kerntune show: tunes a small GEMM for a few trials into a real database,
# then prints the best trial of the task (by model, by task index, name and
# hash) and a trial by id; the shown trial is the fastest stored one, the
# printed build unit compiles, and bad arguments, a missing database, an
# unknown task or trial and a workload without trials give clear errors
# without creating or changing the database.
set -u
. "$(cd "$(dirname "$0")" && pwd)/db_common.inc"

expect() { # expect CODE PATTERN ARGS...
    code=$1; pat=$2; shift 2
    "$kt" "$@" >"$tmp/out" 2>&1
    rc=$?
    [ $rc -eq "$code" ] || fail "kerntune $*: exit $rc, want $code: $(head -20 "$tmp/out")"
    grep -q -- "$pat" "$tmp/out" || fail "kerntune $*: output lacks '$pat': $(head -20 "$tmp/out")"
}

cat >"$tmp/gemm.json" <<'JSON'
{"name": "showgemm", "target": {"threads": 1},
 "tuning": {"trials": 6, "measures_per_round": 6},
 "measure": {"repeat": 1, "min_repeat_ms": 1},
 "tasks": [{"name": "mm", "compute": ["C[i,j] += A[i,k] * B[k,j]"],
            "shapes": {"A": [64, 48], "B": [48, 32]}}]}
JSON
cat >"$tmp/other.json" <<'JSON'
{"name": "other", "layers": [{"op": "softmax", "rows": 4, "cols": 8}]}
JSON
"$kt" tune "$tmp/gemm.json" --db "$tmp/t.db" --quiet >"$tmp/tune.log" 2>&1 ||
    fail "tune: $(tail -20 "$tmp/tune.log")"
best=$(sqlite3 "$tmp/t.db" "select id from logs where err_no = 0 order by cost, id limit 1")
[ -n "$best" ] || fail "tuning stored no successful trial: $(tail -20 "$tmp/tune.log")"
hash=$(sqlite3 "$tmp/t.db" "select workload_hash from logs limit 1")
sum_before=$(sqlite3 "$tmp/t.db" "select count(*), sum(cost) from logs")

for task in "" 0 mm "$hash"; do
    expect 0 "^/\* trial $best: task mm, job showgemm" show --db "$tmp/t.db" "$tmp/gemm.json" $task
    for want in " \* measured: .* GFLOPS" " \* loop tree:" "for .* in 0\.\." \
                "kt_kernel(float \*const \*args)" "\"steps\""; do
        grep -q -- "$want" "$tmp/out" || fail "show $task: no '$want': $(head -30 "$tmp/out")"
    done
done
expect 0 "^/\* trial $best:" show --db "$tmp/t.db" --trial "$best" --no-tree
grep -q "loop tree" "$tmp/out" && fail "--no-tree printed the loop tree"

# --module prints the whole build unit a worker compiles: it must compile.
expect 0 "kt_reference" show --db "$tmp/t.db" --trial "$best" --module --vector-bytes 32
cc -O1 -std=gnu11 -fopenmp -shared -fPIC -o "$tmp/k.so" -x c "$tmp/out" -lm 2>"$tmp/cc.log" ||
    fail "the shown module does not compile: $(head -20 "$tmp/cc.log")"

expect 1 "no trial with id 999999" show --db "$tmp/t.db" --trial 999999
expect 1 "has no task \"nosuch\"" show --db "$tmp/t.db" "$tmp/gemm.json" nosuch
expect 1 "no successful trial of workload" show --db "$tmp/t.db" "$tmp/other.json"
expect 1 "$tmp/none.db: no such database" show --db "$tmp/none.db" --trial 1
[ -e "$tmp/none.db" ] && fail "show created the missing database"
expect 1 "$tmp/gemm.json" show --db "$tmp/t.db" "$tmp/gemm.json.missing"
expect 2 usage show --db "$tmp/t.db"
expect 2 usage show "$tmp/gemm.json"
expect 2 usage show --db "$tmp/t.db" --trial 1 "$tmp/gemm.json"
expect 2 "--trial wants a trial id" show --db "$tmp/t.db" --trial x1
expect 2 "--vector-bytes must be 16, 32 or 64" show --db "$tmp/t.db" --trial 1 --vector-bytes 7
[ "$(sqlite3 "$tmp/t.db" "select count(*), sum(cost) from logs")" = "$sum_before" ] ||
    fail "show changed the database"
echo ok
