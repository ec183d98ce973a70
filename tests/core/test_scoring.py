import pytest
from hypothesis import given
from hypothesis import strategies as st
from mlperf_logging.result_summarizer.result_summarizer import _compute_olympic_average

from orchestrator.mlperf.scoring import ScoringRule, olympic_mean, score_runs, spread
from orchestrator.results.records import RunRecord, RunStatus


def converged(ms: int) -> RunRecord:
    return RunRecord(status=RunStatus.CONVERGED, reason="", time_to_train_ms=ms, epochs_to_target=ms / 100)


def failed() -> RunRecord:
    return RunRecord(status=RunStatus.NOT_CONVERGED, reason="cap")


QUALIFY = ScoringRule(drop_per_end=1, max_non_converged=1)


def test_qualify_drops_fastest_and_slowest():
    records = {s: converged(ms) for s, ms in enumerate([50, 10, 30, 20, 40], start=1)}
    score = score_runs(records, QUALIFY)
    assert score.score_ms == 30 and score.valid
    assert score.dropped_fast_seeds == (2,) and score.dropped_slow_seeds == (1,)
    assert set(score.counted_seeds) == {3, 4, 5}


def test_a_non_converged_run_is_the_dropped_slow_run():
    records = {1: converged(10), 2: converged(20), 3: converged(30), 4: failed()}
    score = score_runs(records, QUALIFY)
    assert score.score_ms == 25 and score.valid and score.dropped_slow_seeds == ()


def test_too_many_non_converged_is_invalid_and_says_which():
    records = {1: converged(10), 2: converged(20), 3: failed(), 4: failed()}
    score = score_runs(records, QUALIFY)
    assert not score.valid and score.score_ms is None
    assert "2 runs did not converge; at most 1 may (seed 3, 4)" in score.reason


def test_mlperf_run_count_and_unfinished_seeds():
    rule = ScoringRule(drop_per_end=4, max_non_converged=4, runs_required=40)
    score = score_runs({s: converged(1000 + s) for s in range(30)}, rule, unfinished=[31, 32])
    assert not score.valid
    assert "2 seed(s) never finished" in score.reason and "need 40 runs, this set has 32" in score.reason


def test_spread_matches_textbook_values():
    s = spread([10.0, 12.0, 14.0])
    assert s.mean == 12 and s.std == pytest.approx(2.0) and s.cv == pytest.approx(1 / 6)
    assert s.ci95_low == pytest.approx(12 - 4.302653 * 2 / 3**0.5, rel=1e-5)
    assert spread([5.0]).std is None and spread([]).mean is None


@given(
    times=st.lists(st.integers(min_value=1, max_value=10**7), min_size=1, max_size=45),
    drop=st.sampled_from([1, 4]),
    non_converged=st.integers(min_value=0, max_value=4),
)
def test_olympic_mean_equals_mlperf_summarizer(times, drop, non_converged):
    ours = olympic_mean([float(t) for t in times], non_converged, drop)
    theirs = _compute_olympic_average([float(t) for t in times], non_converged, drop) if non_converged <= drop else None
    if theirs is None:
        assert ours is None
    else:
        assert ours == pytest.approx(theirs)
