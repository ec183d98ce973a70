"""What one harness invocation is told: its command line (`workloads.inference.__main__`), typed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Options:
    """Everything one invocation is told (the command line, `workloads.inference.__main__`)."""

    model_name: str
    model: Path
    data: Path
    out: Path
    scenario: str
    backend: str = "onnxruntime"
    device: str = "cpu"
    mode: str = "performance"
    count: int | None = None
    time_s: float | None = None
    min_query_count: int | None = None
    target_qps: str | None = None
    """A number, 'auto' (measured in the warm-up) or None (mlperf.conf's placeholder)."""
    target_latency_ms: str | None = None
    max_batch: int | None = None
    threads: int = 0
    workers: int = 0
    """Threads answering Offline and Server queries; 0: chosen (`workloads.inference.run.worker_count`), recorded."""
    trace: bool = False
    image_size: tuple[int, int] | None = None
    label_offset: int | None = None
    audit: str | None = None
    """A compliance test (TEST01, TEST04): its audit.config given to LoadGen's performance test."""
    profile: str = ""
    """The orchestrator's profile name, recorded only."""
    trust_model: bool = False
    """The model file may run code as it loads (a torch.export program): its user vouches for it."""
    reference_accuracy: bool = False
    """With the accuracy test: the model file's own FP32 accuracy on the same samples (`reference_accuracy`)."""
    extra: dict[str, Any] = field(default_factory=dict)
