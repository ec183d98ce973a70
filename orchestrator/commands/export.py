"""``mltrain export RUN --mlcommons DIR``: the MLCommons results layout, checked by mlperf_logging;
``mltrain export RUN --model FILE``: a training run's trained model as an inference model file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from orchestrator.commands.common import (
    JSON_OPTION,
    RESULTS_OPTION,
    RUNNERS_SAID,
    RunnerName,
    open_store,
    output,
    registry,
)

if TYPE_CHECKING:
    from orchestrator.output import Output
    from orchestrator.results.store import Store
    from orchestrator.results.stored_run import StoredRun


def register(app: typer.Typer) -> None:
    app.command("export", short_help="Export a run in MLCommons' layout, or its model.")(export_run)


def export_run(
    ctx: typer.Context,
    run: str = typer.Argument(..., help="Run id."),
    mlcommons: Path = typer.Option(None, "--mlcommons", help="Folder to write results/ and systems/ into."),
    model: Path = typer.Option(None, "--model",
                               help="A training run's trained model as this inference model file (.onnx or .pt2)."),
    seed: int = typer.Option(None, "--seed", min=0, metavar="SEED",
                             help="With --model: the seed whose model (default: the first that converged)."),
    runner: RunnerName = typer.Option(RunnerName.local, "--runner",
                                      help=f"With --model: where the export runs: {RUNNERS_SAID}."),
    division: str = typer.Option(None, "--division", help="An inference run: closed or open (default: closed for "
                                 "a valid mlperf-profile result, else open)."),
    system_type: str = typer.Option("datacenter", "--system-type", help="An inference run: datacenter or edge "
                                    "(the checker's required scenarios follow it)."),
    system_name: str = typer.Option(None, "--system-name", help="System name (default: <host>_<n>x<gpu>)."),
    submitter: str = typer.Option("mltrain", "--submitter", help="Submitter in the system description."),
    ruleset: str = typer.Option(None, "--ruleset",
                                help="mlperf_logging ruleset (default: the one the run was checked under)."),
    results: Path = RESULTS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Export RUN so that `python -m mlperf_logging.result_summarizer` reads it, and compare the
    summarizer's score with mltrain's of the same logs by the same rule (MLPerf's); the run's own score
    is shown beside where its profile scores by another rule. An inference run: LoadGen's logs in the
    MLPerf Inference submission layout. --model FILE: a training run's trained model (a finished
    seed's) as the inference model its workload feeds.

    Exit status (--mlcommons of a training run): as `mltrain score` of the run (0 valid, 1 invalid, 3 an
    infrastructure fault), and 1 where the summarizer does not reproduce mltrain's score."""
    from orchestrator.errors import UsageError
    from orchestrator.results.outputs import check_output_file, check_output_folder

    out = output(ctx)
    if (mlcommons is None) == (model is None):
        raise UsageError("give --mlcommons DIR (the MLCommons layout) or --model FILE (the trained model), one of them")
    store = open_store(results, write=False)
    if model is not None:
        check_output_file(model, option="--model", results=store.root)
        export_model(out, store, run, seed, runner, model, as_json=as_json)
        return
    if seed is not None:
        raise UsageError("--seed chooses the seed of --model: drop it with --mlcommons")
    check_output_folder(mlcommons, option="--mlcommons", results=store.root)
    if store.is_inference(run):
        export_inference(out, store, run, mlcommons, system_name=system_name, submitter=submitter,
                         division=division, system_type=system_type, as_json=as_json)
        return
    if division is not None:
        raise UsageError("--division is an inference export's: a training export's division is the one its logs state")
    code = export_training(out, store.open(run), mlcommons, system_name=system_name, submitter=submitter,
                           ruleset=ruleset, as_json=as_json)
    if code:
        raise typer.Exit(code)


def export_model(out: Output, store: Store, run: str, seed: int | None, runner: RunnerName, model: Path, *,
                 as_json: bool) -> None:
    """--model FILE: a training run's trained model exported by its workload, where ``runner`` runs."""
    from orchestrator.inference.trained import export_trained, find_trained
    from orchestrator.runners.select import RunnerOptions, make_runner

    trained = find_trained(store, registry(), run, seed)
    if trained.warning:
        out.warning(trained.warning)
    written = export_trained(make_runner(RunnerOptions(name=runner.value), out.status), trained, model.resolve(),
                             out.status)
    if as_json:
        out.json({"model": str(written), "run": trained.run_id, "seed": trained.seed, "feeds": trained.feeds})
    else:
        out.data(f"{written}: {trained.source}'s trained model, for `mltrain infer {trained.feeds} --model`")


def export_inference(out: Output, store: Store, run: str, folder: Path, *, system_name: str | None, submitter: str,
                     division: str | None, system_type: str, as_json: bool) -> None:
    """--mlcommons DIR of an inference run: LoadGen's logs in the MLPerf Inference submission layout."""
    from orchestrator.inference.export import export_stored

    written = export_stored(store, registry().roots, run, folder, system_name=system_name, submitter=submitter,
                            division=division, system_type=system_type)
    if as_json:
        out.json({"folder": str(written.scenario_folder), "system_file": str(written.system_file),
                  "division": written.division, "benchmark": written.benchmark, "notes": list(written.notes)})
        return
    for note in written.notes:
        out.warning(note)
    out.data(f"MLPerf Inference layout: {written.scenario_folder} (division {written.division}, benchmark "
             f"{written.benchmark}); system description {written.system_file}")
    out.data(f"check it yourself: python -m submission_checker.main --input {folder} --version v6.1 "
             "(from a checkout of mlcommons/inference, in tools/submission)")


def export_training(out: Output, stored: StoredRun, folder: Path, *, system_name: str | None, submitter: str,
                    ruleset: str | None, as_json: bool) -> int:
    """--mlcommons DIR of a training run: the MLCommons layout, the summarizer's score beside mltrain's;
    the exit status."""
    from orchestrator import text, units
    from orchestrator.config.profiles import SMOKE
    from orchestrator.render.tables import caveat, rule_text
    from orchestrator.session.exporting import export_training as exported_training

    done = exported_training(stored, folder, system_name=system_name, submitter=submitter, ruleset=ruleset)
    written, rule, ours, score, manifest = done.written, done.rule, done.ours, done.score, stored.manifest
    if done.described_now:  # said once the export is made: bad input is one line and nothing else
        out.warning(f"run {stored.run_id} holds no system capture; it ran on this host, so this host is described now")
    theirs = written.summarizer_minutes
    smoke = manifest.profile == SMOKE
    csv_file = written.root / "summary.csv"
    check = (f"python -m mlperf_logging.result_summarizer {written.root} training {written.ruleset} --csv {csv_file}"
             f" (it prints a header only; its score is the {written.benchmark} column of {csv_file}, in minutes)")
    if as_json:
        out.json({
            "folder": str(written.root), "system": written.system_name, "benchmark": written.benchmark,
            "ruleset": written.ruleset, "system_file": str(written.system_file), "division": written.division,
            "scaling_factor": written.scaling_factor,
            "results": [{"seed": r.seed, "file": str(r.path), "compliant": r.compliant, "messages": list(r.messages)}
                        for r in written.results],
            "summarizer_minutes": theirs, "summarizer_rule": rule.to_json(), "mltrain_minutes": ours,
            "same_score": done.same, "run_rule": manifest.rule.to_json(), "run_minutes": units.minutes(
                score.scaled_score_ms), "run_valid": score.valid, "check": check, "warnings": list(written.warnings),
        })
        raise typer.Exit(done.code)
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
    out.data(caveat(f"result_summarizer ({written.ruleset}), by MLPerf's rule for {written.benchmark}"
                    f" ({rule_text(rule)}): {text.summarizer_minutes(theirs)}", smoke))
    out.data(caveat(f"mltrain on the same logs by the same rule: {text.summarizer_minutes(ours)}"
                    f" -> {'same score' if done.same else 'DIFFERENT'}", smoke))
    if (manifest.rule.drop_per_end, manifest.rule.max_non_converged) != (rule.drop_per_end, rule.max_non_converged):
        run = stored.run_id
        out.data(caveat(f"run {run}'s own score, by its {manifest.profile} profile's rule ({rule_text(manifest.rule)}):"
                        f" {text.summarizer_minutes(units.minutes(score.scaled_score_ms))}, result"
                        f" {'VALID' if score.valid else 'INVALID'} (what `mltrain score {run}` says; it differs from"
                        " the summarizer's by the rule)", smoke))
    out.data(f"check it yourself: {check}")
    return done.code
