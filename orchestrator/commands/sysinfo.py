"""``mltrain sysinfo``: what this machine is (host, GPUs, dataset storage, container engine), and
optionally its MLCommons training system description."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import typer

from orchestrator.commands.common import JSON_OPTION
from orchestrator.errors import UsageError
from orchestrator.insight import gpus, sysinfo, telemetry
from orchestrator.mlperf import system_desc
from orchestrator.output import Output
from orchestrator.results import atomic


def register(app: typer.Typer) -> None:
    app.command("sysinfo")(show_sysinfo)


def show_sysinfo(
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
    samples: int = typer.Option(30, "--samples", min=1, help="Readings to record with --record-gpu-trace."),
    interval_s: float = typer.Option(1.0, "--interval", min=0.05, help="Seconds between recorded readings."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show the host, every GPU (through NVML), the dataset storage and the container engine."""
    out = Output()
    if record_gpu_trace is not None:
        record_trace(record_gpu_trace, samples, interval_s, out)
        return
    if data is not None and not data.exists():
        raise UsageError(f"--data {data}: no such folder")
    system = sysinfo.capture(data)
    if system_desc_dir is not None:
        name = system_desc.safe_name(system_name) if system_name else system_desc.default_system_name(system)
        description = system_desc.system_description(
            system, submitter=submitter, system_name=name, division=division, status=status
        )
        path = write_checked(system_desc_dir / f"{name}.json", description)
        out.status(f"system description written to {path} (system_desc_checker: passed)")
    if as_json:
        out.json(system)
        return
    for line in sysinfo.describe_lines(system):
        out.data(line)


def write_checked(path: Path, description: dict[str, str]) -> Path:
    """Write the description only if mlperf_logging's checker accepts it (checked on a temp file)."""
    if path.parent.exists() and not path.parent.is_dir():
        raise UsageError(f"--system-desc {path.parent}: not a folder")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(description, handle, indent=2, sort_keys=True)
            handle.write("\n")
        valid, log = system_desc.check_system_description(Path(tmp))
        if not valid:
            raise UsageError(f"system description rejected by mlperf_logging's system_desc_checker: {log}")
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path


def record_trace(path: Path, samples: int, interval_s: float, out: Output) -> None:
    """Record what the live sampler reads, in the format `telemetry.TraceGpuSource` replays."""
    source = telemetry.open_gpu_source()
    description = source.describe()
    if not description.get("available"):
        raise UsageError(f"cannot record a GPU trace: {description.get('reason')}")
    out.status(f"recording {samples} readings of {len(description['devices'])} GPU(s) every {interval_s:g} s")
    try:
        trace = telemetry.record_gpu_trace(source, samples, interval_s)
    finally:
        source.close()
    trace["gpus"] = gpus.gpu_info()
    atomic.write_json(path, trace)
    out.data(str(path))
