#!/bin/sh
# Runs cmocka unit-test binaries and prints one closing line:
#   "unit: N passed, N failed"
# KT_VALGRIND=1 runs each binary under valgrind (leaks are failures).
# Test binaries find the build directory through $BUILD.
set -u
pass=0
fail=0
failed_bins=""
for bin in "$@"; do
    log=$(mktemp)
    start=$(date +%s.%N)
    if [ "${KT_VALGRIND:-0}" = 1 ]; then
        valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
            --trace-children=no "$bin" >"$log" 2>&1
    else
        "$bin" >"$log" 2>&1
    fi
    rc=$?
    took=$(echo "$start $(date +%s.%N)" | awk '{printf "%.1f s", $2 - $1}')
    ok=$(grep -c '^\[       OK \]' "$log")
    bad=$(grep -c '^\[  FAILED  \]' "$log" | head -1)
    # The summary repeats the failed names; count each failure once.
    bad=$(grep '^\[  FAILED  \] ' "$log" | grep -vc 'test(s), listed below' )
    bad=$((bad / 2))
    pass=$((pass + ok))
    if [ $rc -ne 0 ] && [ $bad -eq 0 ]; then
        bad=1
    fi
    fail=$((fail + bad))
    if [ $rc -ne 0 ]; then
        failed_bins="$failed_bins $bin"
        cat "$log"
    else
        grep -E '^\[==========\] .* run\.|SKIP' "$log" |
            sed "s|^|$(basename "$bin"): |; s|run\.\$|run ($took).|"
    fi
    rm -f "$log"
done
[ -n "$failed_bins" ] && echo "failed binaries:$failed_bins"
echo "unit: $pass passed, $fail failed"
[ $fail -eq 0 ]
