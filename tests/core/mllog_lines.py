"""Build MLLOG text for tests: one event per line, times in ms."""

from __future__ import annotations

import json


def line(key: str, time_ms: float, value=None, **metadata) -> str:
    record = {"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME", "key": key, "value": value,
              "metadata": {"file": "t.py", "lineno": 1, **metadata}}
    return ":::MLLOG " + json.dumps(record)


def run_log(*, start: float = 1000, evals: list[tuple[float, float, float]], status: str = "success",
            stop: float | None = None, seed: int = 7, samples: int | None = None) -> list[str]:
    """``evals``: (time_ms, epoch, accuracy). ``samples``: log epoch_num in samples of this epoch size."""
    lines = [line("init_start", 0), line("seed", 1, seed), line("submission_benchmark", 1, "unet3d"),
             line("init_stop", start - 1), line("run_start", start), line("samples_per_epoch", start, samples or 168),
             line("global_batch_size", start, 2)]
    for t, epoch, accuracy in evals:
        if samples:
            lines.append(line("block_start", t - 1, samples_count=int((epoch - 1) * samples)))
            lines.append(line("eval_accuracy", t, accuracy, epoch_num=int(epoch * samples)))
        else:
            lines.append(line("eval_accuracy", t, accuracy, epoch_num=epoch))
    lines.append(line("run_stop", stop if stop is not None else evals[-1][0] + 1, status=status))
    return lines
