"""``mltrain import``: take a folder of MLPerf result logs made elsewhere into the store."""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.commands.common import JSON_OPTION, RESULTS_OPTION, EpochUnit, open_store, output, registry


def register(app: typer.Typer) -> None:
    app.command("import")(import_logs)


def import_logs(
    ctx: typer.Context,
    folder: Path = typer.Argument(..., help="Folder holding result_*.txt MLLOG files, one per run."),
    mlperf_benchmark: str = typer.Option(..., "--benchmark", help="MLPerf benchmark, as mlperf_logging names it."),
    label: str = typer.Option(None, "--label", help="Name of the setup, for `mltrain compare`."),
    epochs_in: EpochUnit = typer.Option(EpochUnit.auto, "--epochs-in", help="How epoch_num is logged."),
    results: Path = RESULTS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Import and score logs made by another harness (MLCommons published layout)."""
    from orchestrator.render.tables import show_score
    from orchestrator.session.importing import import_folder

    out = output(ctx)
    store = open_store(results)
    workload = registry().for_benchmark(mlperf_benchmark)
    run, score = import_folder(store, folder, workload, benchmark=mlperf_benchmark, label=label,
                               epoch_unit=epochs_in.value)  # type: ignore[arg-type]  # the same three names
    out.status(f"imported {len(run.manifest.seeds)} logs from {folder} as run {run.run_id}")
    show_score(out, run.summary, score, as_json=as_json)
