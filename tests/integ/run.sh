#!/bin/sh
# Runs every tests/integ/*.sh case against the real binaries in $BUILD.
# A case exits 0 (pass), 77 (skipped, with a reason on stdout) or anything
# else (fail).  Prints "integ: N passed, N failed, N skipped".
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-build}
export BUILD
export KT_BIN_DIR="$(cd "$BUILD" && pwd)"
pass=0; fail=0; skip=0
for t in "$here"/*.sh; do
    name=$(basename "$t" .sh)
    [ "$name" = run ] && continue
    log=$(mktemp)
    start=$(date +%s.%N)
    sh "$t" >"$log" 2>&1
    rc=$?
    took=$(echo "$start $(date +%s.%N)" | awk '{printf "%.1f s", $2 - $1}')
    case $rc in
    0) pass=$((pass + 1)); echo "PASS $name ($took)" ;;
    77) skip=$((skip + 1)); echo "SKIP $name: $(tail -1 "$log")" ;;
    *) fail=$((fail + 1)); echo "FAIL $name (exit $rc, $took)"; sed 's/^/    /' "$log" | tail -40 ;;
    esac
    rm -f "$log"
done
echo "integ: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
