#!/bin/sh
# kerntune compile: tunes a small model a few trials, compiles it from the
# database alone into a C library, builds it with the generated Makefile
# (static, shared, pkg-config), runs the generated self-check and a program
# of ours that checks two kernels against plain loops; the manifest names
# the best stored trials; an untuned task gets the default schedule and a
# warning (an error with --require-tuned); a missing database, a target
# mismatch and an unwritable DIR are clear errors.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/compile_common.inc"
command -v sqlite3 >/dev/null || { echo "sqlite3 command not installed"; exit 77; }

lib=$tmp/lib
for f in ct.h ct_kernels.c ct_check.c Makefile ct.pc manifest.json; do
    [ -s "$lib/$f" ] || fail "compile wrote no $f"
done
make -C "$lib" >"$tmp/make.log" 2>&1 || fail "make: $(tail -20 "$tmp/make.log")"
[ -f "$lib/libct.a" ] && [ -f "$lib/libct.so" ] || fail "no libct.a / libct.so"
make -C "$lib" check >"$tmp/check.log" 2>&1 || fail "make check: $(tail -20 "$tmp/check.log")"
grep -q "3 of 3 kernels match the reference" "$tmp/check.log" || fail "self-check: $(cat "$tmp/check.log")"

# Our own program, against the static library, then the shared one found
# through the pkg-config file.
cc -O1 -I"$lib" "$tmp/use.c" "$lib/libct.a" -fopenmp -lm -o "$tmp/use_static" ||
    fail "use.c does not build against libct.a"
"$tmp/use_static" >"$tmp/use.log" 2>&1 || fail "use (static): $(cat "$tmp/use.log")"
flags=$(PKG_CONFIG_PATH=$lib pkg-config --cflags --libs ct) || fail "pkg-config ct"
# shellcheck disable=SC2086
cc -O1 "$tmp/use.c" $flags -lm -o "$tmp/use_shared" || fail "use.c does not build with: $flags"
LD_LIBRARY_PATH=$lib "$tmp/use_shared" >"$tmp/use.log" 2>&1 || fail "use (shared): $(cat "$tmp/use.log")"
grep -q "use: ok" "$tmp/use.log" || fail "use: $(cat "$tmp/use.log")"

make -C "$lib" install PREFIX=/usr DESTDIR="$tmp/inst" >"$tmp/make.log" 2>&1 ||
    fail "make install: $(tail -20 "$tmp/make.log")"
for f in include/ct.h lib/libct.a lib/libct.so lib/pkgconfig/ct.pc; do
    [ -f "$tmp/inst/usr/$f" ] || fail "make install did not install $f"
done
grep -q "^prefix=/usr$" "$tmp/inst/usr/lib/pkgconfig/ct.pc" || fail "installed ct.pc: $(cat "$tmp/inst/usr/lib/pkgconfig/ct.pc")"

# The manifest names each task's fastest successful trial of the target.
target=$(sqlite3 "$tmp/t.db" "select distinct target from logs")
for id in $(sqlite3 "$tmp/t.db" "select (select id from logs l2 where l2.workload_hash = l.workload_hash and l2.err_no = 0 and l2.cost > 0 order by cost, id limit 1) from logs l group by workload_hash"); do
    grep -q "\"trial_id\":	$id," "$lib/manifest.json" || fail "manifest lacks trial $id: $(cat "$lib/manifest.json")"
done
grep -q "\"target\":	\"$target\"" "$lib/manifest.json" || fail "manifest target"
grep -q '"kerntune_version":' "$lib/manifest.json" || fail "manifest has no version"

# An untuned task: warning naming it, default schedule, still correct.
sed 's/"layers": \[/"layers": [{"op": "softmax", "rows": 4, "cols": 8},/' "$tmp/ct.json" >"$tmp/ct2.json"
expect 0 "warning: task softmax.*untuned default schedule" compile "$tmp/ct2.json" --db "$tmp/t.db" -o "$tmp/lib2"
grep -q "4 tasks (3 tuned, 1 untuned)" "$tmp/out" || fail "summary: $(cat "$tmp/out")"
grep -q "UNTUNED" "$tmp/lib2/ct.h" || fail "header does not flag the untuned task"
make -C "$tmp/lib2" check >"$tmp/check.log" 2>&1 || fail "make check (untuned): $(tail -20 "$tmp/check.log")"
grep -q "4 of 4 kernels match" "$tmp/check.log" || fail "self-check (untuned): $(cat "$tmp/check.log")"
expect 1 "task softmax.*--require-tuned" compile "$tmp/ct2.json" --db "$tmp/t.db" -o "$tmp/lib3" --require-tuned
[ -e "$tmp/lib3" ] && fail "--require-tuned failure wrote $tmp/lib3"

# Clear errors.
sum_before=$(sqlite3 "$tmp/t.db" "select count(*), sum(cost) from logs")
expect 1 "$tmp/none.db: no such database" compile "$tmp/ct.json" --db "$tmp/none.db" -o "$tmp/x"
[ -e "$tmp/none.db" ] && fail "compile created the missing database"
sed 's/"threads": 1}/"threads": 1, "cflags": ["-O2", "-fopenmp"]}/' "$tmp/ct.json" >"$tmp/ct_o2.json"
expect 1 "tuned for:" compile "$tmp/ct_o2.json" --db "$tmp/t.db" -o "$tmp/x"
grep -qF "$target" "$tmp/out" || fail "mismatch message does not name the stored target: $(cat "$tmp/out")"
cat >"$tmp/other.json" <<'JSON'
{"name": "other", "layers": [{"op": "softmax", "rows": 4, "cols": 8}]}
JSON
expect 1 "no trial of any task.*kerntune tune" compile "$tmp/other.json" --db "$tmp/t.db" -o "$tmp/x"
: >"$tmp/afile"
expect 1 "$tmp/afile/sub: cannot write the output" compile "$tmp/ct.json" --db "$tmp/t.db" -o "$tmp/afile/sub"
expect 1 "$tmp/nosuch.json" compile "$tmp/nosuch.json" --db "$tmp/t.db" -o "$tmp/x"
expect 2 usage compile "$tmp/ct.json" --db "$tmp/t.db"
expect 2 usage compile --db "$tmp/t.db" -o "$tmp/x"
[ -e "$tmp/x" ] && fail "a failed compile created its output directory"
[ "$(sqlite3 "$tmp/t.db" "select count(*), sum(cost) from logs")" = "$sum_before" ] ||
    fail "compile changed the database"
echo ok
