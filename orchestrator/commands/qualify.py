"""``mltrain qualify``: one honest verdict per node (health, microbenchmarks, workload throughput),
fleet-wide on Slurm; ``mltrain qualify history``: the stored verdicts and a metric's trend."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from orchestrator.commands.common import (
    JSON_OPTION,
    RESULTS_OPTION,
    RUNNERS_SAID,
    WIDE_OPTION,
    RunnerName,
    output,
    registry,
    results_dir,
)
from orchestrator.errors import UsageError
from orchestrator.output import Output

if TYPE_CHECKING:
    from orchestrator.config.workloads import Workload
    from orchestrator.qualify.checks.registry import Registry
    from orchestrator.qualify.config import QualifyConfig
    from orchestrator.results.qualification import QualificationRecord


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Qualify this node (or every Slurm node): health, microbenchmarks, throughput.")
    group.callback(invoke_without_command=True)(qualify)
    group.command("history")(history)
    group.command("order", hidden=True)(order)
    app.add_typer(group, name="qualify", short_help="Qualify this node or every Slurm node.")


def qualify(
    ctx: typer.Context,
    suite: str = typer.Option("quick", "--suite", help="quick (nightly) or full (adds a time-to-train seed)."),
    runner: RunnerName = typer.Option(RunnerName.local, "--runner",
                                      help=f"Where the checks run (slurm: per node): {RUNNERS_SAID}."),
    nodes: str = typer.Option(None, "--nodes", help="Slurm: all, or a hostlist such as node[01-04]."),
    partition: str = typer.Option(None, "--partition", help="Slurm: the partition whose nodes are qualified."),
    references: Path = typer.Option(None, "--references", help="Operator references (YAML, ReFrame style)."),
    data: Path = typer.Option(None, "--data", help="Dataset folder: its storage and input pipeline are timed."),
    junit: Path = typer.Option(None, "--junit", help="Write JUnit XML here (one testcase per check)."),
    prometheus: Path = typer.Option(None, "--prometheus", help="Write a node_exporter textfile (.prom) here."),
    strict: bool = typer.Option(False, "--strict", help="WARN exits 1, as FAIL does (else 4, or qualify.yaml's"
                                " warn_exit_code)."),
    gpus: str = typer.Option(None, "--gpus", help="all, N, 0,1 or none (Slurm: N or none). Default: every GPU"
                             " of the node (local: what this shell sees; Docker: all; Slurm: each node's own)."),
    base_image: str = typer.Option(None, "--base-image", help="Docker: BASE_IMAGE of the workload image."),
    node_name: str = typer.Option(None, "--node-name", help="Name this node's records (default: the host name)."),
    expect_gpus: int = typer.Option(None, "--expect-gpus", min=0, metavar="N",
                                    help="The GPUs this node (Slurm: each node) has: fewer found FAILs; 0: a CPU-only"
                                    " node, which may PASS. Default: its history (Slurm: its gres); none found without"
                                    " either is a WARN."),
    results: Path = RESULTS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Qualify this node, or with --runner slurm every node. Exit codes: PASS 0, FAIL 1, bad input 2,
    INCONCLUSIVE 3, WARN 4 (INCONCLUSIVE: could not measure; a WARN exits 1 with --strict, 0 where
    qualify.yaml sets warn_exit_code: 0)."""
    if ctx.invoked_subcommand is not None:
        return
    _qualify(output(ctx), Asked(
        suite=suite, runner=runner, nodes=nodes, partition=partition, references=references, data=data, junit=junit,
        prometheus=prometheus, strict=strict, gpus=gpus, base_image=base_image, node_name=node_name, results=results,
        as_json=as_json, expect_gpus=expect_gpus,
    ))


def order(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="The fleet's order to this node (qualify/fleet/<id>/<node>/order.json)."),
) -> None:
    """A fleet's node job: qualify this node as the fleet's order says, and write the record where it asks."""
    from orchestrator.results.qualifications import load_order

    o = load_order(path)
    _qualify(output(ctx), Asked(
        suite=o.suite, runner=RunnerName.local, nodes=None, partition=None, references=o.references, data=o.data,
        junit=None, prometheus=None, strict=o.strict, gpus=o.gpus, base_image=None, node_name=o.node,
        results=o.results, as_json=False, record=o.record, order=path, expect_gpus=o.expect_gpus,
        expect_source=o.expect_gpus_source,
    ))


def _qualify(out: Output, asked: Asked) -> None:
    from orchestrator.qualify.checks.registry import default_registry
    from orchestrator.qualify.config import load_config, qualify_file
    from orchestrator.qualify.inference import check_suites

    config = load_config()
    checks = default_registry()  # the checks there are, for every plan below
    suite = config.suite(asked.suite)
    check_suites(config, registry().roots, str(qualify_file()))  # an unknown model is bad input, found now
    name = suite.workload or config.workload
    if name is None:
        raise UsageError("qualify.yaml names no workload: set `workload:` (whose throughput mode is timed)")
    workload = registry().get(name)
    if asked.data is not None and not asked.data.is_dir():
        raise UsageError(f"--data {asked.data}: not a folder")
    folder = results_dir(asked.results)
    from orchestrator.results.outputs import check_distinct, check_output_file

    # checked now: a path that cannot be written fails before the qualification (the order's record is
    # the fleet's own: its node jobs leave it in the store, on purpose)
    outputs = {"--junit": (asked.junit, folder), "--prometheus": (asked.prometheus, folder),
               "the order's record": (asked.record, None)}
    for flag, (given, store) in outputs.items():
        if given is not None:
            check_output_file(given, option=flag, results=store)
    check_distinct({flag: given for flag, (given, _) in outputs.items()},
                   {"the qualify.yaml in use": qualify_file(), "--references": asked.references,
                    "the fleet's order": asked.order})
    if asked.runner is RunnerName.slurm:
        _fleet(out, asked, config, checks, workload, folder)
    elif asked.nodes or asked.partition:
        raise UsageError("--nodes and --partition pick Slurm nodes: add --runner slurm")
    else:
        _node(out, asked, config, checks, workload, folder)


@dataclass(frozen=True, kw_only=True)
class Asked:
    """The options of one `mltrain qualify`, as given."""

    suite: str
    runner: RunnerName
    nodes: str | None
    partition: str | None
    references: Path | None
    data: Path | None
    junit: Path | None
    prometheus: Path | None
    strict: bool
    gpus: str | None
    """As given; None: the node's GPUs (every runner's default for a qualification)."""
    base_image: str | None
    node_name: str | None
    results: Path | None
    as_json: bool
    record: Path | None = None
    """Also write the record here: a fleet's node job (`order`), whose fleet gathers it."""
    order: Path | None = None
    """The fleet's order file this node job reads (`order`)."""
    expect_gpus: int | None = None
    """--expect-gpus (a fleet's order: the node's Slurm gres); None: the node's history says, or nothing."""
    expect_source: str = ""
    """What says so, where it is not --expect-gpus (a fleet's order)."""


def _node(out: Output, asked: Asked, config: QualifyConfig, checks: Registry, workload: Workload, folder: Path
          ) -> None:
    from orchestrator.commands.common import seeds_file
    from orchestrator.config.profiles import load_profiles
    from orchestrator.insight.gpus import gpu_count
    from orchestrator.qualify.expected import Expected
    from orchestrator.qualify.node import NodePlan, Watch, default_node_name, qualify_node
    from orchestrator.qualify.references import load_references, unmatched_metrics, unmatched_models
    from orchestrator.results.outputs import write_output
    from orchestrator.results.paths import check_node_name
    from orchestrator.runners.select import RunnerOptions, make_runner

    suite = config.suite(asked.suite)
    references = load_references(asked.references) if asked.references else None
    for warning in unmatched_metrics(references, checks.declarations) if references else []:
        out.warning(warning)
    plan = NodePlan(
        node=check_node_name(asked.node_name or default_node_name()), suite_name=asked.suite, suite=suite,
        config=config, workload=workload, data=asked.data.resolve() if asked.data else None,
        references=references, strict=asked.strict, checks=checks,
        expect_gpus=Expected(count=asked.expect_gpus,
                             source=asked.expect_source or f"--expect-gpus {asked.expect_gpus}")
        if asked.expect_gpus is not None else Expected(),
        profiles=load_profiles(seeds_file()) if suite.time_to_train is not None else None, gpus=asked.gpus,
        inference_roots=tuple(registry().roots) if suite.wants("inference") else (),
    )
    default = "all" if gpu_count() else "none"  # a GPU node is qualified on its GPUs, whatever the runner
    backend = make_runner(RunnerOptions(name=asked.runner.value, gpus=asked.gpus, default_gpus=default,
                                        base_image=asked.base_image), out.status)
    result = qualify_node(plan, backend, folder, Watch(status=out.status, detail=out.detail))
    for warning in unmatched_models(references, [result.hardware]) if references else []:
        out.warning(warning)
    _write_outputs(out, [result], asked.junit, asked.prometheus)
    if asked.record is not None:
        write_output(asked.record, json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n",
                     option="the order's record")
    _show(out, result, folder, asked.as_json)
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def _fleet(out: Output, asked: Asked, config: QualifyConfig, checks: Registry, workload: Workload, folder: Path
           ) -> None:
    from orchestrator.qualify.fleet import FleetPlan, qualify_fleet
    from orchestrator.qualify.references import load_references, unmatched_metrics, unmatched_models
    from orchestrator.render.qualification import fleet_lines, fleet_table
    from orchestrator.runners.slurm import SlurmOptions

    SlurmOptions(gpus=asked.gpus)  # a --gpus Slurm cannot carry stops here, before a job is submitted
    references = load_references(asked.references) if asked.references else None  # bad input stops here
    for warning in unmatched_metrics(references, checks.declarations) if references else []:
        out.warning(warning)
    plan = FleetPlan(suite_name=asked.suite, nodes=asked.nodes or "all", partition=asked.partition, gpus=asked.gpus,
                     references=asked.references.resolve() if asked.references else None,
                     data=asked.data.resolve() if asked.data else None, policy=config.fleet, strict=asked.strict,
                     warn_exit_code=config.warn_exit_code, suite=config.suite(asked.suite), probe=config.probe,
                     checks=checks, expect_gpus=asked.expect_gpus)
    fleet, records = qualify_fleet(plan, workload, folder.resolve(), out.status)
    for warning in unmatched_models(references, [r.hardware for r in records]) if references and records else []:
        out.warning(warning)
    _write_outputs(out, records, asked.junit, asked.prometheus)
    if asked.as_json:
        out.json({"fleet": fleet.to_json(), "nodes": [r.to_json() for r in records]})
    else:
        out.table(fleet_table(fleet))
        out.lines(fleet_lines(fleet))
    if fleet.exit_code:
        raise typer.Exit(fleet.exit_code)


def _write_outputs(
    out: Output, records: list[QualificationRecord], junit: Path | None, prometheus: Path | None,
) -> None:
    from orchestrator.results.outputs import write_output

    if junit is not None:
        from orchestrator.render.junit import junit_xml

        write_output(junit, junit_xml(records), option="--junit")
        out.status(f"JUnit XML written to {junit}")
    if prometheus is not None:
        from orchestrator.render.prometheus import textfile

        write_output(prometheus, textfile(records), option="--prometheus")
        out.status(f"Prometheus textfile written to {prometheus}")


def _show(out: Output, record: QualificationRecord, folder: Path, as_json: bool) -> None:
    from orchestrator.render.qualification import summary_table, verdict_lines
    from orchestrator.results.store import Store

    if as_json:
        out.json(record.to_json())
        return
    out.table(summary_table(record))
    path = Store(folder).qualifications.record_path(record)
    for line in verdict_lines(record, str(path) if path.is_file() else None):  # not saved: not named
        out.prose(line)


def history(
    ctx: typer.Context,
    node: str = typer.Option(None, "--node", help="Only this node."),
    metric: str = typer.Option(None, "--metric", help="Show this metric's trend with its bounds."),
    html: Path = typer.Option(None, "--html", help="Write an HTML report of the history (trend per metric)."),
    last: int = typer.Option(50, "--last", min=1, metavar="N", help="At most this many, newest last."),
    results: Path = RESULTS_OPTION,
    wide: bool = WIDE_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """The stored qualifications (of one node), oldest first."""
    from orchestrator.render.qualification import history_table
    from orchestrator.results.paths import check_node_name
    from orchestrator.results.store import Store

    out = output(ctx)
    folder = results_dir(results, write=False)
    if html is not None:
        from orchestrator.results.outputs import check_output_file

        check_output_file(html, option="--html", results=folder)
    store = Store(folder).qualifications
    if node is not None and check_node_name(node) not in store.nodes():
        known = ", ".join(store.nodes()) or "none"
        raise UsageError(f"no qualification of node {node!r} (nodes: {known})")
    found = store.history(node)
    records = found.records[-last:]
    if html is not None:
        from orchestrator.render.qualification_report import qualification_page
        from orchestrator.results.outputs import write_output

        write_output(html, qualification_page(records), option="--html")
        out.status(f"qualification history of {len(records)} run(s) written to {html}")
    if as_json:
        out.json([r.to_json() for r in records])
    else:
        fitted = history_table(records, metric, width=None if wide else out.out.width)
        out.table(fitted.table, width=fitted.width)
        if fitted.note():
            out.prose(fitted.note())
    for problem in found.broken:  # as `mltrain list` does: the good ones shown, the damaged named, exit 2
        out.error(problem)
    if found.broken:
        from orchestrator.errors import EXIT_USAGE

        raise typer.Exit(EXIT_USAGE)
