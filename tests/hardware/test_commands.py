"""`mltrain compare` and `mltrain export` through the real CLI entry point."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.results.store import Store
from tests.hardware.stored_runs import make_run


@pytest.fixture(scope="module")
def two_setups(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two labelled setups: 'fast' logs 0.8 s per epoch, 'slow' 1 s; same seeds, same epochs (read only)."""
    results = tmp_path_factory.mktemp("two_setups") / "results"
    make_run(results, label="slow", seeds=list(range(1, 8)), env={"FAKE_EPOCH_MS": "1000"}, power_w=250,
             run_id="run-slow")
    make_run(results, label="fast", seeds=list(range(1, 8)), env={"FAKE_EPOCH_MS": "800"}, power_w=300,
             run_id="run-fast")
    return results


def test_compare_json(hw_cli, two_setups: Path) -> None:
    r = hw_cli("compare", "--label", "slow", "--label", "fast", "--results", str(two_setups), "--json",
               "--cost-per-hour", "fast=4", "--cost-per-hour", "2")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["baseline"] == "slow"
    slow, fast = data["rows"]
    assert fast["speedup"]["value"] == pytest.approx(1.25, rel=1e-3)
    assert fast["speedup"]["low"] < 1.25 < fast["speedup"]["high"]
    assert fast["ttt_test"]["p_value"] < 0.05
    assert fast["seconds_per_epoch"]["ratio"]["value"] == pytest.approx(1.25)
    assert fast["epochs_to_target"]["ratio"]["value"] == pytest.approx(1.0)
    assert fast["epochs_to_target"]["test"]["significant"] is False
    # energy: olympic seeds of 'fast' at ~300 W for 0.8 s per epoch
    assert fast["energy_j"] == pytest.approx(300 * fast["olympic_ms"]["value"] / 1000, rel=0.05)
    assert fast["cost"] == pytest.approx(4 * fast["olympic_ms"]["value"] / 3.6e6)
    assert slow["cost"] == pytest.approx(2 * slow["olympic_ms"]["value"] / 3.6e6)


def test_compare_text_and_csv(hw_cli, two_setups: Path) -> None:
    runs = ["run-slow", "run-fast"]
    text = hw_cli("compare", *runs, "--results", str(two_setups), "--baseline", "fast")
    assert text.code == 0, text.err
    assert "time-to-train (baseline: fast)" in text.out
    said = " ".join(text.out.split())
    assert "slow is 1.25x slower per epoch than fast [" in said and "time-to-train 0.8x [" in said
    table = hw_cli("compare", *runs, "--results", str(two_setups), "--csv")
    rows = list(csv.DictReader(io.StringIO(table.out)))
    assert [r["setup"] for r in rows] == ["slow", "fast"]
    assert float(rows[1]["speedup"]) == pytest.approx(1.25, rel=1e-3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--label", "nope"], "no run in"),
        (["no-such-run"], "no run 'no-such-run'"),
        (["--label", "slow", "--baseline", "zzz"], "baseline 'zzz'"),
        (["--label", "slow", "--cost-per-hour", "abc"], "--cost-per-hour 'abc'"),
        (["--label", "slow", "--cost-per-hour", "other=3"], "no setup 'other'"),
        (["--label", "slow", "--json", "--csv"], "choose one of"),
        ([], "name at least one run"),
    ],
)
def test_compare_bad_input_is_one_line_exit_2(hw_cli, two_setups: Path, args: list[str], message: str) -> None:
    r = hw_cli("compare", *args, "--results", str(two_setups))
    assert r.code == 2
    assert message in r.err and r.err.count("\n") == 1 and "Traceback" not in r.err


@pytest.mark.slow
def test_export_goes_through_the_result_summarizer_with_the_same_score(hw_cli, tmp_path: Path) -> None:
    results = tmp_path / "results"
    run_id = make_run(results, label="mlperf", seeds=list(range(1, 41)), profile="mlperf", drop=4,
                      env={"FAKE_MODE": "no_converge", "FAKE_MODE_SEEDS": "7,19"})
    ours = Store(results).open(run_id).summary
    assert ours.valid and ours.non_converged == 2
    out_dir = tmp_path / "mlcommons"
    r = hw_cli("export", run_id, "--results", str(results), "--mlcommons", str(out_dir), "--system-name", "box",
               "--json")
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert report["same_score"] is True
    assert report["summarizer_minutes"] == pytest.approx(ours.score_ms / 60000, abs=1e-9)
    assert len(report["results"]) == 40
    failing = sorted(x["seed"] for x in report["results"] if not x["compliant"])
    assert failing == [7, 19]  # never reached 0.908: the checker rejects them, as it should
    files = sorted(p.name for p in (out_dir / "results" / "box" / "unet3d").iterdir())
    assert files == sorted([*(f"result_{i}.txt" for i in range(40)), "mltrain.json"])  # the run's own record
    assert (out_dir / "systems" / "box.json").is_file()
    # The summarizer's own command line, as a user would run it.
    summary_csv = tmp_path / "summary.csv"
    done = subprocess.run(
        [sys.executable, "-m", "mlperf_logging.result_summarizer", str(out_dir), "training", "4.0.0",
         "--csv", str(summary_csv)], capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    row = next(csv.DictReader(summary_csv.open()))
    assert row["system"] == "box"
    assert float(row["unet3d"]) == pytest.approx(ours.score_ms / 60000, abs=1e-9)


def test_export_of_a_qualify_run_compares_by_one_rule_and_says_its_own(hw_cli, tmp_path: Path) -> None:
    results = tmp_path / "results"
    run_id = make_run(results, label="q", seeds=list(range(1, 6)))
    r = hw_cli("export", run_id, "--results", str(results), "--mlcommons", str(tmp_path / "out"))
    assert r.code == 0, r.err
    said = " ".join(r.out.split())
    assert "-> same score" in said and "DIFFERENT" not in said
    assert f"run {run_id}'s own score, by its qualify profile's rule (the 1 fastest and 1 slowest dropped" in said
    again = hw_cli("export", run_id, "--results", str(results), "--mlcommons", str(tmp_path / "out"))
    assert again.code == 2 and "export into an empty folder" in again.err


def test_sysinfo_through_the_cli(hw_cli) -> None:
    r = hw_cli("sysinfo", "--json")
    assert r.code == 0
    assert set(json.loads(r.out)) == {"host", "gpus", "storage", "container_engine", "software"}
    bad = hw_cli("sysinfo", "--data", "/no/such/folder")
    assert bad.code == 2 and "no such folder" in bad.err


def test_record_gpu_trace(hw_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.insight import gpu_trace, gpus
    from orchestrator.insight.gpu_source import NvmlGpuSource
    from orchestrator.insight.gpu_trace import TraceGpuSource
    from tests.hardware.fake_nvml import FakeNvml

    missing = hw_cli("sysinfo", "--record-gpu-trace", str(tmp_path / "t.json"))
    if gpu_trace.open_gpu_source().describe().get("available") is False:
        assert missing.code == 2 and "cannot record a GPU trace" in missing.err
    nvml = FakeNvml()
    monkeypatch.setattr(gpu_trace, "open_gpu_source", lambda: NvmlGpuSource(nvml))
    monkeypatch.setattr(gpus, "gpu_info", lambda: {"available": True, "count": 2})
    path = tmp_path / "trace.json"
    r = hw_cli("sysinfo", "--record-gpu-trace", str(path), "--samples", "3", "--interval", "0.05")
    assert r.code == 0, r.err
    trace = json.loads(path.read_text())
    assert len(trace["samples"]) == 3 and trace["gpus"]["count"] == 2
    assert TraceGpuSource(trace).sample()[1].power_w == 62


def test_real_runs_carry_system_and_telemetry_into_compare_and_report(hw_cli, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Through `mltrain run` itself: the manifest holds the system capture, each seed a telemetry series."""
    results = tmp_path / "results"
    for label, epoch_ms in (("a", "1000"), ("b", "500")):
        monkeypatch.setenv("FAKE_EPOCH_MS", epoch_ms)
        monkeypatch.setenv("FAKE_SLEEP_S", "0.02")
        r = hw_cli("run", "fakebench", "--seeds", "1-4", "--label", label, "--results", str(results))
        assert r.code == 0, r.err
    runs = Store(results).list().rows
    run = Store(results).open(runs[0]["run_id"])
    assert run.manifest.system["host"]["threads"] >= 1
    assert all(run.paths.seed(s).telemetry.is_file() for s in run.manifest.seeds)
    r = hw_cli("compare", "--label", "a", "--label", "b", "--results", str(results), "--json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)["rows"]
    assert rows[0]["hardware"] != "unknown"
    assert rows[1]["seconds_per_epoch"]["ratio"]["value"] == pytest.approx(2.0)
    out = tmp_path / "report.html"
    assert hw_cli("report", "--label", "a", "--label", "b", "--results", str(results), "--out", str(out)).code == 0
    assert "host.cpu_model" in out.read_text() and "data:image/svg+xml;base64," in out.read_text()
