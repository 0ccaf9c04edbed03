#!/bin/sh
# kerntuned and kerntune start-up checks: bad option values are refused
# (exit 2, naming the option) instead of falling back to a default; `kerntuned -t` fails (exit 1, naming the file)
# when the token file or the model dir is missing or the token is empty,
# and a daemon without worker_path finds kerntune-rpc next to itself (as
# `kerntune tune` does), with a PATH that does not hold it.
set -u
BIN=${KT_BIN_DIR:?}
T=$(mktemp -d /tmp/kt-checks.XXXXXX)
DPID=
cleanup() {
    [ -n "$DPID" ] && kill -9 "$DPID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$T/daemon.log" ] && tail -20 "$T/daemon.log"; exit 1; }

conf() {  # token_file model_dir
    cat > "$T/kerntuned.json" <<EOF
{ "listen": "127.0.0.1:0", "token_file": "$1", "database": "$T/tune.db",
  "log_dir": "$T/logs", "model_dir": "$2", "control_socket": "$T/ctl.sock",
  "local_workers": 1, "threads": 2 }
EOF
}
mkdir -p "$T/models" "$T/logs"
printf 'abc\n' > "$T/token"
chmod 600 "$T/token"

conf "$T/token" "$T/models"
out=$("$BIN/kerntuned" -t --config "$T/kerntuned.json" 2>&1) || fail "-t on a good config: $out"
echo "$out" | grep -q "configuration OK" || fail "-t printed: $out"

conf "$T/no-such-token" "$T/models"
out=$("$BIN/kerntuned" -t --config "$T/kerntuned.json" 2>&1) && fail "-t passed a missing token file"
echo "$out" | grep -q "no-such-token" || fail "-t does not name the token file: $out"

: > "$T/empty-token"
chmod 600 "$T/empty-token"
conf "$T/empty-token" "$T/models"
out=$("$BIN/kerntuned" -t --config "$T/kerntuned.json" 2>&1) && fail "-t passed an empty token file"
echo "$out" | grep -q "empty" || fail "-t on an empty token: $out"

printf 'abc\n' > "$T/open-token"
chmod 644 "$T/open-token"
conf "$T/open-token" "$T/models"
out=$("$BIN/kerntuned" -t --config "$T/kerntuned.json" 2>&1) && fail "-t passed a token file others can read"
echo "$out" | grep -q "too open" || fail "-t on a 0644 token: $out"

conf "$T/token" "$T/no-such-dir"
out=$("$BIN/kerntuned" -t --config "$T/kerntuned.json" 2>&1) && fail "-t passed a missing model dir"
echo "$out" | grep -q "no-such-dir" || fail "-t does not name the model dir: $out"

out=$("$BIN/kerntuned" --config "$T/kerntuned.json" stray 2>&1) && fail "a stray argument was accepted"

# Listening for other hosts without a usable token file: refused, saying so,
# both by -t and by the daemon itself (exit 1, nothing listening).
for listen in 0.0.0.0:0 "[::]:0" 192.0.2.1:9190; do
    conf "$T/no-such-token" "$T/models"
    sed -i "s|\"127.0.0.1:0\"|\"$listen\"|" "$T/kerntuned.json"
    out=$("$BIN/kerntuned" -t --config "$T/kerntuned.json" 2>&1) && fail "-t passed listen $listen without a token file"
    echo "$out" | grep -qF "listen $listen accepts workers from other hosts, which must prove the token of token_file: refusing to listen without it: token file $T/no-such-token" ||
        fail "-t on listen $listen without a token: $out"
done
"$BIN/kerntuned" --config "$T/kerntuned.json" >"$T/open.log" 2>&1 && fail "kerntuned started on 192.0.2.1 without a token file"
grep -q "refusing to listen without it" "$T/open.log" || fail "kerntuned without a token: $(cat "$T/open.log")"

# Strict integers and HOST:PORT on the command line.
printf '{"name": "m", "tasks": [{"name": "mm", "compute": ["O[i,j] += A[i,k] * B[k,j]"], "shapes": {"A": [8, 8], "B": [8, 8]}}]}\n' > "$T/m.json"
for bad in "--trials abc" "--trials 12x" "--trials -3" "--workers 0" "--workers 65"; do
    out=$(cd "$T" && "$BIN/kerntune" tune "$T/m.json" $bad 2>&1)
    [ $? -eq 2 ] || fail "kerntune tune $bad: not refused ($out)"
    echo "$out" | grep -q -- "${bad%% *}" || fail "kerntune tune $bad: message lacks the option: $out"
done
[ -e "$T/kerntune.db" ] && fail "a refused tune created a database"
for bad in "nohost" "h:65536" "::1:80" "[::1]x"; do
    out=$("$BIN/kerntune" rpc-status --tracker "$bad" 2>&1)
    [ $? -eq 2 ] || fail "rpc-status --tracker $bad: not refused ($out)"
done

# No worker_path, PATH without kerntune-rpc: the worker next to kerntuned joins.
conf "$T/token" "$T/models"
(cd / && PATH=/usr/bin:/bin exec "$BIN/kerntuned" --config "$T/kerntuned.json") \
    >"$T/daemon.log" 2>&1 &
DPID=$!
i=0
until "$BIN/kerntune" status --socket "$T/ctl.sock" 2>/dev/null | grep -q "^workers: 1"; do
    i=$((i + 1))
    [ $i -gt 200 ] && fail "the local worker never joined"
    kill -0 "$DPID" 2>/dev/null || fail "kerntuned exited"
    sleep 0.1
done
grep -q "cannot start local worker" "$T/daemon.log" && fail "local worker lookup failed"
kill -TERM "$DPID"
wait "$DPID" || fail "kerntuned exit status $?"
DPID=
echo "ok"
