#!/bin/sh
# Per-candidate wall time of a tuning run and where it goes.  Tunes each
# config on a fresh database with the default measure settings of the
# config, then splits the wall time per measured candidate into
#   build        the compiler (build_s), over all candidates
#   build CPU    the compiler's CPU time (build_cpu_s), which load barely
#                changes: the figure to compare compiler flags by
#   load+verify  successful candidates: the runner child minus its timing
#                stage: fork, dlopen, inputs, reference (cached per
#                worker), the checked call (run_s - time_s; the checked
#                call may also be repeat 0, docs/measure.md)
#   timing       successful candidates: calibration and repeats (time_s)
#   failed run   run_s of the candidates whose run failed (a RUN_TIMEOUT
#                costs run_timeout_s), per failed run
#   overhead     the rest: search, cost-model training, dispatch, storage
#                (wall / trials - build - run_s, means over all candidates;
#                builds that overlap other work make it smaller)
# and the share of successful candidates whose checked call was kept as
# their first repeat (docs/measure.md).
# Usage: sh bench/candidate_time.sh [TRIALS] [CONFIG ...]
# (defaults: 64 trials, bench/gemm1024.json and bench/conv3x3.json).
set -eu
BIN=${KT_BIN_DIR:-build}
TRIALS=${1:-64}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- bench/gemm1024.json bench/conv3x3.json
T=$(mktemp -d /tmp/kt-candtime.XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "CPU: $(sh "$(dirname "$0")/cpu.sh")"
echo "load before: $(uptime | sed 's/.*load average/load average/')"
printf '%-10s %6s %6s %9s %8s %9s %11s %8s %10s %9s %9s\n' config trials \
    errors "wall/cand" build "build CPU" "load+verify" timing "failed run" \
    overhead "chk=rep0"
for cfg in "$@"; do
    name=$(basename "$cfg" .json)
    start=$(date +%s.%N)
    "$BIN/kerntune" tune "$cfg" --trials "$TRIALS" --db "$T/$name.db" \
        --log-dir "$T/$name.logs" --quiet > "$T/$name.out" 2>&1 ||
        { echo "$name: kerntune tune failed:"; tail -5 "$T/$name.out"; exit 1; }
    wall=$(echo "$start $(date +%s.%N)" | awk '{printf "%.3f", $2 - $1}')
    # one row per trial: err_no, build_s, run_s, time_s, check_is_repeat0,
    # build_cpu_s
    sqlite3 -separator ' ' "$T/$name.db" "
        select l.err_no, coalesce(l.build_s, 0), coalesce(l.run_s, 0),
               coalesce((select v from kvs where log_id = l.id and k = 'time_s'), 0),
               coalesce((select v from kvs where log_id = l.id and k = 'check_is_repeat0'), 0),
               coalesce((select v from kvs where log_id = l.id and k = 'build_cpu_s'), 0)
        from logs l order by l.id;" > "$T/$name.rows"
    awk -v wall="$wall" -v name="$name" '
        { n++; b += $2; r += $3; bc += $6
          if ($1 == 0) { ok++; rok += $3; t += $4; rep0 += $5 }
          else if ($3 > 0) { nfr++; fr += $3 } else err++ }
        END { if (n == 0) exit 1
              printf "%-10s %6d %6d %8.3fs %7.3fs %8.3fs %10.3fs %7.3fs %9.3fs %8.3fs %8.0f%%\n",
                  name, n, err + nfr, wall / n, b / n, bc / n,
                  ok ? (rok - t) / ok : 0, ok ? t / ok : 0, nfr ? fr / nfr : 0,
                  wall / n - b / n - r / n, ok ? 100 * rep0 / ok : 0 }' "$T/$name.rows"
    errs=$(sqlite3 -separator ' x ' "$T/$name.db" "select err_no, count(*) from logs
                                             where err_no != 0 group by err_no")
    [ -z "$errs" ] || echo "    $name errors (err_no x count): $(echo $errs)"
    early=$(sqlite3 "$T/$name.db" "select count(*) from kvs where k = 'early_stop'")
    [ "$early" -eq 0 ] || echo "    $name: $early candidates stopped after one repeat (measure.stop_ratio)"
done
echo "load after:  $(uptime | sed 's/.*load average/load average/')"
