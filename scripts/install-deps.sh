#!/bin/sh
# Installs everything kerntune needs to build, test and benchmark on Debian 12.
# Idempotent and non-interactive: packages already present are left alone.
set -eu

PACKAGES="build-essential pkg-config clang clang-format libclang-rt-14-dev
  libuv1-dev libsqlite3-dev sqlite3 libcjson-dev libxgboost-dev libcmocka-dev
  libsystemd-dev libopenblas-dev libdnnl-dev libprotobuf-c-dev protobuf-c-compiler libonnx-dev
  valgrind gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
  systemd python3 chromium"

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
