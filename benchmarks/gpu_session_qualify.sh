#!/usr/bin/env bash
# The quick qualification suite on a lent GPU machine, in one call; everything lands under $OUT.
#
#   Here (PyPI reachable), once: the wheels the GPU machine lacks (pydantic and its parts, and
#   mlperf-logging without its pandas/scipy dependencies, which the quick suite never imports):
#       bash benchmarks/gpu_session_qualify.sh --fetch-wheels wheels
#   There (no network; torch, numpy, nvidia-ml-py, prometheus_client, typer, rich, pyyaml present):
#       bash benchmarks/gpu_session_qualify.sh            # wheels/ travels with the work tree
#
# Writes to $OUT: qualify.json (the record), qualify.xml (JUnit), qualify.prom (Prometheus
# textfile), timings.json and timings.txt (wall time and each phase's share), qualify.stderr (the
# progress lines), results/ (the probe's and the throughput mode's output), nvidia-smi.txt, env.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS=${MLTRAIN_WHEELS:-$PWD/wheels}

if [[ "${1:-}" == "--fetch-wheels" ]]; then
    dest=${2:?usage: --fetch-wheels DIR}
    for py in 3.10 3.11 3.12 3.13; do
        python -m pip download -q --only-binary=:all: --platform manylinux2014_x86_64 --implementation cp \
            --python-version "$py" -d "$dest" pydantic || exit 1
    done
    python -m pip download -q --no-deps -d "$dest" mlperf-logging==4.1.68 || exit 1
    ls -1 "$dest"
    exit 0
fi

OUT=${OUT:-$PWD/gpu-qualify-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if ! python -c "import pydantic, mlperf_logging" 2>/dev/null; then
    if [[ -d "$WHEELS" ]]; then
        python -m pip install -q --no-index --find-links "$WHEELS" pydantic >"$OUT/pip.txt" 2>&1
        python -m pip install -q --no-index --no-deps --find-links "$WHEELS" mlperf-logging >>"$OUT/pip.txt" 2>&1
    fi
    python -c "import pydantic, mlperf_logging" 2>>"$OUT/pip.txt" || {
        echo "missing pydantic or mlperf-logging and no usable wheels in $WHEELS: run --fetch-wheels here first" >&2
        exit 2
    }
fi
{
    nvidia-smi -q
    nvidia-smi topo -m
} >"$OUT/nvidia-smi.txt" 2>&1
{
    python -c "import sys, torch; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda,
'devices', torch.cuda.device_count(), [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])"
    command -v dcgmi || echo "dcgmi: not installed"
    nproc
} >"$OUT/env.txt" 2>&1

python benchmarks/qualify_quick.py --suite quick --runner local --results "$OUT/results" --out "$OUT/timings.json" \
    --save-record "$OUT/qualify.json" --save-stderr "$OUT/qualify.stderr" \
    -- --junit "$OUT/qualify.xml" --prometheus "$OUT/qualify.prom" | tee "$OUT/timings.txt"
status=${PIPESTATUS[0]}
python - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
record = json.loads((out / "qualify.json").read_text())
for check in record["checks"]:
    print(f"{check['name']:<12} {check['status']:<15} {check['duration_s']:7.2f} s  {'; '.join(check['reasons'])[:150]}")
    for m in check["measurements"]:
        print(f"    {m['metric']:<40} {m['value']:12.4g} {m['unit']}")
PY
exit "$status"
