#!/bin/sh
# The worker unit's EnvironmentFile reaches kerntune-rpc: the ExecStart= of
# dist/systemd/kerntune-rpc@.service is expanded for an instance the way
# systemd does (systemd.exec(5), systemd.service(5): Environment=, then the
# EnvironmentFile= files in order, each overriding; %i is the instance;
# "${VAR}" is one argument, a lone "$VAR" is split at whitespace into zero
# or more), with /etc/kerntune pointing at a test directory holding the
# documented dist/worker.env (its tracker and token file made local) and a
# worker-KEY.env that overrides one variable.  The command line it gives
# is then run against a real kerntuned: the worker must join under the
# instance's key with the roles the env file asks for.  Without env files
# the unit's defaults must give the loopback tracker and no extra argument.
# There is no systemd to run the unit here (no `systemd-run --user` in a
# container), hence the expansion; systemd_units.sh verifies the unit.
set -u
bin=${KT_BIN_DIR:-build}
here=$(cd "$(dirname "$0")/../.." && pwd)
unit=$here/dist/systemd/kerntune-rpc@.service
T=$(mktemp -d /tmp/kt-worker-env.XXXXXX)
PIDS=
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    for p in $PIDS; do wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- daemon log"; tail -20 "$T/daemon.log" 2>/dev/null; exit 1; }

# expand INSTANCE ETC_DIR: the unit's ExecStart, one argument per line.
expand() {
    sed -e "s|/etc/kerntune/|$2/|g" -e "s|%i|$1|g" "$unit" | awk '
    function load(file,   line, k, v, eq) {
        while ((getline line < file) > 0) {
            sub(/^[ \t]+/, "", line)
            eq = index(line, "=")
            if (line == "" || line ~ /^[#;]/ || eq == 0)
                continue
            k = substr(line, 1, eq - 1); v = substr(line, eq + 1)
            sub(/[ \t]+$/, "", k); sub(/^[ \t]+/, "", v); sub(/[ \t]+$/, "", v)
            if (v ~ /^".*"$/ || v ~ /^\047.*\047$/)
                v = substr(v, 2, length(v) - 2)
            env[k] = v
        }
        close(file)
    }
    /^Environment=/ {
        n = split(substr($0, 13), a, /[ \t]+/)
        for (i = 1; i <= n; i++)
            if ((eq = index(a[i], "=")) > 0)
                env[substr(a[i], 1, eq - 1)] = substr(a[i], eq + 1)
    }
    /^EnvironmentFile=/ {
        f = substr($0, 17); optional = sub(/^-/, "", f)
        if ((getline probe < f) < 0) {
            if (!optional) { print "missing " f > "/dev/stderr"; exit 1 }
        } else { close(f); files[++nfiles] = f }
    }
    /^ExecStart=/ { exec = substr($0, 11) }
    END {
        # EnvironmentFile= overrides Environment=, the later file the earlier
        for (i = 1; i <= nfiles; i++)
            load(files[i])
        n = split(exec, w, /[ \t]+/)
        for (i = 1; i <= n; i++) {
            if (w[i] ~ /^\$[A-Za-z_][A-Za-z0-9_]*$/) {
                m = split(env[substr(w[i], 2)], parts, /[ \t]+/)
                for (j = 1; j <= m; j++)
                    if (parts[j] != "") print parts[j]
                continue
            }
            out = w[i]
            while (match(out, /\$\{[A-Za-z_][A-Za-z0-9_]*\}/))
                out = substr(out, 1, RSTART - 1) \
                      env[substr(out, RSTART + 2, RLENGTH - 3)] \
                      substr(out, RSTART + RLENGTH)
            print out
        }
    }'
}

# 1. Without env files: the unit's defaults, and the empty $KERNTUNE_RPC_ARGS
# is no argument at all.
mkdir -p "$T/none" "$T/etc" "$T/models" "$T/logs"
got=$(expand plain "$T/none" | tr '\n' ' ')
want="/usr/local/bin/kerntune-rpc server --tracker=127.0.0.1:9190 --key=plain --token-file $T/none/token "
[ "$got" = "$want" ] || fail "defaults: got '$got', want '$want'"

# 2. A real daemon on loopback with a token.
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/token"
chmod 600 "$T/token"
cat > "$T/kerntuned.json" <<EOF
{ "listen": "127.0.0.1:0", "token_file": "$T/token", "database": "$T/tune.db",
  "log_dir": "$T/logs", "model_dir": "$T/models", "control_socket": "$T/ctl.sock",
  "local_workers": 0, "threads": 1 }
EOF
: >"$T/daemon.log"
"$bin/kerntuned" --config "$T/kerntuned.json" >"$T/daemon.log" 2>&1 &
PIDS="$PIDS $!"
i=0 port=
while [ $i -lt 100 ] && [ -z "$port" ]; do
    port=$(sed -n 's/.*tracker: listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$T/daemon.log" | head -1)
    sleep 0.1
    i=$((i + 1))
done
[ -n "$port" ] || fail "the daemon never said which port its tracker listens on"

# 3. The documented worker.env, pointed at this daemon; the key's own file
# overrides the worker's arguments.
sed -e "s|^KERNTUNE_TRACKER=.*|KERNTUNE_TRACKER=127.0.0.1:$port|" \
    -e "s|^KERNTUNE_TOKEN_FILE=.*|KERNTUNE_TOKEN_FILE=$T/token|" \
    "$here/dist/worker.env" > "$T/etc/worker.env"
grep -q '^KERNTUNE_RPC_ARGS=--roles run$' "$T/etc/worker.env" ||
    fail "dist/worker.env no longer sets KERNTUNE_RPC_ARGS=--roles run"
expand board "$T/etc" > "$T/argv.board"
grep -qx -- '--roles' "$T/argv.board" && grep -qx run "$T/argv.board" ||
    fail "worker.env's KERNTUNE_RPC_ARGS is not on the command line: $(tr '\n' ' ' < "$T/argv.board")"
printf '# only for key envtest\nKERNTUNE_RPC_ARGS="--roles build,run --name env-test"\n' \
    > "$T/etc/worker-envtest.env"
expand envtest "$T/etc" > "$T/argv"
echo "ExecStart of kerntune-rpc@envtest: $(tr '\n' ' ' < "$T/argv")"
sed -i "1s|^/usr/local/bin/kerntune-rpc$|$bin/kerntune-rpc|" "$T/argv"

# 4. That command line, run: the worker joins as the env files say.
set --
while IFS= read -r a; do set -- "$@" "$a"; done < "$T/argv"
"$@" >"$T/worker.log" 2>&1 &
PIDS="$PIDS $!"
i=0
while [ $i -lt 100 ] && ! grep -q 'worker env-test joined' "$T/daemon.log"; do
    sleep 0.1
    i=$((i + 1))
done
line=$(grep 'worker env-test joined' "$T/daemon.log")
[ -n "$line" ] || { cat "$T/worker.log"; fail "the worker of the expanded unit never joined"; }
echo "$line"
case $line in
*" key=envtest roles=3 "*) ;;
*) fail "joined with the wrong key or roles: $line" ;;
esac
echo "worker env: OK"
