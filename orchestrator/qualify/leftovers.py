"""What a killed `mltrain qualify` left running: a qualification (or a fleet) holds a lock in its
folder while its jobs run and removes it when it ends, so a lock file nobody holds marks one whose
mltrain was killed. The next qualification on the same results folder stops that one's jobs, found
by its id (`Runner.stop_leftovers`), before its own start."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from orchestrator.errors import MltrainError
from orchestrator.results.qualifications import Qualifications
from orchestrator.runners.base import Runner


def stop_abandoned(store: Qualifications, parent: Path, runner: Runner, status: Callable[[str], None]) -> None:
    """Stop the jobs of every qualification under ``parent`` a killed mltrain left, and say so. One
    whose jobs cannot be listed (the engine is down) keeps its lock file, for the next time."""
    for run_id in store.abandoned(parent):
        try:
            stopped = runner.stop_leftovers(run_id)
        except MltrainError as exc:
            status(f"{run_id} was left running by a killed mltrain; its jobs could not be stopped: {exc}")
            continue
        store.forget(parent, run_id)
        if stopped:
            status(f"{run_id}: stopped what an earlier mltrain left running: {', '.join(stopped)}")
