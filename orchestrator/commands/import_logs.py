"""``mltrain import``: take a folder of MLPerf result logs made elsewhere into the store."""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.commands.common import JSON_OPTION, RESULTS_OPTION, EpochUnit, open_store, output, registry


def register(app: typer.Typer) -> None:
    app.command("import", short_help="Import and score MLPerf logs made elsewhere.")(import_logs)


def import_logs(
    ctx: typer.Context,
    folder: Path = typer.Argument(
        ..., help="Folder of result_<n>.txt (or NVIDIA <DATESTAMP>_<N>.log) MLLOG files, one per run; or the"
                  " submission folder holding results/<system>/<benchmark>/ and systems/<system>.json."),
    mlperf_benchmark: str = typer.Option(..., "--benchmark", help="MLPerf benchmark, as mlperf_logging names it."),
    label: str = typer.Option(None, "--label", help="Name of the setup, for `mltrain compare`."),
    epochs_in: EpochUnit = typer.Option(EpochUnit.auto, "--epochs-in", help="How epoch_num is logged."),
    ruleset: str = typer.Option(None, "--ruleset",
                                help="mlperf_logging training ruleset to check and score the logs with"
                                     " (default: the one the benchmark's workload declares)."),
    results: Path = RESULTS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Import and score logs made by another harness, as MLCommons scores them (scaling.json applied);
    an mltrain export is scored as its run was (its profile, target and rule). Logs imported already
    are refused, naming their run.

    Exit status: as `mltrain score` of the imported run (0 valid, 1 invalid); 2 bad input."""
    from orchestrator.render.tables import show_score
    from orchestrator.session.importing import import_folder
    from orchestrator.session.scoring import exit_code

    out = output(ctx)
    store = open_store(results)
    workload = registry().for_benchmark(mlperf_benchmark)
    run, score = import_folder(store, folder, workload, benchmark=mlperf_benchmark, label=label,
                               epoch_unit=epochs_in.value,  # type: ignore[arg-type]  # the same three names
                               ruleset=ruleset)
    imported = run.manifest.imported
    source = (f" (an mltrain export of run {imported.exported_run}: scored by its {run.manifest.profile} profile's"
              f" target {run.manifest.target:g} and rule)" if imported is not None and imported.exported_run else "")
    out.status(f"imported {len(run.manifest.seeds)} logs from {folder} as run {run.run_id}{source}")
    if run.index_note:
        out.warning(run.index_note)
    show_score(out, run.summary, score, as_json=as_json, records=run.finished_records())
    code = exit_code(run, score)
    if code:
        raise typer.Exit(code)
