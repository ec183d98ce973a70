#!/bin/bash
# unet3d on a lent GPU node, in ONE call (no network there): run from the project root.
#
#   REF=.ref/unet3d WHEELS=.whl bash benchmarks/gpu_session_unet3d.sh
#
# (i)   the CUDA-only tests (tests/unet3d/test_cuda.py, marker `cuda`): no host sync in the training
#       step, GPU evaluation and augmentation equal to the CPU's, compiled warm-up, throughput mode;
# (ii)  a tiny end-to-end training seed on the GPU through run_and_time.sh, on synthetic data made by
#       `python -m workloads.unet3d.dataset synthesize` into /tmp, through two evaluations;
# (iii) benchmarks/unet3d_gpu_throughput.py --reference $REF at the full closed shapes (128^3, batch 2),
#       steps bounded so that the whole script ends well inside 8 minutes.
#
# Environment:
#   REF      the MLPerf reference's unet3d folder (mlcommons/training retired_benchmarks/unet3d/pytorch);
#            without it, (iii) is skipped
#   WHEELS   folder of wheels to install first into /tmp/site (default .whl when it exists):
#            mlperf-logging and nibabel, which the GPU image lacks
#   OUT      where the logs go (default /tmp/unet3d-gpu); six files: env.txt, cuda_tests.log, e2e.log,
#            e2e_mllog.txt, benchmark.log, unet3d_gpu_throughput.json
#   PYTHON   (python3)   BENCH_STEPS (8)   BENCH_REPEATS (3)   BENCH_TIMEOUT (seconds, 300)
#   BENCH_ARGS  extra arguments for the benchmark (e.g. --no-compile: the compiled contender runs last
#               and takes minutes to compile; a timeout there keeps everything measured before it)
# Exit status: 0 when all three parts passed, 1 otherwise (each part's status is printed at the end).
set -uo pipefail

cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
OUT="${OUT:-/tmp/unet3d-gpu}"
WHEELS="${WHEELS:-.whl}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1

if compgen -G "$WHEELS/*.whl" > /dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "$WHEELS"/*.whl || { echo "installing the wheels in $WHEELS failed" >&2; exit 1; }
    export PYTHONPATH="/tmp/site:$PWD"
else
    export PYTHONPATH="$PWD"
fi

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>&1
    "$PYTHON" - <<'EOF'
import importlib.util, sys
import torch
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, cuda {torch.version.cuda}, "
      f"cudnn {torch.backends.cudnn.version()}, gpu {torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}")
for name in ("mlperf_logging", "nibabel", "scipy", "pynvml", "yaml", "rich", "pytest"):
    print(f"{name}: {'present' if importlib.util.find_spec(name) else 'ABSENT'}")
EOF
} 2>&1 | tee "$OUT/env.txt"

# (i) CUDA tests --------------------------------------------------------------------------------------
start=$SECONDS
"$PYTHON" -m pytest tests/unet3d/test_cuda.py -m cuda -q -rs -p no:cacheprovider 2>&1 | tee "$OUT/cuda_tests.log"
tests_status=${PIPESTATUS[0]}
echo "(i) CUDA tests: exit $tests_status in $((SECONDS - start)) s"

# (ii) a tiny seed end to end on the GPU -----------------------------------------------------------------
start=$SECONDS
DATA=/tmp/unet3d-gpu-data
RESULTS=/tmp/unet3d-gpu-results
rm -rf "$RESULTS"
{
    "$PYTHON" -m workloads.unet3d.dataset synthesize "$DATA" --cases 12 --eval-cases 3 --size 64,64,64 \
        --min-shape 64 --seed 0 --workers 8 &&
    env DATADIR="$DATA" RESULTS_DIR="$RESULTS" PYTHON="$PYTHON" MLTRAIN_PROFILE=smoke FILTERS=8,16,32 \
        INPUT_SHAPE=64,64,64 BATCH_SIZE=2 LEARNING_RATE=0.5 LR_WARMUP_EPOCHS=1 MAX_EPOCHS=3 START_EVAL_AT=2 \
        EVALUATE_EVERY=1 QUALITY_THRESHOLD=0.99 bash workloads/unet3d/run_and_time.sh 1
} > "$OUT/e2e.log" 2>&1
e2e_status=$?
cp "$RESULTS/unet3d.log" "$OUT/e2e_mllog.txt" 2>/dev/null
if [ "$e2e_status" -eq 0 ] && ! grep -q '"key": "run_stop"' "$OUT/e2e.log"; then e2e_status=1; fi
if [ "$e2e_status" -eq 0 ] && [ "$(grep -c '"key": "eval_accuracy"' "$OUT/e2e.log")" -lt 1 ]; then e2e_status=1; fi
grep -E '"key": "(resolved_settings|submission_platform|eval_accuracy|run_stop)"' "$OUT/e2e.log" | cut -c1-400
tail -n 3 "$OUT/e2e.log"
echo "(ii) end-to-end seed on the GPU: exit $e2e_status in $((SECONDS - start)) s"

# (iii) reference vs ours -------------------------------------------------------------------------------
start=$SECONDS
if [ -n "${REF:-}" ] && [ -d "${REF}" ]; then
    # shellcheck disable=SC2086  # BENCH_ARGS is a list of words
    timeout "${BENCH_TIMEOUT:-300}" "$PYTHON" benchmarks/unet3d_gpu_throughput.py --reference "$REF" \
        --steps "${BENCH_STEPS:-8}" --repeats "${BENCH_REPEATS:-3}" --json "$OUT/unet3d_gpu_throughput.json" \
        ${BENCH_ARGS:-} 2>&1 | tee "$OUT/benchmark.log"
    bench_status=${PIPESTATUS[0]}
else
    echo "REF is not set to the reference's unet3d folder: benchmark skipped" | tee "$OUT/benchmark.log"
    bench_status=1
fi
echo "(iii) benchmark: exit $bench_status in $((SECONDS - start)) s (124: cut at BENCH_TIMEOUT; the json keeps what was measured)"

echo "unet3d GPU session: tests $tests_status, end-to-end $e2e_status, benchmark $bench_status; logs in $OUT"
[ "$tests_status" -eq 0 ] && [ "$e2e_status" -eq 0 ] && [ "$bench_status" -eq 0 ]
