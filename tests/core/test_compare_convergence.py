"""`compare` beside MLCommons' reference convergence points: each setup's epochs-to-target against
the RCP for its batch size, a sentence when a setup converges slower than the reference would, and
the time-to-train at the reference's convergence."""

from __future__ import annotations

import json

import numpy as np
import pytest
from mlperf_logging.rcp_checker import rcp_checker

from orchestrator.insight import convergence
from orchestrator.insight.compare import SeedResult, Setup, compare
from orchestrator.render.convergence import convergence_table, sentences

RCP_56 = rcp_checker.RCP_Checker("training", "4.0.0", "unet3d", False).rcp_data["unet3d_ref_56"]
REFERENCE_EPOCHS = [e / 168 for e in RCP_56["Epochs to converge"]]
"""The 4.0.0 reference runs for batch size 56, in epochs of 168 samples."""


def setup_of(name: str, epochs: list[float], *, seconds_per_epoch: float = 2.0) -> Setup:
    seeds = tuple(SeedResult(seed=i, converged=True, time_to_train_ms=e * seconds_per_epoch * 1000,
                             epochs_to_target=e, samples_per_epoch=168) for i, e in enumerate(epochs))
    return Setup(name=name, seeds=seeds, drop_per_end=4, max_non_converged=4, benchmark="unet3d",
                 reference=convergence.reference_for("unet3d", "4.0.0", 56, 168))


def draw(scale: float, n: int = 40, seed: int = 3) -> list[float]:
    """``n`` epochs-to-target drawn from the reference runs themselves, times ``scale``."""
    rng = np.random.default_rng(seed)
    return [float(e) * scale for e in rng.choice(REFERENCE_EPOCHS, size=n, replace=False)]


def test_the_reference_is_the_checkers_rcp_in_epochs():
    ref = convergence.reference_for("unet3d", "4.0.0", 56, 168)
    assert ref is not None and ref.how == "RCP found" and ref.runs == len(REFERENCE_EPOCHS)
    assert ref.mean_epochs == pytest.approx(357404.44444444444 / 168, rel=1e-12)
    assert ref.min_mean_epochs < ref.mean_epochs and ref.stdev_epochs == pytest.approx(np.std(REFERENCE_EPOCHS))
    assert convergence.reference_for("unet3d", "4.0.0", 60, 168).how == "RCP Interpolation"
    assert convergence.reference_for("unet3d", "4.0.0", 2, 30) is None  # below the table: the checker has none
    assert convergence.reference_for("unet3d", "4.0.0", 56, None) is None  # samples cannot become epochs
    # a table counting epochs is taken as it is
    assert convergence.reference_for("resnet", "4.0.0", 3264, None).mean_epochs == pytest.approx(35.1538, rel=1e-4)


def test_a_setup_converging_slower_than_the_reference_is_called_so():
    usual, slow = setup_of("usual", draw(1.0)), setup_of("slow", draw(1.3, seed=4))
    result = compare([usual, slow])
    checks = {row.name: row.convergence for row in result.rows}
    assert checks["usual"].verdict == "as_reference" and checks["slow"].verdict == "slower"
    assert checks["slow"].p_slower < convergence.SLOWER_ALPHA < checks["usual"].p_slower
    said = sentences(result)
    assert said[0].startswith("usual converges as the reference does: olympic mean")
    assert said[1].startswith("slow converges slower than the reference: olympic mean")
    assert "the training 4.0.0 RCP for batch size 56 (RCP found: mean 2127 epochs" in said[1]
    assert "numerics or hyperparameter regression" in said[1]
    # time-to-train at the reference's convergence: olympic TTT x RCP mean / olympic epochs; at 2 s
    # per epoch both setups would take 2 s x the RCP mean
    row = result.rows[1]
    assert row.convergence.ttt_at_reference_ms == pytest.approx(
        row.olympic_ms.value * row.convergence.reference.mean_epochs / row.convergence.olympic_epochs)
    assert row.olympic_ms.value > 1.25 * result.rows[0].olympic_ms.value
    for one in result.rows:
        assert one.convergence.ttt_at_reference_ms == pytest.approx(2000 * 357404.44444444444 / 168, rel=1e-9)
    assert convergence_table(result) is not None
    assert json.loads(json.dumps(result.to_json()))["rows"][1]["convergence"]["verdict"] == "slower"


def test_faster_than_the_checker_allows_and_too_few_runs():
    fast = compare([setup_of("fast", draw(0.8))]).rows[0].convergence
    assert fast.verdict == "faster_than_allowed" and fast.olympic_epochs < fast.reference.min_mean_epochs
    few = compare([setup_of("few", draw(1.0, n=9))]).rows[0].convergence
    assert few.verdict == "too_few_runs" and few.runs == 1
    plain = Setup(name="none", seeds=(SeedResult(seed=1, converged=True, time_to_train_ms=1.0),))
    assert compare([plain]).rows[0].convergence is None
