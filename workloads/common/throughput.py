"""What every workload's throughput mode shares (the contract's ``throughput``): which DATADIR
holds data and the metadata of the final ``throughput`` event (its steps are timed by ``timing``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path


def holds_data(data_dir: str | Path | None) -> bool:
    """Whether DATADIR names a dataset to time: unset, empty, or an empty folder (what a runner
    mounts at /data when the caller has no dataset) mean random in-memory batches only."""
    if not data_dir or not str(data_dir):
        return False
    folder = Path(data_dir)
    return not folder.is_dir() or any(folder.iterdir())


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0 to 100) with linear interpolation between the closest ranks
    (numpy's default, ``statistics.quantiles(method='inclusive')``)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def metadata(*, per_step_ms: Sequence[float], steps: int, warmup_steps: int, batch_size: int,
             global_batch_size: int, rate: float, loader_rate: float | None, precision: str,
             device_name: str) -> dict[str, object]:
    """The ``throughput`` event's metadata (workloads/README.md, "Throughput mode"): ``rate`` and
    ``loader_rate`` in samples/s over all processes, the loader's None when it was not timed."""
    return {
        "unit": "samples/s", "steps": steps, "warmup_steps": warmup_steps, "batch_size": batch_size,
        "global_batch_size": global_batch_size, "step_ms_median": statistics.median(per_step_ms),
        "step_ms_p10": percentile(per_step_ms, 10), "step_ms_p90": percentile(per_step_ms, 90),
        "loader_samples_per_second": loader_rate, "input_bound": None if loader_rate is None else loader_rate < rate,
        "precision": precision, "device_name": device_name,
    }
