#!/usr/bin/env bash
# throughput.sh: the throughput mode of the fake workload (`mltrain qualify`), per the workload
# conventions: STEPS, WARMUP_STEPS, DATADIR in the environment; one final `throughput` MLLOG line.
set -euo pipefail
cd "$(dirname "$0")"
exec python3 fake_throughput.py
