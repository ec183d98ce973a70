"""What mltrain asks of a workload image before the first seed: its software versions (with the
ulimits the seeds will get, dropping any the engine cannot grant), and a page-cache drop."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
from docker.types import Ulimit

from orchestrator.config.reading import parse_json
from orchestrator.errors import RunnerError
from orchestrator.runners.docker.engine import engine_address, run_helper, short_error

MEMLOCK_LIMIT = -1
"""Unlimited locked memory (``--ulimit memlock=-1``), as NVIDIA's MLPerf harness sets it."""
STACK_LIMIT = 67108864
"""64 MiB stack (``--ulimit stack=67108864``), as NVIDIA's MLPerf harness sets it."""
DROP_CACHES_FILE = Path("/proc/sys/vm/drop_caches")
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


@dataclass
class Ulimits:
    """The ulimits seeds get: NVIDIA's harness values, less any the engine refused (noted)."""

    values: dict[str, int] = field(default_factory=lambda: {"memlock": MEMLOCK_LIMIT, "stack": STACK_LIMIT})
    note: str = ""

    def objects(self) -> list[Ulimit]:
        return [Ulimit(name=name, soft=value, hard=value) for name, value in self.values.items()]


def probe_versions(
    client: docker.DockerClient, image: str, *, user: str, ulimits: Ulimits, on_status: Callable[[str], None],
) -> dict[str, Any]:
    """Ask the image for its Python/torch/CUDA/cuDNN/NCCL versions, in a container started with
    the seeds' ulimits. A limit the engine cannot grant (its own hard limit is lower, as in an
    unprivileged sandbox) is dropped from ``ulimits`` with a warning, and seeds keep the engine's."""
    for python in ("python", "python3"):
        try:
            code, output = _probe(client, image, python, user=user, ulimits=ulimits, on_status=on_status)
        except RunnerError:
            continue
        if code == 0:
            try:
                return dict(parse_json(output.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                break
    on_status(f"warning: image {image} did not report its Python/torch versions")
    return {}


def _probe(
    client: docker.DockerClient, image: str, python: str, *, user: str, ulimits: Ulimits,
    on_status: Callable[[str], None],
) -> tuple[int, str]:
    while True:
        try:
            return run_helper(client, image, [python, "-c", VERSION_PROBE], user=user, ulimits=ulimits.objects())
        except RunnerError as exc:
            refused = _RLIMIT_REFUSED.search(str(exc))
            name = _RLIMIT_NAMES.get(refused.group(1), "") if refused else ""
            if name not in ulimits.values:
                raise
            del ulimits.values[name]
            note = (
                f"the Docker engine cannot set the {name} limit NVIDIA's harness uses (dockerd's own hard"
                f" limit is lower: raise Limit{name.upper()} of its service); containers keep the engine's"
            )
            ulimits.note = "; ".join(filter(None, (ulimits.note, note)))
            on_status(f"warning: {note}")


def image_env_versions(attrs: dict[str, Any]) -> dict[str, str]:
    """The stack versions an image declares in its environment (NGC images do)."""
    pairs = attrs.get("Config", {}).get("Env") or []
    env = dict(pair.split("=", 1) for pair in pairs if "=" in pair)
    return {k.lower(): env[k] for k in _IMAGE_ENV_VERSIONS if k in env}


def clear_caches(client: docker.DockerClient, image: str, on_status: Callable[[str], None]) -> str:
    """Drop the page cache (MLPerf cache_clear): directly when this process may and the engine is
    on this host, else through a privileged helper container. Returns how it was done."""
    try:
        if not engine_address().startswith("unix://"):
            raise PermissionError("the engine runs on another host: its page cache is dropped there")
        os.sync()
        DROP_CACHES_FILE.write_text("3\n")
        method = f"wrote 3 to {DROP_CACHES_FILE} on the host"
    except OSError:
        code, output = run_helper(client, image, ["sh", "-c", _DROP_CACHES_SCRIPT], privileged=True, user="0:0")
        if code != 0:
            raise RunnerError(
                f"--drop-caches: the privileged helper container could not drop caches ({short_error(output)})"
            ) from None
        method = "privileged helper container wrote 3 to /proc/sys/vm/drop_caches"
    on_status(f"cache_clear: {method}")
    return method
