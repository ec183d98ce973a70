#!/bin/bash
# Throughput mode of the unet3d workload (mltrain qualify, GPU benchmarks): bash throughput.sh
#
# Timed training steps of the model after warm-up; prints resolved_settings and, last, one
# `:::MLLOG` line with key `throughput` (samples/s over all processes). Environment:
#   DATADIR (unset, empty or an empty folder: random in-memory batches, no loader measurement;
#   a preprocessed dataset: the input pipeline is timed too and compared with the step rate)
#   STEPS (20), WARMUP_STEPS (5) and the model and precision knobs of run_and_time.sh (FILTERS,
#   INPUT_SHAPE, BATCH_SIZE, AMP, THREADS, NUM_WORKERS, CHANNELS_LAST, COMPILE, ...): they reach
#   throughput.py untouched (workloads/unet3d/config.py: THROUGHPUT_KNOBS); NPROC and
#   OMP_WAIT_POLICY as in run_and_time.sh
# Exit status: 0 measured; 2 bad input (one line on stderr); other non-zero: a crash (an out-of-memory
# error is printed as PyTorch prints it).
set -euo pipefail
cd "$(dirname "$0")/../.."   # the project root: workloads/ is importable from here
source workloads/common/user_env.sh   # USER and the inductor cache for a uid without a passwd entry
source workloads/common/nproc.sh      # NPROC: auto resolved, checked

PYTHON="${PYTHON:-python}"
# Idle OpenMP threads sleep instead of spinning: on a CPU shared with other work, spinning made
# two-thread training steps 6-10x slower than one thread; sleeping keeps two threads the faster.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"

if [ "$NPROC" -gt 1 ]; then
    exec "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node "$NPROC" -m workloads.unet3d.throughput \
        --data-dir "${DATADIR:-}"
fi
exec "$PYTHON" -m workloads.unet3d.throughput --data-dir "${DATADIR:-}"
