#!/usr/bin/env bash
# throughput.sh: the throughput mode of the fake workload (`mltrain qualify`), per the workload
# conventions: STEPS, WARMUP_STEPS, DATADIR in the environment; one final `throughput` MLLOG line.
# The worker is a child of this script, as a real throughput mode's workers are of its launcher
# (torchrun): a killed mltrain takes the script with it, and leaves the worker to be found by its run id.
set -euo pipefail
cd "$(dirname "$0")"
python3 fake_throughput.py
