#!/usr/bin/env bash
# mltrain's GPU checks in ONE call on a bare GPU machine (CUDA torch and numpy, no index), within 9 minutes.
#
#   Here, with PyPI (once; the GPU machine's Python version):
#       python3 tools/gpu_kit.py --out .gpukit --python-version 3.12 --reference /path/to/mlcommons/training
#   There, from the project root:
#       KIT=.gpukit OUT=/some/folder bash benchmarks/gpu_session.sh
#
# Parts, each time-boxed (seconds, overridable as LIMIT_<PART>), in this order:
#   install     pip installs mltrain (editable, `workloads` extra) and the test runner from $KIT/wheels
#               into $PYTHON, with no index: what the machine already holds is kept (torch above all)
#   cuda_tests  the tests marked `cuda`
#   smoke       `mltrain run unet3d --profile smoke --seeds 1-3` on synthetic data (every seed must converge)
#   unet3d      benchmarks/unet3d_gpu_throughput.py, ours beside the MLPerf reference ($KIT/reference/unet3d)
#   resnet50    benchmarks/resnet50_gpu_throughput.py (bounded steps)
#   qualify     `mltrain qualify --suite quick`, the node's own GPUs (JSON, JUnit, Prometheus)
# Without CUDA (a CPU machine: the test of this script) the parts that need a GPU are skipped and said
# to be; PARTS="install smoke" runs only those named.
#
# Writes to $OUT (8 files at most, what the device tool brings back): summary.txt (each part's status
# and seconds), session.log (everything), env.txt, unet3d.json, resnet50.json, qualify.json,
# qualify.xml, qualify.prom. Exit 0 when every part that ran passed, 1 otherwise, 2 when the kit is missing.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
KIT=${KIT:-.gpukit}
OUT=${OUT:-/tmp/mltrain-gpu-session}
PARTS=${PARTS:-install cuda_tests smoke unet3d resnet50 qualify}
WORK=$(mktemp -d /tmp/mltrain-gpu-session.XXXXXX)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MLTRAIN_RESULTS="$WORK/results"
summary="$OUT/summary.txt"
log="$OUT/session.log"
: >"$summary"
: >"$log"
started=$SECONDS
failed=0

if [[ ! -d "$KIT/wheels" ]]; then
    echo "gpu_session: no kit at $KIT (make it where PyPI is reachable: python3 tools/gpu_kit.py --out $KIT)" | tee -a "$summary" >&2
    exit 2
fi

made_for=$(sed -n 's/^pyproject: //p' "$KIT/MANIFEST.txt" 2>/dev/null)
if [[ "$made_for" != "$(sha256sum pyproject.toml | cut -d' ' -f1)" ]]; then  # a new dependency would be missing
    echo "gpu_session: the kit at $KIT was made for another pyproject.toml: make it again (python3 tools/gpu_kit.py --out $KIT)" | tee -a "$summary" >&2
    exit 2
fi

wanted() { [[ " $PARTS " == *" $1 "* ]]; }

# The entry point pip writes beside $PYTHON: what a user runs.
MLTRAIN="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/mltrain"
# A part's command may be one of the functions below, run as `bash -c do_...` (timeout runs programs).
export PYTHON KIT OUT MLTRAIN
part() {  # part NAME DEFAULT_LIMIT COMMAND...: run time-boxed, log it, record the outcome
    local name=$1 limit_var="LIMIT_${1^^}" begun=$SECONDS rc
    local limit=${!limit_var:-$2}
    shift 2
    echo "== $name (limit ${limit}s): $*" >>"$log"
    timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
    rc=$?
    local verdict="exit $rc"
    if [[ $rc -eq 124 || $rc -eq 137 ]]; then verdict="exit $rc (cut at ${limit}s)"; fi
    printf '%-11s %-24s %4d s\n' "$name" "$verdict" $((SECONDS - begun)) | tee -a "$summary"
    if [[ $rc -ne 0 ]]; then failed=1; fi
    return "$rc"
}

skip() { printf '%-11s %-24s\n' "$1" "skipped: $2" | tee -a "$summary"; }

{
    date -u
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>&1
    "$PYTHON" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])"
    nproc
    grep -E '^(target|reference|wheels):' "$KIT/MANIFEST.txt" 2>/dev/null
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt" >>"$log"
if "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    cuda=1
else
    cuda=0
fi

do_install() {
    # No index: every missing requirement must come from the kit; satisfied ones stay as installed.
    "$PYTHON" -m pip install --no-index --find-links "$KIT/wheels" --disable-pip-version-check --no-cache-dir \
        -e '.[workloads]' 'pytest>=8' 'pytest-timeout>=2.3' 'hypothesis>=6' &&
        "$MLTRAIN" --help >/dev/null
}
export -f do_install
if wanted install; then
    part install 150 bash -c do_install || { echo "install failed: see $log" | tee -a "$summary"; exit 1; }
fi

if wanted cuda_tests; then
    if [[ $cuda == 1 ]]; then
        part cuda_tests 150 "$PYTHON" -m pytest tests -m cuda -q -rs -p no:cacheprovider
    else
        skip cuda_tests "no CUDA device"
    fi
fi

if wanted smoke; then
    part smoke 120 "$MLTRAIN" run unet3d --profile smoke --seeds 1-3 --label gpu-session
fi

if wanted unet3d; then
    if [[ $cuda == 0 ]]; then
        skip unet3d "no CUDA device"
    elif [[ ! -d "$KIT/reference/unet3d" ]]; then
        skip unet3d "the kit holds no reference (tools/gpu_kit.py --reference)"
        failed=1
    else
        part unet3d 200 "$PYTHON" benchmarks/unet3d_gpu_throughput.py --reference "$KIT/reference/unet3d" \
            --steps "${UNET3D_STEPS:-8}" --repeats 3 --json "$OUT/unet3d.json" ${UNET3D_ARGS:-}
    fi
fi

if wanted resnet50; then
    if [[ $cuda == 1 ]]; then
        part resnet50 90 "$PYTHON" benchmarks/resnet50_gpu_throughput.py --steps 15 --warmup 5 --images 1024 \
            --json "$OUT/resnet50.json"
    else
        skip resnet50 "no CUDA device"
    fi
fi

if wanted qualify; then
    do_qualify() {  # the record on stdout (--json) is the file; progress lines go to the log
        "$MLTRAIN" qualify --suite quick --json --junit "$OUT/qualify.xml" --prometheus "$OUT/qualify.prom" \
            ${QUALIFY_ARGS:-} >"$OUT/qualify.json"
    }
    export -f do_qualify
    if [[ $cuda == 1 ]]; then
        part qualify 120 bash -c do_qualify
        "$PYTHON" - "$OUT/qualify.json" <<'PY' 2>&1 | tee -a "$summary"
import json, sys
record = json.load(open(sys.argv[1]))
print("qualify verdict:", record.get("verdict"))
for check in record.get("checks", []):
    print(f"  {check['name']:<12} {check['status']:<10} {'; '.join(check.get('reasons', []))[:160]}")
PY
    else
        skip qualify "no CUDA device"
    fi
fi

echo "total $((SECONDS - started)) s; $([[ $failed == 0 ]] && echo 'every part that ran passed' || echo 'a part FAILED')" \
    | tee -a "$summary"
rm -rf "$WORK"
exit $failed
