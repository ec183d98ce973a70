#!/usr/bin/env bash
# Throughput mode of resnet50 (workload.yaml `throughput`): timed training steps, then the input
# pipeline alone; the last stdout line is the `throughput` MLLOG event (samples/s).
# Environment:
#   STEPS (20), WARMUP_STEPS (5)  timed and untimed training steps
#   DATADIR          dataset (optional: empty or unset -> random batches on the device, no loader measurement)
#   INPUT_SHAPE      crop side N or N,N (default: the preset's 224, or 32 for smoke)
#   RESNET50_PRESET, RESNET50_SET, NPROC, THREADS, MLTRAIN_PROFILE  as in run_and_time.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source workloads/common/user_env.sh   # USER and the inductor cache for a uid without a passwd entry

for name in STEPS WARMUP_STEPS; do
    value=${!name:-}
    if [[ -n $value && ! $value =~ ^[0-9]+$ ]]; then
        echo "$name must be a non-negative integer, got '$value'" >&2
        exit 2
    fi
done
default_preset=closed
if [[ ${MLTRAIN_PROFILE:-} == smoke ]]; then default_preset=smoke; fi
preset=${RESNET50_PRESET:-$default_preset}
python=${PYTHON:-python}
nproc=${NPROC:-${RESNET50_NPROC:-auto}}
if [[ $nproc == auto ]]; then
    nproc=$("$python" -m workloads.resnet50.nproc) || exit 2
elif [[ ! $nproc =~ ^[1-9][0-9]*$ ]]; then
    echo "NPROC must be auto or a positive integer, got '$nproc'" >&2
    exit 2
fi
read -r -a overrides <<< "${RESNET50_SET:-}"
if [[ -n ${THREADS:-} ]]; then overrides+=("threads=${THREADS}"); fi

args=(--steps "${STEPS:-20}" --warmup "${WARMUP_STEPS:-5}" --preset "$preset" --input-shape "${INPUT_SHAPE:-}")
if [[ -n ${DATADIR:-} ]]; then args+=(--data "$DATADIR"); fi
if [[ ${#overrides[@]} -gt 0 ]]; then args+=(--set "${overrides[@]}"); fi

if [[ $nproc -gt 1 ]]; then
    exec "$python" -m torch.distributed.run --standalone --nproc_per_node "$nproc" -m workloads.resnet50.throughput "${args[@]}"
fi
exec "$python" -m workloads.resnet50.throughput "${args[@]}"
