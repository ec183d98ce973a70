# Sourced by the workloads' run scripts after nproc.sh: sets `launcher`, the words that start the
# trainer (then: "${launcher[@]}" -m workloads.X.train ...).
#
#   NNODES > 1 (mltrain's Slurm runner with --nodes N sets it, with NODE_RANK from SLURM_NODEID, and
#     RDZV_ENDPOINT host:port and RDZV_ID on the first node): torchrun joins the nodes by c10d
#     rendezvous at RDZV_ENDPOINT, hosted by node 0 (is_host), NPROC ranks per node; a node that has
#     not joined within RDZV_TIMEOUT_S seconds (torchrun's join_timeout, default 600) fails the rest.
#   NPROC > 1 on one node: torchrun --standalone, NPROC ranks.
#   else: the interpreter alone (one process, no torch.distributed).
# PYTHON names the interpreter (default python).

mltrain_launcher() {
    local python=${PYTHON:-python}
    if [[ ${NNODES:-1} != 1 ]]; then
        if [[ ! ${NNODES} =~ ^[1-9][0-9]*$ || ! ${NODE_RANK:-} =~ ^[0-9]+$ || -z ${RDZV_ENDPOINT:-} ]]; then
            echo "${0##*/}: NNODES=${NNODES} needs NODE_RANK and RDZV_ENDPOINT (host:port)" >&2
            return 2
        fi
        local is_host=0
        [[ $NODE_RANK == 0 ]] && is_host=1
        launcher=("$python" -m torch.distributed.run --nnodes "$NNODES" --nproc_per_node "$NPROC"
                  --rdzv_backend c10d --rdzv_endpoint "$RDZV_ENDPOINT" --rdzv_id "${RDZV_ID:-mltrain}"
                  --rdzv_conf "is_host=$is_host${RDZV_TIMEOUT_S:+,join_timeout=$RDZV_TIMEOUT_S}")
    elif [[ $NPROC -gt 1 ]]; then
        launcher=("$python" -m torch.distributed.run --standalone --nproc_per_node "$NPROC")
    else
        launcher=("$python")
    fi
}

mltrain_launcher || exit $?
unset -f mltrain_launcher
