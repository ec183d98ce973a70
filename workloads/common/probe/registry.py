"""The probe's checks: the registration (`CHECKS`) and each check's declaration.

A check is one module of this package with a ``DECLARATION`` (a literal: the orchestrator reads it
as data from this file, never importing it) and ``cases(spec, context)``, which plans its cases
(`harness.Case`), each measuring its sanity apart from its performance (`protocol.Outcome`):

    DECLARATION = {
        "name": "gemm",                      # the check, as qualify.yaml and the records name it
        "kind": "microbenchmark",            # or "integrity" (right answers only), "fabric", as records say
        "runs": "probe",                     # or "fleet": between two nodes at once (their fleet starts it)
        "needs": {"device": "any", "gpus": 0, "data": False},   # cuda only, at least N GPUs, --data
        "sanity": "what a right result is, in words",
        "units": {"gemm_*": "TFLOP/s"},      # each metric (a glob) and the unit of its references
        "sane": {"gemm_*": [0, 1e5]},        # each metric (a glob): (above, at most) what it can be at all
        "floor": {"gemm_fp32_*": [0.01, "why"]},  # optional: its own floor on any hardware, with its source
        "timeout_s": 900,                    # how long it may run before it is stopped (INCONCLUSIVE)
        "repeat": True,                      # the quorum may measure a number that failed again
        "device_bound": True,                # its numbers are the device's (run on a CPU of a GPU node: FAIL)
        "remedy": {"wrong": "replace", "slow": "investigate"},  # what a FAIL asks for (records' `remediation`)
        "settings": {"dense": {"type": "rows", "row": ["int", "int", "int"], "default": [], "doc": "..."}},
    }

Settings types: ``int`` and ``float`` (with ``min``, at least; ``max``, at most; ``below``), ``choices``
(a list of ``of``), ``rows`` (a list of rows of ``row``'s scalars: a type, or ``{"type": "int", "min":
1}`` with its bounds). Every setting has a default, and every number its bounds: qualify.yaml is
refused (exit 2) where a size is zero or negative, not the node FAILed.

A new check: its module here, and its name in `CHECKS` (one line). The orchestrator derives the rest:
the check's settings in qualify.yaml (typed from ``settings``), its place in the suites, its judging.
Standard library only: the registry is read before torch is imported.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:  # the registry imports without torch, so that settings are checked before torch is
    from workloads.common.probe.harness import Case, Context

CHECKS = (
    "gemm",
    "conv",
    "memory",
    "storage",
    "nccl",
    "bandwidth",
    "sdc",
    "nccl_pairs",
)
"""The registered checks, in their default order: modules of this package."""


class Check(Protocol):
    DECLARATION: dict[str, Any]

    def cases(self, spec: dict[str, Any], context: Context) -> Iterator[Case]: ...


def unknown(names: tuple[str, ...], modules: Mapping[str, str] | None = None) -> list[str]:
    """The names among ``names`` that are no check of the probe (nor of ``modules``: name -> module)."""
    return [name for name in names if name not in CHECKS and name not in (modules or {})]


def check(name: str, modules: Mapping[str, str] | None = None) -> Check:
    """The module of check ``name``: one of `CHECKS`, or a module named in ``modules`` (a check the
    orchestrator registered outside this package)."""
    if name in CHECKS:
        return cast(Check, importlib.import_module(f"{__package__}.{name}"))
    if name in (modules or {}):
        return cast(Check, importlib.import_module(modules[name]))  # type: ignore[index]
    raise KeyError(f"unknown check {name!r}")


def with_defaults(declaration: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    """A check's settings with every one its declaration has and ``spec`` lacks set to its default;
    ValueError naming a setting the check does not have."""
    declared = declaration.get("settings", {})
    extra = sorted(set(spec) - set(declared))
    if extra:
        raise ValueError(f"{declaration['name']}: unknown setting {extra[0]!r} (its settings:"
                         f" {', '.join(declared) or 'none'})")
    return {key: copy.deepcopy(spec[key]) if key in spec else copy.deepcopy(field["default"])
            for key, field in declared.items()}


def unmet(declaration: Mapping[str, Any], *, cuda: bool, gpus: int, data: bool) -> str:
    """Why this device cannot run the check ("" when it can): what its declaration needs."""
    needs = declaration.get("needs", {})
    if needs.get("device") == "cuda" and not cuda:
        return f"{declaration['name']} needs a CUDA device; this is a CPU"
    wanted = int(needs.get("gpus", 0))
    if wanted > 1 and gpus < wanted:
        return f"{declaration['name']} needs {wanted} or more GPUs; CUDA sees {gpus} here"
    if needs.get("data") and not data:
        return f"{declaration['name']} needs the dataset's folder: give it with --data"
    return ""
