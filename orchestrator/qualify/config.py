"""The qualification suites (``qualify.yaml`` beside seeds.yaml): which workload's throughput is
timed, what each suite measures per device kind, and how history and the fleet are judged.

Typed and validated on load; an error names the file and the field. No reference number lives
here: performance is judged against the operator's ``--references`` file, the node's or the
fleet's history, or a known GPU model's floor (``floors.yaml``, with its sources).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orchestrator.config.files import read_yaml, validated
from orchestrator.config.locations import default_seeds_file
from orchestrator.config.profiles import ProfileName
from orchestrator.errors import UsageError

QUALIFY_FILE_ENV = "MLTRAIN_QUALIFY_FILE"
DeviceKind = Literal["cpu", "cuda"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class GemmSpec(_Frozen):
    dtypes: tuple[Literal["fp32", "tf32", "fp16", "bf16"], ...] = ("fp32",)
    """Each is timed where the device supports it natively, and reported not applicable elsewhere."""
    dense: tuple[tuple[int, int, int], ...] = ()
    """(M, N, K) of the DeepBench training GEMMs."""
    sparse: tuple[tuple[int, int, int, float], ...] = ()
    """(M, N, K, sparsity) of DeepBench's sparse GEMMs (fp32, CSR)."""


class ConvSpec(_Frozen):
    dtypes: tuple[Literal["fp32", "tf32", "fp16", "bf16"], ...] = ("fp32",)
    conv2d: tuple[tuple[int, int, int, int, int, int, int], ...] = ()
    """(N, C, H=W, K, kernel, stride, padding)."""
    conv3d: tuple[tuple[int, int, int, int, int, int, int], ...] = ()
    """(N, C, D=H=W, K, kernel, stride, padding): unet3d's layers."""


class MemorySpec(_Frozen):
    host_mb: int = Field(default=256, ge=1)
    device_mb: int = Field(default=1024, ge=1)
    copy_mb: int = Field(default=256, ge=1)
    """Pinned host<->device copies."""


class StorageSpec(_Frozen):
    max_mb: int = Field(default=512, ge=1)
    """Read at most this much of the dataset (--data)."""


class NcclSpec(_Frozen):
    mb: int = Field(default=256, ge=1)


class ThroughputSpec(_Frozen):
    steps: int = Field(default=20, ge=1)
    warmup_steps: int = Field(default=5, ge=0)
    env: dict[str, str] = Field(default_factory=dict)
    """The workload's model knobs (INPUT_SHAPE, FILTERS, BATCH_SIZE ...) for this device kind."""
    timeout_minutes: float = Field(default=10, gt=0)


class InferenceSpec(_Frozen):
    """The inference check (`orchestrator.qualify.inference`): the harness's smoke model under LoadGen."""

    model: str = Field(min_length=1)
    """A model the inference harness declares (its inference.yaml) with a smoke model."""
    scenario: Literal["SingleStream", "Offline"] = "SingleStream"
    backend: Literal["onnxruntime", "torch"] = "onnxruntime"
    device: Literal["cpu", "cuda", "tensorrt"] = "cpu"
    seconds: float = Field(default=5, gt=0)
    """LoadGen's minimum duration: long enough for a few hundred queries, far below MLPerf's 10 minutes."""
    timeout_minutes: float = Field(default=10, gt=0)


PROBE_CHECKS = ("gemm", "conv", "memory", "storage", "nccl")
"""The probe's checks (each a module of workloads/common/probe/), in their default order; each has
its settings' type below and a field of `DeviceSuite`."""


class ProbeSettings(_Frozen):
    """How the probe runs where the workload runs (``qualify.yaml`` ``probe:``)."""

    command: tuple[str, ...] = ("python", "-m", "workloads.common.probe")
    """Its argv there (a leading ``python``: the interpreter there; locally mltrain's own); the seed is
    appended and its settings travel as JSON in ``MLTRAIN_PROBE_CONFIG``. Tests name a stand-in here."""
    seed: int = Field(default=0, ge=0)
    """The seed of the probe's random inputs: the same every run, so that runs compare."""
    checks: tuple[str, ...] = PROBE_CHECKS
    """The checks the probe runs, in this order (a check the suite gives no settings is not run)."""

    @model_validator(mode="after")
    def _known(self) -> ProbeSettings:
        if not self.command or not self.command[0]:
            raise ValueError("command is empty")
        for name in self.checks:
            if name not in PROBE_CHECKS:
                raise ValueError(f"unknown check {name!r} (the probe's checks: {', '.join(PROBE_CHECKS)})")
        if len(set(self.checks)) != len(self.checks):
            raise ValueError("a check is named twice")
        return self


class DeviceSuite(_Frozen):
    """What a suite measures on one kind of device; a missing part is not run."""

    gemm: GemmSpec | None = None
    conv: ConvSpec | None = None
    memory: MemorySpec | None = None
    storage: StorageSpec | None = None
    nccl: NcclSpec | None = None
    throughput: ThroughputSpec | None = None
    inference: InferenceSpec | None = None


class TimeToTrainSpec(_Frozen):
    profile: ProfileName = "smoke"
    """The seeds.yaml profile of the workload that the seed runs under (target, env, data)."""
    seed: int = Field(default=1, ge=0)


class Suite(_Frozen):
    probe_seconds_per_case: float = Field(default=0.5, gt=0)
    """Each microbenchmark case is repeated for about this long (at least 3 calls)."""
    probe_timeout_minutes: float = Field(default=10, gt=0)
    dcgm_level: int = Field(default=1, ge=1, le=4)
    """`dcgmi diag -r N` where DCGM is installed."""
    cpu: DeviceSuite = DeviceSuite()
    cuda: DeviceSuite = DeviceSuite()
    time_to_train: TimeToTrainSpec | None = None

    def device(self, kind: DeviceKind) -> DeviceSuite:
        return self.cuda if kind == "cuda" else self.cpu


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
    timeout_minutes: float = Field(default=60, gt=0)
    """Slurm's limit for one node's qualification job."""


class HealthPolicy(_Frozen):
    temperature_margin_c: float = Field(default=5.0, ge=0)
    """WARN when a GPU came within this many degrees of its slowdown temperature under load."""
    sample_interval_s: float = Field(default=0.5, gt=0)
    """NVML sampling period while the load runs (throttle reasons, clocks, PCIe link, temperature)."""


class QualifyConfig(_Frozen):
    workload: str | None = None
    """The workload whose throughput mode is timed (and whose image the docker runner uses)."""
    warn_exit_code: Literal[0, 1, 4] = 4
    """Exit code of a WARN verdict: 4, its own (default); 0 where whatever reads it drains a node on
    any other code; 1 as always under --strict (WARN counts as FAIL)."""
    history: HistoryPolicy = HistoryPolicy()
    quorum: QuorumPolicy = QuorumPolicy()
    drift: DriftPolicy = DriftPolicy()
    fleet: FleetPolicy = FleetPolicy()
    health: HealthPolicy = HealthPolicy()
    probe: ProbeSettings = ProbeSettings()
    suites: dict[str, Suite]

    @model_validator(mode="before")
    @classmethod
    def _drop_anchors(cls, data: object) -> object:
        """Top-level ``x-`` keys hold YAML anchors the suites share (as in compose files)."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not str(k).startswith("x-")}
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


def load_config(path: Path | None = None) -> QualifyConfig:
    path = path or qualify_file()
    raw = read_yaml(path, missing=f"qualification suites file not found (set {QUALIFY_FILE_ENV})")
    return validated(QualifyConfig, raw, label=str(path))
