"""The harness's dataset commands, run where its jobs run (`Runner.dataset_command`): the smoke model
and data made once in mltrain's cache, and a user's dataset checked against the model's layout
before anything is written."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.config.locations import data_cache_dir
from orchestrator.config.workloads import Workload
from orchestrator.errors import DataError
from orchestrator.runners.base import DatasetArg, DatasetResult, HostPath, Runner

SMOKE_MARKER = "smoke.json"
SMOKE_TIMEOUT_S = 1800
CHECK_TIMEOUT_S = 600


@dataclass(frozen=True, kw_only=True)
class SmokeAssets:
    """The smoke model and data as the harness made them (its ``smoke.json``)."""

    folder: Path
    model_onnx: Path
    model_torch: Path
    data: Path
    reference_percent: float
    """The trained model's own top-1, in percent (the 'FP32 reference' the target is 99% of)."""
    input_shape: tuple[int, int, int]
    harness_args: tuple[str, ...]
    made_now: bool
    seconds: float | None


def smoke_dir(harness: str, model: str) -> Path:
    return data_cache_dir() / harness / f"{model}-smoke"


def _call(runner: Runner, workload: Workload, args: list[DatasetArg], timeout_s: float,
          status: Callable[[str], None]) -> DatasetResult:
    try:
        return runner.dataset_command(workload, args, timeout_s=timeout_s, on_line=status)
    except subprocess.TimeoutExpired:
        raise DataError(f"{workload.name} dataset command {args[0]} took over {timeout_s:.0f} s") from None
    except OSError as exc:
        raise DataError(f"{workload.name} dataset command {' '.join(workload.data.cli)}: {exc.strerror}") from None


def _last_line(result: DatasetResult) -> str:
    return result.stderr_tail[-1].strip() if result.stderr_tail else f"exit status {result.returncode}"


def ensure_smoke(runner: Runner, workload: Workload, model: str, status: Callable[[str], None]) -> SmokeAssets:
    """The smoke assets, made by the harness (training the smoke model: about a minute) when missing."""
    folder = smoke_dir(workload.name, model)
    made = not (folder / SMOKE_MARKER).is_file()
    if made:
        status(f"making the smoke {model} model and data in {folder} (once: it trains for about a minute)")
        folder.parent.mkdir(parents=True, exist_ok=True)
        out = HostPath(path=folder, writable=True, mount=folder.parent)
        result = _call(runner, workload, ["smoke", model, out], SMOKE_TIMEOUT_S, lambda line: None)
        if result.returncode != 0:
            raise DataError(f"making the smoke {model} model failed {result.where}: {_last_line(result)}")
    marker = folder / SMOKE_MARKER
    try:
        facts = json.loads(marker.read_text())
        return SmokeAssets(folder=folder, model_onnx=folder / "model.onnx", model_torch=folder / "model.pt2",
                           data=folder / "data", reference_percent=100.0 * float(facts["reference_top1"]),
                           input_shape=tuple(int(d) for d in facts["input_shape"]),  # type: ignore[arg-type]
                           harness_args=tuple(str(a) for a in facts["harness_args"]), made_now=made,
                           seconds=facts.get("seconds"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{marker}: unreadable smoke facts ({exc}); remove {folder} and it is made again") from None


def check_dataset(runner: Runner, workload: Workload, model: str, data: Path) -> str:
    """The harness's ``check MODEL DIR`` where the jobs run; DataError with its one line."""
    result = _call(runner, workload, ["check", model, HostPath(path=data)], CHECK_TIMEOUT_S, lambda line: None)
    if result.returncode != 0:
        raise DataError(f"{model} data in {data}: {result.host_text(_last_line(result))}")
    return result.stdout.strip()
