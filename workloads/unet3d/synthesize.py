"""The contract's ``synthesize``: a training-ready synthetic dataset, built atomically.

Synthetic raw cases go to a temporary sibling folder, run through the real preprocessing, get a
``split.json`` and the ``.mltrain-ready`` marker (which records the arguments), and the finished
folder is renamed onto ``OUT``. A crash leaves ``OUT`` untouched; running again with the same
arguments on a ready folder does nothing. A folder made with the same arguments by an older
generator (``FORMAT``) is rebuilt; one made with other arguments is refused.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workloads.common import atomic
from workloads.common.cpus import usable_cpus
from workloads.common.errors import DataError
from workloads.unet3d.parallel import worth_starting
from workloads.unet3d.preprocess import CaseResult, PreprocessConfig, preprocess_dataset
from workloads.unet3d.split import case_name, choose_eval_cases, write_split
from workloads.unet3d.synthetic import parse_size
from workloads.unet3d.synthetic_raw import check_case_count, check_tumour_contrast, generate_raw

READY_MARKER = ".mltrain-ready"
VOXELS_PER_WORKER = 16 * 96**3  # preprocessed voxels a worker process is started for
FORMAT = "unet3d-synthetic-3"  # bump when the generator or the layout changes what a dataset holds


@dataclass(frozen=True, kw_only=True)
class SynthesizeConfig:
    """What ``synthesize`` makes."""

    cases: int = 20
    """Number of cases, ids 0..cases-1 (at most 210)."""
    seed: int = 0
    """Generator seed; the same seed and arguments give the same dataset."""
    size: str = "small"
    """``tiny``, ``small``, ``real`` or ``D,H,W`` (approximate shape after preprocessing)."""
    min_shape: int = 128
    """Pad every axis up to this size (128 = closed division)."""
    eval_cases: int | None = None
    """Evaluation cases; default the reference share 42/210 (the real split for 210 cases)."""
    tumour_contrast: float = 1.0
    """Scales how much darker than the medulla tumours are (1.0: the default look; > 1: easier)."""
    workers: int = field(default_factory=usable_cpus, compare=False)
    """Processes for generation and preprocessing (does not change the result)."""

    def __post_init__(self) -> None:
        check_case_count(self.cases)
        check_tumour_contrast(self.tumour_contrast)
        parse_size(self.size)
        if self.min_shape < 1:
            raise DataError(f"--min-shape {self.min_shape}: must be at least 1")
        if self.workers < 1:
            raise DataError(f"--workers {self.workers}: must be at least 1")
        choose_eval_cases([case_name(i) for i in range(self.cases)], self.eval_cases)

    def record(self) -> dict:
        """What the ready marker stores: everything that decides the dataset's content."""
        values = asdict(self)
        values.pop("workers")
        if values["tumour_contrast"] == 1.0:  # the default: markers stay as they were before the knob
            values.pop("tumour_contrast")
        return {"format": FORMAT, **values}


def ready_record(out_dir: Path) -> dict | None:
    """The arguments recorded in ``out_dir``'s ready marker, None when it is not ready."""
    try:
        record = json.loads((out_dir / READY_MARKER).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def synthesize(
    out_dir: Path,
    config: SynthesizeConfig,
    on_raw_case: Callable[[dict], None] | None = None,
    on_case: Callable[[CaseResult, int], None] | None = None,
) -> bool:
    """Make the dataset in ``out_dir``; return False when an identical one was already there."""
    existing = ready_record(out_dir)
    if existing == config.record():
        return False
    stale = existing is not None and _same_arguments(existing, config.record())
    if existing is not None and not stale:
        raise DataError(
            f"{out_dir}: holds a synthetic dataset made with other arguments ({_describe(existing)}); "
            "remove it or choose another folder"
        )
    if not stale and out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise DataError(f"{out_dir}: exists and is not a dataset made by synthesize; remove it or choose another")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building-", dir=out_dir.parent))
    workers = _useful_workers(config)
    try:
        raw, data = build / "raw", build / "data"
        generate_raw(
            raw, config.cases, config.seed, parse_size(config.size), workers, on_raw_case, config.tumour_contrast
        )
        preprocess_dataset(
            PreprocessConfig(raw_dir=raw, out_dir=data, min_shape=config.min_shape, workers=workers),
            on_case,
        )
        cases = [case_name(i) for i in range(config.cases)]
        evaluation = choose_eval_cases(cases, config.eval_cases)
        write_split(data, [case for case in cases if case not in evaluation], evaluation)
        atomic.write_json(data / READY_MARKER, config.record())
        data.chmod(atomic.DIR_MODE)
        try:
            if stale:  # made by an older generator with the same arguments: swap it out
                os.replace(out_dir, build / "stale")
            elif out_dir.is_dir():
                out_dir.rmdir()  # empty (checked above)
            os.replace(data, out_dir)
        except OSError:  # another process finished the same folder first
            if ready_record(out_dir) != config.record():
                raise DataError(f"{out_dir}: filled by another process while building; run again") from None
            return False
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return True


def _useful_workers(config: SynthesizeConfig) -> int:
    """One process for small sets: starting workers (importing torch) costs more than it saves."""
    shape = parse_size(config.size).preprocessed_shape
    voxels_per_case = math.prod(shape) if shape is not None else 200 * 512 * 512
    return worth_starting(voxels_per_case * config.cases, VOXELS_PER_WORKER, config.workers)


def _same_arguments(record: dict, wanted: dict) -> bool:
    """True when ``record`` differs from ``wanted`` only by the generator format (a stale dataset)."""
    return {k: v for k, v in record.items() if k != "format"} == {k: v for k, v in wanted.items() if k != "format"}


def _describe(record: dict) -> str:
    return ", ".join(f"{key}={value}" for key, value in sorted(record.items()) if key != "format")
