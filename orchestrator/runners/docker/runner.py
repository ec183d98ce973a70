"""The Docker backend: one image per workload, one fresh container per seed.

Containers run as NVIDIA's MLPerf harness starts them (``--ipc=host``, unlimited memlock,
64 MiB stack, GPUs through a device request), with no network, as the invoking user, the
dataset read-only at ``/data`` and the seed's results folder at ``/results``. Every container
carries the labels `LABEL_RUN_ID`, `LABEL_SEED` and `LABEL_WORKLOAD`, so that `remove_leftovers`
finds the ones a killed orchestrator left behind. Nothing here goes through a shell: seeds,
paths and options reach the engine as API values.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions
from docker.models.containers import Container
from docker.types import DeviceRequest, Mount, Ulimit

from orchestrator.config.workloads import Workload
from orchestrator.errors import DataError, RunnerError, UsageError
from orchestrator.results.records import Exit
from orchestrator.runners.base import Job, Runner, SeedJob
from orchestrator.runners.docker.images import BuiltImage, build_spec, ensure_image

LABEL_RUN_ID = "mltrain.run_id"
LABEL_SEED = "mltrain.seed"
LABEL_WORKLOAD = "mltrain.workload"
CONTAINER_DATA = "/data"
CONTAINER_RESULTS = "/results"
CONTAINER_WORKDIR = "/workspace"
MEMLOCK_LIMIT = -1
"""Unlimited locked memory (``--ulimit memlock=-1``), as NVIDIA's MLPerf harness sets it."""
STACK_LIMIT = 67108864
"""64 MiB stack (``--ulimit stack=67108864``), as NVIDIA's MLPerf harness sets it."""
IPC_MODES = ("host", "private")
"""host: NVIDIA's harness (``--ipc=host``), the container shares the host's /dev/shm and the shm
size does not apply; private: a /dev/shm of ``shm_size`` of its own."""
STOP_GRACE_SECONDS = 10
"""Between SIGTERM and SIGKILL when a container is cancelled."""
HELPER_TIMEOUT_SECONDS = 300
"""Longest a helper container (version probe, cache drop) may take."""
ENGINE_TIMEOUT_SECONDS = 60
DROP_CACHES_FILE = Path("/proc/sys/vm/drop_caches")
BASE_IMAGE_ENV = "MLTRAIN_BASE_IMAGE"
"""Overrides every Dockerfile's default BASE_IMAGE when no base image is given explicitly."""
_SHM_SIZE = re.compile(r"^[1-9][0-9]*[bkmg]?$", re.IGNORECASE)
_GPU_IDS = re.compile(r"^[0-9a-zA-Z-]+(,[0-9a-zA-Z-]+)*$")
_NAME_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]")
_RLIMIT_REFUSED = re.compile(r"error setting rlimit type (\d+)")
_RLIMIT_NAMES = {"3": "stack", "8": "memlock"}
"""Linux RLIMIT_* numbers of the limits the harness sets, as runc names them in its errors."""

# Asked of the image once per run for the manifest; a constant, never built from user input.
VERSION_PROBE = """
import json, platform
info = {"python": platform.python_version()}
try:
    import torch
except Exception:
    pass
else:
    info["torch"] = torch.__version__
    info["cuda"] = torch.version.cuda
    try:
        info["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        info["cudnn"] = None
    try:
        nccl = torch.cuda.nccl.version()
        info["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl
    except Exception:
        info["nccl"] = None
print(json.dumps(info))
"""
# What NGC images declare about their stack, recorded when present.
_IMAGE_ENV_VERSIONS = ("CUDA_VERSION", "CUDNN_VERSION", "NCCL_VERSION", "NVIDIA_PYTORCH_VERSION")
# The MLPerf cache_clear step in a privileged helper container, for when this process cannot
# write drop_caches itself. A constant: no user input reaches this shell.
_DROP_CACHES_SCRIPT = "sync && echo 3 > /proc/sys/vm/drop_caches"


@dataclass(frozen=True, kw_only=True)
class GpuRequest:
    """Which GPUs a container gets, parsed from ``--gpus``."""

    spec: str
    """As the user wrote it: all, N, 0,1 (device ids) or none."""
    count: int = 0
    """Number of GPUs (-1: all); 0 with no ids: none."""
    device_ids: tuple[str, ...] = ()
    """Explicit device ids or UUIDs."""

    def __post_init__(self) -> None:
        if self.count < -1:
            raise UsageError(f"--gpus {self.spec!r}: count must be positive")
        if self.count and self.device_ids:
            raise UsageError(f"--gpus {self.spec!r}: give a count or device ids, not both")

    @property
    def wanted(self) -> bool:
        return self.count != 0 or bool(self.device_ids)

    def device_requests(self) -> list[DeviceRequest]:
        if not self.wanted:
            return []
        if self.device_ids:
            return [DeviceRequest(device_ids=list(self.device_ids), capabilities=[["gpu"]])]
        return [DeviceRequest(count=self.count, capabilities=[["gpu"]])]


def parse_gpus(spec: str) -> GpuRequest:
    """``all`` | ``N`` (a count) | ``0,1`` or ``device=0,1`` (device ids) | ``none``."""
    text = spec.strip()
    if text == "none":
        return GpuRequest(spec=spec)
    if text == "all":
        return GpuRequest(spec=spec, count=-1)
    if text.isdigit() and "," not in text:
        if int(text) == 0:
            raise UsageError("--gpus 0 asks for no GPU: write --gpus none (or --gpus device=0 for device 0)")
        return GpuRequest(spec=spec, count=int(text))
    ids = text.removeprefix("device=")
    if ("," in text or text.startswith("device=")) and _GPU_IDS.match(ids):
        return GpuRequest(spec=spec, device_ids=tuple(ids.split(",")))
    raise UsageError(f"--gpus {spec!r}: use all, a count (2), device ids (0,1 or device=0) or none")


def default_base_image() -> str | None:
    """The site's base image (``$MLTRAIN_BASE_IMAGE``), or None for each Dockerfile's own default."""
    return os.environ.get(BASE_IMAGE_ENV) or None


def engine_status() -> tuple[bool, str]:
    """Whether a Docker engine answers (for ``--runner auto``), and a sentence saying so."""
    where = _engine_address()
    try:
        client = docker.from_env(timeout=5)
    except docker.errors.DockerException as exc:
        return False, f"no Docker engine answers at {where} ({_short(exc)})"
    try:
        version = client.version()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        return False, f"no Docker engine answers at {where} ({_short(exc)})"
    finally:
        client.close()
    return True, f"Docker engine {version.get('Version', '?')} answers at {where}"


def connect() -> docker.DockerClient:
    """A client for the engine of DOCKER_HOST (or the default socket); RunnerError when none answers."""
    where = _engine_address()
    try:
        client = docker.from_env(timeout=ENGINE_TIMEOUT_SECONDS)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise RunnerError(
            f"cannot reach the Docker engine at {where} ({_short(exc)}): start dockerd, set DOCKER_HOST,"
            " or use --runner local"
        ) from None
    return client


def remove_leftovers(client: docker.DockerClient, run_id: str | None = None) -> list[str]:
    """Force-remove every container carrying mltrain's run label (of one run when `run_id` is given);
    return their names."""
    label = f"{LABEL_RUN_ID}={run_id}" if run_id else LABEL_RUN_ID
    removed: list[str] = []
    # Listed sparse (no inspect per container): one that vanishes meanwhile is no error.
    for container in client.containers.list(all=True, sparse=True, filters={"label": label}):
        names = container.attrs.get("Names") or [container.id]
        try:
            container.remove(force=True, v=True)
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as exc:
            if exc.status_code == 409:  # already being removed
                continue
            raise RunnerError(f"cannot remove container {names[0].lstrip('/')}: {_short(exc)}") from None
        removed.append(str(names[0]).lstrip("/"))
    return removed


class DockerRunner(Runner):
    """Runs each seed in a fresh container of the workload's image."""

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
        if ipc not in IPC_MODES:
            raise UsageError(f"--ipc {ipc!r}: use host (NVIDIA's harness; the host's /dev/shm) or private")
        if not _SHM_SIZE.match(shm_size):
            raise UsageError(f"--shm-size {shm_size!r}: use a size like 1g, 512m or 65536")
        base_image = base_image or default_base_image()
        if base_image is not None and (not base_image.strip() or any(c.isspace() for c in base_image)):
            raise UsageError(f"--base-image {base_image!r}: give an image reference like repo/name:tag")
        self.project_root = project_root
        self.gpus = parse_gpus(gpus)
        self.shm_size = shm_size.lower()
        self.ipc = ipc
        self.rebuild = rebuild
        self.drop_caches = drop_caches
        self.base_image = base_image
        self.on_status = on_status
        self.user = f"{os.getuid()}:{os.getgid()}"
        self._client: docker.DockerClient | None = None
        self._image: BuiltImage | None = None
        self._drop_method: str | None = None
        self._ulimits: dict[str, int] = {"memlock": MEMLOCK_LIMIT, "stack": STACK_LIMIT}
        self._ulimit_note = ""

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = connect()
        return self._client

    def prepare(self, workload: Workload) -> dict[str, Any]:
        client = self.client
        info = client.info()
        if self.gpus.wanted:
            check_gpu_support(info, self.gpus.spec)
        spec = build_spec(workload, self.project_root, base_image=self.base_image)
        image = ensure_image(client, spec, rebuild=self.rebuild, on_status=self.on_status)
        self._image = image
        if self.drop_caches:
            self._drop_method = self._clear_caches(image.tag)
        attrs = client.images.get(image.tag).attrs
        versions = self._probe_versions(image.tag)
        image_env = _env_dict(attrs.get("Config", {}).get("Env") or [])
        versions.update({k.lower(): image_env[k] for k in _IMAGE_ENV_VERSIONS if k in image_env})
        return {
            "runner": self.name,
            "engine": {
                "version": info.get("ServerVersion"),
                "host": _engine_address(),
                "runtimes": sorted(info.get("Runtimes") or {}),
            },
            "image": {
                "tag": image.tag,
                "id": image.image_id,
                "digest": (attrs.get("RepoDigests") or [None])[0],
                "content_hash": image.content_hash,
                "reused": image.reused,
            },
            "base_image": {"ref": image.base_image, "id": image.base_image_id},
            "versions": versions,
            "container": {
                "gpus": self.gpus.spec,
                "ipc": self.ipc,
                "shm_size": self.shm_size if self.ipc == "private" else "host /dev/shm (ipc=host)",
                "network": "none",
                "ulimits": dict(self._ulimits),
                "ulimits_note": self._ulimit_note or None,
                "user": self.user,
            },
            "drop_caches": self._drop_method,
        }

    def submit(self, job: SeedJob) -> Job:
        if self._image is None:
            raise RunnerError("DockerRunner.submit before prepare: the image is not built")
        if not job.data_dir.is_dir():
            raise DataError(f"data folder {job.data_dir} does not exist")
        job.results_dir.mkdir(parents=True, exist_ok=True)
        if self.drop_caches:
            self._drop_method = self._clear_caches(self._image.tag)
        labels = {
            **job.labels,
            LABEL_RUN_ID: job.run_id,
            LABEL_SEED: str(job.seed),
            LABEL_WORKLOAD: job.workload.name,
        }
        environment = {**job.env, "DATADIR": CONTAINER_DATA, "RESULTS_DIR": CONTAINER_RESULTS}
        if not self.user.startswith("0:"):
            environment.setdefault("HOME", "/tmp")  # the image has no home for an arbitrary uid
        name = container_name(job.run_id, job.seed)
        options: dict[str, Any] = {
            "image": self._image.tag,
            "entrypoint": container_argv(job.workload),
            "command": [str(job.seed)],
            "name": name,
            "labels": labels,
            "environment": environment,
            "working_dir": CONTAINER_WORKDIR,
            "user": self.user,
            "mounts": [
                Mount(CONTAINER_DATA, str(job.data_dir.resolve()), type="bind", read_only=True),
                Mount(CONTAINER_RESULTS, str(job.results_dir.resolve()), type="bind"),
            ],
            "network_mode": "none",
            "ipc_mode": self.ipc,
            "shm_size": self.shm_size,
            "ulimits": self._ulimit_objects(),
            "device_requests": self.gpus.device_requests(),
            "init": True,
            "detach": True,
        }
        try:
            container = self._create(name, options)
        except docker.errors.APIError as exc:
            raise RunnerError(f"cannot create the container of seed {job.seed}: {_short(exc)}") from None
        try:
            container.start()
        except docker.errors.APIError as exc:
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True, v=True)
            raise RunnerError(f"cannot start the container of seed {job.seed}: {_short(exc)}") from None
        self.on_status(f"seed {job.seed}: container {container.short_id} ({name}) started")
        return DockerJob(container)

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

    def _ulimit_objects(self) -> list[Ulimit]:
        return [Ulimit(name=name, soft=value, hard=value) for name, value in self._ulimits.items()]

    def _probe_versions(self, image: str) -> dict[str, Any]:
        """Ask the image for its Python/torch/CUDA/cuDNN/NCCL versions, in a container started with
        the seeds' ulimits. A limit the engine cannot grant (its own hard limit is lower, as in an
        unprivileged sandbox) is dropped with a warning, and seeds keep the engine's limit."""
        for python in ("python", "python3"):
            try:
                code, output = self._probe(image, python)
            except RunnerError:
                continue
            if code == 0:
                try:
                    return dict(json.loads(output.strip().splitlines()[-1]))
                except (ValueError, IndexError):
                    break
        self.on_status(f"warning: image {image} did not report its Python/torch versions")
        return {}

    def _probe(self, image: str, python: str) -> tuple[int, str]:
        while True:
            try:
                return run_helper(
                    self.client, image, [python, "-c", VERSION_PROBE], user=self.user,
                    ulimits=self._ulimit_objects(),
                )
            except RunnerError as exc:
                refused = _RLIMIT_REFUSED.search(str(exc))
                name = _RLIMIT_NAMES.get(refused.group(1), "") if refused else ""
                if name not in self._ulimits:
                    raise
                del self._ulimits[name]
                note = (
                    f"the Docker engine cannot set the {name} limit NVIDIA's harness uses (dockerd's own hard"
                    f" limit is lower: raise Limit{name.upper()} of its service); containers keep the engine's"
                )
                self._ulimit_note = "; ".join(filter(None, (self._ulimit_note, note)))
                self.on_status(f"warning: {note}")

    def _clear_caches(self, image: str) -> str:
        """Drop the page cache (MLPerf cache_clear): directly when this process may and the engine is
        on this host, else through a privileged helper container. Returns how it was done."""
        try:
            if not _engine_address().startswith("unix://"):
                raise PermissionError("the engine runs on another host: its page cache is dropped there")
            os.sync()
            DROP_CACHES_FILE.write_text("3\n")
            method = f"wrote 3 to {DROP_CACHES_FILE} on the host"
        except OSError:
            code, output = run_helper(
                self.client, image, ["sh", "-c", _DROP_CACHES_SCRIPT], privileged=True, user="0:0"
            )
            if code != 0:
                raise RunnerError(
                    f"--drop-caches: the privileged helper container could not drop caches ({_short(output)})"
                ) from None
            method = "privileged helper container wrote 3 to /proc/sys/vm/drop_caches"
        self.on_status(f"cache_clear: {method}")
        return method


def check_gpu_support(info: dict[str, Any], spec: str) -> None:
    """RunnerError unless the engine can hand GPUs to containers (NVIDIA runtime or CDI devices)."""
    runtimes = sorted(info.get("Runtimes") or {})
    if "nvidia" in runtimes:
        return
    cdi_dirs = [Path(d) for d in info.get("CDISpecDirs") or []]
    if any(p.name.startswith("nvidia") for d in cdi_dirs if d.is_dir() for p in d.iterdir()):
        return
    raise RunnerError(
        f"--gpus {spec}: the Docker engine has no NVIDIA runtime (runtimes: {', '.join(runtimes) or 'none'})"
        " and no NVIDIA CDI devices: install the NVIDIA Container Toolkit, run"
        " `nvidia-ctk runtime configure --runtime=docker`, restart dockerd; or use --gpus none"
    )


def container_argv(workload: Workload) -> list[str]:
    """The workload's ``run`` argv as seen from /workspace: entries naming a file of the workload
    folder become paths under ``workloads/<name>/``."""
    argv: list[str] = []
    for item in workload.run:
        relative = Path(item)
        if not item.startswith("-") and not relative.is_absolute() and (workload.folder / relative).is_file():
            argv.append(f"workloads/{workload.name}/{relative.as_posix()}")
        else:
            argv.append(item)
    return argv


def container_name(run_id: str, seed: int) -> str:
    return f"mltrain-{_NAME_UNSAFE.sub('_', run_id)}-seed{seed}"


def run_helper(
    client: docker.DockerClient,
    image: str,
    argv: list[str],
    *,
    privileged: bool = False,
    user: str | None = None,
    ulimits: list[Ulimit] | None = None,
) -> tuple[int, str]:
    """Run a short-lived container (no network, labelled as mltrain's) and return (exit code, output)."""
    try:
        container = client.containers.create(
            image,
            entrypoint=argv,
            command=[],
            network_mode="none",
            privileged=privileged,
            user=user,
            ulimits=ulimits,
            labels={LABEL_RUN_ID: "helper"},
            detach=True,
        )
    except docker.errors.APIError as exc:
        raise RunnerError(f"cannot create a helper container from {image}: {_short(exc)}") from None
    try:
        try:
            container.start()
        except docker.errors.APIError as exc:
            raise RunnerError(f"cannot start a helper container from {image}: {_short(exc)}") from None
        result = container.wait(timeout=HELPER_TIMEOUT_SECONDS)
        output = container.logs(stdout=True, stderr=True).decode(errors="replace")
        return int(result.get("StatusCode", -1)), output
    except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
        raise RunnerError(f"helper container from {image} failed: {_short(exc)}") from None
    finally:
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True, v=True)


class DockerJob(Job):
    """One seed's container: its output, its end, and stopping it."""

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
            yield f"\n[mltrain] log stream of container {self.job_id} broke: {_short(exc)}\n".encode()

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
            self._exit = Exit(code=None, detail=f"lost container {self.job_id}: {_short(exc)}")
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
                raise RunnerError(f"cannot stop container {self.job_id}: {_short(exc)}") from None

    def _remove(self) -> None:
        try:
            self.container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: removal already in progress
                raise RunnerError(f"cannot remove container {self.job_id}: {_short(exc)}") from None


def _exit_detail(code: int, oom: bool, cancelled: bool) -> str:
    if oom:
        return f"container killed by the out-of-memory killer (exit {code})"
    if cancelled:
        return f"container stopped by mltrain (exit {code})"
    if code > 128:
        return f"container ended by signal {code - 128} (exit {code})"
    return f"container exited with {code}"


def _env_dict(pairs: list[str]) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in pairs if "=" in pair)


def _engine_address() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _short(exc: object) -> str:
    text = getattr(exc, "explanation", None) or str(exc)
    return " ".join(str(text).split())[:300]
