"""A seed's stored telemetry series (``seeds/<n>/telemetry.json``), typed and validated when it is
read: the sampler's columns, one value per sample, numbers or None (the driver could not say). A
file of another shape (a list, a text timestamp, a GPU without one of its columns, columns of
different lengths) is a RecordError naming the file and the field, never a crash in a plot."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from orchestrator.config.numbers import Finite, Positive

SERIES_VERSION = 1
GPU_COLUMNS = ("util_pct", "memory_used_bytes", "power_w", "temperature_c", "sm_clock_mhz", "throttle_bits",
               "energy_mj")
"""One list per GPU for each of these (the sampler's `GpuSample` fields)."""
HOST_EVIDENCE_COLUMNS = ("steal_pct", "other_cpu_pct", "load_1m", "memory_pressure_pct")
"""Host columns of the quiet-host evidence (`orchestrator.insight.quiet`): CPU steal and other
processes' CPU, in percent of the host's CPU time; the 1-minute load average; the share of the
interval in which some task stalled on memory. Absent from series written before mltrain sampled them."""
GPU_EVIDENCE_COLUMNS = ("other_processes",)
"""Per-GPU columns of the quiet-host evidence: compute processes on it that are not the seed's."""

Column = list[Finite | None]


class HostColumns(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="allow")

    t_ms: list[int]
    """Wall-clock milliseconds of each sample (Unix epoch)."""
    cpu_pct: Column
    iowait_pct: Column
    memory_used_bytes: Column
    disk_read_bytes_per_s: Column
    disk_busy_pct: Column

    steal_pct: Column | None = None
    other_cpu_pct: Column | None = None
    load_1m: Column | None = None
    memory_pressure_pct: Column | None = None

    @model_validator(mode="after")
    def _one_value_per_sample(self) -> HostColumns:
        for name in ("cpu_pct", "iowait_pct", "memory_used_bytes", "disk_read_bytes_per_s", "disk_busy_pct",
                     *HOST_EVIDENCE_COLUMNS):
            column = getattr(self, name)
            if column is not None and len(column) != len(self.t_ms):
                raise ValueError(f"{name} has {len(column)} values for {len(self.t_ms)} samples")
        if any(b < a for a, b in zip(self.t_ms, self.t_ms[1:], strict=False)):
            raise ValueError("t_ms goes backwards")
        return self


class TelemetrySeries(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="allow")

    version: Literal[1]
    interval_s: Positive
    gpu_source: dict[str, Any]
    dataset_device: str | dict[str, Any]
    host: HostColumns
    gpus: list[dict[str, Column]]
    sampling_errors: list[str] = []
    host_cpus: int | None = None
    """The host's logical CPUs (what the load average is read against)."""
    evidence_notes: dict[str, str] = {}
    """Why a quiet-host column holds no values (a kernel without PSI), and whose processes were the seed's."""

    @model_validator(mode="after")
    def _every_gpu_has_every_column(self) -> TelemetrySeries:
        samples = len(self.host.t_ms)
        for index, gpu in enumerate(self.gpus):
            missing = [name for name in GPU_COLUMNS if name not in gpu]
            if missing:
                raise ValueError(f"gpus.{index} has no {missing[0]} column")
            columns = (*GPU_COLUMNS, *GPU_EVIDENCE_COLUMNS)
            short = [name for name in columns if name in gpu and len(gpu[name]) != samples]
            if short:
                raise ValueError(f"gpus.{index}.{short[0]} has {len(gpu[short[0]])} values for {samples} samples")
        return self
