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
from orchestrator.config.reading import not_a_folder
from orchestrator.errors import UsageError
from orchestrator.output import Output

if TYPE_CHECKING:
    from orchestrator.config.workloads import Workload
    from orchestrator.qualify.config import ChosenSuite
    from orchestrator.qualify.expected import Expected
    from orchestrator.qualify.fleet import FleetPlan
    from orchestrator.qualify.node import NodePlan
    from orchestrator.qualify.references import OperatorReferences
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
    out = output(ctx)
    chosen, workload = _choose(suite)
    data = _data_folder(data)
    outputs = Outputs(junit=junit, prometheus=prometheus)
    folder = _checked_results(results, outputs, references)
    if runner is RunnerName.slurm:
        from orchestrator.qualify.fleet import FleetPlan
        from orchestrator.runners.slurm import SlurmOptions

        SlurmOptions(gpus=gpus)  # a --gpus Slurm cannot carry stops here, before a job is submitted
        loaded = _references(out, references, chosen)  # bad input stops here
        plan = FleetPlan(suite_name=chosen.name, nodes=nodes or "all", partition=partition, gpus=gpus,
                         references=references.resolve() if references else None, data=data,
                         policy=chosen.config.fleet, strict=strict, warn_exit_code=chosen.config.warn_exit_code,
                         suite=chosen.suite, probe=chosen.config.probe, checks=chosen.checks,
                         expect_gpus=expect_gpus)
        _fleet(out, plan, workload, loaded, folder, outputs, as_json)
        return
    if nodes or partition:
        raise UsageError("--nodes and --partition pick Slurm nodes: add --runner slurm")
    plan = _node_plan(out, chosen, workload, node=node_name, data=data, references=references, strict=strict,
                      gpus=gpus, expected=_expected(expect_gpus))
    _node(out, plan, runner, base_image, folder, outputs, as_json)


def order(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="The fleet's order to this node (qualify/fleet/<id>/<node>/order.json)."),
) -> None:
    """A fleet's node job: qualify this node as the fleet's order says, and write the record where it asks."""
    from orchestrator.results.qualifications import load_order

    o = load_order(path)
    out = output(ctx)
    chosen, workload = _choose(o.suite)
    data = _data_folder(o.data)
    outputs = Outputs(record=o.record)
    folder = _checked_results(o.results, outputs, o.references, order=path)
    plan = _node_plan(out, chosen, workload, node=o.node, data=data, references=o.references,
                      strict=o.strict, gpus=o.gpus, expected=_expected(o.expect_gpus, o.expect_gpus_source))
    _node(out, plan, RunnerName.local, None, folder, outputs, False)


@dataclass(frozen=True, kw_only=True)
class Outputs:
    """The files a qualification writes besides the store, each checked before anything runs."""

    junit: Path | None = None
    prometheus: Path | None = None
    record: Path | None = None
    """The record, for its fleet: a fleet's node job (`order`)."""


def _choose(name: str) -> tuple[ChosenSuite, Workload]:
    """``--suite`` resolved once: the checks built once, qualify.yaml read and checked once, the suite and
    its workload found (an unknown one is bad input, found now)."""
    from orchestrator.qualify.catalog import default_registry
    from orchestrator.qualify.config import choose_suite, qualify_file
    from orchestrator.qualify.inference import check_suites

    chosen = choose_suite(name, default_registry())
    check_suites(chosen.config, registry().roots, str(qualify_file()))  # an unknown model is bad input, found now
    return chosen, registry().get(chosen.workload)


def _expected(count: int | None, source: str = "") -> Expected:
    """The GPUs the node is expected to have: --expect-gpus (or the fleet's order, saying why); none given:
    its history says, or nobody."""
    from orchestrator.qualify.expected import Expected

    return Expected(count=count, source=source or f"--expect-gpus {count}") if count is not None else Expected()


def _data_folder(data: Path | None) -> Path | None:
    """--data, resolved (not a folder: bad input)."""
    if data is not None and (wrong := not_a_folder(data)) is not None:
        raise UsageError(f"--data {data}: {wrong}")
    return data.resolve() if data is not None else None


def _checked_results(results: Path | None, outputs: Outputs, references: Path | None, order: Path | None = None
                     ) -> Path:
    """The results folder; every output file checked now: a path that cannot be written fails before the
    qualification (the order's record is the fleet's own: its node jobs leave it in the store, on purpose)."""
    from orchestrator.qualify.config import qualify_file
    from orchestrator.results.outputs import check_distinct, check_output_file

    folder = results_dir(results)
    named = {"--junit": (outputs.junit, folder), "--prometheus": (outputs.prometheus, folder),
             "the order's record": (outputs.record, None)}
    for flag, (given, store) in named.items():
        if given is not None:
            check_output_file(given, option=flag, results=store)
    check_distinct({flag: given for flag, (given, _) in named.items()},
                   {"the qualify.yaml in use": qualify_file(), "--references": references, "the fleet's order": order})
    return folder


def _references(out: Output, path: Path | None, chosen: ChosenSuite) -> OperatorReferences | None:
    """--references, loaded once; a metric no check measures is warned of."""
    from orchestrator.qualify.references import load_references, unmatched_metrics

    references = load_references(path) if path else None
    for warning in unmatched_metrics(references, chosen.checks.declarations) if references else []:
        out.warning(warning)
    return references


def _node_plan(out: Output, chosen: ChosenSuite, workload: Workload, *, node: str | None, data: Path | None,
               references: Path | None, strict: bool, gpus: str | None, expected: Expected) -> NodePlan:
    from orchestrator.commands.common import seeds_file
    from orchestrator.config.profiles import load_profiles
    from orchestrator.qualify.node import NodePlan, default_node_name
    from orchestrator.results.paths import check_node_name

    suite = chosen.suite
    loaded = _references(out, references, chosen)
    return NodePlan(
        node=check_node_name(node or default_node_name()), checks=chosen.checks, suite_name=chosen.name,
        suite=suite, config=chosen.config, workload=workload, data=data,
        references=loaded, strict=strict, expect_gpus=expected,
        profiles=load_profiles(seeds_file()) if suite.wants("time_to_train") else None, gpus=gpus,
        inference_roots=tuple(registry().roots) if suite.wants("inference") else (),
    )


def _node(out: Output, plan: NodePlan, runner: RunnerName, base_image: str | None, folder: Path, outputs: Outputs,
          as_json: bool) -> None:
    from orchestrator.insight.gpus import gpu_count
    from orchestrator.qualify.node import Watch, qualify_node
    from orchestrator.qualify.references import unmatched_models
    from orchestrator.results.outputs import write_output
    from orchestrator.runners.select import RunnerOptions, make_runner

    default = "all" if gpu_count() else "none"  # a GPU node is qualified on its GPUs, whatever the runner
    backend = make_runner(RunnerOptions(name=runner.value, gpus=plan.gpus, default_gpus=default,
                                        base_image=base_image), out.status)
    result = qualify_node(plan, backend, folder, Watch(status=out.status, detail=out.detail))
    for warning in unmatched_models(plan.references, [result.hardware]) if plan.references else []:
        out.warning(warning)
    _write_outputs(out, [result], outputs.junit, outputs.prometheus)
    if outputs.record is not None:
        write_output(outputs.record, json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n",
                     option="the order's record")
    _show(out, result, folder, as_json)
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def _fleet(out: Output, plan: FleetPlan, workload: Workload, references: OperatorReferences | None, folder: Path,
           outputs: Outputs, as_json: bool) -> None:
    from orchestrator.qualify.fleet import qualify_fleet
    from orchestrator.qualify.references import unmatched_models
    from orchestrator.render.qualification import fleet_lines, fleet_table

    fleet, records = qualify_fleet(plan, workload, folder.resolve(), out.status)
    for warning in unmatched_models(references, [r.hardware for r in records]) if references and records else []:
        out.warning(warning)
    _write_outputs(out, records, outputs.junit, outputs.prometheus)
    if as_json:
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
