#!/usr/bin/env bash
# Train one seed of llama31_8b and print its :::MLLOG lines (the workload contract, workloads/README.md).
#   usage: run_and_time.sh SEED       (-1: the workload draws the seed at random)
# Environment: DATADIR (MLCommons' preprocessed C4, or synthetic token data in its layout), RESULTS_DIR
#   (writable), NNODES/NODE_RANK/RDZV_ENDPOINT across nodes (workloads/common/launcher.sh), NPROC (processes
#   per node through torchrun: auto, the default, is one per visible CUDA
#   device and 1 without a GPU; LLAMA31_8B_NPROC is an alias), and the workload's knobs, which reach
#   train.py untouched: LLAMA31_8B_PRESET, LLAMA31_8B_SET, LLAMA31_8B_PLATFORM, THREADS,
#   QUALITY_THRESHOLD, MLTRAIN_PROFILE, MLTRAIN_SEEDS_RANDOM, SUBMISSION_DIVISION (config.py names them).
set -euo pipefail
cd "$(dirname "$0")/../.."
source workloads/common/user_env.sh   # USER and the inductor cache for a uid without a passwd entry

if [[ $# -ne 1 || ! $1 =~ ^([0-9]+|-1)$ ]]; then
    echo "usage: run_and_time.sh SEED (a non-negative integer, or -1 to draw one)" >&2
    exit 2
fi
seed=$1
: "${DATADIR:?DATADIR must name the dataset folder}"
NPROC=${NPROC:-${LLAMA31_8B_NPROC:-auto}}
source workloads/common/nproc.sh      # NPROC: auto resolved, checked

args=(--data "$DATADIR" --seed "$seed")
if [[ -n ${RESULTS_DIR:-} ]]; then args+=(--results "$RESULTS_DIR"); fi

source workloads/common/launcher.sh   # launcher: torchrun across nodes (NNODES), on this node (NPROC > 1), or python

start=$(date +%s)
echo "llama31_8b: seed $seed, $NPROC process(es) on each of ${NNODES:-1} node(s), started $(date -u +%FT%TZ)" >&2
"${launcher[@]}" -m workloads.llama31_8b.train "${args[@]}"
echo "llama31_8b: seed $seed finished in $(( $(date +%s) - start )) s" >&2
