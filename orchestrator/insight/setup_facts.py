"""What a setup ran on and with, fact by fact, from its run's manifest: GPU model and count, driver,
CUDA, torch, container image, runner, host CPU, dataset storage, mltrain version.

Two setups are told apart by these (`insight.compare.differing_facts`), so that a comparison names
what differs between them, and calls a difference the hardware's only where the hardware is what
differs (`HARDWARE`). A value the run did not record is `UNKNOWN`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.insight.unavailable import is_unavailable
from orchestrator.results.records import Manifest

if TYPE_CHECKING:
    from orchestrator.insight.compare import Setup

UNKNOWN = "?"
FACTS = ("GPU", "GPU count", "driver", "CUDA", "torch", "image", "runner", "host CPU", "dataset storage",
         "mltrain")
"""The facts, in the order tables show them."""
HARDWARE = frozenset({"GPU", "GPU count", "host CPU"})
"""The facts that are the hardware: a difference is the hardware's only when these are what differ."""
DIGEST_SHOWN = 12
"""Hex digits of an image digest shown (as `docker images` does)."""


def facts_of(manifest: Manifest, accelerator: str | None = None, accelerators: int | None = None) -> dict[str, str]:
    """A run's facts (``accelerator`` and ``accelerators``: its GPU model and count, where the caller
    read them already: an import's system description)."""
    system = manifest.system or {}
    provenance = manifest.runner_provenance or {}
    no_driver = is_unavailable(system.get("gpus"))  # a host without an NVIDIA driver: no GPU
    gpus = _known(system.get("gpus"))
    devices = [d for d in gpus.get("devices", []) if isinstance(d, dict)]
    names = sorted({str(d["name"]) for d in devices if isinstance(d.get("name"), str)})
    in_image = _known(provenance.get("versions"))
    host = _known(system.get("host"))
    seen = bool(gpus) or no_driver
    facts = {
        "GPU": accelerator or (", ".join(names) if names else ("none" if seen else UNKNOWN)),
        "GPU count": str(accelerators) if accelerators is not None else (str(len(devices)) if seen else UNKNOWN),
        "driver": "none" if no_driver else _driver(gpus),
        "CUDA": _text(in_image.get("cuda")) if in_image else _cuda_of_torch(manifest.versions.get("torch")),
        "torch": _text(in_image.get("torch")) if in_image else _text(manifest.versions.get("torch")),
        "image": _image(provenance, manifest.runner),
        "runner": manifest.runner or UNKNOWN,
        "host CPU": _cpu(host),
        "dataset storage": _storage(_known(system.get("storage"))),
        "mltrain": _text(manifest.versions.get("mltrain")),
    }
    return {name: facts[name] for name in FACTS}


def published_facts(accelerator: str | None, accelerators: int | None) -> dict[str, str]:
    """A published result's facts: its accelerators; the rest was not recorded here."""
    known = {"GPU": accelerator or UNKNOWN, "GPU count": str(accelerators) if accelerators else UNKNOWN,
             "runner": "published (MLCommons)"}
    return {name: known.get(name, UNKNOWN) for name in FACTS}


def recorded_facts(setups: Sequence[Setup]) -> tuple[list[str], list[str]]:
    """The facts (`FACTS`, in order) some setup recorded, and those of them whose values differ between
    the setups (a fact a setup did not record counts as `UNKNOWN` there)."""
    names = [name for name in FACTS if any(name in s.facts for s in setups)]
    differing = [name for name in names if len({s.facts.get(name, UNKNOWN) for s in setups}) > 1]
    return names, differing


def fact_kind(names: tuple[str, ...]) -> str:
    """'hardware', 'runner, image', 'hardware, driver': what a set of differing facts amounts to
    (the hardware facts said as one word); '' when nothing differs."""
    hardware = [n for n in names if n in HARDWARE]
    rest = [n for n in names if n not in HARDWARE]
    return ", ".join((["hardware"] if hardware else []) + rest)


def _known(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) and not is_unavailable(value) else {}


def _text(value: Any) -> str:
    return UNKNOWN if value is None or value == "" or is_unavailable(value) else str(value)


def _driver(gpus: Mapping[str, Any]) -> str:
    version = gpus.get("driver_version")
    if not gpus:
        return UNKNOWN
    if not isinstance(version, str):
        return "none" if not gpus.get("devices") else UNKNOWN
    cuda = gpus.get("cuda_driver_version")
    return version + (f" (CUDA {cuda})" if isinstance(cuda, str) else "")


def _cuda_of_torch(version: Any) -> str:
    """The CUDA a torch build names in its local version ('2.4.0+cu124' -> '12.4'; '+cpu' -> 'none')."""
    if not isinstance(version, str) or "+" not in version:
        return UNKNOWN
    local = version.partition("+")[2]
    if local == "cpu":
        return "none (CPU build)"
    if local.startswith("cu") and local[2:].isdigit() and len(local) >= 4:
        return f"{local[2:-1]}.{local[-1]}"
    return UNKNOWN


def _image(provenance: Mapping[str, Any], runner: str) -> str:
    image = _known(provenance.get("image"))
    if not image:
        return f"none ({runner})" if runner in ("local", "slurm") else UNKNOWN
    reference = image.get("digest") or image.get("id")
    if not isinstance(reference, str):
        return str(image.get("tag") or UNKNOWN)
    name, _, digest = reference.rpartition("@") if "@" in reference else ("", "", reference)
    algorithm, _, hexdigits = digest.partition(":")
    short = f"{algorithm}:{hexdigits[:DIGEST_SHOWN]}" if hexdigits else digest
    return f"{name}@{short}" if name else short


def _cpu(host: Mapping[str, Any]) -> str:
    model = host.get("cpu_model")
    if not isinstance(model, str):
        return UNKNOWN
    usable = host.get("usable_cpus")
    return f"{model} ({usable} CPUs)" if isinstance(usable, int) else model


def _storage(storage: Mapping[str, Any]) -> str:
    kind, filesystem = storage.get("kind"), storage.get("filesystem")
    if not isinstance(filesystem, str):
        return UNKNOWN
    return f"{kind} ({filesystem})" if isinstance(kind, str) else filesystem
