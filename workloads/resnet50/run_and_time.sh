#!/usr/bin/env bash
# Train one seed of resnet50 and print its :::MLLOG lines (the workload contract, workloads/README.md).
#   usage: run_and_time.sh SEED       (-1: the workload draws the seed at random)
# Environment: DATADIR (ImageNet layout), RESULTS_DIR (writable), NPROC (processes per node through
#   torchrun: auto, the default, is one per visible CUDA device and 1 without a GPU; RESNET50_NPROC is
#   an alias), and the workload's knobs, which reach train.py untouched: RESNET50_PRESET, RESNET50_SET,
#   RESNET50_PLATFORM, THREADS, QUALITY_THRESHOLD, MLTRAIN_PROFILE, MLTRAIN_SEEDS_RANDOM,
#   SUBMISSION_DIVISION (workloads/resnet50/config.py names them, with their defaults).
set -euo pipefail
cd "$(dirname "$0")/../.."
source workloads/common/user_env.sh   # USER and the inductor cache for a uid without a passwd entry

if [[ $# -ne 1 || ! $1 =~ ^([0-9]+|-1)$ ]]; then
    echo "usage: run_and_time.sh SEED (a non-negative integer, or -1 to draw one)" >&2
    exit 2
fi
seed=$1
: "${DATADIR:?DATADIR must name the dataset folder}"
NPROC=${NPROC:-${RESNET50_NPROC:-auto}}
source workloads/common/nproc.sh      # NPROC: auto resolved, checked

args=(--data "$DATADIR" --seed "$seed")
if [[ -n ${RESULTS_DIR:-} ]]; then args+=(--results "$RESULTS_DIR"); fi

source workloads/common/launcher.sh   # launcher: torchrun across nodes (NNODES), on this node (NPROC > 1), or python
start=$(date +%s)
echo "resnet50: seed $seed, $NPROC process(es) per node, ${NNODES:-1} node(s), started $(date -u +%FT%TZ)" >&2
"${launcher[@]}" -m workloads.resnet50.train "${args[@]}"
echo "resnet50: seed $seed finished in $(( $(date +%s) - start )) s" >&2
