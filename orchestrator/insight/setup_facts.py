"""What a setup ran on and with, fact by fact, from its run's manifest: GPU model and count, driver,
CUDA, torch, container image, runner, host CPU, dataset storage, mltrain version.

Two setups are told apart by these (`insight.compare.differing_facts`), so that a comparison names
what differs between them, and calls a difference the hardware's only where the hardware is what
differs (`HARDWARE`). A value the run did not record is `UNKNOWN`, and an unknown value is neither
the same as another nor different from it (`sorted_facts`).

A run made elsewhere (`mltrain import`) carries only what its logs and its system description
(``systems/<system>.json``) state: never the software of the host that imported it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from orchestrator.insight.unavailable import is_unavailable
from orchestrator.mlperf.layout import accelerators, whole_number
from orchestrator.results.records import Manifest

if TYPE_CHECKING:
    from orchestrator.insight.compare import Setup

UNKNOWN = "?"
FACTS = ("GPU", "GPU count", "nodes", "world size", "driver", "CUDA", "torch", "framework", "image", "runner",
         "host CPU", "dataset storage", "mltrain")
"""The facts, in the order tables show them."""
HARDWARE = frozenset({"GPU", "GPU count", "nodes", "host CPU"})
"""The facts that are the hardware: a difference is the hardware's only when these are what differ."""
DIGEST_SHOWN = 12
"""Hex digits of an image digest shown (as `docker images` does)."""


def facts_of(manifest: Manifest) -> dict[str, str]:
    """A run's facts: its system capture and runner's, or an import's own (`imported_facts`)."""
    if manifest.made_elsewhere:
        return imported_facts(manifest.imported.system_description if manifest.imported is not None else None)
    system = manifest.system or {}
    provenance = manifest.runner_provenance or {}
    no_driver = is_unavailable(system.get("gpus"))  # a host without an NVIDIA driver: no GPU
    gpus = _known(system.get("gpus"))
    devices = [d for d in gpus.get("devices", []) if isinstance(d, dict)]
    names = sorted({str(d["name"]) for d in devices if isinstance(d.get("name"), str)})
    in_image = _known(provenance.get("versions"))
    host = _known(system.get("host"))
    seen = bool(gpus) or no_driver
    torch = _text(in_image.get("torch")) if in_image else _text(manifest.versions.get("torch"))
    facts = {
        "GPU": ", ".join(names) if names else ("none" if seen else UNKNOWN),
        "GPU count": str(len(devices)) if seen else UNKNOWN,
        "driver": "none" if no_driver else _driver(gpus),
        "CUDA": _text(in_image.get("cuda")) if in_image else _cuda_of_torch(manifest.versions.get("torch")),
        "torch": torch,
        "framework": UNKNOWN if torch == UNKNOWN else f"PyTorch {torch}",
        "image": _image(provenance, manifest.runner),
        **_nodes(provenance),
        "runner": manifest.runner or UNKNOWN,
        "host CPU": _cpu(host),
        "dataset storage": _storage(_known(system.get("storage"))),
        "mltrain": _text(manifest.versions.get("mltrain")),
    }
    return {name: facts[name] for name in FACTS}


def imported_facts(description: Mapping[str, Any] | None) -> dict[str, str]:
    """What an imported run's system description states (MLCommons' training fields: the accelerator,
    its count, the host CPU, the framework, the software stack, the storage); the rest `UNKNOWN`.
    Without a description only the runner is known."""
    said = description or {}
    model, count = accelerators(dict(said)) if said else (None, None)
    stack = said.get("other_software_stack")
    software = stack if isinstance(stack, dict) else {}
    processors = whole_number(said.get("host_processors_per_node"), 0) * whole_number(said.get("number_of_nodes"), 1)
    cpu = _text(said.get("host_processor_model_name"))
    known = {
        "GPU": model or UNKNOWN,
        "GPU count": str(count) if count else UNKNOWN,
        "driver": _text(software.get("nvidia_kernel_driver") or software.get("cuda_driver_version")),
        "CUDA": _text(software.get("cuda_version")),
        "framework": _text(said.get("framework")),
        "nodes": str(whole_number(said.get("number_of_nodes"), 0) or UNKNOWN),
        "runner": "imported (made elsewhere)",
        "host CPU": f"{processors}x {cpu}" if processors and cpu != UNKNOWN else cpu,
        "dataset storage": _text(said.get("host_storage_type")),
    }
    if isinstance(stack, str) and stack.strip():
        known["driver"] = known["driver"] if known["driver"] != UNKNOWN else _from_text(stack, "driver")
        known["CUDA"] = known["CUDA"] if known["CUDA"] != UNKNOWN else _from_text(stack, "cuda")
    return {name: known.get(name, UNKNOWN) for name in FACTS}


def _nodes(provenance: Mapping[str, Any]) -> dict[str, str]:
    """The nodes one seed ran on (a runner's seeds run on one unless it says more: ``--nodes N`` on
    Slurm) and its world size where the run fixes it (across nodes: the ranks of each node, one per
    GPU requested; on one node the workload decides, unknown here)."""
    nodes = whole_number(provenance.get("nodes"), 1) or 1
    if nodes == 1:
        return {"nodes": "1", "world size": UNKNOWN}
    return {"nodes": str(nodes), "world size": str(nodes * (whole_number(provenance.get("gpus_per_node"), 1) or 1))}


def _from_text(stack: str, word: str) -> str:
    """'NVIDIA driver 535.104, CUDA 12.2' -> the version after ``word`` in a free-text software stack."""
    found = re.search(rf"{word}\s*(?:version\s*)?:?\s*v?(\d+(?:\.\d+)+)", stack, re.IGNORECASE)
    return found.group(1) if found else UNKNOWN


def published_facts(accelerator: str | None, accelerators: int | None) -> dict[str, str]:
    """A published result's facts: its accelerators; the rest was not recorded here."""
    known = {"GPU": accelerator or UNKNOWN, "GPU count": str(accelerators) if accelerators else UNKNOWN,
             "runner": "published (MLCommons)"}
    return {name: known.get(name, UNKNOWN) for name in FACTS}


def recorded_facts(setups: Sequence[Setup]) -> tuple[list[str], list[str]]:
    """The facts (`FACTS`, in order) some setup recorded, and those of them whose values differ between
    the setups that know them (`sorted_facts`)."""
    names = [name for name in FACTS if any(name in s.facts for s in setups)]
    return names, sorted_facts(setups).differing


class SortedFacts(NamedTuple):
    """The facts of several setups in three kinds: known to every setup and different, known to
    every setup and the same, and unknown to some (neither the same nor different)."""

    differing: list[str]
    same: list[str]
    unknown: list[str]


def sorted_facts(setups: Sequence[Setup]) -> SortedFacts:
    """`FACTS` some setup recorded, sorted: a fact one setup does not know is `unknown` (an imported
    run's image is not this host's, nor the same as another import's), never the same nor different."""
    names = [name for name in FACTS if any(name in s.facts for s in setups)]
    unknown = [n for n in names if any(s.facts.get(n, UNKNOWN) == UNKNOWN for s in setups)]
    known = [n for n in names if n not in unknown]
    differing = [n for n in known if len({s.facts[n] for s in setups}) > 1]
    return SortedFacts(differing=differing, same=[n for n in known if n not in differing], unknown=unknown)


def unknown_to(setups: Sequence[Setup], name: str) -> list[str]:
    """The setups that do not know fact ``name``."""
    return [s.name for s in setups if s.facts.get(name, UNKNOWN) == UNKNOWN]


def differing_facts(base: Setup, setup: Setup) -> tuple[str, ...]:
    """The facts both setups know whose values differ, in the order the setup lists them."""
    return tuple(name for name, value in setup.facts.items()
                 if value != UNKNOWN and base.facts.get(name, UNKNOWN) not in (UNKNOWN, value))


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
