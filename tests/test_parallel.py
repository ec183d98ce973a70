"""The suite on several CPUs (pytest-xdist, tests/conftest.py): how many workers `-n auto` starts, and the
lock that keeps a test loading every CPU apart from the time-bound ones."""

from __future__ import annotations

import fcntl
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


def test_a_hog_runs_alone_and_time_bound_tests_run_beside_each_other(tmp_path: Path):
    lock = tmp_path / "cpu-hogs.lock"
    with conftest.cpu_hog_lock(lock, hog=True):
        assert not _free(lock, exclusive=False) and not _free(lock, exclusive=True)
    with conftest.cpu_hog_lock(lock, hog=False):
        assert _free(lock, exclusive=False) and not _free(lock, exclusive=True)
    assert _free(lock, exclusive=True)
