#!/bin/sh
# Builds every libFuzzer target given (default: tests/fuzz/fuzz_*.c) with
# clang -fsanitize=fuzzer,address,undefined into $BUILD/fuzz_NAME, linked
# with the library built the same way in $BUILD/lib, and runs each for
# $FUZZ_SECONDS on tests/fuzz/corpus/NAME/ (with tests/fuzz/NAME.dict when
# there is one).  New inputs go to
# $BUILD/corpus_NAME (the checked-in corpus is only read); crash inputs go
# to $BUILD/crash-*.  Exits non-zero when a build fails or a target crashes.
set -u
BUILD=${BUILD:-build/fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
CLANG=${CLANG:-clang}
[ $# -eq 0 ] && set -- tests/fuzz/fuzz_*.c
mkdir -p "$BUILD"
# The library as the Makefile builds it, by clang with the sanitizers and
# libFuzzer's coverage (CFLAGS from the environment is appended to).
lib=$BUILD/lib
CFLAGS="-fsanitize=fuzzer-no-link" make -s -j2 CC="$CLANG" BUILD="$lib" SAN=1 \
    "$lib/libkerntune.a" || { echo "fuzz: the library did not build"; exit 1; }
# fuzz_ctl's daemon measures with the load test's fake worker.
make -s -j2 BUILD="$BUILD/plain" "$BUILD/plain/bench/fake_worker" ||
    { echo "fuzz: bench/fake_worker did not build"; exit 1; }
KT_FUZZ_FAKE_WORKER=$(cd "$BUILD/plain/bench" && pwd)/fake_worker
export KT_FUZZ_FAKE_WORKER
extra="-I$lib/gen $(pkg-config --cflags libcjson libuv) $lib/libkerntune.a
    $(pkg-config --libs libuv sqlite3 libcjson libprotobuf-c) -lxgboost
    $(pkg-config --libs libsystemd 2>/dev/null)"
failed=""
for src in "$@"; do
    name=$(basename "$src" .c)
    name=${name#fuzz_}
    bin=$BUILD/fuzz_$name
    echo "== fuzz $name: building $bin"
    # shellcheck disable=SC2086
    if ! $CLANG -g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -I. "$src" $extra -lm -ldl -lpthread -o "$bin"; then
        echo "fuzz $name: build failed"
        failed="$failed $name"
        continue
    fi
    work=$BUILD/corpus_$name
    mkdir -p "$work"
    seeds=tests/fuzz/corpus/$name
    [ -d "$seeds" ] || seeds=""
    dict=
    [ -f "tests/fuzz/$name.dict" ] && dict=-dict=tests/fuzz/$name.dict
    echo "== fuzz $name: running for ${FUZZ_SECONDS}s"
    # shellcheck disable=SC2086
    if ! "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$BUILD/" $dict "$work" $seeds \
        2>"$BUILD/fuzz_$name.log"; then
        tail -n 40 "$BUILD/fuzz_$name.log"
        echo "fuzz $name: FAILED (log in $BUILD/fuzz_$name.log)"
        failed="$failed $name"
        continue
    fi
    grep -E '^stat::(number_of_executed_units|peak_rss_mb)|cov:' \
        "$BUILD/fuzz_$name.log" | tail -n 3
    echo "fuzz $name: ok"
done
if [ -n "$failed" ]; then
    echo "fuzz: failed:$failed"
    exit 1
fi
echo "fuzz: all passed"
