"""Fault injection: mltrain is killed (SIGKILL) or stopped (SIGTERM) at a random moment of a run,
then resumed, over seeded trials. Whatever the moment, every seed ends finished exactly once with
fakebench's known time-to-train, nothing of the killed run is left running, and no run stays
"running".

The runs are forked from a warm process (`tests.core.zygote`): each is a real mltrain process,
without paying the interpreter's start-up per trial. The moment falls anywhere from the run being
stored to a little after a clean run of the same plan would have ended, so that trials hit every
phase: a seed running, between seeds, scoring, closing (and, now and then, after the end, or
before the run's first files are all written: a stop there removes them, the run never was).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from orchestrator.results.store import Store
from tests.conftest import PROJECT
from tests.core.running import run_id_of, seed_states, slow_profiles, wait_for, workload_processes
from tests.core.zygote import Zygote

TRIALS = 20
SEEDS = (1, 2, 3)
EPOCHS = {s: 20 + (7 * s) % 11 for s in SEEDS}  # fakebench: seed s needs 20 + 7s mod 11 epochs of 1000 ms

pytestmark = pytest.mark.slow


def test_killed_at_a_random_moment_then_resumed(cli, mltrain_env, tmp_path: Path, monkeypatch, record_property):
    rng = random.Random(1313)
    profiles = slow_profiles(tmp_path, 0.005)
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(profiles))
    zygote = Zygote(PROJECT, {**os.environ, **mltrain_env, "MLTRAIN_SEEDS_FILE": str(profiles)})
    try:
        started = time.monotonic()
        window = clean_run_seconds(zygote, tmp_path / "reference") * 1.1
        seen: Counter[str] = Counter()
        for trial in range(TRIALS):
            seen[one_trial(cli, zygote, tmp_path / f"trial-{trial}", rng, window, trial)] += 1
        took = time.monotonic() - started
    finally:
        zygote.close()
    record_property("fault_injection_trials", TRIALS)
    record_property("fault_injection_wall_s", round(took, 1))
    sys.stderr.write(f"fault injection: {TRIALS} trials in {took:.1f} s (kill window {window:.2f} s):"
                     f" {dict(sorted(seen.items()))}\n")
    assert any(k.startswith("SIGKILL") for k in seen) and any(k.startswith("SIGTERM") for k in seen)


def clean_run_seconds(zygote: Zygote, results: Path) -> float:
    """How long a run of the plan takes from being stored to its end."""
    pid = zygote.run(["run", "fakebench", "--results", str(results)], {}, results.with_suffix(".log"))
    wait_for(lambda: run_id_of(results), 60, "the reference run to be stored")
    stored = time.monotonic()
    assert zygote.wait(pid) == 0, results.with_suffix(".log").read_text()
    return time.monotonic() - stored


def one_trial(cli, zygote: Zygote, results: Path, rng: random.Random, window: float, trial: int) -> str:
    sig = rng.choice((signal.SIGKILL, signal.SIGTERM))
    delay = rng.uniform(0, window)
    log = results.with_suffix(".log")
    pid = zygote.run(["run", "fakebench", "--results", str(results)], {}, log)
    wait_for(lambda: run_id_of(results), 60, "the run to be stored")
    time.sleep(delay)
    finished_before = sorted(s for s, body in seed_states(results).items() if body.get("state") == "finished")
    os.kill(pid, sig)
    code = zygote.wait(pid)
    assert code in (0, -signal.SIGKILL if sig is signal.SIGKILL else 128 + signal.SIGTERM), (trial, log.read_text())
    if sig is signal.SIGTERM:  # an orderly stop leaves no process even before the resume
        assert workload_processes(results) == [], trial
    run_id = run_id_of(results)
    if run_id is None:  # stopped while its first files were written (after the manifest): the run never was
        assert sig is signal.SIGTERM and "before the run was stored" in log.read_text(), (trial, log.read_text())
        assert [p.name for p in results.iterdir() if p.is_dir()] == [], trial
        return "SIGTERM while the run was made"
    logs_before = {s: (results / run_id / "seeds" / str(s) / "output.log").read_bytes() for s in finished_before}

    r = cli("run", "fakebench", "--resume", run_id, "--results", str(results), "--json")

    assert r.code == 0, (trial, sig.name, delay, r.err)
    check_run(results, run_id, logs_before)
    return f"{sig.name} after {len(finished_before)} seed(s)" if code else "too late: the run had ended"


def check_run(results: Path, run_id: str, logs_before: dict[int, bytes]) -> None:
    run = Store(results).open(run_id)
    assert run.manifest.state == "finished" and run.unfinished_seeds() == []
    for seed in SEEDS:
        record = run.records[seed]
        assert run.states[seed].state.value == "finished" and record.status.value == "converged"
        assert record.time_to_train_ms == EPOCHS[seed] * 1000, (seed, record.time_to_train_ms)
        # finished exactly once: no earlier attempt holds a record (only unfinished attempts are archived)
        assert not list(run.paths.seed(seed).root.glob("attempt-*/run.json")), seed
    for seed, log in logs_before.items():  # a seed that had finished was not run again
        assert run.paths.seed(seed).output.read_bytes() == log
        assert not run.paths.seed(seed).attempt(1).exists()
    with sqlite3.connect(results / "index.db") as db:
        rows = db.execute("SELECT seed, state, status, time_to_train_ms FROM seeds WHERE run_id = ?",
                          (run_id,)).fetchall()
        state = db.execute("SELECT state FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    assert sorted(rows) == [(s, "finished", "converged", EPOCHS[s] * 1000) for s in SEEDS]
    assert state == ("finished",)
    assert workload_processes(results) == []
    assert run.paths.lock.read_text() == ""
    summary = json.loads(run.paths.summary.read_text())
    assert summary["converged"] == 3 and summary["unfinished"] == 0
