# Sourced by the workloads' run scripts (run_and_time.sh, throughput.sh) from the project root,
# before any Python starts, so that every process they launch (torchrun's ranks included) inherits it.
#
# mltrain's docker runner starts a container as the host's uid, which has no passwd entry in the
# image, with HOME set but neither USER nor LOGNAME. torch before 2.5 names its inductor cache
# after getpass.getuser(), which then raises KeyError: COMPILE=1 crashed at the first compilation.
# So: USER when no user name can be found (uid_<uid>, torch's own later fallback), and
# TORCHINDUCTOR_CACHE_DIR, when unset, in the first writable of $TMPDIR, /tmp and $HOME.
# Nothing is changed for a user who has a name, nor for a cache folder already chosen.

mltrain_user_env() {
    local name base
    if [[ -z ${LOGNAME:-}${USER:-}${LNAME:-}${USERNAME:-} ]] && ! id -un > /dev/null 2>&1; then
        export USER="uid_$(id -u)"
    fi
    if [[ -n ${TORCHINDUCTOR_CACHE_DIR:-} ]]; then
        return 0
    fi
    name=${LOGNAME:-${USER:-${LNAME:-${USERNAME:-$(id -un 2> /dev/null || echo "uid_$(id -u)")}}}}
    for base in "${TMPDIR:-}" /tmp "${HOME:-}"; do
        if [[ -n $base && -d $base && -w $base ]]; then
            export TORCHINDUCTOR_CACHE_DIR="${base%/}/torchinductor_${name}"
            return 0
        fi
    done
}

mltrain_user_env
unset -f mltrain_user_env
