#!/bin/bash
# What a maintainer runs on a machine with a GPU, in one go and within one time limit:
#
#     tools/gpu_check.sh OUT STEP[:SECONDS] ...
#
# STEP: matrix (make matrix), bench (the persistent kernels' benchmark), suite (make
# test-gpu, GPU_WORKERS processes, 8 unless set), probe (the persistent kernel's launch
# shapes at PROBE_SHAPES, the seed and LSTM 50/1/1024/256 unless set, with PROBE_SETTINGS
# and PROBE_VARIANTS when set). Every step is checked before any runs. Each runs under its
# own limit (SECONDS, or the default below), is timestamped in OUT/steps.txt, and leaves
# its log in OUT; the tests write every test's time as it ends (CUDNN_RNN_TEST_TIMES), so
# a run cut by its limit still says where its time went. What the steps write under runs/
# (the report's html left out) and the probe's results go into one archive, OUT/runs.tgz
# (RUN/FILE inside): OUT holds at most 8 files, what a device's copy-back takes. Uses $PYTHON
# (python3 unless set) as it is (make ... VENV=), and CUDNN_RNN_COMMIT (where the tree is a
# copy without .git) for the results' provenance.
set -u
declare -A LIMIT=([matrix]=290 [bench]=200 [suite]=560 [probe]=200)
USAGE="usage: tools/gpu_check.sh OUT STEP[:SECONDS] ... (steps: ${!LIMIT[*]})"
if [ $# -lt 2 ]; then
    echo "gpu_check: $USAGE" >&2
    exit 2
fi
OUT=$1
shift
for arg in "$@"; do
    step=${arg%%:*}
    limit=${arg#*:}
    if ! [[ $step =~ ^[a-z]+$ ]] || [ -z "${LIMIT[$step]:-}" ] \
            || { [ "$limit" != "$arg" ] && ! [[ $limit =~ ^[1-9][0-9]*$ ]]; }; then
        echo "gpu_check: '$arg' is not STEP or STEP:SECONDS ($USAGE)" >&2
        exit 2
    fi
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT/runs.tgz"  # an earlier call's, which this one's would be taken for
cd "$(dirname "$0")/.."
WORKERS=${GPU_WORKERS:-8}
PY=${PYTHON:-python3}
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv \
    > "$OUT/gpu.txt" 2>&1

collect() {  # the run folders' files and the probe's (runs/<machine>/<run>/FILE and
             # OUT/probe/FILE -> <run>/FILE, probe/FILE in OUT/runs.tgz)
    local staged
    staged=$(mktemp -d) || return 1
    for d in runs/*/*/ "$OUT/probe/"; do
        [ -d "$d" ] || continue
        mkdir -p "$staged/$(basename "$d")"
        find "$d" -maxdepth 1 -type f ! -name '*.html' -exec cp {} "$staged/$(basename "$d")/" \;
    done
    if [ -n "$(ls -A "$staged")" ]; then
        tar czf "$OUT/runs.tgz" -C "$staged" . && rm -rf "$OUT/probe"
    fi
    rm -rf "$staged"
}

for arg in "$@"; do
    step=${arg%%:*}
    limit=${arg#*:}
    [ "$limit" = "$arg" ] && limit=${LIMIT[$step]}
    start=$(date +%s)
    case $step in
        matrix) timeout "$limit" make matrix VENV= SYSTEM_PYTHON="$PY" > "$OUT/matrix.log" 2>&1
                rc=$?
                pkill -f cudnn_rnn.probe ;;  # a cut run's workers would slow what follows
        bench) timeout "$limit" "$PY" -m cudnn_rnn.bench --spec persistent \
                   > "$OUT/bench.log" 2>&1
               rc=$? ;;
        suite) CUDNN_RNN_TEST_TIMES="$OUT/suite_times.jsonl" timeout "$limit" make test-gpu \
                   VENV= SYSTEM_PYTHON="$PY" GPU_WORKERS="$WORKERS" \
                   PYTEST_ARGS="-p no:cacheprovider" > "$OUT/suite.log" 2>&1
               rc=$? ;;
        probe) PYTHONPATH=$PWD timeout "$limit" "$PY" tools/persistent_probe.py \
                   --out "$OUT/probe" \
                   --shapes "${PROBE_SHAPES:-LSTM:20:2:512:64,LSTM:50:1:1024:256}" \
                   --names persistent:fp16,persistent:int8/both \
                   ${PROBE_SETTINGS:+--settings "$PROBE_SETTINGS"} \
                   ${PROBE_VARIANTS:+--variants "$PROBE_VARIANTS"} > "$OUT/probe.log" 2>&1
               rc=$? ;;
    esac
    end=$(date +%s)
    echo "$step rc=$rc $((end - start)) s (limit $limit s; at $((end - T0)) s)" \
        | tee -a "$OUT/steps.txt"
done
collect
