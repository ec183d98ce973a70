"""A killed or interrupted orchestrator loses nothing; --resume completes the set."""

import json
import signal
import sqlite3
import time
from pathlib import Path

from orchestrator.results.store import Store


def wait_for(predicate, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def finished_seeds(results: Path) -> list[int]:
    seeds = []
    for state in results.glob("*/seeds/*/state.json"):
        try:
            if json.loads(state.read_text())["state"] == "finished":
                seeds.append(int(state.parent.name))
        except (ValueError, OSError):
            continue
    return sorted(seeds)


def index_rows(results: Path) -> dict[int, tuple]:
    with sqlite3.connect(results / "index.db") as db:
        return {row[0]: row[1:] for row in db.execute("SELECT seed, state, status, time_to_train_ms FROM seeds")}


def test_sigkill_then_resume_runs_only_unfinished_seeds(cli, cli_process, tmp_path: Path):
    results = tmp_path / "results"
    child = cli_process("run", "fakebench", "--seeds", "1-6", "--results", str(results),
                        extra_env={"FAKE_SLEEP_S": "0.04"})
    wait_for(lambda: len(finished_seeds(results)) >= 2)
    child.send_signal(signal.SIGKILL)
    child.wait()
    done_before = finished_seeds(results)
    assert 2 <= len(done_before) < 6
    run_id = next(p.name for p in results.iterdir() if p.is_dir())
    logs_before = {s: (results / run_id / "seeds" / str(s) / "output.log").read_bytes() for s in done_before}

    r = cli("run", "fakebench", "--resume", run_id, "--results", str(results), "--json")
    assert r.code == 0, r.err
    assert f"run {run_id}" in r.err and json.loads(r.out)["converged"] == 6
    run = Store(results).open(run_id)
    assert run.unfinished_seeds() == [] and run.manifest.state == "finished"
    for seed, log in logs_before.items():  # finished seeds were not run again
        assert (run.paths.seed(seed).output).read_bytes() == log
        assert not (run.paths.seed(seed).root / "attempt-1").exists()
    rows = index_rows(results)
    assert sorted(rows) == [1, 2, 3, 4, 5, 6]
    assert all(state == "finished" and status == "converged" for state, status, _ in rows.values())
    assert {s: rows[s][2] for s in rows} == {s: r.time_to_train_ms for s, r in run.records.items()}
    listed = json.loads(cli("list", "--results", str(results), "--json").out)
    assert listed[0]["converged"] == 6 and listed[0]["state"] == "finished"


def test_ctrl_c_stops_the_run_marks_the_seed_and_resume_finishes(cli, cli_process, tmp_path: Path):
    results = tmp_path / "results"
    child = cli_process("run", "fakebench", "--seeds", "1-3", "--results", str(results),
                        extra_env={"FAKE_MODE": "hang", "FAKE_MODE_SEEDS": "2"})
    wait_for(lambda: any(
        json.loads(p.read_text()).get("state") == "running" for p in results.glob("*/seeds/2/state.json")
    ))
    time.sleep(0.5)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130 and "interrupted" in err
    run_id = next(p.name for p in results.iterdir() if p.is_dir())
    run = Store(results).open(run_id)
    assert run.states[2].state == "interrupted" and run.manifest.state == "interrupted"
    assert run.unfinished_seeds() == [2, 3]
    r = cli("run", "fakebench", "--resume", run_id, "--results", str(results), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["converged"] == 3
    assert (run.paths.seed(2).root / "attempt-1" / "output.log").is_file()  # the interrupted attempt is kept


def test_resume_refuses_new_seeds(cli, tmp_path: Path):
    results = tmp_path / "results"
    assert cli("run", "fakebench", "--seeds", "1-3", "--results", str(results)).code == 0
    run_id = next(p.name for p in results.iterdir() if p.is_dir())
    r = cli("run", "fakebench", "--resume", run_id, "--seeds", "1-3", "--results", str(results))
    assert r.code == 2 and "drop --seeds" in r.err


def test_a_corrupt_index_is_replaced_not_an_error(cli, tmp_path: Path):
    """The index is mltrain's cache: a damaged one is rebuilt (issue 22: it used to be exit 2, and
    every `run` tried against it left a stopped run behind)."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "index.db").write_text("not a database")
    r = cli("list", "--results", str(results))
    assert r.code == 0 and r.err == "", r.err
