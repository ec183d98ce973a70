"""Nobody in: a run is written by one process at a time, under its lock."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.errors import RunBusy
from orchestrator.results.lock import RunLock
from orchestrator.results.store import Store
from tests.conftest import PROJECT
from tests.core.running import in_state, run_id_of, slow_profiles, wait_for, workload_processes


def test_a_lock_names_its_holder_refuses_a_second_and_clears_on_release(tmp_path: Path):
    path = tmp_path / "run.lock"
    first = RunLock(path, "r1")
    held = json.loads(path.read_text())
    assert held["pid"] == os.getpid() and held["host"] == socket.gethostname() and held["started_at"]
    with pytest.raises(RunBusy, match=rf"run r1 is in use by PID {os.getpid()} on {socket.gethostname()} \(since"):
        RunLock(path, "r1")  # a second open file description: refused even in the same process
    first.release()
    first.release()  # idempotent
    assert path.read_text() == ""
    again = RunLock(path, "r1")
    assert again.note == "" and again.held
    again.release()


def test_a_stale_lock_of_a_dead_process_is_taken_over_with_a_note(tmp_path: Path):
    path = tmp_path / "run.lock"
    code = (f"from orchestrator.results.lock import RunLock; from pathlib import Path; import os\n"
            f"held = RunLock(Path({str(path)!r}), 'r')\nos.kill(os.getpid(), 9)")
    dead = subprocess.run([sys.executable, "-c", code], cwd=PROJECT, env={**os.environ, "PYTHONPATH": str(PROJECT)})
    assert dead.returncode == -9
    left = json.loads(path.read_text())
    taken = RunLock(path, "r")
    assert taken.note == (f"took over the lock of run r left by PID {left['pid']} on {left['host']} (since"
                          f" {left['started_at']}, {left['command']}): that process is gone")
    taken.release()


def test_concurrent_resume_is_refused_within_a_second_and_the_live_run_ends_well(
    cli, cli_process, tmp_path: Path, record_property
):
    results = tmp_path / "results"
    live = cli_process("run", "fakebench", "--results", str(results), "--json",
                       extra_env={"MLTRAIN_SEEDS_FILE": str(slow_profiles(tmp_path, 0.12))})
    wait_for(lambda: in_state(results, "running"), 60, "a running seed")
    run_id = run_id_of(results)
    cli("list", "--results", str(results))  # the in-process CLI is warm: what is timed is the refusal itself

    started = time.perf_counter()
    r = cli("run", "fakebench", "--resume", run_id, "--results", str(results))
    in_process_s = time.perf_counter() - started
    started = time.perf_counter()
    child = subprocess.run([sys.executable, "-m", "orchestrator.cli", "run", "fakebench", "--resume", run_id,
                            "--results", str(results)], cwd=PROJECT, env=os.environ.copy(), capture_output=True,
                           text=True, timeout=60)
    fresh_process_s = time.perf_counter() - started
    scored = cli("score", run_id, "--results", str(results))

    out, err = live.communicate(timeout=120)
    record_property("refusal_in_process_s", round(in_process_s, 3))
    record_property("refusal_fresh_process_s", round(fresh_process_s, 3))
    sys.stderr.write(f"concurrent --resume refused in {in_process_s:.3f} s in process,"
                     f" {fresh_process_s:.3f} s as a fresh process\n")
    assert r.code == 2 and r.err.count("\n") == 1, r.err
    assert f"run {run_id} is in use by PID {live.pid} on {socket.gethostname()}" in r.err
    assert f"kill {live.pid}" in r.err
    assert in_process_s < 1.0
    assert child.returncode == 2 and f"PID {live.pid}" in child.stderr
    assert scored.code == 2 and "is in use by" in scored.err
    assert live.returncode == 0, err
    assert json.loads(out)["converged"] == 3
    run = Store(results).open(run_id)
    assert run.manifest.state == "finished" and run.unfinished_seeds() == []
    assert not list(run.paths.root.glob("seeds/*/attempt-*"))  # nobody moved a live attempt away
    assert (run.paths.lock).read_text() == ""  # released


def test_sigkilled_run_leaves_a_stale_lock_that_resume_takes_over(cli, cli_process, tmp_path: Path):
    results = tmp_path / "results"
    child = cli_process("run", "fakebench", "--results", str(results),
                        extra_env={"MLTRAIN_SEEDS_FILE": str(slow_profiles(tmp_path, 0.05))})
    wait_for(lambda: in_state(results, "running"), 60, "a running seed")
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    run_id = run_id_of(results)
    r = cli("run", "fakebench", "--resume", run_id, "--results", str(results), "--json")
    assert r.code == 0, r.err
    assert f"warning: took over the lock of run {run_id} left by PID {child.pid}" in r.err
    assert "that process is gone" in r.err
    assert json.loads(r.out)["converged"] == 3 and workload_processes(results) == []
