"""``mltrain report RUN... --out FILE.html``: one self-contained HTML report with plots."""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.commands.common import JSON_OPTION, RESULTS_OPTION, open_store, output
from orchestrator.errors import UsageError


def register(app: typer.Typer) -> None:
    app.command("report")(write_report)


def write_report(
    ctx: typer.Context,
    runs: list[str] = typer.Argument(None, help="Run ids; runs sharing a label form one setup."),
    label: list[str] = typer.Option(None, "--label", help="Add every run carrying this label (repeatable)."),
    out_file: Path = typer.Option(..., "--out", help="HTML file to write."),
    baseline: str = typer.Option(None, "--baseline", help="Setup to compare against (default: the first)."),
    title: str = typer.Option("mltrain report", "--title", help="Report title."),
    results: Path = RESULTS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Write one HTML file: comparison, per-seed time-to-train, accuracy and power plots, systems."""
    from orchestrator.insight.runs import load_runs
    from orchestrator.render import report
    from orchestrator.results import atomic

    out = output(ctx)
    if out_file.exists() and out_file.is_dir():
        raise UsageError(f"--out {out_file} is a folder: name the HTML file to write")
    views = load_runs(open_store(results), runs or [], label or [])
    try:
        text = report.render(views, baseline=baseline, title=title)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    atomic.write_text(out_file, text)
    out.status(f"report of {len(views)} run(s) written to {out_file} ({len(text) / 1024:.0f} KiB)")
    if as_json:
        out.json({"file": str(out_file), "runs": [v.run_id for v in views], "bytes": len(text.encode())})
    else:
        out.data(str(out_file))
