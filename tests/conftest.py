"""Fixtures shared by the tests: the CLI run in-process or as a child, against the test workloads."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PROJECT = TESTS.parent

TREE = ("orchestrator", "workloads", "docker", "seeds.yaml", "pyproject.toml")
"""What a copy of the project needs to run mltrain from it (the recipes' tests add their toy to one)."""


def copy_of_the_tree(tree: Path, names: tuple[str, ...] = TREE) -> Path:
    """``names`` (folders or files, relative to the project) copied into ``tree``, caches left out."""
    for name in names:
        source, copy = PROJECT / name, tree / name
        if source.is_dir():
            shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy)
    return tree


TEST_WORKLOADS = TESTS / "workloads"


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def mltrain_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Environment that points mltrain at the test workloads, their profiles and a private cache."""
    env = {
        "MLTRAIN_WORKLOADS": str(TEST_WORKLOADS),
        "MLTRAIN_SEEDS_FILE": str(TEST_WORKLOADS / "seeds.yaml"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "COLUMNS": "200",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture
def cli(mltrain_env: dict[str, str], capsys: pytest.CaptureFixture[str]):
    """Run ``mltrain ARGS`` in this process; returns exit code, stdout and stderr."""
    from orchestrator.cli import main

    def invoke(*args: str) -> CliResult:
        capsys.readouterr()  # drop what the test itself printed before
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke


@pytest.fixture
def cli_process(mltrain_env: dict[str, str]):
    """Start ``mltrain ARGS`` as a child process (for signals); returns the Popen. The child starts
    with the stop signals at their defaults: mltrain keeps a signal ignored when it starts (``nohup``
    ignores SIGHUP), so a test run under ``nohup`` would otherwise see SIGHUP do nothing."""

    def default_stop_signals() -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)

    def start(*args: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        env = {**os.environ, **mltrain_env, **(extra_env or {})}
        return subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli", *args], cwd=PROJECT, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=default_stop_signals,
        )

    return start


def write_profiles(path: Path, body: str) -> Path:
    path.write_text(body)
    return path


# --- Running on several CPUs (pytest-xdist: `-n auto --dist loadgroup`, set in pyproject.toml) ---

MAX_WORKERS = 4
"""The most workers `-n auto` starts, however many CPUs the machine has. Past a few, the suite's wall time
is bounded by its longest group (the real engines' tests run one at a time, below) and each extra worker
only adds a Python with torch loaded and another training test beside the time-bound ones."""

ENGINE_FIXTURES = frozenset({"docker_engine", "slurm_cluster"})
"""The one Docker engine at DOCKER_HOST, the one Slurm cluster at SLURM_CONF: a test that uses either
counts every mltrain container or job as its own (``no_leftover_containers``, a node it takes down), and
the base images are made by a script that must not run twice at once; these tests run one at a time."""

SHARED_SCOPES = frozenset({"module", "class", "package"})


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: one worker per CPU this process may use (affinity, cgroup quota), at most MAX_WORKERS;
    none (the tests run in this process) on one CPU. PYTEST_XDIST_AUTO_NUM_WORKERS still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    from workloads.common.cpus import usable_cpus

    cpus = usable_cpus()
    return 0 if cpus < 2 else min(cpus, MAX_WORKERS)


def xdist_group_of(item: pytest.Item) -> str | None:
    """The group a test runs in under `--dist loadgroup` (a group's tests run on one worker, one after
    another), unless it names its own with ``pytest.mark.xdist_group``: "engines" for a test of the real
    Docker engine or Slurm cluster; its module for a test using a module's (class's, package's) fixture,
    so that the fixture is made once, not once per worker; none (any worker) otherwise."""
    if ENGINE_FIXTURES & set(item.fixturenames) or item.get_closest_marker("docker") or item.get_closest_marker(
            "slurm"):
        return "engines"
    definitions = getattr(item, "_fixtureinfo", None)
    if definitions is not None and any(
            defs and defs[-1].scope in SHARED_SCOPES for defs in definitions.name2fixturedefs.values()):
        return item.nodeid.split("::", 1)[0]
    return None


def is_xdist_worker(config: pytest.Config) -> bool:
    """This pytest is a worker of pytest-xdist (its own ``workerinput``; PYTEST_XDIST_WORKER is no sign:
    a pytest a test starts, such as the GPU session's, inherits it)."""
    return hasattr(config, "workerinput")


def pytest_collection_finish(session: pytest.Session) -> None:
    """A worker whose pytest-xdist did not put the groups in the test ids (its loadgroup sets
    ``item._nodeid``, which pytest 9.2 no longer reads) would run the engines' tests on two workers at
    once: stop, naming the cause, rather than fail them one by one."""
    if not is_xdist_worker(session.config) or not session.config.getvalue("loadgroup"):
        return
    lost = [item.nodeid for item in session.items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(f"pytest-xdist's loadgroup lost the groups of {len(lost)} test(s) ({lost[0]}): this "
                                "pytest and pytest-xdist do not work together; see the pin in pyproject.toml")


def pytest_itemcollected(item: pytest.Item) -> None:
    """Each test's group, marked as it is collected: pytest-xdist reads the marks in a worker's
    ``pytest_collection_modifyitems``, which runs before a conftest's, tryfirst or not (a group marked
    there reached no worker: the engines' tests ran on two at once)."""
    if item.get_closest_marker("xdist_group"):
        return
    group = xdist_group_of(item)
    if group:
        item.add_marker(pytest.mark.xdist_group(group))


@contextlib.contextmanager
def cpu_hog_lock(path: Path, hog: bool) -> Iterator[None]:
    """Held alone by a test that keeps every CPU busy (``hog``), shared by every other test. Taken
    through a turnstile (``path`` + ``.turnstile``): a hog holds it while it waits, so the other
    workers' tests, one after another, cannot keep the lock shared for good."""
    with path.open("a") as handle, path.with_name(path.name + ".turnstile").open("a") as turnstile:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if hog else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _cpu_hogs_alone(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Under pytest-xdist, a ``cpu_hog`` test (it keeps every CPU busy on purpose) runs alone: no other
    test of this session runs beside it (``cpu_hog_lock`` in a file of this session's workers). Its
    load would break another's wall-time or rate bounds, and another's load blurs what it measures
    against its own quiet runs (a node's references, learned beside another worker's tests, were as
    slow as the run beside the hog). In one process the tests run one at a time anyway."""
    if not is_xdist_worker(request.config):
        yield
        return
    hog = request.node.get_closest_marker("cpu_hog") is not None
    with cpu_hog_lock(tmp_path_factory.getbasetemp().parent / "cpu-hogs.lock", hog=hog):
        yield
