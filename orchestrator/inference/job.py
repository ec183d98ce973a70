"""The one place an inference job meets a runner: the harness's command, with the model staged
into the job's results folder (so that a container or a Slurm node sees it as a seed sees its data),
run through the runner the user picked as every job runs (`orchestrator.runners.jobs.run_job`:
output kept as it arrives, a time limit, Ctrl-C stops it, an outcome that explains itself).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from orchestrator.inference.declaration import DECLARATION, Harness
from orchestrator.results import atomic
from orchestrator.results.paths import JobPaths
from orchestrator.runners.base import JobSpec, Runner
from orchestrator.runners.jobs import run_job
from orchestrator.runners.outcome import JobOutcome

STAGED_MODEL = "model"
"""The folder in a job's results folder the model is staged in (removed when the job ends)."""


def as_given(line: str, model: Path) -> str:
    """A line the harness printed, its staged copy of the model (wherever the job saw it: this host's
    run folder, a container's /results) named as the user gave it: the copy is gone, and was never theirs."""
    return re.sub(rf"[^\s'\"]*/{STAGED_MODEL}/{re.escape(model.name)}(?![\w.-])", lambda _: f"--model {model}", line)


def stage(model: Path, results: Path) -> Path:
    """A hard link to ``model`` in ``results`` (a copy across file systems); its path relative to ``results``."""
    folder = results / STAGED_MODEL
    atomic.make_folder(folder)
    target = folder / model.name
    try:
        os.link(model, target)
    except OSError:
        with atomic.writing(target):
            shutil.copyfile(model, target)
    return target.relative_to(results)


def run_harness(runner: Runner, harness: Harness, *, run_id: str, name: str, args: Sequence[str], model: Path,
                data_dir: Path, folder: Path, env: dict[str, str], timeout_s: float,
                on_line: Callable[[str], None]) -> JobOutcome:
    """Run the harness once as job ``name`` of inference run ``run_id`` (``folder/output.log``, its
    results in ``folder/results``)."""
    results = JobPaths(folder).results
    atomic.make_folder(results)
    staged = stage(model, results)
    spec = JobSpec(kind="inference", name=name, run_id=run_id, bundle=harness, command=harness.run, args=tuple(args),
                   env={**env, "MODEL_FILE": str(staged)}, data_dir=data_dir, folder=folder,
                   declared=f"{harness.folder / DECLARATION} field run")
    try:
        return run_job(runner, spec, timeout_s=timeout_s, on_line=on_line)
    finally:
        shutil.rmtree(results / STAGED_MODEL, ignore_errors=True)
