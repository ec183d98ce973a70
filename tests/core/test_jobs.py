"""The one way a job runs (`orchestrator.runners.jobs.run_job`), one test per promise, on the real
local runner and the fake workload: output kept as it arrives, the wall-clock limit held whatever the
output thread does, a stop signal stopping the job in order, what a job left found by its run id,
nothing written for a job the runner refuses, and an outcome that explains itself from its tail."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from orchestrator.config.workloads import Workload, load_workload
from orchestrator.errors import ConfigError
from orchestrator.results.records import Exit
from orchestrator.runners import jobs as jobs_module
from orchestrator.runners import proc
from orchestrator.runners.base import JobSpec
from orchestrator.runners.jobs import run_job
from orchestrator.runners.local import LocalRunner
from orchestrator.runners.outcome import explain_exit
from orchestrator.signals import Stop, stop_on_signals
from tests.conftest import PROJECT, TEST_WORKLOADS

WAIT_FOR_FILE = """
import os, sys, time
print("first line", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
print("second line", flush=True)
"""

STOPPED_IN_ORDER = """
import signal, subprocess, sys, time
subprocess.Popen(["sleep", "300"], start_new_session=True)  # escapes the job's process group
def stop(signum, frame):
    print("asked to stop: cleaning up", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("running", flush=True)
while True:
    time.sleep(0.05)
"""


@pytest.fixture
def fakebench() -> Workload:
    return load_workload(TEST_WORKLOADS / "fakebench")


def spec(fakebench: Workload, folder: Path, command: tuple[str, ...], *, run_id: str, args: tuple[str, ...] = (),
         env: dict[str, str] | None = None) -> JobSpec:
    return JobSpec(kind="step", name="test", run_id=run_id, bundle=fakebench, command=command, args=args,
                   env=env or {}, data_dir=folder, folder=folder)


def run_id_for(tmp_path: Path) -> str:
    """A run id no other test shares: leftovers are found by it."""
    return f"jobs-{tmp_path.name}-{os.getpid()}"


def test_the_output_is_kept_as_it_arrives(fakebench: Workload, tmp_path: Path):
    go = tmp_path / "go"
    job = spec(fakebench, tmp_path / "job", ("python3", "-c", WAIT_FOR_FILE), args=(str(go),),
               run_id=run_id_for(tmp_path))
    seen: list[tuple[str, str]] = []

    def on_line(line: str) -> None:  # the job is still running: it waits for `go`
        seen.append((line, job.paths.output.read_text()))
        go.touch()

    outcome = run_job(LocalRunner(PROJECT), job, timeout_s=60, on_line=on_line)
    assert outcome.ok and outcome.log == job.paths.output
    assert seen[0] == ("first line", "first line\n")  # in the log before the job went on
    assert [line for line, _ in seen] == ["first line", "second line"]
    assert outcome.text() == "first line\nsecond line\n"


def test_the_limit_holds_with_a_stuck_output_thread(fakebench: Workload, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch):
    stuck = threading.Event()
    monkeypatch.setattr(jobs_module._Follower, "_pump", lambda self: stuck.wait(60))  # the reader is wedged
    monkeypatch.setattr(jobs_module, "STOP_WAIT_S", 1.0)
    run_id = run_id_for(tmp_path)
    job = spec(fakebench, tmp_path / "job", ("bash", "throughput.sh"), run_id=run_id,
               env={"FAKE_THROUGHPUT_MODE": "hang"})
    started = time.monotonic()
    outcome = run_job(LocalRunner(PROJECT), job, timeout_s=1.0)
    took = time.monotonic() - started
    stuck.set()
    assert took < 10  # 1 s limit, 1 s to stop, start-up
    assert outcome.timed_out and not outcome.ok and outcome.exit.code is None
    assert outcome.lost == f"the output of job {outcome.job_id} did not end within 1 s of stopping it"
    assert outcome.why() == outcome.lost
    assert proc.find_marked(run_id) == []  # the job was stopped all the same


def test_a_stop_signal_stops_the_job_in_order_and_what_escaped_its_group(fakebench: Workload, tmp_path: Path):
    run_id = run_id_for(tmp_path)
    job = spec(fakebench, tmp_path / "job", ("python3", "-c", STOPPED_IN_ORDER), run_id=run_id)

    def interrupt_once_running() -> None:  # the signal lands in the waiting thread, as `orchestrator.signals` raises it
        log = job.paths.output
        if log.is_file() and "running" in log.read_text() and len(proc.find_marked(run_id)) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_job(LocalRunner(PROJECT), job, timeout_s=60, on_tick=interrupt_once_running)
    # asked first (SIGTERM), and its last words kept; then what left its process group, found by the run id
    assert job.paths.output.read_text() == "running\nasked to stop: cleaning up\n"
    assert proc.find_marked(run_id) == []


def test_a_job_the_runner_refuses_writes_nothing(fakebench: Workload, tmp_path: Path):
    job = spec(fakebench, tmp_path / "job", ("no-such-program-here", "x.sh"), run_id=run_id_for(tmp_path))
    with pytest.raises(ConfigError, match="the step job test: program 'no-such-program-here' not found"):
        run_job(LocalRunner(PROJECT), job, timeout_s=60)
    assert not (tmp_path / "job").exists()
    missing = spec(fakebench, tmp_path / "job", ("bash", "no_such_script.sh"), run_id=run_id_for(tmp_path))
    with pytest.raises(ConfigError, match="no_such_script.sh not found"):
        run_job(LocalRunner(PROJECT), missing, timeout_s=60)
    assert not (tmp_path / "job").exists()


@pytest.mark.parametrize("command", [("sleep", "1000"), ("python3", "-m", "json.tool", "x"), ("bash", "-c", "true"),
                                     ("python", "-X", "utf8", "-c", "pass"),
                                     ("/bin/sh", "-o", "errexit", "-c", "true")])
def test_a_programs_own_words_are_not_taken_for_a_script_of_the_folder(fakebench: Workload, tmp_path: Path,
                                                                       command: tuple[str, ...]):
    LocalRunner(PROJECT).check_job(spec(fakebench, tmp_path / "job", command, run_id=run_id_for(tmp_path)))


@pytest.mark.parametrize("command", [("python3", "-u", "missing.py"), ("/usr/bin/bash", "-e", "missing.sh"),
                                     ("python", "-W", "ignore", "missing.py", "--seed")])
def test_an_interpreters_script_is_looked_for_past_its_options(fakebench: Workload, tmp_path: Path,
                                                               command: tuple[str, ...]):
    with pytest.raises(ConfigError, match="missing.(py|sh) not found"):
        LocalRunner(PROJECT).check_job(spec(fakebench, tmp_path / "job", command, run_id=run_id_for(tmp_path)))


def test_the_outcome_explains_an_out_of_memory_exit_from_its_tail(fakebench: Workload, tmp_path: Path):
    job = spec(fakebench, tmp_path / "job", ("bash", "throughput.sh"), run_id=run_id_for(tmp_path),
               env={"FAKE_THROUGHPUT_MODE": "oom"})
    outcome = run_job(LocalRunner(PROJECT), job, timeout_s=60)
    assert not outcome.ok and outcome.exit == Exit(code=1)
    explained = outcome.explained_exit()
    assert explained.oom_killed and explained.code == 1
    assert outcome.why() == ("GPU out of memory: lower the per-GPU batch size or the model scale, or enable AMP:"
                             " torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")


@pytest.mark.parametrize(("exit", "tail", "explained"), [
    (Exit(code=1), "step 7\nNCCL error: unhandled system error\nOSError: [Errno 28] No space left on device\n",
     Exit(code=1, detail="NCCL communication failed: check NVLink/network health, NCCL_DEBUG=INFO, and peer"
                         " processes: NCCL error: unhandled system error; disk full: free space in the results or"
                         " checkpoint folder: OSError: [Errno 28] No space left on device")),
    (Exit(code=1), "epoch 3\nRuntimeError: bad shape\n\n", Exit(code=1, detail="exited with status 1: RuntimeError:"
                                                                             " bad shape")),
    (Exit(code=137, detail="container ended by signal 9 (exit 137)"), "epoch 3\n",
     Exit(code=137, detail="container ended by signal 9 (exit 137): epoch 3")),
    (Exit(code=1), "", Exit(code=1, detail="exited with status 1")),
    (Exit(code=None, detail="container was removed while it ran"), "CUDA out of memory",
     Exit(code=None, detail="container was removed while it ran")),
    (Exit(code=137, oom_killed=True, detail="container killed by the out-of-memory killer (exit 137)"), "x",
     Exit(code=137, oom_killed=True, detail="container killed by the out-of-memory killer (exit 137)")),
    (Exit(code=0), "MemoryError was caught and retried\ndone\n", Exit(code=0)),
])
def test_an_exit_is_explained_by_the_resource_errors_of_the_tail_else_its_last_line(exit, tail, explained):
    assert explain_exit(exit, tail) == explained


def test_what_is_forked_while_a_run_is_killed_is_killed_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A process a job forks while `stop_leftovers` kills it carries the run's mark as well: it is
    found and killed in turn, not left behind (a launcher starting its worker as the signal lands)."""
    run_id = run_id_for(tmp_path)
    env = {**os.environ, proc.MARK_ENV: run_id}
    first = proc.spawn(["sleep", "300"], cwd=tmp_path, env=env)
    late: list[int] = []
    kill = os.kill

    def fork_as_the_kill_lands(pid: int, sig: int) -> None:
        kill(pid, sig)
        if not late:  # the first kill: a child appears that the first look did not see
            late.append(proc.spawn(["sleep", "300"], cwd=tmp_path, env=env).pid)

    monkeypatch.setattr(proc.os, "kill", fork_as_the_kill_lands)
    killed = proc.kill_marked(run_id)
    assert sorted(killed) == sorted([first.pid, *late])
    assert proc.find_marked(run_id) == []


def test_a_stop_signal_landing_while_the_job_starts_leaves_no_process(fakebench: Workload, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch):
    """A SIGTERM that arrived between the fork and the exec of a seed's process was raised inside
    the start: the handle was lost, the look for the run's mark ran before the process carried it,
    and the process then ran on without mltrain (CI saw one left after an orderly stop). The start is
    whole: the signal is taken after it, when the process is the job's and is stopped in order."""
    die_with_parent = proc._die_with_parent

    def signal_between_fork_and_exec(parent: int):  # noqa: ANN202 - a preexec function
        then = die_with_parent(parent)

        def preexec() -> None:  # in the child, forked and not yet exec'd
            os.kill(parent, signal.SIGTERM)
            time.sleep(0.3)  # the parent takes the signal while it waits for the exec
            if then is not None:
                then()
        return preexec

    monkeypatch.setattr(proc, "_die_with_parent", signal_between_fork_and_exec)
    run_id = run_id_for(tmp_path)
    job = spec(fakebench, tmp_path / "job", ("python3", "-c", "import time; time.sleep(300)"), run_id=run_id)
    with stop_on_signals(), pytest.raises(Stop):
        run_job(LocalRunner(PROJECT), job, timeout_s=60)
    time.sleep(1.0)  # long past the exec, had it been left to run
    assert proc.find_marked(run_id) == []


def test_lines_are_cut_as_they_arrive_whatever_the_chunks():
    text = b"first\n\nsecond line\nthird" + b"x" * 300 + b"\nlast without newline"
    for size in (1, 3, 64, len(text)):
        seen: list[str] = []
        lines = jobs_module.LineSplitter(seen.append, max_bytes=100)
        for start in range(0, len(text), size):
            lines.feed(text[start:start + size])
        lines.close()
        assert seen == ["first", "", "second line", ("third" + "x" * 300)[:100], "last without newline"], size


def test_one_long_line_is_followed_in_linear_time(fakebench: Workload, tmp_path: Path):
    """A 100 MiB line took 187 s to follow (20 MiB: 8 s): the pending bytes were joined and split
    again with every 64 KiB chunk. The log keeps the line whole; on_line gets its first MiB."""
    job = spec(fakebench, tmp_path / "job", ("python3", "-c", "import sys; sys.stdout.write('x' * (40 << 20) + "
                                                              "'\\nend\\n')"), run_id=run_id_for(tmp_path))
    seen: list[int] = []
    started = time.monotonic()
    outcome = run_job(LocalRunner(PROJECT), job, timeout_s=120, on_line=lambda line: seen.append(len(line)))
    took = time.monotonic() - started
    assert outcome.ok and took < 10, f"{took:.1f} s"
    assert seen == [jobs_module.MAX_LINE_BYTES, 3] and outcome.log.stat().st_size == (40 << 20) + 5


DAEMON = """
import subprocess, sys
holds_output = sys.argv[1] == "holding"
quiet = {} if holds_output else {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
subprocess.Popen(["setsid", "sleep", "300"], **quiet)  # a daemon in a session of its own
print("converged", flush=True)
if sys.argv[2] == "hang":
    import time
    time.sleep(300)
"""


@pytest.mark.parametrize("holding", ["holding", "apart"])
def test_a_daemon_outliving_its_job_is_stopped_and_said_and_the_job_ends_with_its_process(
        fakebench: Workload, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holding: str):
    """A setsid daemon that held the job's output kept a converged seed waiting until its limit (then
    90 s more), recorded crashed; one that did not was left running unsaid."""
    monkeypatch.setattr(jobs_module, "STOP_WAIT_S", 5.0)
    run_id = run_id_for(tmp_path)
    job = spec(fakebench, tmp_path / "job", ("python3", "-c", DAEMON), args=(holding, "exit"), run_id=run_id)
    started = time.monotonic()
    outcome = run_job(LocalRunner(PROJECT), job, timeout_s=20)
    took = time.monotonic() - started
    assert outcome.ok and not outcome.lost and took < 10, (outcome, took)
    assert len(outcome.leftovers) == 1 and outcome.leftovers[0].endswith("(sleep)"), outcome.leftovers
    assert proc.find_marked(run_id) == []
    assert outcome.text().splitlines()[-1] == f"mltrain: job {outcome.job_id} left 1 process running after it " \
                                              f"ended, stopped: {outcome.leftovers[0]}"


def test_a_job_stopped_at_its_limit_ends_without_waiting_for_what_escaped_its_group(
        fakebench: Workload, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The job's group is stopped at its limit; its daemon, outside the group, held the output: mltrain
    waited the whole STOP_WAIT_S (90 s) for it before giving the output up as lost."""
    monkeypatch.setattr(jobs_module, "STOP_WAIT_S", 30.0)
    run_id = run_id_for(tmp_path)
    job = spec(fakebench, tmp_path / "job", ("python3", "-c", DAEMON), args=("holding", "hang"), run_id=run_id)
    started = time.monotonic()
    outcome = run_job(LocalRunner(PROJECT), job, timeout_s=1)
    took = time.monotonic() - started
    assert outcome.timed_out and not outcome.lost and took < 15, (outcome, took)
    assert proc.find_marked(run_id) == [] and outcome.leftovers


def test_a_job_gets_the_environment_the_user_gave_not_mltrain_s_own_settings(fakebench: Workload, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items()
                                        if k not in (*proc.OWN_SETTINGS, proc.OWN_SETTINGS_ENV)})
    proc.own_settings()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"  # mltrain's
    said = "import os; print(os.environ.get('OPENBLAS_NUM_THREADS'), os.environ.get('MLTRAIN_OWN_SETTINGS'))"
    job = spec(fakebench, tmp_path / "job", ("python3", "-c", said), run_id=run_id_for(tmp_path))
    outcome = run_job(LocalRunner(PROJECT), job, timeout_s=60)
    assert outcome.ok and outcome.text() == "None None\n"
