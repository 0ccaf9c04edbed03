#!/bin/sh
# Builds every libFuzzer target given (default: tests/fuzz/fuzz_*.c) with
# clang -fsanitize=fuzzer,address,undefined into $BUILD/fuzz_NAME and runs
# each for $FUZZ_SECONDS on tests/fuzz/corpus/NAME/.  New inputs go to
# $BUILD/corpus_NAME (the checked-in corpus is only read); crash inputs go
# to $BUILD/crash-*.  Exits non-zero when a build fails or a target crashes.
set -u
BUILD=${BUILD:-build/fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
CLANG=${CLANG:-clang}
[ $# -eq 0 ] && set -- tests/fuzz/fuzz_*.c
mkdir -p "$BUILD"
# onnx/ decodes with C generated from Debian's onnx.proto (as the Makefile).
gen=$BUILD/gen
mkdir -p "$gen"
[ "$gen/onnx.pb-c.c" -nt /usr/include/onnx/onnx.proto ] ||
    protoc-c --c_out="$gen" -I/usr/include/onnx /usr/include/onnx/onnx.proto ||
    { echo "fuzz: protoc-c failed"; exit 1; }
libs="$(ls common/*.c ir/*.c onnx/*.c config/*.c) daemon/ctl.c $gen/onnx.pb-c.c $(ls measure/worker/*.c 2>/dev/null | grep -v _main.c)"
# ir/ and config/ use cJSON; daemon/ctl.c (the control socket) libuv.
extra="-I$gen $(pkg-config --cflags --libs libcjson libprotobuf-c libuv 2>/dev/null)"
failed=""
for src in "$@"; do
    name=$(basename "$src" .c)
    name=${name#fuzz_}
    bin=$BUILD/fuzz_$name
    echo "== fuzz $name: building $bin"
    # shellcheck disable=SC2086
    if ! $CLANG -g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -I. "$src" $libs $extra -lm -ldl -o "$bin"; then
        echo "fuzz $name: build failed"
        failed="$failed $name"
        continue
    fi
    work=$BUILD/corpus_$name
    mkdir -p "$work"
    seeds=tests/fuzz/corpus/$name
    [ -d "$seeds" ] || seeds=""
    echo "== fuzz $name: running for ${FUZZ_SECONDS}s"
    # shellcheck disable=SC2086
    if ! "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$BUILD/" "$work" $seeds \
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
