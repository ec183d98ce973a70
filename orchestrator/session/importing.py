"""Runs made elsewhere: a folder of MLPerf result logs (MLCommons' published layout, or NVIDIA's
own ``<DATESTAMP>_<N>.log`` names) taken into the store as one run, scored like one of ours and
as MLCommons scores it (the RCP scaling factor of ``scaling.json`` applied).

Every file is read and checked before anything is written: names and run numbers, each log's
values (`mllog.require_scorable`), the scaling factor, the system description. The run is then
built in a staging folder inside the results folder and renamed into place only when whole, so a
failed import leaves the store as it was.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
from pathlib import Path

from orchestrator.config.labels import check_label, label_from
from orchestrator.config.profiles import MLPERF
from orchestrator.config.workloads import Workload
from orchestrator.errors import MltrainError, UsageError
from orchestrator.insight import sysinfo
from orchestrator.mlperf import benchmarks, compliance, layout, mllog
from orchestrator.mlperf.quality import Goal
from orchestrator.results import atomic
from orchestrator.results.lock import is_held
from orchestrator.results.paths import LOCK_NAME
from orchestrator.results.records import (
    IMPORTED_RUNNER,
    ImportedFolder,
    Manifest,
    RunRecord,
    Score,
    SeedState,
    SeedStateName,
)
from orchestrator.results.store import Store, new_run_id, now_iso
from orchestrator.results.stored_run import StoredRun
from orchestrator.session.loop import finish

STAGING_PREFIX = ".import-"


def read_records(found: layout.ResultFolder, workload: Workload, *, ruleset: str,
                 epoch_unit: mllog.EpochUnit) -> dict[int, RunRecord]:
    """Each log read, checked and judged by the compliance checker, by run number (exit 2 on the
    first log that cannot be scored), against the workload's target, or the target of the run an
    mltrain export came from."""
    records: dict[int, RunRecord] = {}
    goal = Goal.of(workload.quality, found.exported.target if found.exported is not None else None)
    for number, path in found.files.items():
        parsed = mllog.parse_file(path)
        mllog.require_scorable(parsed, str(path))
        record = mllog.build_record(parsed, goal=goal, epoch_unit=epoch_unit,
                                    samples_per_epoch=workload.samples_per_epoch)
        records[number] = compliance.judge(record, compliance.check_log(path, ruleset, goal))
    return records


def import_folder(
    store: Store, folder: Path, workload: Workload, *, benchmark: str, label: str | None,
    epoch_unit: mllog.EpochUnit, ruleset: str | None = None,
) -> tuple[StoredRun, Score]:
    """Read and score every log, then store them as one run (profile mlperf, the benchmark's own
    olympic rule; an mltrain export: its run's profile, target and rule), checked under ``ruleset``
    (default: the workload's). Logs imported already (the same files, wherever they lie) are refused,
    naming their run."""
    check_label(label)
    ruleset = benchmarks.check_ruleset(ruleset, benchmark) if ruleset else benchmarks.ruleset_of(workload)
    found = layout.read_folder(folder, benchmark)
    digest = layout.folder_digest(found)
    refuse_imported_twice(store, found, digest)
    records = read_records(found, workload, ruleset=ruleset, epoch_unit=epoch_unit)
    exported = found.exported
    manifest = Manifest(
        run_id=new_run_id(workload.name, "imported"),
        workload=workload.name,
        benchmark=benchmark,
        profile=exported.profile if exported is not None else MLPERF,
        mlperf_result=exported is None or exported.profile == MLPERF,
        label=label or label_from(found.system or found.folder.name),
        seeds=tuple(found.files),
        runner=IMPORTED_RUNNER,
        imported_from=str(found.folder.resolve()),
        imported=ImportedFolder(
            folder=str(found.folder.resolve()), system=found.system, system_description=found.system_description,
            scaling_factor=found.scaling_factor, ruleset=ruleset,
            files={number: path.name for number, path in found.files.items()}, digest=digest,
            exported_run=exported.run_id if exported is not None else None,
        ),
        metric=workload.quality.metric,
        target=exported.target if exported is not None else workload.quality.target,
        rule=exported.rule if exported is not None else benchmarks.get(benchmark).rule(),
        ruleset=ruleset,
        host=socket.gethostname(),
        started_at=now_iso(),
        state="running",
        versions=sysinfo.orchestrator_versions(),
    )
    atomic.make_folder(store.root)
    sweep_abandoned_imports(store.root)
    with atomic.writing(store.root):
        stage_root = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=store.root))
    try:
        staged = Store(stage_root).create(manifest)
        for number, path in found.files.items():
            with atomic.writing(staged.paths.seed(number).output):
                shutil.copyfile(path, staged.paths.seed(number).output)
            staged.save_seed(SeedState(seed=number, state=SeedStateName.FINISHED, status=records[number].status,
                                       source=path.name), records[number])
        _, score = finish(staged)
        atomic.move(staged.paths.root, store.paths(manifest.run_id).root)
    finally:
        shutil.rmtree(stage_root, ignore_errors=True)
    run = store.open(manifest.run_id)
    run.sync()  # the run is in its folder: an index that cannot take it now catches up at the next read
    return run, score


def refuse_imported_twice(store: Store, found: layout.ResultFolder, digest: str) -> None:
    """UsageError naming the run that holds these logs already: the same files (by their digest) or,
    for an import of an older mltrain, the same folder."""
    listing = store.list()
    folder = str(found.folder.resolve())
    for row in listing.rows:
        if row.get("runner") != IMPORTED_RUNNER:
            continue
        try:
            imported = store.manifest(row["run_id"]).imported
        except MltrainError:  # a damaged run is `list`'s to name, not this import's
            continue
        same_folder = imported is not None and imported.digest is None and imported.folder == folder
        if imported is not None and (imported.digest == digest or same_folder):
            raise UsageError(f"{found.folder}: these logs were imported already as run {row['run_id']}"
                             f" (from {imported.folder}); see `mltrain show {row['run_id']}`, or remove that run"
                             " to import them again")


ABANDONED_AFTER_S = 600.0
"""A staging folder this old with no live lock in it was left by an import that was killed."""


def sweep_abandoned_imports(root: Path, *, now: float | None = None) -> list[Path]:
    """Remove the staging folders of imports that were killed (SIGKILL, a power cut): no process
    holds the lock of the run staged in it, and it is older than an import's first write. Returns
    what was removed."""
    removed = []
    moment = time.time() if now is None else now
    for stage in root.glob(f"{STAGING_PREFIX}*"):
        if not stage.is_dir() or stage.is_symlink():
            continue
        locks = list(stage.glob(f"*/{LOCK_NAME}"))
        if any(is_held(lock) for lock in locks) or moment - stage.stat().st_mtime < ABANDONED_AFTER_S:
            continue
        shutil.rmtree(stage, ignore_errors=True)
        removed.append(stage)
    return removed
