"""Find, make and prepare a workload's dataset through the workload's own dataset command line.

The commands run where the workload's seeds run (`Runner.dataset_command`): on this host, in a
helper container of the workload's image, or on a Slurm node. So a host with only the
orchestrator installed can run a containerized workload from raw data.

    synthesize OUT [profile args]      the smoke profile's synthetic set, made once in the cache
    prepare SRC --cache DIR [args]     prints the training-ready folder: SRC itself when it is
                                       ready; else what the workload made of it under DIR (raw
                                       KiTS19 preprocessed once, cached by content)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.config.locations import data_cache_dir
from orchestrator.config.profiles import Profile
from orchestrator.config.reading import not_a_folder
from orchestrator.config.workloads import Workload
from orchestrator.errors import ConfigError, DataError
from orchestrator.runners.base import DatasetArg, DatasetResult, HostPath, Runner
from orchestrator.runners.jobs import dataset_command

READY_MARKER = ".mltrain-ready"
SYNTHETIC_PREFIX = "synthetic-"
PREPARE_TIMEOUT_S = 2 * 24 * 3600
"""Preparing the full raw dataset (KiTS19: 29 GB preprocessed) may take hours on a small host."""
SYNTHESIZE_TIMEOUT_S = 6 * 3600


@dataclass(frozen=True, kw_only=True)
class PreparedData:
    """The training-ready folder of a run, and where it came from (for the manifest)."""

    folder: Path
    """What the seeds read (mounted at /data in a container)."""
    given: Path
    """The folder the user gave (or the profile's synthetic one)."""
    where: str
    """Where the dataset commands ran."""

    def provenance(self) -> dict[str, Any]:
        return {"given": str(self.given), "prepared": str(self.folder), "prepared_where": self.where}


def synthetic_dir(workload: Workload, profile: Profile) -> Path:
    """Where a profile's synthetic dataset lives: one folder per distinct set of arguments and
    version of the code that makes it (the contents of the files the workload's ``data.code``
    names), so that data made by older dataset code is made again, never silently reused."""
    digest = hashlib.sha256("\0".join(profile.dataset.args).encode())
    for path in workload.data_code():
        digest.update(f"\0{path.relative_to(workload.folder).as_posix()}\0".encode())
        try:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read this file of {workload.name}'s dataset code (data.code):"
                              f" {exc.strerror or exc}") from None
    return data_cache_dir() / workload.name / f"{SYNTHETIC_PREFIX}{digest.hexdigest()[:12]}"


def is_synthetic_dir(workload: Workload, folder: Path) -> bool:
    """``folder`` is one of the workload's synthetic datasets (made by whatever version of its code)."""
    return folder.parent == data_cache_dir() / workload.name and folder.name.startswith(SYNTHETIC_PREFIX)


def prepared_cache_dir(workload: Workload) -> Path:
    """The ``--cache`` folder of ``prepare``: what the workload makes of raw data stays there."""
    return data_cache_dir() / workload.name / "prepared"


def resolve_data_dir(workload: Workload, profile: Profile, given: Path | None) -> Path:
    """The folder the run starts from: the user's, else the profile's synthetic one."""
    if given is not None:
        if (wrong := not_a_folder(given)) is not None:
            how = workload.data.how_to_get.strip()
            raise DataError(f"data folder {given}: {wrong}", details=f"How to get {workload.name}'s data:\n{how}"
                            if how else f"See `mltrain data {workload.name} --help`.")
        return given.resolve()
    if profile.dataset.source == "synthetic":
        folder = synthetic_dir(workload, profile)
        if not (folder / READY_MARKER).is_file():  # to be made: the cache must take it
            check_cache(folder.parent)
        return folder
    raise DataError(
        f"{workload.name} profile {profile.name!r} needs real data: pass --data DIR"
        f" (see `mltrain data {workload.name} how-to-get`), or use --profile smoke for synthetic data"
    )


def check_cache(folder: Path) -> None:
    """DataError, before anything runs, when mltrain's data cache cannot hold what it would make."""
    from orchestrator.errors import UsageError
    from orchestrator.results.outputs import check_output_folder

    try:
        check_output_folder(folder, option="data cache")
    except UsageError as exc:
        raise DataError(f"{exc} (the cache is $XDG_CACHE_HOME/mltrain, else ~/.cache/mltrain: point"
                        " XDG_CACHE_HOME at a writable folder)") from None


def prepare_data(
    workload: Workload, profile: Profile, folder: Path, runner: Runner, *, synthetic: bool,
    status: Callable[[str], None],
) -> PreparedData:
    """Make the profile's synthetic data when it is missing (``synthetic``), then ask the workload
    for the training-ready folder of ``folder``; both where the seeds run. DataError with the
    workload's one-line answer when the data cannot be used."""
    if synthetic and ensure_synthetic(workload, profile, folder, runner, status):
        status(f"synthetic {workload.name} data made in {folder}")
    ready, where = prepare(workload, profile, folder, runner, status)
    if ready != folder:
        status(f"{workload.name} data: {folder} is ready as {ready}")
    return PreparedData(folder=ready, given=folder, where=where)


def ensure_synthetic(
    workload: Workload, profile: Profile, folder: Path, runner: Runner, status: Callable[[str], None],
) -> bool:
    """Make the profile's synthetic dataset unless it is ready; True when it was made now."""
    if (folder / READY_MARKER).is_file():
        return False
    folder.parent.mkdir(parents=True, exist_ok=True)
    # synthesize stages its output beside OUT, so the parent is what must be writable.
    out = HostPath(path=folder, writable=True, mount=folder.parent)
    result = _call(runner, workload, ["synthesize", out, *profile.dataset.args], SYNTHESIZE_TIMEOUT_S, status)
    if result.returncode != 0:
        raise result.failure(f"making synthetic {workload.name} data")
    for line in result.stdout.splitlines():
        if line.strip():
            status(line.strip())
    return True


def prepare(
    workload: Workload, profile: Profile, folder: Path, runner: Runner, status: Callable[[str], None],
) -> tuple[Path, str]:
    """The training-ready folder the workload's ``prepare`` prints for ``folder`` (as this host
    sees it), and where the command ran. A real-data profile's dataset args go to ``prepare``."""
    cache = prepared_cache_dir(workload)  # made by the command only when it prepares something
    check_cache(cache)
    args = profile.dataset.args if profile.dataset.source == "real" else ()
    result = _call(
        runner, workload, ["prepare", HostPath(path=folder), "--cache", HostPath(path=cache, writable=True), *args],
        PREPARE_TIMEOUT_S, status,
    )
    if result.returncode != 0:
        raise DataError(f"{workload.name} data in {folder}: {result.last_line()}")
    printed = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    if not printed:
        raise DataError(f"{workload.name}: its dataset command `prepare {folder}` printed no folder")
    ready = result.host_path(printed[-1])
    if not ready.is_dir():
        raise DataError(f"{workload.name}: `prepare {folder}` printed {printed[-1]}, which is not a folder here")
    return ready, result.where


def _call(
    runner: Runner, workload: Workload, args: list[DatasetArg], timeout_s: float, status: Callable[[str], None],
) -> DatasetResult:
    lines = HeldBack(status)
    result = dataset_command(runner, workload, args, timeout_s=timeout_s, on_line=lines.add)
    if result.returncode == 0:
        lines.flush()
    return result


class HeldBack:
    """Passes a command's stderr lines on as status, one line late: the last line of a failed
    command is its error, which the DataError says once."""

    def __init__(self, status: Callable[[str], None]) -> None:
        self.status = status
        self.held: str | None = None

    def add(self, line: str) -> None:
        if self.held is not None:
            self.status(self.held)
        self.held = line.strip() or None

    def flush(self) -> None:
        if self.held is not None:
            self.status(self.held)
            self.held = None
