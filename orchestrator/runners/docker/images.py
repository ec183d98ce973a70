"""Workload images: build context, content-hash tag, and the build itself through the Docker SDK.

The build context holds exactly what goes into an image: the workload's Dockerfile, the
workload's folder (as ``workloads/<name>/``) and the Python its registry folder shares between
workloads (top-level modules such as ``__init__.py``, and folders that are not workloads). The
tag is a hash of all of it plus the build arguments and the base image's id, so an unchanged
workload is never rebuilt.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions

from orchestrator.config.workloads import DECLARATION
from orchestrator.errors import ConfigError, RunnerError
from orchestrator.runners.base import LABEL_WORKLOAD, Bundle

IMAGE_REPOSITORY = "mltrain"
"""Images are tagged ``mltrain/<workload>:<hash>``."""
LABEL_CONTENT_HASH = "mltrain.content-hash"
LABEL_BASE_IMAGE = "mltrain.base-image"
HASH_LENGTH = 16
_HASH_VERSION = b"mltrain-image-context-v1\n"
_SKIPPED_DIRS = {"__pycache__", ".git", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
_SKIPPED_SUFFIXES = (".pyc", ".pyo")
_BASE_ARG = re.compile(r"^\s*ARG\s+BASE_IMAGE\s*=\s*(\S+)\s*$", re.MULTILINE)


@dataclass(frozen=True, kw_only=True)
class ContextFile:
    """One file of a build context."""

    name: str
    """Path inside the context (``workloads/unet3d/train.py``)."""
    source: Path
    """The file on the host."""
    executable: bool
    """Whether it keeps an executable mode in the image."""


@dataclass(frozen=True, kw_only=True)
class BuildSpec:
    """Everything that goes into one workload image."""

    workload: str
    """Workload name; the image repository is ``mltrain/<workload>``."""
    dockerfile: Path
    """The Dockerfile on the host."""
    files: tuple[ContextFile, ...]
    """The context besides the Dockerfile, sorted by name."""
    base_image: str
    """Value of the BASE_IMAGE build argument (the Dockerfile's default unless overridden)."""
    build_args: Mapping[str, str] = field(default_factory=dict)
    """Build arguments handed to the Dockerfile (BASE_IMAGE included)."""

    def __post_init__(self) -> None:
        if not self.dockerfile.is_file():
            raise ConfigError(f"workload {self.workload!r}: Dockerfile {self.dockerfile} not found")
        if not self.base_image:
            raise ConfigError(f"{self.dockerfile}: no BASE_IMAGE: declare `ARG BASE_IMAGE=<image>`")


@dataclass(frozen=True, kw_only=True)
class BuiltImage:
    """A workload image present in the engine."""

    tag: str
    """``mltrain/<workload>:<content hash>``."""
    image_id: str
    """The engine's image id (sha256 of the image configuration)."""
    content_hash: str
    """Hash of the context, build arguments and base image id."""
    base_image: str
    """The BASE_IMAGE reference it was built from."""
    base_image_id: str | None
    """The base image's id when it was present before the build."""
    reused: bool
    """True when an image with this tag existed and nothing was built."""


def build_spec(workload: Bundle, project_root: Path, *, base_image: str | None = None) -> BuildSpec:
    """Assemble what goes into ``workload``'s image; `base_image` overrides the Dockerfile's default."""
    if workload.image is None:
        raise ConfigError(f"workload {workload.name!r} declares no image: add `image: {{dockerfile: ...}}`")
    dockerfile = (project_root / workload.image.dockerfile).resolve()
    default_base = None
    if dockerfile.is_file():
        found = _BASE_ARG.search(dockerfile.read_text())
        default_base = found.group(1) if found else None
    chosen = base_image or default_base or ""
    return BuildSpec(
        workload=workload.name,
        dockerfile=dockerfile,
        files=tuple(sorted(context_files(workload, kit=project_root / KIT), key=lambda f: f.name)),
        base_image=chosen,
        build_args={"BASE_IMAGE": chosen} if chosen else {},
    )


KIT = Path("workloads") / "common"
"""mltrain's kit of the code every image needs: the qualification probe and the precision rule it shares."""


def context_files(workload: Bundle, *, kit: Path | None = None) -> Iterator[ContextFile]:
    """The workload's folder, plus the Python its registry folder shares: top-level modules and
    packages that are not workloads (no other workload, no README); and mltrain's own ``kit``
    (``workloads/common``) where that folder has none, so that every image mltrain builds runs the
    qualification probe, whichever folder its workload came from."""
    folder = workload.folder.resolve()
    yield from _tree(folder, f"workloads/{workload.name}")
    shared = set()
    for entry in sorted(folder.parent.iterdir()):
        if entry == folder or _skipped(entry.name):
            continue
        if entry.is_file() and entry.suffix == ".py":  # package files such as __init__.py
            yield _context_file(entry, f"workloads/{entry.name}")
        elif entry.is_dir() and not (entry / DECLARATION).is_file():
            shared.add(entry.name)
            yield from _tree(entry, f"workloads/{entry.name}")
    if kit is not None and kit.is_dir() and kit.name not in shared:
        yield from _tree(kit.resolve(), f"workloads/{kit.name}")


def content_hash(spec: BuildSpec, base_image_id: str | None) -> str:
    """sha256 over the Dockerfile, every context file (name, mode, bytes), build args and base id."""
    digest = hashlib.sha256(_HASH_VERSION)
    digest.update(b"Dockerfile\0" + _sha256(spec.dockerfile).encode() + b"\n")
    for item in spec.files:
        mode = b"x" if item.executable else b"-"
        digest.update(item.name.encode() + b"\0" + mode + _sha256(item.source).encode() + b"\n")
    for key in sorted(spec.build_args):
        digest.update(f"arg {key}={spec.build_args[key]}\n".encode())
    digest.update(f"base {base_image_id or spec.base_image}\n".encode())
    return digest.hexdigest()


def image_tag(spec: BuildSpec, digest: str) -> str:
    return f"{IMAGE_REPOSITORY}/{spec.workload}:{digest[:HASH_LENGTH]}"


def context_tar(spec: BuildSpec) -> bytes:
    """The build context as an uncompressed tar with fixed owners and times (reproducible)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        _add_file(tar, "Dockerfile", spec.dockerfile.read_bytes(), executable=False)
        directories: set[str] = set()
        for item in spec.files:
            parts = item.name.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                name = "/".join(parts[:depth])
                if name not in directories:
                    directories.add(name)
                    _add_directory(tar, name)
            _add_file(tar, item.name, item.source.read_bytes(), executable=item.executable)
    return buffer.getvalue()


def ensure_image(
    client: docker.DockerClient,
    spec: BuildSpec,
    *,
    rebuild: bool = False,
    on_status: Callable[[str], None] = lambda line: None,
) -> BuiltImage:
    """Return the image for `spec`, building it only when its tag is missing (or `rebuild`)."""
    base_id = _image_id(client, spec.base_image)
    digest = content_hash(spec, base_id)
    tag = image_tag(spec, digest)
    existing = _image_id(client, tag)
    if existing and not rebuild:
        on_status(f"image {tag} is up to date ({existing[:19]})")
        return BuiltImage(
            tag=tag, image_id=existing, content_hash=digest, base_image=spec.base_image,
            base_image_id=base_id, reused=True,
        )
    on_status(f"building {tag} from {spec.dockerfile.name} on {spec.base_image}")
    labels = {LABEL_WORKLOAD: spec.workload, LABEL_CONTENT_HASH: digest, LABEL_BASE_IMAGE: spec.base_image}
    try:
        events = client.api.build(
            fileobj=io.BytesIO(context_tar(spec)),
            custom_context=True,
            dockerfile="Dockerfile",
            tag=tag,
            buildargs=dict(spec.build_args),
            labels=labels,
            rm=True,
            forcerm=True,
            nocache=rebuild,
            pull=False,
            network_mode="host",
            decode=True,
        )
        image_id = follow_build(events, tag=tag, base_image=spec.base_image, base_present=base_id is not None,
                                on_status=on_status)
    except docker.errors.APIError as exc:
        raise RunnerError(f"building {tag} failed: {_one_line(exc.explanation or str(exc))}") from None
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise RunnerError(f"building {tag} failed: {_one_line(str(exc))}") from None
    pulled_base = _image_id(client, spec.base_image) if base_id is None else None
    if pulled_base:  # the build pulled its base: tag by its id too, as the next run will look it up
        base_id, digest = pulled_base, content_hash(spec, pulled_base)
        tag = image_tag(spec, digest)
        repository, _, version = tag.rpartition(":")
        client.api.tag(image_id, repository, version)
    on_status(f"built {tag} ({image_id[:19]})")
    return BuiltImage(
        tag=tag, image_id=image_id, content_hash=digest, base_image=spec.base_image,
        base_image_id=base_id, reused=False,
    )


def follow_build(
    events: Iterable[dict[str, Any]],
    *,
    tag: str,
    base_image: str,
    base_present: bool,
    on_status: Callable[[str], None],
) -> str:
    """Stream a classic-builder event stream to `on_status`; return the image id or raise RunnerError
    naming the failing step, its error and the step's last output line."""
    step = ""
    step_output: deque[str] = deque(maxlen=5)
    image_id = ""
    seen_status: set[tuple[str, str]] = set()
    for event in events:
        if "error" in event or "errorDetail" in event:
            detail = event.get("errorDetail") or {}
            message = _one_line(str(detail.get("message") or event.get("error") or "unknown error"))
            raise RunnerError(_failure_line(tag, step, message, step_output, base_image, base_present))
        text = event.get("stream")
        if isinstance(text, str):
            for line in text.splitlines():
                clean = line.rstrip()
                if not clean:
                    continue
                if clean.startswith("Step "):
                    step = clean
                    step_output.clear()
                elif not clean.startswith((" ---> ", "Removing intermediate container")):
                    step_output.append(clean)
                found = re.match(r"^Successfully built ([0-9a-f]+)$", clean)
                if found and not image_id:
                    image_id = found.group(1)
                on_status(clean)
        status = event.get("status")
        if isinstance(status, str):
            key = (str(event.get("id", "")), status)
            if key not in seen_status:  # pull progress: one line per layer and phase
                seen_status.add(key)
                on_status(f"{key[0]}: {status}" if key[0] else status)
        aux = event.get("aux")
        if isinstance(aux, dict) and isinstance(aux.get("ID"), str):
            image_id = aux["ID"]
    if not image_id:
        raise RunnerError(f"building {tag} ended without an image id (last step: {step or 'none'})")
    return image_id if image_id.startswith("sha256:") else f"sha256:{image_id}"


def _failure_line(
    tag: str, step: str, message: str, output: deque[str], base_image: str, base_present: bool
) -> str:
    where = f" at {step}" if step else ""
    last = output[-1] if output else ""
    line = f"building {tag} failed{where}: {message}"
    if last and last not in message:
        line += f" (last output: {_one_line(last)})"
    if not base_present and (" FROM " in f" {step} " or not step):
        line += f"; base image {base_image} is not in the engine: load it or pass --base-image"
    return line


def image_present(client: docker.DockerClient, reference: str) -> bool:
    """Whether the engine holds ``reference`` (nothing is pulled)."""
    return _image_id(client, reference) is not None


def _image_id(client: docker.DockerClient, reference: str) -> str | None:
    if not reference:
        return None
    try:
        return str(client.images.get(reference).id)
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as exc:
        if exc.status_code in (400, 404):  # malformed or unknown reference
            return None
        raise RunnerError(f"cannot inspect image {reference}: {_one_line(str(exc))}") from None


def _tree(root: Path, prefix: str) -> Iterator[ContextFile]:
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(_skipped(part) for part in relative.parts) or not path.is_file():
            continue
        yield _context_file(path, f"{prefix}/{relative.as_posix()}")


def _context_file(path: Path, name: str) -> ContextFile:
    return ContextFile(name=name, source=path, executable=bool(path.stat().st_mode & 0o111))


def _skipped(name: str) -> bool:
    return name.startswith(".") or name in _SKIPPED_DIRS or name.endswith(_SKIPPED_SUFFIXES)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _add_file(tar: tarfile.TarFile, name: str, data: bytes, *, executable: bool) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o755 if executable else 0o644
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def _add_directory(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    info.mtime = 0
    tar.addfile(info)


def _one_line(text: str) -> str:
    return " ".join(text.split())
