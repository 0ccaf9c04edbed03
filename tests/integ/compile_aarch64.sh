#!/bin/sh
# The aarch64 path of kerntune compile: the library compiled from a
# database is cross-built with gcc-aarch64-linux-gnu through its own
# Makefile, and its self-check and our checking program run under
# qemu-aarch64; a network compiled for an aarch64 target runs under
# `kerntune run` (qemu picked from the program's ELF machine).
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

# `kerntune run` on a network compiled for an aarch64 target runs its
# inference program under qemu-aarch64 and gives the native outputs (and
# matches ONNX Runtime when it is installed: compile_net.sh installs it).
cp "$here/../fuzz/corpus/onnx/cnn.onnx" "$tmp/"
for arch in native aarch64; do
    case $arch in
    native) target='{"threads": 1}' ;;
    *) target='{"cc": "aarch64-linux-gnu-gcc", "cflags": ["-O2", "-fopenmp"], "vector_bytes": 16, "threads": 1}' ;;
    esac
    printf '{"name": "n%s", "onnx": "cnn.onnx", "inputs": {"x": [2, 3, 8, 8]}, "target": %s}\n' \
        "$arch" "$target" >"$tmp/n$arch.json"
    "$kt" compile "$tmp/n$arch.json" --untuned -o "$tmp/n$arch" >"$tmp/c.log" 2>&1 ||
        fail "compile $arch network: $(cat "$tmp/c.log")"
done
"$kt" run "$tmp/nnative" --repeat 1 --output "$tmp/o.bin" >"$tmp/run.log" 2>&1 ||
    fail "run native: $(cat "$tmp/run.log")"
(cd "$tmp/nnative" && ./nnative_infer -s "$tmp/in.bin" -n 1 >/dev/null) || fail "nnative_infer -s"
"$kt" run "$tmp/nnative" --repeat 1 --input "$tmp/in.bin" --output "$tmp/o.bin" >"$tmp/run.log" 2>&1 ||
    fail "run native: $(cat "$tmp/run.log")"
"$kt" run "$tmp/naarch64" --repeat 1 --input "$tmp/in.bin" --output "$tmp/o64.bin" >"$tmp/run.log" 2>&1 ||
    fail "run aarch64: $(cat "$tmp/run.log")"
grep -q "emulator: qemu-aarch64 -L /usr/aarch64-linux-gnu" "$tmp/run.log" || fail "run aarch64: $(cat "$tmp/run.log")"
file "$tmp/naarch64/naarch64_infer" | grep -q "ARM aarch64" || fail "naarch64_infer is not aarch64"
od -An -v -f -w4 "$tmp/o.bin" >"$tmp/o.txt"
od -An -v -f -w4 "$tmp/o64.bin" >"$tmp/o64.txt"
paste "$tmp/o.txt" "$tmp/o64.txt" | awk '
    { d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5) bad = 1; n++ }
    END { exit (bad || n != 8) }' || fail "aarch64 outputs differ: $(paste "$tmp/o.txt" "$tmp/o64.txt")"
# A wrong emulator is the user's to fix: its error is shown.
"$kt" run "$tmp/naarch64" --repeat 1 --emulator "$tmp/no-such-qemu" >"$tmp/run.log" 2>&1 &&
    fail "run with a missing emulator passed"
grep -q "no-such-qemu" "$tmp/run.log" || fail "missing emulator: $(cat "$tmp/run.log")"
ort=${KT_ORT_DIR:-${KT_CACHE_DIR:-${HOME:-/tmp}/.cache/kerntune}/ort}
if [ -f "$ort/node_modules/onnxruntime-node/package.json" ]; then
    KT_ORT_DIR=$ort "$kt" run "$tmp/naarch64" --repeat 1 --check >"$tmp/run.log" 2>&1 ||
        fail "run --check aarch64: $(cat "$tmp/run.log")"
    grep "check:" "$tmp/run.log"
else
    echo "note: onnxruntime-node not in $ort; the aarch64 network is checked against the native one only"
fi
echo ok
