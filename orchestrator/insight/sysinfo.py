"""What a result was measured on: host, GPUs (through NVML), dataset storage, container engine.

`capture(data_dir)` returns one JSON-ready dict that the executor stores in the run manifest
under ``system``. Anything that cannot be known says so with ``{"available": false, "reason":
...}``; a missing value is never written as a zero. `system_desc` turns such a dict into an
MLCommons training system description.

Linux only: host facts come from /proc and /sys, which is also what a container sees.
"""

from __future__ import annotations

import os
import platform
import socket
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from orchestrator.insight.gpus import gpu_info
from orchestrator.insight.unavailable import is_unavailable, unavailable

NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "fuse.glusterfs", "lustre", "gpfs",
     "beegfs", "fuse.sshfs", "9p", "virtiofs", "fuse.s3fs", "fuse.gcsfuse", "fuse.juicefs", "afs", "wekafs"}
)
MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})


# ---------------------------------------------------------------- host


@dataclass(frozen=True, kw_only=True)
class HostRoots:
    """Where host facts are read from (tests point these at a fake tree)."""

    proc: Path = Path("/proc")
    """The proc filesystem."""
    sys: Path = Path("/sys")
    """The sys filesystem."""
    etc: Path = Path("/etc")
    """Holds os-release."""

    def __post_init__(self) -> None:
        for name in ("proc", "sys", "etc"):
            if not isinstance(getattr(self, name), Path):
                raise TypeError(f"HostRoots.{name} must be a Path")


def host_info(roots: HostRoots = HostRoots()) -> dict[str, Any]:
    """CPU model, sockets, cores, threads, caches, memory, OS, kernel of this host."""
    cpus = _cpuinfo_blocks(roots.proc / "cpuinfo")
    model = next((b["model name"] for b in cpus if "model name" in b), None)
    sockets = {b.get("physical id", "0") for b in cpus}
    cores = {(b.get("physical id", "0"), b.get("core id", b.get("processor"))) for b in cpus}
    flags = set(cpus[0].get("flags", "").split()) if cpus else set()
    notable = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8")
    mem_kib = meminfo(roots.proc / "meminfo").get("MemTotal")
    return {
        "hostname": socket.gethostname(),
        "cpu_model": model or unavailable("no 'model name' in /proc/cpuinfo"),
        "sockets": len(sockets) if cpus else unavailable("/proc/cpuinfo unreadable"),
        "cores": len(cores) if cpus else unavailable("/proc/cpuinfo unreadable"),
        "threads": len(cpus) if cpus else unavailable("/proc/cpuinfo unreadable"),
        "usable_cpus": len(os.sched_getaffinity(0)),
        "cpu_max_mhz": _cpu_max_mhz(roots, cpus),
        "cpu_flags": sorted(flags.intersection(notable)),
        "caches": _cpu_caches(roots.sys / "devices/system/cpu/cpu0/cache"),
        "memory_bytes": mem_kib * 1024 if mem_kib else unavailable("no MemTotal in /proc/meminfo"),
        "os": _os_release(roots.etc / "os-release"),
        "kernel": platform.release(),
        "architecture": platform.machine(),
        "python": platform.python_version(),
        "in_container": Path("/.dockerenv").exists() or Path("/run/.containerenv").exists(),
    }


def _cpuinfo_blocks(path: Path) -> list[dict[str, str]]:
    try:
        text = path.read_text()
    except OSError:
        return []
    blocks = []
    for chunk in text.strip().split("\n\n"):
        fields = {}
        for line in chunk.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        if "processor" in fields:
            blocks.append(fields)
    return blocks


def meminfo(path: Path) -> dict[str, int]:
    values: dict[str, int] = {}
    try:
        for line in path.read_text().splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                values[key] = int(parts[0])
    except OSError:
        pass
    return values


def _cpu_max_mhz(roots: HostRoots, cpus: list[dict[str, str]]) -> float | dict[str, Any]:
    try:
        return int((roots.sys / "devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()) / 1000
    except (OSError, ValueError):
        pass
    if cpus and "cpu MHz" in cpus[0]:
        return float(cpus[0]["cpu MHz"])
    return unavailable("no cpufreq and no 'cpu MHz' in /proc/cpuinfo")


def _cpu_caches(folder: Path) -> list[str] | dict[str, Any]:
    caches = []
    for index in sorted(folder.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
        caches.append(f"L{level}{suffix} {size}")
    return caches or unavailable(f"{folder} not readable")


def _os_release(path: Path) -> str | dict[str, Any]:
    try:
        for line in path.read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.partition("=")[2].strip().strip('"')
    except OSError:
        pass
    return unavailable(f"no PRETTY_NAME in {path}")


# ---------------------------------------------------------------- storage


@dataclass(frozen=True)
class Mount:
    mount_point: Path
    fstype: str
    source: str
    device_number: str
    """major:minor of the filesystem's device."""


def mounts(mountinfo: Path = Path("/proc/self/mountinfo")) -> list[Mount]:
    found = []
    for line in mountinfo.read_text().splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 2:
            continue
        point = fields[4].replace("\\040", " ")
        found.append(Mount(Path(point), tail[0], tail[1], fields[2]))
    return found


def mount_of(path: Path, all_mounts: list[Mount]) -> Mount | None:
    """The mount holding ``path``: the longest mount point that is a prefix of it (last wins)."""
    target = path.resolve()
    best: Mount | None = None
    for mount in all_mounts:
        if (target == mount.mount_point or mount.mount_point in target.parents) and (
            best is None or len(mount.mount_point.parts) >= len(best.mount_point.parts)
        ):
            best = mount
    return best


def storage_info(path: Path, roots: HostRoots = HostRoots()) -> dict[str, Any]:
    """Filesystem, device and kind (nvme, ssd, hdd, virtual disk, network, memory) behind ``path``."""
    if not path.exists():
        return unavailable(f"{path} does not exist")
    try:
        mount = mount_of(path, mounts(roots.proc / "self/mountinfo"))
    except OSError as exc:
        return unavailable(f"cannot read mount table: {exc.strerror}")
    if mount is None:
        return unavailable(f"no mount holds {path}")
    info: dict[str, Any] = {
        "path": str(path.resolve()),
        "mount_point": str(mount.mount_point),
        "filesystem": mount.fstype,
        "source": mount.source,
    }
    stat = os.statvfs(path)
    info["capacity_bytes"] = stat.f_blocks * stat.f_frsize
    info["free_bytes"] = stat.f_bavail * stat.f_frsize
    if mount.fstype in NETWORK_FILESYSTEMS:
        info.update(kind="network", device=unavailable("network filesystem: no local block device"))
        return info
    if mount.fstype in MEMORY_FILESYSTEMS:
        info.update(kind="memory", device=unavailable("memory filesystem: no block device"))
        return info
    device = block_device(mount.device_number, roots.sys)
    if device is None:
        reason = f"{mount.fstype} on device {mount.device_number}: backing block device not visible here"
        info.update(kind=unavailable(reason), device=unavailable(reason))
        return info
    info["device"] = device
    info["kind"] = _device_kind(device, roots.sys)
    return info


def block_device(device_number: str, sys_root: Path = Path("/sys")) -> str | None:
    """The whole-disk name (vda, nvme0n1, sda) of a major:minor, or None when it is not a block device."""
    link = sys_root / "dev/block" / device_number
    if not link.exists():
        return None
    resolved = link.resolve()
    if (resolved / "partition").exists():
        resolved = resolved.parent
    return resolved.name


def _device_kind(device: str, sys_root: Path) -> str:
    if device.startswith("nvme"):
        return "nvme"
    rotational = sys_root / "block" / device / "queue/rotational"
    try:
        spinning = rotational.read_text().strip() == "1"
    except OSError:
        spinning = None
    if device.startswith(("vd", "xvd")):
        return "virtual disk"
    if device.startswith(("loop", "zram", "ram")):
        return "memory" if device.startswith(("zram", "ram")) else "loop device"
    if spinning is None:
        return "unknown"
    return "hdd" if spinning else "ssd"


# ---------------------------------------------------------------- container engine


def engine_info(client_factory: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Docker (or Podman's Docker API) version and runtimes, or why there is none."""
    try:
        if client_factory is None:
            import docker

            def client_factory() -> Any:
                return docker.from_env(timeout=5)

        client = client_factory()
        try:
            version = client.version()
            info = client.info()
        finally:
            client.close()  # its connection's socket, open until the process ends otherwise
    except Exception as exc:  # the SDK raises DockerException, requests and OS errors alike
        if not os.environ.get("DOCKER_HOST") and not Path("/var/run/docker.sock").exists():
            return unavailable("no container engine: DOCKER_HOST is unset and /var/run/docker.sock does not exist")
        return unavailable(f"no container engine reachable: {' '.join(str(exc).split())[:200]}")
    components = {c.get("Name"): c.get("Version") for c in version.get("Components", [])}
    return {
        "available": True,
        "product": "podman" if "Podman Engine" in components else "docker",
        "version": version.get("Version"),
        "api_version": version.get("ApiVersion"),
        "runtimes": sorted(info.get("Runtimes", {})),
        "default_runtime": info.get("DefaultRuntime"),
    }


# ---------------------------------------------------------------- whole system


def package_version(name: str) -> str | None:
    """The installed version of a distribution, None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def software_versions() -> dict[str, Any]:
    """The ML stack the system capture describes (missing packages say so)."""
    versions: dict[str, Any] = {}
    for package in ("torch", "mlperf-logging", "numpy", "nvidia-ml-py", "docker"):
        version = package_version(package)
        versions[package] = version if version is not None else unavailable("not installed")
    return versions


def orchestrator_versions() -> dict[str, str]:
    """What the orchestrator ran with, for a run's manifest (installed packages only)."""
    from orchestrator import __version__

    versions = {"mltrain": __version__, "python": platform.python_version()}
    for package in ("mlperf-logging", "torch", "docker", "numpy"):
        version = package_version(package)
        if version is not None:
            versions[package] = version
    return versions


def capture(
    data_dir: Path | None = None,
    *,
    roots: HostRoots = HostRoots(),
    nvml: ModuleType | None = None,
    engine_client_factory: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """Everything above, for the run manifest's ``system`` key."""
    return {
        "host": host_info(roots),
        "gpus": gpu_info(nvml),
        "storage": storage_info(data_dir, roots) if data_dir is not None else unavailable("no data folder given"),
        "container_engine": engine_info(engine_client_factory),
        "software": software_versions(),
    }


# ---------------------------------------------------------------- text view


def describe_lines(system: dict[str, Any]) -> list[str]:
    """``mltrain sysinfo`` as text: one fact per line, unavailable values with their reason."""
    lines: list[str] = []
    for section in ("host", "gpus", "storage", "container_engine", "software"):
        value = system.get(section)
        lines.append(f"{section}:")
        lines += _lines(value, "  ")
    return lines


def flat_facts(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """A capture (or any part of it) as (path, value) pairs, one per scalar, in capture order:
    ``("host.cpu_model", "Intel Xeon")``, ``("gpus.devices.0.name", ...)``; an unavailable part is
    one pair with its reason. What a table of systems lays out, a row per path."""
    if is_unavailable(value):
        return [(prefix, f"unavailable ({value['reason']})")]
    if isinstance(value, dict):
        pairs = []
        for key, item in value.items():
            if key == "available":
                continue
            path = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(item, dict | list) and not is_unavailable(item) and not _is_flat_list(item):
                pairs += flat_facts(item, path)
            else:
                pairs.append((path, "-" if item is None else _scalar(str(key), item)))
        return pairs
    if isinstance(value, list) and not _is_flat_list(value):
        return [pair for index, item in enumerate(value) for pair in flat_facts(item, f"{prefix}.{index}")]
    return [(prefix, _scalar(prefix.rpartition(".")[2], value))]


def _lines(value: Any, indent: str) -> list[str]:
    if is_unavailable(value):
        return [f"{indent}unavailable: {value['reason']}"]
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            if key == "available":
                continue
            if isinstance(item, dict | list) and not is_unavailable(item) and not _is_flat_list(item):
                lines.append(f"{indent}{key}:")
                lines += _lines(item, indent + "  ")
            else:
                lines.append(f"{indent}{key}: {_scalar(key, item)}")
        return lines
    if isinstance(value, list):
        lines = []
        for index, item in enumerate(value):
            lines.append(f"{indent}[{index}]")
            lines += _lines(item, indent + "  ")
        return lines
    return [f"{indent}{value}"]


def _is_flat_list(value: Any) -> bool:
    return isinstance(value, list) and all(not isinstance(v, dict | list) for v in value)


def _scalar(key: str, value: Any) -> str:
    if is_unavailable(value):
        return f"unavailable ({value['reason']})"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    if key.endswith("_bytes") and isinstance(value, int | float):
        return f"{value / 2**30:.1f} GiB"
    return str(value)
