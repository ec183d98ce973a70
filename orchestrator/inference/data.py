"""The harness's dataset commands, run where its jobs run (`Runner.dataset_command`): the smoke model
and data made once in mltrain's cache, and a user's dataset prepared for the model before anything
is written: used as it is when it is in the model's layout (checked), else made once from what it
holds into mltrain's cache by the harness (3D-UNet's inference cases from raw KiTS19)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError

from orchestrator.config.files import first_problem
from orchestrator.config.locations import data_cache_dir
from orchestrator.config.reading import SMALL_BYTES, read_json
from orchestrator.errors import DataError
from orchestrator.inference.declaration import Harness
from orchestrator.runners.base import DatasetArg, HostPath, Runner
from orchestrator.runners.jobs import dataset_command
from orchestrator.session.datasets import HeldBack

SMOKE_MARKER = "smoke.json"
SMOKE_TIMEOUT_S = 1800
PREPARE_TIMEOUT_S = 2 * 24 * 3600
"""Preparing a dataset from raw data (KiTS19's 43 inference cases resampled) may take an hour on a small host."""


@dataclass(frozen=True, kw_only=True)
class SmokeAssets:
    """The smoke model and data as the harness made them (its ``smoke.json``)."""

    folder: Path
    model_onnx: Path
    model_torch: Path
    data: Path
    reference_percent: float
    """The trained model's own accuracy (top-1, mean Dice ...), in percent: the 'FP32 reference' the
    target is a fraction of."""
    input_shape: tuple[int, ...]
    harness_args: tuple[str, ...]
    made_now: bool
    seconds: float | None
    """How long making them took, all of it (a model's training included), when made now."""


class SmokeFacts(BaseModel):
    """``smoke.json``, as the harness wrote it beside the smoke model: validated on read (a damaged
    cache with a negative reference top-1 made the accuracy target negative)."""

    model_config = ConfigDict(defer_build=True, extra="ignore", frozen=True)

    model: str
    data: str = Field(default="data", pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
    """The data's folder in the smoke folder: a name there, not a path out of it."""
    reference_top1: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    """The trained smoke model's own top-1, a fraction: what the accuracy target is a share of."""
    reference_accuracy: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    """The same for another metric (3D-UNet's mean Dice)."""
    input_shape: tuple[PositiveInt, ...] = ()
    """The model's input without its batch axis (none where only the data was made)."""
    harness_args: tuple[str, ...]
    seconds: float | None = Field(default=None, ge=0, allow_inf_nan=False)


def smoke_dir(harness: str, model: str) -> Path:
    return data_cache_dir() / harness / f"{model}-smoke"


def ensure_smoke(runner: Runner, harness: Harness, model: str, status: Callable[[str], None], *,
                 with_model: bool = True) -> SmokeAssets:
    """The smoke assets, made by the harness (training the smoke model: about a minute) when missing;
    without ``with_model``, the data alone will do (a training run's model runs on it)."""
    folder = smoke_dir(harness.name, model)
    marker = folder / SMOKE_MARKER
    made = not marker.is_file() or (with_model and not _read_facts(marker).get("model_files", True))
    if made:
        what = "model and data" if with_model else "data"
        status(f"making the smoke {model} {what} in {folder} (once{': it trains for about a minute' * with_model})")
        folder.parent.mkdir(parents=True, exist_ok=True)
        out = HostPath(path=folder, writable=True, mount=folder.parent)
        started = time.monotonic()
        result = dataset_command(runner, harness, ["smoke", model, out, *([] if with_model else ["--data-only"])],
                                 timeout_s=SMOKE_TIMEOUT_S, on_line=lambda line: None)
        if result.returncode != 0:
            raise result.failure(f"making the smoke {model} {what}")
        took: float | None = time.monotonic() - started  # all of it: the data, the training, the export
    else:
        took = None
    redo = f"remove {folder} and it is made again"
    try:
        facts = SmokeFacts.model_validate(read_json(marker, max_bytes=SMALL_BYTES))
    except (OSError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        problem = first_problem(exc) if isinstance(exc, ValidationError) else " ".join(str(exc).split())
        raise DataError(f"{marker}: damaged smoke facts ({problem}); {redo}") from None
    if facts.model != model:
        raise DataError(f"{marker}: the smoke facts of {facts.model!r}, in the folder of {model!r}; {redo}")
    reference = facts.reference_accuracy if facts.reference_accuracy is not None else facts.reference_top1
    return SmokeAssets(folder=folder, model_onnx=folder / "model.onnx", model_torch=folder / "model.pt2",
                       data=folder / facts.data,
                       reference_percent=100.0 * reference if reference is not None else 0.0,
                       input_shape=facts.input_shape, harness_args=facts.harness_args, made_now=made,
                       seconds=took if took is not None else facts.seconds)


def prepared_dir(harness: str) -> Path:
    """Where the harness's ``prepare`` makes datasets (the ``--cache`` it is given)."""
    return data_cache_dir() / harness / "prepared"


@dataclass(frozen=True, kw_only=True)
class PreparedData:
    folder: Path
    """What the jobs read: the folder given, or the one made from it."""
    said: str
    """The harness's line about it ('ok DIR: 43 KiTS19 inference cases ...')."""


def prepare_dataset(runner: Runner, harness: Harness, model: str, data: Path, input_shape: Sequence[int],
                    status: Callable[[str], None], *, model_file: Path | None = None) -> PreparedData:
    """The harness's ``prepare MODEL DIR --cache CACHE --input-shape ...`` where the jobs run; DataError
    with its one line. ``model_file``: a file whose input mltrain cannot read (a torch program, trusted),
    whose shape the harness reads instead of ``input_shape``."""
    cache = prepared_dir(harness.name)
    cache.mkdir(parents=True, exist_ok=True)
    args: list[DatasetArg] = ["prepare", model, HostPath(path=data), "--cache", HostPath(path=cache, writable=True)]
    if model_file is not None:
        args += ["--model", HostPath(path=model_file)]
    else:
        args += ["--input-shape", ",".join(str(d) for d in input_shape)]
    lines = HeldBack(status)  # its progress as it comes; its last line is an error's, said once
    result = dataset_command(runner, harness, args, timeout_s=PREPARE_TIMEOUT_S, on_line=lines.add)
    if result.returncode != 0:
        raise DataError(f"{model} data in {data}: {result.last_line()}")
    printed = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    if not printed:
        raise DataError(f"{harness.name}: its dataset command `prepare {model} {data}` printed no folder")
    folder = result.host_path(printed[-1])
    if not folder.is_dir():
        raise DataError(f"{harness.name}: `prepare {model} {data}` printed {printed[-1]}, which is not a folder here")
    lines.flush()
    return PreparedData(folder=folder, said=result.last_line())


def _read_facts(marker: Path) -> dict[str, Any]:
    try:
        facts = read_json(marker, max_bytes=SMALL_BYTES)
    except (OSError, ValueError):
        return {}
    return facts if isinstance(facts, dict) else {}
