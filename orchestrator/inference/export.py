"""An inference run as an MLPerf Inference submission (the layout MLCommons' submission checker reads,
``tools/submission/submission_structure.md``, v6.x):

    <division>/<submitter>/systems/<system>.json           the system description (its required fields)
    <division>/<submitter>/src/README.md                    where the code that ran is (mltrain's harness)
    <division>/<submitter>/results/<system>/<benchmark>/<scenario>/
        performance/run_1/mlperf_log_{summary,detail}.txt   LoadGen's
        accuracy/mlperf_log_{summary,detail}.txt, accuracy.txt, mlperf_log_accuracy.json
        measurements.json, README.md, user.conf
        TEST01/, TEST04/                                    the compliance tests the run made (--compliance)

``<benchmark>`` is the model's name in the checker (inference.yaml ``submission.benchmark``). The
accuracy logs are truncated as MLCommons' ``truncate_accuracy_log.py`` truncates them: the sha256 of
the whole log appended to its ``accuracy.txt`` as ``hash=...``, the log cut to its first and last
4096 characters. The folder is made in a temporary sibling, then renamed into place. The division is
``closed`` for an mlperf-profile run valid as an MLPerf result, else ``open`` unless asked (the
checker then says what keeps it from being one). A smoke run is not exported: it is comparable with
nothing.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import StoreWriteError, UsageError
from orchestrator.inference.declaration import ModelFacts, find_model
from orchestrator.inference.logs import ACCURACY_LOG
from orchestrator.inference.model_check import sha256
from orchestrator.mlperf.system_desc import safe_name, system_description
from orchestrator.results import atomic
from orchestrator.results.inference import InferenceRun
from orchestrator.results.paths import InferencePaths
from orchestrator.results.store import Store

PERFORMANCE_FILES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt")
ACCURACY_FILES = ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json", "accuracy.txt")
VIEWABLE_SIZE = 4096
"""What truncate_accuracy_log.py keeps of each end of an accuracy log (characters)."""
SYSTEM_TYPES = ("datacenter", "edge")
STATUSES = ("available", "preview", "rdi")
"""The checker's VALID_AVAILABILITIES."""
MEANINGFUL = ("host_networking", "host_network_card_count", "host_networking_topology", "host_memory_configuration",
              "accelerator_host_interconnect", "accelerator_memory_configuration", "accelerator_interconnect",
              "cooling")
"""Fields the checker wants non-empty that a system capture cannot know: said to be unknown."""


@dataclass(frozen=True, kw_only=True)
class Exported:
    scenario_folder: Path
    system_file: Path
    division: str
    benchmark: str
    notes: tuple[str, ...]
    """What the user should know (a closed export of a run that is not a valid result, a system file kept)."""


def truncate_accuracy_log(log: Path, accuracy_txt: Path) -> str:
    """MLCommons' truncate_accuracy_log.py on one folder: the log's sha256 appended to accuracy.txt as
    ``hash=<hex>``, the log cut to its first and last 4096 characters. The hash."""
    value = sha256(log)
    with accuracy_txt.open("a", encoding="utf-8") as handle:
        handle.write(f"\nhash={value}\n")
    size = log.stat().st_size
    if size >= VIEWABLE_SIZE:
        with log.open("r") as source:
            start = source.read(VIEWABLE_SIZE)
            source.seek(size - VIEWABLE_SIZE, 0)
            end = source.read(VIEWABLE_SIZE)
        log.write_text(f"{start}\n\n...\n\n{end}")
    return value


def inference_system(system: dict[str, Any], *, submitter: str, system_name: str, division: str, system_type: str,
                     status: str = "rdi") -> dict[str, str]:
    """An MLCommons inference system description: the training description's facts, the inference
    checker's own fields and availabilities, and 'unknown' where a capture cannot know a required one."""
    if system_type not in SYSTEM_TYPES:
        raise UsageError(f"--system-type {system_type!r}: one of {', '.join(SYSTEM_TYPES)}")
    described = system_description(system, submitter=submitter, system_name=system_name, division=division)
    described.update({"status": status, "system_type": system_type, "system_type_detail": "N/A",
                      "host_network_card_count": "unknown"})  # no is_network: any value asks for the network fields
    for field in MEANINGFUL:
        described[field] = described.get(field) or "unknown"
    return described


def export_inference(run: InferenceRun, where: InferencePaths, out: Path, facts: ModelFacts, *,
                     system_name: str | None, submitter: str, division: str | None = None,
                     system_type: str = "datacenter") -> Exported:
    """The run's scenario written under ``out`` with its system description and src; what was written."""
    if run.profile == "smoke":
        raise UsageError(f"run {run.run_id} is a smoke run: comparable with nothing, it is not exported as an "
                         "MLPerf result")
    if run.result is None:
        raise UsageError(f"run {run.run_id} has no result to export ({run.failure or run.state})")
    if run.result.performance is None:
        raise UsageError(f"run {run.run_id} ran the accuracy test alone (--accuracy-only): a result needs both tests")
    if division not in (None, "closed", "open"):
        raise UsageError(f"--division {division!r}: closed or open")
    valid = run.profile == "mlperf" and run.result.valid
    chosen = division or ("closed" if valid else "open")
    notes = []
    if chosen == "closed" and not valid:
        notes.append(f"run {run.run_id} is not a valid MLPerf result ({'; '.join(run.result.reasons)}): exported in "
                     "the closed layout as asked; the submission checker says what keeps it from being one")
    system = safe_name(system_name or run.host or "system")
    benchmark = facts.submission.benchmark
    submitter_dir = out / chosen / safe_name(submitter)
    target = submitter_dir / "results" / system / benchmark / run.scenario
    if target.exists():
        raise UsageError(f"{target} exists: export into another --mlcommons folder or remove it")
    system_file = submitter_dir / "systems" / f"{system}.json"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
        try:
            _scenario(run, where, staging, facts)
            atomic.move(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if system_file.exists():
            notes.append(f"{system_file} exists: kept as it is")
        else:
            system_file.parent.mkdir(parents=True, exist_ok=True)
            atomic.write_json(system_file, inference_system(run.system, submitter=submitter, system_name=system,
                                                            division=chosen, system_type=system_type))
        source = submitter_dir / "src" / "README.md"
        if not source.exists():
            source.parent.mkdir(parents=True, exist_ok=True)
            atomic.write_text(source, _source_readme(run))
    except OSError as exc:
        raise StoreWriteError(f"cannot write {exc.filename or target}: {exc.strerror or exc}") from None
    return Exported(scenario_folder=target, system_file=system_file, division=chosen, benchmark=benchmark,
                    notes=tuple(notes))


def _scenario(run: InferenceRun, where: InferencePaths, staging: Path, facts: ModelFacts) -> None:
    _copy(where.performance, staging / "performance" / "run_1", PERFORMANCE_FILES)
    if (where.accuracy / "accuracy.txt").is_file():
        _copy(where.accuracy, staging / "accuracy", ACCURACY_FILES)
        truncate_accuracy_log(staging / "accuracy" / ACCURACY_LOG, staging / "accuracy" / "accuracy.txt")
    shutil.copyfile(where.root / "user.conf", staging / "user.conf")
    atomic.write_json(staging / "measurements.json", _measurements(run))
    atomic.write_text(staging / "README.md", _scenario_readme(run, facts))
    assert run.result is not None
    for test in run.result.compliance:
        source, folder = where.root / test.folder, staging / test.test
        _copy(source / "performance" / "run_1", folder / "performance" / "run_1", PERFORMANCE_FILES)
        names = ["verify_performance.txt"] + (["verify_accuracy.txt"] if test.accuracy_passed is not None else [])
        _copy(source, folder, tuple(names))
        if (source / "accuracy" / ACCURACY_LOG).is_file():
            _copy(source / "accuracy", folder / "accuracy", (ACCURACY_LOG, "accuracy.txt"))
            truncate_accuracy_log(folder / "accuracy" / ACCURACY_LOG, folder / "accuracy" / "accuracy.txt")


def _measurements(run: InferenceRun) -> dict[str, str]:
    """measurements.json: the checker's required fields (SYSTEM_IMP_REQUIRED_FILES), as this run knows them."""
    source = f"exported from training run {run.model_source}" if run.model_source else "as given"
    retraining = f"yes: trained by mltrain ({run.model_source})" if run.model_source else "no"
    return {"input_data_types": "fp32", "weight_data_types": "fp32", "retraining": retraining,
            "starting_weights_filename": Path(run.model_file).name,
            "weight_transformations": f"none ({source}; sha256 {run.model_sha256})"}


def _scenario_readme(run: InferenceRun, facts: ModelFacts) -> str:
    command = " ".join(run.command) or f"mltrain infer {run.model} --scenario {run.scenario}"
    h = run.result.harness if run.result else None
    settings = (f"backend {h.backend} on {', '.join(h.providers)}, batch up to {h.max_batch}, {h.threads or 'default'} "
                f"intra-op threads, {h.workers} workers") if h else ""
    return (f"# {facts.submission.benchmark} {run.scenario}\n\nMeasured by mltrain's MLPerf Inference harness "
            f"(mltrain run {run.run_id}, profile {run.profile}).\n\n    {command}\n\n{settings}\n")


def _source_readme(run: InferenceRun) -> str:
    versions = json.dumps(run.result.harness.versions if run.result else {}, sort_keys=True)
    return ("# Code\n\nThe harness is mltrain's `workloads/inference/` (the real MLPerf LoadGen; per model the "
            "reference's pre- and post-processing and accuracy script), run through `mltrain infer`.\n\n"
            f"Versions of the run this export was made from: {versions}\n")


def _copy(source: Path, target: Path, names: tuple[str, ...]) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(source / name, target / name)


def export_stored(store: Store, roots: Sequence[Path], run_id: str, out: Path, *, system_name: str | None,
                  submitter: str, division: str | None, system_type: str) -> Exported:
    """The stored inference run ``run_id`` exported under ``out``, its model's facts those its harness
    under ``roots`` declares."""
    record = store.open_inference(run_id)
    facts = find_model(roots, record.model).model(record.model)
    return export_inference(record, store.inference_paths(run_id), out, facts, system_name=system_name,
                            submitter=submitter, division=division, system_type=system_type)
