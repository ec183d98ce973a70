#!/bin/bash
# Run one seed of the MLPerf unet3d benchmark: bash run_and_time.sh <seed>
#
# Data in $DATADIR (default /data), MLLOG in $RESULTS_DIR/unet3d.log (default /results) and on
# stdout; prints RESULT,image_segmentation,<seed>,<seconds>,<user>,<start> like the reference.
# Every knob comes from the environment (a profile's `env:` in seeds.yaml); unset means the
# reference default:
#   QUALITY_THRESHOLD (0.908)  FILTERS (32,64,128,256,320)  INPUT_SHAPE (128,128,128)
#   VAL_INPUT_SHAPE (= INPUT_SHAPE)  BATCH_SIZE (2)  GRADIENT_ACCUMULATION_STEPS (1)
#   LEARNING_RATE (0.8)  INIT_LEARNING_RATE (1e-4)  LR_WARMUP_EPOCHS (200)  LR_DECAY_EPOCHS ()
#   LR_DECAY_FACTOR (1.0)  MAX_EPOCHS / START_EVAL_AT / EVALUATE_EVERY (rules' scaling)
#   OVERSAMPLING (0.4)  COMPILE (0|1)
#   AMP (auto|fp32|none|bf16|fp16)  THREADS (auto|N)  CHANNELS_LAST (auto|0|1)
#   NUM_WORKERS (auto: on a GPU the CPUs per local rank - 1, at least 2, at most 8; 0 on a CPU | N)
#   EVAL_BATCH (auto|N windows per forward pass in evaluation)
#   NPROC (auto: one process per visible GPU, 1 on a CPU; > 1 runs torchrun on this node)
#   SUBMISSION_ORG, SUBMISSION_PLATFORM (default: the device's name), SUBMISSION_STATUS,
#   SUBMISSION_DIVISION (open forces open; closed is logged only when the rules allow it),
#   MLTRAIN_SEEDS_RANDOM (1: the caller drew the seed at random)
#   OMP_WAIT_POLICY (PASSIVE: idle intra-op threads sleep rather than spin; ACTIVE to spin)
# auto values are resolved by the trainer on its device and logged as `resolved_settings`.
# Exit status: 0 when the run ended (converged or not), non-zero on a crash or bad input.
set -euo pipefail

if [ "$#" -ne 1 ]; then
    echo "usage: run_and_time.sh <seed>" >&2
    exit 2
fi
SEED="$1"
cd "$(dirname "$0")/../.."   # the project root: workloads/ is importable from here
source workloads/common/user_env.sh   # USER and the inductor cache for a uid without a passwd entry

DATADIR="${DATADIR:-/data}"
RESULTS_DIR="${RESULTS_DIR:-/results}"
PYTHON="${PYTHON:-python}"
# Idle OpenMP threads sleep instead of spinning: on a CPU shared with other work, spinning made
# two-thread training steps 6-10x slower than one thread; sleeping keeps two threads the faster.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
NPROC="${NPROC:-auto}"
if [ "$NPROC" = "auto" ]; then
    if compgen -G "/dev/nvidia[0-9]*" > /dev/null; then   # a GPU node: ask torch (CUDA_VISIBLE_DEVICES respected)
        NPROC="$("$PYTHON" -m workloads.unet3d.precision nproc)"
    else
        NPROC=1
    fi
fi
case "$NPROC" in
    ''|*[!0-9]*|0) echo "run_and_time.sh: NPROC must be auto or a whole number >= 1, got '$NPROC'" >&2; exit 2 ;;
esac

args=(
    --data-dir "$DATADIR" --results-dir "$RESULTS_DIR" --seed "$SEED"
    --filters "${FILTERS:-32,64,128,256,320}"
    --input-shape "${INPUT_SHAPE:-128,128,128}"
    --val-input-shape "${VAL_INPUT_SHAPE:-${INPUT_SHAPE:-128,128,128}}"
    --batch-size "${BATCH_SIZE:-2}"
    --ga-steps "${GRADIENT_ACCUMULATION_STEPS:-1}"
    --learning-rate "${LEARNING_RATE:-0.8}"
    --init-learning-rate "${INIT_LEARNING_RATE:-1e-4}"
    --lr-warmup-epochs "${LR_WARMUP_EPOCHS:-200}"
    --lr-decay-epochs "${LR_DECAY_EPOCHS:-}"
    --lr-decay-factor "${LR_DECAY_FACTOR:-1.0}"
    --oversampling "${OVERSAMPLING:-0.4}"
    --amp "${AMP:-auto}"
    --num-workers "${NUM_WORKERS:-auto}"
    --threads "${THREADS:-auto}"
    --channels-last "${CHANNELS_LAST:-auto}"
    --eval-batch "${EVAL_BATCH:-auto}"
)
[ -n "${MAX_EPOCHS:-}" ] && args+=(--max-epochs "$MAX_EPOCHS")
[ -n "${START_EVAL_AT:-}" ] && args+=(--start-eval-at "$START_EVAL_AT")
[ -n "${EVALUATE_EVERY:-}" ] && args+=(--evaluate-every "$EVALUATE_EVERY")
[ "${COMPILE:-0}" = "1" ] && args+=(--compile)

if [ "$NPROC" -gt 1 ]; then
    launcher=("$PYTHON" -m torch.distributed.run --standalone --nproc_per_node "$NPROC")
else
    launcher=("$PYTHON")
fi

start=$(date +%s)
start_fmt=$(date +%Y-%m-%d\ %r)
echo "STARTING TIMING RUN AT $start_fmt"
"${launcher[@]}" -m workloads.unet3d.train "${args[@]}"
end=$(date +%s)
echo "ENDING TIMING RUN AT $(date +%Y-%m-%d\ %r)"
echo "RESULT,image_segmentation,$SEED,$(( end - start )),${USER:-$(id -un)},$start_fmt"
