"""``mltrain import``: take a folder of MLPerf result logs made elsewhere into the store."""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.commands.common import JSON_OPTION, RESULTS_OPTION, open_store, registry
from orchestrator.config.workloads import Workload
from orchestrator.errors import UsageError
from orchestrator.output import Output
from orchestrator.render.tables import show_score
from orchestrator.session.importing import import_folder


def register(app: typer.Typer) -> None:
    app.command("import")(import_logs)


def import_logs(
    folder: Path = typer.Argument(..., help="Folder holding result_*.txt MLLOG files, one per run."),
    mlperf_benchmark: str = typer.Option(..., "--benchmark", help="MLPerf benchmark, as mlperf_logging names it."),
    label: str = typer.Option(None, "--label", help="Name of the setup, for `mltrain compare`."),
    epochs_in: str = typer.Option("auto", "--epochs-in", help="How epoch_num is logged: auto, epochs or samples."),
    results: Path = RESULTS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Import and score logs made by another harness (MLCommons published layout)."""
    out = Output()
    if epochs_in not in ("auto", "epochs", "samples"):
        raise UsageError(f"--epochs-in {epochs_in!r}: choose auto, epochs or samples")
    store = open_store(results)
    workload = _workload_for(mlperf_benchmark)
    run, score = import_folder(store, folder, workload, benchmark=mlperf_benchmark, label=label,
                               epoch_unit=epochs_in)  # type: ignore[arg-type]  # checked above
    out.status(f"imported {len(run.manifest.seeds)} logs from {folder} as run {run.run_id}")
    show_score(out, run.summary, score, as_json=as_json)


def _workload_for(mlperf_benchmark: str) -> Workload:
    reg = registry()
    matches = [w for w in (reg.get(n) for n in reg.names()) if w.mlperf_benchmark == mlperf_benchmark]
    if not matches:
        known = sorted({reg.get(n).mlperf_benchmark for n in reg.names()})
        raise UsageError(f"no workload implements benchmark {mlperf_benchmark!r} (known: {', '.join(known)})")
    return sorted(matches, key=lambda w: w.folder.parent != reg.roots[-1])[0]
