#!/bin/bash
# Run one seed of the MLPerf unet3d benchmark: bash run_and_time.sh <seed>
#
# Data in $DATADIR (default /data), MLLOG in $RESULTS_DIR/unet3d.log (default /results) and on
# stdout; prints RESULT,image_segmentation,<seed>,<seconds>,<user>,<start> like the reference.
# Every knob comes from the environment (a profile's `env:` in seeds.yaml) and reaches the trainer
# untouched: workloads/unet3d/config.py names them (KNOBS: FILTERS, INPUT_SHAPE, BATCH_SIZE, AMP,
# THREADS, NUM_WORKERS, COMPILE, ...) with their defaults (the reference's; `auto` values are resolved
# by the trainer on its device and logged as `resolved_settings`). Here only:
#   NPROC (auto: one process per visible GPU, 1 on a CPU; > 1 runs torchrun on this node)
#   NNODES, NODE_RANK, RDZV_ENDPOINT (set by `mltrain run --runner slurm --nodes N`: workloads/common/launcher.sh)
#   OMP_WAIT_POLICY (PASSIVE: idle intra-op threads sleep rather than spin; ACTIVE to spin)
# Exit status: 0 when the run ended (converged or not), non-zero on a crash or bad input.
set -euo pipefail

if [ "$#" -ne 1 ]; then
    echo "usage: run_and_time.sh <seed>" >&2
    exit 2
fi
SEED="$1"
cd "$(dirname "$0")/../.."   # the project root: workloads/ is importable from here
source workloads/common/user_env.sh   # USER and the inductor cache for a uid without a passwd entry
source workloads/common/nproc.sh      # NPROC: auto resolved, checked

DATADIR="${DATADIR:-/data}"
RESULTS_DIR="${RESULTS_DIR:-/results}"
PYTHON="${PYTHON:-python}"
# Idle OpenMP threads sleep instead of spinning: on a CPU shared with other work, spinning made
# two-thread training steps 6-10x slower than one thread; sleeping keeps two threads the faster.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"

source workloads/common/launcher.sh   # launcher: torchrun across nodes (NNODES), on this node (NPROC > 1), or python

start=$(date +%s)
start_fmt=$(date +%Y-%m-%d\ %r)
echo "STARTING TIMING RUN AT $start_fmt"
"${launcher[@]}" -m workloads.unet3d.train --data-dir "$DATADIR" --results-dir "$RESULTS_DIR" --seed "$SEED"
end=$(date +%s)
echo "ENDING TIMING RUN AT $(date +%Y-%m-%d\ %r)"
echo "RESULT,image_segmentation,$SEED,$(( end - start )),${USER:-$(id -un)},$start_fmt"
