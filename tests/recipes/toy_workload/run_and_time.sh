#!/usr/bin/env bash
# run_and_time.sh <seed>: the toy workload's entry point (DATADIR, RESULTS_DIR and TOY_TARGET come from mltrain).
set -euo pipefail
exec python3 -m workloads.toy.train "${1:?usage: run_and_time.sh SEED}"
