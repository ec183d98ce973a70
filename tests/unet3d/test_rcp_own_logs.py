"""Our own unet3d logs (smoke-sized: 6 training cases, batch 2, seeds run by the trainer itself)
through mlperf_logging's RCP checker: they count samples as the training 4.0.0 unet3d RCP table
does, so the checker gives a verdict on them instead of mltrain calling them "not comparable"."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.mlperf import checkers, mllog
from orchestrator.mlperf.parity import rcp_verdict
from orchestrator.mlperf.quality import Goal
from workloads.unet3d import train

PROJECT = Path(__file__).resolve().parents[2]
SEEDS = range(1, 10)
"""Nine runs: the fewest whose olympic mean (4 dropped at each end for unet3d) the checker can take."""
TINY = ["--filters", "4,8", "--input-shape", "16", "--batch-size", "2", "--learning-rate", "0.5",
        "--lr-warmup-epochs", "1", "--start-eval-at", "1", "--evaluate-every", "1", "--threads", "1",
        "--max-epochs", "2"]


@pytest.fixture(scope="module")
def own_logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """result_<n>.txt of nine seeds, as parity copies the seeds' output.log, and their records."""
    root = tmp_path_factory.mktemp("rcp_own")
    data = root / "data"
    subprocess.run([sys.executable, "-m", "workloads.unet3d.dataset", "synthesize", str(data), "--cases", "8",
                    "--size", "16,16,16", "--min-shape", "16", "--seed", "0", "--workers", "1", "--eval-cases", "2"],
                   cwd=PROJECT, check=True, capture_output=True)
    folder = root / "system" / "unet3d"
    folder.mkdir(parents=True)
    records = {}
    old = dict(os.environ)
    os.environ["QUALITY_THRESHOLD"] = "1e-12"  # any Dice the tiny model reaches converges
    try:
        for index, seed in enumerate(SEEDS):
            output = io.StringIO()
            with contextlib.redirect_stdout(output):
                assert train.main(["--data-dir", str(data), "--results-dir", str(root / f"r{seed}"),
                                   "--seed", str(seed), *TINY]) == 0
            text = "starting\n" + output.getvalue()
            (folder / f"result_{index}.txt").write_text(text)
            records[index] = mllog.build_record(mllog.parse_lines(text.splitlines()), goal=Goal(target=1e-12))
    finally:
        os.environ.clear()
        os.environ.update(old)
    return folder, records


def test_our_logs_count_samples_like_the_rcp_table(own_logs):
    _, records = own_logs
    assert all(r.converged and r.metadata["epoch_unit"] == "samples" for r in records.values())
    assert {r.epochs_to_target for r in records.values()} == {1} and {r.global_batch_size for r in records.values()} \
        == {2}
    sizes, samples = checkers.rcp_table("unet3d", "4.0.0")
    assert samples and sizes == (28, 56, 64, 84)


def test_the_rcp_checker_gives_our_logs_a_verdict(own_logs):
    folder, records = own_logs
    outcome = checkers.rcp_check(folder, "unet3d", "4.0.0")
    # 6 samples to converge at batch size 2, below the smallest batch size (28) of the table, whose
    # RCP the checker then holds them to: far faster than it allows, so it fails them
    assert not outcome.passed and outcome.message == "Missing RCP, please submit RCP with BS = 2"
    verdict = rcp_verdict(folder, records, "unet3d", "4.0.0", "closed")
    assert verdict.state == "no_rcp" and verdict.batch_size == 2
    assert "not comparable" not in verdict.detail
    assert verdict.detail == ("no RCP for batch size 2 in the training 4.0.0 unet3d RCP table (it has batch sizes"
                              " 28, 56, 64, 84); the checker fails: Missing RCP, please submit RCP with BS = 2")
