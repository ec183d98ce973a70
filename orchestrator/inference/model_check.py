"""A model file checked before anything runs: it loads as ONNX, its opset is one ONNX Runtime can
take, and its one input (an image batch, or a volume's) has the model's shape (the batch axis free).
One line, exit 2."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.config.reading import not_a_file, open_regular
from orchestrator.errors import UsageError
from orchestrator.inference.declaration import InputFacts

ONNX_SUFFIX = ".onnx"
TORCH_SUFFIX = ".pt2"
MAX_BATCH = 65_536
"""The most samples one backend call may take (a fixed batch axis, --max-batch): beyond it a batch of
the smallest model's inputs no longer fits a GPU, nor LoadGen's queries of a test."""
UNTRUSTED_PROGRAM = ("a torch.export program runs code its author chose as it loads (pickled tensors, shape "
                     "expressions evaluated by sympy)")


@dataclass(frozen=True, kw_only=True)
class CheckedModel:
    path: Path
    sha256: str
    input_name: str
    input_shape: tuple[int | str, ...]
    opset: int | None


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open_regular(path) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_model(path: Path, backend: str, expected: InputFacts, *, trusted: bool = False) -> CheckedModel:
    """The file as the backend will take it; UsageError naming the file and what is wrong. A torch
    program runs code as it loads (pickle, sympy's eval of its shape expressions: no check of its
    contents makes it safe), so one the user does not vouch for (``trusted``) is refused unread."""
    wrong = not_a_file(path)  # a folder, a device, a FIFO: said as what it is
    if wrong is not None:
        raise UsageError(f"--model {path}: {wrong}")
    if backend == "torch":
        if path.suffix != TORCH_SUFFIX:
            raise UsageError(f"--model {path}: the torch backend takes a torch.export program (.pt2)")
        if not trusted:
            raise UsageError(f"--model {path}: {UNTRUSTED_PROGRAM}; run only a .pt2 you made (--trust-model), "
                             "else export the model to ONNX for --backend onnxruntime")
        return CheckedModel(path=path, sha256=sha256(path), input_name="", input_shape=(), opset=None)
    return _check_onnx(path, expected)


def _check_onnx(path: Path, expected: InputFacts) -> CheckedModel:
    import onnx
    from onnx import defs

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - onnx raises DecodeError, ValueError, OSError for a bad file
        raise UsageError(f"--model {path}: not an ONNX model ({' '.join(str(exc).split())[:160]})") from None
    if not model.HasField("graph") and not model.opset_import:  # protobuf reads an empty file, and many others
        raise UsageError(f"--model {path}: not an ONNX model (no graph and no opset in it)")
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    newest = defs.onnx_opset_version()
    if opset is None or not expected.min_opset <= opset <= newest:
        raise UsageError(f"--model {path}: opset {opset} is outside {expected.min_opset}..{newest} "
                         "(what this ONNX and ONNX Runtime take)")
    inputs = _inputs(model)
    if len(inputs) != 1:
        raise UsageError(f"--model {path}: {len(inputs)} inputs ({', '.join(i.name for i in inputs)}); "
                         "the model must take one batch of samples")
    tensor = inputs[0].type.tensor_type
    shape = _input_dims(inputs[0])
    expected = own_window(expected, shape)
    want = ("N", *expected.shape)
    if len(shape) != len(want) or any(have != need for have, need in zip(shape[1:], expected.shape, strict=True)):
        raise UsageError(f"--model {path}: input {inputs[0].name!r} has shape {_dims(shape)}, the model takes "
                         f"{_dims(want)} (N the batch): export it for that input")
    if isinstance(shape[0], int) and not 1 <= shape[0] <= MAX_BATCH:
        raise UsageError(f"--model {path}: input {inputs[0].name!r} has a fixed batch of {shape[0]:,} samples; "
                         f"give a model whose batch axis is free or from 1 to {MAX_BATCH:,}")
    if tensor.elem_type != onnx.TensorProto.FLOAT:
        raise UsageError(f"--model {path}: input {inputs[0].name!r} is not float32 "
                         f"({onnx.TensorProto.DataType.Name(tensor.elem_type)})")
    return CheckedModel(path=path, sha256=sha256(path), input_name=inputs[0].name, input_shape=shape, opset=opset)


def own_window(expected: InputFacts, dims: tuple[int | str, ...]) -> InputFacts:
    """The input a file must take: the declared one, with the file's own window where the model slides
    one (``window: model``) and the file fixes it (every axis after the batch and the channels a size)."""
    if expected.window != "model" or len(dims) != len(expected.shape) + 1:
        return expected
    spatial = dims[2:]
    if not all(isinstance(d, int) and d > 0 for d in spatial):
        return expected
    return expected.model_copy(update={"shape": (expected.shape[0], *spatial)})


def onnx_input_dims(path: Path) -> tuple[int | str, ...]:
    """The first graph input's dimensions (a number, or the name of a free axis); () when unreadable
    (`check_model` then says why)."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001 - any failure to read is check_model's to explain
        return ()
    inputs = _inputs(model)
    return _input_dims(inputs[0]) if inputs else ()


def _inputs(model: Any) -> list[Any]:
    """The graph's inputs that are not weights."""
    initializers = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def _input_dims(value: Any) -> tuple[int | str, ...]:
    dims = value.type.tensor_type.shape.dim
    return tuple(d.dim_param or (d.dim_value if d.HasField("dim_value") else "?") for d in dims)


def _dims(shape: tuple[int | str, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"
