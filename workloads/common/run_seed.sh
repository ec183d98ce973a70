# Sourced, with its arguments, by the run_and_time.sh of a workload trained as
# `python -m workloads.$WORKLOAD.train --data DATADIR --seed SEED [--results RESULTS_DIR]` (resnet50,
# llama31_8b), WORKLOAD set to its name: checks the seed (a non-negative integer, or -1: the workload
# draws one) and DATADIR, resolves NPROC (${WORKLOAD^^}_NPROC is an alias; workloads/common/nproc.sh),
# and runs one seed through the launcher (workloads/common/launcher.sh), its start and end on stderr.
cd "$(dirname "$0")/../.."
source workloads/common/user_env.sh   # USER and the inductor cache for a uid without a passwd entry

if [[ $# -ne 1 || ! $1 =~ ^([0-9]+|-1)$ ]]; then
    echo "usage: run_and_time.sh SEED (a non-negative integer, or -1 to draw one)" >&2
    exit 2
fi
seed=$1
: "${DATADIR:?DATADIR must name the dataset folder}"
nproc_alias="${WORKLOAD^^}_NPROC"
NPROC=${NPROC:-${!nproc_alias:-auto}}
source workloads/common/nproc.sh      # NPROC: auto resolved, checked

args=(--data "$DATADIR" --seed "$seed")
if [[ -n ${RESULTS_DIR:-} ]]; then args+=(--results "$RESULTS_DIR"); fi

source workloads/common/launcher.sh   # launcher: torchrun across nodes (NNODES), on this node (NPROC > 1), or python

start=$(date +%s)
echo "$WORKLOAD: seed $seed, $NPROC process(es) on each of ${NNODES:-1} node(s), started $(date -u +%FT%TZ)" >&2
"${launcher[@]}" -m "workloads.$WORKLOAD.train" "${args[@]}"
echo "$WORKLOAD: seed $seed finished in $(( $(date +%s) - start )) s" >&2
