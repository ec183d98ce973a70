#!/usr/bin/env bash
# Train one seed of resnet50 and print its :::MLLOG lines (the workload contract, workloads/README.md).
#   usage: run_and_time.sh SEED       (-1: the workload draws the seed at random)
# Environment: DATADIR (ImageNet layout), RESULTS_DIR (writable), MLTRAIN_PROFILE, QUALITY_THRESHOLD,
#   RESNET50_PRESET   closed | smoke (default: smoke when MLTRAIN_PROFILE=smoke, else closed)
#   RESNET50_SET      space-separated NAME=VALUE overrides of TrainConfig fields (e.g. "precision=fp16 workers=4")
#   NPROC             processes per node through torchrun: auto (default: the visible CUDA devices,
#                     CUDA_VISIBLE_DEVICES respected, 1 without a GPU) or N; RESNET50_NPROC is an alias
#   RESNET50_PLATFORM submission_platform for the log (default: the host name)
#   THREADS           torch threads per process: auto (default: the CPUs this process may use / NPROC) or N
#   MLTRAIN_SEEDS_RANDOM=1  the caller drew SEED at random (needed, with everything else, for closed)
#   SUBMISSION_DIVISION=open  log the open division whatever the settings
set -euo pipefail
cd "$(dirname "$0")/../.."
source workloads/common/user_env.sh   # USER and the inductor cache for a uid without a passwd entry

if [[ $# -ne 1 || ! $1 =~ ^([0-9]+|-1)$ ]]; then
    echo "usage: run_and_time.sh SEED (a non-negative integer, or -1 to draw one)" >&2
    exit 2
fi
seed=$1
: "${DATADIR:?DATADIR must name the dataset folder}"
default_preset=closed
if [[ ${MLTRAIN_PROFILE:-} == smoke ]]; then default_preset=smoke; fi
preset=${RESNET50_PRESET:-$default_preset}
nproc=${NPROC:-${RESNET50_NPROC:-auto}}
if [[ $nproc == auto ]]; then
    nproc=$("${PYTHON:-python}" -m workloads.resnet50.nproc) || exit 2
elif [[ ! $nproc =~ ^[1-9][0-9]*$ ]]; then
    echo "NPROC must be auto or a positive integer, got '$nproc'" >&2
    exit 2
fi
read -r -a overrides <<< "${RESNET50_SET:-}"
if [[ -n ${RESNET50_PLATFORM:-} ]]; then overrides+=("submission_platform=${RESNET50_PLATFORM}"); fi
if [[ -n ${THREADS:-} ]]; then overrides+=("threads=${THREADS}"); fi

args=(--data "$DATADIR" --seed "$seed" --preset "$preset")
if [[ -n ${RESULTS_DIR:-} ]]; then args+=(--results "$RESULTS_DIR"); fi
if [[ -n ${QUALITY_THRESHOLD:-} ]]; then args+=(--target "$QUALITY_THRESHOLD"); fi
if [[ ${#overrides[@]} -gt 0 ]]; then args+=(--set "${overrides[@]}"); fi

python=${PYTHON:-python}
start=$(date +%s)
echo "resnet50: seed $seed, preset $preset, $nproc process(es), started $(date -u +%FT%TZ)" >&2
if [[ $nproc -gt 1 ]]; then
    "$python" -m torch.distributed.run --standalone --nproc_per_node "$nproc" -m workloads.resnet50.train "${args[@]}"
else
    "$python" -m workloads.resnet50.train "${args[@]}"
fi
echo "resnet50: seed $seed finished in $(( $(date +%s) - start )) s" >&2
