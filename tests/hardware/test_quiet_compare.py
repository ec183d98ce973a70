"""compare, report and show judge the quiet-host evidence before the numbers, name what differs
between two setups, never let a smoke run read as a result, and refuse to compare across profiles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.results.store import Store
from tests.hardware.stored_runs import make_run

SEEDS_YAML = """
default_profile: qualify
workloads:
  fakebench:
    qualify: {seeds: "1-3", drop_per_end: 1, max_non_converged: 1, timeout_minutes: 1,
              dataset: {source: synthetic}}
    mlperf: {timeout_minutes: 1, dataset: {source: synthetic}}
    smoke: {seeds: "1-3", drop_per_end: 1, max_non_converged: 1, target: 0.5, timeout_minutes: 1,
            dataset: {source: synthetic}}
"""
REAL_TIME = {"FAKE_SLEEP_S": "0.25", "FAKE_EPOCH_MS": "250", "FAKE_BASE_EPOCHS": "8", "FAKE_EPOCH_JITTER": "0.05"}
"""fakebench logging in real time: each seed runs 4 to 5 s, long enough for its telemetry to judge it."""


def _said(out: str) -> str:
    """What was printed, as one line (prose wraps at the terminal's width)."""
    return " ".join(out.split())


def _verdict(out: str, start: str) -> str:
    """The verdict sentence that starts with ``start``, unwrapped."""
    said = _said(out)
    return said[said.index(start):].split(" host of ")[0]


def _run(cli_process, results: Path, label: str, seeds: str, env: dict[str, str]) -> None:
    proc = cli_process("run", "fakebench", "--seeds", seeds, "--label", label, "--results", str(results),
                       extra_env=env)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err


@pytest.mark.cpu_hog
@pytest.mark.slow
def test_a_run_beside_a_cpu_hog_is_not_attributable_and_names_the_hogs_share(cli_process, tmp_path: Path) -> None:
    """The same fakebench setup twice, the second beside a CPU hog this test starts (one busy process per
    CPU, not mltrain's): compare says the difference is not the setups', naming the hog's share."""
    seeds_file = tmp_path / "seeds.yaml"
    seeds_file.write_text(SEEDS_YAML)
    env = {**REAL_TIME, "MLTRAIN_SEEDS_FILE": str(seeds_file)}
    results = tmp_path / "results"
    _run(cli_process, results, "alone", "1-3", env)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in os.sched_getaffinity(0)]
    try:
        _run(cli_process, results, "hog", "4-6", env)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    hog_run = next(r["run_id"] for r in Store(results).list().rows if r["label"] == "hog")
    verdicts = [record.quiet_host for record in Store(results).open(hog_run).finished_records().values()]
    assert all(v.verdict == "disturbed" and v.causes[0].cause == "other_processes" for v in verdicts), verdicts
    assert all(v.causes[0].share >= 0.5 for v in verdicts)  # the hog ran through every seed
    proc = cli_process("compare", "--label", "alone", "--label", "hog", "--results", str(results),
                       extra_env={"COLUMNS": "400"})
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    line = next(line for line in out.splitlines() if line.startswith("hog vs alone:"))
    assert "not attributable to the setups" in line and "decided" not in line
    assert "hog ran on a disturbed host in 3 of 3 seeds (" in line and "details: mltrain show " in line
    share = verdicts[0].causes[0].share
    assert f"the host ran other work in {share:.0%} of the seed's time" in line
    assert "host of hog: disturbed in 3 of 3 seeds" in out


def test_two_quiet_setups_decide_as_today(hw_cli, tmp_path: Path) -> None:
    results = tmp_path / "results"
    make_run(results, label="slow", seeds=[1, 2, 3, 4, 5], env={"FAKE_EPOCH_MS": "1000"}, other_cpu_pct=1.0)
    make_run(results, label="fast", seeds=[1, 2, 3, 4, 5], env={"FAKE_EPOCH_MS": "800"}, other_cpu_pct=2.0)
    r = hw_cli("compare", "--label", "slow", "--label", "fast", "--results", str(results))
    assert r.code == 0, r.err
    assert "host of slow: quiet (5 of 5 seeds)" in r.out and "host of fast: quiet (5 of 5 seeds)" in r.out
    line = _verdict(r.out, "fast is ")
    assert line.startswith("fast is 1.25x faster per epoch than slow [") and "not decided" not in line
    assert "not attributable" not in line and "not measured" not in line


def test_a_disturbed_stored_run_is_not_attributable_in_compare_report_and_show(hw_cli, tmp_path: Path) -> None:
    results = tmp_path / "results"
    make_run(results, label="slow", seeds=[1, 2, 3, 4, 5], env={"FAKE_EPOCH_MS": "1000"}, other_cpu_pct=1.0)
    busy = make_run(results, label="fast", seeds=[1, 2, 3, 4, 5], env={"FAKE_EPOCH_MS": "800"}, other_cpu_pct=60.0)
    r = hw_cli("compare", "--label", "slow", "--label", "fast", "--results", str(results))
    line = _verdict(r.out, "fast vs slow:")
    assert "not attributable to the setups: fast ran on a disturbed host in 5 of 5 seeds" in line
    assert "other processes used 60% of its CPU" in line and "details: mltrain show " in line
    out = tmp_path / "r.html"
    made = hw_cli("report", "--label", "slow", "--label", "fast", "--results", str(results), "--out", str(out))
    assert made.code == 0 and "not attributable to the setups" in out.read_text()
    shown = _said(hw_cli("show", busy, "--results", str(results)).out)
    assert "quiet host: 5 disturbed of 5 seeds" in shown
    assert "seeds 1, 2, 3, 4, 5: host disturbed: the host ran other work in 100% of the seed's time" in shown


def test_across_profiles_compare_and_report_exit_2_unless_forced(hw_cli, tmp_path: Path) -> None:
    results = tmp_path / "results"
    make_run(results, label="q", seeds=[1, 2, 3])
    make_run(results, label="s", seeds=[1, 2, 3], profile="smoke")
    r = hw_cli("compare", "--label", "q", "--label", "s", "--results", str(results))
    assert r.code == 2 and "different profiles (q: qualify, s: smoke)" in r.err and r.out == ""
    out = tmp_path / "r.html"
    assert hw_cli("report", "--label", "q", "--label", "s", "--results", str(results), "--out", str(out)).code == 2
    assert not out.exists()
    forced = hw_cli("compare", "--label", "q", "--label", "s", "--results", str(results), "--force")
    said = _said(forced.out)
    assert forced.code == 0 and "[smoke: proves the pipeline, comparable with nothing] s vs q: not comparable: s was" \
        " made with the smoke profile, q with the qualify profile" in said


def test_a_smoke_comparison_never_reads_as_a_result(hw_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = tmp_path / "results"
    make_run(results, label="a", seeds=[1, 2, 3, 4, 5], env={"FAKE_EPOCH_MS": "1000"}, profile="smoke")
    run_b = make_run(results, label="b", seeds=[1, 2, 3, 4, 5], env={"FAKE_EPOCH_MS": "800"}, profile="smoke")
    for columns in ("80", "200"):
        monkeypatch.setenv("COLUMNS", columns)
        r = hw_cli("compare", "--label", "a", "--label", "b", "--results", str(results))
        assert r.code == 0, r.err
        assert "decided" not in r.out and " *" not in r.out  # no decision, no significance star
        assert "[smoke: proves the pipeline, comparable with nothing] b is 1.25x faster per epoch" in _said(r.out)
        assert "MLPerf score" not in r.out
    shown = hw_cli("show", run_b, "--results", str(results)).out.splitlines()
    caveat = "[smoke: proves the pipeline, comparable with nothing]"
    numbered = [line for line in shown if any(word in line for word in ("olympic", "converged runs:", "runs 5,"))]
    assert len(numbered) == 3 and all(line.startswith(caveat) for line in numbered), shown
    assert any(line.strip() == f"{caveat} Runs" for line in shown)  # the per-seed table's title
    out = tmp_path / "r.html"
    assert hw_cli("report", "--label", "a", "--label", "b", "--results", str(results), "--out", str(out)).code == 0
    page = out.read_text()
    assert "decided" not in page and page.count("smoke: proves the pipeline, comparable with nothing") >= 3


def test_the_difference_table_names_runner_and_image_when_only_they_differ(hw_cli, tmp_path: Path) -> None:
    results = tmp_path / "results"
    system = {"host": {"cpu_model": "Test CPU", "usable_cpus": 2}, "gpus": {"available": False, "reason": "none"}}
    make_run(results, label="cpu-b", seeds=[1, 2, 3, 4, 5], env={"FAKE_EPOCH_MS": "1000"}, system=system,
             other_cpu_pct=1.0)
    make_run(results, label="docker", seeds=[1, 2, 3, 4, 5], env={"FAKE_EPOCH_MS": "1750"}, system=system,
             other_cpu_pct=1.0, runner="docker", provenance={
                 "runner": "docker", "image": {"tag": "mltrain-fakebench:abc", "id": "sha256:" + "ab" * 32,
                                               "digest": None}})
    r = hw_cli("compare", "--label", "cpu-b", "--label", "docker", "--results", str(results), "--json")
    assert json.loads(r.out)["rows"][1]["differs"] == ["image", "runner"]
    r = hw_cli("compare", "--label", "cpu-b", "--label", "docker", "--results", str(results))
    table = r.out.split("the same in both")[0]
    lines = table.splitlines()
    rule = next(i for i, line in enumerate(lines) if "───" in line)
    differing = [line.split()[0] for line in lines[rule + 1:] if line.strip()]
    assert table.startswith("what differs between the setups") and differing == ["image", "runner"], table
    assert "sha256:abababababab" in table and "none (local)" in table
    said = _said(r.out)
    assert "the same in both: GPU none, GPU count 0, nodes 1, driver none" in said
    assert "host CPU Test CPU (2 CPUs)" in said
    line = _verdict(r.out, "docker is ")
    assert "per epoch than cpu-b [" in line and "(image, runner)" in line and "hardware" not in line
