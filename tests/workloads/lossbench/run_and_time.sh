#!/usr/bin/env bash
# run_and_time.sh <seed>: the MLPerf entry point of the loss-metric test workload.
set -euo pipefail
seed="${1:?usage: run_and_time.sh SEED}"
cd "$(dirname "$0")"
python3 loss_train.py "$seed"
