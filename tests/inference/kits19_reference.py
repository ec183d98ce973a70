"""The MLPerf Inference 3D-UNet reference (mlcommons/inference ``vision/medical_imaging/3d-unet-kits19``)
run beside mltrain's harness on the same raw cases and the same ONNX model, from a checkout the
environment names (``MLPERF_INFERENCE_DIR``, the repository's root; nothing of it is copied here).

Each reference step runs in its own Python process, in the reference's folder (its ``global_vars``
reads ``meta/`` from there), through this file run as a script:

    python kits19_reference.py preprocess RAW OUT CASE...   # its Preprocessor: OUT/<case>.pkl, nifti/ ...
    python kits19_reference.py segment MODEL OUT CASE.pkl...  # its ONNX Runtime SUT's sliding window: OUT/<case>.npy
    python kits19_reference.py accuracy LOG PREPROCESSED POSTPROCESSED  # its accuracy_kits.py, as __main__
    python kits19_reference.py offline MODEL PREPROCESSED LOGS USER_CONF  # its run.py: an Offline performance test

Three shims let its code run on today's libraries, each named where it is applied: SciPy 1.13 moved
``scipy.signal.gaussian`` to ``scipy.signal.windows.gaussian`` (`workloads.common.mlcommons`'s shim);
pandas 2.0 removed ``DataFrame.append`` (its ``concat`` equivalent stands in) and pandas 3.0 ``float()``
of a one-row column (its value stands in). Its preprocessing driver runs without its process pool (the
same calls, one case after the other): forking a process that has loaded torch gains nothing here.

Used by tests/inference/test_kits19_reference.py and benchmarks/kits19_inference_parity.py.
"""

from __future__ import annotations

import csv
import os
import pickle
import runpy
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

ENV = "MLPERF_INFERENCE_DIR"
SUBDIR = Path("vision") / "medical_imaging" / "3d-unet-kits19"


def reference_dir() -> Path | None:
    """The reference's 3D-UNet folder in the checkout the environment names, when there is one."""
    root = os.environ.get(ENV)
    if not root:
        return None
    folder = Path(root) / SUBDIR
    return folder if (folder / "preprocess.py").is_file() else None


def run(folder: Path, *args: str) -> str:
    """This file's step ``args`` in the reference's folder, in its own process; its stdout."""
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], cwd=folder, capture_output=True,
                          text=True, check=False, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if done.returncode != 0:
        raise RuntimeError(f"the reference's {args[0]} failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


@dataclass(frozen=True, kw_only=True)
class CaseParity:
    case: str
    shape: tuple[int, ...]
    arrays_equal: bool
    """Our image and label equal the reference's preprocessing's, value for value, dtype and shape."""
    bytes_equal: bool
    """Our file is the reference's arrays pickled as its environment (NumPy 1.x) writes them."""
    segmentation_equal: bool
    """Our response (the argmax of the blended windows) is its SUT's, byte for byte."""


@dataclass(frozen=True, kw_only=True)
class Parity:
    cases: tuple[CaseParity, ...]
    our_line: str
    """Our accuracy.txt, from our harness's accuracy run (the real LoadGen)."""
    their_line: str
    """The reference's accuracy_kits.py on that same LoadGen accuracy log, against its own preprocessing."""
    per_case: dict[str, tuple[float, float, float, float]]
    """Case -> (our kidney, their kidney, our tumour, their tumour) Dice."""


def classifier(path: Path, folder: Path) -> Path:
    """An ONNX model with the reference's conventions (``input`` (N, 1, 128, 128, 128), ``output`` (N, 3,
    ...), a free ``batch_size``, opset 12) that segments a voxel by the class whose mean intensity in the
    prepared cases of ``folder`` is nearest: untrained, yet its Dice is far from 0 and from 1, so that
    the scores compared are scores of a segmentation."""
    import warnings

    import numpy as np
    import torch

    from workloads.inference.kits19.prepare import read_index
    from workloads.inference.kits19.preprocess import read_case

    sums, counts = np.zeros(3), np.zeros(3)
    for entry in read_index(folder)["cases"]:
        image, label = read_case(folder / entry["file"])
        for cls in range(3):
            sums[cls] += float(image[label == cls].sum())
            counts[cls] += int((label == cls).sum())
    means = torch.tensor(sums / np.maximum(counts, 1), dtype=torch.float32)

    class Nearest(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, 1, D, H, W) -> (N, 3, D, H, W): -(x - mean)^2
            return -((x - means.view(1, 3, 1, 1, 1)) ** 2)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Nearest(), (torch.zeros(1, 1, 128, 128, 128),), str(path), dynamo=False, opset_version=12,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch_size"}, "output": {0: "batch_size"}})
    return path


def compare(folder: Path, raw: Path, model: Path, work: Path) -> Parity:
    """Both pipelines on the raw cases ``raw`` and the ONNX model ``model`` (ROI 128^3, the reference's)."""
    import numpy as np

    from workloads.inference.backends import OnnxRuntime
    from workloads.inference.kits19.prepare import prepare
    from workloads.inference.kits19.preprocess import pickle_bytes, read_case
    from workloads.inference.models.unet3d_kits19 import Model, dice
    from workloads.inference.sut import Batching

    ours = prepare(raw, work / "cache", workers=1)
    index = ours.index
    cases = [entry["case"] for entry in index["cases"]]
    theirs = work / "reference"
    run(folder, "preprocess", str(raw), str(theirs), *cases)
    run(folder, "segment", str(model), str(work / "segmented"), *(str(theirs / f"{case}.pkl") for case in cases))
    backend = OnnxRuntime(model, device="cpu", threads=0, trace_dir=None)
    qsl = Model(ours.folder, count=None)
    rows, segmentations = [], {}
    for number, entry in enumerate(index["cases"]):
        case = entry["case"]
        with (theirs / f"{case}.pkl").open("rb") as handle:
            their_image, their_label = pickle.load(handle)  # its own output, made just now
        image, label = read_case(ours.folder / entry["file"])
        arrays = (image.dtype == their_image.dtype and label.dtype == their_label.dtype
                  and np.array_equal(image, their_image) and np.array_equal(label, their_label))
        written = (ours.folder / entry["file"]).read_bytes() == pickle_bytes(their_image, their_label)
        segmentations[case] = qsl.infer(backend, qsl.load(number), Batching(max_batch=1)).reshape(label.shape)
        their_segmentation = np.load(work / "segmented" / f"{case}.npy")
        rows.append(CaseParity(case=case, shape=tuple(image.shape), arrays_equal=arrays, bytes_equal=written,
                               segmentation_equal=segmentations[case].tobytes() == their_segmentation.tobytes()))
    out = work / "harness"
    done = subprocess.run([sys.executable, "-m", "workloads.inference", "--model-name", "3d-unet", "--model",
                           str(model), "--data", str(ours.folder), "--out", str(out), "--scenario", "Offline",
                           "--mode", "accuracy"], cwd=Path(__file__).resolve().parents[2], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"our harness failed: {done.stderr[-2000:]}")
    our_line = (out / "accuracy" / "accuracy.txt").read_text().strip()
    printed = run(folder, "accuracy", str(out / "accuracy" / "mlperf_log_accuracy.json"), str(theirs),
                  str(work / "postprocessed"))
    their_line = next(line.strip() for line in printed.splitlines() if line.startswith("Accuracy:"))
    with (work / "postprocessed" / "summary.csv").open() as handle:
        summary = {row["case"]: row for row in csv.DictReader(handle)}
    per_case = {}
    for entry in index["cases"]:
        _, label = read_case(ours.folder / entry["file"])
        kidney, tumour = dice(segmentations[entry["case"]], label)
        row = summary[entry["case"]]
        per_case[entry["case"]] = (kidney, float(row["kidney"]), tumour, float(row["tumor"]))
    return Parity(cases=tuple(rows), our_line=our_line, their_line=their_line, per_case=per_case)


# ---- what runs in the reference's process -------------------------------------------------------------


def _shims() -> None:
    import pandas

    from workloads.common.mlcommons import shim_scipy_gaussian

    shim_scipy_gaussian()  # SciPy >= 1.13: inference_utils.gaussian_kernel calls scipy.signal.gaussian
    if not hasattr(pandas.DataFrame, "append"):  # pandas >= 2.0: accuracy_kits.save_evaluation_summary calls it
        def append(self: pandas.DataFrame, row: dict, ignore_index: bool = False) -> pandas.DataFrame:
            return pandas.concat([self, pandas.DataFrame([row])], ignore_index=ignore_index)

        pandas.DataFrame.append = append
    if not hasattr(pandas.Series, "__float__"):  # pandas >= 3.0: accuracy_kits.main calls float() of a 1-row column
        def to_float(self: pandas.Series) -> float:
            if len(self) != 1:
                raise TypeError(f"float() of a Series of {len(self)} values")
            return float(self.iloc[0])

        pandas.Series.__float__ = to_float


def _preprocess(raw: str, out: str, cases: list[str]) -> None:
    import preprocess

    preprocess.TARGET_CASES = cases  # its inference list names 43 cases; the synthetic set holds these
    args = types.SimpleNamespace(data_dir=raw, results_dir=out, calibration=False, num_proc=1)
    preprocessor = preprocess.Preprocessor(args)
    aux = {"file_list": preprocessor.target_cases, "cases": {}}
    for case in preprocessor.collect_cases():  # preprocess_with_multiproc's calls, without its Pool
        done = preprocessor.preprocess_case(case)
        aux["cases"][done["case"]] = done
    preprocess.save_preprocessed_info(out, aux, preprocessor.target_cases)


def _segment(model: str, out: str, cases: list[str]) -> None:
    import numpy as np
    import onnxruntime
    import onnxruntime_SUT

    sut = onnxruntime_SUT._3DUNET_ONNXRuntime_SUT.__new__(onnxruntime_SUT._3DUNET_ONNXRuntime_SUT)
    sut.sess = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])  # its USE_GPU=no choice
    Path(out).mkdir(parents=True, exist_ok=True)
    for case in cases:
        with open(case, "rb") as handle:
            image = pickle.load(handle)[0]  # what its QSL loads: the image of [image, label]
        result, _ = sut.infer_single_query(image, "")
        np.save(Path(out) / f"{Path(case).stem}.npy", result)


def main(argv: list[str]) -> None:
    sys.path.insert(0, os.getcwd())
    _shims()
    command, *args = argv
    if command == "preprocess":
        _preprocess(args[0], args[1], args[2:])
    elif command == "segment":
        _segment(args[0], args[1], args[2:])
    elif command == "accuracy":
        sys.argv = ["accuracy_kits.py", f"--log_file={args[0]}", f"--preprocessed_data_dir={args[1]}",
                    f"--postprocessed_data_dir={args[2]}", "--num_proc=1"]
        runpy.run_path("accuracy_kits.py", run_name="__main__")
    elif command == "offline":  # its run.py as its Makefile runs it, ONNX Runtime on the CPU (its USE_GPU=no)
        os.environ.update(LOG_PATH=args[2], USE_GPU="no")
        sys.argv = ["run.py", "--backend=onnxruntime", "--scenario=Offline", f"--model={args[0]}",
                    f"--preprocessed_data_dir={args[1]}", f"--mlperf_conf={args[3]}", f"--user_conf={args[3]}"]
        runpy.run_path("run.py", run_name="__main__")
    else:
        raise SystemExit(f"unknown step {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
