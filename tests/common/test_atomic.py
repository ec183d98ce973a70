"""The kit's atomic writes (workloads/common/atomic.py): a file or folder appears complete or not at
all, readable by other users. Every workload writes through it: unet3d's dataset, resnet50's
synthetic set, the inference harness's results (whose own writer left its temporary file behind on
a failed write, unreadable by others: mode 0600)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from workloads.common import atomic


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_written_file_holds_the_bytes_and_is_readable_by_others(tmp_path: Path):
    atomic.write_bytes(tmp_path / "a.bin", b"\x00\x01")
    atomic.write_json(tmp_path / "harness.json", {"b": 1, "a": [2]})
    atomic.write_text(tmp_path / "accuracy.txt", "accuracy=76.456%\n")
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "harness.json").read_text() == '{\n  "a": [\n    2\n  ],\n  "b": 1\n}\n'
    assert (tmp_path / "accuracy.txt").read_text() == "accuracy=76.456%\n"
    assert {mode(p) for p in tmp_path.iterdir()} == {0o644}
    assert leftovers(tmp_path) == ["a.bin", "accuracy.txt", "harness.json"]


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_a_failed_write_leaves_the_old_file_and_no_partial_one(tmp_path: Path, monkeypatch, failing):
    target = tmp_path / "harness.json"
    atomic.write_json(target, {"run": 1})

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, disk_full)
    with pytest.raises(OSError, match="No space left"):
        atomic.write_json(target, {"run": 2})
    assert json.loads(target.read_text()) == {"run": 1}
    assert leftovers(tmp_path) == ["harness.json"]


def test_an_interrupted_write_leaves_nothing_new(tmp_path: Path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic.write_bytes(tmp_path / "case_00000_x.npy", b"x" * 1000)
    assert leftovers(tmp_path) == []


def test_a_staged_folder_appears_complete_and_readable(tmp_path: Path):
    out = tmp_path / "data"
    with atomic.staged_folder(out) as staging:
        assert staging.parent == tmp_path and not out.exists()
        (staging / "train").mkdir()
        (staging / "train" / "a.JPEG").write_bytes(b"jpeg")
    assert (out / "train" / "a.JPEG").read_bytes() == b"jpeg"
    assert mode(out) == 0o755  # mkdtemp's 0700 would hide the dataset from a container run as another uid
    assert leftovers(tmp_path) == ["data"]


def test_a_staged_folder_takes_the_place_of_an_empty_one(tmp_path: Path):
    out = tmp_path / "data"
    out.mkdir()
    with atomic.staged_folder(out) as staging:
        (staging / "marker").write_text("ok")
    assert (out / "marker").read_text() == "ok"


def test_a_failed_staged_folder_leaves_nothing(tmp_path: Path):
    out = tmp_path / "deep" / "data"
    with pytest.raises(RuntimeError, match="crashed"), atomic.staged_folder(out) as staging:
        (staging / "half").write_text("half written")
        raise RuntimeError("crashed")
    assert not out.exists() and leftovers(tmp_path / "deep") == []


def test_a_staged_folder_never_replaces_a_folder_with_content(tmp_path: Path):
    out = tmp_path / "data"
    out.mkdir()
    (out / "theirs").write_text("keep")
    with pytest.raises(OSError), atomic.staged_folder(out) as staging:
        (staging / "ours").write_text("new")
    assert leftovers(out) == ["theirs"] and leftovers(tmp_path) == ["data"]
