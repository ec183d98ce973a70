"""Which GPU is which, in a node qualification: the GPUs NVML sees (every GPU of the node, read on
the node) against the devices the probe's CUDA saw (the ones the checks ran on), matched by UUID,
then by PCI bus id, never by index (CUDA numbers the fastest GPU first unless
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and ``CUDA_VISIBLE_DEVICES`` renumbers them; NVML does neither).

    gpus = nvml_gpus(health.before)             # NVML's view, each with its label for reasons
    cuda = match(gpus, probe.device)            # CUDA index -> the NVML GPU it is
    findings = cuda_findings(gpus, probe.device, requested)   # CUDA cannot use a GPU, counts differ ...

Per-GPU probe cases are named ``<metric>_gpu<i>`` (i: NVML's index once matched), so that each GPU
has its own history and a slow one fails on its own; references written for ``<metric>`` apply to
each (`split_metric`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from orchestrator.insight.unavailable import is_unavailable
from orchestrator.results.qualification import CheckResult, Remediation, Remedy, Status

_PER_GPU = re.compile(r"^(?P<base>.+)_gpu(?P<index>\d+)$")


class Finding(NamedTuple):
    """One thing found about a GPU: FAIL/WARN with its reason, or PASS with a note; a FAIL's remedy
    (what it asks for) and the GPU (NVML's index) where it is one GPU's."""

    status: Status
    text: str
    remedy: Remedy | None = None
    gpu: int | None = None


@dataclass(frozen=True, kw_only=True)
class Gpu:
    """One GPU as NVML sees it."""

    index: int
    """NVML's index (nvidia-smi's)."""
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    unreadable: str = ""
    """Why NVML cannot read it ("" while it answers)."""
    mig: bool = False

    @property
    def label(self) -> str:
        """How reasons name it: index, and its PCI bus id (else its UUID) where known."""
        where = self.pci_bus_id or self.uuid
        return f"GPU{self.index} ({where})" if where else f"GPU{self.index}"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def nvml_gpus(devices: Sequence[Mapping[str, Any]]) -> list[Gpu]:
    """The GPUs of NVML's device entries (`NvmlSession.device_health`), unreadable ones included."""
    found = []
    for entry in devices:
        mig = entry.get("mig")
        found.append(Gpu(
            index=int(entry["index"]), name=_text(entry.get("name")), uuid=_text(entry.get("uuid")),
            pci_bus_id=_text(entry.get("pci_bus_id")),
            unreadable=str(entry.get("reason", "")) if entry.get("available") is False else "",
            mig=bool(isinstance(mig, dict) and not is_unavailable(mig) and mig.get("enabled")),
        ))
    return found


def normal_uuid(value: Any) -> str | None:
    """A GPU UUID without NVML's ``GPU-`` prefix, lower case (torch prints it bare)."""
    text = _text(value)
    return text.lower().removeprefix("gpu-") if text else None


def normal_bus_id(value: Any) -> tuple[int, int, int, int] | None:
    """(domain, bus, device, function) of ``00000000:1B:00.0`` or ``0000:1b:00.0``; None otherwise."""
    text = _text(value)
    match = re.fullmatch(r"([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])", text or "")
    return tuple(int(part, 16) for part in match.groups()) if match else None  # type: ignore[return-value]


def cuda_devices(probe: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The CUDA devices the probe listed (its ``gpus``), in CUDA's order."""
    listed = probe.get("gpus")
    return [d for d in listed if isinstance(d, dict)] if isinstance(listed, list) else []


def match(gpus: Sequence[Gpu], probe: Mapping[str, Any]) -> dict[int, Gpu]:
    """CUDA index -> the NVML GPU it is, by UUID, else by PCI bus id (unmatched devices are left out)."""
    by_uuid = {normal_uuid(g.uuid): g for g in gpus if g.uuid}
    by_bus = {normal_bus_id(g.pci_bus_id): g for g in gpus if normal_bus_id(g.pci_bus_id)}
    found: dict[int, Gpu] = {}
    for device in cuda_devices(probe):
        index = device.get("index")
        gpu = by_uuid.get(normal_uuid(device.get("uuid"))) or by_bus.get(normal_bus_id(device.get("pci_bus_id")))
        if isinstance(index, int) and gpu is not None:
            found[index] = gpu
    return found


def labels(gpus: Sequence[Gpu]) -> str:
    return ", ".join(g.label for g in gpus)


def cuda_findings(gpus: Sequence[Gpu], probe: Mapping[str, Any], requested: str | None) -> list[Finding]:
    """What the probe's device line says of the GPUs NVML sees: FAIL where CUDA cannot use one of
    them or sees another count, WARN where ``--gpus none`` kept the checks off them."""
    kind = probe.get("device")
    if not gpus or kind not in ("cpu", "cuda"):
        return []
    seen = len(gpus)
    if requested == "none":
        return [Finding(Status.WARN, f"GPUs not qualified: --gpus none ran the checks on the CPU; NVML sees {seen}"
                                     f" GPU(s) ({labels(gpus)}), read for health only")]
    count = int(probe.get("gpu_count") or 0) if kind == "cuda" else 0
    if count == seen:
        return []
    hints = []
    visible = probe.get("cuda_visible_devices")
    if visible is not None:
        hints.append(f"CUDA_VISIBLE_DEVICES={visible!r} where the probe ran")
    hints += [f"MIG mode is on for {g.label}: CUDA sees its instances, not the GPU" for g in gpus if g.mig]
    hint = f" ({'; '.join(hints)})" if hints else ""
    if kind == "cpu":
        why = probe.get("cuda_unavailable") or "torch.cuda.is_available() is False"
        return [Finding(Status.FAIL, f"NVML sees {seen} GPUs but CUDA sees 0: CUDA cannot use {labels(gpus)}:"
                                     f" {why}{hint}", Remedy.FIX_SOFTWARE)]
    matched = match(gpus, probe)
    missing = [g for g in gpus if g not in matched.values()] if matched else []
    which = f": CUDA cannot use {labels(missing)}" if missing and len(missing) == seen - count else ""
    return [Finding(Status.FAIL, f"NVML sees {seen} GPUs but CUDA sees {count}{which}{hint}", Remedy.DRAIN_REBOOT)]


def not_on_the_gpus(check: CheckResult, gpus: Sequence[Gpu]) -> CheckResult:
    """A device-bound check (its declaration says its numbers are the device's) that ran on the CPU of
    a node whose NVML sees GPUs: FAIL, whatever its numbers."""
    if check.status is Status.INCONCLUSIVE:
        return check
    why = (f"ran on the CPU, not on the node's {len(gpus)} GPUs ({labels(gpus)}): CUDA cannot use them"
           " (see gpu_health)")
    return check.model_copy(update={"status": Status.FAIL, "sanity": Status.FAIL, "reasons": (why, *check.reasons),
                                    "sanity_reasons": (why, *check.sanity_reasons),
                                    "remediation": (Remediation(action=Remedy.FIX_SOFTWARE, check=check.name),)})


def gpu_metric(base: str, index: int) -> str:
    return f"{base}_gpu{index}"


def split_metric(metric: str) -> tuple[str, int | None]:
    """(``gemm_bf16_8192x8192x8192``, 3) of ``gemm_bf16_8192x8192x8192_gpu3``; (metric, None) otherwise."""
    found = _PER_GPU.match(metric)
    return (found["base"], int(found["index"])) if found else (metric, None)
