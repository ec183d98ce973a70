"""The toy's training: y = a x + b fitted by gradient descent on DATADIR/points.json, seeded, until
the mean squared error reaches TOY_TARGET; the run told in :::MLLOG lines (mlperf_logging's format)."""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path


def event(key: str, value: object = None, **metadata: object) -> None:
    record = {"namespace": "", "time_ms": int(time.time() * 1000), "event_type": "POINT_IN_TIME", "key": key,
              "value": value, "metadata": {"file": "train.py", "lineno": 1, **metadata}}
    sys.stdout.write(":::MLLOG " + json.dumps(record) + "\n")
    sys.stdout.flush()


def main(seed: int) -> int:
    points = json.loads((Path(os.environ["DATADIR"]) / "points.json").read_text())
    target = float(os.environ["TOY_TARGET"])
    draw = random.Random(seed)
    a, b = draw.uniform(-1, 1), draw.uniform(-1, 1)
    event("seed", seed)
    event("run_start")
    for epoch in range(1, 201):
        event("epoch_start", epoch_num=epoch)
        grad_a = sum(2 * (a * x + b - y) * x for x, y in points) / len(points)
        grad_b = sum(2 * (a * x + b - y) for x, y in points) / len(points)
        a, b = a - 0.3 * grad_a, b - 0.3 * grad_b
        error = sum((a * x + b - y) ** 2 for x, y in points) / len(points)
        event("eval_accuracy", round(error, 6), epoch_num=epoch)
        event("epoch_stop", epoch, epoch_num=epoch)
        if error <= target:
            event("run_stop", status="success", epoch_num=epoch)
            return 0
    event("run_stop", status="aborted", epoch_num=200)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
