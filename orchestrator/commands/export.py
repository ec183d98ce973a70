"""``mltrain export RUN --mlcommons DIR``: the MLCommons results layout, checked by mlperf_logging."""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.commands.common import JSON_OPTION, RESULTS_OPTION, open_store, output


def register(app: typer.Typer) -> None:
    app.command("export")(export_run)


def export_run(
    ctx: typer.Context,
    run: str = typer.Argument(..., help="Run id."),
    mlcommons: Path = typer.Option(..., "--mlcommons", help="Folder to write results/ and systems/ into."),
    system_name: str = typer.Option(None, "--system-name", help="System name (default: <host>_<n>x<gpu>)."),
    submitter: str = typer.Option("mltrain", "--submitter", help="Submitter in the system description."),
    ruleset: str = typer.Option(None, "--ruleset",
                                help="mlperf_logging ruleset (default: the one the run was checked under)."),
    results: Path = RESULTS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Export RUN so that `python -m mlperf_logging.result_summarizer` reads it; compare its score with ours.
    An inference run: LoadGen's logs in the MLPerf Inference submission layout."""
    import socket

    from orchestrator import text, units
    from orchestrator.insight import sysinfo
    from orchestrator.mlperf import export as exporting
    from orchestrator.mlperf import parity
    from orchestrator.results.outputs import check_output_folder

    out = output(ctx)
    store = open_store(results, write=False)
    check_output_folder(mlcommons, option="--mlcommons", results=store.root)

    if store.is_inference(run):
        from orchestrator.inference.export import export_inference

        folder = export_inference(store.open_inference(run), store.inference_paths(run),
                                  mlcommons, system_name=system_name, submitter=submitter)
        out.json({"folder": str(folder)}) if as_json else out.data(f"MLPerf Inference layout: {folder}")
        return
    stored = store.open(run)
    manifest = stored.manifest
    system = manifest.system
    described_now = not system and manifest.imported is None and manifest.host == socket.gethostname()
    if described_now:
        system = sysinfo.capture(Path(manifest.data_dir) if manifest.data_dir else None)
    verdict = stored.summary.mlcommons if stored.summary else None
    written = exporting.export_run(stored, mlcommons, system_name=system_name,
                                   submitter=submitter, ruleset=ruleset, system=system,
                                   scaling_factor=verdict.scaling_factor if verdict and not manifest.imported else None)
    if described_now:  # said once the export is made: bad input is one line and nothing else
        out.warning(f"run {run} holds no system capture; it ran on this host, so this host is described now")
    theirs = written.summarizer_minutes
    ours_ms = stored.summary.scaled_score_ms if stored.summary else None
    ours = units.minutes(ours_ms)
    same = parity.agrees(theirs, ours)
    if as_json:
        out.json({
            "folder": str(written.root), "system": written.system_name, "benchmark": written.benchmark,
            "ruleset": written.ruleset, "system_file": str(written.system_file), "division": written.division,
            "scaling_factor": written.scaling_factor,
            "results": [{"seed": r.seed, "file": str(r.path), "compliant": r.compliant, "messages": list(r.messages)}
                        for r in written.results],
            "summarizer_minutes": theirs, "mltrain_minutes": ours, "same_score": same,
            "warnings": list(written.warnings),
        })
        return
    out.data(f"system description: {written.system_file} (division {written.division}, as the logs state)")
    if written.scaling_factor is not None:
        out.data(f"scaling.json: {written.scaling_factor:.6g} (the RCP scaling factor)")
    out.data(f"{len(written.results)} result files in {written.results[0].path.parent}")
    for result in written.results:
        if not result.compliant:
            out.warning(f"seed {result.seed} ({result.path.name}) fails the compliance checker: "
                        f"{'; '.join(result.messages) or 'see mlperf_logging.compliance_checker'}")
    for warning in written.warnings:
        out.warning(warning)
    out.data(f"result_summarizer ({written.ruleset}): {text.summarizer_minutes(theirs)};"
             f" mltrain: {text.summarizer_minutes(ours)}"
             f" -> {'same score' if same else 'DIFFERENT'}")
    out.data(f"check it yourself: python -m mlperf_logging.result_summarizer {written.root} training {written.ruleset}")

