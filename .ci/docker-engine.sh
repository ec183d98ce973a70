#!/usr/bin/env bash
# A private Docker engine for tests: everything it owns lives under one temp folder and it is
# stopped by PID. Source this file, then:
#
#   docker_engine_start      # installs docker.io when missing, starts dockerd, exports DOCKER_HOST
#   ...                      # tests talk to it through DOCKER_HOST
#   docker_engine_stop       # kills that dockerd (and the containerd it started) by PID
#
# Or run it: `bash .ci/docker-engine.sh start` prints `export ...` lines to eval;
# `bash .ci/docker-engine.sh stop STATE_DIR` stops the engine started that way.
#
# The engine has no bridge and touches no iptables (--iptables=false --bridge=none): containers
# run with network "none", image builds with the host network (package registries only).
# MLTRAIN_DOCKER_DIR picks the state folder (default: a new temp folder, deleted again on stop);
# keeping one between runs keeps the engine's images, so no base or workload image is rebuilt.

docker_engine_start() {
    if ! command -v dockerd >/dev/null 2>&1; then
        echo "docker-engine: installing docker.io" >&2
        if ! { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null 2>&1 \
            || { apt-get update -qq >/dev/null 2>&1 \
                && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null 2>&1; }; }; then
            echo "docker-engine: cannot install docker.io" >&2
            return 1
        fi
    fi
    local dir="${MLTRAIN_DOCKER_DIR:-}"
    if [[ -z "$dir" ]]; then
        # Short path: unix socket paths (containerd's live under exec-root) must stay < 108 bytes.
        dir="$(mktemp -d /tmp/mltd.XXXXXX)"
        touch "$dir/.temporary"  # removed again by docker_engine_stop
    fi
    mkdir -p "$dir/root" "$dir/exec"
    local sock="$dir/docker.sock"
    dockerd \
        --data-root "$dir/root" \
        --exec-root "$dir/exec" \
        --pidfile "$dir/dockerd.pid" \
        --host "unix://$sock" \
        --iptables=false --ip-masq=false --bridge=none \
        --storage-driver overlay2 \
        >"$dir/dockerd.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$dir/dockerd.launcher.pid"
    local waited=0
    until DOCKER_HOST="unix://$sock" docker version >/dev/null 2>&1; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "docker-engine: dockerd exited; last lines of $dir/dockerd.log:" >&2
            tail -n 5 "$dir/dockerd.log" >&2
            return 1
        fi
        if ((waited >= 60)); then
            echo "docker-engine: dockerd did not answer within 30 s (log: $dir/dockerd.log)" >&2
            kill -TERM "$pid" 2>/dev/null
            return 1
        fi
        sleep 0.5
        waited=$((waited + 1))
    done
    export DOCKER_HOST="unix://$sock"
    export MLTRAIN_DOCKERD_PID="$pid"
    export MLTRAIN_DOCKERD_DIR="$dir"
    echo "docker-engine: dockerd $pid answers at $DOCKER_HOST (state in $dir)" >&2
}

docker_engine_stop() {
    local dir="${1:-${MLTRAIN_DOCKERD_DIR:-}}"
    local pid="${MLTRAIN_DOCKERD_PID:-}"
    if [[ -z "$pid" && -n "$dir" && -f "$dir/dockerd.launcher.pid" ]]; then
        pid="$(cat "$dir/dockerd.launcher.pid")"
    fi
    [[ -n "$pid" ]] || return 0
    if kill -0 "$pid" 2>/dev/null; then
        # Containers first, so that none outlives the engine's shutdown grace period.
        local left
        local host="unix://$dir/docker.sock"
        left="$(DOCKER_HOST="$host" docker ps -q 2>/dev/null || true)"
        # shellcheck disable=SC2086  # container ids, one per word
        [[ -z "$left" ]] || DOCKER_HOST="$host" docker rm -f $left >/dev/null 2>&1 || true
        kill -TERM "$pid"
        local waited=0
        while kill -0 "$pid" 2>/dev/null && ((waited < 40)); do
            sleep 0.5
            waited=$((waited + 1))
        done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
    # dockerd stops the containerd it started; kill it by its pidfile if dockerd could not.
    local cpid_file="$dir/exec/containerd/containerd.pid"
    if [[ -n "$dir" && -f "$cpid_file" ]]; then
        local cpid
        cpid="$(cat "$cpid_file")"
        [[ -n "$cpid" ]] && kill -0 "$cpid" 2>/dev/null && kill -TERM "$cpid"
    fi
    if [[ -n "$dir" && -f "$dir/.temporary" ]]; then
        # The engine leaves its network-namespace mount behind; unmount what lies under the folder.
        local mounts
        mounts="$(awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r)"
        [[ -z "$mounts" ]] || echo "$mounts" | xargs -r -d '\n' umount -l 2>/dev/null || true
        rm -rf "$dir" || echo "docker-engine: could not remove $dir" >&2
    fi
    unset MLTRAIN_DOCKERD_PID
    echo "docker-engine: dockerd $pid stopped" >&2
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    set -euo pipefail
    case "${1:-}" in
        start)
            docker_engine_start
            printf 'export DOCKER_HOST=%q MLTRAIN_DOCKERD_PID=%q MLTRAIN_DOCKERD_DIR=%q\n' \
                "$DOCKER_HOST" "$MLTRAIN_DOCKERD_PID" "$MLTRAIN_DOCKERD_DIR"
            ;;
        stop)
            MLTRAIN_DOCKERD_PID="" docker_engine_stop "${2:?usage: docker-engine.sh stop STATE_DIR}"
            ;;
        *)
            echo "usage: docker-engine.sh start | stop STATE_DIR" >&2
            exit 2
            ;;
    esac
fi
