#!/usr/bin/env bash
# Throughput mode of resnet50 (workload.yaml `throughput`): timed training steps, then the input
# pipeline alone; the last stdout line is the `throughput` MLLOG event (samples/s).
# Environment:
#   DATADIR          dataset (optional: empty, unset or an empty folder -> random batches on the device,
#                    no loader measurement)
#   STEPS (20), WARMUP_STEPS (5), INPUT_SHAPE (crop side N or N,N; default: the preset's), and
#   RESNET50_PRESET, RESNET50_SET, THREADS, MLTRAIN_PROFILE as in run_and_time.sh: they reach
#   throughput.py untouched (workloads/resnet50/config.py); NPROC as in run_and_time.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source workloads/common/user_env.sh   # USER and the inductor cache for a uid without a passwd entry
NPROC=${NPROC:-${RESNET50_NPROC:-auto}}
source workloads/common/nproc.sh      # NPROC: auto resolved, checked

python=${PYTHON:-python}
if [[ $NPROC -gt 1 ]]; then
    exec "$python" -m torch.distributed.run --standalone --nproc_per_node "$NPROC" -m workloads.resnet50.throughput \
        --data "${DATADIR:-}"
fi
exec "$python" -m workloads.resnet50.throughput --data "${DATADIR:-}"
