"""A training run's trained model as an inference model file: the seed chosen (given, else the first
that converged, else the first that finished), and the workload's declared export (``workload.yaml``
``export``: its command and the inference model it feeds) run where the workload's dataset commands
run, on that seed's results folder (where the trainer wrote its weights after run_stop).

Used by ``mltrain export RUN --model FILE`` and by ``mltrain infer MODEL --model RUN``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.config.locations import data_cache_dir
from orchestrator.config.workloads import DataDecl, Registry, Workload
from orchestrator.errors import DataError, UsageError
from orchestrator.results.paths import check_run_id
from orchestrator.results.store import Store
from orchestrator.runners.base import HostPath, Runner
from orchestrator.runners.jobs import dataset_command
from orchestrator.session.datasets import HeldBack

EXPORT_TIMEOUT_S = 1800
MODEL_SUFFIXES = (".onnx", ".pt2")


@dataclass(frozen=True, kw_only=True)
class TrainedModel:
    """One finished seed of a training run, and what its export makes."""

    run_id: str
    seed: int
    workload: Workload
    results: Path
    """The seed's results folder (its RESULTS_DIR)."""
    feeds: str
    """The inference model the export makes."""
    accuracy: float | None
    """The seed's last evaluated quality (its MLLOG metric)."""
    converged: bool = True
    """Whether the seed reached its quality target."""
    others_converged: bool = False
    """Whether another finished seed of the run did (one was chosen that did not)."""

    @property
    def source(self) -> str:
        return f"{self.run_id} seed {self.seed}"

    @property
    def warning(self) -> str | None:
        """What a user must be told of the chosen seed: it never reached its target."""
        if self.converged:
            return None
        last = "" if self.accuracy is None else f" (its last evaluation: {self.accuracy:.4g})"
        why = "the seed asked for" if self.others_converged else "no seed of the run converged"
        return f"{self.source} did not reach its quality target{last}: its model is used as it ended ({why})"


def looks_like_run(text: str) -> bool:
    """Whether ``--model TEXT`` may name a run rather than a file (no folder, no model suffix)."""
    return "/" not in text and not text.endswith(MODEL_SUFFIXES) and bool(re.fullmatch(r"[A-Za-z0-9._-]+", text))


def find_trained(store: Store, workloads: Registry, run_id: str, seed: int | None = None) -> TrainedModel:
    """The trained model of run ``run_id``; UsageError naming what is missing."""
    check_run_id(run_id)
    if store.is_inference(run_id):
        raise UsageError(f"{run_id} is an inference run: give a training run, whose seeds trained a model")
    stored = store.open(run_id)
    workload = workloads.get(stored.manifest.workload)
    if workload.export is None:
        raise UsageError(f"run {run_id} trained {workload.name}, whose workload.yaml declares no export to an "
                         "inference model")
    records = stored.finished_records()
    if seed is not None:
        if seed not in records:
            raise UsageError(f"run {run_id} has no finished seed {seed} (finished: "
                             f"{', '.join(map(str, sorted(records))) or 'none'})")
        chosen = seed
    elif records:
        converged = [s for s, record in sorted(records.items()) if record.converged]
        chosen = converged[0] if converged else min(records)
    else:
        raise UsageError(f"run {run_id} has no finished seed: nothing was trained to export")
    record = records[chosen]
    last = record.evals[-1].accuracy if record.evals else record.best_accuracy
    return TrainedModel(run_id=run_id, seed=chosen, workload=workload, results=store.paths(run_id).seed(chosen).results,
                        feeds=workload.export.feeds, accuracy=last, converged=record.converged,
                        others_converged=any(r.converged for s, r in records.items() if s != chosen))


def exported_path(harness: str, trained: TrainedModel, suffix: str) -> Path:
    """Where ``mltrain infer --model RUN`` keeps the file it exported (made again by each run)."""
    return data_cache_dir() / harness / "exported" / f"{trained.run_id}-seed{trained.seed}{suffix}"


def export_trained(runner: Runner, trained: TrainedModel, out: Path, status: Callable[[str], None]) -> Path:
    """Run the workload's export on the seed's results folder, writing ``out`` (.onnx or .pt2); DataError
    with its one line when it fails."""
    if out.suffix not in MODEL_SUFFIXES:
        raise UsageError(f"--model {out}: give a .onnx (ONNX Runtime) or .pt2 (torch) file")
    assert trained.workload.export is not None
    out.parent.mkdir(parents=True, exist_ok=True)
    runner.prepare(trained.workload)  # the workload's image, where a runner has one
    # The export command runs as a dataset command does (where the seeds ran, paths mounted there).
    bundle = trained.workload.model_copy(update={"data": DataDecl(cli=trained.workload.export.cli)})
    lines = HeldBack(status)
    result = dataset_command(runner, bundle, [HostPath(path=trained.results),
                                              HostPath(path=out, writable=True, mount=out.parent)],
                             timeout_s=EXPORT_TIMEOUT_S, on_line=lines.add)
    if result.returncode != 0:
        raise result.failure(f"exporting {trained.source}")
    lines.flush()
    if not out.is_file():
        raise DataError(f"exporting {trained.source}: {' '.join(trained.workload.export.cli)} wrote no {out}")
    return out
