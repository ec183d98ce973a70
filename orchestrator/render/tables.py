"""Tables and lines that show runs and scores to a person (rich renderables; `show_score` is the
one function here that writes, through the `Output` it is given)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich import box
from rich.table import Table

from orchestrator import text
from orchestrator.config.profiles import SMOKE, ProfileName
from orchestrator.output import Output
from orchestrator.render.decisions import decision_lines
from orchestrator.render.fit import Col, Fitted, fit
from orchestrator.results.decisions import DecisionLog
from orchestrator.results.records import (
    MlcommonsCheck,
    QuietHost,
    RunRecord,
    RunStatus,
    Score,
    ScoringRule,
    Summary,
)
from orchestrator.results.stored_run import StoredRun
from orchestrator.text import minutes, number, seconds, summarizer_minutes

if TYPE_CHECKING:
    from orchestrator.session.seed import SeedProgress  # the live table's rows; the listing never loads it

PROFILE_CAVEAT: dict[ProfileName, str] = {
    "mlperf": "MLPerf rules, unofficial until submitted and reviewed",
    "qualify": "qualify profile: not an MLPerf result",
    "smoke": "smoke profile: synthetic data and a scaled-down model, comparable with nothing",
}


def progress_table(title: str, rows: dict[int, SeedProgress]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("seed", "state", "wall clock s", "epoch", "accuracy", "result"):
        table.add_column(column, justify="right" if column != "state" and column != "result" else "left")
    for seed, p in rows.items():
        elapsed = p.elapsed()
        table.add_row(
            str(seed), p.state, "-" if elapsed is None else f"{elapsed:.1f}",
            "-" if p.epoch is None else f"{p.epoch:g}", "-" if p.accuracy is None else f"{p.accuracy:.4f}",
            p.status,
        )
    return table


def runs_table(rows: list[dict[str, Any]], *, total: int | None = None, width: int | None = None) -> Fitted:
    """`mltrain list`: one line per run from the index (``total``: how many the store holds, where
    ``rows`` are the newest of them), in ``width`` characters (None: every column). Where a run's
    score is scaled by an RCP scaling factor, the MLPerf score (scaled) is shown beside the olympic mean."""
    scaled = any(_is_scaled(r) for r in rows)
    inference = any(r.get("kind") == "inference" for r in rows)
    title = f"{len(rows)} runs" if total is None or total == len(rows) else f"the newest {len(rows)} of {total:,} runs"
    columns = [Col("run id"), Col("workload", 7, cut=True), Col("profile", 1), Col("label", 8, cut=True),
               Col("runner", 9), Col("seeds", 6, justify="right"), Col("converged", 5, justify="right"),
               Col("score s", 2, justify="right"),
               *((Col("MLPerf s", 10, justify="right"),) if scaled else ()),
               *((Col("scenario", 11), Col("inference metric", 11, justify="right")) if inference else ()),
               Col("valid", 3), Col("state", 4)]
    cells = []
    for r in rows:
        valid = "-" if r["valid"] is None else ("yes" if r["valid"] else "no")
        cells.append([
            r["run_id"], r["workload"] or "", r["profile"] or "", r["label"] or "", r["runner"] or "",
            "-" if r["seeds"] is None else str(r["seeds"]), "-" if r["converged"] is None else str(r["converged"]),
            seconds(r["score_ms"]), *((seconds(r.get("scaled_score_ms")) if _is_scaled(r) else "",) if scaled else ()),
            *((r.get("scenario") or "", _metric(r)) if inference else ()), valid, r["state"] or "",
        ])
    return fit(columns, cells, width, title=title, table_box=box.HEAVY_HEAD)


def _metric(row: dict[str, Any]) -> str:
    """An inference run's metric as `list` shows it (latencies in ms)."""
    value, unit = row.get("metric"), row.get("metric_unit")
    if value is None:
        return ""
    return f"{number(value / 1e6)} ms" if unit == "ns" else f"{number(value)} {unit}"


def _is_scaled(row: dict[str, Any]) -> bool:
    return row.get("scaled_score_ms") is not None and row.get("scaled_score_ms") != row.get("score_ms")


def run_lines(run: StoredRun) -> list[str]:
    """`mltrain show`: what the run was, before its score: where it came from, the division its
    logs state (with the workload's reason) and the settings the workload resolved."""
    m = run.manifest
    if m.imported is not None or m.runner == "imported":  # made elsewhere: this host imported it, then
        lines = [f"run {run.run_id}: {m.workload} profile {m.profile} runner imported state {run.state}",
                 f"imported {m.started_at} on host {m.host} (where and when it ran is not recorded)"
                 f" folder {run.paths.root}"]
    else:
        lines = [
            f"run {run.run_id}: {m.workload} profile {m.profile} runner {m.runner} host {m.host} state {run.state}",
            f"started {m.started_at} ended {m.ended_at} folder {run.paths.root}",
        ]
    if m.imported is not None:
        system = f", system {m.imported.system}" if m.imported.system else ""
        scaling = (f", scaling.json {m.imported.scaling_factor:.6g}" if m.imported.scaling_factor is not None
                   else ", no scaling.json")
        lines.append(f"imported from {m.imported.folder}{system}{scaling}, checked with training {m.imported.ruleset}")
    records = run.finished_records()
    lines += [f"division: {text}" for text in _distinct(_division(r) for r in records.values())]
    lines += [f"settings: {text}" for text in _distinct(_settings(r.resolved_settings) for r in records.values())]
    lines += [f"cut: {text}" for text in _distinct(r.cuts for r in records.values())]
    lines += [f"compliance checker: {text}" for text in _distinct(
        rule for r in records.values() if r.compliance is not None for rule in r.compliance.relaxed)]
    return lines


def _distinct(texts: Any) -> list[str]:
    counted: dict[str, int] = {}
    for said in texts:
        if said:
            counted[said] = counted.get(said, 0) + 1
    if len(counted) <= 1:
        return list(counted)
    return [f"{said} ({n} seeds)" for said, n in counted.items()]


def _division(record: RunRecord) -> str:
    if record.division is None:
        return "not logged"
    return record.division + (f" ({record.division_reason})" if record.division_reason else "")


def _settings(settings: dict[str, Any] | None) -> str:
    """The workload's resolved_settings event in a line."""
    if not settings:
        return ""
    device = settings.get("device_name") or settings.get("device") or "?"
    parts = [str(settings.get("precision", "?"))]
    if settings.get("requested_precision") not in (None, settings.get("precision")):
        parts[0] += f" (asked {settings['requested_precision']})"
    parts.append(f"{settings.get('threads', '?')} threads")
    parts.append(f"{settings.get('nproc', '?')} processes")
    parts.append(f"on {device}" + (f" (capability {settings['capability']})" if settings.get("capability") else ""))
    parts += [name for name in ("channels_last", "compile") if settings.get(name)]
    why = f": {settings['why']}" if settings.get("why") else ""
    return ", ".join(parts) + why


SMOKE_CAVEAT = "smoke: proves the pipeline, comparable with nothing"
"""Said on every line that gives a smoke run a number (`show`, `compare`, `report`)."""


def caveat(line: str, smoke: bool) -> str:
    """``line``, led by the smoke caveat where it gives a smoke run a number."""
    return f"[{SMOKE_CAVEAT}] {line}" if smoke else line


def seeds_table(score: Score, *, hosts: dict[int, QuietHost] | None = None, width: int | None = None,
                profile: str | None = None) -> tuple[Fitted, list[str]]:
    """The per-seed table (``hosts``: each seed's quiet-host verdict, where the records were read), and
    the lines that say in full what a cell had to cut (why a seed did not count, what disturbed its host)."""
    hosts = hosts or {}
    columns = [Col("seed", justify="right"), Col("status", 1), Col("time-to-train s", 2, justify="right"),
               Col("epochs", 4, justify="right"), Col("counted", 3), *((Col("host", 5),) if hosts else ()),
               Col("why not", 6, cut=True)]
    cells, reasons = [], []
    disturbed: list[tuple[int, str]] = []  # (seed, what disturbed its host)
    for seed, row in score.per_seed.items():
        converged = row.status is RunStatus.CONVERGED
        counted = "yes" if row.counted else ("dropped" if converged else "no")
        epochs = row.epochs_to_target
        host = hosts.get(seed)
        cells.append([
            str(seed), row.status.value, seconds(row.time_to_train_ms), "-" if epochs is None else f"{epochs:g}",
            counted, *((host.verdict if host is not None else "-",) if hosts else ()), "" if converged else row.reason,
        ])
        if not converged:
            reasons.append(f"seed {seed}: {row.status.value}: {row.reason}")
        if host is not None and host.verdict == "disturbed":
            disturbed.append((seed, f"host {host.reason}"))
    fitted = fit(columns, cells, width, title=caveat("Runs", profile == SMOKE), table_box=box.HEAVY_HEAD)
    cut = "why not" in fitted.left_out + fitted.shortened
    return fitted, (reasons if cut else []) + [line for line, _ in text.seeds_by_reason(disturbed)]


def show_score(out: Output, summary: Summary | None, score: Score, *, as_json: bool,
               decisions: DecisionLog | None = None, records: dict[int, RunRecord] | None = None,
               wide: bool = False) -> None:
    """A scored run as commands print it: the summary as JSON (with the seed rule's decisions under
    "decisions" for a run that decided its own seed count), or the per-seed table and score lines
    (``records``: the seeds' records, for each one's quiet-host verdict)."""
    if as_json:
        found = summary.to_json() if summary else score.to_json()
        out.json({**found, "decisions": decisions.to_json()} if decisions is not None else found)
        return
    hosts = {seed: r.quiet_host for seed, r in (records or {}).items() if r.quiet_host is not None}
    fitted, reasons = seeds_table(score, hosts=hosts, width=None if wide else out.out.width,
                                  profile=summary.profile if summary is not None else None)
    out.table(fitted.table, width=fitted.width)
    if fitted.note():
        out.prose(fitted.note())
    for line in reasons:
        out.prose(line)
    lines = score_lines(summary, score) + host_lines(hosts)
    out.lines(lines + (decision_lines(decisions) if decisions is not None else []))


def host_lines(hosts: dict[int, QuietHost]) -> list[str]:
    """One line on the seeds' hosts: how many were quiet, and what disturbed the others."""
    if not hosts:
        return []
    counts = {verdict: sum(1 for h in hosts.values() if h.verdict == verdict)
              for verdict in ("quiet", "disturbed", "unknown")}
    said = ", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n)
    verdict = ("a disturbed host: the times measure the neighbours too, not only the setup" if counts["disturbed"]
               else "every seed's host was quiet" if counts["quiet"] == len(hosts) else "not every host was judged")
    return [f"quiet host: {said} of {len(hosts)} seeds; {verdict}"]


def retry_hint(run: StoredRun) -> str:
    """What to do about seeds an infrastructure fault ended ('' when there are none)."""
    from orchestrator.session.plan import resume_command
    from orchestrator.session.scoring import failed_runs

    failed = failed_runs(run)
    if not failed:
        return ""
    statuses = sorted({run.records[s].status.value for s in failed})
    return (f"seed(s) {', '.join(map(str, failed))} ended by an infrastructure fault ({', '.join(statuses)}):"
            f" rerun them with `{resume_command(run, '--retry-failed')}`")


def score_lines(summary: Summary | None, score: Score) -> list[str]:
    """What a score says, a line each; a smoke run's lines that give a number carry its caveat."""
    profile = summary.profile if summary is not None else None
    lines = []
    if summary is not None:
        what = PROFILE_CAVEAT.get(summary.profile, summary.profile)
        lines.append(f"{summary.workload} ({what}), run {summary.run_id}")
        lines += [f"{summary.profile} profile on cut data: {text}" for text in summary.cuts]
    scored = _number_lines(summary, score)
    return lines + [caveat(line, profile == SMOKE and any(c.isdigit() for c in line)) for line in scored]


def _number_lines(summary: Summary | None, score: Score) -> list[str]:
    ttt = score.time_to_train_ms
    lines = []
    lines.append(f"runs {score.runs}, converged {score.converged}, non-converged {score.non_converged}"
                 + (f", unfinished {score.unfinished}" if score.unfinished else ""))
    mlcommons = summary.mlcommons if summary is not None else None
    if score.score_ms is not None:
        kept = len(score.counted_seeds)
        lines.append(
            f"time-to-train (olympic mean of {kept}): {score.score_ms / 1000:.2f} s = {minutes(score.score_ms)}"
        )
        if score.scaled_score_ms is not None and score.scaling_factor != 1.0:
            source = f" ({mlcommons.scaling_source})" if mlcommons is not None and mlcommons.scaling_source else ""
            lines.append(f"MLPerf score: olympic mean x RCP scaling factor {score.scaling_factor:.6g}{source}"
                         f" = {score.scaled_score_ms / 1000:.2f} s = {minutes(score.scaled_score_ms)}")
    if ttt.n:
        ci = (f"95% CI [{seconds(ttt.ci95_low)}, {seconds(ttt.ci95_high)}] s" if ttt.ci95_low is not None
              else "CI n/a")
        cv = f"CV {ttt.cv:.1%}" if ttt.cv is not None else "CV n/a"
        lines.append(
            f"converged runs: mean {seconds(ttt.mean)} s, std {seconds(ttt.std)} s, {cv}, {ci},"
            f" min {seconds(ttt.minimum)} s, max {seconds(ttt.maximum)} s"
        )
    if mlcommons is not None:
        lines += mlcommons_lines(mlcommons, score.rule)
    lines.append("result: VALID" if score.valid else f"result: INVALID: {score.reason}")
    return lines


def rule_text(rule: ScoringRule) -> str:
    """'the 1 fastest and 1 slowest dropped, the mean of the rest; at most 1 not converged'."""
    return (f"the {rule.drop_per_end} fastest and {rule.drop_per_end} slowest dropped, the mean of the rest;"
            f" at most {rule.max_non_converged} not converged")


def mlcommons_lines(check: MlcommonsCheck, own_rule: ScoringRule | None = None) -> list[str]:
    """What MLCommons' own tools said: the summarizer on the run's source beside mltrain's score of the
    same logs by the same rule (both numbers, and the run's own rule where it scores otherwise), the
    RCP and package checkers."""
    theirs = summarizer_minutes(check.summarizer_score_min)
    lines = [f"mlperf_logging result_summarizer ({check.ruleset}) on {check.source or check.folder}: {theirs}"]
    if check.rule is not None:
        ours = summarizer_minutes(check.mltrain_score_min)
        lines.append(f"mltrain on the same logs by the summarizer's rule ({rule_text(check.rule)}): {ours}"
                     f" -> {'agrees' if check.agrees else 'DISAGREES'}")
        if own_rule is not None and (own_rule.drop_per_end, own_rule.max_non_converged) != (
                check.rule.drop_per_end, check.rule.max_non_converged):
            lines.append(f"this run's own score above is by its profile's rule ({rule_text(own_rule)}), not the"
                         " summarizer's: the two differ by the rule, as they should")
    else:  # a check recorded by an older mltrain: it compared the run's own score
        lines.append(f"mltrain's MLPerf score {'agrees' if check.agrees else 'DISAGREES'} with it")
    if check.rcp is not None:
        lines.append(f"RCP check: {check.rcp.detail}")
    if check.package is not None:
        errors = f": {'; '.join(check.package.errors[:2])}" if check.package.errors else ""
        lines.append(f"package checker on {check.folder}: {'passed' if check.package.passed else 'FAILED'}{errors}")
    lines += [f"note: {warning}" for warning in check.warnings[:5]]
    return lines
