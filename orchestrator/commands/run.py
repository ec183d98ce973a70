"""``mltrain run``: run a workload once per seed, score the set, keep everything."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from orchestrator.commands.common import (
    JSON_OPTION,
    RESULTS_OPTION,
    RUNNERS_SAID,
    IpcMode,
    ProfileName,
    RunnerName,
    open_store,
    output,
    registry,
    seeds_file,
)

if TYPE_CHECKING:
    from orchestrator.session.loop import Watch


def register(app: typer.Typer) -> None:
    app.command("run", short_help="Run a workload once per seed to its target, then score.")(run)


def run(
    ctx: typer.Context,
    workload: str = typer.Argument(..., help="Workload name (a folder of workloads/)."),
    seeds: str = typer.Option(
        None, "--seeds",
        help="1-9, 1,3,5-7 or random:40 (default: the profile's); auto: seeds until the mean time-to-train is known"
        " to --width (a confidence sequence, valid however many seeds it looks at).",
    ),
    profile: ProfileName = typer.Option(None, "--profile", help="Default: qualify."),
    runner: RunnerName = typer.Option(
        None, "--runner", help=f"Where seeds run: {RUNNERS_SAID}. Default: local; with --resume, where the run ran."
    ),
    data: Path = typer.Option(
        None, "--data", help="Dataset folder, training-ready or raw (raw data is prepared once, where seeds run)."
    ),
    results: Path = RESULTS_OPTION,
    resume: str = typer.Option(None, "--resume", help="Run id: run only the seeds that did not finish."),
    retry_failed: bool = typer.Option(
        False, "--retry-failed", help="With --resume: also rerun seeds an infrastructure fault ended (crashed,"
        " killed, out of memory, timed out); each attempt is kept."
    ),
    label: str = typer.Option(None, "--label", help="Name of the setup, for `mltrain compare`."),
    gpus: str = typer.Option(
        None, "--gpus",
        help="all, N, 0,1 (device ids) or none; Slurm: N per job or none. Default: docker and Slurm none,"
        " local the GPUs this shell sees.",
    ),
    partition: str = typer.Option(None, "--partition", help="Slurm: partition to submit to."),
    nodes: int = typer.Option(None, "--nodes", help="Slurm: nodes of one seed (one launcher per node, torchrun's"
                              " rendezvous on the first)."),
    gpus_per_node: int = typer.Option(None, "--gpus-per-node", help="Slurm, with --nodes: GPUs (ranks) per node."),
    shm_size: str = typer.Option("1g", "--shm-size", help="Docker: /dev/shm size (with --ipc private)."),
    ipc: IpcMode = typer.Option(IpcMode.host, "--ipc", help="Docker: host (NVIDIA's MLPerf harness) or private."),
    base_image: str = typer.Option(None, "--base-image", help="Docker: BASE_IMAGE of the workload image."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Docker: rebuild the image even if unchanged."),
    drop_caches: bool = typer.Option(False, "--drop-caches", help="Docker: clear the page cache before each run."),
    until_decided: bool = typer.Option(
        False, "--until-decided",
        help="Run seeds one at a time until the comparison with --against is decided: faster, slower or"
        " equivalent within --margin, per epoch (and in time-to-train where its spread allows), or --max-seeds"
        " is spent. The rule is a 95% confidence sequence on log values (Wang & Ramdas 2024, arXiv:2310.03722,"
        " after Lai 1976): its error rate holds although it is applied after every seed.",
    ),
    against: str = typer.Option(None, "--against", metavar="RUN|LABEL",
                                help="With --until-decided: the stored setup to compare with (a run id or a label)."),
    margin: float = typer.Option(None, "--margin", metavar="PCT",
                                 help="With --until-decided: equivalent when within this many percent (default 3)."),
    max_seeds: int = typer.Option(None, "--max-seeds",
                                  help="With --until-decided or --seeds auto: the most seeds to run (default 20)."),
    width: float = typer.Option(None, "--width", metavar="PCT",
                                help="With --seeds auto: stop when the interval is within +-PCT percent (default 5)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Run WORKLOAD once per seed until its quality target, then score the set.

    With --until-decided --against REF (or --seeds auto) the run decides its own seed count after
    each seed; its rule and every decision are kept in decisions.json and shown by `mltrain show`.

    Exit status: 0 a valid result; 1 the result is invalid; 2 bad input (nothing run or written);
    3 an infrastructure fault ended a seed (resume with --retry-failed); 130/143/129 stopped by a
    signal (resume with --resume)."""
    from orchestrator.config.profiles import load_profiles
    from orchestrator.config.seedspec import SeedSpec, parse_option
    from orchestrator.runners.select import RunnerOptions, make_runner
    from orchestrator.session.deciding import request_of
    from orchestrator.session.plan import plan_run

    out = output(ctx)
    every_s = progress_interval()
    store = open_store(results)
    spec = registry().get(workload)
    profiles = load_profiles(seeds_file())
    asked = parse_option(seeds)
    request = request_of(seeds=asked, until_decided=until_decided, against=against, margin=margin,
                         max_seeds=max_seeds, width=width)
    plan = plan_run(spec, profiles, store, resume=resume, seeds=asked if isinstance(asked, SeedSpec) else None,
                    profile=profile.value if profile else None, data=data, label=label, retry_failed=retry_failed,
                    request=request)
    options = RunnerOptions(
        name=plan.runner_name(runner.value if runner else None), gpus=gpus, shm_size=shm_size, rebuild=rebuild,
        drop_caches=drop_caches, partition=partition, base_image=base_image, ipc=ipc.value,
        time_limit_minutes=plan.runner_time_limit_minutes, nodes=plan.nodes(nodes), gpus_per_node=gpus_per_node,
    )
    backend = make_runner(options, out.status)
    plan = plan.locked()  # the plan stands: a resumed run is taken (refused at once while another process has it)
    if plan.lock_note:
        out.warning(plan.lock_note)
    from rich.live import Live  # the heavy imports wait until a live run's resume has been refused

    from orchestrator.render.decisions import step_line
    from orchestrator.render.tables import progress_table, retry_hint, show_score
    from orchestrator.session.loop import Watch, run_benchmark
    from orchestrator.session.scoring import exit_code

    watch = Watch(status=out.status, warning=out.warning, decided=lambda log: out.status(step_line(log)))
    if out.err.is_terminal and not out.quiet:
        title = f"{spec.name} · {plan.profile.name}"
        with Live(progress_table(title, watch.seeds), console=out.err, auto_refresh=False) as live:
            watch.update = lambda: live.update(progress_table(title, watch.seeds), refresh=True)
            stored, score = run_benchmark(plan, backend, store, watch)
    else:  # under nohup, CI or a pipe: a line per finished seed, and a line at least every PROGRESS_S
        heartbeat = Heartbeat(out.status, watch, metric=plan.goal.metric, target=plan.goal.target, every_s=every_s)
        watch.update = heartbeat.tick
        stored, score = run_benchmark(plan, backend, store, watch)
    show_score(out, stored.summary, score, as_json=as_json, decisions=stored.decisions,
               records=stored.finished_records())
    if retry_hint(stored):
        out.warning(retry_hint(stored))
    if stored.index_note:
        out.warning(stored.index_note)
    code = exit_code(stored, score)
    if code:
        raise typer.Exit(code)


PROGRESS_S = 20.0
"""Without a live table, a running seed's line comes at least this often (MLTRAIN_PROGRESS_S sets
another): a CI log or a nohup.out never falls silent for long while seeds run."""


class Heartbeat:
    """The live table's news as lines, where there is no terminal: a seed's end as it happens, and
    each running seed's epoch and quality every ``every_s`` seconds."""

    def __init__(self, say: Callable[[str], None], watch: Watch, *, metric: str, target: float,
                 every_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.say, self.watch, self.metric, self.target, self.clock = say, watch, metric, target, clock
        self.every_s = every_s if every_s is not None else progress_interval()
        self.last: dict[int, float] = {}

    def tick(self) -> None:
        now = self.clock()
        for seed, p in self.watch.seeds.items():
            if p.state == "finished" and not p.announced:
                p.announced = True
                self.say(f"seed {seed}: {p.status}; the job took {p.elapsed() or 0:.1f} s wall clock"
                         " (start to exit: not its time-to-train, run_start to run_stop)")
            elif p.state == "running" and p.started is not None:
                since = self.last.setdefault(seed, p.started)
                if now - since >= self.every_s:
                    self.last[seed] = now
                    self.say(self.line(seed, now - p.started))

    def line(self, seed: int, elapsed: float) -> str:
        p = self.watch.seeds[seed]
        epoch = "no epoch logged yet" if p.epoch is None else f"epoch {p.epoch:g}"
        quality = (f"{self.metric} {p.accuracy:.4f} (target {self.target:g})" if p.accuracy is not None
                   else f"no {self.metric} yet (target {self.target:g})")
        return f"seed {seed}: running {elapsed:.0f} s, {epoch}, {quality}"


def progress_interval() -> float:
    """PROGRESS_S, or MLTRAIN_PROGRESS_S where it is a positive number of seconds."""
    import math
    import os

    from orchestrator.errors import UsageError

    given = os.environ.get("MLTRAIN_PROGRESS_S")
    if not given:
        return PROGRESS_S
    try:
        value = float(given)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"MLTRAIN_PROGRESS_S={given!r}: give the seconds between progress lines (a positive number)")
    return value
