#!/usr/bin/env bash
# Run the MLPerf Inference harness on one model and scenario (the inference side of the workload
# contract, in the spirit of run_and_time.sh): LoadGen's logs, accuracy.txt and harness.json go to
# $RESULTS_DIR in the MLPerf Inference results layout.
#   usage: run_inference.sh --model-name NAME --scenario S [harness options...]
# Environment: DATADIR (the dataset, read only), RESULTS_DIR (writable), MODEL_FILE (the model, a
#   path relative to RESULTS_DIR when it is not absolute: the orchestrator stages it there so that
#   every runner sees it), PYTHON (default python), MLTRAIN_PROFILE (recorded).
# Options: python -m workloads.inference --help
set -euo pipefail
cd "$(dirname "$0")/../.."

: "${DATADIR:?DATADIR must name the dataset folder}"
: "${RESULTS_DIR:?RESULTS_DIR must name the results folder}"
: "${MODEL_FILE:?MODEL_FILE must name the model file}"
model=$MODEL_FILE
if [[ $model != /* ]]; then model="$RESULTS_DIR/$model"; fi
exec "${PYTHON:-python}" -m workloads.inference "$@" --model "$model" --data "$DATADIR" --out "$RESULTS_DIR" \
    --profile "${MLTRAIN_PROFILE:-}"
