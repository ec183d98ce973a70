"""``mltrain sysinfo``: what this machine is (host, GPUs, dataset storage, container engine), and
optionally its MLCommons training system description."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import typer

from orchestrator import sysinfo
from orchestrator.commands.common import JSON_OPTION
from orchestrator.errors import UsageError
from orchestrator.output import Output


def register(app: typer.Typer) -> None:
    app.command("sysinfo")(show_sysinfo)


def show_sysinfo(
    data: Path = typer.Option(None, "--data", help="Dataset folder whose storage to describe (default: none)."),
    system_desc: Path = typer.Option(
        None, "--system-desc", help="Write an MLCommons system description <FOLDER>/<system-name>.json."
    ),
    system_name: str = typer.Option(None, "--system-name", help="System name (default: <host>_<n>x<gpu>)."),
    submitter: str = typer.Option("mltrain", "--submitter", help="Submitter written in the system description."),
    division: str = typer.Option("open", "--division", help="open or closed."),
    status: str = typer.Option(
        "Research, Development, or Internal (RDI)", "--status", help="Availability, as MLCommons names it."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show the host, every GPU (through NVML), the dataset storage and the container engine."""
    out = Output()
    if data is not None and not data.exists():
        raise UsageError(f"--data {data}: no such folder")
    system = sysinfo.capture(data)
    if system_desc is not None:
        name = sysinfo.safe_name(system_name) if system_name else sysinfo.default_system_name(system)
        description = sysinfo.system_description(
            system, submitter=submitter, system_name=name, division=division, status=status
        )
        path = write_checked(system_desc / f"{name}.json", description)
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
        valid, log = sysinfo.check_system_description(Path(tmp))
        if not valid:
            raise UsageError(f"system description rejected by mlperf_logging's system_desc_checker: {log}")
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path
