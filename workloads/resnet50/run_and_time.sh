#!/usr/bin/env bash
# Train one seed of resnet50 and print its :::MLLOG lines (the workload contract, workloads/README.md).
#   usage: run_and_time.sh SEED       (-1: the workload draws the seed at random)
# Environment: DATADIR (ImageNet layout), RESULTS_DIR (writable), NPROC (processes per node through
#   torchrun: auto, the default, is one per visible CUDA device and 1 without a GPU; RESNET50_NPROC is
#   an alias), and the workload's knobs, which reach train.py untouched: RESNET50_PRESET, RESNET50_SET,
#   RESNET50_PLATFORM, THREADS, QUALITY_THRESHOLD, MLTRAIN_PROFILE, MLTRAIN_SEEDS_RANDOM,
#   SUBMISSION_DIVISION (workloads/resnet50/config.py names them, with their defaults).
set -euo pipefail
WORKLOAD=resnet50
source "$(dirname "$0")/../common/run_seed.sh" "$@"   # the seed checked and run, as every such workload's
