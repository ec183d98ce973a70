"""``mltrain report RUN... --out FILE.html``: one self-contained HTML report with plots."""

from __future__ import annotations

import contextlib
from pathlib import Path

import typer

from orchestrator.commands.common import JSON_OPTION, RESULTS_OPTION, open_store, output
from orchestrator.errors import UsageError


def register(app: typer.Typer) -> None:
    app.command("report", short_help="Write one HTML report, led by its verdict.")(write_report)


def _write(out_file: Path, text: str) -> None:
    from orchestrator.results import atomic

    try:
        atomic.write_text(out_file, text)
    except OSError as exc:
        raise UsageError(f"--out {out_file}: cannot write there ({exc.strerror or exc})") from None


def write_report(
    ctx: typer.Context,
    runs: list[str] = typer.Argument(None, metavar="[RUN]...", help="Run ids; runs sharing a label form one setup."),
    label: list[str] = typer.Option(None, "--label", metavar="LABEL",
        help="Add every run carrying this label (repeatable)."),
    out_file: Path = typer.Option(..., "--out", help="HTML file to write."),
    baseline: str = typer.Option(None, "--baseline", help="Setup to compare against (default: the first)."),
    title: str = typer.Option("mltrain report", "--title", help="Report title."),
    force: bool = typer.Option(False, "--force", help="Report setups of different profiles side by side anyway."),
    results: Path = RESULTS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Write one HTML file that leads with its verdict (each setup's validity, seeds, rule, quiet host,
    then the comparison), then what differs between the setups, the numbers, plots, seeds and systems.
    Setups of different profiles are refused (exit 2) unless --force. The file is opened for writing
    before anything is rendered: a path that cannot be written fails at once."""
    from orchestrator.insight.report_runs import load_report
    from orchestrator.insight.runs import check_profiles, chosen_runs
    from orchestrator.results import atomic
    from orchestrator.results.outputs import check_output_file

    out = output(ctx)
    store = open_store(results, write=False)
    check_output_file(out_file, option="--out", results=store.root)
    from orchestrator.inference import compare as inference

    named, listing = chosen_runs(store, runs or [], label or [])
    if inference.wants_inference(named, listing):
        from orchestrator.render import inference_report

        chosen = inference.load(store, named)
        text = inference_report.render(chosen, inference.compare(chosen, baseline=baseline), title=title)
        _write(out_file, text)
        out.status(f"report of {len(chosen)} inference run(s) written to {out_file} ({len(text) / 1024:.0f} KiB)")
        out.json({"file": str(out_file), "runs": [r.run_id for r in chosen], "bytes": len(text.encode())}) \
            if as_json else out.data(str(out_file))
        return
    chosen = load_report(store, named, listing)
    check_profiles(chosen.setups, force=force)
    setups = [setup.name for setup in chosen.setups]
    if baseline is not None and baseline not in setups:
        raise UsageError(f"--baseline {baseline!r} is not one of the setups ({', '.join(setups)})")
    with contextlib.ExitStack() as stack:
        try:
            handle = stack.enter_context(atomic.staged(out_file))  # renamed into place when all went well
        except OSError as exc:
            raise UsageError(f"--out {out_file}: cannot write there ({exc.strerror or exc})") from None
        from orchestrator.render import report

        try:
            text = report.render(chosen.views, baseline=baseline, title=title, setups=chosen.setups,
                                 lines=chosen.lines)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        handle.write(text.encode())
    out.status(f"report of {len(chosen.lines)} run(s) written to {out_file} ({len(text) / 1024:.0f} KiB)")
    if as_json:
        out.json({"file": str(out_file), "runs": [line.run_id for line in chosen.lines], "bytes": len(text.encode())})
    else:
        out.data(str(out_file))
