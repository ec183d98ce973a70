"""Nothing hung: signals stop a run in order, a killed mltrain leaves nothing that --resume races
with, a seed killed from outside is retried by --retry-failed, and the wall-clock limit holds
whatever happens to the thread that reads a seed's output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from orchestrator.results.store import Store
from orchestrator.runners import jobs as jobs_module
from tests.conftest import PROJECT
from tests.core.running import (
    in_state,
    run_id_of,
    slow_profiles,
    terminated_while_pydantic_builds_a_validator,
    wait_for,
    workload_processes,
)

EPOCHS = {s: 20 + (7 * s) % 11 for s in range(1, 10)}


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_stop_the_seed_in_order_and_say_how_to_resume(
    cli, cli_process, tmp_path: Path, sig: signal.Signals, code: int
):
    results = tmp_path / "results"
    child = cli_process("run", "fakebench", "--results", str(results),
                        extra_env={"MLTRAIN_SEEDS_FILE": str(slow_profiles(tmp_path, 0.05))})
    def seed_logging() -> bool:  # a seed runs and its output.log exists (what the resume archives)
        running = in_state(results, "running")
        return bool(running and workload_processes(results)
                    and (results / str(run_id_of(results)) / "seeds" / str(running[0]) / "output.log").is_file())

    wait_for(seed_logging, 60, "a running seed writing its log")
    running = in_state(results, "running")
    child.send_signal(sig)
    _, err = child.communicate(timeout=60)
    run_id = run_id_of(results)

    assert child.returncode == code, err
    line = err.strip().splitlines()[-1]
    assert line == (f"error: interrupted by {sig.name}: seed {running[0]} stopped; finished seeds are kept;"
                    f" complete the set with `mltrain run fakebench --resume {run_id} --results {results}`")
    run = Store(results).open(run_id)
    assert run.manifest.state == "interrupted" and run.states[running[0]].state == "interrupted"
    assert workload_processes(results) == []  # the seed's process group was stopped
    assert run.paths.lock.read_text() == ""

    r = cli("run", "fakebench", "--resume", run_id, "--results", str(results), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["converged"] == 3
    assert (run.paths.seed(running[0]).attempt(1) / "output.log").is_file()


def test_a_killed_orchestrator_leaves_nothing_resume_would_race_with(cli, cli_process, tmp_path: Path,
                                                                     monkeypatch):
    results = tmp_path / "results"
    profiles = slow_profiles(tmp_path, 0.02, timeout_minutes=0.05, FAKE_MODE="hang", FAKE_MODE_SEEDS="2")
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(profiles))
    child = cli_process("run", "fakebench", "--results", str(results), extra_env={"MLTRAIN_SEEDS_FILE": str(profiles)})
    leader = wait_for(lambda: 2 in in_state(results, "running") and workload_processes(results, "run_and_time.sh 2"),
                      60, "seed 2's leader")[0]
    worker = wait_for(lambda: workload_processes(results, "fake_train.py 2"), 60, "seed 2's python")[0]
    output = results / run_id_of(results) / "seeds" / "2" / "output.log"
    wait_for(lambda: output.read_text().count('"block_stop"') >= 3, 60, "seed 2 to hang (it does after epoch 3)")
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    # the seed's leader dies with mltrain (parent-death signal); its child hangs on, found on resume
    wait_for(lambda: leader not in workload_processes(results), 10, "the leader to die with mltrain")
    assert workload_processes(results) == [worker]

    r = cli("run", "fakebench", "--resume", run_id_of(results), "--results", str(results), "--json")
    assert r.code == 3, r.err  # seed 2 hangs again and meets the wall-clock limit: an infrastructure fault
    assert f"stopped what an earlier mltrain left running: process {worker}" in r.err, r.err
    assert json.loads(r.out)["per_seed"]["2"]["status"] == "timed_out"
    assert workload_processes(results) == []


def test_a_seed_killed_from_outside_is_killed_not_finished_and_retry_failed_reruns_it(cli, tmp_path: Path,
                                                                                     monkeypatch):
    results = tmp_path / "results"
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(slow_profiles(tmp_path, 0.05)))

    def kill_seed_two() -> None:  # what the kernel's OOM killer or an operator's kill -9 does
        worker = wait_for(lambda: 2 in in_state(results, "running") and workload_processes(results, "fake_train.py 2"),
                          60, "seed 2")[0]
        time.sleep(0.2)
        os.kill(worker, signal.SIGKILL)

    killer = threading.Thread(target=kill_seed_two, daemon=True)
    killer.start()
    r = cli("run", "fakebench", "--results", str(results), "--json")
    killer.join(timeout=10)
    assert r.code == 3, r.err
    assert json.loads(r.out)["per_seed"]["2"]["status"] == "killed"
    run_id = run_id_of(results)
    assert (f"seed(s) 2 ended by an infrastructure fault (killed): rerun them with `mltrain run fakebench"
            f" --resume {run_id} --results {results} --retry-failed`") in r.err

    again = cli("run", "fakebench", "--resume", run_id, "--results", str(results), "--json")
    assert again.code == 3  # --resume alone does not rerun a finished seed
    retried = cli("run", "fakebench", "--resume", run_id, "--results", str(results), "--retry-failed", "--json")
    assert retried.code == 0, retried.err
    summary = json.loads(retried.out)
    assert summary["converged"] == 3 and summary["per_seed"]["2"]["time_to_train_ms"] == EPOCHS[2] * 1000
    attempt = Store(results).open(run_id).paths.seed(2).attempt(1)
    assert json.loads((attempt / "run.json").read_text())["status"] == "killed"
    assert json.loads((attempt / "state.json").read_text())["status"] == "killed"
    assert (attempt / "output.log").is_file() and not Store(results).open(run_id).paths.seed(1).attempt(1).exists()


def test_when_the_output_thread_dies_the_seed_is_stopped_and_recorded_as_a_crash(cli, tmp_path: Path,
                                                                                monkeypatch):
    def broken_pump(self) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(jobs_module._Follower, "_pump", broken_pump)
    monkeypatch.setenv("FAKE_MODE", "hang")  # would run forever; the profile's limit is a minute
    started = time.monotonic()
    r = cli("run", "fakebench", "--seeds", "1", "--results", str(tmp_path / "r"), "--json")
    assert time.monotonic() - started < 30
    assert r.code == 3, r.err
    seed = json.loads(r.out)["per_seed"]["1"]
    assert seed["status"] == "crashed" and "lost the job's output (OSError: [Errno 28] No space left" in seed["reason"]
    assert workload_processes(tmp_path / "r") == []


def test_a_stuck_output_thread_does_not_lift_the_wall_clock_limit(cli, tmp_path: Path, monkeypatch):
    stuck = threading.Event()

    def stuck_pump(self) -> None:
        stuck.wait(120)  # never returns within the test: the reader is wedged

    monkeypatch.setattr(jobs_module._Follower, "_pump", stuck_pump)
    monkeypatch.setattr(jobs_module, "STOP_WAIT_S", 1.0)
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(slow_profiles(tmp_path, 0.02, timeout_minutes=0.03,
                                                               FAKE_MODE="hang")))
    started = time.monotonic()
    r = cli("run", "fakebench", "--seeds", "1", "--results", str(tmp_path / "r"), "--json")
    took = time.monotonic() - started
    stuck.set()
    assert r.code == 3, r.err
    assert took < 20  # 1.8 s limit + 1 s to stop, plus start-up
    seed = json.loads(r.out)["per_seed"]["1"]
    assert seed["status"] == "crashed" and "did not end within 1 s of stopping" in seed["reason"]
    assert workload_processes(tmp_path / "r") == []


def test_a_signal_landing_while_a_seed_starts_leaves_no_process_behind(cli, tmp_path: Path, monkeypatch):
    """The job is started but its handle never reached the seed loop (the signal came while `submit`
    returned): the loop cannot stop it in order, so the run's leftovers are removed on the way out."""
    from orchestrator.runners.local import LocalRunner

    results = tmp_path / "results"
    monkeypatch.setenv("MLTRAIN_SEEDS_FILE", str(slow_profiles(tmp_path, 0.05, FAKE_MODE="hang")))
    submit = LocalRunner.submit

    def started_then_interrupted(self, job):
        submit(self, job)
        wait_for(lambda: workload_processes(results), 30, "the seed's process")
        raise KeyboardInterrupt

    monkeypatch.setattr(LocalRunner, "submit", started_then_interrupted)
    r = cli("run", "fakebench", "--results", str(results))
    assert r.code == 130, r.err
    assert "interrupted by SIGINT" in r.err
    time.sleep(1)  # a process left behind would still be alive: the seed hangs after epoch 3
    assert workload_processes(results) == []


def test_a_signal_after_the_run_is_stored_still_exits_with_its_own_code_and_says_so(cli, tmp_path: Path,
                                                                                    monkeypatch):
    """A stop outside the run loop (here while the score is shown) reaches typer, which returns any
    KeyboardInterrupt as a silent 130: SIGTERM must still be 143, with its one line."""
    from orchestrator.render import tables

    show_score = tables.show_score

    def show_then_terminated(*args, **kwargs):
        show_score(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)  # the handler runs here

    monkeypatch.setattr(tables, "show_score", show_then_terminated)
    r = cli("run", "fakebench", "--results", str(tmp_path / "results"))
    assert r.code == 143, r.err
    assert r.err.strip().splitlines()[-1] == "error: interrupted by SIGTERM"


def test_a_stop_a_library_made_its_own_error_still_stops_the_run_in_order(cli, tmp_path: Path, monkeypatch):
    """A seed's record met SIGTERM while pydantic built a validator: the run was closed 'incomplete'
    and mltrain said 'internal error: SchemaError ... Stop: SIGTERM' with exit code 1."""
    from orchestrator.session import loop

    with_host_facts = loop.with_host_facts

    def terminated_on_seed_2(record, *args):
        if record.seed == 2:
            terminated_while_pydantic_builds_a_validator()
        return with_host_facts(record, *args)

    monkeypatch.setattr(loop, "with_host_facts", terminated_on_seed_2)
    results = tmp_path / "results"
    r = cli("run", "fakebench", "--results", str(results))
    run_id = run_id_of(results)

    assert r.code == 143, r.err
    assert r.err.strip().splitlines()[-1] == (
        f"error: interrupted by SIGTERM: seed 2 stopped; finished seeds are kept; complete the set with"
        f" `mltrain run fakebench --resume {run_id} --results {results}`")
    run = Store(results).open(run_id)
    assert run.manifest.state == "interrupted" and run.states[2].state == "interrupted" and 2 not in run.records
    assert run.states[1].state == "finished"

    monkeypatch.setattr(loop, "with_host_facts", with_host_facts)
    resumed = cli("run", "fakebench", "--resume", run_id, "--results", str(results), "--json")
    assert resumed.code == 0, resumed.err
    assert json.loads(resumed.out)["converged"] == len(run.states) == 9  # fakebench's default profile


def test_a_stop_a_library_made_its_own_error_outside_the_run_exits_with_the_signals_code(cli, tmp_path: Path,
                                                                                       monkeypatch):
    from orchestrator.render import tables

    def terminated_while_shown(*args, **kwargs):
        terminated_while_pydantic_builds_a_validator()

    monkeypatch.setattr(tables, "show_score", terminated_while_shown)
    r = cli("run", "fakebench", "--results", str(tmp_path / "results"))
    assert r.code == 143, r.err
    assert r.err.strip().splitlines()[-1] == "error: interrupted by SIGTERM"


def test_a_signal_while_the_run_is_made_leaves_no_run_behind(cli, tmp_path: Path, monkeypatch):
    """SIGTERM while a new run's rows were indexed: mltrain said 'before the run was stored', and left
    the run's folder behind, its manifest 'running' for good and no word on how to resume it."""
    from orchestrator.results.stored_run import StoredRun

    sync = StoredRun.sync

    def terminated_while_made(self, *args, **kwargs):
        sync(self, *args, **kwargs)
        if self.manifest.state == "running" and not self.records:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler raises here

    monkeypatch.setattr(StoredRun, "sync", terminated_while_made)
    results = tmp_path / "results"
    r = cli("run", "fakebench", "--results", str(results))
    assert r.code == 143, r.err
    assert r.err.strip().splitlines()[-1] == "error: interrupted by SIGTERM before the run was stored"
    assert [p.name for p in results.iterdir() if p.is_dir()] == []
    monkeypatch.setattr(StoredRun, "sync", sync)
    listed = cli("list", "--results", str(results), "--json")
    assert listed.code == 0 and json.loads(listed.out) == [], listed.err


def test_a_signal_while_the_commands_load_is_a_stop_not_a_traceback(mltrain_env, tmp_path: Path):
    """SIGTERM in mltrain's first tenth of a second (its commands' modules loading): a traceback ending
    in 'orchestrator.signals.Stop: SIGTERM', exit 1."""
    code = ("import os, signal, sys, time\n"
            "from orchestrator import cli\n"
            "build_app = cli.build_app\n"
            "def terminated_while_loading():\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "    time.sleep(1)  # the handler raises here\n"
            "    return build_app()\n"
            "cli.build_app = terminated_while_loading\n"
            "sys.exit(cli.main(sys.argv[1:]))\n")
    done = subprocess.run([sys.executable, "-c", code, "list", "--results", str(tmp_path / "r")], cwd=PROJECT,
                          env={**os.environ, **mltrain_env}, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (143, "error: interrupted by SIGTERM\n")


def test_a_signal_ignored_when_mltrain_starts_stays_ignored_and_the_others_stop_it():
    from orchestrator.signals import Stop, stop_on_signals

    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup leaves it
    term = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(Stop) as stopped, stop_on_signals():
            os.kill(os.getpid(), signal.SIGHUP)  # ignored: nothing happens
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs between bytecodes; Stop is raised before this ends
        assert stopped.value.exit_code == 143
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is term  # the previous handler is back
    finally:
        signal.signal(signal.SIGHUP, before)
