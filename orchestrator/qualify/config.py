"""The qualification suites (``qualify.yaml`` beside seeds.yaml): which workload's throughput is
timed, what each suite measures per device kind, and how history and the fleet are judged.

Typed and validated on load; an error names the file and the field. No reference number lives
here: performance is judged against the operator's ``--references`` file, the node's or the
fleet's history, or a known GPU model's floor (``floors.yaml``, with its sources).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    SerializeAsAny,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from orchestrator.config.files import first_problem, read_yaml, validated
from orchestrator.config.locations import default_seeds_file
from orchestrator.config.numbers import TimeoutMinutes
from orchestrator.errors import UsageError
from orchestrator.qualify.checks.declaration import CheckSettings

if TYPE_CHECKING:
    from orchestrator.qualify.checks.registry import Registry

QUALIFY_FILE_ENV = "MLTRAIN_QUALIFY_FILE"
DeviceKind = Literal["cpu", "cuda"]


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", allow_inf_nan=False)


def _registry(info: ValidationInfo) -> Registry:
    """The checks a configuration is validated against: its loader's (`load_config`), passed in the
    validation's context (this module names no check)."""
    given = (info.context or {}).get("checks")
    if given is None:
        raise TypeError("qualify.yaml is validated against a registry of checks: load it with load_config")
    return given  # type: ignore[no-any-return]


class ProbeSettings(_Frozen):
    """How the probe runs where the workload runs (``qualify.yaml`` ``probe:``)."""

    command: tuple[str, ...] = ("python", "-m", "workloads.common.probe")
    """Its argv there (a leading ``python``: the interpreter there; locally mltrain's own); the seed is
    appended and its settings travel as JSON in ``MLTRAIN_PROBE_CONFIG``. Tests name a stand-in here."""
    seed: int = Field(default=0, ge=0)
    """The seed of the probe's random inputs: the same every run, so that runs compare."""
    checks: tuple[str, ...] = ()
    """The checks the probe runs, in this order (a check the suite gives no settings is not run);
    left out: every probe check, in the order the probe registers them."""

    @model_validator(mode="before")
    @classmethod
    def _known(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict):
            return data
        probe = _registry(info).probe
        checks = data.get("checks")
        if checks is None:
            return {**data, "checks": probe}
        for name in checks if isinstance(checks, list | tuple) else ():
            if name not in probe:
                raise ValueError(f"unknown check {name!r} (the probe's checks: {', '.join(probe)})")
        if isinstance(checks, list | tuple) and len(set(checks)) != len(checks):
            raise ValueError("a check is named twice")
        return data

    @model_validator(mode="after")
    def _runnable(self) -> ProbeSettings:
        if not self.command or not self.command[0]:
            raise ValueError("command is empty")
        return self


class DeviceSuite(RootModel[dict[str, SerializeAsAny[CheckSettings]]]):
    """What a suite measures on one kind of device: each check's settings, by the check's name (as its
    declaration types them: `orchestrator.qualify.checks`); a check without settings here is not run
    on this kind of device."""

    model_config = ConfigDict(defer_build=True, frozen=True)
    root: dict[str, SerializeAsAny[CheckSettings]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _typed(cls, data: Any, info: ValidationInfo) -> Any:
        if data is None:
            return {}
        if not isinstance(data, dict):
            return data
        registry = _registry(info)
        typed: dict[str, CheckSettings] = {}
        for name, given in data.items():
            settings = registry.settings_type(str(name), "device")
            if settings is None:
                raise ValueError(f"unknown check {name!r} (the checks a suite sets per kind of device:"
                                 f" {', '.join(registry.device_settings())})")
            if given is None:  # `gemm:` with nothing: not run, as if left out
                continue
            if isinstance(given, settings):
                typed[str(name)] = given
                continue
            try:
                typed[str(name)] = settings.model_validate(given, context=info.context)
            except ValidationError as exc:
                raise ValueError(f"{name}: {first_problem(exc)}") from None
        return typed

    def settings(self, name: str) -> CheckSettings | None:
        """Check ``name``'s settings (None: the suite does not run it on this kind of device)."""
        return self.root.get(name)


_SUITE_OWN = frozenset({"workload", "probe_seconds_per_case", "probe_timeout_minutes", "dcgm_level", "cpu", "cuda"})
"""The suite's own fields; the others are settings of the checks set on the suite itself."""


class Suite(_Frozen):
    workload: str | None = None
    """The workload whose throughput mode this suite times (and whose image the docker runner uses);
    None: the file's ``workload:``."""
    probe_seconds_per_case: float = Field(default=0.5, gt=0)
    """Each microbenchmark case is repeated for about this long (at least 3 calls)."""
    probe_timeout_minutes: TimeoutMinutes | None = None
    """Each probe check's timeout where its own settings give none (None: the check's declared one)."""
    dcgm_level: int = Field(default=1, ge=1, le=4)
    """`dcgmi diag -r N` where DCGM is installed."""
    cpu: DeviceSuite = Field(default_factory=DeviceSuite)
    cuda: DeviceSuite = Field(default_factory=DeviceSuite)
    time_to_train: SerializeAsAny[BaseModel] | None = None
    """The time-to-train seed's settings (the check's own type, `checks.time_to_train`): a check whose
    settings are the suite's own (`Declaration.settings_at` ``suite``) is set here by its name."""

    @field_validator("*", mode="before")
    @classmethod
    def _suite_check(cls, given: Any, info: ValidationInfo) -> Any:
        """The settings of a check set on the suite itself (a field not the suite's own), typed by its
        declaration."""
        if info.field_name in _SUITE_OWN or given is None:
            return given
        settings = _registry(info).settings_type(str(info.field_name), "suite")
        if settings is None:
            raise ValueError("no check of this name is set on a suite")
        if isinstance(given, settings):
            return given
        try:
            return settings.model_validate(given, context=info.context)
        except ValidationError as exc:
            raise ValueError(first_problem(exc)) from None

    def device(self, kind: DeviceKind) -> DeviceSuite:
        return self.cuda if kind == "cuda" else self.cpu

    def wants(self, name: str) -> bool:
        """Either kind of device runs check ``name`` (it has settings there), or the suite itself sets it."""
        return (self.cpu.settings(name) is not None or self.cuda.settings(name) is not None
                or self.suite_settings(name) is not None)

    def suite_settings(self, name: str) -> BaseModel | None:
        """The settings of check ``name`` where the suite sets it on itself (time-to-train's); None: it
        does not."""
        found = None if name in _SUITE_OWN else getattr(self, name, None)
        return found if isinstance(found, BaseModel) else None


class HistoryPolicy(_Frozen):
    """How references are learned from a node's own passing runs."""

    runs: int = Field(default=10, ge=1)
    """The last K passing runs on the same hardware and software."""
    min_runs: int = Field(default=3, ge=1)
    """Fewer than this: no learned reference (the metric is not judged by history)."""
    k_mad: float = Field(default=4.0, gt=0)
    """Bounds: median +- k x MAD (MAD scaled by 1.4826 to a normal's standard deviation)."""
    floor_pct: float = Field(default=10.0, ge=0)
    """The bounds are at least this far from the median (a history of identical numbers has MAD 0)."""
    regression_pct: float = Field(default=5.0, ge=0)
    """WARN when worse than the rolling median by more than this, even inside the bounds (set it below
    floor_pct, or a regression FAILs before it can WARN)."""

    @model_validator(mode="after")
    def _min_fits(self) -> HistoryPolicy:
        if self.min_runs > self.runs:
            raise ValueError("min_runs exceeds runs")
        return self


class QuorumPolicy(_Frozen):
    """A performance number (microbenchmark, workload throughput) that fails its reference is measured
    again before it FAILs the node: a noisy minute does not drain a healthy node. Health and sanity
    failures (a lost GPU, a wrong result) are never repeated away; time-to-train is not repeated."""

    repeats: int = Field(default=2, ge=0, le=10)
    """Re-measurements at most (0: the first reading decides)."""
    rule: Literal["majority", "all"] = "majority"
    """FAIL when more than half (majority) or every one (all) of the repeats fail too; it stops as soon
    as that is decided. Otherwise the number is judged on the median of the repeats that passed; where
    too few repeats could measure it at all, it is INCONCLUSIVE."""

    @property
    def needed(self) -> int:
        return self.repeats if self.rule == "all" else self.repeats // 2 + 1


class DriftPolicy(_Frozen):
    """A slow fall of a performance number over nights, caught by a one-sided tabular CUSUM on the
    node's own series (Page 1954, "Continuous inspection schemes", Biometrika 41:100-115; Montgomery,
    Introduction to Statistical Quality Control, ch. 9): each night's shortfall from the baseline, in
    units of the series' night-to-night noise sigma, less the allowance k, summed and floored at 0;
    above h it WARNs, inside the bounds, before the floor is crossed (`qualify.drift`)."""

    baseline_runs: int = Field(default=10, ge=2)
    """The baseline: the median of the first this many passing runs on this hardware and software."""
    window: int = Field(default=30, ge=2)
    """The CUSUM sums the last this many nights after the baseline."""
    allowance_sigma: float = Field(default=0.5, ge=0)
    """k: Montgomery's half of the shift worth catching (one sigma)."""
    threshold_sigma: float = Field(default=7.5, gt=0)
    """h: above Montgomery's 4-5 because the baseline is itself estimated from a few nights (Jones,
    Champ and Rigdon 2004: estimated parameters shorten the in-control run length)."""
    noise_floor_pct: float = Field(default=1.0, gt=0)
    """Sigma is at least this percent of the baseline: numbers that repeat to the digit would make any
    wobble a drift."""


class FleetPolicy(_Frozen):
    k_mad: float = Field(default=3.0, gt=0)
    """A node slower than the fleet median of its hardware by more than k MADs is flagged."""
    floor_pct: float = Field(default=3.0, ge=0)
    """... and by more than this percentage (peers with identical numbers have MAD 0)."""
    timeout_minutes: TimeoutMinutes = 60
    """Slurm's limit for one node's qualification job."""


class HealthPolicy(_Frozen):
    temperature_margin_c: float = Field(default=5.0, ge=0)
    """WARN when a GPU came within this many degrees of its slowdown temperature under load."""
    sample_interval_s: float = Field(default=0.5, gt=0)
    """NVML sampling period while the load runs (throttle reasons, clocks, PCIe link, temperature)."""


class QualifyConfig(_Frozen):
    workload: str | None = None
    """The workload whose throughput mode is timed (and whose image the docker runner uses), where a
    suite names none of its own."""
    warn_exit_code: Literal[0, 1, 4] = 4
    """Exit code of a WARN verdict: 4, its own (default); 0 where whatever reads it drains a node on
    any other code; 1 as always under --strict (WARN counts as FAIL)."""
    history: HistoryPolicy = HistoryPolicy()
    quorum: QuorumPolicy = QuorumPolicy()
    drift: DriftPolicy = DriftPolicy()
    fleet: FleetPolicy = FleetPolicy()
    health: HealthPolicy = HealthPolicy()
    probe: ProbeSettings = Field(default_factory=ProbeSettings)
    suites: dict[str, Suite]

    @model_validator(mode="before")
    @classmethod
    def _drop_anchors(cls, data: object) -> object:
        """Top-level ``x-`` keys hold YAML anchors the suites share (as in compose files). ``probe:`` is
        validated even when left out: its default order is the loader's checks'."""
        if isinstance(data, dict):
            return {"probe": {}, **{k: v for k, v in data.items() if not str(k).startswith("x-")}}
        return data

    def suite(self, name: str) -> Suite:
        if name not in self.suites:
            raise UsageError(f"unknown suite {name!r}: choose one of {', '.join(sorted(self.suites))}")
        return self.suites[name]


def qualify_file() -> Path:
    """``$MLTRAIN_QUALIFY_FILE``, else ``qualify.yaml`` beside the profiles file in use."""
    given = os.environ.get(QUALIFY_FILE_ENV)
    if given:
        return Path(given)
    seeds = os.environ.get("MLTRAIN_SEEDS_FILE")
    return (Path(seeds) if seeds else default_seeds_file()).with_name("qualify.yaml")


@dataclass(frozen=True)
class ChosenSuite:
    """``--suite`` resolved once per command (`choose_suite`): its name, its settings, the file's
    policies, and the checks that typed them, passed on as one value."""

    name: str
    suite: Suite
    config: QualifyConfig
    checks: Registry

    @property
    def workload(self) -> str:
        """The workload whose throughput mode it times: the suite's, else the file's."""
        name = self.suite.workload or self.config.workload
        if name is None:
            raise UsageError("qualify.yaml names no workload: set `workload:` (whose throughput mode is timed)")
        return name


def choose_suite(name: str, checks: Registry, path: Path | None = None) -> ChosenSuite:
    """Suite ``name`` of qualify.yaml (`load_config`): an unknown one is bad input, named now."""
    config = load_config(path, checks)
    return ChosenSuite(name=name, suite=config.suite(name), config=config, checks=checks)


def load_config(path: Path | None, checks: Registry) -> QualifyConfig:
    """qualify.yaml (``path``, else `qualify_file`), its checks' settings typed by ``checks`` (mltrain's:
    `orchestrator.qualify.catalog.default_registry`, built once by the caller)."""
    path = path or qualify_file()
    raw = read_yaml(path, missing=f"qualification suites file not found (set {QUALIFY_FILE_ENV})")
    return validated(QualifyConfig, raw, label=str(path), context={"checks": checks})
