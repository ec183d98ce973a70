"""A finished seed's trained 3D U-Net as the model MLPerf Inference's 3D-UNet takes.

    python -m workloads.unet3d.export SEED_RESULTS OUT.onnx    # ONNX, the reference's conventions
    python -m workloads.unet3d.export SEED_RESULTS OUT.pt2     # a torch.export program (the torch backend)

The trainer writes the weights into its results folder after run_stop (`save`: ``model.pt``, the
state dict, and ``model.json``, what rebuilds the net: filters, classes, the evaluation window).
The ONNX file follows the inference reference's ``unet_pytorch_to_onnx.py`` for its dynamic-batch
model: input ``input`` (N, 1, D, H, W) float32, output ``output`` (N, 3, D, H, W) logits, the batch
axis ``batch_size`` free, opset 12, no constant folding. D, H, W are the training's evaluation
window (the reference's 128^3 for the closed model).

Exit codes: 0 written (OUT on stdout), 2 a results folder without weights or a bad OUT (one line).
"""

from __future__ import annotations

import io
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

from workloads.common import atomic
from workloads.common.cli import Parser, one_line, run_main
from workloads.common.errors import DataError
from workloads.common.files import file_problem
from workloads.unet3d.model import UNet3D, UNet3DConfig

WEIGHTS = "model.pt"
FACTS = "model.json"
OPSET = 12
"""The reference converter's opset."""
INPUT_NAME, OUTPUT_NAME, BATCH_AXIS = "input", "output", "batch_size"


def save(model: torch.nn.Module, config: UNet3DConfig, window: tuple[int, int, int], results: Path,
         facts: dict[str, Any]) -> None:
    """``model``'s weights (on the CPU) and what rebuilds it, into ``results`` (each file atomically)."""
    state = {name: tensor.detach().cpu().contiguous() for name, tensor in model.state_dict().items()}
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic.write_bytes(results / WEIGHTS, buffer.getvalue())
    atomic.write_json(results / FACTS, {**facts, "filters": list(config.filters), "in_channels": config.in_channels,
                                        "n_classes": config.n_classes, "window": list(window),
                                        "torch": torch.__version__})


def load(results: Path) -> tuple[UNet3D, dict[str, Any]]:
    """The trained net (CPU, eval mode) and its facts; DataError naming what is missing or damaged. The
    weights are read as tensors only (``weights_only``): a pickle that would run code is refused, one line."""
    weights, facts_file = results / WEIGHTS, results / FACTS
    problems = {path: file_problem(path) for path in (weights, facts_file)}
    if "missing file" in problems.values():
        raise DataError(f"{results}: no trained weights ({WEIGHTS}, {FACTS}): the seed did not finish, or ran "
                        "with SAVE_MODEL=0")
    for path, problem in problems.items():
        if problem:
            raise DataError(f"{path}: {problem}")
    facts, config = read_facts(facts_file)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's words about a pickle it refuses: the refusal below says it
            state = torch.load(weights, map_location="cpu", weights_only=True)
        network = UNet3D(config)
        network.load_state_dict(state)
    except Exception as exc:  # noqa: BLE001 - a damaged or hostile file: torch raises UnpicklingError, RuntimeError ...
        raise DataError(f"{weights}: not the trained weights of {FACTS}'s net ({type(exc).__name__}: "
                        f"{one_line(exc)[:200]})") from None
    return network.eval(), facts


MAX_FACTS_BYTES = 1 << 20
"""``model.json`` is a few hundred bytes; anything far larger is not one."""


def read_facts(path: Path) -> tuple[dict[str, Any], UNet3DConfig]:
    """``model.json`` checked: the net's filters, channels and classes positive ints, its window three
    positive ints; DataError naming the file and what is wrong."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FACTS_BYTES + 1)
        if len(raw) > MAX_FACTS_BYTES:
            raise ValueError(f"larger than {MAX_FACTS_BYTES} bytes")
        facts = json.loads(raw)
        if not isinstance(facts, dict):
            raise ValueError(f"a JSON {type(facts).__name__}, not an object")
        filters = _positive_ints(facts["filters"], "filters")
        window = _positive_ints(facts["window"], "window")
        if len(window) != 3:
            raise ValueError(f"window {window}: give D, H, W")
        in_channels, n_classes = (_positive_ints([facts[key]], key)[0] for key in ("in_channels", "n_classes"))
        config = UNet3DConfig(filters=filters, in_channels=in_channels, n_classes=n_classes)
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        what = f"no {exc}" if isinstance(exc, KeyError) else one_line(exc)[:200]
        raise DataError(f"{path}: damaged trained-model facts ({what})") from None
    return {**facts, "window": list(window)}, config


def _positive_ints(values: Any, name: str) -> tuple[int, ...]:
    if not isinstance(values, list) or not values or not all(
            isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 4096 for v in values):
        raise ValueError(f"{name} {str(values)[:60]}: give whole numbers from 1 to 4096")
    return tuple(values)


def export(results: Path, out: Path) -> dict[str, Any]:
    """Write ``out`` (.onnx or .pt2) from the weights in ``results``; what was written."""
    if out.suffix not in (".onnx", ".pt2"):
        raise DataError(f"{out}: give a .onnx (ONNX Runtime) or .pt2 (torch) file")
    network, facts = load(results)
    window = tuple(int(v) for v in facts["window"])
    example = torch.zeros(1, network.config.in_channels, *window)
    out.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    if out.suffix == ".onnx":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript-based exporter is deprecated; it is the reference's
            torch.onnx.export(network, (example,), buffer, dynamo=False, opset_version=OPSET, do_constant_folding=False,
                              input_names=[INPUT_NAME], output_names=[OUTPUT_NAME],
                              dynamic_axes={INPUT_NAME: {0: BATCH_AXIS}, OUTPUT_NAME: {0: BATCH_AXIS}})
    else:
        batch = torch.export.Dim(BATCH_AXIS, min=1, max=1024)
        program = torch.export.export(network, (torch.zeros(2, *example.shape[1:]),), dynamic_shapes={"x": {0: batch}})
        torch.export.save(program, buffer)
    atomic.write_bytes(out, buffer.getvalue())
    return {"file": str(out), "input": [BATCH_AXIS, network.config.in_channels, *window], "opset": OPSET,
            "filters": facts["filters"]}


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m workloads.unet3d.export", description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a finished seed's results folder (RESULTS_DIR)")
    parser.add_argument("out", type=Path, help="the model file to write: .onnx or .pt2")
    args = parser.parse_args(argv)

    def _run() -> None:
        written = export(args.results, args.out)
        sys.stderr.write(f"exported {args.results} as {args.out} (input {', '.join(map(str, written['input']))})\n")
        sys.stdout.write(f"{args.out}\n")

    return run_main(_run, prefix="unet3d export")


if __name__ == "__main__":
    sys.exit(main())
