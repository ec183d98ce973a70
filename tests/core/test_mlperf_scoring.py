"""The mlperf profile's score equals mlperf_logging.result_summarizer's on the same logs."""

import json
import shutil
from pathlib import Path

import pytest
from mlperf_logging.result_summarizer.result_summarizer import _compute_strong_score_standalone

from orchestrator.results.store import Store


def summarizer_minutes(folder: Path, benchmark: str = "unet3d") -> tuple[float | None, int]:
    scores, _, score, _, _ = _compute_strong_score_standalone(
        benchmark, "sys", False, str(folder), "training", "4.0.0", return_full_scores=True
    )
    return score, len(scores)


def as_result_files(run_root: Path, out: Path) -> Path:
    out.mkdir(parents=True)
    for n, log in enumerate(sorted(run_root.glob("seeds/*/output.log"))):
        shutil.copyfile(log, out / f"result_{n}.txt")
    return out


@pytest.mark.parametrize("failing", ["", "5,9"])
def test_mlperf_profile_matches_the_summarizer(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing):
    results = tmp_path / "results"
    seeds = ",".join(str(s) for s in range(1, 41))
    if failing:
        monkeypatch.setenv("FAKE_MODE", "no_converge")
        monkeypatch.setenv("FAKE_MODE_SEEDS", failing)
    r = cli("run", "fakebench", "--profile", "mlperf", "--seeds", seeds, "--results", str(results), "--json")
    assert r.code == 0, r.err
    ours = json.loads(r.out)
    assert ours["valid"] and ours["mlperf_result"] and ours["runs"] == 40
    run_id = ours["run_id"]
    theirs, converged = summarizer_minutes(as_result_files(results / run_id, tmp_path / "mlcommons"))
    assert converged == ours["converged"] == 40 - len([s for s in failing.split(",") if s])
    assert ours["score_ms"] / 60000 == pytest.approx(theirs, rel=1e-12)
    # the run laid itself out for MLCommons' tools and kept their verdict
    assert ours["mlcommons"]["agrees"] and ours["mlcommons"]["summarizer_score_min"] == pytest.approx(theirs)
    assert len(list((results / run_id / "mlcommons" / "results").glob("*/unet3d/result_*.txt"))) == 40
    shown = cli("show", run_id, "--results", str(results)).out
    assert "MLPerf rules, unofficial" in shown


def test_import_of_published_format_logs_matches_the_summarizer(cli, tmp_path: Path, monkeypatch):
    """Logs in the MLCommons layout, epochs logged as samples the NVIDIA way, one non-converged."""
    made = tmp_path / "made"
    monkeypatch.setenv("FAKE_SAMPLES", "1")
    monkeypatch.setenv("FAKE_MODE", "no_converge")
    monkeypatch.setenv("FAKE_MODE_SEEDS", "17")
    seeds = ",".join(str(s) for s in range(11, 51))
    assert cli("run", "fakebench", "--profile", "mlperf", "--seeds", seeds, "--results", str(made)).code == 0
    published = as_result_files(next(p for p in made.iterdir() if p.is_dir()), tmp_path / "published")
    theirs, _ = summarizer_minutes(published)

    results = tmp_path / "results"
    r = cli("import", str(published), "--benchmark", "unet3d", "--results", str(results), "--json")
    assert r.code == 0, r.err
    ours = json.loads(r.out)
    assert ours["score_ms"] / 60000 == pytest.approx(theirs, rel=1e-12)
    assert ours["non_converged"] == 1 and ours["valid"]
    run = Store(results).open(ours["run_id"])
    assert run.manifest.runner == "imported" and run.manifest.profile == "mlperf"
    # samples-based epoch_num read as epochs: seed s needs 20 + (7 s) % 11 epochs
    by_logged_seed = {r.seed: r for r in run.records.values()}
    assert by_logged_seed[12].epochs_to_target == 20 + (7 * 12) % 11
    assert by_logged_seed[12].metadata["epoch_unit"] == "samples"


def _log_lines(*keys_times):
    return "\n".join(
        ":::MLLOG " + json.dumps({"key": k, "time_ms": t, "value": None, "metadata": {"status": "success"}})
        for k, t in keys_times
    ) + "\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (_log_lines(("init_start", 1), ("run_stop", 5)), "result_0.txt: run_start not recorded"),
        (_log_lines(("run_start", 10), ("run_stop", 5)), "run_stop (5) is before run_start (10)"),
        ("no mllog here\n", "no :::MLLOG lines"),
    ],
)
def test_import_rejects_unscorable_logs_and_writes_nothing(cli, tmp_path: Path, content, message):
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "result_0.txt").write_text(content)
    results = tmp_path / "results"
    r = cli("import", str(folder), "--benchmark", "unet3d", "--results", str(results))
    assert r.code == 2 and message in r.err and r.err.count("\n") == 1
    assert not results.exists() or not any(p.is_dir() for p in results.iterdir())


def test_import_needs_a_known_benchmark_and_result_files(cli, tmp_path: Path):
    r = cli("import", str(tmp_path), "--benchmark", "bert", "--results", str(tmp_path / "r"))
    assert r.code == 2 and "no workload implements benchmark 'bert'" in r.err
    r = cli("import", str(tmp_path), "--benchmark", "unet3d", "--results", str(tmp_path / "r"))
    assert r.code == 2 and "no result_<n>.txt files" in r.err
