#!/usr/bin/env bash
# Throughput mode of llama31_8b (workload.yaml `throughput`): timed training steps of the configured
# shape (the real Llama 3.1 8B unless LLAMA31_8B_SET shrinks it); the last stdout line is the
# `throughput` MLLOG event (sequences/s, with tokens/s per process and MFU in its metadata).
# Environment: DATADIR (optional: empty, unset or an empty folder -> random tokens on the device),
#   STEPS (20), WARMUP_STEPS (5), and LLAMA31_8B_PRESET, LLAMA31_8B_SET, THREADS, MLTRAIN_PROFILE as in
#   run_and_time.sh; NPROC as in run_and_time.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source workloads/common/user_env.sh   # USER and the inductor cache for a uid without a passwd entry
NPROC=${NPROC:-${LLAMA31_8B_NPROC:-auto}}
source workloads/common/nproc.sh      # NPROC: auto resolved, checked

python=${PYTHON:-python}
if [[ $NPROC -gt 1 ]]; then
    exec "$python" -m torch.distributed.run --standalone --nproc_per_node "$NPROC" -m workloads.llama31_8b.throughput \
        --data "${DATADIR:-}"
fi
exec "$python" -m workloads.llama31_8b.throughput --data "${DATADIR:-}"
