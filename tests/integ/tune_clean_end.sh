#!/bin/sh
# The normal end of kerntune tune warns about nothing: closing the tracker
# drops its local workers' connections on purpose, so neither the tracker
# ("worker ... gone: tracker closing") nor the worker ("tracker closed the
# connection") logs it as a warning.  Nor does a new database claim to be
# an upgraded one (it is created through every schema migration).  The
# target's FMA peak is measured and shown.  A task without any program
# within the search's bounds is warned about.
set -u
BIN=${KT_BIN_DIR:?}
T=$(mktemp -d /tmp/kt-cleanend.XXXXXX)
trap 'rm -rf "$T"' EXIT
here=$(cd "$(dirname "$0")/../.." && pwd)
"$BIN/kerntune" tune "$here/models/tiny.json" --trials 5 --db "$T/t.db" \
    > "$T/tune.log" 2>&1
rc=$?
[ $rc = 0 ] || { echo "FAIL: kerntune tune exited $rc"; tail -20 "$T/tune.log"; exit 1; }
# The tracker's line is always there; the worker's only when it logs before
# it exits with its parent, so it is checked only for its level.
grep -q "tracker: worker .* gone: tracker closing" "$T/tune.log" ||
    { echo "FAIL: the tracker never logged closing its worker"; tail -5 "$T/tune.log"; exit 1; }
# The FMA peak probe went first to the workers: logged, and each task's
# share of it in the summary.
grep -Eq "INFO engine: job .*: FMA peak [0-9]+\.[0-9] GFLOPS on [0-9]+ threads? \(worker local-[0-9]+\)" "$T/tune.log" ||
    { echo "FAIL: no FMA peak logged"; grep -i peak "$T/tune.log"; exit 1; }
grep -Eq "^FMA peak of the target: [0-9]+\.[0-9] GFLOPS" "$T/tune.log" &&
    grep -Eq " [0-9]+%$" "$T/tune.log" ||
    { echo "FAIL: no FMA peak in the summary"; tail -12 "$T/tune.log"; exit 1; }
# A job whose kernels take every CPU times the peak before its first
# search, alone (the engine's quiet jobs), and still ends.
sed 's/"threads": 1/"threads": 0/' "$here/models/tiny.json" > "$T/all.json"
"$BIN/kerntune" tune "$T/all.json" --trials 5 --db "$T/all.db" > "$T/all.log" 2>&1 ||
    { echo "FAIL: kerntune tune on every CPU exited $?"; tail -20 "$T/all.log"; exit 1; }
grep -Eq "FMA peak [0-9]+\.[0-9] GFLOPS on $(nproc) threads? " "$T/all.log" ||
    { echo "FAIL: no FMA peak on $(nproc) threads"; grep -i peak "$T/all.log"; exit 1; }
if grep "schema upgraded" "$T/tune.log"; then
    echo "FAIL: a new database was logged as upgraded"
    exit 1
fi
if grep -E "WARN (rpc: tracker closed the connection|tracker: worker .* gone: tracker closing)" "$T/tune.log"; then
    echo "FAIL: the normal end logged a warning"
    exit 1
fi
if grep "has no kernel" "$T/tune.log" "$T/all.log"; then
    echo "FAIL: a task of tiny.json was said to have no kernel"
    exit 1
fi
# A task no schedule of which fits the code-size bound (a sum of 600
# reads: even its scalar statement weighs 601 against 512) ends the job
# without a kernel, and the log says so as a warning, not only "search
# space exhausted" at INFO.
terms=$(awk 'BEGIN { for (i = 1; i < 600; i++) printf " + A[i,j]" }')
printf '{"name": "huge", "tuning": {"trials": 8, "measures_per_round": 8},
 "tasks": [{"name": "sum600", "compute": ["O[i,j] = A[i,j]%s"],
            "shapes": {"A": [16, 16]}}]}\n' "$terms" > "$T/huge.json"
"$BIN/kerntune" tune "$T/huge.json" --db "$T/huge.db" > "$T/huge.log" 2>&1 ||
    { echo "FAIL: kerntune tune of a task without programs exited $?"; tail -20 "$T/huge.log"; exit 1; }
grep -q "WARN engine: job huge: task 0 (sum600): search space exhausted before any program of it ran without error .*: the task has no kernel" "$T/huge.log" ||
    { echo "FAIL: no warning that sum600 has no kernel"; grep -i "exhausted\|trials:" "$T/huge.log"; exit 1; }
exit 0
