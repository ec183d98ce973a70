"""The one place an inference job meets a runner: the harness's command, with the model staged
into the job's results folder (so that a container or a Slurm node sees it as the seeds see theirs),
run through the runner the user picked the way qualification runs its steps
(`orchestrator.qualify.jobs.run_step`: output streamed to a file, a time limit, Ctrl-C stops it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from orchestrator.config.workloads import Workload
from orchestrator.qualify.jobs import StepOutcome, run_step
from orchestrator.runners.base import Runner

STAGED_MODEL = "model"
"""The folder in a job's results folder the model is staged in (removed when the job ends)."""


def stage(model: Path, results: Path) -> Path:
    """A hard link to ``model`` in ``results`` (a copy across file systems); its path relative to ``results``."""
    folder = results / STAGED_MODEL
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / model.name
    try:
        os.link(model, target)
    except OSError:
        shutil.copyfile(model, target)
    return target.relative_to(results)


def run_harness(runner: Runner, workload: Workload, *, run_id: str, name: str, args: Sequence[str], model: Path,
                data_dir: Path, folder: Path, env: dict[str, str], timeout_s: float,
                on_line: Callable[[str], None]) -> StepOutcome:
    """Run the harness once (``folder/output.log``, its results in ``folder/results``)."""
    results = folder / "results"
    results.mkdir(parents=True, exist_ok=True)
    staged = stage(model, results)
    try:
        return run_step(runner, name=name, run_id=run_id, workload=workload, command=(*workload.run, *args),
                        env={**env, "MODEL_FILE": str(staged)}, data_dir=data_dir, folder=folder,
                        timeout_s=timeout_s, on_line=on_line)
    finally:
        shutil.rmtree(results / STAGED_MODEL, ignore_errors=True)
