"""``mltrain run``: run a workload once per seed, score the set, keep everything."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.live import Live

from orchestrator.commands.common import JSON_OPTION, RESULTS_OPTION, registry, results_dir, seeds_file
from orchestrator.config.locations import project_root
from orchestrator.config.profiles import load_profiles
from orchestrator.config.seedspec import parse_seeds
from orchestrator.config.workloads import Workload
from orchestrator.errors import EXIT_INVALID_RESULT, Interrupted, UsageError
from orchestrator.output import Output
from orchestrator.render.tables import progress_table, show_score
from orchestrator.results import store
from orchestrator.runners.select import RunnerOptions, make_runner
from orchestrator.session import datasets
from orchestrator.session import loop as benchmark
from orchestrator.session.seed import SeedProgress


def register(app: typer.Typer) -> None:
    app.command("run")(run)


def run(
    workload: str = typer.Argument(..., help="Workload name (a folder of workloads/)."),
    seeds: str = typer.Option(None, "--seeds", help="1-9, 1,3,5-7 or random:40 (default: the profile's)."),
    profile: str = typer.Option(None, "--profile", help="qualify (default), mlperf or smoke."),
    runner: str = typer.Option("local", "--runner", help="local, docker, slurm or auto."),
    data: Path = typer.Option(None, "--data", help="Training-ready dataset folder (mounted at /data)."),
    results: Path = RESULTS_OPTION,
    resume: str = typer.Option(None, "--resume", help="Run id: run only the seeds that did not finish."),
    label: str = typer.Option(None, "--label", help="Name of the setup, for `mltrain compare`."),
    gpus: str = typer.Option("none", "--gpus", help="Docker: all, N, 0,1 or none; Slurm: N per job or none."),
    partition: str = typer.Option(None, "--partition", help="Slurm: partition to submit to."),
    shm_size: str = typer.Option("1g", "--shm-size", help="Docker: /dev/shm size (with --ipc private)."),
    ipc: str = typer.Option("host", "--ipc", help="Docker: host (NVIDIA's MLPerf harness) or private."),
    base_image: str = typer.Option(None, "--base-image", help="Docker: BASE_IMAGE of the workload image."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Docker: rebuild the image even if unchanged."),
    drop_caches: bool = typer.Option(False, "--drop-caches", help="Clear the page cache before each run."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Run WORKLOAD once per seed until its quality target, then score the set."""
    out = Output()
    folder = results_dir(results)
    spec = registry().get(workload)
    previous = store.open_run(folder, resume) if resume else None
    plan = _plan(spec, folder, seeds=seeds, profile=profile, data=data, label=label, previous=previous)
    options = RunnerOptions(
        name=runner, gpus=gpus, shm_size=shm_size, rebuild=rebuild, drop_caches=drop_caches, partition=partition,
        base_image=base_image, ipc=ipc, time_limit_minutes=plan.profile.timeout_minutes + 5,
    )
    backend = make_runner(options, project_root(), out.status)
    own_synthetic = plan.profile.dataset.source == "synthetic" and data is None
    if own_synthetic and datasets.ensure_synthetic(spec, plan.profile, plan.data_dir, quiet=False):
        out.status(f"synthetic {spec.name} data made in {plan.data_dir}")
    datasets.check_data(spec, plan.data_dir)
    provenance = backend.prepare(spec)
    if previous is None:
        manifest = benchmark.new_manifest(plan, backend)
        manifest["runner_provenance"] = provenance
        stored = store.open_run(folder, store.create_run(folder, manifest).run_id)
    else:
        stored = previous
        if not stored.unfinished_seeds():
            out.status(f"run {stored.run_id}: every seed has finished already; scoring it")
    out.status(
        f"run {stored.run_id}: {spec.name}, profile {plan.profile.name}, {len(plan.seeds)} seeds,"
        f" runner {backend.name}"
    )
    progress = {s: SeedProgress(seed=s) for s in plan.seeds}
    for s, state in stored.states.items():
        if state.get("state") == store.SEED_FINISHED and s in progress:
            progress[s].state, progress[s].status = "finished", state.get("status", "")
    title = f"{spec.name} · {plan.profile.name} · {stored.run_id}"
    try:
        if out.err.is_terminal:
            with Live(progress_table(title, progress), console=out.err, auto_refresh=False) as live:
                benchmark.run_seeds(
                    stored, plan, backend, progress, lambda: live.update(progress_table(title, progress), refresh=True)
                )
        else:
            benchmark.run_seeds(stored, plan, backend, progress, lambda: _announce_finished(out, progress))
    except KeyboardInterrupt:
        raise Interrupted(
            f"interrupted: finished seeds are kept; complete the set with"
            f" `mltrain run {spec.name} --resume {stored.run_id}`"
        ) from None
    final, score = benchmark.finish(folder, stored.run_id)
    show_score(out, final.summary or {}, score, as_json=as_json)
    if not score.valid or benchmark.failed_runs(final):
        raise typer.Exit(EXIT_INVALID_RESULT)


def _announce_finished(out: Output, progress: dict[int, SeedProgress]) -> None:
    """Without a terminal there is no live table: one status line per finished seed."""
    for seed, p in progress.items():
        if p.state == "finished" and not p.announced:
            p.announced = True
            out.status(f"seed {seed}: {p.status} after {p.elapsed() or 0:.1f} s")


def _plan(
    spec: Workload, folder: Path, *, seeds: str | None, profile: str | None, data: Path | None, label: str | None,
    previous: store.StoredRun | None,
) -> benchmark.BenchmarkPlan:
    """Decide everything before anything runs or is written; a resumed run keeps what it had."""
    if previous is None:
        chosen = load_profiles(seeds_file()).get(spec.name, profile)
        parsed, random = parse_seeds(chosen.seeds if seeds is None else seeds)
        return benchmark.BenchmarkPlan(
            workload=spec, profile=chosen, seeds=tuple(parsed), seeds_random=random,
            data_dir=datasets.resolve_data_dir(spec, chosen, data), results_dir=folder, label=label,
        )
    m = previous.manifest
    if m["workload"] != spec.name:
        raise UsageError(f"run {previous.run_id} is a {m['workload']} run, not {spec.name}")
    if seeds is not None or profile:
        raise UsageError("--resume reruns the unfinished seeds of that run: drop --seeds and --profile")
    chosen = load_profiles(seeds_file()).get(spec.name, m["profile"])
    recorded = Path(m["data_dir"])
    if data is None and chosen.dataset.source == "synthetic":
        data_dir = recorded  # made again there if it was removed meanwhile
    else:
        data_dir = datasets.resolve_data_dir(spec, chosen, data or recorded)
    return benchmark.BenchmarkPlan(
        workload=spec, profile=chosen, seeds=tuple(m["seeds"]), seeds_random=bool(m.get("seeds_random")),
        data_dir=data_dir, results_dir=folder, label=label or m.get("label"),
    )
