"""One self-contained HTML report of stored runs. It leads with its verdict: per setup the profile,
VALID or INVALID, the seeds that converged, the olympic rule, whether its hosts were quiet, when it
ran and for how long; then the comparison's verdict (what differs between the setups, and whether
a difference can be theirs). The numbers, plots, seeds and systems follow.

Plots (`render.report_plots`) are embedded as base64 SVG, so the file can be mailed or archived
alone; they take the page's width, drawn apart for a phone. On a phone the tables of results become
a card per row and run ids may break after a hyphen (nothing is off-screen); the other wide tables
scroll inside their own box. Every string that came from a log, a manifest or a host goes through
`html.escape`.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timezone

from orchestrator import text
from orchestrator.config.profiles import SMOKE
from orchestrator.errors import UsageError
from orchestrator.insight import compare as comparing
from orchestrator.insight import sysinfo
from orchestrator.insight.published_setups import AUTO, published_beside
from orchestrator.insight.report_runs import RunLine
from orchestrator.insight.runs import RunView, SeedView, to_setups
from orchestrator.insight.telemetry_summary import HERE, Figures, SeedTelemetry
from orchestrator.mlperf import published
from orchestrator.render.comparison import host_cell, mlperf_score, setup_cell, smoke_in
from orchestrator.render.report_plots import draw, plot_html
from orchestrator.render.tables import PROFILE_CAVEAT, SMOKE_CAVEAT, rule_text
from orchestrator.render.verdicts import verdict
from orchestrator.results.records import ScoringRule
from orchestrator.runners.resource_errors import classify

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
BADGES = {"valid": "#1a7f37", "invalid": "#cf222e", "quiet": "#1a7f37", "disturbed": "#bc4c00",
          "unknown": "#6e7781", "smoke": "#8250df"}
"""Background colour of each verdict word (white text): green good, red invalid, orange disturbed."""
STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1400px; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ccc; }
h3 { margin-bottom: 0.3em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.scroll { overflow-x: auto; max-width: 100%; }
img { width: 100%; height: auto; border: 1px solid #eee; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; }
.note { color: #666; } .bad { color: #b00; }
.id, code { white-space: nowrap; font-family: ui-monospace, monospace; font-size: 0.9em; }
.badge { display: inline-block; color: #fff; font-weight: 600; padding: 0.1em 0.5em; border-radius: 0.3em; }
.verdict { display: grid; grid-template-columns: repeat(auto-fit, minmax(18em, 1fr)); gap: 0.8em; }
.setup { border: 1px solid #ccc; border-radius: 0.4em; padding: 0.4em 0.9em 0.6em; }
.setup dl { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 0.2em 0.8em; margin: 0.3em 0; }
.setup dt { color: #555; } .setup dd { margin: 0; min-width: 0; overflow-x: auto; }
.lines li { margin: 0.3em 0; }
.caveat { border-left: 0.3em solid #8250df; padding-left: 0.6em; }
@media (max-width: 700px) {
  body { margin: 0.8em; }
  .id { white-space: normal; overflow-wrap: anywhere; }
  .setup dl { grid-template-columns: minmax(0, 1fr); gap: 0 0; } .setup dd { margin-bottom: 0.3em; }
  table.stack, table.stack tbody, table.stack tr, table.stack td { display: block; }
  table.stack thead { display: none; }
  table.stack tr { border: 1px solid #ccc; border-radius: 0.3em; margin: 0 0 0.6em; }
  table.stack td { border: 0; border-bottom: 1px solid #eee; display: grid;
                   grid-template-columns: 9.5em minmax(0, 1fr); gap: 0.6em; text-align: left; }
  table.stack td::before { content: attr(data-label); color: #555; }
  table.stack td > .cell { min-width: 0; overflow-wrap: anywhere; }
}
"""
"""On a phone (at most 700 px) the tables of results become a card per row, a label beside each
value, and run ids break after a hyphen: nothing is off-screen."""


def render(runs: Sequence[RunView], *, baseline: str | None = None, title: str = "mltrain report",
           setups: Sequence[comparing.Setup] | None = None, lines: Sequence[RunLine] | None = None) -> str:
    """The whole report as one HTML string (its caller refused setups of different profiles, unless
    forced). ``setups`` and ``lines``: every run of the report, where ``runs`` are only those drawn
    and tabled (`insight.report_runs`); by default, ``runs`` are all of them."""
    setups = list(setups) if setups is not None else to_setups(runs)
    lines = list(lines) if lines is not None else [RunLine.of_view(view) for view in runs]
    result = comparing.compare(setups, baseline=baseline)
    colors = {setup.name: COLORS[i % len(COLORS)] for i, setup in enumerate(setups)}
    plots = draw(setups, runs, colors)
    smoke = smoke_in(result)
    parts = [
        *page_head(title, f"baseline: {result.baseline}"),
        '<section id="verdict">',
        "<h2>Verdict</h2>",
        *([f'<p class="caveat"><span class="badge" style="background:{BADGES["smoke"]}">smoke</span> '
           f"{esc(SMOKE_CAVEAT)}: every number below proves only that the pipeline runs</p>"] if smoke else []),
        '<div class="verdict">' + "".join(setup_card(result, row, lines) for row in result.rows) + "</div>",
        '<ul class="lines">' + "".join(f"<li>{esc(verdict(r, result))}</li>" for r in result.rows
                                       if r.name != result.baseline) + "</ul>",
        "</section>",
        "<h2>What differs between the setups</h2>",
        facts_html(setups),
        "<h2>Comparison</h2>",
        comparison_table(result),
        "<h2>Published MLPerf results like yours</h2>",
        published_section(setups),
        "<h2>Plots</h2>",
        shown_note(runs, lines),
        *(plot_html(plot) for plot in plots),
        "<h2>Seeds</h2>",
        seeds_table(runs),
        "<h2>Systems</h2>",
        systems_table(runs),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def badge(kind: str, word: str) -> str:
    """A verdict word on its colour (`BADGES`)."""
    return f'<span class="badge" style="background:{BADGES[kind]}">{esc(word)}</span>'


# ---------------------------------------------------------------- the verdict


def shown_note(runs: Sequence[RunView], lines: Sequence[RunLine]) -> str:
    """Which runs the plots, seeds and systems below show, where they are not all of them."""
    shown = {view.run_id for view in runs}
    hidden: dict[str, list[str]] = {}
    for line in lines:
        if line.run_id not in shown:
            hidden.setdefault(line.setup, []).append(line.run_id)
    if not hidden:
        return ""
    counts = Counter(line.setup for line in lines)
    said = "; ".join(f"{esc(setup)}: the newest {counts[setup] - len(ids)} of its {counts[setup]} runs"
                     for setup, ids in hidden.items())
    return (f'<p class="note">The plots of seeds, the seeds and the systems show {said}; every run counts in the'
            " verdict and the comparison above (`mltrain compare --json` gives every seed).</p>")


def setup_card(result: comparing.Comparison, row: comparing.SetupRow, lines: Sequence[RunLine]) -> str:
    """One setup's verdict: profile, VALID/INVALID, seeds converged, the olympic rule, the quiet-host
    verdict, date and duration, its runs."""
    views = [line for line in lines if line.setup == row.name]
    role = "baseline" if row.name == result.baseline else f"vs {result.baseline}"
    facts = [("profile", esc(row.profile or "?") + (f' <span class="note">({esc(PROFILE_CAVEAT[row.profile])})</span>'
                                                     if row.profile in PROFILE_CAVEAT else "")),
             ("result", _validity(row, views)),
             ("seeds converged", f"{row.converged} of {row.n}"),
             ("scoring", esc(_rule(views))),
             ("host", _host_badge(row)),
             _when_fact(views),
             ("runs", ", ".join(run_id(one) for one in row.run_ids[:5])
              + (f" and {len(row.run_ids) - 5} more" if len(row.run_ids) > 5 else ""))]
    items = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in facts)
    return (f'<div class="setup"><h3>{esc(setup_cell(row))} <span class="note">({esc(role)})</span></h3>'
            f"<dl>{items}</dl></div>")


def _validity(row: comparing.SetupRow, views: Sequence[RunLine]) -> str:
    """VALID or INVALID and why: each run's own score (its summary), else the comparison's."""
    invalid = [(v.run_id, v.reason) for v in views if v.valid is False]
    if invalid:
        run_id, reason = invalid[0]
        return badge("invalid", "INVALID") + f" {esc(reason)}" + (f" (run {esc(run_id)})" if len(views) > 1 else "")
    if not row.valid:
        return badge("invalid", "INVALID") + " " + esc("; ".join(row.notes))
    return badge("valid", "VALID")


def _host_badge(row: comparing.SetupRow) -> str:
    evidence = row.host
    if evidence is None:
        return badge("unknown", "not measured")
    kind = evidence.verdict
    word = {"quiet": "quiet", "disturbed": "disturbed", "unknown": "not measured"}[kind]
    return badge(kind, word) + f" {esc(evidence.sentence().removeprefix(word).strip())}"


def _rule(views: Sequence[RunLine]) -> str:
    """The olympic rule of the setup's runs, in words."""
    rules = {(v.drop_per_end, v.max_non_converged) for v in views}
    if len(rules) != 1 or None in next(iter(rules)):
        return "mixed rules"
    drop, most = next(iter(rules))
    return "olympic: " + rule_text(ScoringRule(drop_per_end=drop, max_non_converged=most))


def _when_fact(views: Sequence[RunLine]) -> tuple[str, str]:
    """('ran', when and how long), or for runs made elsewhere ('imported', the date of the import:
    when they ran is not known here)."""
    if views and all(v.imported for v in views):
        starts = sorted(i for i in (_instant(v.started_at) for v in views) if i is not None)
        when = starts[0].astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC") if starts else "?"
        return "imported", esc(f"{when} (made elsewhere: when it ran is not recorded)")
    return "ran", esc(_when(views))


def _when(views: Sequence[RunLine]) -> str:
    """'2026-11-27 12:02 UTC, 4.02 min' (the first run's start, the runs' time together)."""
    starts = [_instant(v.started_at) for v in views]
    known = [s for s in starts if s is not None]
    if not known:
        return "?"
    spent = [(_instant(v.ended_at), start) for v, start in zip(views, starts, strict=True)]
    ms = sum((end - start).total_seconds() * 1000 for end, start in spent if end is not None and start is not None)
    first = min(known).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    ended = all(end is not None for end, _ in spent)
    return f"{first}, {text.duration(ms) if ended else 'not ended'}" + (
        f" over {len(views)} runs" if len(views) > 1 else "")


def _instant(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def facts_html(setups: Sequence[comparing.Setup]) -> str:
    """What differs between the setups: a row per fact, differing facts first and marked; then those
    they share; then those some setup does not know (never 'the same')."""
    from orchestrator.insight.setup_facts import UNKNOWN, sorted_facts
    from orchestrator.render.comparison import facts_said

    differing, same, unknown = sorted_facts(setups)
    if not (differing or same or unknown):
        return '<p class="note">no setup recorded what it ran on</p>'
    head = ("", *(s.name for s in setups))
    rows = [[f"<strong>{esc(name)}</strong>" if name in differing else esc(name),
             *(esc(s.facts.get(name, UNKNOWN)) for s in setups)] for name in [*differing, *same, *unknown]]
    said = [f"they differ in {', '.join(differing)}" if differing else "nothing known differs",
            *facts_said(setups, same, unknown)]
    return f'<p>{esc("; ".join(said))}</p><div class="scroll">{_table(head, rows)}</div>'


# ---------------------------------------------------------------- tables


def comparison_table(result: comparing.Comparison) -> str:
    head = ("setup", "host", "hardware", "converged/n", "olympic TTT", "95% CI", "MLPerf score (x RCP)", "speedup",
            "95% CI", "per-epoch speed", "95% CI", "epochs-to-target", "s per epoch", "energy-to-train")
    rows = []
    for row in result.rows:
        speedup = row.speedup
        rows.append([
            esc(setup_cell(row)), esc(host_cell(row)), esc(row.hardware), f"{row.converged}/{row.n}",
            text.duration(row.olympic_ms.value), _range(row.olympic_ms, text.duration), esc(mlperf_score(row)),
            "baseline" if speedup is None else text.number(speedup.value, "x"),
            "" if speedup is None else _range(speedup, text.number),
            *_per_epoch(row),
            text.number(row.epochs_to_target.mean.value), text.number(row.seconds_per_epoch.mean.value),
            text.energy(row.energy_j),
        ])
    caveat = (f'<p class="caveat">{esc(SMOKE_CAVEAT)}</p>' if smoke_in(result) else "")
    return caveat + f'<div class="scroll">{_table(head, rows, stack=True)}</div>'


def _per_epoch(row: comparing.SetupRow) -> list[str]:
    """Per-epoch speed against the baseline and its interval: the hardware's number, one estimator."""
    ratio = row.seconds_per_epoch.ratio
    if row.speedup is None or ratio is None:
        return ["baseline" if row.speedup is None else "-", ""]
    return [text.number(ratio.value, "x"), _range(ratio, text.number)]


def seeds_table(runs: Sequence[RunView]) -> str:
    head = ("setup", "run", "seed", "status", "time-to-train", "epochs", "host", "energy", "mean power", "GPU util",
            "throttling", "bottleneck hint", "resource errors")
    rows = [_seed_cells(view, seed) for view in runs for seed in view.seeds]
    smoke = any(view.manifest.profile == SMOKE for view in runs)
    caveat = f'<p class="caveat">{esc(SMOKE_CAVEAT)}</p>' if smoke else ""
    return caveat + f'<div class="scroll">{_table(head, rows, stack=True)}</div>'


def _seed_cells(view: RunView, seed: SeedView) -> list[str]:
    record, telemetry = seed.record, seed.telemetry
    errors = classify(seed.output_path.read_text(errors="replace")) if seed.output_path.is_file() else []
    host = record.quiet_host
    causes = "; ".join(c.sentence for c in host.causes) if host is not None else ""
    cells = [esc(view.setup_name), run_id(view.run_id), str(seed.seed),
             esc(record.status.value), text.duration(record.time_to_train_ms), text.number(record.epochs_to_target),
             badge(host.verdict, host.verdict) + (f" {esc(causes)}" if host.causes else "")
             if host is not None else "-"]
    if telemetry is None:
        cells += ["-"] * 5
    else:
        energy = telemetry.energy
        cells += [
            text.energy(energy.joules),
            "-" if energy.mean_power_w is None else f"{text.number(energy.mean_power_w)} W",
            _per_system(telemetry, lambda f: "unknown" if f.gpu_util_mean_pct is None
                        else text.number(f.gpu_util_mean_pct, "%")),
            _per_system(telemetry, lambda f: "unknown" if f.throttling is None
                        else ", ".join(f"{k} {v:.0%}" for k, v in f.throttling.items()) or "none"),
            _per_system(telemetry, lambda f: f.bottleneck)]
    found = "<br>".join(esc(f"{e.kind.value}: {e.line}") for e in errors)
    cells.append(f'<span class="bad">{found}</span>' if errors else "none")
    return cells


def _per_system(telemetry: SeedTelemetry, said: Callable[[Figures], str]) -> str:
    """A figure of the seed's host alone, or of each node that ran it named by the node, one a line: the
    nodes are systems of their own, and a mean of theirs would hide the one node that lagged."""
    return "<br>".join(esc(said(f) if node == HERE else f"{node}: {said(f)}") for node, f in telemetry.systems.items())


def systems_table(runs: Sequence[RunView]) -> str:
    """Each run's system capture and runner, side by side: a row per fact, a column per run."""
    columns: list[dict[str, str]] = []
    for view in runs:
        manifest = view.manifest
        facts = dict(sysinfo.flat_facts(manifest.system)) if manifest.system else {}
        facts["runner"] = manifest.runner
        facts.update({f"runner.{key}": value for key, value in sysinfo.flat_facts(manifest.runner_provenance)
                      if key != "runner"})
        columns.append(facts)
    sections = ("host", "gpus", "storage", "container_engine", "software", "runner")
    keys = sorted(dict.fromkeys(key for facts in columns for key in facts),
                  key=lambda key: sections.index(key.split(".")[0]) if key.split(".")[0] in sections else len(sections))
    head = ("", *(f"{view.setup_name} ({view.run_id})" for view in runs))
    rows = [[f'<span class="id">{esc(key)}</span>', *(esc(facts.get(key, "-")) for facts in columns)] for key in keys]
    missing = [view.run_id for view, facts in zip(runs, columns, strict=True) if len(facts) <= 1]
    note = (f'<p class="note">{esc(", ".join(missing))}: this run holds no system capture</p>' if missing else "")
    return f'<div class="scroll">{_table(head, rows)}</div>' + note


def _table(head: Sequence[str], rows: list[list[str]], *, stack: bool = False) -> str:
    """An HTML table; ``stack``: on a phone each row a card, each cell labelled by its column."""
    header = "".join(f"<th>{esc(h)}</th>" for h in head)
    if not stack:
        body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
        return f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"
    body = "".join("<tr>" + "".join(f'<td data-label="{esc(h)}"><span class="cell">{cell}</span></td>'
                                   for h, cell in zip(head, row, strict=True)) + "</tr>" for row in rows)
    return f'<table class="stack"><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>'


def run_id(value: str) -> str:
    """A run id: on one line, but on a phone where it may break after a hyphen (`STYLE`)."""
    return f'<span class="id">{esc(value)}</span>'


def _range(interval: comparing.Interval, fmt: text.Format) -> str:
    return text.interval(interval, fmt).strip(" []") or "-"


def published_section(setups: Sequence[comparing.Setup]) -> str:
    """Each setup beside the published MLPerf results of the same benchmark, accelerator family and
    count (the fastest few), clearly labelled as MLCommons' published results; or why none match."""
    own = [s for s in setups if not s.published]
    rows, sentences = [], []
    table = published.load() if any(setup.profile != SMOKE for setup in own) else []
    for setup in own:
        if setup.profile == SMOKE:
            sentences.append(f"{setup.name}: {SMOKE_CAVEAT}, a published result least of all")
            continue
        try:
            found, said = published_beside([setup], AUTO, table=table)
        except UsageError as exc:
            sentences.append(f"{setup.name}: {str(exc).split(': ', 1)[-1]}")
            continue
        sentences += [f"{setup.name}: {sentence}" for sentence in said]
        if not found:
            continue
        result = comparing.compare([setup, *found], baseline=setup.name)
        for row in result.rows:
            per = row.per_accelerator
            rows.append([
                esc(setup.name), "published (MLCommons)" if row.published else "yours", esc(row.name),
                esc(row.hardware), f"{row.converged}/{row.n}", esc(mlperf_score(row)),
                "" if row.speedup is None else text.number(row.speedup.value, "x"),
                text.number(row.epochs_to_target.mean.value), text.number(row.seconds_per_epoch.mean.value),
                text.number(per.samples_per_second if per else None),
            ])
    head = ("your setup", "source", "result", "hardware", "converged/n", "MLPerf score", "speedup vs yours",
            "epochs-to-target", "s per epoch", "samples/s per accelerator")
    notes = "".join(f"<li>{esc(s)}</li>" for s in sentences)
    caveat = ('<p class="note">Published results are MLCommons\' (training_results_&lt;round&gt; repositories),'
              " recomputed from their per-run times in mltrain's table; they were not run here.</p>")
    return (f'<div class="scroll">{_table(head, rows, stack=True)}</div>' if rows else "") + (
        f"<ul>{notes}</ul>" if notes else "") + caveat


def page_head(title: str, note: str) -> list[str]:
    """The opening of every self-contained page: styles, the title, when it was made and ``note``."""
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="note">generated {esc(generated)}; {esc(note)}</p>',
    ]
