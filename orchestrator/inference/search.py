"""The Server scenario's answer: the highest target QPS whose trial passes (LoadGen VALID; the latency
bound met where a profile shortens the tests below what early stopping needs), found the way
submitters tune it: a first trial at a guess, then doubling (or halving) until the answer is
bracketed between a passing and a failing QPS, then bisecting until the bracket is narrower than
``precision`` of its lower end. Every trial is kept (`SearchTrial`), each in its own folder.
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.results.inference import SearchTrial, ServerSearch

PRECISION = 0.05
MAX_TRIALS = 12

Trial = Callable[[int, float | None], SearchTrial]
"""Runs trial ``number`` at ``target_qps`` (None: the harness's warm-up guess) and says how it went."""


def search(trial: Trial, *, precision: float = PRECISION, max_trials: int = MAX_TRIALS) -> ServerSearch:
    trials = [trial(1, None)]
    low = trials[0].target_qps if trials[0].passed else None
    high = None if trials[0].passed else trials[0].target_qps

    def step(qps: float) -> SearchTrial:
        done = trial(len(trials) + 1, round(qps, 3))
        trials.append(done)
        return done

    while (low is None or high is None) and len(trials) < max_trials:  # bracket
        if low is None:
            assert high is not None
            done = step(high / 2)
            (low, high) = (done.target_qps, high) if done.passed else (None, done.target_qps)
        else:
            done = step(low * 2)
            (low, high) = (done.target_qps, None) if done.passed else (low, done.target_qps)
    while low is not None and high is not None and (high - low) > precision * low and len(trials) < max_trials:
        done = step((low + high) / 2)  # bisect
        if done.passed:
            low = done.target_qps
        else:
            high = done.target_qps
    return ServerSearch(trials=tuple(trials), best_qps=low, precision=precision)


def best_trial(found: ServerSearch) -> SearchTrial:
    """The passing trial at the best QPS, else the last one."""
    valid = [t for t in found.trials if t.passed and t.target_qps == found.best_qps]
    return valid[-1] if valid else found.trials[-1]
