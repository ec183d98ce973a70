"""A full disk, for every kind of run and every command that writes: the write that fails is exit 3
naming the file (INCONCLUSIVE in `mltrain qualify`, never FAIL nor PASS), nothing is half-written,
and the store still lists its runs; a read on a full disk still works (the index is a cache).

ENOSPC is injected where mltrain writes (`results.atomic`, SQLite); `test_a_real_full_file_system`
does it for real on a tiny tmpfs where this process may mount one."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.results import atomic
from orchestrator.results import index as index_module
from tests.hardware.stored_runs import make_run

NO_SPACE = os.strerror(errno.ENOSPC)
MLTRAINS = {"manifest.json", "summary.json", "decisions.json", "state.json", "run.json", "inference.json"}
"""The records mltrain writes in a run's folder (LoadGen's own files beside them are not JSON documents)."""


class FullLog:
    """A job's log on a full disk: it opens, and no chunk of the job's output can be written to it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> FullLog:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def write(self, chunk: bytes) -> int:
        raise OSError(errno.ENOSPC, NO_SPACE)

    def flush(self) -> None:
        pass


class FullDisk:
    """The disk fills up where a test says, until `free` (its own patches: the test's environment stays)."""

    def __init__(self) -> None:
        self._patches = pytest.MonkeyPatch()

    def when(self, full: Callable[[Path, bytes], bool]) -> None:
        """Every staged file for which ``full(target, data)`` holds finds the disk full when it is
        flushed (inside `results.atomic`, as a real full disk refuses it)."""
        real = os.fsync

        def fsync(fd: int) -> None:
            staged = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if stat.S_ISREG(os.fstat(fd).st_mode) and staged.name.endswith(".tmp"):
                target = staged.parent / staged.name[1:].rsplit(".", 2)[0]
                if full(target, os.pread(fd, 1 << 20, 0)):
                    raise OSError(errno.ENOSPC, NO_SPACE)
            real(fd)

        self._patches.setattr(atomic.os, "fsync", fsync)

    def under(self, folder: Path) -> None:
        """Every file's flush to disk under ``folder`` finds it full (a folder's flush does not)."""
        real = os.fsync

        def fsync(fd: int) -> None:
            if stat.S_ISREG(os.fstat(fd).st_mode) and Path(os.readlink(f"/proc/self/fd/{fd}")).is_relative_to(folder):
                raise OSError(errno.ENOSPC, NO_SPACE)
            real(fd)

        self._patches.setattr(atomic.os, "fsync", fsync)

    def logs(self) -> None:
        """No job's output can be written to its log."""
        self._patches.setattr(atomic, "open_append", FullLog)

    def index(self) -> None:
        """SQLite cannot write the index: its journal finds the disk full."""
        def refused(index: index_module.Index) -> None:
            raise sqlite3.OperationalError("database or disk is full")

        self._patches.setattr(index_module.Index, "_open", refused)

    def free(self) -> None:
        self._patches.undo()


@pytest.fixture
def disk():
    full = FullDisk()
    yield full
    full.free()


def assert_nothing_half_written(results: Path) -> None:
    """No staged file left behind, and every record mltrain keeps in the store reads whole."""
    assert not [p for p in results.rglob("*.tmp")]
    for path in results.rglob("*.json"):
        if path.name in MLTRAINS or "qualify" in path.relative_to(results).parts:
            json.loads(path.read_text())


def listed(cli, results: Path) -> list[str]:
    r = cli("list", "--results", str(results), "--json")
    assert r.code == 0, r.err
    return [row["run_id"] for row in json.loads(r.out)]


def test_a_training_run_whose_first_write_fails_is_exit_3_and_leaves_no_folder(cli, tmp_path: Path, disk):
    results = tmp_path / "results"
    earlier = make_run(results, label=None, seeds=[1, 2, 3])
    disk.when(lambda path, data: path.name == "manifest.json")
    r = cli("run", "fakebench", "--seeds", "1-3", "--results", str(results))
    assert r.code == 3, r.err
    (error,) = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert error.startswith(f"error: cannot write {results}/fakebench-")
    assert error.endswith(f"/manifest.json: {NO_SPACE}")
    assert sorted(p.name for p in results.iterdir() if p.is_dir()) == [earlier]  # the run never was
    assert_nothing_half_written(results)
    disk.free()
    assert listed(cli, results) == [earlier]


def qualify(cli, results: Path, *args: str):
    return cli("qualify", "--suite", "throughput_only", "--results", str(results), "--node-name", "n1",
               "--expect-gpus", "0", *args)  # a CPU node, declared so: it may PASS


def test_a_qualification_whose_record_cannot_be_saved_is_inconclusive_never_pass(cli, tmp_path: Path, disk):
    results = tmp_path / "results"
    first = qualify(cli, results, "--json")
    assert first.code == 0 and json.loads(first.out)["verdict"] == "pass", first.err
    disk.when(lambda path, data: path.parent.parent.name == "nodes" and path.suffix == ".json")
    junit = tmp_path / "out" / "q.xml"
    r = qualify(cli, results, "--json", "--junit", str(junit))
    assert r.code == 3, r.err
    record = json.loads(r.out)
    assert record["verdict"] == "inconclusive" and record["exit_code"] == 3
    saved = results / "qualify" / "nodes" / "n1" / f"{record['qualification_id']}.json"
    assert record["reasons"][0] == (f"the record could not be saved (cannot write {saved}: {NO_SPACE}): free the"
                                    " space and qualify again; its checks said PASS")
    assert 'name="throughput"' in junit.read_text() and not saved.exists()
    shown = qualify(cli, results)
    assert shown.code == 3 and "verdict: INCONCLUSIVE (exit 3)" in shown.out and "record:" not in shown.out
    assert not list(results.glob("qualify/nodes/n1/*/qualify.lock"))  # the qualification ended in order
    assert_nothing_half_written(results)
    disk.free()
    history = cli("qualify", "history", "--results", str(results), "--json")
    assert history.code == 0 and [q["qualification_id"] for q in json.loads(history.out)] == [
        json.loads(first.out)["qualification_id"]]


def test_a_qualification_that_cannot_begin_is_exit_3_and_leaves_no_folder(cli, tmp_path: Path, monkeypatch):
    results = tmp_path / "results"
    real = atomic.open_in_place

    def no_lock(path: Path, flags: int) -> int:
        if path.name == "qualify.lock":
            raise OSError(errno.ENOSPC, NO_SPACE, str(path))
        return real(path, flags)

    monkeypatch.setattr("orchestrator.results.lock.open_in_place", no_lock)
    r = qualify(cli, results)
    assert r.code == 3 and f"/qualify.lock: {NO_SPACE}" in r.err, r.err
    assert list((results / "qualify" / "nodes" / "n1").iterdir()) == []


def test_a_job_log_a_full_disk_refuses_stops_the_job_and_is_never_a_failed_check(cli, tmp_path: Path, disk):
    results = tmp_path / "results"
    disk.logs()
    r = qualify(cli, results, "--json")
    assert r.code == 3, r.err
    record = json.loads(r.out)
    assert record["verdict"] == "inconclusive" and {c["status"] for c in record["checks"]} <= {"inconclusive",
                                                                                               "not_applicable"}
    assert f"throughput/output.log: {NO_SPACE}" in " ".join(record["reasons"])
    ran = cli("run", "fakebench", "--seeds", "1-3", "--results", str(results))
    assert ran.code == 3 and f"/seeds/1/output.log: {NO_SPACE}" in ran.err, ran.err
    run_id = listed(cli, results)[0]
    disk.free()  # space is freed: the run completes, the seed run again (it had not crashed)
    resumed = cli("run", "fakebench", "--resume", run_id, "--results", str(results), "--json")
    assert resumed.code == 0 and json.loads(resumed.out)["converged"] == 3, resumed.err


def test_reads_of_a_store_whose_index_cannot_be_saved_still_work(cli, tmp_path: Path, disk):
    results = tmp_path / "results"
    run_id = make_run(results, label="a", seeds=[1, 2, 3])
    (results / "index.db").unlink()
    disk.index()
    r = cli("list", "--results", str(results), "--json")
    assert r.code == 0 and [row["run_id"] for row in json.loads(r.out)] == [run_id]
    assert r.err.splitlines() == [f"warning: cannot write {results / 'index.db'}: database or disk is full: listed"
                                  " from the run folders"]
    compared = cli("compare", run_id, "--results", str(results))
    assert compared.code == 0, compared.err
    assert cli("show", run_id, "--results", str(results)).code == 0


def result_logs(folder: Path) -> Path:
    """A folder of three ``result_<n>.txt`` MLPerf logs (fakebench's), as `mltrain import` takes them."""
    made = make_run(folder / "made", label=None, seeds=[1, 2, 3])
    logs = folder / "logs"
    logs.mkdir()
    for number, seed in enumerate((1, 2, 3)):
        (logs / f"result_{number}.txt").write_text((folder / "made" / made / "seeds" / str(seed) /
                                                    "output.log").read_text())
    return logs


def test_an_import_whose_index_cannot_take_it_is_kept_once(cli, tmp_path: Path, disk):
    results = tmp_path / "results"
    logs = result_logs(tmp_path)
    make_run(results, label="a", seeds=[1, 2, 3])
    disk.index()
    r = cli("import", str(logs), "--benchmark", "unet3d", "--results", str(results))
    assert r.code == 1 and "the rules need 40 runs, this set has 3" in r.out, r.err  # imported, scored INVALID
    assert "database or disk is full: the index catches up at the next listing" in r.err
    disk.free()
    assert len(listed(cli, results)) == 2 and not list(results.glob(".import-*"))


@pytest.mark.parametrize("command", ["report", "export", "sysinfo"])
def test_an_output_that_a_full_disk_refuses_is_exit_3_naming_it(cli, tmp_path: Path, disk, command: str):
    results, out = tmp_path / "results", tmp_path / "out"
    run_id = make_run(results, label="a", seeds=[1, 2, 3], system={"host": {"cpu_model": "Test CPU"}})
    argv = {"report": ("report", run_id, "--results", str(results), "--out", str(out / "r.html")),
            "export": ("export", run_id, "--results", str(results), "--mlcommons", str(out)),
            "sysinfo": ("sysinfo", "--system-desc", str(out))}[command]
    disk.under(out)
    r = cli(*argv)
    assert r.code == 3, r.err
    (error,) = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert error.startswith(f"error: cannot write {out}/") and error.endswith(f": {NO_SPACE}")
    assert not [p for p in out.rglob("*") if p.is_file()]  # nothing half-written


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A 2 MiB tmpfs (a real file system that fills up); skipped where this process may not mount."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def fill(disk: Path) -> None:
    with open(disk / "filler", "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def test_a_real_full_file_system(cli, tiny_disk: Path):
    results = tiny_disk / "results"
    run_id = make_run(results, label="a", seeds=[1, 2, 3])
    (results / "index.db").unlink()
    fill(tiny_disk)
    assert listed(cli, results) == [run_id]
    assert cli("compare", run_id, "--results", str(results)).code == 0
    ran = cli("run", "fakebench", "--seeds", "1-3", "--results", str(results))
    assert ran.code == 3 and f"{NO_SPACE}" in ran.err and "internal error" not in ran.err, ran.err
    qualified = cli("qualify", "--suite", "throughput_only", "--results", str(results), "--node-name", "n1")
    assert qualified.code == 3 and f"{NO_SPACE}" in qualified.err, qualified.err
    assert listed(cli, results) == [run_id]
    assert_nothing_half_written(results)
