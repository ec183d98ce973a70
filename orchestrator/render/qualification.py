"""Qualification on the terminal: the summary table at the end (readable at 80 columns), the
verdict lines, the fleet table and the history table. Rich renderables and plain lines; nothing
here writes."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.table import Table
from rich.text import Text

from orchestrator.qualify.wording import quorum_note
from orchestrator.render.fit import Col, Fitted, fit
from orchestrator.results.qualification import CheckResult, FleetRecord, QualificationRecord, Remediation, Status
from orchestrator.text import number

STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.INCONCLUSIVE: "magenta",
         Status.NOT_APPLICABLE: "dim", Status.UNJUDGED: "cyan"}


def status_text(status: Status) -> Text:
    return Text(status.word, style=STYLE[status])


def summary_table(record: QualificationRecord) -> Table:
    """One row per check: status, seconds, and what matters most (its first reason, else its numbers)."""
    table = Table(title=f"{record.node} · {record.suite} · {record.hardware.key}", title_justify="left",
                  expand=False)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("s", justify="right", no_wrap=True)
    table.add_column("result", overflow="fold", max_width=58)
    for check in record.checks:
        table.add_row(check.name, status_text(check.status), f"{check.duration_s:.1f}", _result(check))
    return table


def _result(check: CheckResult) -> str:
    if check.reasons:
        more = f" (+{len(check.reasons) - 1} more)" if len(check.reasons) > 1 else ""
        return check.reasons[0] + more
    if not check.measurements:
        return "healthy" if check.kind == "health" else ""
    judged = sum(m.reference is not None for m in check.measurements)
    first = check.measurements[0]
    shown = f"{first.metric} {number(first.value)} {first.unit}"
    others = len(check.measurements) - 1
    counts = f"; +{others} more" if others else ""
    refs = f"; {judged}/{len(check.measurements)} judged" if judged else "; unjudged: no reference yet"
    na = f"; {len(check.skipped)} n/a" if check.skipped else ""
    return shown + counts + refs + na


def verdict_lines(record: QualificationRecord, record_path: str | None = None) -> list[str]:
    lines = [f"verdict: {record.verdict.word} (exit {record.exit_code}) in {record.duration_s:.1f} s"]
    lines += [f"  {reason}" for reason in record.reasons[:12]]
    if len(record.reasons) > 12:
        lines.append(f"  ... and {len(record.reasons) - 12} more (see --json)")
    if record.remediation:
        lines.append("remediation: " + ", ".join(remedy_words(r) for r in record.remediation))
    lines += [f"  {c.name}: {m.metric}: {quorum_note(m.quorum, m.unit)}" for c in record.checks
              for m in c.measurements if m.quorum is not None and m.quorum.outcome == "overturned"]
    unjudged = sum(m.status is Status.UNJUDGED for c in record.checks for m in c.measurements)
    if unjudged:
        lines.append(f"{unjudged} number(s) unjudged (no reference, no floor): {record.system.get('history', '')}")
    if record_path:
        lines.append(f"record: {record_path}")
    return lines


def remedy_words(remedy: Remediation) -> str:
    """``reset_gpu (GPU3, gpu_health)``: a remedy, what it is for and the check that asks for it."""
    where = [f"GPU{remedy.gpu}"] if remedy.gpu is not None else []
    where += [f"node {remedy.node}"] if remedy.node else []
    return f"{remedy.action.value} ({', '.join([*where, remedy.check])})"


def fleet_table(fleet: FleetRecord) -> Table:
    table = Table(title=f"fleet · {fleet.suite} · {len(fleet.rows)} node(s)", title_justify="left")
    table.add_column("node", no_wrap=True)
    table.add_column("hardware", overflow="fold", max_width=24)
    table.add_column("verdict", no_wrap=True)
    table.add_column("worst vs fleet", overflow="fold", max_width=30)
    for row in fleet.rows:
        worst = "-" if row.worst_metric is None else f"{row.worst_metric} {row.worst_vs_fleet_pct:+.1f}%"
        verdict = status_text(row.verdict)
        if row.flagged:
            verdict.append(" SLOW", style="bold red")
        table.add_row(row.node, row.hardware, verdict, worst)
    return table


def fleet_lines(fleet: FleetRecord) -> list[str]:
    lines = [f"fleet verdict: {fleet.verdict.word} (exit {fleet.exit_code})"]
    lines += [f"  {row.node}: {row.reason}" for row in fleet.rows if row.reason]
    lines += [f"  {check.name}: {check.status.word}" + (f" ({check.reason})" if check.reason else "")
              for check in fleet.checks]
    asked = [f"{row.node}: {remedy_words(r)}" for row in fleet.rows for r in row.remediation]
    if asked:
        lines.append("remediation: " + "; ".join(asked))
    return lines


def history_table(records: Sequence[QualificationRecord], metric: str | None = None,
                  width: int | None = None) -> Fitted:
    """`mltrain qualify history`: a line per qualification, in ``width`` characters (None: every column)."""
    columns = [Col("started"), Col("node", cut=True), Col("suite", 2), Col("verdict")]
    if metric:
        columns += [Col(metric, 1, justify="right"), Col("bounds", 3)]
    else:
        columns.append(Col("first reason", 4, cut=True))
    cells: list[list[str | Text]] = []
    for r in records:
        row: list[str | Text] = [r.started_at.replace("+00:00", "Z"), r.node, r.suite, status_text(r.verdict)]
        if metric:
            m = r.measurements().get(metric)
            ref = m.reference if m else None
            row += ["-" if m is None else f"{number(m.value)} {m.unit}",
                    "-" if ref is None else f"[{number(ref.lower)}, {number(ref.upper)}] {ref.kind}"]
        else:
            row.append(r.reasons[0] if r.reasons else "")
        cells.append(row)
    return fit(columns, cells, width, title=f"{len(records)} qualification(s)", table_box=box.HEAVY_HEAD)
