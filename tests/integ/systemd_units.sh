#!/bin/sh
# Checks dist/systemd/*.service with `systemd-analyze verify`, and that the
# daemon unit keeps the settings docs/daemon.md promises (Type=notify,
# watchdog, reload by SIGHUP, the directories of dist/kerntuned.json) and
# none that would stop it compiling and loading kernels.
# Exit 0 pass, 77 skip (no systemd-analyze), anything else fail.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
units="$here/dist/systemd"
bin=${KT_BIN_DIR:-$here/build}

if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "systemd-analyze not installed"
    exit 77
fi
for f in kerntuned.service kerntune-rpc@.service; do
    [ -f "$units/$f" ] || { echo "missing $units/$f"; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# verify insists that the programs exist: point the units at the built
# binaries (or /bin/true when they are not built yet).
pick() {
    if [ -x "$bin/$1" ]; then echo "$bin/$1"; else echo /bin/true; fi
}
kd=$(pick kerntuned)
kr=$(pick kerntune-rpc)
sed -e "s|/usr/local/bin/kerntuned|$kd|g" "$units/kerntuned.service" \
    >"$tmp/kerntuned.service"
sed -e "s|/usr/local/bin/kerntune-rpc|$kr|g" "$units/kerntune-rpc@.service" \
    >"$tmp/kerntune-rpc@.service"
# A template is verified through an instance.
cp "$tmp/kerntune-rpc@.service" "$tmp/kerntune-rpc@local.service"

fail=0
out=$(cd "$tmp" && systemd-analyze verify --man=no ./kerntuned.service \
      ./kerntune-rpc@local.service 2>&1)
rc=$?
# verify also complains about units of the host it runs on (missing
# dependencies of other units); only lines naming ours count.
ours=$(printf '%s\n' "$out" | grep -E 'kerntuned\.service|kerntune-rpc@' || true)
if [ $rc -ne 0 ] || [ -n "$ours" ]; then
    echo "systemd-analyze verify (rc=$rc):"
    printf '%s\n' "$out"
    fail=1
fi

need() { # unit key=value
    if ! grep -qx "$2" "$units/$1"; then
        echo "$1: expected line '$2'"
        fail=1
    fi
}
refuse() { # unit regex
    if grep -qE "$2" "$units/$1"; then
        echo "$1: must not contain '$2' (kerntuned compiles and dlopen()s kernels)"
        fail=1
    fi
}
d=kerntuned.service
need $d 'Type=notify'
need $d 'NotifyAccess=main'
need $d 'WatchdogSec=30s'
need $d 'Restart=on-failure'
need $d 'ExecReload=/bin/kill -HUP $MAINPID'
need $d 'ExecStart=/usr/local/bin/kerntuned --config /etc/kerntune/kerntuned.json'
need $d 'StateDirectory=kerntune'
need $d 'LogsDirectory=kerntune'
need $d 'RuntimeDirectory=kerntune'
need $d 'ConfigurationDirectory=kerntune'
need $d 'NoNewPrivileges=yes'
need $d 'ProtectSystem=strict'
need $d 'UMask=0077'
r=kerntune-rpc@.service
need $r 'Restart=always'
need $r 'ExecStart=/usr/local/bin/kerntune-rpc server --tracker=${KERNTUNE_TRACKER} --key=%i --token-file ${KERNTUNE_TOKEN_FILE} $KERNTUNE_RPC_ARGS'
need $r 'Environment=KERNTUNE_TRACKER=127.0.0.1:9190 KERNTUNE_TOKEN_FILE=/etc/kerntune/token KERNTUNE_RPC_ARGS='
need $r 'EnvironmentFile=-/etc/kerntune/worker.env'
need $r 'EnvironmentFile=-/etc/kerntune/worker-%i.env'
# The documented worker.env example sets exactly the variables the unit uses.
for v in KERNTUNE_TRACKER KERNTUNE_TOKEN_FILE KERNTUNE_RPC_ARGS; do
    grep -q "^$v=" "$here/dist/worker.env" || { echo "dist/worker.env: no $v"; fail=1; }
done
for u in $d $r; do
    need $u 'LimitCORE=0'
    need $u 'IPAddressAllow=localhost'
    need $u 'IPAddressDeny=any'
    need $u 'ProtectProc=invisible'
    need $u 'RemoveIPC=yes'
    grep -q '^MemoryMax=' "$units/$u" || { echo "$u: no MemoryMax="; fail=1; }
    grep -q '^TasksMax=' "$units/$u" || { echo "$u: no TasksMax="; fail=1; }
    refuse $u '^MemoryDenyWriteExecute=(yes|true|1)'
    refuse $u '^NoExecPaths='
    refuse $u '^SystemCallFilter=~?@(basic-io|default)$'
done

# The default config names the directories the unit creates.
cfg="$here/dist/kerntuned.json"
for p in /var/lib/kerntune/ /var/log/kerntune /etc/kerntune/models \
         /run/kerntune/control.sock; do
    grep -q "\"$p" "$cfg" || { echo "$cfg: no $p"; fail=1; }
done

[ $fail -eq 0 ] && echo "units verified"
exit $fail
