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

from orchestrator.config.profiles import MLPERF
from orchestrator.config.workloads import Workload
from orchestrator.insight import sysinfo
from orchestrator.mlperf import benchmarks, compliance, layout, mllog
from orchestrator.mlperf.quality import Goal
from orchestrator.results import atomic
from orchestrator.results.lock import is_held
from orchestrator.results.paths import LOCK_NAME
from orchestrator.results.records import (
    ImportedFolder,
    Manifest,
    RunRecord,
    Score,
    SeedState,
    SeedStateName,
)
from orchestrator.results.store import Store, StoredRun, new_run_id, now_iso
from orchestrator.session.loop import finish

STAGING_PREFIX = ".import-"


def read_records(found: layout.ResultFolder, workload: Workload, *, ruleset: str,
                 epoch_unit: mllog.EpochUnit) -> dict[int, RunRecord]:
    """Each log read, checked and judged by the compliance checker, by run number (exit 2 on the
    first log that cannot be scored)."""
    records: dict[int, RunRecord] = {}
    goal = Goal.of(workload.quality)
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
    olympic rule), checked under ``ruleset`` (default: the workload's)."""
    ruleset = benchmarks.check_ruleset(ruleset, benchmark) if ruleset else benchmarks.ruleset_of(workload)
    found = layout.read_folder(folder, benchmark)
    records = read_records(found, workload, ruleset=ruleset, epoch_unit=epoch_unit)
    manifest = Manifest(
        run_id=new_run_id(workload.name, "imported"),
        workload=workload.name,
        benchmark=benchmark,
        profile=MLPERF,
        mlperf_result=True,
        label=label or found.system or found.folder.name,
        seeds=tuple(found.files),
        runner="imported",
        imported_from=str(found.folder.resolve()),
        imported=ImportedFolder(
            folder=str(found.folder.resolve()), system=found.system, system_description=found.system_description,
            scaling_factor=found.scaling_factor, ruleset=ruleset,
            files={number: path.name for number, path in found.files.items()},
        ),
        metric=workload.quality.metric,
        target=workload.quality.target,
        rule=benchmarks.get(benchmark).rule(),
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
