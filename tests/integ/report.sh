#!/bin/sh
# kerntune report and the database-only views: tunes a two-task model into a
# real database, checks `status|jobs|tasks|best --db FILE [--json]` against
# the rows, writes the HTML report (one file: inline SVG, no scripts, nothing
# fetched), and renders it with headless Chromium to a PNG whose pixels must
# hold the plots (skipped, saying so, when chromium is not installed).
set -u
bin=${KT_BIN_DIR:-build}
kt=$bin/kerntune
for tool in sqlite3 python3; do
    command -v $tool >/dev/null 2>&1 || { echo "needs $tool"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

expect() { # expect CODE PATTERN ARGS...
    code=$1; pat=$2; shift 2
    "$kt" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq "$code" ] || fail "kerntune $*: exit $rc, want $code: $(head -20 "$tmp/out" "$tmp/err")"
    grep -q -- "$pat" "$tmp/out" "$tmp/err" || fail "kerntune $*: output lacks '$pat': $(head -20 "$tmp/out" "$tmp/err")"
}

cat >"$tmp/two.json" <<'JSON'
{"name": "two", "target": {"threads": 1},
 "tuning": {"trials": 16, "measures_per_round": 8},
 "measure": {"repeat": 1, "min_repeat_ms": 1},
 "tasks": [{"name": "mm", "compute": ["C[i,j] += A[i,k] * B[k,j]"],
            "shapes": {"A": [64, 48], "B": [48, 32]}},
           {"name": "mm2", "weight": 2, "compute": ["C[i,j] += A[i,k] * B[k,j]"],
            "shapes": {"A": [32, 32], "B": [32, 32]}}]}
JSON
"$kt" tune "$tmp/two.json" --db "$tmp/t.db" --workers 2 --quiet >"$tmp/tune.log" 2>&1 ||
    fail "tune: $(tail -20 "$tmp/tune.log")"
n=$(sqlite3 "$tmp/t.db" "select count(*) from logs")
[ "$n" = 16 ] || fail "tuning stored $n trials, want 16"

# The database alone answers what the daemon would.
expect 0 "^trials: 16" status --db "$tmp/t.db"
expect 0 "^| two | done  |     2 |     16 |     16 | 100.0% | done |      0 | .* | local |$" jobs --db "$tmp/t.db"
expect 0 "^Progress: 16/16 trials (100.0%), done" tasks two --db "$tmp/t.db"
expect 0 'steps' best two --db "$tmp/t.db" --json
python3 - "$tmp/out" "$tmp/t.db" <<'PY' || fail "best --json does not match the database: $(cat "$tmp/out")"
import json, sqlite3, sys
r = json.load(open(sys.argv[1]))
db = sqlite3.connect(sys.argv[2])
assert r["ok"] and r["cmd"] == "best" and r["job"] == "two", r
total = 0
for t in r["best"]:
    wl, = db.execute("select workload_hash from tasks where task_name=?", (t["name"],)).fetchone()
    cost, cfg = db.execute("select cost, config from logs where workload_hash=? and err_no=0 "
                           "order by cost limit 1", (wl,)).fetchone()
    assert abs(t["latency_ms"] - cost * 1e3) < 1e-9 and t["config"] == cfg, (t, cost)
    total += t["weight"] * cost * 1e3
assert abs(r["total_latency_ms"] - total) < 1e-9, (r["total_latency_ms"], total)
PY
expect 1 "t.db: no job \"nosuch\"" tasks nosuch --db "$tmp/t.db"
[ -s "$tmp/out" ] && fail "an error went to stdout: $(cat "$tmp/out")"
expect 1 "none.db: no such database" jobs --db "$tmp/none.db"
[ -e "$tmp/none.db" ] && fail "a query created the database"
expect 2 "usage:" tasks --db "$tmp/t.db"
expect 1 "none.sock: No such file or directory (is kerntuned running?) (without the daemon: --db FILE)" jobs --socket "$tmp/none.sock"

# The report: one file, no scripts, nothing from the network.
expect 0 "wrote $tmp/r.html: 1 jobs, 16 trials" report --db "$tmp/t.db" "$tmp/two.json" -o "$tmp/r.html"
expect 0 "wrote $tmp/all.html: 1 jobs" report --db "$tmp/t.db" -o "$tmp/all.html"
expect 1 "no job \"nosuch\"" report --db "$tmp/t.db" nosuch -o "$tmp/x.html"
expect 2 "usage:" report
for want in "<svg class='plot curve-trials" "<svg class='plot curve-time" \
            "<svg class='plot errors" "<svg class='plot workers" "<h2>Job two</h2>" \
            ">mm2</td><td>2</td>" "NO_ERROR"; do
    grep -q -- "$want" "$tmp/r.html" || fail "report lacks $want"
done
grep -Eiq '<script|<link|src=|@import|url\(' "$tmp/r.html" && fail "report is not self-contained"
grep -o 'http[s]*://[^"'"'"' ]*' "$tmp/r.html" | grep -v '^http://www.w3.org/2000/svg$' &&
    fail "report names a network address"

browser=
for b in chromium chromium-browser google-chrome; do
    command -v $b >/dev/null 2>&1 && { browser=$b; break; }
done
if [ -z "$browser" ]; then
    echo "report checked as text; rendering skipped: chromium not installed (scripts/install-deps.sh)"
    exit 77
fi
HOME=$tmp timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$tmp/profile" --window-size=1200,2400 \
    --screenshot="$tmp/r.png" "file://$tmp/r.html" >"$tmp/chromium.log" 2>&1
[ -s "$tmp/r.png" ] || fail "chromium wrote no PNG: $(tail -5 "$tmp/chromium.log")"
[ -n "${KT_REPORT_PNG:-}" ] && cp "$tmp/r.png" "$KT_REPORT_PNG"
# The pixels: not blank, and the colours of the plots are there (curve
# against trials #1f77b4, against time #ff7f0e, NO_ERROR bars #2ca02c, the
# busiest heat-map cells near rgb(55,55,255)).
python3 - "$tmp/r.png" <<'PY' || fail "the rendered report lacks its plots"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
pos, idat = 8, b""
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype)
bpp = 3 if ctype == 2 else 4
raw, stride = zlib.decompress(idat), w * bpp
rows, prev, i = [], bytearray(stride), 0
for y in range(h):
    f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
    i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line)
    prev = line
count, ink = {}, 0
for line in rows:
    for x in range(0, stride, bpp):
        px = tuple(line[x:x + 3])
        if px != (255, 255, 255):
            ink += 1
        count[px] = count.get(px, 0) + 1
print("pixels %dx%d, %.1f%% not white, %d colours" % (w, h, 100.0 * ink / (w * h), len(count)))
assert ink > 0.02 * w * h, "blank page"
for name, rgb, least in (("curve vs trials", (31, 119, 180), 300),
                         ("curve vs time", (255, 127, 14), 300),
                         ("err_no bars", (44, 160, 44), 500),
                         ("busy workers", (55, 55, 255), 500)):
    near = sum(v for px, v in count.items() if max(abs(p - q) for p, q in zip(px, rgb)) <= 12)
    print("%s: %d pixels" % (name, near))
    assert near >= least, name
PY
echo "report rendered by $browser with its plots"
exit 0
