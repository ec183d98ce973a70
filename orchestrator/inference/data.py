"""The harness's dataset commands, run where its jobs run (`Runner.dataset_command`): the smoke model
and data made once in mltrain's cache, and a user's dataset checked against the model's layout
before anything is written."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.config.locations import data_cache_dir
from orchestrator.config.reading import read_json
from orchestrator.errors import DataError
from orchestrator.inference.declaration import Harness
from orchestrator.runners.base import HostPath, Runner
from orchestrator.runners.jobs import dataset_command

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


def ensure_smoke(runner: Runner, harness: Harness, model: str, status: Callable[[str], None]) -> SmokeAssets:
    """The smoke assets, made by the harness (training the smoke model: about a minute) when missing."""
    folder = smoke_dir(harness.name, model)
    made = not (folder / SMOKE_MARKER).is_file()
    if made:
        status(f"making the smoke {model} model and data in {folder} (once: it trains for about a minute)")
        folder.parent.mkdir(parents=True, exist_ok=True)
        out = HostPath(path=folder, writable=True, mount=folder.parent)
        result = dataset_command(runner, harness, ["smoke", model, out], timeout_s=SMOKE_TIMEOUT_S,
                                 on_line=lambda line: None)
        if result.returncode != 0:
            raise DataError(f"making the smoke {model} model failed {result.where}: {result.last_line()}")
    marker = folder / SMOKE_MARKER
    try:
        facts = read_json(marker)
        return SmokeAssets(folder=folder, model_onnx=folder / "model.onnx", model_torch=folder / "model.pt2",
                           data=folder / "data", reference_percent=100.0 * float(facts["reference_top1"]),
                           input_shape=tuple(int(d) for d in facts["input_shape"]),  # type: ignore[arg-type]
                           harness_args=tuple(str(a) for a in facts["harness_args"]), made_now=made,
                           seconds=facts.get("seconds"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{marker}: unreadable smoke facts ({exc}); remove {folder} and it is made again") from None


def check_dataset(runner: Runner, harness: Harness, model: str, data: Path) -> str:
    """The harness's ``check MODEL DIR`` where the jobs run; DataError with its one line."""
    result = dataset_command(runner, harness, ["check", model, HostPath(path=data)], timeout_s=CHECK_TIMEOUT_S,
                             on_line=lambda line: None)
    if result.returncode != 0:
        raise DataError(f"{model} data in {data}: {result.last_line()}")
    return result.stdout.strip()
