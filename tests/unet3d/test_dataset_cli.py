"""The dataset command line: exit codes, one-line errors naming the case or file, atomic results."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nibabel
import numpy as np
import pytest

from workloads.unet3d.dataset import main
from workloads.unet3d.split import load_split, reference_eval_cases

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--cases", "6", "--size", "tiny", "--min-shape", "16", "--seed", "3", "--workers", "1"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def last_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "data"
    assert main(["synthesize", str(out), *ARGS]) == 0
    return out


@pytest.fixture()
def copy(dataset: Path, tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(dataset, target)
    return target


# ---- synthesize / check -----------------------------------------------------------------------


def test_synthesize_makes_a_ready_split_dataset(dataset: Path, capsys) -> None:
    names = sorted(p.name for p in dataset.iterdir())
    assert ".mltrain-ready" in names and "split.json" in names and "manifest.json" in names
    assert len([n for n in names if n.endswith(".npy")]) == 12
    assert not [n for n in names if n.endswith(".tmp")]
    assert not [p for p in dataset.parent.iterdir() if p.name.startswith(".")]  # build folder gone
    train, evaluation = load_split(dataset)
    assert len(evaluation) == 1 and len(train) == 5  # round(6 * 42 / 210) = 1
    image = np.load(dataset / f"{train[0]}_x.npy")
    label = np.load(dataset / f"{train[0]}_y.npy")
    assert image.dtype == np.float32 and label.dtype == np.uint8
    assert image.shape == label.shape and image.shape[0] == 1 and min(image.shape[1:]) >= 16
    code, out, err = run(capsys, "check", str(dataset))
    assert code == 0 and "ready (5 train + 1 eval cases" in err and out == ""


def test_synthesize_again_is_a_noop_and_other_args_are_refused(dataset: Path, capsys) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in dataset.iterdir()}
    code, _, err = run(capsys, "synthesize", str(dataset), *ARGS)
    assert code == 0 and "nothing to do" in err
    assert before == {p.name: p.stat().st_mtime_ns for p in dataset.iterdir()}
    code, _, err = run(capsys, "synthesize", str(dataset), *ARGS[:-4], "--seed", "4", "--workers", "1")
    assert_one_line_error(code, err, "other arguments", "seed=3")


def test_synthesize_is_deterministic(dataset: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    assert main(["synthesize", str(again), *ARGS]) == 0
    for path in dataset.glob("case_*.npy"):
        assert path.read_bytes() == (again / path.name).read_bytes(), path.name


def test_synthesize_refuses_a_foreign_folder(tmp_path: Path, capsys) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    code, _, err = run(capsys, "synthesize", str(foreign), *ARGS)
    assert_one_line_error(code, err, "not a dataset made by synthesize")
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]


def test_210_cases_get_the_reference_split() -> None:
    from workloads.unet3d.split import case_name, choose_eval_cases

    cases = [case_name(i) for i in range(210)]
    assert choose_eval_cases(cases) == reference_eval_cases()
    assert len(reference_eval_cases()) == 42


def test_split_without_split_json_uses_the_reference_cases(copy: Path) -> None:
    (copy / "split.json").unlink()
    train, evaluation = load_split(copy)
    assert evaluation == ["case_00000", "case_00003", "case_00005"]  # reference ids among 0..5
    assert train == ["case_00001", "case_00002", "case_00004"]


def test_check_names_a_missing_label(copy: Path, capsys) -> None:
    (copy / "case_00002_y.npy").unlink()
    code, _, err = run(capsys, "check", str(copy))
    assert_one_line_error(code, err, "case_00002_y.npy is missing")


def test_check_names_a_missing_image(copy: Path, capsys) -> None:
    (copy / "case_00004_x.npy").unlink()
    code, _, err = run(capsys, "check", str(copy))
    assert_one_line_error(code, err, "case_00004_x.npy is missing")


def test_check_names_a_truncated_file(copy: Path, capsys) -> None:
    path = copy / "case_00001_x.npy"
    path.write_bytes(path.read_bytes()[:-100])
    code, _, err = run(capsys, "check", str(copy))
    assert_one_line_error(code, err, "case_00001_x.npy is truncated")


def test_check_names_a_wrong_dtype(copy: Path, capsys) -> None:
    np.save(copy / "case_00003_y.npy", np.zeros((1, 16, 16, 16), np.int64))
    code, _, err = run(capsys, "check", str(copy))
    assert_one_line_error(code, err, "case_00003_y.npy has dtype int64")


def test_check_names_a_split_case_without_files(copy: Path, capsys) -> None:
    split = json.loads((copy / "split.json").read_text())
    split["train"].append("case_00099")
    (copy / "split.json").write_text(json.dumps(split))
    code, _, err = run(capsys, "check", str(copy))
    assert_one_line_error(code, err, "case_00099")


def test_check_on_an_empty_folder(tmp_path: Path, capsys) -> None:
    code, _, err = run(capsys, "check", str(tmp_path))
    assert_one_line_error(code, err, "no case_XXXXX_x.npy files")


# ---- verify ------------------------------------------------------------------------------------


def test_verify_against_the_manifest(copy: Path, capsys) -> None:
    code, _, err = run(capsys, "verify", str(copy))
    assert code == 0 and "all 12 files match" in err
    path = copy / "case_00002_y.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    code, _, err = run(capsys, "verify", str(copy))
    assert_one_line_error(code, err, "1 of 12 files differ", "case_00002: changed since preprocessing")


def test_verify_against_reference_style_sums_names_the_stage(copy: Path, tmp_path: Path, capsys) -> None:
    manifest = json.loads((copy / "manifest.json").read_text())
    sums = {name: out["md5"] for entry in manifest["cases"].values() for name, out in entry["outputs"].items()}
    sums["case_00001_x.npy"] = "0" * 32  # the image differs, the label matches
    sums["case_00003_x.npy"] = sums["case_00003_y.npy"] = "0" * 32
    sums["case_00007_x.npy"] = "0" * 32  # a file we do not have
    checksum = tmp_path / "checksum.json"
    checksum.write_text(json.dumps(sums))
    code, _, err = run(capsys, "verify", str(copy), "--checksums", str(checksum))
    assert_one_line_error(
        code,
        err,
        "1 files missing (case_00007_x.npy)",
        "3 of 13 files differ",
        "case_00001: image only",
        "case_00003: image and label",
    )


def test_verify_against_the_mlperf_reference_sums_reports_missing_files(copy: Path, capsys) -> None:
    code, _, err = run(capsys, "verify", str(copy), "--checksums", "reference")
    assert_one_line_error(code, err, "408 files missing")  # 420 reference files, we have 6 cases


# ---- raw layout --------------------------------------------------------------------------------


@pytest.fixture()
def raw(tmp_path: Path, capsys) -> Path:
    folder = tmp_path / "raw"
    code, _, _ = run(capsys, "generate-raw", str(folder), "--cases", "3", "--seed", "1", "--size", "tiny",
                     "--workers", "1")
    assert code == 0
    return folder


def test_verify_raw_accepts_generated_data(raw: Path, capsys) -> None:
    code, _, err = run(capsys, "verify-raw", str(raw), "--workers", "1")
    assert code == 0 and "3 cases OK" in err


def test_verify_raw_missing_case(raw: Path, capsys) -> None:
    shutil.rmtree(raw / "case_00001")
    code, _, err = run(capsys, "verify-raw", str(raw), "--workers", "1")
    assert_one_line_error(code, err, "case_00001: missing case folder (listed in kits.json)")


def test_verify_raw_missing_file(raw: Path, capsys) -> None:
    (raw / "case_00002" / "segmentation.nii.gz").unlink()
    code, _, err = run(capsys, "verify-raw", str(raw), "--workers", "1")
    assert_one_line_error(code, err, "case_00002/segmentation.nii.gz: missing file")


def test_verify_raw_truncated_gzip(raw: Path, capsys) -> None:
    path = raw / "case_00000" / "imaging.nii.gz"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    code, _, err = run(capsys, "verify-raw", str(raw), "--workers", "1")
    assert_one_line_error(code, err, "case_00000/imaging.nii.gz:")


def test_verify_raw_corrupt_gzip(raw: Path, capsys) -> None:
    path = raw / "case_00001" / "segmentation.nii.gz"
    path.write_bytes(gzip.compress(b"not a nifti file at all" * 20))
    code, _, err = run(capsys, "verify-raw", str(raw), "--workers", "1")
    assert_one_line_error(code, err, "case_00001/segmentation.nii.gz: unreadable NIfTI")


def test_verify_raw_shape_mismatch(raw: Path, capsys) -> None:
    path = raw / "case_00002" / "segmentation.nii.gz"
    label = nibabel.load(path)
    smaller = np.asanyarray(label.dataobj)[:, :-1]
    nibabel.save(nibabel.Nifti1Image(smaller, label.affine), path)
    code, _, err = run(capsys, "verify-raw", str(raw), "--workers", "1")
    assert_one_line_error(code, err, "case_00002: image shape", "differs from segmentation shape")


def test_verify_raw_nan_image(raw: Path, capsys) -> None:
    path = raw / "case_00001" / "imaging.nii.gz"
    image = nibabel.load(path)
    data = np.asanyarray(image.dataobj).astype(np.float32)
    data[1, 2, 3] = np.nan
    nibabel.save(nibabel.Nifti1Image(data, image.affine), path)
    code, _, err = run(capsys, "verify-raw", str(raw), "--workers", "1")
    assert_one_line_error(code, err, "case_00001/imaging.nii.gz: image holds NaN")


def test_verify_raw_empty_folder(tmp_path: Path, capsys) -> None:
    code, _, err = run(capsys, "verify-raw", str(tmp_path))
    assert_one_line_error(code, err, "no case_XXXXX folders")


def test_preprocess_bad_raw_writes_nothing_half(raw: Path, tmp_path: Path, capsys) -> None:
    path = raw / "case_00002" / "imaging.nii.gz"
    path.write_bytes(path.read_bytes()[:400])
    out = tmp_path / "out"
    code, _, err = run(capsys, "preprocess", str(raw), str(out), "--workers", "1", "--min-shape", "8")
    assert code == 2 and "case_00002" in last_line(err) and "Traceback" not in err
    names = sorted(p.name for p in out.iterdir())
    assert names == ["case_00000_x.npy", "case_00000_y.npy", "case_00001_x.npy", "case_00001_y.npy",
                     "manifest.json"]
    assert list(json.loads((out / "manifest.json").read_text())["cases"]) == ["case_00000", "case_00001"]


def test_preprocess_cli_summary_and_resume(raw: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    code, _, err = run(capsys, "preprocess", str(raw), str(out), "--workers", "1", "--min-shape", "8")
    assert code == 0 and "3 cases (3 preprocessed, 0 unchanged)" in last_line(err)
    code, _, err = run(capsys, "preprocess", str(raw), str(out), "--workers", "1", "--min-shape", "8")
    assert code == 0 and "3 cases (0 preprocessed, 3 unchanged)" in last_line(err)
    code, _, err = run(capsys, "verify", str(out))
    assert code == 0


# ---- usage -------------------------------------------------------------------------------------


def test_usage_errors_are_one_line(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["synthesize"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "required: out" in err
    code, _, err = run(capsys, "generate-raw", "x", "--cases", "211", "--workers", "1")
    assert_one_line_error(code, err, "--cases 211")
    code, _, err = run(capsys, "synthesize", "x", "--size", "64,64", "--workers", "1")
    assert_one_line_error(code, err, "--size")


def test_how_to_get_names_the_download() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "workloads.unet3d.dataset", "how-to-get"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0
    assert "starter_code.get_imaging" in result.stdout and "29 GB" in result.stdout


def test_module_entry_exit_code_without_traceback(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "workloads.unet3d.dataset", "check", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "does not exist" in result.stderr


def test_preprocess_missing_label_file_names_it(raw: Path, tmp_path: Path, capsys) -> None:
    (raw / "case_00001" / "segmentation.nii.gz").unlink()
    code, _, err = run(capsys, "preprocess", str(raw), str(tmp_path / "out"), "--workers", "1", "--min-shape", "8")
    assert_one_line_error(code, err, "case_00001/segmentation.nii.gz: missing file")


def test_output_path_that_is_a_file_is_one_line(raw: Path, tmp_path: Path, capsys) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    code, _, err = run(capsys, "preprocess", str(raw), str(target), "--workers", "1")
    assert_one_line_error(code, err, str(target))


def test_a_dataset_from_an_older_generator_is_rebuilt(copy: Path, capsys) -> None:
    marker = copy / ".mltrain-ready"
    record = json.loads(marker.read_text())
    current = record["format"]
    record["format"] = "unet3d-synthetic-0"
    marker.write_text(json.dumps(record))
    (copy / "case_00001_x.npy").write_bytes(b"stale")
    code, _, err = run(capsys, "synthesize", str(copy), *ARGS)
    assert code == 0 and "ready" in err
    assert json.loads(marker.read_text())["format"] == current
    assert np.load(copy / "case_00001_x.npy").dtype == np.float32
    assert not [p for p in copy.parent.iterdir() if p.name.startswith(".")]
