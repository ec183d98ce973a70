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
WORKLOAD=llama31_8b
source "$(dirname "$0")/../common/run_seed.sh" "$@"   # the seed checked and run, as every such workload's
