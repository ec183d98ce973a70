"""The one timing kit (workloads/common/timing.py) that workloads' throughput modes and the benchmarks
share: steps timed one by one, warm-up calls outside the timed regions, a sampler around each region."""

from __future__ import annotations

import torch

from workloads.common import timing

CPU = torch.device("cpu")


def test_timed_steps_time_each_call():
    calls = []
    seconds, per_step = timing.timed_steps(lambda: calls.append(torch.ones(64, 64) @ torch.ones(64, 64)), 4, CPU)
    assert len(calls) == 4 and len(per_step) == 4
    assert all(ms >= 0 for ms in per_step) and sum(per_step) <= seconds * 1000 + 1e-6


class Sampler:
    """Records when it is entered, left and reset, beside the calls timed."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def reset(self) -> None:
        self.events.append("reset")

    def __enter__(self) -> Sampler:
        self.events.append("enter")
        return self

    def __exit__(self, *exc: object) -> None:
        self.events.append("exit")


def test_regions_follow_the_warm_up_each_inside_the_sampler():
    events: list[str] = []
    regions, warm = timing.timed_regions(lambda: events.append("call"), calls=2, repeats=3, warmup=1, device=CPU,
                                         sampler=Sampler(events))
    assert events == ["call", "reset", *["enter", "call", "call", "exit"] * 3]
    assert len(regions) == 3 and all(s >= 0 for s in regions) and warm >= 0


def test_a_region_without_a_sampler_and_a_warm_up_of_nothing():
    calls = []
    assert timing.timed_region(lambda: calls.append(1), 5, CPU) >= 0 and calls == [1] * 5
    assert timing.warm_up(lambda: calls.append(2), 0, CPU) >= 0 and calls == [1] * 5
