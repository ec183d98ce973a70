"""A toy probe check, written by the recipe of docs/architecture.md ("A new qualification check"): this
one file, and one registration line (its name in the probe's ``registry.CHECKS``; in a test that runs
it in place: `catalog.with_probe_module`). Its number is a rate
that reads half its value on its first ``slow_runs`` runs (counted in the file ``$TOY_COUNTER``), so
that the quorum has something to repeat; with ``hang_s`` it sleeps that long instead (a hang)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workloads.common.probe.harness import Case, Context
from workloads.common.probe.protocol import Outcome, Performance, Sanity

DECLARATION = {
    "name": "toy",
    "kind": "microbenchmark",
    "needs": {"device": "any", "gpus": 0, "data": False},
    "sanity": "1 + 2 + ... + 100 is 5050",
    "units": {"toy_rate": "ops/s"},
    "sane": {"toy_rate": [0, 1e9]},
    "floor": {"toy_rate": [10.0, "the toy's own acceptance: 1 + 2 + ... + 100 summed ten times a second"]},
    "timeout_s": 60,
    "repeat": True,
    "device_bound": False,
    "remedy": {"wrong": "replace", "slow": "investigate"},
    "settings": {
        "rate": {"type": "float", "min": 0, "default": 100.0, "doc": "the rate it reads"},
        "slow_runs": {"type": "int", "min": 0, "default": 0, "doc": "its first runs read half the rate"},
        "hang_s": {"type": "float", "min": 0, "default": 0.0, "doc": "sleep this long first (a hang)"},
    },
}


def cases(spec: dict[str, Any], context: Context) -> Iterator[Case]:
    yield Case(check=DECLARATION["name"], metric="toy_rate", measure=lambda: measure(spec))


def measure(spec: dict[str, Any]) -> Outcome:
    time.sleep(spec["hang_s"])
    counter = Path(os.environ["TOY_COUNTER"])
    runs = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(runs + 1))
    rate = spec["rate"] / 2 if runs < spec["slow_runs"] else spec["rate"]
    total = sum(range(1, 101))
    return Outcome(sanity=Sanity(passed=total == 5050, detail=f"the sum is {total}"),
                   performance=Performance(value=rate, unit="ops/s", detail=f"run {runs + 1}"))
