#!/bin/sh
# --help and --version of the three programs print on stdout and exit 0;
# bad usage exits 2 with the message on stderr only; `make install` puts
# the four man pages in place and each renders without a warning from man.
set -u
bin=${KT_BIN_DIR:-build}
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for p in kerntune kerntuned kerntune-rpc; do
    for opt in --help --version; do
        "$bin/$p" $opt >"$tmp/out" 2>"$tmp/err"; rc=$?
        [ $rc = 0 ] || fail "$p $opt: exit $rc"
        [ -s "$tmp/err" ] && fail "$p $opt wrote to stderr: $(cat "$tmp/err")"
        [ -s "$tmp/out" ] || fail "$p $opt printed nothing"
    done
    grep -q "^$p [0-9][0-9.]*$" "$tmp/out" || fail "$p --version: $(cat "$tmp/out")"
    "$bin/$p" --help | grep -q "Exit status:" || fail "$p --help does not document its exit status"
    "$bin/$p" --no-such-option >"$tmp/out" 2>"$tmp/err"; rc=$?
    [ $rc = 2 ] || fail "$p --no-such-option: exit $rc, want 2"
    [ -s "$tmp/out" ] && fail "$p: usage error on stdout: $(cat "$tmp/out")"
    grep -q "usage" "$tmp/err" || fail "$p: no usage on stderr"
done
"$bin/kerntune-rpc" server --help | grep -q "^usage: kerntune-rpc server" || fail "kerntune-rpc server --help"
"$bin/kerntune" tasks --help | grep -q "^usage: kerntune status" || fail "kerntune tasks --help"
"$bin/kerntune" report --help | grep -q "^usage: kerntune report" || fail "kerntune report --help"
# Numbers out of range are refused before any conversion (4294967297 once
# wrapped to 1 repeat).
for arg in "--repeat 4294967297" "--repeat ''" "--threads -1" "--threads 99999999999"; do
    eval "\"\$bin/kerntune\" run \"\$tmp\" $arg" >"$tmp/out" 2>"$tmp/err"; rc=$?
    [ $rc = 2 ] || fail "kerntune run $arg: exit $rc, want 2"
    grep -q "expected" "$tmp/err" || fail "kerntune run $arg: $(cat "$tmp/err")"
done

# make install with a staging root: binaries and the man pages.  -o all:
# install the programs under test as they are (never relink them here,
# e.g. without the sanitizer flags they were built with).
make -s -C "$here" -o all BUILD="$(cd "$bin" && pwd)" install DESTDIR="$tmp/root" PREFIX=/usr \
    >"$tmp/install.log" 2>&1 || fail "make install: $(tail -20 "$tmp/install.log")"
for f in bin/kerntune bin/kerntuned bin/kerntune-rpc share/man/man1/kerntune.1 \
         share/man/man8/kerntuned.8 share/man/man1/kerntune-rpc.1 \
         share/man/man5/kerntune.json.5 share/doc/kerntune/boards.md; do
    [ -f "$tmp/root/usr/$f" ] || fail "make install did not install $f"
done
if command -v man >/dev/null 2>&1; then
    for page in man1/kerntune.1 man8/kerntuned.8 man1/kerntune-rpc.1 man5/kerntune.json.5; do
        LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$tmp/root/usr/share/man/$page" \
            >"$tmp/page" 2>"$tmp/warn" || fail "man $page failed"
        [ -s "$tmp/warn" ] && fail "man $page: $(cat "$tmp/warn")"
        case $page in
        *.5) grep -q "DAEMON CONFIG" "$tmp/page" || fail "$page lacks the daemon config" ;;
        *) grep -q "EXIT STATUS" "$tmp/page" || fail "$page has no EXIT STATUS" ;;
        esac
    done
fi
echo "help, version, usage errors and installed man pages checked"
exit 0
