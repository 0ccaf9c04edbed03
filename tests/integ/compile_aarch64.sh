#!/bin/sh
# The aarch64 path of kerntune compile: the library compiled from a
# database is cross-built with gcc-aarch64-linux-gnu through its own
# Makefile, and its self-check and our checking program run under
# qemu-aarch64.
here=$(cd "$(dirname "$0")" && pwd)
for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-gcc-ar qemu-aarch64; do
    command -v $tool >/dev/null ||
        { echo "$tool not installed (scripts/install-deps.sh: gcc-aarch64-linux-gnu qemu-user)"; exit 77; }
done
sysroot=/usr/aarch64-linux-gnu
[ -d "$sysroot/lib" ] || { echo "no aarch64 libc in $sysroot (libc6-dev-arm64-cross)"; exit 77; }
# Under the sanitizers (make integ-asan) kerntune's side of this path runs in
# compile.sh; the cross build and qemu do not run our code, so they are left
# to the plain build to keep make test short.
case ${KT_BIN_DIR:-build} in
*asan*) echo "ok: kerntune compile is checked by compile.sh; the cross build runs in the plain build"; exit 0 ;;
esac
. "$here/compile_common.inc"

lib=$tmp/lib
run="qemu-aarch64 -L $sysroot"
make -C "$lib" CC=aarch64-linux-gnu-gcc CFLAGS="-O2 -fopenmp" RUN="$run" all check \
    >"$tmp/make.log" 2>&1 || fail "cross make check: $(tail -20 "$tmp/make.log")"
file "$lib/libct.so" | grep -q "ARM aarch64" || fail "libct.so is not aarch64: $(file "$lib/libct.so")"
grep -q "3 of 3 kernels match the reference" "$tmp/make.log" || fail "self-check: $(tail "$tmp/make.log")"
aarch64-linux-gnu-gcc -O1 -I"$lib" "$tmp/use.c" "$lib/libct.a" -fopenmp -lm -o "$tmp/use" ||
    fail "use.c does not cross-build against libct.a"
$run "$tmp/use" >"$tmp/use.log" 2>&1 || fail "use under qemu: $(cat "$tmp/use.log")"
grep -q "use: ok" "$tmp/use.log" || fail "use: $(cat "$tmp/use.log")"
echo ok
