"""`mltrain compare` on imported unet3d folders (epoch numbers in samples, batch size 56): each
setup's epochs-to-target beside the training 4.0.0 RCP, and the sentence for the one that
converges slower than the reference."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .published_layout import Run, unet3d_folder

USUAL = [Run(epochs=1800 + 100 * ((i * 7) % 10), epoch_ms=2_000, seed=i) for i in range(40)]
"""Epochs-to-target 1800..2700, olympic mean 2250: the RCP for batch size 56 has mean 2127."""
SLOW = [Run(epochs=2600 + 100 * ((i * 7) % 10), epoch_ms=1_500, seed=100 + i) for i in range(40)]
"""The same spread 800 epochs later: faster hardware, slower convergence."""


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from orchestrator.cli import main

    root = tmp_path_factory.mktemp("rcp_compare")
    results = root / "results"
    os.environ["MLTRAIN_WORKLOADS"] = str(Path(__file__).parents[1] / "workloads")
    try:
        for system, runs in (("usual_sys", USUAL), ("slow_sys", SLOW)):
            folder = unet3d_folder(root / system, system, runs=runs, scaling=None)
            assert main(["-q", "import", str(folder), "--benchmark", "unet3d", "--results", str(results)]) == 0
    finally:
        os.environ.pop("MLTRAIN_WORKLOADS")
    return results


def test_compare_says_which_setup_converges_slower_than_the_reference(imported, cli):
    shown = cli("compare", "--label", "usual_sys", "--label", "slow_sys", "--results", str(imported)).out
    flat = " ".join(shown.split())
    assert "usual_sys converges as the reference does: olympic mean 2250 epochs-to-target over 32 runs" in flat
    assert "slow_sys converges slower than the reference: olympic mean 3050 epochs-to-target over 32 runs" in flat
    assert "the training 4.0.0 RCP for batch size 56 (RCP found: mean 2127 epochs" in flat
    assert "convergence vs MLCommons' reference" in flat


def test_compare_json_carries_the_reference_and_the_normalised_time(imported, cli):
    rows = {row["name"]: row for row in json.loads(cli("compare", "--label", "usual_sys", "--label", "slow_sys",
                                                        "--results", str(imported), "--json").out)["rows"]}
    slow = rows["slow_sys"]["convergence"]
    assert slow["verdict"] == "slower" and slow["reference"]["batch_size"] == 56
    assert slow["reference"]["mean_epochs"] == pytest.approx(357404.44444444444 / 168, rel=1e-12)
    # about 1.5 s per epoch x the RCP mean: slow_sys's hardware is the faster one
    assert slow["ttt_at_reference_ms"] == pytest.approx(1500 * 357404.44444444444 / 168, rel=0.01)
    assert rows["usual_sys"]["convergence"]["ttt_at_reference_ms"] == pytest.approx(
        2000 * 357404.44444444444 / 168, rel=0.01)
