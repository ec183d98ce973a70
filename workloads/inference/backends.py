"""The backends a query runs on: ONNX Runtime (CPU, CUDA and TensorRT execution providers, where
installed) and torch (a ``torch.export`` program, ``.pt2``). Each loads a model file, says what it
runs on, and turns one batch (N, 3, H, W) float32 into the model's outputs as numpy arrays.

``trace`` turns on the backend's own per-operator profiler; `stop_trace` ends it and returns the
raw profile file and its per-operator totals.
"""

from __future__ import annotations

import importlib.metadata
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from workloads.common.cli import one_line
from workloads.common.files import file_problem
from workloads.inference.errors import BackendError, HarnessError
from workloads.inference.operators import OperatorTime, onnxruntime_operators, torch_operators

EXECUTION_PROVIDERS = {"cpu": ["CPUExecutionProvider"],
                       "cuda": ["CUDAExecutionProvider", "CPUExecutionProvider"],
                       "tensorrt": ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]}


@dataclass(frozen=True, kw_only=True)
class Loaded:
    """What a backend says about itself once the model is loaded."""

    backend: str
    providers: tuple[str, ...]
    """Execution providers (ONNX Runtime) or the torch device, in the order they take nodes."""
    load_s: float
    input_name: str
    input_shape: tuple[Any, ...]
    versions: dict[str, str] = field(default_factory=dict)


class Backend(Protocol):
    loaded: Loaded

    def predict(self, batch: np.ndarray) -> Sequence[np.ndarray]: ...

    def stop_trace(self) -> tuple[Path | None, list[OperatorTime]]: ...


def version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


class OnnxRuntime:
    """An ``onnxruntime.InferenceSession`` on the providers of ``device`` (refused when absent)."""

    def __init__(self, model: Path, *, device: str, threads: int, trace_dir: Path | None) -> None:
        import onnxruntime as ort

        wanted = EXECUTION_PROVIDERS[device]
        available = ort.get_available_providers()
        if wanted[0] not in available:
            raise BackendError(f"ONNX Runtime here has no {wanted[0]} (it has {', '.join(available)}): install "
                               f"onnxruntime-gpu with CUDA{' and TensorRT' if device == 'tensorrt' else ''}, or use "
                               "--device cpu")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads:
            options.intra_op_num_threads = threads
        if trace_dir is not None:
            trace_dir.mkdir(parents=True, exist_ok=True)
            options.enable_profiling = True
            options.profile_file_prefix = str(trace_dir / "onnxruntime")
        started = time.perf_counter()
        try:
            self.session = ort.InferenceSession(str(model), sess_options=options, providers=wanted)
        except Exception as exc:  # noqa: BLE001 - ONNX Runtime raises its own exception types for a bad file
            raise HarnessError(f"{model}: ONNX Runtime cannot load it ({one_line(exc)[:300]})") from None
        load_s = time.perf_counter() - started
        first = self.session.get_inputs()[0]
        self.input_name = first.name
        self.traced = trace_dir is not None
        self.loaded = Loaded(backend="onnxruntime", providers=tuple(self.session.get_providers()), load_s=load_s,
                             input_name=first.name, input_shape=tuple(first.shape),
                             versions={"onnxruntime": ort.__version__})

    def predict(self, batch: np.ndarray) -> Sequence[np.ndarray]:
        return self.session.run(None, {self.input_name: batch})

    def stop_trace(self) -> tuple[Path | None, list[OperatorTime]]:
        if not self.traced:
            return None, []
        path = Path(self.session.end_profiling())
        return path, onnxruntime_operators(path)


class Torch:
    """A ``torch.export`` program (``torch.export.save``) on the CPU or a CUDA device."""

    def __init__(self, model: Path, *, device: str, threads: int, trace_dir: Path | None) -> None:
        import torch

        if device == "tensorrt":
            raise BackendError("--device tensorrt is an ONNX Runtime execution provider: use --backend onnxruntime")
        if device == "cuda" and not torch.cuda.is_available():
            raise BackendError("torch sees no CUDA device here: use --device cpu")
        if threads:
            torch.set_num_threads(threads)
        self.torch = torch
        self.device = torch.device(device)
        started = time.perf_counter()
        try:
            program = torch.export.load(str(model))
        except Exception as exc:  # noqa: BLE001 - torch raises many types for a file that is not a program
            raise HarnessError(f"{model}: torch.export.load cannot read it ({one_line(exc)[:300]}); "
                               "the torch backend takes a program saved by torch.export.save (.pt2)") from None
        self.module = program.module().to(self.device)
        load_s = time.perf_counter() - started
        spec = program.graph_signature.user_inputs[0] if program.graph_signature.user_inputs else "input"
        shape = program_input_shape(program, str(spec))
        self.trace_dir = trace_dir
        self.profiler = None
        if trace_dir is not None:
            trace_dir.mkdir(parents=True, exist_ok=True)
            activities = [torch.profiler.ProfilerActivity.CPU]
            if self.device.type == "cuda":
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self.profiler = torch.profiler.profile(activities=activities)
            self.profiler.__enter__()
        self.loaded = Loaded(backend="torch", providers=(str(self.device),), load_s=load_s, input_name=str(spec),
                             input_shape=shape, versions={"torch": torch.__version__})

    def predict(self, batch: np.ndarray) -> Sequence[np.ndarray]:
        with self.torch.inference_mode():
            outputs = self.module(self.torch.from_numpy(batch).to(self.device, non_blocking=True))
        if isinstance(outputs, self.torch.Tensor):
            outputs = (outputs,)
        return [o.cpu().numpy() for o in outputs]

    def stop_trace(self) -> tuple[Path | None, list[OperatorTime]]:
        if self.profiler is None or self.trace_dir is None:
            return None, []
        self.profiler.__exit__(None, None, None)
        path = self.trace_dir / "torch_profile.json"
        self.profiler.export_chrome_trace(str(path))
        operators = torch_operators(self.profiler.key_averages())
        self.profiler = None
        return path, operators


def program_input_shape(program: Any, name: str) -> tuple[Any, ...]:
    """The input's shape as the program takes it: a number per fixed axis, the symbol's name for a
    dynamic one (a batch axis exported free)."""
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name == name and node.meta.get("val") is not None:
            return tuple(d if isinstance(d, int) else str(d) for d in node.meta["val"].shape)
    return ()


UNTRUSTED_PROGRAM = ("a torch.export program runs code its author chose as it loads (pickled tensors, shape "
                     "expressions evaluated by sympy)")
"""Why the torch backend loads only a program its user vouches for (``--trust-model``)."""


def load(name: str, model: Path, *, device: str, threads: int, trace_dir: Path | None,
         trust_model: bool = False) -> Backend:
    if (problem := file_problem(model)) is not None:
        raise HarnessError(f"{model}: {'no such model file' if problem == 'missing file' else problem}")
    backends = {"onnxruntime": OnnxRuntime, "torch": Torch}
    if name not in backends:
        raise HarnessError(f"unknown backend {name!r}: onnxruntime or torch")
    if name == "torch" and not trust_model:  # refused before anything reads the file
        raise HarnessError(f"{model}: {UNTRUSTED_PROGRAM}; load only a .pt2 you made (--trust-model), "
                           "else export the model to ONNX for --backend onnxruntime")
    return backends[name](model, device=device, threads=threads, trace_dir=trace_dir)
