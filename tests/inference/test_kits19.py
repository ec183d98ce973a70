"""3D-UNet's inference dataset and scoring, without the reference at hand: the case files pickled as
the reference's environment (NumPy 1.x) pickles them (md5s taken from NumPy 1.26's own output), read
back without running anything but NumPy's array constructor, the inference cases made once from a
raw KiTS19 layout, the Dice of the reference's float64 one-hot arithmetic, and the sliding window
the same whatever the windows per backend call."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from workloads.common.errors import DataError
from workloads.inference.kits19.prepare import prepare, read_index, select_cases
from workloads.inference.kits19.preprocess import (
    adjust_for_sliding_window,
    inference_cases,
    pickle_bytes,
    read_case,
    reference_checksums,
)
from workloads.inference.models.unet3d_kits19 import Model, dice, summary_line
from workloads.inference.sut import Batching
from workloads.unet3d.synthetic import parse_size
from workloads.unet3d.synthetic_raw import generate_raw

NUMPY_1_MD5 = {  # pickle.dump([image, label], f) under NumPy 1.26.4 (Python 3.11, protocol 4)
    (1, 2, 3, 4): "f23180b4bc9fd1dda63bea497c3b75b7",
    (1, 8, 64, 64): "c92189baeadcd107b571b90aa1b31ae6",  # beyond a 64 KiB frame
    (1, 40, 48, 56): "17c0aedeef154e87ee0310d072147b23",
}


def numbered(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.float32).reshape(shape) / 7).astype(np.float32), \
        (np.arange(n) % 3).astype(np.uint8).reshape(shape)


@pytest.mark.parametrize("shape", list(NUMPY_1_MD5))
def test_case_files_are_the_bytes_numpy_1_pickles(shape: tuple[int, ...], tmp_path: Path):
    data = pickle_bytes(*numbered(shape))
    assert hashlib.md5(data).hexdigest() == NUMPY_1_MD5[shape]
    (tmp_path / "c.pkl").write_bytes(data)
    image, label = read_case(tmp_path / "c.pkl")
    assert np.array_equal(image, numbered(shape)[0]) and np.array_equal(label, numbered(shape)[1])


def test_a_case_file_that_would_run_code_is_refused_without_running_it(tmp_path: Path):
    class Boom:
        def __reduce__(self):
            return (print, ("ran",))

    (tmp_path / "evil.pkl").write_bytes(pickle.dumps([Boom()]))
    with pytest.raises(DataError, match=r"evil.pkl: not a preprocessed KiTS19 case .*builtins.print"):
        read_case(tmp_path / "evil.pkl")
    buffer = io.BytesIO()
    pickle.dump([np.zeros((1, 2, 2, 2), np.float64), np.zeros((1, 2, 2, 2), np.uint8)], buffer)
    (tmp_path / "f64.pkl").write_bytes(buffer.getvalue())
    with pytest.raises(DataError, match="not \\[image float32, label uint8\\]"):
        read_case(tmp_path / "f64.pkl")


def test_the_reference_meta_files_are_its_43_cases_and_their_checksums():
    cases = inference_cases()
    assert len(cases) == 43 and cases[-1] == "case_00400"
    sums = reference_checksums()
    assert set(sums) == {f"{c}.pkl" for c in cases} and sums["case_00400.pkl"] == sums["case_00185.pkl"]


def test_sliding_window_crop_and_pad_as_the_reference(tmp_path: Path):
    image = np.ones((1, 70, 100, 129), np.float32)
    label = np.ones((1, 70, 100, 129), np.uint8)
    out_image, out_label = adjust_for_sliding_window(image, label, (64, 64, 64))
    # 70 % 32 = 6 < 16: cropped to 64; 100 % 32 = 4: cropped to 96; 129 % 32 = 1: cropped to 128
    assert out_image.shape == (1, 64, 96, 128) and out_label.shape == out_image.shape
    small = np.ones((1, 40, 64, 50), np.float32)
    padded, padded_label = adjust_for_sliding_window(small, small.astype(np.uint8), (64, 64, 64))
    assert padded.shape == (1, 64, 64, 64)  # 40 % 32 = 8 < 16: 32, then padded to one ROI; 50 % 32 = 18: padded
    assert padded[0, 0, 0, 0] == np.float32(-2.2) and padded_label[0, 0, 0, 0] == 0 and padded[0, 20, 20, 20] == 1


def test_select_cases_takes_case_00185_for_the_missing_case_00400(tmp_path: Path):
    for case in ("case_00000", "case_00185", "case_00001"):
        (tmp_path / case).mkdir()
        for name in ("imaging.nii.gz", "segmentation.nii.gz"):
            (tmp_path / case / name).write_bytes(b"")
    assert select_cases(tmp_path) == [("case_00000", "case_00000"), ("case_00185", "case_00185"),
                                      ("case_00400", "case_00185")]
    (tmp_path / "none").mkdir()
    with pytest.raises(DataError, match="none of the 43 inference cases"):
        select_cases(tmp_path / "none")


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("kits19") / "raw"
    generate_raw(folder, 7, 0, parse_size("tiny"), workers=1)
    return folder


def test_prepare_makes_the_inference_cases_once_and_finds_them_again(raw: Path, tmp_path: Path):
    made = prepare(raw, tmp_path / "cache", roi=(24, 24, 24), workers=1)
    assert made.made and made.folder.parent == tmp_path / "cache"
    index = read_index(made.folder)
    assert [c["case"] for c in index["cases"]] == ["case_00000", "case_00003", "case_00005", "case_00006"]
    assert index["roi"] == [24, 24, 24] and not index["reference_data"] and not index["verified"]
    for entry in index["cases"]:
        image, label = read_case(made.folder / entry["file"])
        assert list(image.shape) == entry["shape"] and all(s % 12 == 0 and s >= 24 for s in image.shape[1:])
        assert hashlib.md5((made.folder / entry["file"]).read_bytes()).hexdigest() == entry["md5"]
    again = prepare(raw, tmp_path / "cache", roi=(24, 24, 24), workers=1)
    assert again.folder == made.folder and not again.made
    assert prepare(made.folder, tmp_path / "other", workers=1).folder == made.folder  # a prepared folder is used
    other_roi = prepare(raw, tmp_path / "cache", roi=(48, 48, 48), workers=1)
    assert other_roi.folder != made.folder and read_index(other_roi.folder)["roi"] == [48, 48, 48]
    (made.folder / "case_00003.pkl").write_bytes(b"short")
    with pytest.raises(DataError, match="case_00003.pkl: 5 bytes, index.json recorded"):
        read_index(made.folder)



def test_a_prepared_folder_is_found_again_without_starting_a_process(raw: Path, tmp_path: Path, monkeypatch):
    """Every `mltrain infer 3d-unet` run asks for its folder again: the raw headers are read here, not
    by worker processes that each import the preprocessing (about 10 s apiece on a busy 2-core host)."""
    import shutil

    import workloads.unet3d.parallel

    raw = Path(shutil.copytree(raw, tmp_path / "raw"))  # its own copy: one of its files is broken below
    made = prepare(raw, tmp_path / "cache", roi=(24, 24, 24), workers=1)

    def no_pool(*args, **kwargs):
        raise AssertionError("a process pool was started")

    monkeypatch.setattr(workloads.unet3d.parallel, "ProcessPoolExecutor", no_pool)
    again = prepare(raw, tmp_path / "cache", roi=(24, 24, 24), workers=2)
    assert again.folder == made.folder and not again.made
    (raw / "case_00003" / "imaging.nii.gz").write_bytes(b"not a NIfTI")
    with pytest.raises(DataError, match="case_00003/imaging.nii.gz: unreadable NIfTI"):
        prepare(raw, tmp_path / "cache", roi=(24, 24, 24), workers=2)


def test_finding_a_prepared_folder_imports_neither_torch_nor_scipy_s_signal_processing():
    """The dataset command `mltrain infer 3d-unet` runs on every run, its folder cached or not: the sliding
    window's geometry and the preprocessing's steps are read without torch, scipy.signal and scipy.ndimage
    (before: about 6 CPU seconds of import a run, for a check of a few milliseconds). SciPy's package
    itself nibabel imports, in milliseconds."""
    import subprocess
    import sys

    code = ("import sys, workloads.inference.dataset, workloads.inference.models.unet3d_kits19; "
            "print(','.join(m for m in ('torch', 'scipy.signal', 'scipy.ndimage') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "", f"the inference dataset command imported {loaded}"


def reference_dice(prediction: np.ndarray, target: np.ndarray) -> np.ndarray:
    """accuracy_kits.py's arithmetic written out: one-hot float64 maps, background dropped."""
    def one_hot(x: np.ndarray) -> np.ndarray:
        return np.transpose(np.eye(3)[x.reshape(-1)].reshape(*x.shape, 3), (0, 4, 1, 2, 3)).astype(np.float64)

    p, t = one_hot(prediction)[:, 1:], one_hot(target)[:, 1:]
    return ((2.0 * np.sum(t * p, axis=(2, 3, 4)) + 1e-6) / (np.sum(t, axis=(2, 3, 4)) + np.sum(p, axis=(2, 3, 4))
                                                            + 1e-6))[0]


def test_dice_is_the_reference_scripts_float64_one_hot_arithmetic():
    rng = np.random.default_rng(3)
    for shape in ((1, 17, 19, 23), (1, 40, 40, 40)):
        target = rng.integers(0, 3, shape).astype(np.uint8)
        prediction = np.where(rng.random(shape) < 0.8, target, rng.integers(0, 3, shape)).astype(np.uint8)
        assert dice(prediction, target) == tuple(reference_dice(prediction, target))
    empty = np.zeros((1, 4, 4, 4), np.uint8)
    assert dice(empty, empty) == (1.0, 1.0)  # the smoothing terms: nothing to find, nothing found
    assert summary_line(0.861704, 0.93474, 0.78866) == "Accuracy: mean = 0.86170, kidney = 0.9347, tumor = 0.7887"


class Linear:
    """A backend double: per voxel, class scores that are linear in the intensity."""

    def __init__(self, fixed: int | None = None) -> None:
        self.batches: set[int] = set()
        self.fixed = fixed

    def predict(self, batch: np.ndarray) -> list[np.ndarray]:
        assert self.fixed is None or len(batch) == self.fixed
        self.batches.add(len(batch))
        return [np.concatenate([batch * 0.0, batch, -batch], axis=1).astype(np.float32)]


def test_the_segmentation_is_the_same_whatever_the_windows_per_call(raw: Path, tmp_path: Path):
    folder = prepare(raw, tmp_path / "cache", roi=(24, 24, 24), workers=1).folder
    model = Model(folder, count=None)
    model.check_input(("batch_size", 1, 24, 24, 24))
    with pytest.raises(Exception, match="prepared for a 24x24x24 window"):
        model.check_input(("batch_size", 1, 128, 128, 128))
    image = model.load(1)
    one, four = Linear(fixed=1), Linear()
    first = model.infer(one, image, Batching(max_batch=1, fixed=1))
    assert np.array_equal(first, model.infer(four, image, Batching(max_batch=4)))
    assert one.batches == {1} and max(four.batches) == 4 and first.dtype == np.uint8 and first.size == image[0].size
    scored = model.accuracy([(1, first.tobytes())])
    assert scored.samples == 1 and scored.metric == "DICE" and scored.line.startswith("Accuracy: mean = ")
    assert json.loads(json.dumps(scored.parts)) == scored.parts


class RandomLinear:
    """A deterministic network double: per window, the logits of each class a fixed random linear map
    of the window's voxels (a weight and a bias per class and voxel), so that each voxel's windows
    disagree and the blend has something to weigh."""

    def __init__(self, window: tuple[int, int, int], seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.scale = rng.standard_normal((3, *window), dtype=np.float32)
        self.shift = rng.standard_normal((3, *window), dtype=np.float32)

    def __call__(self, windows: np.ndarray) -> np.ndarray:  # (n, 1, *window) -> (n, 3, *window)
        return windows * self.scale + self.shift

    def predict(self, batch: np.ndarray) -> list[np.ndarray]:  # as a backend
        return [self(batch)]


@pytest.mark.parametrize("shape", [(17, 24, 31), (16, 24, 32), (5, 9, 40), (24, 8, 8)])
def test_the_numpy_sliding_window_is_the_torch_one_bit_for_bit(shape: tuple[int, int, int]):
    """The harness runs the windows in NumPy (no torch on ONNX Runtime), training's evaluation in
    torch: on odd volumes (padded) and whole strides (not), whatever the windows per call, the same
    float32 logits and the same segmentation, to the bit."""
    import torch

    from workloads.unet3d.evaluate import sliding_window_logits
    from workloads.unet3d.windows import numpy_sliding_window_logits

    window = (8, 8, 16)
    network = RandomLinear(window, seed=sum(shape))
    image = np.random.default_rng(len(shape) + shape[0]).standard_normal((1, 1, *shape), dtype=np.float32)
    model = Model.__new__(Model)
    model.roi = window
    for batch in (1, 3, 4, 64):
        ours = numpy_sliding_window_logits(network, image, window, 0.5, batch=batch)
        with torch.inference_mode():
            theirs = sliding_window_logits(lambda w: torch.from_numpy(network(w.numpy())), torch.from_numpy(image),
                                           window, 0.5, batch=batch).numpy()
        assert ours.dtype == theirs.dtype == np.float32 and ours.shape == theirs.shape == (1, 3, *shape)
        assert np.array_equal(ours, theirs)
        segmentation = model.infer(network, image[0], Batching(max_batch=batch))
        expected = torch.argmax(torch.from_numpy(theirs[0]), dim=0).numpy().astype(np.uint8)
        assert segmentation.dtype == np.uint8 and np.array_equal(segmentation, expected.reshape(-1))


def test_a_raw_folder_of_the_inference_cases_alone_needs_no_kits_json(raw: Path, tmp_path: Path):
    """Only case_00003 and case_00005 (ids not from 0, no kits.json): the two inference cases are made
    (before: "case_00000: missing case folder (ids run from 0 to 5)"); a broken one is still named."""
    import shutil

    only = tmp_path / "raw"
    for case in ("case_00003", "case_00005"):
        shutil.copytree(raw / case, only / case)
    made = prepare(only, tmp_path / "cache", roi=(24, 24, 24), workers=1)
    assert [c["case"] for c in read_index(made.folder)["cases"]] == ["case_00003", "case_00005"]
    (only / "case_00005" / "segmentation.nii.gz").unlink()
    shutil.copytree(raw / "case_00006", only / "case_00006")
    (only / "case_00006" / "imaging.nii.gz").write_bytes(b"not a volume")
    with pytest.raises(DataError, match=r"case_00006/imaging.nii.gz: unreadable NIfTI"):
        prepare(only, tmp_path / "cache", roi=(24, 24, 24), workers=1)


MEMORY_PROBE = """
import resource
import numpy as np
from workloads.inference.models.unet3d_kits19 import Model
from workloads.inference.sut import Batching

class Zeros:
    def predict(self, batch):
        return [np.zeros((len(batch), 3, *batch.shape[2:]), np.float32)]

model = Model.__new__(Model)
model.roi = (64, 64, 64)
image = np.random.default_rng(0).standard_normal((1, 192, 256, 256), dtype=np.float32)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
segmentation = model.infer(Zeros(), image, Batching(max_batch=1))
assert segmentation.dtype == np.uint8 and segmentation.size == image.size
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024 / image.size)
"""


def test_a_volume_s_segmentation_holds_less_than_22_bytes_a_voxel_beside_the_volume():
    """The blended logits (12 bytes a voxel) and their weights (4) are the sliding window's; the
    volume is not copied when it needs no padding, and the argmax is taken a slab at a time (before:
    an int64 argmax of the whole volume, 25 bytes a voxel, 31 with a padded copy; two workers, two volumes)."""
    import subprocess
    import sys

    from tests.conftest import PROJECT

    done = subprocess.run([sys.executable, "-c", MEMORY_PROBE], capture_output=True, text=True, cwd=PROJECT,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 22, f"{float(done.stdout):.1f} bytes a voxel beside the volume"


def test_small_raw_cases_are_prepared_without_starting_a_process(raw: Path, tmp_path: Path, monkeypatch):
    """A worker process imports numpy, scipy and torch before its first case (seconds): one is started per
    64 MiB of raw files (workers_for), so a small set is made here (before: 2 workers on
    the smoke set's 2 MB took 19.6 CPU seconds, this process 4.8)."""
    import workloads.unet3d.parallel

    def no_pool(*args, **kwargs):
        raise AssertionError("a process pool was started")

    monkeypatch.setattr(workloads.unet3d.parallel, "ProcessPoolExecutor", no_pool)
    made = prepare(raw, tmp_path / "cache", roi=(24, 24, 24), workers=2)
    assert made.made and len(read_index(made.folder)["cases"]) == 4


def test_the_smoke_data_is_made_without_starting_a_process(tmp_path: Path, monkeypatch):
    """`mltrain infer 3d-unet --profile smoke` on a fresh cache makes 40 cases of 24^3 (about a second's
    work): before, one spawned worker per CPU first imported torch and scipy (28 s on 2 busy cores)."""
    import workloads.unet3d.parallel
    from workloads.inference.kits19.smoke import make
    from workloads.unet3d.smoke_profile import SMOKE_DATA

    def no_pool(*args, **kwargs):
        raise AssertionError("a process pool was started")

    monkeypatch.setattr(workloads.unet3d.parallel, "ProcessPoolExecutor", no_pool)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)  # any host: 4 CPUs
    assert make(tmp_path / "smoke", with_model=False)
    facts = json.loads((tmp_path / "smoke" / "smoke.json").read_text())
    assert not facts["model_files"] and facts["samples"] == len(select_cases(tmp_path / "smoke" / "raw")) > 0
    assert len(json.loads((tmp_path / "smoke" / "raw" / "kits.json").read_text())) == SMOKE_DATA["cases"]
