"""The harness's dataset commands, run where its jobs run (`Runner.dataset_command`): the smoke model
and data made once in mltrain's cache, and a user's dataset checked against the model's layout
before anything is written."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError

from orchestrator.config.files import first_problem
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


class SmokeFacts(BaseModel):
    """``smoke.json``, as the harness wrote it beside the smoke model: validated on read (a damaged
    cache with a negative reference top-1 made the accuracy target negative)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    model: str
    reference_top1: float = Field(gt=0, le=1, allow_inf_nan=False)
    """The trained smoke model's own top-1, a fraction: what the accuracy target is 99% of."""
    input_shape: tuple[PositiveInt, PositiveInt, PositiveInt]
    harness_args: tuple[str, ...]
    seconds: float | None = Field(default=None, ge=0, allow_inf_nan=False)


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
    redo = f"remove {folder} and it is made again"
    try:
        facts = SmokeFacts.model_validate(read_json(marker))
    except (OSError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        problem = first_problem(exc) if isinstance(exc, ValidationError) else " ".join(str(exc).split())
        raise DataError(f"{marker}: damaged smoke facts ({problem}); {redo}") from None
    if facts.model != model:
        raise DataError(f"{marker}: the smoke facts of {facts.model!r}, in the folder of {model!r}; {redo}")
    return SmokeAssets(folder=folder, model_onnx=folder / "model.onnx", model_torch=folder / "model.pt2",
                       data=folder / "data", reference_percent=100.0 * facts.reference_top1,
                       input_shape=facts.input_shape, harness_args=facts.harness_args, made_now=made,
                       seconds=facts.seconds)


def check_dataset(runner: Runner, harness: Harness, model: str, data: Path) -> str:
    """The harness's ``check MODEL DIR`` where the jobs run; DataError with its one line."""
    result = dataset_command(runner, harness, ["check", model, HostPath(path=data)], timeout_s=CHECK_TIMEOUT_S,
                             on_line=lambda line: None)
    if result.returncode != 0:
        raise DataError(f"{model} data in {data}: {result.last_line()}")
    return result.stdout.strip()
