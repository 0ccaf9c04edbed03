#!/bin/sh
# Replays the timing stage of every successful trial of tuned databases
# under two ways of picking the first `number` (docs/measure.md, the
# runner's step 7), taking each call to last the trial's stored cost:
#   cold   the number from the checked call (check_s): kerntune before
#          2026-11-24
#   warm   one more call, timed warm, when check_s < min_repeat_ms / 2
# Both raise `number` by TVM's rule (max(min_repeat_ms / per_call + 1,
# 1.618 x number)) until a loop lasts min_repeat_ms, then time the other
# repeats with it; a checked call kept as repeat 0 is the same for both.
# Printed: the stored time_s and the two replays, seconds per candidate.
# A model: warm-up beyond the first call and load are not in it.
# Usage: sh bench/timing_replay.sh [MIN_REPEAT_MS] DB...
set -eu
MIN=100
case ${1:-} in *.db) ;; [0-9]*) MIN=$1; shift ;; esac
[ $# -gt 0 ] || { echo "usage: sh bench/timing_replay.sh [MIN_REPEAT_MS] DB..." >&2; exit 2; }
for db in "$@"; do
    sqlite3 -separator ' ' "$db" "
        select l.cost,
               (select v from kvs where log_id = l.id and k = 'check_s'),
               coalesce((select v from kvs where log_id = l.id and k = 'time_s'), 0),
               coalesce((select v from kvs where log_id = l.id and k = 'check_is_repeat0'), 0)
        from logs l where l.err_no = 0 and l.cost > 0
          and exists (select 1 from kvs where log_id = l.id and k = 'check_s');" |
    awk -v min="$(awk -v ms="$MIN" 'BEGIN { print ms / 1000 }')" -v db="$db" '
        # the timed loops of repeat 0 from a first number n: their seconds
        # in T, the number they end with in N
        function loops(c, n) {
            T = 0
            for (;;) {
                T += n * c
                if (n * c >= min) break
                w = min / c + 1; g = n * 1.618
                n = int(w > g ? w : g)
            }
            N = n
        }
        function first(per) {
            w = min / per + 1
            return w > 1.618 ? int(w) : 1
        }
        { c = $1; cs = $2; n++; stored += $3
          if ($4 == 1) { cold += 2 * c; warm += 2 * c; next }
          loops(c, first(cs)); cold += T + 2 * N * c
          extra = 0; per = cs
          if (cs * 2 < min) { extra = c; per = c }
          loops(c, first(per)); warm += extra + T + 2 * N * c }
        END { if (n == 0) { print db ": no successful trial with check_s"; exit }
              printf "%s: %d candidates, time_s stored %.3f s, replay cold %.3f s, warm %.3f s\n",
                  db, n, stored / n, cold / n, warm / n }'
done
