"""mltrain's qualification checks: the one place they are registered, above the checks (each check's
module holds the check, its declaration and its settings' type, and imports nothing here).

A new check is one file and one line:
    a probe check (it needs torch where the workload runs): its module in workloads/common/probe/ and
        its name in that package's ``registry.CHECKS`` (read as data, `checks.probe_declared`);
    an orchestrator check (NVML, a job of its own): its module in ``orchestrator/qualify/checks/`` and
        its line in `ORCHESTRATOR_CHECKS` below.

The registry is built once per command (`default_registry`) and passed to what needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.qualify.checks import probe_declared
from orchestrator.qualify.checks.dcgm_diag import DcgmCheck
from orchestrator.qualify.checks.declaration import Declaration
from orchestrator.qualify.checks.gpu_health import GpuHealthCheck
from orchestrator.qualify.checks.inference import InferenceCheck
from orchestrator.qualify.checks.pairs import PairCheck
from orchestrator.qualify.checks.probe import ProbeCheck
from orchestrator.qualify.checks.registry import Registry
from orchestrator.qualify.checks.throughput import ThroughputCheck
from orchestrator.qualify.checks.time_to_train import TimeToTrainCheck

PROBE = "probe"
"""Where the probe's checks stand among the orchestrator's, in the order below."""

ORCHESTRATOR_CHECKS: tuple[Callable[[], Any] | str, ...] = (
    GpuHealthCheck,
    DcgmCheck,
    PROBE,
    ThroughputCheck,
    InferenceCheck,
    TimeToTrainCheck,
)
"""The orchestrator's checks, in the order a node's record lists them: one line each."""


def probe_check(declaration: Declaration) -> Any:
    """The check of a probe module's declaration: run between two nodes (``runs: fleet``), else by the probe."""
    return PairCheck(declaration) if declaration.runs == "fleet" else ProbeCheck(declaration)


def default_registry(root: Path | None = None) -> Registry:
    """mltrain's checks: health, DCGM, the probe's (from its own registration), the workload's
    throughput, inference, time-to-train. ``root``: where the probe's package is (its checkout)."""
    checks: list[Any] = []
    for entry in ORCHESTRATOR_CHECKS:
        if entry == PROBE:
            checks += [probe_check(d) for d in probe_declared.probe_declarations(root)]
        else:
            checks.append(entry())  # type: ignore[operator]
    return Registry(tuple(checks))


def with_probe_module(registry: Registry, module: str, *, root: Path | None = None, after: str | None = None
                      ) -> Registry:
    """``registry`` and the probe check declared in ``module`` (a dotted name: a check registered
    outside the probe's package, a test's), after the check named ``after`` (default: the last probe check)."""
    return registry.with_check(probe_check(probe_declared.declaration(module, root)), after=after)
