"""A toy inference model, as the recipe in docs/new_inference_model.md adds one: this file goes to
``workloads/inference/models/toy.py`` and `ENTRY` under ``models:`` in ``inference.yaml``; nothing else.

Its data: ``DIR/toy.npz`` holding ``x`` (N, 1, 2, 2) float32 and ``labels`` (N,). Its network: one
linear layer (4 -> 2 logits) as an ONNX graph; a response is the argmax class as float32. Its smoke
maker is this module's `make`: the data labelled by the network itself, so its top-1 is 100%.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from workloads.common.atomic import staged_folder, write_json
from workloads.inference.errors import HarnessError
from workloads.inference.models.common import Accuracy

NAME = "toy"
CONF_MODEL = "resnet50"
"""Its key in mlperf.conf: a toy borrows resnet50's rules."""
ROUND = None
MAX_BATCH = 8
SAMPLES = 16
WEIGHTS = np.array([[1.0, -1.0], [0.5, 0.25], [-0.75, 1.0], [0.0, 0.5]], dtype=np.float32)
ENTRY = f"""  {NAME}:
    module: toy
    smoke: workloads.inference.models.toy
    description: a toy classifier (the recipe's test)
    dataset: {{name: toy vectors, samples: {SAMPLES}}}
    input: {{shape: [1, 2, 2]}}
    accuracy: {{metric: top1, reference: 100.0, fraction: 0.99}}
    scenarios: [SingleStream, Offline]
    submission: {{benchmark: toy}}
    how_to_get: {{model: its smoke maker, data: its smoke maker}}
"""


def _read(data: Path) -> tuple[np.ndarray, np.ndarray]:
    path = data / "toy.npz"
    if not path.is_file():
        raise HarnessError(f"{path}: missing (toy data is DIR/toy.npz)")
    with np.load(path) as arrays:
        return arrays["x"].astype(np.float32), arrays["labels"].astype(np.int64)


def check(data: Path) -> str:
    x, _ = _read(data)
    return f"ok {data}: {len(x)} toy samples"


class Model:
    NAME = NAME

    def __init__(self, data: Path, *, count: int | None) -> None:
        self.x, self.labels = _read(data)
        if count:
            self.x, self.labels = self.x[:count], self.labels[:count]

    @property
    def count(self) -> int:
        return len(self.x)

    def load(self, index: int) -> np.ndarray:
        return self.x[index]

    def respond(self, outputs: Sequence[np.ndarray], indices: Sequence[int]) -> list[np.ndarray]:
        classes = np.asarray(outputs[0]).reshape(len(indices), -1).argmax(axis=-1)
        return [np.array([c], dtype=np.float32) for c in classes]

    def accuracy(self, entries: list[tuple[int, bytes]]) -> Accuracy:
        good = sum(1 for i, data in entries if int(np.frombuffer(data, np.float32)[0]) == self.labels[i])
        percent = 100.0 * good / len(entries) if entries else 0.0
        return Accuracy(metric="top1", percent=percent, samples=len(entries),
                        line=f"accuracy={percent:.3f}%, good={good}, total={len(entries)}")


def _network(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Flatten", ["x"], ["flat"]), helper.make_node("MatMul", ["flat", "w"], ["logits"])],
        "toy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, 2, 2])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 2])],
        initializer=[numpy_helper.from_array(WEIGHTS, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def make(out: Path, *, with_model: bool = True) -> bool:
    """The toy data and model in ``out``, atomically; False when they are there."""
    if (out / "smoke.json").is_file():
        return False
    with staged_folder(out) as staging:
        x = np.random.default_rng(1).standard_normal((SAMPLES, 1, 2, 2)).astype(np.float32)
        (staging / "data").mkdir()
        np.savez(staging / "data" / "toy.npz", x=x, labels=(x.reshape(SAMPLES, 4) @ WEIGHTS).argmax(axis=1))
        _network(staging / "model.onnx")
        write_json(staging / "smoke.json", {"model": NAME, "samples": SAMPLES, "reference_top1": 1.0,
                                            "input_shape": [1, 2, 2], "harness_args": []})
    return True
