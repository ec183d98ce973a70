"""A benchmark run from start to end, in the order it happens:

    plan -> checks -> leftovers -> runner -> data -> manifest -> seeds -> score -> export

Data comes after the runner: the dataset commands run where the seeds run (in the workload's
image for Docker).

`run_benchmark` is that sequence, top to bottom; each step is one function below it. The plan
(`orchestrator.session.plan`) is decided before anything runs, and every value a seed's submission
will carry is checked before anything is written. Resumable: a resumed plan reopens its stored
run under the run's lock, stops what a killed mltrain left of it, and runs only the seeds that
did not finish (with ``--retry-failed``, also those an infrastructure fault ended); one seed's life
on a runner is `orchestrator.session.seed.run_seed`; the scoring of a stored run is
`orchestrator.session.scoring`.

A stop signal (Ctrl-C, SIGTERM, SIGHUP) stops the running seed in order, records it interrupted,
closes the manifest as interrupted and raises `Interrupted` saying how to resume.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from orchestrator.config.profiles import MLPERF
from orchestrator.errors import Interrupted
from orchestrator.insight import quiet, sysinfo
from orchestrator.insight.telemetry import NodeSeries, TelemetrySampler, load_node_series
from orchestrator.insight.telemetry_summary import seed_energy
from orchestrator.mlperf import compliance, parity
from orchestrator.results import atomic
from orchestrator.results.decisions import DecisionLog
from orchestrator.results.paths import SeedPaths
from orchestrator.results.records import (
    Manifest,
    RunRecord,
    RunState,
    Score,
    SeedState,
    SeedStateName,
)
from orchestrator.results.store import Store, new_run_id, now_iso
from orchestrator.results.stored_run import StoredRun
from orchestrator.runners.base import JobSpec, Runner
from orchestrator.session import datasets
from orchestrator.session.plan import BenchmarkPlan, never_valid, resume_command
from orchestrator.session.scoring import failed_runs, score_run, summary_of
from orchestrator.session.seed import SeedProgress, run_seed, seed_spec
from orchestrator.signals import signal_of, stop_under_way


@dataclass
class Watch:
    """How the caller follows a run: per-seed progress, a callback when it changes, status lines,
    warnings, and each new decision of a run that decides its own seed count."""

    status: Callable[[str], None] = lambda _: None
    update: Callable[[], None] = lambda: None
    seeds: dict[int, SeedProgress] = field(default_factory=dict)
    warning: Callable[[str], None] = lambda _: None
    decided: Callable[[DecisionLog], None] = lambda _: None


def run_benchmark(plan: BenchmarkPlan, runner: Runner, store: Store, watch: Watch) -> tuple[StoredRun, Score]:
    """Run the plan's seeds that are still to run on ``runner`` and score the set. A resumed plan's
    run must be locked (`StoredRun.locked`); a new run is locked as it is made. Either way the
    lock is released when this returns or raises."""
    run = plan.resumes
    run_id = run.run_id if run is not None else new_run_id(plan.workload.name, plan.profile.name)
    try:
        checked = check_jobs(plan, runner, store, run_id)
        doomed = never_valid(len(plan.seeds), plan.profile) if plan.resumes is None and plan.decider is None else None
        if doomed:  # said once the input stands, before the first seed
            watch.warning(doomed)
        if run is not None:
            stop_leftovers(run, runner, watch.status)
            adopt_recorded_seeds(run, watch.status)
        provenance = runner.prepare(plan.workload)
        data = datasets.prepare_data(plan.workload, plan.profile, plan.data_dir, runner,
                                     synthetic=plan.makes_synthetic_data, status=watch.status)
        plan = replace(plan, data_dir=data.folder)
        if run is None:
            run = store.create(new_manifest(plan, run_id, runner.name, {**provenance, "dataset": data.provenance()}))
        to_run = seeds_to_run(run, plan)
        if plan.resumes is not None and not to_run:
            watch.status(f"run {run.run_id}: every seed has finished already; scoring it")
        watch.status(f"run {run.run_id}: {plan.workload.name}, profile {plan.profile.name}, {plan.seeds_said},"
                     f" runner {runner.name}")
        for seed in plan.seeds:
            progress = watch.seeds.setdefault(seed, SeedProgress(seed=seed))
            state = run.states.get(seed)
            if seed not in to_run and state is not None and state.finished:
                progress.state, progress.status = "finished", state.status.value if state.status else ""
        for seed in seeds_in_turn(run, plan, watch, to_run):
            run_one_seed(run, seed, plan, runner, watch, checked)
        return finish(run)
    except KeyboardInterrupt as stop:  # the running seed's job was stopped in order (`run_job`)
        raise interrupted(run, plan, signal_of(stop)) from None
    except Exception as exc:
        stop = stop_under_way()
        if stop is not None:  # a library caught the stop and raised its own error (`orchestrator.signals`)
            raise interrupted(run, plan, stop.signum) from exc
        if run is not None:
            close_after_error(run, watch.status)
        raise
    finally:
        if run is not None:
            run.close()


def seed_job(plan: BenchmarkPlan, store: Store, run_id: str, seed: int) -> JobSpec:
    """What a runner is given to run one seed of the plan."""
    return seed_spec(run_id=run_id, seed=seed, workload=plan.workload, data_dir=plan.data_dir,
                     paths=store.paths(run_id).seed(seed), env=plan.seed_env())


def check_jobs(plan: BenchmarkPlan, runner: Runner, store: Store, run_id: str) -> dict[int, JobSpec]:
    """Every seed's job as the runner would take it, checked before anything is written; the jobs
    checked, by seed (a seed whose job is still this one when it runs is not checked again)."""
    checked = {seed: seed_job(plan, store, run_id, seed) for seed in plan.possible_seeds}
    for job in checked.values():
        runner.check_job(job)
    return checked


def stop_leftovers(run: StoredRun, runner: Runner, status: Callable[[str], None]) -> None:
    """Stop what a killed mltrain left running of this run (we hold its lock: nothing else runs it)."""
    stopped = runner.stop_leftovers(run.run_id)
    if stopped:
        status(f"run {run.run_id}: stopped what an earlier mltrain left running: {', '.join(stopped)}")


def adopt_recorded_seeds(run: StoredRun, status: Callable[[str], None]) -> None:
    """A seed with a record but no finished state was finished when mltrain stopped between writing
    the two (a record is written only after its job ended, and an attempt's record is archived
    before the next attempt begins): it finished, and keeps its record."""
    for seed in run.manifest.seeds:
        state, record = run.states.get(seed), run.records.get(seed)
        if record is not None and not run.finished(seed):
            run.save_seed(finished_state(seed, state, record))
            status(f"seed {seed}: its run had ended and was recorded before mltrain stopped; kept")


def finished_state(seed: int, state: SeedState | None, record: RunRecord) -> SeedState:
    started_at = state.started_at if state is not None else None
    return SeedState(seed=seed, state=SeedStateName.FINISHED, status=record.status, started_at=started_at,
                     ended_at=now_iso())


def seeds_to_run(run: StoredRun, plan: BenchmarkPlan) -> list[int]:
    """The seeds that did not finish, and with ``--retry-failed`` those an infrastructure fault ended."""
    retry = set(failed_runs(run)) if plan.retry_failed else set()
    return [s for s in run.manifest.seeds if not run.finished(s) or s in retry]


def seeds_in_turn(run: StoredRun, plan: BenchmarkPlan, watch: Watch, planned: Sequence[int]) -> Iterator[int]:
    """The planned seeds, then, for a run that decides its own seed count, the seeds its rule asks
    for, one at a time, each once the seeds before it have finished."""
    if plan.decider is not None:
        plan.decider.start(run)
    yield from planned
    while plan.decider is not None and (seed := plan.decider.next_seed(run, watch.decided)) is not None:
        run.add_seed(seed)
        watch.seeds[seed] = SeedProgress(seed=seed)
        yield seed


def new_manifest(plan: BenchmarkPlan, run_id: str, runner: str, provenance: dict[str, Any]) -> Manifest:
    return Manifest(
        run_id=run_id,
        workload=plan.workload.name,
        benchmark=plan.workload.mlperf_benchmark,
        profile=plan.profile.name,  # type: ignore[arg-type]  # validated by the profile file
        mlperf_result=plan.profile.is_mlperf,
        label=plan.label,
        seeds=plan.seeds,
        seeds_random=plan.seeds_random,
        runner=runner,
        metric=plan.workload.quality.metric,
        target=plan.target,
        rule=plan.rule,
        ruleset=plan.ruleset,
        timeout_minutes=plan.profile.timeout_minutes,
        data_dir=str(plan.data_dir),
        env=plan.seed_env(),
        host=socket.gethostname(),
        command=(Path(sys.argv[0]).name, *sys.argv[1:]),
        started_at=now_iso(),
        state="running",
        versions=sysinfo.orchestrator_versions(),
        system=sysinfo.capture(plan.data_dir),
        runner_provenance=provenance,
    )


def run_one_seed(run: StoredRun, seed: int, plan: BenchmarkPlan, runner: Runner, watch: Watch,
                 checked: Mapping[int, JobSpec]) -> None:
    """Run one seed to its end and record it (a stop signal propagates; `run_benchmark` records it).
    Its job is checked by the runner unless it is the one ``checked`` holds for it (its data
    prepared elsewhere than the plan said makes another job)."""
    paths = run.paths.seed(seed)
    archive_attempt(run, paths)
    started_at = now_iso()
    run.save_seed(SeedState(seed=seed, state=SeedStateName.RUNNING, started_at=started_at))
    job = seed_job(plan, run.store, run.run_id, seed)
    sampler = TelemetrySampler(paths.telemetry, plan.data_dir, gpus=runner.sampled_gpus,
                               numbering=runner.gpu_numbering, mark=run.run_id)
    with sampler:
        record = run_seed(
            runner, job, checked=checked.get(seed) == job, timeout_s=plan.profile.timeout_minutes * 60, goal=plan.goal,
            samples_per_epoch=plan.workload.samples_per_epoch, progress=watch.seeds[seed], on_update=watch.update,
            warning=watch.warning,
        )
    record = with_host_facts(record, sampler.written, load_node_series(paths.node_telemetry, record.node_names))
    if plan.workload.compliance:  # else it opted out: it implements no MLPerf benchmark's rules
        record = compliance.check_seed(record, paths.output, profile=plan.profile.name, goal=plan.goal,
                                       reference_target=plan.workload.quality.target, ruleset=plan.ruleset,
                                       synthetic_data=plan.profile.dataset.source == "synthetic")
    run.save_seed(SeedState(seed=seed, state=SeedStateName.FINISHED, status=record.status, started_at=started_at,
                            ended_at=now_iso()), record)


def with_host_facts(record: RunRecord, series: dict[str, Any] | None, nodes: Mapping[str, NodeSeries]) -> RunRecord:
    """The record with its host's verdict and its energy. Where its nodes sampled themselves (a batch
    system ran it: `insight.node_telemetry`, ``nodes``), each node is judged on its own series (its
    verdict kept beside its facts in the record's placement), the seed's verdict is theirs and its
    energy their sum; else this host's series (``series``) gives both."""
    start, stop = record.run_start_ms, record.run_stop_ms
    energy = seed_energy(series, start, stop, nodes)
    if not nodes:
        return record.model_copy(update={"quiet_host": quiet.judge(series, start, stop), "energy": energy})
    judged = quiet.node_evidence(nodes, start, stop)
    if record.placement is not None:
        placed = tuple(n.model_copy(update={"quiet_host": judged.get(n.name)}) for n in record.placement.nodes)
        record = record.model_copy(update={"placement": record.placement.model_copy(update={"nodes": placed})})
    return record.model_copy(update={"quiet_host": quiet.judge_nodes(judged), "energy": energy})


def archive_attempt(run: StoredRun, seed: SeedPaths) -> None:
    """Move what an earlier attempt of a seed left (unfinished, or retried) into ``attempt-<n>/``
    with a copy of its state, so that nothing is lost and the rerun starts clean. The record goes
    last: until it has moved, the seed still reads as what it was."""
    leftovers = [p for p in seed.attempt_files if p.exists() or p.is_symlink()]
    if not leftovers:
        return
    n = 1
    while seed.attempt(n).exists() or seed.attempt(n).is_symlink():
        n += 1
    target = seed.attempt(n)
    with atomic.writing(target):
        target.mkdir()
        if seed.state.is_file():
            shutil.copy2(seed.state, target / seed.state.name)
    for path in sorted(leftovers, key=lambda p: p == seed.record):
        atomic.move(path, target / path.name)
    run.forget_record(seed.seed)


def close_unfinished(run: StoredRun, state: RunState) -> list[int]:
    """Mark the seeds still running as interrupted and close the manifest in ``state``; return them."""
    stopped = []
    for seed, seed_state in sorted(run.states.items()):
        if seed_state.state is not SeedStateName.RUNNING:
            continue
        if seed in run.records:  # stopped between writing its record and its state: it had finished
            run.save_seed(finished_state(seed, seed_state, run.records[seed]))
            continue
        run.save_seed(seed_state.model_copy(update={"state": SeedStateName.INTERRUPTED, "ended_at": now_iso()}))
        stopped.append(seed)
    run.save_manifest(run.manifest.model_copy(update={"state": state, "ended_at": now_iso()}))
    return stopped


def interrupted(run: StoredRun | None, plan: BenchmarkPlan, signum: int) -> Interrupted:
    """Record a stopped run (its running seeds interrupted, its manifest closed) and say how to resume."""
    name = signal.Signals(signum).name
    if run is None:
        return Interrupted(f"interrupted by {name} before the run was stored", signum)
    stopped = close_unfinished(run, "interrupted")
    what = f"seed {', '.join(map(str, stopped))} stopped; " if stopped else ""
    return Interrupted(f"interrupted by {name}: {what}finished seeds are kept; complete the set with"
                       f" `{resume_command(run)}`", signum)


def close_after_error(run: StoredRun, status: Callable[[str], None]) -> None:
    """After an error the run is left closed and resumable, never 'running' (best effort: the error
    may be a full disk, and the error itself is what the user must see)."""
    with contextlib.suppress(Exception):
        close_unfinished(run, "incomplete")
    status(f"run {run.run_id} stopped; once that is fixed, complete it with `{resume_command(run)}`")


def finish(run: StoredRun) -> tuple[StoredRun, Score]:
    """Score the run, write its summary, close its manifest. For an mlperf-profile run or an import
    (whatever its profile: an mltrain export keeps its run's), MLCommons' own tools are run on its
    source (`orchestrator.mlperf.parity`); their verdict and the RCP scaling factor are kept beside
    our score."""
    mlcommons = None
    if (run.manifest.profile == MLPERF or run.manifest.imported is not None) and not run.unfinished_seeds():
        mlcommons = parity.check(run)
    score = score_run(run, mlcommons)
    run.save_summary(summary_of(run, score, mlcommons))
    state = "finished" if not score.unfinished else "incomplete"
    run.save_manifest(run.manifest.model_copy(update={"ended_at": now_iso(), "state": state}))
    return run, score
