"""An MLCommons training system description (``systems/<name>.json``) from a `sysinfo.capture`,
in the form `mlperf_logging.system_desc_checker` accepts and its result summarizer reads."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from orchestrator.errors import UsageError
from orchestrator.insight.unavailable import is_unavailable
from orchestrator.mlperf.checkers import quiet_tools
from orchestrator.results import atomic

STATUSES = ("Available on-premise", "Available cloud", "Research, Development, or Internal (RDI)", "Preview")


def default_system_name(system: dict[str, Any]) -> str:
    """``<host>_<n>x<gpu>`` or ``<host>_cpu``: a file-name-safe name for systems/<name>.json."""
    host = system.get("host", {}).get("hostname", "host")
    gpus = system.get("gpus", {})
    devices = gpus.get("devices", []) if gpus.get("available") else []
    names = {d.get("name") for d in devices if isinstance(d.get("name"), str)}
    suffix = f"{len(devices)}x{sorted(names)[0]}" if names else "cpu"
    return safe_name(f"{host}_{suffix}")


def safe_name(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")
    return cleaned or "system"


def system_description(
    system: dict[str, Any],
    *,
    submitter: str,
    system_name: str,
    division: str = "open",
    status: str = "Research, Development, or Internal (RDI)",
    framework: str | None = None,
) -> dict[str, str]:
    """An MLCommons training system description (all values strings, as the checker expects)."""
    if division not in ("open", "closed"):
        raise UsageError(f"division {division!r}: use open or closed")
    if status not in STATUSES:
        raise UsageError(f"status {status!r}: use one of {', '.join(STATUSES)}")
    if not submitter.strip() or not system_name.strip():
        raise UsageError("a system description needs a submitter and a system name")
    host = system.get("host", {})
    gpus = system.get("gpus", {})
    devices = gpus.get("devices", []) if gpus.get("available") else []
    first = devices[0] if devices else {}
    storage = system.get("storage", {})
    software = system.get("software", {})
    torch_version = software.get("torch")
    if framework is None:
        framework = f"PyTorch {torch_version}" if isinstance(torch_version, str) else "unknown"
    caches = host.get("caches")
    no_gpu = "none" if not devices else ""
    return {
        "submitter": submitter,
        "division": division,
        "status": status,
        "system_name": system_name,
        "number_of_nodes": "1",
        "host_processors_per_node": _count(host.get("sockets")),
        "host_processor_model_name": _text(host.get("cpu_model")),
        "host_processor_core_count": _count(host.get("cores")),
        "host_processor_vcpu_count": _count(host.get("threads")),
        "host_processor_frequency": _mhz(host.get("cpu_max_mhz")),
        "host_processor_caches": ", ".join(caches) if isinstance(caches, list) else "unknown",
        "host_processor_interconnect": "",
        "host_memory_capacity": _gib(host.get("memory_bytes")),
        "host_storage_type": _storage_kind(storage),
        "host_storage_capacity": _gib(storage.get("capacity_bytes")) if isinstance(storage, dict) else "unknown",
        "host_networking": "",
        "host_networking_topology": "",
        "host_memory_configuration": "",
        "accelerators_per_node": str(len(devices)),
        "accelerator_model_name": no_gpu or _text(first.get("name")),
        "accelerator_host_interconnect": no_gpu or _pcie(first.get("pcie", {})),
        "accelerator_frequency": no_gpu or _mhz(first.get("max_clocks_mhz", {}).get("sm")),
        "accelerator_on-chip_memories": "",
        "accelerator_memory_configuration": "",
        "accelerator_memory_capacity": no_gpu or _gib(first.get("memory_bytes")),
        "accelerator_interconnect": no_gpu or _nvlink(first.get("nvlink_active_links")),
        "accelerator_interconnect_topology": "",
        "cooling": "",
        "hw_notes": "captured by mltrain sysinfo" if host else "unknown: no system capture (counts of 0 mean unknown)",
        "framework": framework,
        "other_software_stack": _other_software(system),
        "operating_system": f"{_text(host.get('os'))} (kernel {_text(host.get('kernel'))})",
        "sw_notes": "",
    }


def check_system_description(path: Path, ruleset: str) -> tuple[bool, str]:
    """Run mlperf_logging's system_desc_checker of a training ruleset, as every tool of the package is
    run (`checkers.quiet_tools`); return (valid, what it logged)."""
    from mlperf_logging.system_desc_checker.system_desc_checker import check_system_desc

    with quiet_tools() as collected:
        valid, _, _, _ = check_system_desc(str(path), "training", ruleset)
    return bool(valid), "; ".join(collected.messages(logging.INFO))


def write_system_description(path: Path, description: dict[str, str]) -> None:
    atomic.write_json(path, description)


def _text(value: object) -> str:
    if value is None or is_unavailable(value):
        return "unknown"
    return str(value)


def _count(value: object) -> str:
    """Counts the summarizer multiplies must parse as integers; 0 stands for unknown (see hw_notes)."""
    return str(value) if isinstance(value, int) else "0"


def _mhz(value: object) -> str:
    return f"{value:g} MHz" if isinstance(value, int | float) else "unknown"


def _gib(value: object) -> str:
    return f"{value / 2**30:.0f} GB" if isinstance(value, int | float) else "unknown"


def _storage_kind(storage: object) -> str:
    if not isinstance(storage, dict) or is_unavailable(storage):
        return "unknown"
    kind = storage.get("kind")
    return f"{kind} ({storage.get('filesystem')})" if isinstance(kind, str) else "unknown"


def _pcie(pcie: dict[str, Any]) -> str:
    generation, width = pcie.get("max_generation"), pcie.get("max_width")
    if isinstance(generation, int) and isinstance(width, int):
        return f"PCIe Gen{generation} x{width}"
    return "unknown"


def _nvlink(links: object) -> str:
    if isinstance(links, int):
        return f"NVLink, {links} active links" if links else "none"
    return "none"


def _other_software(system: dict[str, Any]) -> str:
    gpus = system.get("gpus", {})
    parts = []
    if gpus.get("available"):
        driver, cuda = _text(gpus.get("driver_version")), _text(gpus.get("cuda_driver_version"))
        parts.append(f"NVIDIA driver {driver}, CUDA {cuda}")
    engine = system.get("container_engine", {})
    if engine.get("available"):
        parts.append(f"{engine.get('product')} {engine.get('version')}")
    logging_version = system.get("software", {}).get("mlperf-logging")
    if isinstance(logging_version, str):
        parts.append(f"mlperf-logging {logging_version}")
    return ", ".join(parts)


def write_checked(path: Path, description: dict[str, str], ruleset: str) -> Path:
    """Write the description only if mlperf_logging's checker of ``ruleset`` accepts it (checked on
    the staged file, which is renamed into place only then)."""
    if path.parent.exists() and not path.parent.is_dir():
        raise UsageError(f"--system-desc {path.parent}: not a folder")
    with atomic.staged(path) as handle:
        handle.write((json.dumps(description, indent=2, sort_keys=True) + "\n").encode())
        handle.flush()
        valid, log = check_system_description(Path(handle.name), ruleset)
        if not valid:
            raise UsageError(f"system description rejected by mlperf_logging's system_desc_checker: {log}")
    return path
