"""The dataset command line through a real subprocess: exit codes and the one-line errors."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from PIL import Image

from workloads.resnet50.layout import list_dataset
from workloads.resnet50.synthetic import SyntheticSpec, synthesize

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workloads.resnet50.dataset", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_synthesize_check_verify_succeed(tmp_path: Path):
    out = tmp_path / "data"
    made = cli("synthesize", out, "--classes", 3, "--train-per-class", 4, "--val-per-class", 2, "--size", 16)
    assert made.returncode == 0 and "3 classes, 12 train and 6 val images" in made.stdout
    assert (out / ".mltrain-ready").is_file()
    assert cli("check", out).returncode == 0
    verified = cli("verify", out)
    assert verified.returncode == 0 and "all decode" in verified.stdout


def test_prepare_prints_a_ready_folder_and_refuses_others(own_dataset: Path, tmp_path: Path):
    ready = cli("prepare", own_dataset, "--cache", tmp_path / "cache")
    assert ready.returncode == 0 and ready.stdout == f"{own_dataset}\n" and "ok " in ready.stderr
    assert not (tmp_path / "cache").exists()
    shutil.rmtree(own_dataset / "val")
    refused = cli("prepare", own_dataset, "--cache", tmp_path / "cache")
    assert_one_line_error(refused, "missing split folder")
    assert refused.stdout == ""


def test_missing_split_folder(own_dataset: Path):
    shutil.rmtree(own_dataset / "val")
    for command in ("check", "verify"):
        assert_one_line_error(cli(command, own_dataset), str(own_dataset / "val"), "missing split folder")


def test_empty_class_folder(own_dataset: Path):
    folder = own_dataset / "train" / "n10000002"
    for image in folder.iterdir():
        image.unlink()
    assert_one_line_error(cli("verify", own_dataset), str(folder), "empty class folder")


def test_corrupt_jpeg_is_named_by_verify(own_dataset: Path):
    train, _ = list_dataset(own_dataset)
    broken = train.samples[30][0]  # not the first image of its class: only the full scan sees it
    broken.write_bytes(broken.read_bytes()[: len(broken.read_bytes()) // 3])
    assert cli("check", own_dataset).returncode == 0
    assert_one_line_error(cli("verify", own_dataset), str(broken), "cannot decode")


def test_one_corrupt_jpeg_in_thousands_is_found_by_the_parallel_scan(tmp_path: Path):
    out = tmp_path / "data"
    synthesize(SyntheticSpec(classes=10, train_per_class=200, val_per_class=10, size=16), out)
    broken = out / "train" / "n10000007" / "n10000007_123.JPEG"
    broken.write_bytes(broken.read_bytes()[:-60])  # truncated: the end of the scan data is missing
    assert_one_line_error(cli("verify", out, "--workers", 2), f"{broken}: cannot decode: image file is truncated")


def test_several_corrupt_files_are_counted(own_dataset: Path):
    train, _ = list_dataset(own_dataset)
    for path, _ in train.samples[5:8]:
        path.write_bytes(b"not a jpeg")
    assert_one_line_error(cli("verify", own_dataset), str(train.samples[5][0]), "and 2 more unreadable images")


def test_missing_images_break_the_counts(own_dataset: Path):
    next((own_dataset / "val" / "n10000001").iterdir()).unlink()
    assert_one_line_error(cli("check", own_dataset), "79 images, expected 80")


def test_val_classes_must_match_train(own_dataset: Path):
    (own_dataset / "val" / "n10000001").rename(own_dataset / "val" / "n99999999")
    assert_one_line_error(cli("check", own_dataset), "'n99999999' is not in train/")


def test_flat_val_folder_gets_a_hint(tmp_path: Path):
    (tmp_path / "train" / "n01").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(tmp_path / "train" / "n01" / "a.JPEG")
    (tmp_path / "val").mkdir()
    (tmp_path / "val" / "ILSVRC2012_val_00000001.JPEG").write_bytes(b"x")
    assert_one_line_error(cli("check", tmp_path), "one folder per class")


def test_missing_folder_and_bad_synthesize_args(tmp_path: Path):
    assert_one_line_error(cli("check", tmp_path / "nope"), "no such dataset folder")
    assert_one_line_error(cli("synthesize", tmp_path / "x", "--classes", 1), "invalid classes")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("x")
    assert_one_line_error(cli("synthesize", tmp_path / "busy"), "not this synthetic dataset")


def test_how_to_get_names_the_layout():
    result = cli("how-to-get")
    assert result.returncode == 0 and "train/<wnid>/*.JPEG" in result.stdout and "1,281,167" in result.stdout
