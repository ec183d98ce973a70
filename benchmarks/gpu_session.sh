#!/usr/bin/env bash
# mltrain's GPU measurements in ONE command of at most 8 minutes on a GPU machine without a network.
#
#   Here, where PyPI is reachable (once; the kit holds only what the GPU image lacks, under 60 MiB):
#       python3 tools/gpu_kit.py --out .gpukit --reference /path/to/mlcommons/training   # checkout or mirror
#   There, from the project root (the kit travels with the checkout):
#       KIT=.gpukit OUT=/some/folder bash benchmarks/gpu_session.sh
#
# Parts, in this order (the most valuable first), each time-boxed in seconds (LIMIT_<PART> overrides);
# the limits add up to 480 s, install included:
#   install          25  pip installs mltrain (editable, `workloads` extra) and the test runner from $KIT/wheels
#                        into $PYTHON with no index: what the machine holds is kept (its CUDA torch above all)
#   cuda_tests       95  the tests marked `cuda`, all in tests/*/test_cuda.py (collecting only those
#                        spares the part the suite's 20 s of collection)            -> cuda_tests.xml
#   unet3d          100  ours beside the MLPerf reference (and its --amp), Dice parity  -> unet3d.json
#   unet3d_variants  50  batch 7, compile modes (CUDA graphs), fused loss, cuDNN, pinning, eval batch,
#                        each against the reference of the part above; started while they fit
#                                                                                       -> unet3d_variants.json
#   llama31_8b       60  a Llama 3.1 8B train step: full width, as many blocks as the GPU's free memory fits
#                        (workloads/llama31_8b/fit.py), sequence 8192, one sequence a step, the workload's
#                        throughput mode: tokens/s and MFU          -> its throughput event in session.log
#   resnet50         50  ours beside torchvision, and fed by its own loader             -> resnet50.json
#   qualify          55  `mltrain qualify --suite quick` of the machine's GPUs           -> qualify.json
#   inference        45  `mltrain infer resnet50 --profile smoke`, torch on the GPU      -> inference.json
# Each part's JSON lands in $OUT as soon as the part has it (the benchmarks rewrite theirs after each
# contender), so a session cut short keeps what it measured. PARTS="unet3d resnet50" runs only those.
# A stop signal (TERM, INT, HUP) stops the running part and the session, keeping what was written.
#
# Without CUDA (a CPU machine: the dry run CI makes of this script) every part runs its CPU form
# (small shapes, the CPU device) and the table says so. Before anything is written or installed,
# PARTS (known parts only), LIMIT_<PART> (whole seconds, at least 1), the kit (made for this
# pyproject.toml and for $PYTHON's version, else the command that makes the right one) and $OUT (its
# files neither links nor anything but files) are checked: a refused session leaves $OUT as it was.
#
# $OUT gets 8 files at most (what is brought back from a lent machine): summary.txt (the table),
# session.log (everything), and the JSON/XML named above. Prints the summary table at the end; exit 0
# when every part ran and passed, 1 when one failed or was cut, 2 when the input or the kit is wrong,
# 128+N when stopped by signal N.
set -uo pipefail
cd "$(dirname "$0")/.."
exec 3>&2  # the caller's stderr: a stop is said there even while a block's stderr goes to a file
# The parts, in the order they run, with their default limits in seconds (480 in all): adding a part is a line
# here and its function part_NAME below.
PART_LIMITS=(
    install:25
    cuda_tests:95
    unet3d:100
    unet3d_variants:50
    llama31_8b:60
    resnet50:50
    qualify:55
    inference:45
)
PYTHON=${PYTHON:-python3}
KIT=${KIT:-.gpukit}
OUT=${OUT:-/tmp/mltrain-gpu-session}
PARTS=${PARTS:-${PART_LIMITS[*]%%:*}}
OUTPUTS=(summary.txt session.log cuda_tests.xml unet3d.json unet3d_variants.json resnet50.json qualify.json
         inference.json)

# Everything is checked before anything is written: a refused session leaves $OUT as it was.
refuse() { echo "gpu_session: $1" >&2; exit 2; }
declare -A limits=()
for entry in "${PART_LIMITS[@]}"; do
    name=${entry%%:*} limit_var=LIMIT_${entry%%:*}
    limit_var=${limit_var^^}
    limit=${!limit_var-${entry#*:}}
    [[ $limit =~ ^[1-9][0-9]*$ ]] || refuse "$limit_var=$limit: give a whole number of seconds, at least 1"
    limits[$name]=$limit
done
read -ra wanted_parts <<<"$PARTS"
((${#wanted_parts[@]})) || refuse "PARTS names no part; the parts: ${PART_LIMITS[*]%%:*}"
for name in "${wanted_parts[@]}"; do
    [[ $name =~ ^[a-z0-9_]+$ && -v "limits[$name]" ]] || refuse "PARTS: no part '$name'; the parts: ${PART_LIMITS[*]%%:*}"
done
python_version=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")' 2>/dev/null) \
    || refuse "PYTHON=$PYTHON does not run"
remake="python3 tools/gpu_kit.py --out $KIT --python-version $python_version --reference <a local checkout or mirror of mlcommons/training>"
[[ -d "$KIT/wheels" && -f "$KIT/MANIFEST.txt" ]] || refuse "no kit at $KIT; make it where PyPI is reachable: $remake"
kit_python=$(sed -n 's/^python: //p' "$KIT/MANIFEST.txt")
[[ "$kit_python" == "$python_version" ]] \
    || refuse "the kit at $KIT is for Python ${kit_python:-unknown}, $PYTHON is $python_version: make it again: $remake"
made_for=$(sed -n 's/^pyproject: //p' "$KIT/MANIFEST.txt")
[[ "$made_for" == "$(sha256sum pyproject.toml | cut -d' ' -f1)" ]] \
    || refuse "the kit at $KIT was made for another pyproject.toml: make it again: $remake"
[[ ! -e "$OUT" || -d "$OUT" ]] || refuse "OUT=$OUT is not a folder"
for name in "${OUTPUTS[@]}"; do  # written as the session goes: never through a link, never into a FIFO or device
    [[ -L "$OUT/$name" || ( -e "$OUT/$name" && ! -f "$OUT/$name" ) ]] \
        && refuse "$OUT/$name is a link or not a file; the session writes it: remove it or give another OUT"
done

WORK=$(mktemp -d /tmp/mltrain-gpu-session.XXXXXX) || refuse "cannot make a work folder under /tmp"
mkdir -p "$OUT" || { rm -rf "$WORK"; refuse "cannot make OUT=$OUT"; }
# The benchmarks import workloads/ from the checkout: they run even where the install failed.
export PYTHONUNBUFFERED=1 MLTRAIN_RESULTS="$WORK/results" XDG_CACHE_HOME="$WORK/cache" PYTHONPATH="$PWD"
summary="$OUT/summary.txt"
log="$OUT/session.log"
parts_file="$WORK/parts.tsv"
: >"$summary"
: >"$log"
: >"$parts_file"
started=$SECONDS

running=""  # the running part's timeout, its own process group: a stop signal stops the part with the session
stop() {
    trap '' TERM INT HUP
    [[ -n $running ]] && kill -TERM "$running" 2>/dev/null && wait "$running" 2>/dev/null
    echo "gpu_session: stopped by SIG$1 after $((SECONDS - started)) s: what the parts wrote is in $OUT" \
        | tee -a "$summary" >&3
    rm -rf "$WORK"
    exit $((128 + $2))
}
trap 'stop TERM 15' TERM
trap 'stop INT 2' INT
trap 'stop HUP 1' HUP

wanted() { [[ " ${wanted_parts[*]} " == *" $1 "* ]]; }
# The entry point pip writes beside $PYTHON: what a user runs.
MLTRAIN="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/mltrain"
export PYTHON KIT OUT MLTRAIN WORK
run_part() {  # run_part NAME COMMAND...: run time-boxed by its limit, log it, record the outcome
    local name=$1 limit=${limits[$1]} begun=$SECONDS rc
    shift
    echo "== $name (limit ${limit}s): $*" >>"$log"
    timeout --kill-after=5 "$limit" "$@" >>"$log" 2>&1 &  # waited for, so that a stop signal is taken at once
    running=$!
    wait "$running"
    rc=$?
    running=""
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" $((SECONDS - begun)) "$limit" >>"$parts_file"
    printf '%-16s exit %-3s %4d s (limit %s s)\n' "$name" "$rc" $((SECONDS - begun)) "$limit" | tee -a "$summary"
    return "$rc"
}
skip() { printf '%s\tskipped\t0\t0\t%s\n' "$1" "$2" >>"$parts_file"; printf '%-16s skipped: %s\n' "$1" "$2" | tee -a "$summary"; }

if "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    cuda=1
else
    cuda=0
fi
{
    date -u
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>&1
    fi
    "$PYTHON" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])"
    echo "cpus $(nproc); cuda $cuda; parts: $PARTS"
    grep -E '^(target|reference|wheels):' "$KIT/MANIFEST.txt"
} >"$WORK/env.txt" 2>&1
cat "$WORK/env.txt" >>"$log"

do_install() {
    # No index: every missing requirement comes from the kit; satisfied ones stay as installed.
    "$PYTHON" -m pip install --no-index --find-links "$KIT/wheels" --disable-pip-version-check --no-cache-dir \
        -e '.[workloads]' 'pytest>=8,<9.2' 'pytest-timeout>=2.3' 'pytest-xdist>=3.6' 'hypothesis>=6' &&
        "$MLTRAIN" --help >/dev/null
}
do_qualify() {  # the record on stdout (--json) is the file; JUnit and Prometheus stay in $WORK (8 files back)
    # The GPUs CUDA sees are the ones expected: one NVML cannot find FAILs the node; a CPU dry run expects none.
    local expect=0
    if [[ $cuda == 1 ]]; then expect=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())"); fi
    "$MLTRAIN" qualify --suite quick --expect-gpus "$expect" --json --junit "$WORK/qualify.xml" \
        --prometheus "$WORK/qualify.prom" ${QUALIFY_ARGS:-} >"$OUT/qualify.json"
}
do_inference() {
    local device=cpu backend=onnxruntime
    if [[ $cuda == 1 ]]; then device=cuda backend=torch; fi
    "$MLTRAIN" infer resnet50 --profile smoke --backend "$backend" --device "$device" --json ${INFERENCE_ARGS:-} \
        >"$OUT/inference.json"
}
do_llama31_8b() {  # its throughput event is the last line it logs (8 files come back: no file of its own)
    local layers
    if [[ $cuda == 1 ]]; then
        layers=$("$PYTHON" -m workloads.llama31_8b.fit --micro-batch 1) || return 3
        if ((layers < 1)); then echo "llama31_8b: not one block of the 8B's width fits this GPU's free memory"; return 3; fi
        NPROC=1 STEPS=${LLAMA31_8B_STEPS:-10} WARMUP_STEPS=3 DATADIR="" LLAMA31_8B_PRESET=closed \
            LLAMA31_8B_SET="layers=$layers global_batch=1 micro_batch=1" bash workloads/llama31_8b/throughput.sh
    else  # the CPU form: the smoke shape, one step
        NPROC=1 STEPS=1 WARMUP_STEPS=0 DATADIR="" LLAMA31_8B_PRESET=smoke LLAMA31_8B_SET="global_batch=2 micro_batch=2" \
            bash workloads/llama31_8b/throughput.sh
    fi
}
export -f do_install do_qualify do_inference do_llama31_8b
export cuda

size=()  # the benchmarks' CPU form: small shapes, one step
[[ $cuda == 1 ]] || size=(--small --steps 1 --repeats 1 --warmup 0)
reference="$KIT/reference/unet3d"
no_reference="the kit holds no reference (tools/gpu_kit.py --reference)"
part_install() { run_part install bash -c do_install || { echo "install failed: see $log" | tee -a "$summary"; }; }
part_cuda_tests() {
    run_part cuda_tests "$PYTHON" -m pytest tests/*/test_cuda.py -m cuda -n 0 -q -rs -p no:cacheprovider \
        --junitxml "$OUT/cuda_tests.xml"
}
part_unet3d() {
    [[ -d "$reference" ]] || { skip unet3d "$no_reference"; return; }
    run_part unet3d "$PYTHON" benchmarks/unet3d_gpu_throughput.py --reference "$reference" --no-compile \
        --steps "${UNET3D_STEPS:-8}" "${size[@]}" --json "$OUT/unet3d.json"
}
part_unet3d_variants() {  # variants start while they fit: the deadline leaves 10 s to write the file
    [[ -d "$reference" ]] || { skip unet3d_variants "$no_reference"; return; }
    local limit=${limits[unet3d_variants]}
    run_part unet3d_variants "$PYTHON" benchmarks/unet3d_gpu_throughput.py --reference "$reference" \
        --variants "${UNET3D_VARIANTS:-all}" --deadline-s $((limit > 20 ? limit - 10 : limit / 2 + 1)) \
        --baseline "$OUT/unet3d.json" --steps "${UNET3D_STEPS:-8}" "${size[@]}" --json "$OUT/unet3d_variants.json"
}
part_llama31_8b() { run_part llama31_8b bash -c do_llama31_8b; }
part_resnet50() {
    local r50=(--small --steps 1 --warmup 0 --images 16 --batch 2)
    [[ $cuda == 1 ]] && r50=(--steps 10 --warmup 3 --images 512)
    run_part resnet50 "$PYTHON" benchmarks/resnet50_gpu_throughput.py "${r50[@]}" --json "$OUT/resnet50.json"
}
part_qualify() { run_part qualify bash -c do_qualify; }
part_inference() { run_part inference bash -c do_inference; }

for entry in "${PART_LIMITS[@]}"; do  # in the declared order, whatever the order PARTS names them in
    if wanted "${entry%%:*}"; then "part_${entry%%:*}"; fi
done

"$PYTHON" benchmarks/gpu_session_summary.py "$parts_file" "$OUT" "$WORK/env.txt" $((SECONDS - started)) \
    >"$WORK/table.txt" 2>>"$log"
summarised=$?
if [[ $summarised -ne 0 && $summarised -ne 1 ]]; then  # the table could not be made: the parts' lines stand
    echo "gpu_session: the summary table failed (exit $summarised): see $log" >>"$WORK/table.txt"
    summarised=1
fi
{ echo; cat "$WORK/table.txt"; } | tee -a "$summary"
rm -rf "$WORK"
exit $summarised
