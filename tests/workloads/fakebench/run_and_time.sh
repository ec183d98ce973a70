#!/usr/bin/env bash
# run_and_time.sh <seed>: the MLPerf entry point of the fake workload.
set -euo pipefail
seed="${1:?usage: run_and_time.sh SEED}"
cd "$(dirname "$0")"
start=$(date +%s)
if [[ -n ${FAKE_HANG_NODE_RANK:-} && ${FAKE_HANG_NODE_RANK} == "${NODE_RANK:-}" ]]; then
    sleep infinity  # this node never reaches the rendezvous (a hung filesystem, a stuck launcher)
fi
if [[ ${NNODES:-1} != 1 ]]; then  # a seed across nodes: the workloads' own launcher (torchrun, c10d rendezvous)
    NPROC=${NPROC:-1}
    PYTHON=python3
    kit=../../../workloads/common  # in a checkout; in its image, the kit is beside the workload
    [[ -d $kit ]] || kit=../common
    source "$kit/launcher.sh"
else
    launcher=(python3)
fi
"${launcher[@]}" fake_train.py "$seed"
end=$(date +%s)
echo "RESULT,fakebench,${seed},$((end - start)),${USER:-nobody},${start}"
