#!/bin/sh
# What settling and early stopping (docs/measure.md, measure.settle and
# measure.stop_ratio) would change in tuning databases that were measured
# with fewer of them: for each database and each (settle, stop_ratio) pair,
# replays the stored repeats of every successful trial in the order they
# were timed and prints
#   settled    trials whose first two repeats are within settle (the third
#              would not have been timed)
#   stopped    trials whose first repeat is above stop_ratio x the best
#              cost of the trials before them (one repeat only)
#   saved      timing saved per trial, seconds (each repeat taken as an
#              equal share of the trial's time_s)
#   max err    the largest change of a stored cost, stopped trials aside
#              (they keep their first repeat only)
#   agree      pairs of trials whose full costs differ by more than 1%
#              that the shortened costs order the same way
#   lost best  stopped trials whose full cost was a new best
# A database whose trials were already settled (two costs) counts them as
# settled under any settle; stopped trials (one cost) are left out.
# Usage: sh bench/fewer_repeats.sh "SETTLE:RATIO ..." DB...
#   e.g. sh bench/fewer_repeats.sh "0.02:0 0.05:0 0.05:3" /tmp/suite/*.db
set -eu
[ $# -ge 2 ] || { echo "usage: sh bench/fewer_repeats.sh \"SETTLE:RATIO ...\" DB..." >&2; exit 2; }
pairs=$1
shift
command -v sqlite3 >/dev/null || { echo "sqlite3 command not installed" >&2; exit 1; }
printf '%-24s %-10s %8s %8s %8s %8s %9s %9s\n' database settle:r settled stopped \
    "saved" "max err" agree "lost best"
for db in "$@"; do
    [ -r "$db" ] || { echo "$db: cannot read" >&2; exit 1; }
    for p in $pairs; do
        s=${p%%:*}
        r=${p##*:}
        sqlite3 -separator ' ' "file:$db?mode=ro" "
            with t as (
                select l.id, json_array_length(l.costs) n,
                       json_extract(l.costs, '\$[0]') c0,
                       json_extract(l.costs, '\$[1]') c1,
                       coalesce(json_extract(l.costs, '\$[2]'), 0) c2,
                       coalesce((select v from kvs where log_id = l.id
                                 and k = 'time_s'), 0) time_s
                from logs l where l.err_no = 0 and l.costs is not null
                     and json_array_length(l.costs) between 2 and 3),
            f as (
                select *, case when n = 3
                          then c0 + c1 + c2 - max(c0, c1, c2) - min(c0, c1, c2)
                          else (c0 + c1) / 2 end cost3,
                       n = 2 or abs(c1 - c0) <= $s * min(c0, c1) settles
                from t),
            g as (
                select *, (select min(cost3) from f p where p.id < f.id) best
                from f),
            h as (
                select *, $r > 0 and best is not null and c0 > $r * best stops
                from g),
            k as (
                select *, case when stops then c0
                               when settles then (c0 + c1) / 2
                               else cost3 end cost_cut,
                          case when stops then time_s * (n - 1) / n
                               when settles and n = 3 then time_s / 3
                               else 0 end saved
                from h)
            select count(*), sum(settles and not stops), sum(stops),
                   avg(saved), max(case when stops then 0
                                  else abs(cost_cut - cost3) / cost3 end),
                   (select avg((a.cost3 < b.cost3) = (a.cost_cut < b.cost_cut))
                    from k a join k b on a.id < b.id
                    where abs(a.cost3 - b.cost3) > 0.01 * min(a.cost3, b.cost3)),
                   sum(stops and cost3 < coalesce(best, 1e300))
            from k;" |
        while read -r n settled stopped saved maxerr agree lost; do
            printf '%-24s %-10s %4d/%-3d %8d %7.3fs %7.2f%% %9.4f %9d\n' \
                "$(basename "$db")" "$p" "$settled" "$n" "$stopped" \
                "$saved" "$(echo "$maxerr" | awk '{print 100 * $1}')" \
                "$agree" "$lost"
        done
    done
done
