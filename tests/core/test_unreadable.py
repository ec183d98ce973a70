"""What cannot be read is named, the rest still listed: a run folder or a node's folder this user may
not read (`list` said "cannot write manifest.json", exit 3, and listed nothing; `qualify history` said
"0 qualification(s)", exit 0), a seed folder that is a loop of links (`show`: an internal error), a
DOCKER_HOST that is no address (`clean`: an internal error). Each is one line and its exit code."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

Deny = Callable[[Path], None]


@pytest.fixture
def no_access(monkeypatch: pytest.MonkeyPatch) -> Deny:
    """Make a folder one this user may not read (mode 000). Root reads every folder, so as root the
    kernel's answer to any other user is given at the boundary: stat, open and listing of what lies
    inside are EACCES, and so is opening or listing the folder itself (its own stat succeeds)."""

    def deny(folder: Path) -> None:
        if os.geteuid() != 0:
            folder.chmod(0)
            monkeypatch.setattr(folder, "chmod", folder.chmod)  # restored below, for the tmp_path cleanup
            return
        inner, itself = str(folder) + os.sep, str(folder)
        for name in ("stat", "lstat", "open", "scandir", "listdir"):
            real = getattr(os, name)

            def guarded(*args, _real=real, _name=name, **kwargs):
                path = args[0] if args else kwargs.get("path", ".")
                text = os.fsdecode(path) if isinstance(path, str | bytes | os.PathLike) else None
                if text is not None and (text.startswith(inner) or (
                        text == itself and _name in ("open", "scandir", "listdir"))):
                    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), text)
                return _real(*args, **kwargs)

            monkeypatch.setattr(os, name, guarded)

    return deny


@pytest.fixture(autouse=True)
def _readable_again(tmp_path: Path):
    yield
    if os.geteuid() != 0:
        for folder in tmp_path.rglob("*"):
            if folder.is_dir():
                folder.chmod(0o755)


def _runs(cli, results: Path, count: int = 2) -> list[str]:
    return [json.loads(cli("run", "fakebench", "--seeds", "1-3", "--results", str(results), "--json").out)["run_id"]
            for _ in range(count)]


def test_list_names_a_run_folder_it_may_not_read_and_lists_the_others(cli, tmp_path: Path, no_access: Deny):
    results = tmp_path / "r"
    ids = _runs(cli, results)
    no_access(results / ids[0])
    r = cli("list", "--results", str(results), "--json")
    assert r.code == 2 and [row["run_id"] for row in json.loads(r.out)] == [ids[1]], (r.code, r.err)
    assert f"run {ids[0]} cannot be read: {results / ids[0]}" in r.err and "Permission denied" in r.err, r.err
    assert "cannot write" not in r.err and "internal" not in r.err


def test_qualify_history_names_a_node_folder_it_may_not_read(cli, tmp_path: Path, no_access: Deny):
    results = tmp_path / "r"
    for node in ("a", "b"):
        assert cli("qualify", "--suite", "throughput_only", "--expect-gpus", "0", "--results", str(results),
                   "--node-name", node).code == 0
    folder = results / "qualify" / "nodes" / "b"
    no_access(folder)
    r = cli("qualify", "history", "--results", str(results), "--json")
    assert r.code == 2, (r.code, r.err)
    assert f"{folder}: cannot be read (Permission denied)" in r.err, r.err
    assert {record["node"] for record in json.loads(r.out)} == {"a"}, r.out


def test_show_of_a_run_whose_seed_folder_is_a_loop_of_links_is_one_line(cli, tmp_path: Path):
    results = tmp_path / "r"
    run_id = _runs(cli, results, 1)[0]
    seed = results / run_id / "seeds" / "1"
    for path in sorted(seed.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    seed.rmdir()
    seed.symlink_to("1")
    r = cli("show", run_id, "--results", str(results))
    assert r.code == 2 and r.err.count("\n") == 1, (r.code, r.err)
    assert f"{seed}: a link that cannot be followed (its links lead in a loop); remove it" in r.err, r.err


@pytest.mark.parametrize("host", ["tcp://[::1", "tcp://host:port", "bogus://x"])
def test_clean_with_a_docker_host_that_is_no_address_is_one_line(cli, monkeypatch: pytest.MonkeyPatch, host: str):
    monkeypatch.setenv("DOCKER_HOST", host)
    r = cli("clean")
    assert r.code == 2 and r.err.count("\n") == 1 and "internal" not in r.err, (r.code, r.err)
    assert f"DOCKER_HOST {host!r} is not an address of a Docker engine" in r.err, r.err


def test_qualify_history_of_a_nodes_folder_it_may_not_read_is_one_line(cli, tmp_path: Path, no_access: Deny):
    results = tmp_path / "r"
    assert cli("qualify", "--suite", "throughput_only", "--expect-gpus", "0", "--results", str(results),
               "--node-name", "a").code == 0
    folder = results / "qualify" / "nodes"
    no_access(folder)
    r = cli("qualify", "history", "--results", str(results))
    assert r.code == 2 and r.err.count("\n") == 1, (r.code, r.err)
    assert f"{folder}: cannot be read (Permission denied)" in r.err, r.err
