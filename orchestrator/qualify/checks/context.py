"""What a check runs with on a node: the plan (decided before anything runs), the runner, where its
jobs write, the node's health monitor, and the probe's run, which the probe checks of one attempt
share (one job runs them all, `micro.run_probe`). A quorum repeat gets a context of its own
(`NodeContext.again`): its own folder, only the checks it measures again, a probe run of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from orchestrator.config.profiles import Profiles
from orchestrator.config.workloads import Workload
from orchestrator.qualify import devices
from orchestrator.qualify.config import DeviceKind, QualifyConfig, Suite
from orchestrator.qualify.expected import Expected
from orchestrator.qualify.probe_lines import ProbeRun
from orchestrator.qualify.references import OperatorReferences
from orchestrator.results.qualification import CheckResult
from orchestrator.runners.base import Runner

if TYPE_CHECKING:
    from orchestrator.qualify.checks.declaration import Declaration
    from orchestrator.qualify.checks.registry import Registry
    from orchestrator.qualify.health import HealthMonitor


@dataclass(frozen=True, kw_only=True)
class NodePlan:
    """Everything decided before a check runs."""

    node: str
    checks: Registry
    """The checks there are (the suite picks among them): the command's, built once."""
    suite_name: str
    suite: Suite
    config: QualifyConfig
    workload: Workload
    data: Path | None = None
    """The dataset whose storage is timed and whose loader the throughput mode measures."""
    references: OperatorReferences | None = None
    strict: bool = False
    profiles: Profiles | None = None
    """seeds.yaml, for the full suite's time-to-train seed."""
    inference_roots: tuple[Path, ...] = ()
    """Where the inference harness's declaration is found, for a suite that times inference."""
    gpus: str | None = None
    """``--gpus`` as the runner got it: None for its default (the node's GPUs), ``none`` when the
    operator kept the checks off the GPUs (the verdict then says they were not qualified)."""
    expect_gpus: Expected = field(default_factory=Expected)
    """The GPUs the node is expected to have, and what says so (``--expect-gpus``, Slurm's gres);
    nothing: its history says, or nobody (`qualify.expected`)."""


@dataclass
class Watch:
    """How the caller follows a qualification: a status line per step, a callback per check."""

    status: Callable[[str], None] = lambda _: None
    checked: Callable[[CheckResult], None] = lambda _: None
    detail: Callable[[str], None] = lambda _: None
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(kw_only=True)
class NodeContext:
    """One attempt at a node's checks (the first run, or a quorum repeat)."""

    plan: NodePlan
    runner: Runner
    run_id: str
    folder: Path
    """Where this attempt's jobs write (the qualification's folder, or its ``repeat-<n>/``)."""
    scratch: Path
    """An empty folder standing in for the dataset where none was given."""
    results_dir: Path
    health: HealthMonitor
    watch: Watch
    names: tuple[str, ...]
    """The checks of this attempt."""
    prepare_error: str = ""
    """Why the runner could not prepare the workload ("" when it could): every job check is INCONCLUSIVE."""
    attempt: int = 0
    """0: the first run; n: the quorum's n-th repeat."""
    probe: ProbeRun | None = None
    """The probe's run of this attempt, once a probe check asked for it."""
    time_to_train_run: str | None = None
    """The stored run of the time-to-train seed, once it ran."""

    @property
    def repeat(self) -> bool:
        return self.attempt > 0

    @property
    def kind(self) -> DeviceKind:
        """The kind of device the checks ran on: the probe's, else a GPU node's CUDA, else the CPU."""
        found = self.probe.device_kind if self.probe is not None else None
        return found or ("cuda" if self.health.gpu_count else "cpu")

    @property
    def gpus(self) -> dict[int, devices.Gpu]:
        """CUDA index -> the NVML GPU it is (`devices.match`), once the probe said which GPUs it saw."""
        return devices.match(self.health.gpus, self.probe.device) if self.probe is not None else {}

    def settings(self, declaration: Declaration, kind: DeviceKind | None = None) -> BaseModel | None:
        """The suite's settings of a check on this node's kind of device (None: the suite does not run it
        there); a check whose settings are the suite's own (time-to-train) reads them from the suite."""
        if declaration.settings_at == "device":
            return self.plan.suite.device(kind or self.kind).settings(declaration.name)
        if declaration.settings_at == "suite":
            return self.plan.suite.suite_settings(declaration.name)
        return None

    def again(self, names: tuple[str, ...], attempt: int) -> NodeContext:
        """The context of the quorum's ``attempt``-th repeat of ``names``: its own folder and probe run."""
        return replace(self, folder=self.folder / f"repeat-{attempt}", names=names, attempt=attempt, probe=None)
