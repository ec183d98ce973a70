#!/bin/bash
# Throughput mode of the unet3d workload (mltrain qualify, GPU benchmarks): bash throughput.sh
#
# Timed training steps of the model after warm-up; prints resolved_settings and, last, one
# `:::MLLOG` line with key `throughput` (samples/s over all processes). Environment:
#   STEPS (20)  WARMUP_STEPS (5)  DATADIR (unset, empty or an empty folder: random in-memory batches, no loader measurement;
#   a preprocessed dataset: the input pipeline is timed too and compared with the step rate)
#   the model and precision knobs of run_and_time.sh: FILTERS, INPUT_SHAPE, BATCH_SIZE, LEARNING_RATE,
#   OVERSAMPLING, AMP, THREADS, NUM_WORKERS, CHANNELS_LAST, COMPILE, NPROC (auto: one process per GPU)
# Exit status: 0 measured; 2 bad input (one line on stderr); other non-zero: a crash (an out-of-memory
# error is printed as PyTorch prints it).
set -euo pipefail
cd "$(dirname "$0")/../.."   # the project root: workloads/ is importable from here
source workloads/common/user_env.sh   # USER and the inductor cache for a uid without a passwd entry

PYTHON="${PYTHON:-python}"
# Idle OpenMP threads sleep instead of spinning: on a CPU shared with other work, spinning made
# two-thread training steps 6-10x slower than one thread; sleeping keeps two threads the faster.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
NPROC="${NPROC:-auto}"
if [ "$NPROC" = "auto" ]; then
    if compgen -G "/dev/nvidia[0-9]*" > /dev/null; then
        NPROC="$("$PYTHON" -m workloads.unet3d.precision nproc)"
    else
        NPROC=1
    fi
fi
case "$NPROC" in
    ''|*[!0-9]*|0) echo "throughput.sh: NPROC must be auto or a whole number >= 1, got '$NPROC'" >&2; exit 2 ;;
esac

args=(
    --steps "${STEPS:-20}" --warmup-steps "${WARMUP_STEPS:-5}" --data-dir "${DATADIR:-}"
    --filters "${FILTERS:-32,64,128,256,320}"
    --input-shape "${INPUT_SHAPE:-128,128,128}"
    --batch-size "${BATCH_SIZE:-2}"
    --learning-rate "${LEARNING_RATE:-0.8}"
    --oversampling "${OVERSAMPLING:-0.4}"
    --amp "${AMP:-auto}"
    --num-workers "${NUM_WORKERS:-auto}"
    --threads "${THREADS:-auto}"
    --channels-last "${CHANNELS_LAST:-auto}"
)
[ "${COMPILE:-0}" = "1" ] && args+=(--compile)

if [ "$NPROC" -gt 1 ]; then
    exec "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node "$NPROC" -m workloads.unet3d.throughput "${args[@]}"
fi
exec "$PYTHON" -m workloads.unet3d.throughput "${args[@]}"
