"""Drift: a number that falls 1 % a night WARNs (CUSUM on the node's own series) nights before it
crosses its floor and FAILs; normal night-to-night noise rarely WARNs."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from orchestrator.errors import EXIT_INVALID_RESULT, EXIT_OK, EXIT_WARN
from orchestrator.qualify.config import DriftPolicy
from orchestrator.qualify.drift import cusum
from orchestrator.results.qualification import Status
from tests.qualify.nodes import run_node

POLICY = DriftPolicy()  # the defaults: baseline 10 nights, k 0.5 sigma, h 7.5 sigma, sigma at least 1 %


def falling(stable: int, nights: int, start: float = 100.0) -> list[float]:
    """``stable`` nights at ``start``, then ``nights`` falling 1 % of it a night."""
    return [start] * stable + [start * (1 - 0.01 * n) for n in range(1, nights + 1)]


def first_alarm(series: list[float], policy: DriftPolicy, better: str = "higher") -> int | None:
    """The first night (index) whose CUSUM passes h."""
    for night in range(policy.baseline_runs, len(series)):
        c = cusum(series[: night + 1], better, policy)
        if c.total > policy.threshold_sigma * c.sigma:
            return night
    return None


def test_with_the_defaults_one_percent_a_night_warns_on_its_fourth_night_six_before_the_floor():
    series = falling(POLICY.baseline_runs, 10)
    night = first_alarm(series, POLICY)
    assert night == POLICY.baseline_runs + 3  # S = 0.5, 2, 4.5, 8.0 %: above 7.5 x 1 % (the noise floor) on night 4
    c = cusum(series[: night + 1], "higher", POLICY)  # type: ignore[operator]
    assert (c.baseline, c.sigma, c.start) == (100.0, 0.01, POLICY.baseline_runs)
    assert c.total == pytest.approx(0.08)  # 1 + 2 + 3 + 4 %, less 0.5 % a night
    floor = 90.5  # an operator's floor 9.5 % below 100: crossed on the 10th night
    assert series[night] > floor and next(n for n, v in enumerate(series) if v < floor) == night + 6  # type: ignore[operator]


def test_a_lower_is_better_number_drifts_upward():
    rising = [20.0] * 10 + [20.0 * (1 + 0.01 * n) for n in range(1, 8)]
    assert first_alarm(rising, POLICY, "lower") is not None
    assert first_alarm(rising, POLICY, "higher") is None


def test_steady_numbers_with_half_a_percent_of_noise_do_not_warn_in_a_year():
    alarms = 0
    for seed in range(20):
        noise = random.Random(seed)
        steady = [100.0 * (1 + noise.gauss(0, 0.005)) for _ in range(365)]
        alarms += first_alarm(steady, POLICY) is not None
    assert alarms <= 1


def test_a_noisier_number_needs_a_larger_fall():
    noise = random.Random(3)
    noisy = [100.0 * (1 + noise.gauss(0, 0.03)) for _ in range(10)] + falling(0, 6)
    assert cusum(noisy, "higher", POLICY).sigma > 0.02
    assert first_alarm(noisy, POLICY) is None  # 6 % over 6 nights is inside 3 % noise


# ---------------------------------------------------------------- a whole node, night after night


def test_a_throughput_falling_one_percent_a_night_warns_before_it_fails(mltrain_env, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    """tests/workloads/qualify.yaml: a baseline of 3 nights (the defaults' 10 would take longer)."""
    refs = tmp_path / "refs.yaml"  # the operator's floor: 9.5 % below 100 samples/s
    refs.write_text("systems:\n  - model: '*'\n    source: acceptance runs of the test node\n    references:\n"
                    "      throughput_samples_per_s: [100.0, -0.095, null, samples/s]\n")
    rates = falling(3, 10)
    verdicts: list[Status] = []
    codes: list[int] = []
    reasons: list[tuple[str, ...]] = []
    for night, rate in enumerate(rates):
        stamp = f"2026-03-{night + 1:02d}T02:00:00+00:00"
        monkeypatch.setattr("orchestrator.qualify.node.now_iso", lambda stamp=stamp: stamp)
        monkeypatch.setenv("FAKE_RATE", str(rate))
        record = run_node(tmp_path / "r", suite="throughput_only", references=refs)
        verdicts.append(record.verdict)
        codes.append(record.exit_code)
        reasons.append(record.reasons)
    warned, failed = verdicts.index(Status.WARN), verdicts.index(Status.FAIL)
    assert (warned, failed) == (2 + 4, 2 + 10), verdicts  # the 4th falling night WARNs, the 10th FAILs
    assert verdicts[:warned] == [Status.PASS] * warned and codes[:warned] == [EXIT_OK] * warned
    assert set(verdicts[warned:failed]) == {Status.WARN} and set(codes[warned:failed]) == {EXIT_WARN}
    assert codes[failed] == EXIT_INVALID_RESULT
    assert reasons[warned][0] == (
        "throughput: throughput_samples_per_s 96 samples/s is drifting: 4.0% worse than its baseline 100 (median of"
        " its first 3 nights), over 4 nights since 2026-03-04 (CUSUM 8.0% > 7.5 x its night-to-night noise 1.0%;"
        " Page 1954); still inside its bounds")
    assert "FAIL confirmed" in reasons[failed][0]  # below the floor on every repeat of the quorum
