#!/usr/bin/env bash
# A private Slurm cluster of MLTRAIN_SLURM_NODES nodes (default 2) on this one machine, for tests:
# munged, slurmctld and one slurmd per node (Slurm's multiple-slurmd mode: `slurmd -N NODE`, each node
# on its own port), every file under one temp folder, every address 127.0.0.1, no accounting database
# (jobcomp/filetxt; `sacct -c`). The nodes are named HOST-1, HOST-2, ... and share this machine's CPUs.
#
#   eval "$(bash .ci/slurm-cluster.sh start)"   # exports SLURM_CONF and MLTRAIN_SLURM_DIR
#   bash .ci/slurm-cluster.sh stop "$MLTRAIN_SLURM_DIR"   # stops every daemon it started, by PID
#
# Installs slurm-wlm and munge from Debian when missing.
set -euo pipefail

start() {
    if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
        echo "slurm-cluster: installing slurm-wlm and munge" >&2
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq slurm-wlm munge >/dev/null 2>&1 \
            || { apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null 2>&1 \
                 && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq slurm-wlm munge >/dev/null 2>&1; } \
            || { echo "slurm-cluster: cannot install slurm-wlm munge" >&2; exit 1; }
    fi
    local dir host cpus mem port count i
    count="${MLTRAIN_SLURM_NODES:-2}"
    [[ $count =~ ^[1-9][0-9]?$ ]] || { echo "slurm-cluster: MLTRAIN_SLURM_NODES must be 1-99, got '$count'" >&2; exit 2; }
    dir="$(mktemp -d /tmp/mlslurm.XXXXXX)"
    chmod 755 "$dir"
    host="$(hostname -s)"
    cpus="$(nproc)"
    mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
    port=$(( 20000 + RANDOM % 20000 ))
    mkdir -p "$dir/munge" "$dir/munge-key" "$dir/state" "$dir/spool" "$dir/log"
    # munge: its own key (private folder) and socket (a folder everyone may enter), run as user munge
    dd if=/dev/urandom of="$dir/munge-key/munge.key" bs=1024 count=1 status=none
    chown -R munge: "$dir/munge" "$dir/munge-key"
    chmod 755 "$dir/munge"
    chmod 700 "$dir/munge-key"
    chmod 400 "$dir/munge-key/munge.key"
    runuser -u munge -- munged --key-file="$dir/munge-key/munge.key" --socket="$dir/munge/munge.socket" \
        --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"
    cat >"$dir/slurm.conf" <<CONF
ClusterName=mltrain
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=${port}
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
MpiDefault=none
ReturnToService=2
MinJobAge=3600
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
CONF
    for ((i = 1; i <= count; i++)); do
        echo "NodeName=${host}-$i NodeAddr=127.0.0.1 NodeHostname=${host} Port=$((port + i)) CPUs=${cpus} RealMemory=${mem} State=UNKNOWN" >>"$dir/slurm.conf"
        mkdir -p "$dir/spool/${host}-$i"
    done
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$dir/slurm.conf"
    export SLURM_CONF="$dir/slurm.conf"
    slurmctld -f "$SLURM_CONF"
    for ((i = 1; i <= count; i++)); do
        slurmd -f "$SLURM_CONF" -N "${host}-$i"
    done
    local waited=0
    until (( $(sinfo -h -N -o %T 2>/dev/null | grep -cE '^idle') == count )); do
        if ((waited >= 60)); then
            echo "slurm-cluster: $count node(s) not idle after 30 s; last lines of the logs:" >&2
            tail -n 5 "$dir/log/"*.log >&2 || true
            stop "$dir"
            exit 1
        fi
        sleep 0.5
        waited=$((waited + 1))
    done
    echo "export SLURM_CONF=$dir/slurm.conf MLTRAIN_SLURM_DIR=$dir"
}

stop() {
    local dir="${1:?usage: slurm-cluster.sh stop DIR}"
    for pidfile in "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
        if [[ -s "$pidfile" ]]; then
            kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
        fi
    done
}

case "${1:-}" in
    start) start ;;
    stop) stop "${2:-}" ;;
    *) echo "usage: slurm-cluster.sh start | stop DIR" >&2; exit 2 ;;
esac
