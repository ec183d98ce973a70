"""The suite on several CPUs (pytest-xdist, tests/conftest.py): how many workers `-n auto` starts, and the
lock under which a test loading every CPU runs alone."""

from __future__ import annotations

import fcntl
import threading
import time
from pathlib import Path

import pytest

from tests import conftest


@pytest.mark.parametrize(("cpus", "workers"), [(1, 0), (2, 2), (3, 3), (4, 4), (64, 4)])
def test_auto_starts_a_worker_per_usable_cpu_at_most_four_and_none_on_one(monkeypatch, cpus: int, workers: int):
    import workloads.common.cpus

    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr(workloads.common.cpus, "usable_cpus", lambda: cpus)
    assert conftest.pytest_xdist_auto_num_workers(None) == workers


def test_a_count_given_in_the_environment_is_left_to_pytest_xdist(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "3")
    assert conftest.pytest_xdist_auto_num_workers(None) is None


def _free(path: Path, exclusive: bool) -> bool:
    with path.open("a") as other:  # another open file: another worker, as flock sees it
        try:
            fcntl.flock(other, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(other, fcntl.LOCK_UN)
        return True


def test_a_hog_runs_alone_and_the_other_tests_run_beside_each_other(tmp_path: Path):
    lock = tmp_path / "cpu-hogs.lock"
    with conftest.cpu_hog_lock(lock, hog=True):
        assert not _free(lock, exclusive=False) and not _free(lock, exclusive=True)
    with conftest.cpu_hog_lock(lock, hog=False):
        assert _free(lock, exclusive=False) and not _free(lock, exclusive=True)
    assert _free(lock, exclusive=True)


def test_a_waiting_hog_lets_no_other_test_start_until_it_has_run(tmp_path: Path):
    """Without the turnstile, the other workers' tests, each taking the lock shared as the last let it
    go, could keep a hog waiting for the rest of the session."""
    lock = tmp_path / "cpu-hogs.lock"
    order: list[str] = []
    with conftest.cpu_hog_lock(lock, hog=False):  # a test running on another worker
        hog = threading.Thread(target=lambda: run_under(lock, True, "hog", order))
        hog.start()
        wait_until(lambda: not _free(lock.with_name(lock.name + ".turnstile"), exclusive=True))  # the hog waits
        later = threading.Thread(target=lambda: run_under(lock, False, "a later test", order))
        later.start()
        time.sleep(0.2)
        order.append("the running test ends")
    hog.join(10)
    later.join(10)
    assert order == ["the running test ends", "hog", "a later test"]


def run_under(lock: Path, hog: bool, name: str, order: list[str]) -> None:
    with conftest.cpu_hog_lock(lock, hog=hog):
        order.append(name)
        time.sleep(0.1)


def wait_until(predicate, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.01)
