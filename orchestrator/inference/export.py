"""An inference run in the MLPerf Inference submission layout:
``<division>/<submitter>/results/<system>/<model>/<scenario>/`` holding LoadGen's performance and
accuracy logs, the accuracy script's ``accuracy.txt`` and ``user.conf``, copied from the run folder
(made in a temporary sibling, then renamed into place). The division is ``closed`` only for an
mlperf-profile run that is valid as an MLPerf result; a smoke run is not exported (it is
comparable with nothing).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from orchestrator.errors import StoreWriteError, UsageError
from orchestrator.results import atomic
from orchestrator.results.inference import InferenceRun
from orchestrator.results.paths import InferencePaths

PERFORMANCE_FILES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt")
ACCURACY_FILES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json", "accuracy.txt")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def export_inference(run: InferenceRun, where: InferencePaths, out: Path, *, system_name: str | None,
                     submitter: str) -> Path:
    """The scenario folder written under ``out``."""
    if run.profile == "smoke":
        raise UsageError(f"run {run.run_id} is a smoke run: comparable with nothing, it is not exported as an "
                         "MLPerf result")
    if run.result is None:
        raise UsageError(f"run {run.run_id} has no result to export ({run.failure or run.state})")
    division = "closed" if run.profile == "mlperf" and run.result.valid else "open"
    system = _UNSAFE.sub("_", system_name or run.host or "system")
    target = out / division / _UNSAFE.sub("_", submitter) / "results" / system / run.model / run.scenario
    if target.exists():
        raise UsageError(f"{target} exists: export into another --mlcommons folder or remove it")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
        try:
            _copy(where.performance, staging / "performance" / "run_1", PERFORMANCE_FILES)
            if (where.accuracy / "accuracy.txt").is_file():
                _copy(where.accuracy, staging / "accuracy", ACCURACY_FILES)
            shutil.copyfile(where.root / "user.conf", staging / "user.conf")
            atomic.move(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    except OSError as exc:
        raise StoreWriteError(f"cannot write {exc.filename or target}: {exc.strerror or exc}") from None
    return target


def _copy(source: Path, target: Path, names: tuple[str, ...]) -> None:
    target.mkdir(parents=True)
    for name in names:
        shutil.copyfile(source / name, target / name)
