"""One self-contained HTML report of stored runs: comparison, plots, per-seed facts, systems.

Plots are drawn with matplotlib's object API (no pyplot, no global state) and embedded as
base64 PNG, so the file can be mailed or archived alone. Every string that came from a log, a
manifest or a host goes through `html.escape`.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from orchestrator import text
from orchestrator.errors import UsageError
from orchestrator.insight import compare as comparing
from orchestrator.insight import sysinfo
from orchestrator.insight.runs import AUTO, RunView, SeedView, published_beside, to_setups
from orchestrator.render.comparison import mlperf_score, verdict
from orchestrator.runners.resource_errors import classify

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1200px; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; border: 1px solid #eee; } pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; }
.note { color: #666; } .bad { color: #b00; }
"""


@dataclass(frozen=True, kw_only=True)
class Plot:
    """One embedded figure."""

    title: str
    png: bytes | None
    """None when there was nothing to draw."""
    note: str = ""
    """Why nothing was drawn, or how to read it."""


def render(runs: Sequence[RunView], *, baseline: str | None = None, title: str = "mltrain report") -> str:
    """The whole report as one HTML string."""
    setups = to_setups(runs)
    result = comparing.compare(setups, baseline=baseline)
    colors = {setup.name: COLORS[i % len(COLORS)] for i, setup in enumerate(setups)}
    with matplotlib.rc_context({"text.parse_math": False}):  # a label like '$5/h' is text, not mathtext
        plots = [ttt_plot(setups, colors), split_plot(setups, colors), accuracy_plot(runs, colors),
                 power_plot(runs, colors)]
    parts = [
        *page_head(title, f"baseline: {result.baseline}"),
        "<h2>Comparison</h2>",
        comparison_table(result),
        "<ul>" + "".join(f"<li>{esc(verdict(r, result.baseline))}</li>" for r in result.rows
                         if r.name != result.baseline) + "</ul>",
        "<h2>Published MLPerf results like yours</h2>",
        published_section(setups),
        "<h2>Plots</h2>",
        *(plot_html(plot) for plot in plots),
        "<h2>Seeds</h2>",
        seeds_table(runs),
        "<h2>Systems</h2>",
        *(system_html(view) for view in runs),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


# ---------------------------------------------------------------- tables


def comparison_table(result: comparing.Comparison) -> str:
    head = ("setup", "hardware", "converged/n", "olympic TTT", "95% CI", "MLPerf score (x RCP)", "speedup", "95% CI",
            "Welch p", "seeds needed", "epochs-to-target", "s per epoch", "energy-to-train")
    rows = []
    for row in result.rows:
        speedup = row.speedup
        rows.append([
            esc(row.name), esc(row.hardware), f"{row.converged}/{row.n}",
            text.duration(row.olympic_ms.value), _range(row.olympic_ms, text.duration), esc(mlperf_score(row)),
            "baseline" if speedup is None else text.number(speedup.value, "x"),
            "" if speedup is None else _range(speedup, text.number),
            text.p_value(row.ttt_test), text.seeds_needed(row.ttt_test),
            text.number(row.epochs_to_target.mean.value), text.number(row.seconds_per_epoch.mean.value),
            text.energy(row.energy_j),
        ])
    return _table(head, rows)


def seeds_table(runs: Sequence[RunView]) -> str:
    head = ("setup", "run", "seed", "status", "time-to-train", "epochs", "energy", "mean power", "GPU util",
            "throttling", "bottleneck hint", "resource errors")
    rows = [_seed_cells(view, seed) for view in runs for seed in view.seeds]
    return _table(head, rows)


def _seed_cells(view: RunView, seed: SeedView) -> list[str]:
    record, telemetry = seed.record, seed.telemetry
    errors = classify(seed.output_path.read_text(errors="replace")) if seed.output_path.is_file() else []
    cells = [esc(view.setup_name), esc(view.run_id), str(seed.seed), esc(record.status.value),
             text.duration(record.time_to_train_ms), text.number(record.epochs_to_target)]
    if telemetry is None:
        cells += ["-"] * 5
    else:
        energy = telemetry.energy
        throttling = ", ".join(f"{k} {v:.0%}" for k, v in telemetry.throttling.items()) or "none"
        cells += [
            text.energy(energy.joules),
            "-" if energy.mean_power_w is None else f"{text.number(energy.mean_power_w)} W",
            text.number(telemetry.gpu_util_mean_pct, "%"),
            esc(throttling),
            esc(telemetry.bottleneck),
        ]
    found = "<br>".join(esc(f"{e.kind.value}: {e.line}") for e in errors)
    cells.append(f'<span class="bad">{found}</span>' if errors else "none")
    return cells


def system_html(view: RunView) -> str:
    manifest = view.manifest
    heading = f"<h3>{esc(view.setup_name)} ({esc(view.run_id)})</h3>"
    runner = f"runner: {manifest.runner}"
    provenance = manifest.runner_provenance
    if provenance:
        runner += "\n" + "\n".join(f"  {key}: {value}" for key, value in sorted(provenance.items()))
    system = manifest.system
    if not system:
        return heading + f"<pre>{esc(runner)}</pre>" + '<p class="note">this run holds no system capture</p>'
    return heading + "<pre>" + esc("\n".join([*sysinfo.describe_lines(system), runner])) + "</pre>"


def _table(head: Sequence[str], rows: list[list[str]]) -> str:
    header = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"


def _range(interval: comparing.Interval, fmt: text.Format) -> str:
    return text.interval(interval, fmt).strip(" []") or "-"


def published_section(setups: Sequence[comparing.Setup]) -> str:
    """Each setup beside the published MLPerf results of the same benchmark, accelerator family and
    count (the fastest few), clearly labelled as MLCommons' published results; or why none match."""
    own = [s for s in setups if not s.published]
    rows, sentences = [], []
    for setup in own:
        try:
            found, said = published_beside([setup], AUTO)
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
    return (_table(head, rows) if rows else "") + (f"<ul>{notes}</ul>" if notes else "") + caveat


# ---------------------------------------------------------------- plots


def plot_html(plot: Plot) -> str:
    parts = [f"<h3>{esc(plot.title)}</h3>"]
    if plot.png is not None:
        data = base64.b64encode(plot.png).decode("ascii")
        parts.append(f'<img alt="{esc(plot.title)}" src="data:image/png;base64,{data}">')
    if plot.note:
        parts.append(f'<p class="note">{esc(plot.note)}</p>')
    return "\n".join(parts)


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def ttt_plot(setups: Sequence[comparing.Setup], colors: dict[str, str]) -> Plot:
    title = "Time-to-train per seed, by setup"
    data = [[s.time_to_train_ms / 1000 for s in setup.converged() if s.time_to_train_ms] for setup in setups]
    if not any(data):
        return Plot(title=title, png=None, note="no converged run to plot")
    figure = Figure(figsize=(max(4.0, 1.2 + 1.3 * len(setups)), 4.5))
    axes = figure.add_subplot()
    axes.boxplot([d or [np.nan] for d in data], widths=0.5, showfliers=False)
    jitter = np.random.default_rng(0)
    for index, (setup, values) in enumerate(zip(setups, data, strict=True), start=1):
        axes.scatter(index + jitter.uniform(-0.15, 0.15, len(values)), values, color=colors[setup.name], s=18, zorder=3)
        failed = len(setup.seeds) - len(values)
        if failed:
            axes.annotate(f"{failed} not converged", (index, 1.0), xycoords=("data", "axes fraction"),
                          ha="center", va="top", fontsize=8, color="#b00")
    axes.set_xticks(range(1, len(setups) + 1), [s.name for s in setups], rotation=20 if len(setups) > 4 else 0)
    axes.set_ylabel("time-to-train (s)")
    axes.grid(axis="y", alpha=0.3)
    return Plot(title=title, png=_png(figure), note="box: quartiles of converged runs; dots: one per seed")


def split_plot(setups: Sequence[comparing.Setup], colors: dict[str, str]) -> Plot:
    title = "Convergence versus hardware: epochs-to-target against seconds per epoch"
    figure = Figure(figsize=(8, 4.5))
    axes = figure.add_subplot()
    drawn = False
    for setup in setups:
        points = [(s.seconds_per_epoch, s.epochs_to_target) for s in setup.converged()
                  if s.seconds_per_epoch is not None and s.epochs_to_target]
        if points:
            x, y = zip(*points, strict=True)
            axes.scatter(x, y, color=colors[setup.name], label=setup.name, s=20)
            drawn = True
    if not drawn:
        return Plot(title=title, png=None, note="no run logged epochs-to-target")
    axes.set_xlabel("seconds per epoch (hardware)")
    axes.set_ylabel("epochs-to-target (convergence)")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    return Plot(title=title, png=_png(figure),
                note="setups that differ left-right differ in hardware speed; up-down spread is convergence luck")


def accuracy_plot(runs: Sequence[RunView], colors: dict[str, str]) -> Plot:
    title = "Accuracy versus time since run_start"
    figure = Figure(figsize=(8, 4.5))
    axes = figure.add_subplot()
    labelled: set[str] = set()
    targets = set()
    for view in runs:
        for seed in view.seeds:
            evals = seed.record.evals
            if not evals:
                continue
            name = view.setup_name
            axes.plot([e.time_ms / 1000 for e in evals], [e.accuracy for e in evals], color=colors[name],
                      alpha=0.6, linewidth=1, label=None if name in labelled else name)
            labelled.add(name)
            if seed.record.target is not None:
                targets.add(seed.record.target)
    if not labelled:
        return Plot(title=title, png=None, note="no run logged an evaluation")
    for target in targets:
        axes.axhline(target, color="#444", linestyle="--", linewidth=0.8)
    axes.set_xlabel("seconds since run_start")
    axes.set_ylabel("eval accuracy")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    return Plot(title=title, png=_png(figure), note="one line per seed; dashed: quality target")


def power_plot(runs: Sequence[RunView], colors: dict[str, str]) -> Plot:
    title = "GPU power over time (all GPUs of a seed summed)"
    figure = Figure(figsize=(8, 4.5))
    axes = figure.add_subplot()
    labelled: set[str] = set()
    reasons: set[str] = set()
    for view in runs:
        for seed in view.seeds:
            series, start = seed.series, seed.record.run_start_ms
            if series is None or start is None:
                continue
            gpus = series.get("gpus") or []
            if not gpus:
                reasons.add(str((series.get("gpu_source") or {}).get("reason", "no GPU in the series")))
                continue
            t = (np.asarray(series["host"]["t_ms"], dtype=float) - start) / 1000
            power = np.sum([[np.nan if v is None else v for v in g["power_w"]] for g in gpus], axis=0)
            name = view.setup_name
            axes.plot(t, power, color=colors[name], alpha=0.6, linewidth=1, label=None if name in labelled else name)
            labelled.add(name)
    if not labelled:
        why = "; ".join(sorted(reasons)) or "no telemetry was recorded"
        if reasons:
            return cpu_plot(runs, colors, f"no GPU power to plot: {why}")
        return Plot(title=title, png=None, note=f"no GPU power to plot: {why}")
    axes.axvline(0, color="#444", linestyle=":", linewidth=0.8)
    axes.set_xlabel("seconds since run_start")
    axes.set_ylabel("power (W)")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    return Plot(title=title, png=_png(figure), note="dotted: run_start")


def cpu_plot(runs: Sequence[RunView], colors: dict[str, str], why: str) -> Plot:
    """Host CPU busy share over time: what a CPU-only host shows in place of GPU power."""
    title = "Host CPU busy over time"
    figure = Figure(figsize=(8, 4.5))
    axes = figure.add_subplot()
    labelled: set[str] = set()
    for view in runs:
        for seed in view.seeds:
            series, start = seed.series, seed.record.run_start_ms
            if series is None or start is None:
                continue
            t = (np.asarray(series["host"]["t_ms"], dtype=float) - start) / 1000
            busy = np.array([np.nan if v is None else v for v in series["host"]["cpu_pct"]], dtype=float)
            name = view.setup_name
            axes.plot(t, busy, color=colors[name], alpha=0.6, linewidth=1, label=None if name in labelled else name)
            labelled.add(name)
    if not labelled:
        return Plot(title=title, png=None, note=why)
    axes.axvline(0, color="#444", linestyle=":", linewidth=0.8)
    axes.set_xlabel("seconds since run_start")
    axes.set_ylabel("CPU busy (% of all CPUs)")
    axes.set_ylim(0, 105)
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)
    return Plot(title=title, png=_png(figure), note=f"{why}; dotted: run_start")


def page_head(title: str, note: str) -> list[str]:
    """The opening of every self-contained page: styles, the title, when it was made and ``note``."""
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="note">generated {esc(generated)}; {esc(note)}</p>',
    ]
