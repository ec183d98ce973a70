#!/usr/bin/env bash
# Make the local base images the Docker tests build on (no registry is reachable here):
#
#   mltrain-test-base:bookworm     Debian bookworm minbase + python3 (debootstrap, docker import)
#   mltrain-torch-base:2.13.0-cpu  the above + a venv with torch 2.13.0 (CPU), numpy and the unet3d
#                                  image's packages (mlperf-logging, nibabel, scipy)
#
# Every wheel is fetched by this machine's pip (whose configuration knows the local torch wheel and
# the TLS setup of the way to PyPI) and installed offline in the image, so no build needs the
# network; the unet3d Dockerfile's `pip install` then finds its packages already satisfied.
#
# Usage: bash .ci/base-images.sh [test|torch|all]   (default: all; DOCKER_HOST must answer)
#
# Cached under MLTRAIN_IMAGE_CACHE (default ~/.cache/mltrain/base-images): the debootstrap rootfs
# as a tarball and the torch image as a `docker save` archive, so that a fresh engine gets both
# back in seconds instead of minutes. An image already in the engine is left alone.
set -euo pipefail

TEST_BASE="mltrain-test-base:bookworm"
TORCH_BASE="mltrain-torch-base:2.13.0-cpu"
TORCH_VERSION="2.13.0"
SUITE="bookworm"
MIRROR="${MLTRAIN_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE="${MLTRAIN_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mltrain/base-images}"
# Bump when the recipe below changes, so that caches made by an older recipe are not reused.
ROOTFS_RECIPE=1
TORCH_RECIPE=2
# What the torch base holds besides torch: the unet3d image's packages, pinned as in docker/unet3d.Dockerfile.
EXTRA_PACKAGES=(numpy "mlperf-logging==4.1.68" "nibabel>=5,<6" "scipy>=1.10")

log() { echo "base-images: $*" >&2; }

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

make_test_base() {
    if have_image "$TEST_BASE"; then
        log "$TEST_BASE present"
        return
    fi
    local tarball="$CACHE/rootfs-$SUITE-r$ROOTFS_RECIPE.tar"
    if [[ ! -f "$tarball" ]]; then
        if ! command -v debootstrap >/dev/null 2>&1; then
            log "installing debootstrap"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 \
                || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
        fi
        mkdir -p "$CACHE"
        local work
        work="$(mktemp -d "$CACHE/.rootfs.XXXXXX")"
        log "debootstrap $SUITE (about a minute)"
        if ! debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3 \
            "$SUITE" "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1; then
            log "debootstrap failed; last lines of its log:"
            tail -n 5 "$work/debootstrap.log" >&2
            rm -rf "$work"
            return 1
        fi
        rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"* \
            "$work/rootfs/usr/share/doc" "$work/rootfs/usr/share/man" "$work/rootfs/usr/share/locale"
        tar -C "$work/rootfs" --numeric-owner -cf "$work/rootfs.tar" .
        mv "$work/rootfs.tar" "$tarball"
        rm -rf "$work"
    fi
    log "importing $TEST_BASE"
    docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["bash"]' \
        "$tarball" "$TEST_BASE" >/dev/null
}

make_torch_base() {
    if have_image "$TORCH_BASE"; then
        log "$TORCH_BASE present"
        return
    fi
    local archive="$CACHE/torch-base-$TORCH_VERSION-r$TORCH_RECIPE.tar"
    if [[ -f "$archive" ]]; then
        log "loading $TORCH_BASE from $archive"
        docker load -q -i "$archive" >/dev/null
        have_image "$TORCH_BASE" && return
    fi
    mkdir -p "$CACHE"
    local ctx
    ctx="$(mktemp -d "$CACHE/.torch-ctx.XXXXXX")"
    log "fetching torch $TORCH_VERSION (CPU) and its companions through pip"
    mkdir -p "$ctx/wheels"
    local packages=("torch==$TORCH_VERSION" "${EXTRA_PACKAGES[@]}")
    python3 -m pip download "${packages[@]}" --only-binary=:all: \
        --python-version 3.11 --platform manylinux_2_28_x86_64 -d "$ctx/wheels" -q 2>&1 \
        | { grep -v "is ignored" >&2 || true; }
    if ! ls "$ctx/wheels/torch-$TORCH_VERSION"*.whl >/dev/null 2>&1; then
        log "pip could not fetch torch $TORCH_VERSION"
        rm -rf "$ctx"
        return 1
    fi
    {
        echo "FROM $TEST_BASE"
        echo "COPY wheels/ /tmp/wheels/"
        echo "RUN python3 -m venv /opt/venv \\"
        echo " && /opt/venv/bin/pip install --no-index --find-links /tmp/wheels --no-cache-dir \\"
        echo "    --disable-pip-version-check ${packages[*]@Q} \\"
        echo " && rm -rf /tmp/wheels"
        echo "ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    } >"$ctx/Dockerfile"
    log "building $TORCH_BASE (offline pip install of torch, about a minute)"
    if ! docker build --network none -q -t "$TORCH_BASE" "$ctx" >"$ctx/build.log" 2>&1; then
        log "building $TORCH_BASE failed; last lines:"
        tail -n 10 "$ctx/build.log" >&2
        rm -rf "$ctx"
        return 1
    fi
    rm -rf "$ctx"
    log "saving $TORCH_BASE to $archive"
    docker save -o "$archive.tmp" "$TORCH_BASE"
    mv "$archive.tmp" "$archive"
}

if ! docker version >/dev/null 2>&1; then
    log "no Docker engine answers (DOCKER_HOST=${DOCKER_HOST:-unset}); start one with .ci/docker-engine.sh"
    exit 1
fi
case "${1:-all}" in
    test) make_test_base ;;
    torch) make_test_base && make_torch_base ;;
    all) make_test_base && make_torch_base ;;
    *)
        log "usage: base-images.sh [test|torch|all]"
        exit 2
        ;;
esac
