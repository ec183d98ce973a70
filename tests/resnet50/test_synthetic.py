from __future__ import annotations

import json
from pathlib import Path

import pytest

from workloads.resnet50 import synthetic
from workloads.resnet50.layout import READY_MARKER, expected_counts, list_dataset
from workloads.resnet50.synthetic import SyntheticSpec, synthesize

SPEC = SyntheticSpec(classes=3, train_per_class=4, val_per_class=10, size=16, mislabeled=0.2)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_synthesize_is_deterministic_and_in_the_imagenet_layout(tmp_path: Path):
    assert synthesize(SPEC, tmp_path / "a")
    assert synthesize(SPEC, tmp_path / "b")
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    train, val = list_dataset(tmp_path / "a")
    assert train.classes == ("n10000000", "n10000001", "n10000002")
    assert (len(train.samples), len(val.samples)) == (12, 30)
    assert all(path.suffix == ".JPEG" and path.read_bytes()[:2] == b"\xff\xd8" for path, _ in train.samples)
    assert expected_counts(tmp_path / "a") == (3, {"train": 12, "val": 30})


def test_another_seed_gives_other_images(tmp_path: Path):
    synthesize(SPEC, tmp_path / "a")
    synthesize(SyntheticSpec(**{**SPEC.__dict__, "seed": 1}), tmp_path / "b")
    assert _files(tmp_path / "a") != _files(tmp_path / "b")


def test_synthesize_again_is_a_no_op_and_refuses_foreign_folders(tmp_path: Path):
    out = tmp_path / "data"
    synthesize(SPEC, out)
    assert not synthesize(SPEC, out)
    with pytest.raises(FileExistsError):
        synthesize(SyntheticSpec(classes=2), out)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x").write_text("x")
    with pytest.raises(FileExistsError):
        synthesize(SPEC, tmp_path / "other")


def test_synthesize_fills_an_existing_empty_folder(tmp_path: Path):
    (tmp_path / "data").mkdir()
    assert synthesize(SPEC, tmp_path / "data")
    assert json.loads((tmp_path / "data" / READY_MARKER).read_text())["counts"] == {"train": 12, "val": 30}


def test_a_crash_leaves_no_half_written_dataset(tmp_path: Path, monkeypatch):
    def explode(spec, root, split):
        (root / split).mkdir()
        raise RuntimeError("disk full")

    monkeypatch.setattr(synthetic, "write_split", explode)
    with pytest.raises(RuntimeError):
        synthesize(SPEC, tmp_path / "data")
    assert list(tmp_path.iterdir()) == []


def test_validation_holds_the_requested_share_of_mislabelled_images():
    def drawn(split, label, index):
        return synthetic.drawn_class(SPEC, split, label, index, synthetic._image_rng(SPEC, split, label, index))

    wrong_val = [(label, i) for label in range(3) for i in range(10) if drawn("val", label, i) != label]
    assert len(wrong_val) == round(10 * 0.2) * 3
    assert all(drawn("train", label, i) == label for label in range(3) for i in range(4))


@pytest.mark.parametrize("bad", [{"classes": 1}, {"size": 4}, {"mislabeled": 0.5}, {"quality": 0}])
def test_spec_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        SyntheticSpec(**bad)
