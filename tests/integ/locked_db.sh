#!/bin/sh
# kerntune tune while someone else holds the database's write lock: the
# engine keeps the measured batch, retries with backoff, and in the end every
# trial is stored exactly once.
set -u
BIN=${KT_BIN_DIR:?}
command -v sqlite3 >/dev/null 2>&1 || { echo "needs sqlite3"; exit 77; }
T=$(mktemp -d /tmp/kt-locked.XXXXXX)
trap 'kill $TPID 2>/dev/null; rm -rf "$T"' EXIT
here=$(cd "$(dirname "$0")/../.." && pwd)
"$BIN/kerntune" tune "$here/models/tiny.json" --trials 40 --db "$T/t.db" --quiet \
    > "$T/tune.log" 2>&1 &
TPID=$!
count() { sqlite3 "$T/t.db" "select count(*) from logs;" 2>/dev/null || echo 0; }
i=0
while [ "$(count)" -lt 8 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(count)" -ge 8 ] || { echo "FAIL: no trials stored"; cat "$T/tune.log"; exit 1; }
# Hold the write lock, as a person's open transaction would: until the
# engine has been refused a batch and then 2 s more (at most 60 s; a round
# can take longer than a fixed window on a loaded machine).
sqlite3 "$T/t.db" "begin exclusive;" ".shell i=0; until grep -q 'storing .* trials failed' '$T/tune.log' || [ \$i -ge 600 ]; do sleep 0.1; i=\$((i + 1)); done; sleep 2" "commit;" >/dev/null 2>&1
i=0
while kill -0 $TPID 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
wait $TPID; rc=$?
TPID=
[ $rc = 0 ] || { echo "FAIL: kerntune tune exited $rc"; tail -20 "$T/tune.log"; exit 1; }
grep -q "storing .* trials failed .*locked" "$T/tune.log" ||
    { echo "FAIL: the lock was never hit"; tail -5 "$T/tune.log"; exit 1; }
# A schedule's hash names it within its task: two tasks (the model's two
# convolutions) may measure the same steps.
n=$(sqlite3 "$T/t.db" "select count(*) || ' ' || count(distinct workload_hash || ' ' || sched_hash) from logs;")
[ "$n" = "40 40" ] || { echo "FAIL: stored $n (want 40 distinct)"; exit 1; }
echo "40 trials stored once each across a held write lock"
exit 0
