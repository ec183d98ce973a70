"""Reference floors of known GPU models, shipped as package data (``floors.yaml``): a fraction of a
datasheet's dense GEMM peak and memory bandwidth, and of the published MLPerf per-GPU rate of a
workload (`orchestrator.mlperf.published`), each with its source. They judge a new node on its
first run, before a history exists; `references.References` lets the operator's file replace them
and the node's or the fleet's history tighten them.

    floors = load_floors()
    refs = floors.references(checks, gpu_models, workload="unet3d")   # metric -> Reference (kind floor)

Matched to the GPU's NVML name exactly (``NVIDIA H100 80GB HBM3``), per GPU: the per-GPU cases
(``<metric>_gpu<i>``) by GPU i's model, the others by the model of the GPU they ran on.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, model_validator

from orchestrator.config.files import read_yaml, validated
from orchestrator.mlperf import benchmarks, published
from orchestrator.qualify.devices import split_metric
from orchestrator.results.qualification import CheckResult, Reference
from orchestrator.text import number
from orchestrator.units import ms_from_minutes

FILE = "floors.yaml"
_GEMM = re.compile(r"^gemm_(?P<dtype>fp32|tf32|fp16|bf16)_(?P<m>\d+)x(?P<n>\d+)x(?P<k>\d+)$")
DEVICE_COPY = "device_copy_GBps"
ALLREDUCE = "allreduce_busbw_GBps"


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class Fraction(_Frozen):
    fraction: float = Field(gt=0, le=1)
    """The floor, as a fraction of the published number."""
    why: str = Field(min_length=10)
    """Why this fraction: a floor without a reason is refused."""


class GemmPolicy(Fraction):
    min_dim: int = Field(ge=1)
    """Only dense GEMMs whose M, N and K all reach this are judged against the peak."""
    multiple_of: int = Field(ge=1)
    """... and are all multiples of this: a shape off the kernels' tiles (5124x9124x2560, whose 16-bit
    rows are not 16-byte aligned) runs far below the peak on a healthy GPU."""


class WorkloadFloor(Fraction):
    """A workload's throughput against the published MLPerf per-GPU rate of the GPU model."""

    workload: str = Field(min_length=1)
    metric: str = Field(min_length=1)
    benchmark: str = Field(min_length=1)
    """The published results' benchmark (`orchestrator.mlperf.published`)."""
    when_env: dict[str, str] = Field(default_factory=dict)
    """Only when the throughput step ran with these settings (the published runs' shape)."""


class ModelFloor(_Frozen):
    name: str = Field(min_length=1)
    nvml_names: tuple[str, ...] = Field(min_length=1)
    """The model's names as NVML gives them (nvidia-smi's)."""
    source: str = Field(min_length=20)
    """The document the numbers come from, and what it says."""
    gemm_tflops: dict[Literal["fp32", "tf32", "fp16", "bf16"], PositiveFloat]
    """Dense peak per dtype (half the datasheet's figure where it is given with sparsity)."""
    memory_gbps: PositiveFloat
    gemm_fraction: Fraction | None = None
    """This model's own GEMM fraction (a power-capped card), instead of the file's."""
    mlperf_accelerators: tuple[str, ...] = ()
    """Its names in the published MLPerf results (``accelerator`` column)."""
    allreduce: tuple[AllReduceFloor, ...] = ()
    """Published all-reduce thresholds of nodes of this model (the nccl check's busbw)."""


class PcieFloor(Fraction):
    """Host-device copies (the bandwidth check) against the raw rate of the GPU's PCIe link."""

    lane_gbps: dict[int, PositiveFloat]
    """GB/s per lane and direction of each PCIe generation, after its line encoding."""
    source: str = Field(min_length=20)
    metrics: tuple[str, ...] = ("h2d_GBps", "d2h_GBps")


class AllReduceFloor(_Frozen):
    """A published all-reduce bus bandwidth a node of ``gpus`` GPUs of the model must reach."""

    gpus: int = Field(ge=2)
    busbw_gbps: PositiveFloat
    min_mb: int = Field(ge=1)
    """Only where the check's buffer is at least this large (the source's message size): bus bandwidth
    grows with the message, so a smaller one would fail a healthy node."""
    source: str = Field(min_length=20)


class FloorFile(_Frozen):
    gemm: GemmPolicy
    memory: Fraction
    pcie: PcieFloor | None = None
    workloads: tuple[WorkloadFloor, ...] = ()
    models: tuple[ModelFloor, ...]

    @model_validator(mode="after")
    def _one_model_per_name(self) -> FloorFile:
        seen: set[str] = set()
        for model in self.models:
            for name in model.nvml_names:
                if name in seen:
                    raise ValueError(f"NVML name {name!r} is given to two models")
                seen.add(name)
        return self


@dataclass(frozen=True)
class PerGpuRate:
    """A published per-GPU rate: the median over matching systems, and which systems."""

    value: float
    systems: tuple[str, ...]
    rounds: tuple[str, ...]


def published_rate(benchmark: str, accelerators: Sequence[str], table: Sequence[published.PublishedSystem]
                   ) -> PerGpuRate | None:
    """Samples per second per accelerator of the closed, single-node published results of
    ``benchmark`` on ``accelerators``: each system's epochs-to-target x samples per epoch over its
    run time (evaluation included), the median over systems."""
    rates: list[tuple[float, str, str]] = []
    samples = benchmarks.get(benchmark).train_samples
    if samples is None:  # no published results of the benchmark ship with mltrain
        return None
    for system in table:
        if (system.benchmark != benchmark or system.division != "closed" or system.nodes != 1
                or system.accelerator not in accelerators or not system.accelerators):
            continue
        runs = [(m, e) for m, e in zip(system.run_minutes, system.run_epochs, strict=False) if e is not None]
        if runs:
            seconds = ms_from_minutes(sum(m for m, _ in runs)) / 1000
            per_gpu = sum(e for _, e in runs) * samples / seconds / system.accelerators
            rates.append((per_gpu, system.name, system.round))
    if not rates:
        return None
    return PerGpuRate(value=statistics.median(r for r, _, _ in rates), systems=tuple(n for _, n, _ in rates),
                      rounds=tuple(sorted({r for _, _, r in rates})))


class Floors:
    """The shipped floors, looked up by NVML name."""

    def __init__(self, parsed: FloorFile, table: Sequence[published.PublishedSystem]) -> None:
        self.parsed = parsed
        self.table = table
        self.by_name = {name: model for model in parsed.models for name in model.nvml_names}

    def model(self, nvml_name: str | None) -> ModelFloor | None:
        return self.by_name.get(nvml_name or "")

    def references(
        self, checks: Sequence[CheckResult], gpu_models: Mapping[int | None, str | None], workload: str,
        links: Mapping[int | None, tuple[int, int]] | None = None, gpu_count: int = 0,
        settings: Callable[[str], Any] = lambda name: None, declared: Callable[[str], Any] = lambda name: None,
    ) -> dict[str, Reference]:
        """Floors of the measurements of ``checks``. ``gpu_models``: NVML index -> model of the GPU
        that made a per-GPU case, and None -> the model of the GPU the other cases ran on; ``links``
        the same for each GPU's PCIe link (generation, width: NVML's maximum for the GPU in its slot);
        ``gpu_count``: the node's GPUs; ``settings``: a check's settings on the device its cases ran on;
        ``declared``: a check's declaration (`Declaration.floor`: its own floor, where no model's applies)."""
        found: dict[str, Reference] = {}
        for check in checks:
            for m in check.measurements:
                base, index = split_metric(m.metric)
                floor = self._pcie(base, (links or {}).get(index))
                model = self.model(gpu_models.get(index))
                if floor is None and model is not None:
                    floor = (self._gemm(base, model) or self._memory(base, model)
                             or self._allreduce(base, model, gpu_count, settings(check.name))
                             or self._workload(check, base, model, workload))
                if floor is None and declared(check.name) is not None:
                    floor = declared(check.name).floor(m.metric, m.unit, m.better)
                if floor is not None and floor.unit == m.unit:
                    found[m.metric] = floor
        return found

    def _pcie(self, metric: str, link: tuple[int, int] | None) -> Reference | None:
        policy = self.parsed.pcie
        if policy is None or link is None or metric not in policy.metrics:
            return None
        generation, width = link
        lane = policy.lane_gbps.get(generation)
        if lane is None or width < 1:
            return None
        return _floor(lane * width, policy, "GB/s", f"PCIe gen {generation} x{width} (NVML's link of this GPU in its"
                      f" slot), {number(lane)} GB/s a lane each way", policy.source)

    def _allreduce(self, metric: str, model: ModelFloor, gpus: int, settings: Any) -> Reference | None:
        mb = getattr(settings, "mb", None)
        rule = next((r for r in model.allreduce if r.gpus == gpus), None)
        if metric != ALLREDUCE or rule is None or not isinstance(mb, int) or mb < rule.min_mb:
            return None
        return Reference(value=rule.busbw_gbps, lower=rule.busbw_gbps, upper=None, unit="GB/s", kind="floor",
                         source=f"floor {number(rule.busbw_gbps)} GB/s all-reduce bus bandwidth on {gpus}"
                                f" {model.name}; source: {rule.source}")

    def _gemm(self, metric: str, model: ModelFloor) -> Reference | None:
        found = _GEMM.match(metric)
        policy = self.parsed.gemm
        if found is None:
            return None
        dims = [int(found[d]) for d in "mnk"]
        if min(dims) < policy.min_dim or any(d % policy.multiple_of for d in dims):
            return None
        peak = model.gemm_tflops.get(found["dtype"])  # type: ignore[call-overload]
        if peak is None:
            return None
        share = model.gemm_fraction or policy
        return _floor(peak, share, "TFLOP/s", f"{model.name} {found['dtype']} dense peak", model.source)

    def _memory(self, metric: str, model: ModelFloor) -> Reference | None:
        if metric != DEVICE_COPY:
            return None
        return _floor(model.memory_gbps, self.parsed.memory, "GB/s", f"{model.name} memory bandwidth", model.source)

    def _workload(self, check: CheckResult, metric: str, model: ModelFloor, workload: str) -> Reference | None:
        env = check.facts.get("env") if isinstance(check.facts.get("env"), dict) else {}
        for rule in self.parsed.workloads:
            if rule.workload != workload or rule.metric != metric or any(
                    env.get(k) != v for k, v in rule.when_env.items()):
                continue
            rate = published_rate(rule.benchmark, model.mlperf_accelerators, self.table)
            processes = _processes(check.facts.get("metadata"))
            if rate is None or processes is None:
                return None
            source = (f"published MLPerf Training {rule.benchmark} results ({', '.join(rate.rounds)}, closed,"
                      f" single node) of {len(rate.systems)} {model.name} system(s): median {number(rate.value)}"
                      f" samples/s per GPU, x {processes} process(es)")
            return _floor(rate.value * processes, rule, "samples/s", "", source)
        return None


def _processes(metadata: Any) -> int | None:
    """How many processes (GPUs) the throughput step ran: its global batch over its batch per process."""
    if not isinstance(metadata, dict):
        return None
    total, each = metadata.get("global_batch_size"), metadata.get("batch_size")
    if isinstance(total, int) and isinstance(each, int) and each > 0 and total % each == 0:
        return total // each
    return None


def _floor(value: float, share: Fraction, unit: str, what: str, source: str) -> Reference:
    said = f"{what} {number(value)} {unit}; " if what else ""
    return Reference(value=value, lower=value * share.fraction, upper=None, unit=unit, kind="floor",
                     source=f"floor {share.fraction:.0%} ({said}{share.why}); source: {source}")


def load_floors(path: Path = Path(__file__).with_name(FILE)) -> Floors:
    """The shipped floors (or the file at ``path``), with the shipped published results."""
    return Floors(validated(FloorFile, read_yaml(path), label=str(path)), published.load())
