"""Recorded GPU traces, for tests on machines without GPUs: record what NVML reads
(`record_trace_file`, behind `mltrain sysinfo --record-gpu-trace`) and replay it as a GPU source
(`TraceGpuSource`, repeating its last sample after its end).

A trace is ``{"devices": [names], "samples": [[one GpuSample's fields per GPU] per reading], "gpus":
gpu_info()}``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from orchestrator.config.reading import TELEMETRY_BYTES, read_json
from orchestrator.errors import UsageError
from orchestrator.insight import gpus
from orchestrator.insight.gpu_source import GPU_FIELDS, GpuSample, GpuSource, open_gpu_source
from orchestrator.results import atomic


class TraceGpuSource(GpuSource):
    """Replays a recorded trace (`record_gpu_trace` output); after its end, repeats the last sample."""

    def __init__(self, trace: dict[str, Any]) -> None:
        self.devices = [d["name"] if isinstance(d, dict) else d for d in trace["devices"]]
        fields = {*GPU_FIELDS, "compute_pids"}
        self.samples = [[_sample({k: v for k, v in gpu.items() if k in fields}) for gpu in step]
                        for step in trace["samples"]]
        if not self.samples or any(len(step) != len(self.devices) for step in self.samples):
            raise ValueError("trace needs at least one sample with one entry per device")
        self.position = 0

    @classmethod
    def from_file(cls, path: Path) -> TraceGpuSource:
        return cls(read_json(path, max_bytes=TELEMETRY_BYTES))

    def describe(self) -> dict[str, Any]:
        return {"available": True, "devices": self.devices, "source": "recorded trace"}

    def sample(self) -> list[GpuSample]:
        step = self.samples[min(self.position, len(self.samples) - 1)]
        self.position += 1
        return step


def _sample(fields: dict[str, Any]) -> GpuSample:
    pids = fields.get("compute_pids")
    return GpuSample(**{**fields, "compute_pids": tuple(pids) if pids is not None else None})


def record_gpu_trace(source: GpuSource, samples: int, interval_s: float) -> dict[str, Any]:
    """Record ``samples`` readings of a live source, in the format `TraceGpuSource` replays."""
    steps = []
    for index in range(samples):
        if index:
            time.sleep(interval_s)
        steps.append([asdict(gpu) for gpu in source.sample()])
    return {"devices": source.describe().get("devices", []), "samples": steps}


def record_trace_file(path: Path, samples: int, interval_s: float, status: Callable[[str], None]) -> None:
    """Record what the live sampler reads into ``path``, in the format `TraceGpuSource` replays
    (for tests on machines without GPUs). UsageError when there is no GPU to read."""
    source = open_gpu_source()
    description = source.describe()
    if not description.get("available"):
        raise UsageError(f"cannot record a GPU trace: {description.get('reason')}")
    status(f"recording {samples} readings of {len(description['devices'])} GPU(s) every {interval_s:g} s")
    try:
        trace = record_gpu_trace(source, samples, interval_s)
    finally:
        source.close()
    trace["gpus"] = gpus.gpu_info()
    atomic.write_json(path, trace)
