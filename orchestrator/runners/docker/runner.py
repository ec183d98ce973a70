"""The Docker backend: one image per workload (or harness), one fresh container per job.

Containers run as NVIDIA's MLPerf harness starts them (``--ipc=host``, unlimited memlock,
64 MiB stack, GPUs through a device request), with no network, as the invoking user, the
dataset read-only at ``/data`` and the seed's results folder at ``/results``. Every container
carries mltrain's labels (`orchestrator.runners.docker.engine`), so that `remove_leftovers`
finds the ones a killed orchestrator left behind. Nothing here goes through a shell: seeds,
paths and options reach the engine as API values.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions
from docker.models.containers import Container
from docker.types import Mount

from orchestrator.config.reading import not_a_folder
from orchestrator.errors import DataError, RunnerError, UsageError
from orchestrator.results.records import Exit
from orchestrator.runners.base import Bundle, DatasetArg, DatasetResult, Job, JobSpec, Runner
from orchestrator.runners.docker.engine import connect, engine_address, invoking_user, remove_leftovers, short_error
from orchestrator.runners.docker.gpus import check_gpu_support, device_requests
from orchestrator.runners.docker.images import BuiltImage, build_spec, ensure_image, image_present
from orchestrator.runners.docker.probes import Ulimits, clear_caches, image_env_versions, probe_versions
from orchestrator.runners.gpus import device_order_env, parse_gpus
from orchestrator.runners.proc import MARK_ENV

CONTAINER_DATA = "/data"
CONTAINER_RESULTS = "/results"
CONTAINER_WORKDIR = "/workspace"
IPC_MODES = ("host", "private")
"""host: NVIDIA's harness (``--ipc=host``), the container shares the host's /dev/shm and the shm
size does not apply; private: a /dev/shm of ``shm_size`` of its own."""
STOP_GRACE_SECONDS = 10
"""Between SIGTERM and SIGKILL when a container is cancelled."""
BASE_IMAGE_ENV = "MLTRAIN_BASE_IMAGE"
"""Overrides every Dockerfile's default BASE_IMAGE when no base image is given explicitly."""
_SHM_SIZE = re.compile(r"^[1-9][0-9]*[bkmg]?$", re.IGNORECASE)
_NAME_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]")


def default_base_image() -> str | None:
    """The site's base image (``$MLTRAIN_BASE_IMAGE``), or None for each Dockerfile's own default."""
    return os.environ.get(BASE_IMAGE_ENV) or None


def check_base_image(base_image: str | None) -> str | None:
    """The base image given (or ``$MLTRAIN_BASE_IMAGE``), refused unless it looks like an image reference."""
    given = base_image is not None
    base_image = base_image or default_base_image()
    if base_image is not None and (not base_image.strip() or any(c.isspace() or ord(c) < 32 for c in base_image)):
        where = "--base-image" if given else f"${BASE_IMAGE_ENV}"
        raise UsageError(f"{where} {base_image!r}: give an image reference like repo/name:tag")
    return base_image


def check_ipc_and_shm(ipc: str, shm_size: str) -> None:
    """``--ipc`` and ``--shm-size`` refused unless the engine takes them."""
    if ipc not in IPC_MODES:
        raise UsageError(f"--ipc {ipc!r}: use host (NVIDIA's harness; the host's /dev/shm) or private")
    if not _SHM_SIZE.match(shm_size):
        raise UsageError(f"--shm-size {shm_size!r}: use a size like 1g, 512m or 65536")


def image_record(image: BuiltImage, attrs: dict[str, Any]) -> dict[str, Any]:
    """A workload image as a run's provenance names it (``attrs``: the engine's inspection of it)."""
    return {"tag": image.tag, "id": image.image_id, "digest": (attrs.get("RepoDigests") or [None])[0],
            "content_hash": image.content_hash, "reused": image.reused}


class DockerRunner(Runner):
    """Runs each job in a fresh container of its bundle's image."""

    name = "docker"

    def __init__(
        self,
        project_root: Path,
        *,
        gpus: str = "none",
        shm_size: str = "1g",
        rebuild: bool = False,
        drop_caches: bool = False,
        base_image: str | None = None,
        on_status: Callable[[str], None] = lambda s: None,
        ipc: str = "host",
    ) -> None:
        check_ipc_and_shm(ipc, shm_size)
        base_image = check_base_image(base_image)
        self.project_root = project_root
        self.gpus = parse_gpus(gpus)
        self.sampled_gpus = self.gpus.devices(None)  # the engine numbers the host's GPUs as NVML does
        self.gpu_numbering = "nvml"
        self.shm_size = shm_size.lower()
        self.ipc = ipc
        self.rebuild = rebuild
        self.drop_caches = drop_caches
        self.base_image = base_image
        self.on_status = on_status
        self.user = invoking_user()
        self._client: docker.DockerClient | None = None
        self._image: BuiltImage | None = None
        self._drop_method: str | None = None
        self._ulimits = Ulimits()

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = connect()
        return self._client

    def prepare(self, bundle: Bundle) -> dict[str, Any]:
        client = self.client
        info = client.info()
        spec = build_spec(bundle, self.project_root, base_image=self.base_image)
        gpus_seen: list[str] | None = None
        if self.gpus.wanted and image_present(client, spec.base_image):  # refused before any build
            gpus_seen = check_gpu_support(client, spec.base_image, self.gpus, user=self.user)
        image = ensure_image(client, spec, rebuild=self.rebuild, on_status=self.on_status)
        self._image = image
        if self.gpus.wanted and gpus_seen is None:
            gpus_seen = check_gpu_support(client, image.tag, self.gpus, user=self.user)
        if self.drop_caches:
            self._drop_method = clear_caches(client, image.tag, self.on_status)
        attrs = client.images.get(image.tag).attrs
        versions = probe_versions(client, image.tag, user=self.user, ulimits=self._ulimits, on_status=self.on_status)
        versions.update(image_env_versions(attrs))
        return {
            "runner": self.name,
            "engine": {
                "version": info.get("ServerVersion"),
                "host": engine_address(),
                "runtimes": sorted(info.get("Runtimes") or {}),
            },
            "image": image_record(image, attrs),
            "base_image": {"ref": image.base_image, "id": image.base_image_id},
            "versions": versions,
            "container": {
                "gpus": self.gpus.spec,
                "gpus_seen": gpus_seen,
                "ipc": self.ipc,
                "shm_size": self.shm_size if self.ipc == "private" else "host /dev/shm (ipc=host)",
                "network": "none",
                "ulimits": dict(self._ulimits.values),
                "ulimits_note": self._ulimits.note or None,
                "user": self.user,
            },
            "drop_caches": self._drop_method,
        }

    def stop_leftovers(self, run_id: str) -> list[str]:
        return [f"container {name}" for name in remove_leftovers(self.client, run_id)]

    def submit(self, spec: JobSpec) -> Job:
        if self._image is None:
            raise RunnerError("DockerRunner.submit before prepare: the image is not built")
        if (wrong := not_a_folder(spec.data_dir)) is not None:
            raise DataError(f"data folder {spec.data_dir}: {wrong}")
        spec.results_dir.mkdir(parents=True, exist_ok=True)
        if self.drop_caches:
            self._drop_method = clear_caches(self.client, self._image.tag, self.on_status)
        environment = container_environment(spec, self.user)
        name = container_name(spec.run_id, spec.name)
        options: dict[str, Any] = {
            "image": self._image.tag,
            "entrypoint": container_argv(spec.bundle, spec.command),
            "command": list(spec.args),
            "name": name,
            "labels": spec.marks(),
            "environment": environment,
            "working_dir": CONTAINER_WORKDIR,
            "user": self.user,
            "mounts": [
                Mount(CONTAINER_DATA, str(spec.data_dir.resolve()), type="bind", read_only=True),
                Mount(CONTAINER_RESULTS, str(spec.results_dir.resolve()), type="bind"),
            ],
            "network_mode": "none",
            "ipc_mode": self.ipc,
            "shm_size": self.shm_size,
            "ulimits": self._ulimits.objects(),
            "device_requests": device_requests(self.gpus),
            "init": True,
            "detach": True,
        }
        try:
            container = self._create(name, options)
        except docker.errors.APIError as exc:
            raise RunnerError(f"cannot create the container of {_said(spec)}: {short_error(exc)}") from None
        try:
            container.start()
        except docker.errors.APIError as exc:
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True, v=True)
            raise RunnerError(f"cannot start the container of {_said(spec)}: {short_error(exc)}") from None
        self.on_status(f"{_said(spec)}: container {container.short_id} ({name}) started")
        return DockerJob(container)

    def dataset_command(
        self, bundle: Bundle, args: Sequence[DatasetArg], *, timeout_s: float, on_line: Callable[[str], None],
    ) -> DatasetResult:
        """In a helper container of the bundle's image (`orchestrator.runners.docker.datasets`)."""
        from orchestrator.runners.docker.datasets import run_dataset_command

        if self._image is None:
            raise RunnerError("DockerRunner.dataset_command before prepare: the image is not built")
        return run_dataset_command(
            self.client, self._image.tag, bundle, container_argv(bundle, bundle.data.cli), args,
            user=self.user, working_dir=CONTAINER_WORKDIR, timeout_s=timeout_s, on_line=on_line,
        )

    def _create(self, name: str, options: dict[str, Any]) -> Container:
        try:
            return self.client.containers.create(**options)
        except docker.errors.APIError as exc:
            if exc.status_code != 409:
                raise
        # A container of this very run and seed, left by a killed orchestrator: replace it.
        stale = self.client.containers.get(name)
        stale.remove(force=True, v=True)
        self.on_status(f"removed stale container {name}")
        return self.client.containers.create(**options)


def container_argv(bundle: Bundle, command: Sequence[str] | None = None) -> list[str]:
    """The bundle's ``run`` argv (or another of its commands, such as ``data.cli``) as seen from
    /workspace: entries naming a file of its folder become paths under ``workloads/<name>/``."""
    argv: list[str] = []
    for item in bundle.run if command is None else command:
        relative = Path(item)
        if not item.startswith("-") and not relative.is_absolute() and (bundle.folder / relative).is_file():
            argv.append(f"workloads/{bundle.name}/{relative.as_posix()}")
        else:
            argv.append(item)
    return argv


def container_environment(spec: JobSpec, user: str) -> dict[str, str]:
    """What a job's container is told: the job's environment, DATADIR and RESULTS_DIR as the container
    sees them, and the run's mark, by which the host tells the job's processes from others' (telemetry)."""
    environment = {**device_order_env(), **spec.env, "DATADIR": CONTAINER_DATA, "RESULTS_DIR": CONTAINER_RESULTS,
                   MARK_ENV: spec.run_id}
    if not user.startswith("0:"):
        environment.setdefault("HOME", "/tmp")  # the image has no home for an arbitrary uid
    return environment


def container_name(run_id: str, job: str) -> str:
    """``mltrain-<run id>-<job name>`` (a seed's: ``...-seed7``), in the characters Docker takes."""
    return docker_name(f"mltrain-{run_id}-{job}")


def docker_name(text: str) -> str:
    """``text`` as a container's name: each character Docker refuses there as ``_``."""
    return _NAME_UNSAFE.sub("_", text)


def _said(spec: JobSpec) -> str:
    """A job as status lines and errors name it: 'seed 7', 'the probe', 'job trial_2'."""
    if spec.seed is not None:
        return f"seed {spec.seed}"
    return f"the {spec.name}" if spec.kind == "step" else f"job {spec.name}"


class DockerJob(Job):
    """One job's container: its output, its end, and stopping it."""

    def __init__(self, container: Container) -> None:
        self.container = container
        self.job_id = str(container.short_id)
        self._cancelled = threading.Event()
        self._exit: Exit | None = None

    def stream(self) -> Iterator[bytes]:
        try:
            yield from self.container.logs(stream=True, follow=True, stdout=True, stderr=True)
        except docker.errors.NotFound:
            return
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            yield f"\n[mltrain] log stream of container {self.job_id} broke: {short_error(exc)}\n".encode()

    def wait(self) -> Exit:
        if self._exit is not None:
            return self._exit
        try:
            result = self.container.wait()
            self.container.reload()
            state = self.container.attrs.get("State", {})
        except docker.errors.NotFound:
            self._exit = Exit(code=None, detail=f"container {self.job_id} was removed while it ran")
            return self._exit
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            self._exit = Exit(code=None, detail=f"lost container {self.job_id}: {short_error(exc)}")
            return self._exit
        code = int(result.get("StatusCode", state.get("ExitCode", -1)))
        oom = bool(state.get("OOMKilled"))
        self._exit = Exit(code=code, oom_killed=oom, detail=_exit_detail(code, oom, self._cancelled.is_set()))
        self._remove()
        return self._exit

    def cancel(self) -> None:
        self._cancelled.set()
        try:
            self.container.stop(timeout=STOP_GRACE_SECONDS)
        except (docker.errors.NotFound, requests.exceptions.RequestException):
            pass
        except docker.errors.APIError as exc:
            if exc.status_code not in (304, 409):  # already stopped, or being removed
                raise RunnerError(f"cannot stop container {self.job_id}: {short_error(exc)}") from None

    def _remove(self) -> None:
        try:
            self.container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: removal already in progress
                raise RunnerError(f"cannot remove container {self.job_id}: {short_error(exc)}") from None


def _exit_detail(code: int, oom: bool, cancelled: bool) -> str:
    if oom:
        return f"container killed by the out-of-memory killer (exit {code})"
    if cancelled:
        return f"container stopped by mltrain (exit {code})"
    if code > 128:
        return f"container ended by signal {code - 128} (exit {code})"
    return f"container exited with {code}"
