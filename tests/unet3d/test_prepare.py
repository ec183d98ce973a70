"""`prepare SRC --cache DIR`: raw KiTS19 in, training-ready folder out, once per content."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from workloads.common.errors import DataError
from workloads.unet3d import prepare as prepare_module
from workloads.unet3d.dataset import main
from workloads.unet3d.prepare import READY_MARKER, is_reference_kits19, prepare
from workloads.unet3d.split import case_name
from workloads.unet3d.verify import check_ready

SMALL = ["--min-shape", "16", "--workers", "1"]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def raw_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("raw") / "kits19"
    assert main(["generate-raw", str(folder), "--cases", "4", "--seed", "5", "--size", "tiny", "--workers", "1"]) == 0
    return folder


@pytest.fixture()
def raw(raw_template: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "raw"
    shutil.copytree(raw_template, folder)
    return folder


def test_raw_is_preprocessed_once_into_the_cache_and_printed(raw: Path, tmp_path: Path, capsys) -> None:
    cache = tmp_path / "cache"
    code, out, err = cli(capsys, "prepare", str(raw), "--cache", str(cache), *SMALL)
    assert code == 0, err
    (folder,) = [Path(line) for line in out.splitlines()]
    assert folder.parent == cache and folder.name.startswith("kits19-") and (folder / READY_MARKER).is_file()
    assert check_ready(folder).train + check_ready(folder).evaluation == 4
    assert "preprocessed into" in err and not list(cache.glob(".*.building"))
    stamps = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}

    code, again, err = cli(capsys, "prepare", str(raw), "--cache", str(cache), *SMALL)
    assert code == 0 and again == out and "preprocessed before" in err
    assert stamps == {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}  # nothing rewritten


def test_a_ready_folder_is_its_own_answer(raw: Path, tmp_path: Path, capsys) -> None:
    cache = tmp_path / "cache"
    ready = Path(cli(capsys, "prepare", str(raw), "--cache", str(cache), *SMALL)[1].strip())
    code, out, err = cli(capsys, "prepare", str(ready), "--cache", str(tmp_path / "other"), *SMALL)
    assert (code, out, err) == (0, f"{ready}\n", "")
    assert not (tmp_path / "other").exists()


def test_the_cache_follows_content_not_place_or_mtime(raw: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = prepare(raw, cache, min_shape=16)
    moved = tmp_path / "elsewhere"
    shutil.copytree(raw, moved)
    image = moved / "case_00002" / "imaging.nii.gz"
    os.utime(image, ns=(1, 1))  # same bytes, another mtime: hashed again, same key
    again = prepare(moved, cache, min_shape=16)
    assert again.folder == first.folder and first.made and not again.made
    shutil.copy(raw / "case_00001" / "imaging.nii.gz", image)  # other bytes (same shape): a new key
    shutil.copy(raw / "case_00001" / "segmentation.nii.gz", moved / "case_00002" / "segmentation.nii.gz")
    changed = prepare(moved, cache, min_shape=16)
    assert changed.made and changed.folder != first.folder
    padded = prepare(raw, cache, min_shape=24)  # other preprocessing parameters: a new key
    assert padded.made and padded.folder not in (first.folder, changed.folder)


def test_an_interrupted_preparation_resumes(raw: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    seen: list[bool] = []

    def stop_after_two(result, total: int) -> None:
        seen.append(result.skipped)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        prepare(raw, cache, min_shape=16, on_case=stop_after_two)
    assert not list(cache.glob("kits19-*"))  # nothing published half-made
    seen.clear()
    finished = prepare(raw, cache, min_shape=16, on_case=lambda result, total: seen.append(result.skipped))
    assert finished.made and sorted(seen) == [False, False, True, True]  # two were done already


def test_neither_ready_nor_raw_is_the_checks_one_line_error(tmp_path: Path, capsys) -> None:
    code, out, err = cli(capsys, "prepare", str(tmp_path), "--cache", str(tmp_path / "cache"), *SMALL)
    assert code == 2 and out == "" and err.count("\n") == 1 and "no case_XXXXX_x.npy files" in err


def test_a_broken_raw_layout_fails_before_preprocessing(raw: Path, tmp_path: Path, capsys) -> None:
    (raw / "case_00003" / "segmentation.nii.gz").unlink()
    code, out, err = cli(capsys, "prepare", str(raw), "--cache", str(tmp_path / "cache"), *SMALL)
    assert code == 2 and out == "" and "case_00003/segmentation.nii.gz: missing file" in err
    assert err.count("\n") == 1


def test_the_real_kits19_is_recognised(tmp_path: Path) -> None:
    cases = [case_name(i) for i in range(210)]
    (tmp_path / "kits.json").write_text(json.dumps([{"case_id": c} for c in cases]))
    assert is_reference_kits19(tmp_path, cases)
    assert not is_reference_kits19(tmp_path, cases[:-1])
    (tmp_path / "kits.json").write_text(json.dumps([{"case_id": c, "synthetic": True} for c in cases]))
    assert not is_reference_kits19(tmp_path, cases)


def test_the_real_kits19_must_match_the_reference_checksums(raw: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(prepare_module, "is_reference_kits19", lambda src, cases: True)
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match="files missing"):
        prepare(raw, cache)  # the closed padding; these 4 synthetic cases are not the reference's files
    assert not list(cache.glob("kits19-*"))


@pytest.mark.parametrize(("which", "values", "says"), [
    ("image", np.nan, "NaN or infinite values in its middle slice: preprocess the case again"),
    ("image", np.inf, "NaN or infinite values"),
    ("label", 7, "holds label 7 (KiTS19 has 0, 1 and 2)"),
])
def test_a_case_of_nan_or_unknown_labels_fails_the_ready_check(raw: Path, tmp_path: Path, capsys, which, values,
                                                                 says) -> None:
    ready = Path(cli(capsys, "prepare", str(raw), "--cache", str(tmp_path / "cache"), *SMALL)[1].strip())
    case = sorted(p.name[: -len("_x.npy")] for p in ready.glob("case_*_x.npy"))[0]
    path = ready / f"{case}_{'x' if which == 'image' else 'y'}.npy"
    volume = np.load(path)
    volume[...] = values  # every voxel, as a broken preprocessing run leaves it
    np.save(path, volume)
    code, _, err = cli(capsys, "check", str(ready))
    assert code != 0 and says in err and path.name in err
