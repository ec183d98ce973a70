#!/usr/bin/env bash
# A private one-node Slurm cluster for tests: munged, slurmctld and slurmd with every file under
# one temp folder, every address 127.0.0.1, no accounting database (jobcomp/filetxt; `sacct -c`).
#
#   eval "$(bash .ci/slurm-cluster.sh start)"   # exports SLURM_CONF and MLTRAIN_SLURM_DIR
#   bash .ci/slurm-cluster.sh stop "$MLTRAIN_SLURM_DIR"   # stops the three daemons by PID
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
    local dir node cpus mem port
    dir="$(mktemp -d /tmp/mlslurm.XXXXXX)"
    chmod 755 "$dir"
    node="$(hostname -s)"
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
SlurmctldHost=${node}(127.0.0.1)
SlurmctldPort=${port}
SlurmdPort=$((port + 1))
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
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
NodeName=${node} NodeAddr=127.0.0.1 NodeHostname=${node} CPUs=${cpus} RealMemory=${mem} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
    export SLURM_CONF="$dir/slurm.conf"
    slurmctld -f "$SLURM_CONF"
    slurmd -f "$SLURM_CONF"
    local waited=0
    until sinfo -h -o %T 2>/dev/null | grep -qE '^idle'; do
        if ((waited >= 60)); then
            echo "slurm-cluster: node not idle after 30 s; last lines of the logs:" >&2
            tail -n 5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
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
    for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
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
