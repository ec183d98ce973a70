"""Nothing lost: what the store does when a write fails or mltrain stops between two writes."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest

from orchestrator.results import atomic
from orchestrator.results.records import SeedState, SeedStateName
from orchestrator.results.store import Store
from tests.core.running import run_id_of
from tests.hardware.stored_runs import make_run

EPOCHS = {s: 20 + (7 * s) % 11 for s in range(1, 10)}


def test_an_atomic_write_syncs_the_file_and_then_its_folder(tmp_path: Path, monkeypatch):
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append("folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    atomic.write_json(tmp_path / "x.json", {"a": 1})
    assert synced == ["file", "folder"]
    assert json.loads((tmp_path / "x.json").read_text()) == {"a": 1} and len(list(tmp_path.iterdir())) == 1


def test_a_staged_write_that_fails_leaves_nothing(tmp_path: Path):
    target = tmp_path / "r.html"
    with pytest.raises(RuntimeError), atomic.staged(target) as handle:
        handle.write(b"half")
        raise RuntimeError("rendering failed")
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_is_exit_3_naming_the_file_and_resume_completes(cli, tmp_path: Path, monkeypatch):
    results = tmp_path / "results"
    real = atomic.write_bytes

    def full_disk(path: Path, data: bytes) -> None:  # seed 2's finished state cannot be written
        if path.name == "state.json" and path.parent.name == "2" and b'"finished"' in data:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, data)

    monkeypatch.setattr(atomic, "write_bytes", full_disk)
    r = cli("run", "fakebench", "--seeds", "1-3", "--results", str(results))
    assert r.code == 3
    errors = [line for line in r.err.splitlines() if line.startswith("error:")]
    run_id = run_id_of(results)
    assert errors == [f"error: cannot write {results / run_id / 'seeds' / '2' / 'state.json'}: No space left on device"]
    assert f"run {run_id} stopped; once that is fixed, complete it with `mltrain run fakebench --resume" in r.err
    listed = json.loads(cli("list", "--results", str(results), "--json").out)
    assert listed[0]["state"] == "stopped"  # the manifest could not be closed, but nobody holds the run

    monkeypatch.setattr(atomic, "write_bytes", real)  # space is freed
    resumed = cli("run", "fakebench", "--resume", run_id, "--results", str(results), "--json")
    assert resumed.code == 0, resumed.err
    assert "seed 2: its run had ended and was recorded before mltrain stopped; kept" in resumed.err
    run = Store(results).open(run_id)
    assert run.manifest.state == "finished" and not run.paths.seed(2).attempt(1).exists()
    assert {s: r.time_to_train_ms for s, r in run.records.items()} == {s: EPOCHS[s] * 1000 for s in (1, 2, 3)}


def test_a_finished_state_without_its_record_is_run_again(cli, tmp_path: Path):
    results = tmp_path / "results"
    run_id = make_run(results, label=None, seeds=[1, 2, 3], run_id="run-x")
    run = Store(results).open(run_id)
    run.paths.seed(2).record.unlink()  # stopped between archiving a record and writing the next state
    with open(run.paths.manifest) as handle:
        manifest = json.load(handle)
    manifest.update(state="interrupted", data_dir=None)
    run.paths.manifest.write_text(json.dumps(manifest))
    assert Store(results).open(run_id).unfinished_seeds() == [2]
    r = cli("run", "fakebench", "--resume", run_id, "--results", str(results), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["per_seed"]["2"]["time_to_train_ms"] == EPOCHS[2] * 1000
    assert (run.paths.seed(2).attempt(1) / "output.log").is_file()


def test_an_interrupted_state_beside_its_record_is_kept_not_rerun(cli, tmp_path: Path):
    results = tmp_path / "results"
    run_id = make_run(results, label=None, seeds=[1, 2, 3], run_id="run-y")
    run = Store(results).open(run_id).locked()
    run.save_seed(SeedState(seed=3, state=SeedStateName.INTERRUPTED))
    run.save_manifest(run.manifest.model_copy(update={"state": "interrupted", "data_dir": None}))
    run.close()
    r = cli("run", "fakebench", "--resume", run_id, "--results", str(results), "--json")
    assert r.code == 0, r.err
    assert "seed 3: its run had ended and was recorded before mltrain stopped; kept" in r.err
    assert not Store(results).open(run_id).paths.seed(3).attempt(1).exists()


@pytest.fixture
def read_only_copy(tmp_path: Path):
    """A results folder with one finished run (and its index), mounted read-only (a bind mount, so
    that root is refused too); skipped where this process may not mount."""
    import subprocess

    source, mounted = tmp_path / "store", tmp_path / "read-only"
    make_run(source, label="a", seeds=[1, 2, 3])
    mounted.mkdir()
    bind = subprocess.run(["mount", "--bind", str(source), str(mounted)], capture_output=True, text=True)
    if bind.returncode != 0:
        pytest.skip(f"cannot make a read-only mount here: {bind.stderr.strip()}")
    try:
        remount = subprocess.run(["mount", "-o", "remount,ro,bind", str(mounted)], capture_output=True, text=True)
        assert remount.returncode == 0, remount.stderr
        yield mounted
    finally:
        subprocess.run(["umount", str(mounted)], check=False)


def test_a_read_only_store_is_listed_shown_and_compared_but_never_written(cli, read_only_copy: Path):
    (run_id,) = [p.name for p in read_only_copy.iterdir() if p.is_dir()]
    listed = cli("list", "--results", str(read_only_copy), "--json")
    assert listed.code == 0, listed.err
    assert [row["run_id"] for row in json.loads(listed.out)] == [run_id]
    assert cli("show", run_id, "--results", str(read_only_copy)).code == 0
    assert cli("compare", run_id, "--results", str(read_only_copy)).code == 0
    ran = cli("run", "fakebench", "--seeds", "1-3", "--results", str(read_only_copy))
    assert ran.code == 2 and "is not readable and writable by this user" in ran.err


def test_a_results_path_through_a_link_loop_is_bad_input(cli, tmp_path: Path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    for argv in (("list",), ("run", "fakebench", "--seeds", "1-3")):
        r = cli(*argv, "--results", str(tmp_path / "a" / "results"))
        assert r.code == 2 and "is a link that leads nowhere (or in a loop)" in r.err, (argv, r.err)


_KILLED_IMPORT = """
import os, signal, sys, tempfile
from pathlib import Path
from orchestrator.results.store import Store
from orchestrator.session.importing import STAGING_PREFIX
from tests.hardware.stored_runs import make_run
stage = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=sys.argv[1]))
make_run(stage, label="half", seeds=[1, 2, 3], run_id="staged")  # the staged run, locked by this process
os.kill(os.getpid(), signal.SIGKILL)  # as a kill -9 during an import
"""


def test_a_killed_imports_staging_folder_is_swept_by_the_next_import(tmp_path: Path):
    import subprocess
    import sys
    import time

    from orchestrator.results.lock import RunLock
    from orchestrator.session.importing import STAGING_PREFIX, sweep_abandoned_imports

    results = tmp_path / "results"
    results.mkdir()
    project = Path(__file__).resolve().parents[2]
    killed = subprocess.run([sys.executable, "-c", _KILLED_IMPORT, str(results)], cwd=project,
                            env={**os.environ, "PYTHONPATH": str(project)}, capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    (left,) = results.glob(f"{STAGING_PREFIX}*")
    live = results / f"{STAGING_PREFIX}live"
    (live / "run").mkdir(parents=True)
    lock = RunLock(live / "run" / "run.lock", "run")  # an import still running in another process
    try:
        assert sweep_abandoned_imports(results) == []  # too young to tell: an import may be starting
        later = time.time() + 3600
        assert sweep_abandoned_imports(results, now=later) == [left]
        assert not left.exists() and live.exists()
    finally:
        lock.release()


def test_a_damaged_index_is_replaced_and_rebuilt_by_the_next_command(cli, tmp_path: Path):
    results = tmp_path / "results"
    run_id = make_run(results, label="a", seeds=[1, 2, 3])
    (results / "index.db").write_bytes(b"this is not a SQLite database" * 100)
    listed = cli("list", "--results", str(results), "--json")
    assert listed.code == 0 and [r["run_id"] for r in json.loads(listed.out)] == [run_id], listed.err
    ran = cli("run", "fakebench", "--seeds", "1-3", "--results", str(results))
    assert ran.code == 0, ran.err
    assert len(json.loads(cli("list", "--results", str(results), "--json").out)) == 2  # no stopped run left


def test_the_first_read_saves_the_index_it_rebuilt(cli, tmp_path: Path):
    results = tmp_path / "results"
    make_run(results, label="a", seeds=[1, 2, 3])
    (results / "index.db").unlink()
    assert cli("list", "--results", str(results)).code == 0
    assert (results / "index.db").is_file()


@pytest.fixture
def index_held(tmp_path: Path):
    """Another process holding the index's write lock (an exclusive transaction) until released."""
    import subprocess
    import sys
    import time

    results = tmp_path / "results"
    make_run(results, label="a", seeds=[1, 2, 3])
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "db.execute('BEGIN EXCLUSIVE'); print('held', flush=True); time.sleep(600)", str(results / "index.db")],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    started = time.monotonic()
    yield results, started
    holder.kill()
    holder.communicate()  # and its pipe closed


def test_a_run_outlives_an_index_another_process_holds(cli, index_held, monkeypatch):
    from orchestrator.results import index as index_module

    monkeypatch.setattr(index_module, "READ_WAIT_S", 0.5)  # the real wait is seconds; the behaviour is the same
    results, _ = index_held
    ran = cli("run", "fakebench", "--seeds", "1-3", "--results", str(results))
    assert ran.code == 0, ran.err  # not stopped after a seed with exit 2, as it was
    assert "result: VALID" in ran.out
    assert "index.db is held by another process (it waited 0.5 s): the index catches up at the next listing" in ran.err
    listed = cli("list", "--results", str(results), "--json")
    assert listed.code == 0 and len(json.loads(listed.out)) == 2
    assert "held by another process" in listed.err and "listed from the run folders" in listed.err


def test_an_import_outlives_an_index_another_process_holds(cli, index_held, monkeypatch, tmp_path: Path):
    from orchestrator.results import index as index_module
    from tests.core.test_full_disk import result_logs

    monkeypatch.setattr(index_module, "READ_WAIT_S", 0.5)
    results, _ = index_held
    r = cli("import", str(result_logs(tmp_path)), "--benchmark", "unet3d", "--results", str(results), "--json")
    assert r.code == 1, r.err  # INVALID (3 of the 40 runs MLPerf needs), as `score` exits; not exit 2 with the
    # run moved in, which a retry imported twice
    assert "index.db is held by another process (it waited 0.5 s): the index catches up at the next listing" in r.err
    imported = json.loads(r.out)["run_id"]
    listed = json.loads(cli("list", "--results", str(results), "--json").out)
    assert imported in [row["run_id"] for row in listed] and len(listed) == 2
