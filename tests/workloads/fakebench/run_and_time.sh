#!/usr/bin/env bash
# run_and_time.sh <seed>: the MLPerf entry point of the fake workload.
set -euo pipefail
seed="${1:?usage: run_and_time.sh SEED}"
cd "$(dirname "$0")"
start=$(date +%s)
python3 fake_train.py "$seed"
end=$(date +%s)
echo "RESULT,fakebench,${seed},$((end - start)),${USER:-nobody},${start}"
