"""``mltrain sysinfo``: what this machine is (host, GPUs, dataset storage, container engine), and
optionally its MLCommons training system description."""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.commands.common import JSON_OPTION, output
from orchestrator.config.reading import not_a_folder
from orchestrator.errors import UsageError


def register(app: typer.Typer) -> None:
    app.command("sysinfo", short_help="Show the host, its GPUs, storage and container engine.")(show_sysinfo)


def show_sysinfo(
    ctx: typer.Context,
    data: Path = typer.Option(None, "--data", help="Dataset folder whose storage to describe (default: none)."),
    system_desc_dir: Path = typer.Option(
        None, "--system-desc", help="Write an MLCommons system description <FOLDER>/<system-name>.json."
    ),
    system_name: str = typer.Option(None, "--system-name", help="System name (default: <host>_<n>x<gpu>)."),
    submitter: str = typer.Option("mltrain", "--submitter", help="Submitter written in the system description."),
    division: str = typer.Option("open", "--division", help="open or closed."),
    status: str = typer.Option(
        "Research, Development, or Internal (RDI)", "--status", help="Availability, as MLCommons names it."
    ),
    record_gpu_trace: Path = typer.Option(
        None, "--record-gpu-trace", help="Record live NVML readings to this JSON file (for tests elsewhere)."
    ),
    samples: int = typer.Option(30, "--samples", min=1, metavar="N",
        help="Readings to record with --record-gpu-trace."),
    interval_s: float = typer.Option(1.0, "--interval", min=0.05, metavar="SECONDS",
        help="Seconds between recorded readings."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show the host, every GPU (through NVML), the dataset storage and the container engine."""
    from orchestrator.insight import gpu_trace, sysinfo
    from orchestrator.mlperf import benchmarks, system_desc

    out = output(ctx)
    from orchestrator.config.locations import default_results_dir
    from orchestrator.results.outputs import check_output_file, check_output_folder

    store = default_results_dir()
    if record_gpu_trace is not None:
        check_output_file(record_gpu_trace, option="--record-gpu-trace", results=store)
    if system_desc_dir is not None:
        check_output_folder(system_desc_dir, option="--system-desc", results=store)
    if record_gpu_trace is not None:
        gpu_trace.record_trace_file(record_gpu_trace, samples, interval_s, out.status)
        if as_json:
            out.json({"file": str(record_gpu_trace), "samples": samples})
        else:
            out.data(str(record_gpu_trace))
        return
    if data is not None and (wrong := not_a_folder(data)) is not None:
        raise UsageError(f"--data {data}: {wrong}")
    system = sysinfo.capture(data)
    if system_desc_dir is not None:
        name = system_desc.safe_name(system_name) if system_name else system_desc.default_system_name(system)
        description = system_desc.system_description(
            system, submitter=submitter, system_name=name, division=division, status=status
        )
        path = system_desc.write_checked(system_desc_dir / f"{name}.json", description,
                                         benchmarks.latest_ruleset())
        out.status(f"system description written to {path} (system_desc_checker: passed)")
    if as_json:
        out.json(system)
        return
    for line in sysinfo.describe_lines(system):
        out.data(line)
