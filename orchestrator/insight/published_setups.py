"""Published MLPerf results (`orchestrator.mlperf.published`) as comparison setups, beside the user's
or on their own: each query stands for one published result (`published.representative`), and a
sentence says which and why."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.config.profiles import MLPERF
from orchestrator.errors import UsageError
from orchestrator.insight.compare import SeedResult, Setup
from orchestrator.insight.setup_facts import published_facts
from orchestrator.mlperf import benchmarks, published
from orchestrator.units import ms_from_minutes

AUTO = "auto"
"""`--published auto`: the published systems like each of the user's setups."""
NOT_RUN_HERE = "not judged: published by MLCommons, not run here"


def published_setup(system: published.PublishedSystem) -> Setup:
    """A published result as a setup: its converged runs' times and epochs, its non-converged
    count, its scaling factor; labelled as published."""
    per_epoch = benchmarks.get(system.benchmark).train_samples
    seeds = [SeedResult(seed=i, converged=True, time_to_train_ms=ms_from_minutes(minutes),
                        epochs_to_target=epochs or None, samples_per_epoch=per_epoch, host_reason=NOT_RUN_HERE)
             for i, (minutes, epochs) in enumerate(zip(system.run_minutes, system.run_epochs, strict=True))]
    seeds += [SeedResult(seed=len(seeds) + i, converged=False, time_to_train_ms=None, host_reason=NOT_RUN_HERE)
              for i in range(system.nonconverged)]
    return Setup(
        name=f"published {system.name}", seeds=tuple(seeds), drop_per_end=system.drop_per_end,
        max_non_converged=system.drop_per_end, hardware=system.hardware,
        run_ids=(f"MLCommons training_results_{system.round}/{system.submitter}/results/{system.system}"
                 f"/{system.benchmark}",),
        scaling_factor=system.scaling_factor, benchmark=system.benchmark, accelerator=system.accelerator,
        accelerators=system.accelerators, published=True, profile=MLPERF,
        facts=published_facts(system.accelerator, system.accelerators),
    )


def published_beside(setups: Sequence[Setup], queries: Sequence[str] | str, *,
                     table: Sequence[published.PublishedSystem] | None = None) -> tuple[list[Setup], list[str]]:
    """Published results to place beside the user's setups (or alone, where there are none), and a
    sentence per query saying which result it used and why: each query is
    BENCHMARK[:ACCELERATOR-OR-SYSTEM[:COUNT]][@ROUND], or ``auto`` for the systems like each setup
    (its benchmark, accelerator family and count)."""
    systems = published.load() if table is None else list(table)
    parsed: list[published.Query] = []
    for query in [queries] if isinstance(queries, str) else queries:
        parsed += [published.parse_query(query)] if query != AUTO else _auto_queries(setups)
    chosen: dict[str, Setup] = {}
    sentences = []
    for one in dict.fromkeys(parsed):
        system, sentence = published.representative(systems, one)
        sentences.append(sentence)
        if system is not None:
            setup = published_setup(system)
            chosen.setdefault(setup.name, setup)
    return list(chosen.values()), sentences


def _auto_queries(setups: Sequence[Setup]) -> list[published.Query]:
    own = [setup for setup in setups if not setup.published]
    if not own:
        raise UsageError("--published auto finds the published systems like your runs: name a run or a --label,"
                         " or name the systems, e.g. --published unet3d:H100:8@4.0")
    queries = []
    for setup in own:
        shipped = benchmarks.with_published_results()
        if setup.benchmark not in shipped:
            raise UsageError(f"--published auto: setup {setup.name!r} runs {setup.benchmark!r}, which has no"
                             f" published results here (the table holds {', '.join(shipped)})")
        family = published.accelerator_class(setup.accelerator) or setup.accelerator
        if family is None:
            raise UsageError(f"--published auto: setup {setup.name!r} ran on a CPU; name what to compare with,"
                             " e.g. --published unet3d:H100:8")
        query = published.Query(setup.benchmark, family, setup.accelerators)
        if query not in queries:
            queries.append(query)
    return queries
