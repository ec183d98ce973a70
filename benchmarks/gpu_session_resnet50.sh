#!/usr/bin/env bash
# The resnet50 GPU checks in one call on a lent GPU machine (no network there), well inside 5 minutes:
#   1. the resnet50 tests marked `cuda`
#   2. a short real training run on the GPU: run_and_time.sh, smoke preset, on a synthetic dataset in /tmp
#   3. the throughput mode (throughput.sh) with the closed model, random batches, 224x224
#   4. benchmarks/resnet50_gpu_throughput.py with bounded steps
# Usage, from the repository root:
#   OUT=/some/folder bash benchmarks/gpu_session_resnet50.sh
# Environment:
#   OUT      where the logs go (default /tmp/gpu_session_resnet50): session.log (every step's output),
#            summary.txt (each step's exit status and seconds), smoke/mllog.txt, compliance_checker.log,
#            resnet50_gpu_throughput.json (five files: the device tool brings back eight at most)
#   WHEELS   folder of wheels for what the machine lacks (default .whl): mlperf-logging (pure Python)
#            is installed from it into /tmp/site when `import mlperf_logging` fails
#   PYTHON   interpreter (default python3)
#   COMPILE=1  also time the best mode under torch.compile in step 4 (adds a minute or more)
# Exit status: 0 when every step passed, 1 otherwise (summary.txt says which).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_session_resnet50}
WHEELS=${WHEELS:-.whl}
python=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHON="$python"
summary="$OUT/summary.txt"
log="$OUT/session.log"
: > "$summary"
: > "$log"
started=$(date +%s)
failed=0

step() {  # step NAME LIMIT_S COMMAND...: run with a time limit, append to session.log, record the outcome
    local name=$1 limit=$2
    shift 2
    local begun
    begun=$(date +%s)
    echo "== $name (limit ${limit}s): $*" | tee -a "$log"
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$log" | tail -n 30
    local rc=${PIPESTATUS[0]}
    echo "== $name: exit $rc after $(( $(date +%s) - begun )) s" | tee -a "$summary" "$log"
    if [[ $rc -ne 0 ]]; then failed=1; fi
}

{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>&1
    "$python" -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'NO CUDA')"
    "$python" -c "import torchvision; print('torchvision', torchvision.__version__)" 2>&1 | tail -1
} 2>&1 | tee -a "$log"

if ! "$python" -c "import mlperf_logging" 2>/dev/null; then
    if compgen -G "$WHEELS/*.whl" > /dev/null; then
        "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
            "$WHEELS"/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/site"
    fi
    if ! "$python" -c "import mlperf_logging" 2>/dev/null; then
        echo "mlperf-logging is missing and $WHEELS holds no wheel of it: carry mlperf_logging-4.1.68-py3-none-any.whl" \
            | tee -a "$summary"
        exit 1
    fi
fi

step cuda_tests 80 "$python" -m pytest tests/resnet50 -m cuda -q -rs -p no:cacheprovider

data=/tmp/r50-smoke-data
step smoke_dataset 30 "$python" -m workloads.resnet50.dataset synthesize "$data"
step smoke_run 60 env DATADIR="$data" RESULTS_DIR="$OUT/smoke" MLTRAIN_PROFILE=smoke NPROC=auto \
    bash workloads/resnet50/run_and_time.sh 1
if [[ -f $OUT/smoke/mllog.txt ]]; then
    step smoke_compliance 30 "$python" -m mlperf_logging.compliance_checker --usage training --ruleset 4.0.0 \
        --log_output "$OUT/compliance_checker.log" "$OUT/smoke/mllog.txt"
fi

step throughput_mode 45 env STEPS=20 WARMUP_STEPS=5 RESNET50_PRESET=closed RESNET50_SET="batch_size=256" \
    bash workloads/resnet50/throughput.sh

bench=(--steps 15 --warmup 5 --images 1024 --json "$OUT/resnet50_gpu_throughput.json")
if [[ ${COMPILE:-0} == 1 ]]; then bench+=(--compile); fi
step gpu_throughput 110 "$python" benchmarks/resnet50_gpu_throughput.py "${bench[@]}"

echo "total $(( $(date +%s) - started )) s; $( [[ $failed == 0 ]] && echo 'every step passed' || echo 'some step FAILED' )" \
    | tee -a "$summary"
exit $failed
