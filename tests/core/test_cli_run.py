"""`mltrain run` end to end on the fake workload and the local runner."""

import json
import os
from pathlib import Path

import pytest

from orchestrator.results.store import Store
from orchestrator.runners import kinds

# fakebench: seed s needs 20 + (7 s) % 11 epochs of 1000 logged ms each.
EPOCHS = {s: 20 + (7 * s) % 11 for s in range(1, 10)}


def by_hand_olympic_ms(seeds, drop=1):
    times = sorted(EPOCHS[s] * 1000 for s in seeds)
    kept = times[drop: len(times) - drop]
    return sum(kept) / len(kept)


def test_run_scores_like_the_hand_computation_and_is_listed(cli, tmp_path: Path):
    results = tmp_path / "results"
    r = cli("run", "fakebench", "--seeds", "1-9", "--results", str(results))
    assert r.code == 0, r.err
    expected = by_hand_olympic_ms(range(1, 10))
    assert f"time-to-train (olympic mean of 7): {expected / 1000:.2f} s" in r.out
    assert "qualify profile: not an MLPerf result" in r.out and "result: VALID" in r.out
    run_id = next(p.name for p in results.iterdir() if p.is_dir())

    listed = cli("list", "--results", str(results), "--json")
    rows = json.loads(listed.out)
    assert [row["run_id"] for row in rows] == [run_id]
    assert rows[0]["score_ms"] == pytest.approx(expected) and rows[0]["profile"] == "qualify"

    shown = cli("show", run_id, "--results", str(results), "--json")
    data = json.loads(shown.out)
    assert data["summary"]["score_ms"] == pytest.approx(expected)
    assert data["summary"]["time_to_train_ms"]["n"] == 9
    assert {int(s): rec["epochs_to_target"] for s, rec in data["records"].items()} == EPOCHS

    text = cli("show", run_id, "--results", str(results))
    assert run_id in text.out and "olympic mean of 7" in text.out
    scored = cli("score", run_id, "--results", str(results), "--json")
    assert json.loads(scored.out)["score_ms"] == pytest.approx(expected)


@pytest.mark.parametrize(("args", "says"), [
    (("--seeds", "0"), "1 seed(s), but the qualify profile drops the 1 fastest and 1 slowest runs: the result will be"
                       " invalid (give at least 3 seeds for a valid one)"),
    (("--seeds", "1-5", "--profile", "mlperf"), "5 seed(s), but the mlperf profile needs exactly 40 runs"),
])
def test_seeds_that_can_never_score_are_said_before_the_first_seed_runs(cli, tmp_path: Path, args, says,
                                                                       recwarn: pytest.WarningsRecorder):
    r = cli("run", "fakebench", *args, "--results", str(tmp_path))
    assert r.code == 1 and "result: INVALID" in r.out
    # numpy's "Mean of empty slice", from the package checker, reached the terminal: Python shows a user
    # every warning but a ResourceWarning (the Docker SDK leaves one where no engine answers)
    shown = [str(w.message) for w in recwarn.list if not issubclass(w.category, ResourceWarning)]
    assert not shown, shown
    warning = next(i for i, line in enumerate(r.err.splitlines()) if says in line)
    first_seed = next(i for i, line in enumerate(r.err.splitlines()) if line.startswith("seed "))
    assert warning < first_seed, r.err


def test_run_json_output_and_failure_exit_code(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_MODE", "crash")
    monkeypatch.setenv("FAKE_MODE_SEEDS", "2")
    r = cli("run", "fakebench", "--seeds", "1-4", "--results", str(tmp_path), "--json")
    assert r.code == 3  # an infrastructure fault ended a seed
    assert "seed(s) 2 ended by an infrastructure fault (crashed)" in r.err and "--retry-failed" in r.err
    summary = json.loads(r.out)
    assert summary["per_seed"]["2"]["status"] == "crashed"
    assert "fakebench crashed" in summary["per_seed"]["2"]["reason"]
    assert summary["valid"] is True  # one non-converged run is allowed; the crash still fails the command
    # the crash is the dropped slow run: drop only the fastest of seeds 1, 3, 4
    kept = sorted([EPOCHS[1], EPOCHS[3], EPOCHS[4]])[1:]
    assert summary["score_ms"] == pytest.approx(sum(kept) * 1000 / 2)


def test_out_of_memory_is_classified(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_MODE", "oom")
    r = cli("run", "fakebench", "--seeds", "1", "--results", str(tmp_path), "--json")
    assert r.code == 3
    assert json.loads(r.out)["per_seed"]["1"]["status"] == "out_of_memory"


def test_wall_clock_limit_stops_a_hanging_run(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    profiles = tmp_path / "seeds.yaml"
    profiles.write_text(
        "workloads:\n  fakebench:\n    qualify: {seeds: '1', timeout_minutes: 0.03, dataset: {source: synthetic}}\n"
    )
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(profiles))
    monkeypatch.setenv("FAKE_MODE", "hang")
    r = cli("run", "fakebench", "--results", str(tmp_path / "r"), "--json")
    assert r.code == 3
    seed = json.loads(r.out)["per_seed"]["1"]
    assert seed["status"] == "timed_out" and "in epoch 3" in seed["reason"]


def _nothing_written(folder: Path) -> bool:
    return not folder.exists() or not any(p.is_dir() for p in folder.iterdir())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "nosuch"], "unknown workload 'nosuch': known workloads are"),
        (["run", "fakebench", "--seeds", "9-1"], "runs backwards"),
        (["run", "fakebench", "--seeds", "a"], "is not a seed or range"),
        (["run", "fakebench", "--seeds", ""], "empty seed spec"),
        (["run", "fakebench", "--seeds", "1,1"], "given twice"),
        (["run", "fakebench", "--data", "/nonexistent/kits19"], "data folder /nonexistent/kits19: no such folder"),
        (["run", "fakebench", "--profile", "fast"], "'fast' is not one of 'qualify', 'mlperf', 'smoke'"),
        (["run", "fakebench", "--runner", "cloud"],  # the choices, as the runner table declares them
         "'cloud' is not one of " + ", ".join(f"'{name}'" for name in kinds.NAMES)),
        (["show", "no-such-run"], "no run 'no-such-run'"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(cli, tmp_path: Path, args, message):
    results = tmp_path / "results"
    r = cli(*args, "--results", str(results))
    assert r.code == 2, r.err
    first, *how = r.err.splitlines()  # one error line; an indented how-to may follow (a missing data folder)
    assert message in first and all(line.startswith("  ") for line in how) and "Traceback" not in r.err
    assert _nothing_written(results)


def test_a_missing_data_folder_is_followed_by_the_whole_how_to(cli, tmp_path: Path):
    r = cli("run", "fakebench", "--data", str(tmp_path / "none"), "--results", str(tmp_path / "results"))
    assert r.code == 2 and r.err.splitlines() == [f"error: data folder {tmp_path / 'none'}: no such folder",
                                                   "  How to get fakebench's data:",
                                                   "  make one with: mltrain data fakebench synthesize DIR"]


def test_data_that_fails_the_workload_check(cli, tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = cli("run", "fakebench", "--data", str(empty), "--results", str(tmp_path / "results"))
    assert r.code == 2 and "cases.json missing" in r.err and _nothing_written(tmp_path / "results")


def test_invalid_profiles_file(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    bad = tmp_path / "seeds.yaml"
    bad.write_text("workloads:\n  fakebench:\n    qualify: {drop_per_end: many}\n")
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(bad))
    r = cli("run", "fakebench", "--results", str(tmp_path / "results"))
    assert r.code == 2 and "invalid field workloads.fakebench.qualify.drop_per_end" in r.err
    assert _nothing_written(tmp_path / "results")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes any folder")
def test_unreadable_results_folder(cli, tmp_path: Path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    r = cli("run", "fakebench", "--results", str(locked))
    assert r.code == 2 and "not readable and writable" in r.err


def test_results_path_that_is_a_file(cli, tmp_path: Path):
    afile = tmp_path / "results"
    afile.write_text("x")
    r = cli("run", "fakebench", "--results", str(afile))
    assert r.code == 2 and "is not a folder" in r.err


def test_manifest_records_profile_seeds_runner_and_versions(cli, tmp_path: Path):
    results = tmp_path / "results"
    r = cli("run", "fakebench", "--seeds", "random:3", "--results", str(results))
    assert r.code == 0, r.err
    run_id = next(p.name for p in results.iterdir() if p.is_dir())
    m = Store(results).open(run_id).manifest.to_json()
    assert m["profile"] == "qualify" and m["seeds_random"] and len(m["seeds"]) == 3 and m["runner"] == "local"
    assert m["versions"]["mlperf-logging"] and m["ended_at"] and m["state"] == "finished"
    assert m["env"]["QUALITY_THRESHOLD"] == "0.908" and m["env"]["MLTRAIN_PROFILE"] == "qualify"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run"], "Missing argument 'workload'"),
        (["run", "fakebench", "--seeds"], "Option '--seeds' requires an argument"),
        (["run", "fakebench", "--colour", "red"], "No such option: --colour"),
        (["frobnicate"], "No such command 'frobnicate'"),
    ],
)
def test_command_line_mistakes_are_one_line_usage_errors(cli, args, message):
    r = cli(*args)
    assert r.code == 2 and message in r.err and r.err.count("\n") == 1 and "internal error" not in r.err


def test_each_seeds_job_is_checked_by_the_runner_once(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Every seed's job is checked before anything is written, and not again when it runs (issue 37:
    twice a seed before)."""
    from orchestrator.runners.local import LocalRunner

    checked: list[str] = []
    check = LocalRunner.check_job
    monkeypatch.setattr(LocalRunner, "check_job", lambda self, spec: (checked.append(spec.name), check(self, spec)))
    r = cli("run", "fakebench", "--seeds", "1-3", "--results", str(tmp_path), "--json")
    assert r.code == 0, r.err
    assert sorted(checked) == ["seed1", "seed2", "seed3"]
