"""Per-operator time from a backend's own profiler: ONNX Runtime's profile file (chrome trace JSON,
one ``Node`` event per kernel run) and torch's profiler averages, both as `OperatorTime` totals."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True)
class OperatorTime:
    op: str
    """Operator type ('Conv', 'aten::convolution', ...)."""
    calls: int
    total_us: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _totals(pairs: Iterable[tuple[str, float]]) -> list[OperatorTime]:
    totals: dict[str, list[float]] = {}
    for op, us in pairs:
        entry = totals.setdefault(op, [0, 0.0])
        entry[0] += 1
        entry[1] += us
    return sorted((OperatorTime(op=op, calls=int(n), total_us=us) for op, (n, us) in totals.items()),
                  key=lambda t: -t.total_us)


def onnxruntime_operators(path: Path) -> list[OperatorTime]:
    """Kernel time per operator type: ``Node`` events whose name ends in ``_kernel_time``."""
    events = json.loads(path.read_text())
    return _totals((str(e.get("args", {}).get("op_name", "?")), float(e.get("dur", 0)))
                   for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time"))


def torch_operators(averages: Any) -> list[OperatorTime]:
    """Self time per aten operator (self, so that nested operators are not counted twice)."""
    ops = [OperatorTime(op=a.key, calls=int(a.count), total_us=float(a.self_cpu_time_total)
                        + float(getattr(a, "self_device_time_total", 0.0) or 0.0))
           for a in averages if a.key.startswith("aten::")]
    return sorted(ops, key=lambda t: -t.total_us)
