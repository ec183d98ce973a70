# Sourced by the workloads' run scripts (run_and_time.sh, throughput.sh) from the project root, after
# user_env.sh: resolves NPROC, the processes per node that torchrun starts (one per GPU).
#
#   NPROC=auto (or unset): the CUDA devices torch sees (CUDA_VISIBLE_DEVICES respected, no CUDA
#     context made: python -m workloads.common.devices nproc), asked only where a GPU's device node
#     exists (/dev/nvidia0..., /dev/dxg under WSL); 1 elsewhere, without the seconds of importing torch.
#   NPROC=N: N processes, N >= 1.
# Anything else is bad input: one line on stderr, exit 2. PYTHON names the interpreter (default python).

mltrain_nproc() {
    NPROC=${NPROC:-auto}
    if [[ $NPROC == auto ]]; then
        if compgen -G "/dev/nvidia[0-9]*" > /dev/null || [[ -e /dev/dxg ]]; then
            NPROC=$("${PYTHON:-python}" -m workloads.common.devices nproc) || return 2
        else
            NPROC=1
        fi
    fi
    if [[ ! $NPROC =~ ^[1-9][0-9]*$ ]]; then
        echo "${0##*/}: NPROC must be auto or a whole number >= 1, got '$NPROC'" >&2
        return 2
    fi
}

mltrain_nproc || exit $?
unset -f mltrain_nproc
