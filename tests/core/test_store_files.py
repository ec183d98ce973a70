"""Nobody in: every file mltrain writes in a store (a run's files, its lock, a log) is a regular file
opened without following a link; anything else in its place is refused in one line, exit 2, and left
as it is (a shared or unpacked results folder cannot make mltrain write or truncate a file elsewhere)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.errors import EXIT_USAGE
from orchestrator.results import atomic
from orchestrator.results.lock import RunLock, is_held
from tests.hardware.stored_runs import make_run

PRECIOUS = "a file of the user's, outside the store\n"


@pytest.fixture
def precious(tmp_path: Path) -> Path:
    path = tmp_path / "precious.txt"
    path.write_text(PRECIOUS)
    return path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("verb", ["score", "resume"])
def test_a_run_lock_that_is_a_link_is_refused_and_its_target_kept(cli, tmp_path: Path, precious: Path, verb: str):
    results = tmp_path / "results"
    run_id = make_run(results, label=None, seeds=[1, 2, 3], run_id="run-link")
    lock = results / run_id / "run.lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(precious)
    argv = ("score", run_id) if verb == "score" else ("run", "fakebench", "--resume", run_id)
    r = cli(*argv, "--results", str(results))
    assert r.code == EXIT_USAGE, r.err
    assert r.err.splitlines() == [f"error: {lock} is a symbolic link, not a file mltrain wrote: remove it (or move"
                                  " it away) and try again"]
    assert precious.read_text() == PRECIOUS and lock.is_symlink()


@pytest.mark.parametrize("make", [fifo, Path.mkdir], ids=["fifo", "folder"])
def test_a_lock_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path, make):
    lock = tmp_path / "run.lock"
    make(lock)
    with pytest.raises(atomic.NotAFile, match=f"{lock} is a (FIFO|folder), not a file mltrain wrote") as refused:
        RunLock(lock, "r")
    assert refused.value.exit_code == EXIT_USAGE
    assert not is_held(lock)


def test_a_link_is_never_held_and_its_target_never_opened(tmp_path: Path, precious: Path):
    held = RunLock(tmp_path / "real.lock", "r")
    (tmp_path / "link.lock").symlink_to(tmp_path / "real.lock")
    assert is_held(tmp_path / "real.lock") and not is_held(tmp_path / "link.lock")
    held.release()


@pytest.mark.parametrize("write", [
    lambda path: atomic.write_json(path, {"a": 1}),
    lambda path: atomic.open_append(path).close(),
    lambda path: atomic.move(path.parent / "made", path),
], ids=["write", "append", "move"])
def test_no_write_goes_through_a_link(tmp_path: Path, precious: Path, write):
    (tmp_path / "made").write_text("new\n")
    link = tmp_path / "state.json"
    link.symlink_to(precious)
    with pytest.raises(atomic.NotAFile, match=f"{link} is a symbolic link"):
        write(link)
    assert precious.read_text() == PRECIOUS and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["made", "precious.txt", "state.json"]  # nothing staged


def test_a_fifo_where_a_file_is_written_is_refused_without_blocking(tmp_path: Path):
    fifo(tmp_path / "output.log")
    for write in (lambda p: atomic.write_text(p, "x"), lambda p: atomic.open_append(p).close()):
        with pytest.raises(atomic.NotAFile, match="output.log is a FIFO, not a file"):
            write(tmp_path / "output.log")
