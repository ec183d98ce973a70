"""Epochs, seconds per epoch and samples per second are right whether a log counts epochs or
samples: `compare` on two imported folders of NVIDIA-style logs (epoch_num in samples,
train_samples 168) shows epochs-to-target in thousands, not hundreds of thousands."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from orchestrator.mlperf.mllog import build_record, epochs_counted_in_samples, parse_lines
from orchestrator.mlperf.quality import Goal

from .published_layout import SAMPLES, Run, unet3d_folder, unet3d_log, unet3d_time_ms

RUNS_A = [Run(epochs=1800 + 100 * (i % 6), epoch_ms=2_000, seed=i) for i in range(40)]
RUNS_B = [Run(epochs=1800 + 100 * ((i + 3) % 6), epoch_ms=1_500, seed=100 + i) for i in range(40)]


@pytest.fixture(scope="module")
def two_imports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    import os

    from orchestrator.cli import main

    root = tmp_path_factory.mktemp("units")
    results = root / "results"
    os.environ["MLTRAIN_WORKLOADS"] = str(Path(__file__).parents[1] / "workloads")
    try:
        for system, runs in (("slow_sys", RUNS_A), ("fast_sys", RUNS_B)):
            folder = unet3d_folder(root / system, system, runs=runs, scaling=None)
            assert main(["-q", "import", str(folder), "--benchmark", "unet3d", "--results", str(results)]) == 0
    finally:
        os.environ.pop("MLTRAIN_WORKLOADS")
    return results, ["slow_sys", "fast_sys"]


def expected(runs: list[Run]) -> tuple[float, float, float]:
    """Mean epochs-to-target, seconds per epoch and samples per second over the runs."""
    epochs = [r.epochs for r in runs]
    seconds = [unet3d_time_ms(r) / 1000 for r in runs]
    per_epoch = [s / e for s, e in zip(seconds, epochs, strict=True)]
    return (sum(epochs) / len(epochs), sum(per_epoch) / len(per_epoch),
            sum(SAMPLES / p for p in per_epoch) / len(per_epoch))


def test_compare_shows_epochs_and_samples_per_second_in_their_own_units(two_imports, cli):
    results, labels = two_imports
    r = cli("compare", "--label", labels[0], "--label", labels[1], "--results", str(results), "--json")
    assert r.code == 0, r.err
    rows = {row["name"]: row for row in json.loads(r.out)["rows"]}
    for label, runs in zip(labels, (RUNS_A, RUNS_B), strict=True):
        epochs, per_epoch, samples = expected(runs)
        row = rows[label]
        assert row["epochs_to_target"]["mean"]["value"] == pytest.approx(epochs)
        assert 1000 < row["epochs_to_target"]["mean"]["value"] < 10_000  # thousands, not 168x that
        assert row["seconds_per_epoch"]["mean"]["value"] == pytest.approx(per_epoch, rel=1e-9)
        assert row["samples_per_second"]["mean"]["value"] == pytest.approx(samples, rel=1e-9)
    # the hardware differs (1.5 s vs 2 s per epoch), the convergence does not
    assert rows["fast_sys"]["seconds_per_epoch"]["ratio"]["value"] == pytest.approx(2.0 / 1.5, rel=1e-3)
    table = cli("compare", "--label", labels[0], "--label", labels[1], "--results", str(results), "--csv").out
    line = next(csv.DictReader(io.StringIO(table)))
    assert float(line["epochs_to_target_mean"]) == pytest.approx(expected(RUNS_A)[0])


def test_report_shows_epochs_not_samples(two_imports, cli, tmp_path):
    results, labels = two_imports
    out = tmp_path / "r.html"
    r = cli("report", "--label", labels[0], "--label", labels[1], "--results", str(results), "--out", str(out))
    assert r.code == 0, r.err
    page = out.read_text()
    assert f">{expected(RUNS_A)[0]:.4g}<" in page and "3.46e+05" not in page


def test_the_unit_is_told_by_every_epoch_number_in_the_log():
    samples = parse_lines(unet3d_log(Run(epochs=1800, epoch_ms=10)).splitlines())
    assert epochs_counted_in_samples(samples, 168)
    record = build_record(samples, goal=Goal(target=0.908))
    assert record.epochs_to_target == 1800 and record.samples_per_epoch == 168 and record.train_samples == 168
    assert [p.epoch for p in record.evals][:2] == [1000, 1100]
    # logs that count epochs are left alone, even when one number happens to be a multiple of 168
    epochs_log = parse_lines([_to_epochs(line) for line in unet3d_log(Run(epochs=1800, epoch_ms=10)).splitlines()])
    assert not epochs_counted_in_samples(epochs_log, 168)
    assert build_record(epochs_log, goal=Goal(target=0.908)).epochs_to_target == 1800


def _to_epochs(line: str) -> str:
    """The same event counting epochs: every samples-counted epoch number divided by 168."""
    if ":::MLLOG" not in line:
        return line
    head, body = line.split(":::MLLOG ", 1)
    record = json.loads(body)
    for field in ("epoch_num", "first_epoch_num", "epoch_count"):
        if field in record["metadata"]:
            record["metadata"][field] = max(1, record["metadata"][field] // 168)
    return head + ":::MLLOG " + json.dumps(record)
