#!/bin/sh
# kerntune-rpc's command line: bad arguments exit 2 with a message naming
# the option; an unreachable tracker with --once exits 1 and names it;
# without --once the worker keeps retrying (with backoff) until SIGTERM,
# then exits 0 and removes its temp dir.
set -u
rpc=${KT_BIN_DIR:-build}/kerntune-rpc
[ -x "$rpc" ] || { echo "no $rpc"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

expect() { # expect CODE PATTERN ARGS...
    code=$1; pat=$2; shift 2
    "$rpc" "$@" >"$tmp/out" 2>&1
    rc=$?
    [ $rc -eq "$code" ] || fail "kerntune-rpc $*: exit $rc, want $code: $(cat "$tmp/out")"
    grep -q -- "$pat" "$tmp/out" || fail "kerntune-rpc $*: output lacks '$pat': $(cat "$tmp/out")"
}

expect 2 usage
expect 2 usage server --key=k
expect 2 "expected HOST:PORT" server --tracker=nohost --key=k
expect 2 "the port must be a number from 0 to 65535" server --tracker=h:70000 --key=k
expect 2 "written \[ADDRESS\]:PORT" server --tracker=::1:9190 --key=k
expect 2 "unknown role 'fly'" server --tracker=127.0.0.1:1 --key=k --roles=build,fly
expect 2 "--jobs" server --tracker=127.0.0.1:1 --key=k --jobs=0
expect 2 "token file $tmp/none" server --tracker=127.0.0.1:1 --key=k --token-file "$tmp/none"
: >"$tmp/empty"
chmod 600 "$tmp/empty"
expect 2 "line 1 is empty" server --tracker=127.0.0.1:1 --key=k --token-file "$tmp/empty"
# Token files: refused when group or others may read them (like ssh keys);
# trailing blanks are not part of the token (the worker and the daemon
# share common/token.c, so they agree).
printf 'tok\n' >"$tmp/open"
chmod 644 "$tmp/open"
expect 2 "permissions 0644 are too open" server --tracker=127.0.0.1:1 --key=k --token-file "$tmp/open"
chmod 640 "$tmp/open"
expect 2 "permissions 0640 are too open" server --tracker=127.0.0.1:1 --key=k --token-file "$tmp/open"
expect 2 "not a regular file" server --tracker=127.0.0.1:1 --key=k --token-file "$tmp"
expect 2 "missing value for '--token-file'" server --tracker=127.0.0.1:1 --key=k --token-file
expect 2 "'12x' is not an integer" server --tracker=127.0.0.1:1 --key=k --jobs=12x
expect 2 "unknown argument '--bogus'" server --tracker=127.0.0.1:1 --key=k --bogus

# Port 1 (tcpmux): privileged and, on any test machine, closed.
port=1
expect 1 "connect 127.0.0.1:$port" server --tracker=127.0.0.1:$port --key=k --once

TMPDIR=$tmp "$rpc" server --tracker=127.0.0.1:$port --key=k >"$tmp/log" 2>&1 &
pid=$!
i=0
until [ "$(grep -c 'retrying in' "$tmp/log")" -ge 3 ]; do
    i=$((i + 1)); [ $i -gt 100 ] && fail "no retries: $(cat "$tmp/log")"
    sleep 0.1
done
grep -q 'retrying in 400 ms' "$tmp/log" || fail "no backoff: $(cat "$tmp/log")"
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 0 ] || fail "exit $rc after SIGTERM"
ls "$tmp" | grep -q kerntune-rpc && fail "temp dir left behind"
echo ok
