"""Folders of MLPerf result logs made elsewhere, as MLCommons publishes them:

    <root>/results/<system>/<benchmark>/result_<n>.txt   one log per run
    <root>/results/<system>/<benchmark>/scaling.json     the RCP scaling factor, when review set one
    <root>/systems/<system>.json                         the system description

or as NVIDIA's launch scripts name the logs before submission (``<DATESTAMP>_<N>.log``). A folder
is read and checked whole before anything is done with it: file names, run numbers, the
scaling factor and the system description; a problem is one line naming the file and what to do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from orchestrator.config.reading import SMALL_BYTES, check_regular, not_a_folder, read_json, read_regular
from orchestrator.errors import UsageError
from orchestrator.mlperf import checkers
from orchestrator.results.records import ExportedRun

RESULT_FILE = re.compile(r"^result_(\d+)\.txt$")
NVIDIA_LOG = re.compile(r"^(\d+)_(\d+)\.log$")
"""``<DATESTAMP>_<N>.log``: NVIDIA's run_with_docker.sh / Slurm scripts (DATESTAMP from date +%y%m%d%H%M%S%N)."""
MAX_RUN_NUMBER = 999_999
Naming = Literal["result", "nvidia"]


@dataclass(frozen=True)
class ResultFolder:
    """A benchmark folder of result logs and what MLCommons keeps beside it."""

    folder: Path
    """The folder holding the logs."""
    files: dict[int, Path]
    """Run number -> log (an mltrain export's: its run's seed -> log)."""
    naming: Naming
    system: str | None
    """``<system>`` when the folder sits at results/<system>/<benchmark>."""
    system_description: dict[str, Any] | None
    """systems/<system>.json, when present."""
    scaling_factor: float | None
    """scaling.json's factor, when present."""
    exported: ExportedRun | None = None
    """``mltrain.json``: the run these logs were exported from, when mltrain exported them."""


def locate(folder: Path, benchmark: str) -> Path:
    """The benchmark folder meant by ``folder``: itself when it holds logs, else its
    ``<benchmark>/`` (a system folder), else the one ``results/<system>/<benchmark>/`` below it
    (a submission folder)."""
    if (wrong := not_a_folder(folder)) is not None:
        raise UsageError(f"{folder}: {wrong}")
    if _logs(folder):
        return folder
    if (folder / benchmark).is_dir():
        return folder / benchmark
    if (folder / "results").is_dir():
        found = sorted(p for p in (folder / "results").glob(f"*/{benchmark}") if p.is_dir())
        if len(found) == 1:
            return found[0]
        if found:
            systems = ", ".join(p.parent.name for p in found[:5]) + (" ..." if len(found) > 5 else "")
            raise UsageError(f"{folder} holds {benchmark} results of {len(found)} systems ({systems}):"
                             f" import one, e.g. {found[0]}")
        raise UsageError(f"{folder}: no results/<system>/{benchmark}/ folder")
    raise UsageError(f"{folder}: no result_<n>.txt files (nor NVIDIA <DATESTAMP>_<N>.log files)")


def _logs(folder: Path) -> list[Path]:
    """The folder's logs, each a regular file: MLCommons' tools read every ``result_*.txt`` and the
    ``scaling.json`` of the folder, so one that is not (a FIFO blocked the import for good, deaf to
    Ctrl-C) is refused, never passed over."""
    logs = [p for p in folder.iterdir() if RESULT_FILE.match(p.name) or NVIDIA_LOG.match(p.name)]
    scaling = folder / "scaling.json"
    for path in [*logs, *([scaling] if scaling.exists() or scaling.is_symlink() else [])]:
        try:
            check_regular(path)
        except OSError as exc:
            raise UsageError(f"{path}: {exc.strerror or exc}: an import reads only regular files") from None
    return logs


def result_files(folder: Path) -> tuple[dict[int, Path], Naming]:
    """The folder's logs by run number; exit 2 on names that would collide or overflow."""
    logs = sorted(_logs(folder), key=lambda p: p.name)
    ours = [p for p in logs if RESULT_FILE.match(p.name)]
    nvidia = [p for p in logs if NVIDIA_LOG.match(p.name)]
    if not logs:
        raise UsageError(f"{folder}: no result_<n>.txt files (nor NVIDIA <DATESTAMP>_<N>.log files)")
    if ours and nvidia:
        raise UsageError(f"{folder} mixes result_<n>.txt and <DATESTAMP>_<N>.log files ({ours[0].name},"
                         f" {nvidia[0].name}): import them from separate folders")
    if ours:
        return _numbered([(_number(p, RESULT_FILE.match(p.name).group(1)), p) for p in ours]), "result"  # type: ignore[union-attr]
    runs = [(NVIDIA_LOG.match(p.name).groups(), p) for p in nvidia]  # type: ignore[union-attr]
    numbers = [_number(p, n) for (_, n), p in runs]
    if len(set(numbers)) == len(numbers):
        return _numbered(list(zip(numbers, (p for _, p in runs), strict=True))), "nvidia"
    ordered = sorted(runs, key=lambda r: (int(r[0][0]), int(r[0][1])))  # several launches: number them in order
    return {i: p for i, (_, p) in enumerate(ordered)}, "nvidia"


def _number(path: Path, digits: str) -> int:
    if len(digits.lstrip("0")) > 6 or int(digits) > MAX_RUN_NUMBER:
        raise UsageError(f"{path}: run number {digits[:20]}{'...' if len(digits) > 20 else ''} is too large"
                         f" (at most {MAX_RUN_NUMBER}): rename the file")
    return int(digits)


def _numbered(files: list[tuple[int, Path]]) -> dict[int, Path]:
    by_number: dict[int, Path] = {}
    for number, path in sorted(files, key=lambda f: (f[0], f[1].name)):
        if number in by_number:
            raise UsageError(f"{by_number[number]} and {path.name} both number run {number}: keep one of them")
        by_number[number] = path
    return by_number


def read_folder(folder: Path, benchmark: str) -> ResultFolder:
    """Locate, list and check a folder of logs, with its scaling.json and system description."""
    located = locate(folder, benchmark)
    files, naming = result_files(located)
    system = located.parent.name if located.parent.parent.name == "results" else None
    description = None
    if system is not None:
        system_file = located.parent.parent.parent / "systems" / f"{system}.json"
        if system_file.is_file():
            description = read_system_description(system_file)
    exported = read_exported_run(located)
    if exported is not None and set(exported.seeds) == set(files) and len(set(exported.seeds.values())) == len(files):
        files = {exported.seeds[number]: path for number, path in files.items()}  # each log by its run's seed
    return ResultFolder(folder=located, files=files, naming=naming, system=system, system_description=description,
                        scaling_factor=checkers.scaling_factor(located), exported=exported)


def read_exported_run(folder: Path) -> ExportedRun | None:
    """The ``mltrain.json`` an mltrain export leaves beside its result files, checked; None without one."""
    from pydantic import ValidationError

    from orchestrator.config.files import first_problem
    from orchestrator.mlperf.export import EXPORTED_RUN

    path = folder / EXPORTED_RUN
    if not path.is_file():
        return None
    try:
        return ExportedRun.model_validate(read_json(path, max_bytes=SMALL_BYTES))
    except (OSError, ValueError) as exc:
        why = first_problem(exc) if isinstance(exc, ValidationError) else checkers.one_line(str(exc), 80)
        raise UsageError(f"{path}: not the record of an mltrain export ({why}); fix or remove it") from None


def folder_digest(found: ResultFolder) -> str:
    """sha256 of the logs (names and bytes) and scaling.json: the same logs, wherever they lie."""
    import hashlib

    digest = hashlib.sha256()
    for number, path in sorted(found.files.items()):
        digest.update(f"{number}:{path.name}:".encode())
        digest.update(path.read_bytes())
    scaling = found.folder / "scaling.json"
    if scaling.is_file():
        digest.update(b"scaling.json:" + read_regular(scaling, max_bytes=SMALL_BYTES))
    return digest.hexdigest()


def read_system_description(path: Path) -> dict[str, Any]:
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a JSON system description ({checkers.one_line(str(exc), 80)});"
                         " fix or remove it") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a system description is a JSON object of fields; fix or remove it")
    return data


def accelerators(description: dict[str, Any]) -> tuple[str | None, int | None]:
    """The accelerator model and how many (nodes x per node) a system description states."""
    model = description.get("accelerator_model_name")
    model = " ".join(str(model).split()) if model not in (None, "") else None
    nodes = whole_number(description.get("number_of_nodes"), 1)
    count = nodes * whole_number(description.get("accelerators_per_node"), 0)
    return model, count or None


def whole_number(value: object, default: int) -> int:
    """A count a system description states as text ('8'); ``default`` when it states none."""
    try:
        number = int(str(value).strip())
    except ValueError:
        return default
    return number if 0 <= number < 1_000_000 else default
