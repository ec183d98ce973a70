"""Runs made elsewhere: a folder of MLPerf ``result_<n>.txt`` logs (MLCommons' published layout)
taken into the store as one run, scored like one of ours."""

from __future__ import annotations

import re
import shutil
import socket
from pathlib import Path

from orchestrator.config.workloads import Workload
from orchestrator.errors import UsageError
from orchestrator.insight import sysinfo
from orchestrator.mlperf import mllog
from orchestrator.results.records import Manifest, RunRecord, Score, ScoringRule, SeedState, SeedStateName
from orchestrator.results.store import Store, StoredRun, new_run_id, now_iso
from orchestrator.session.loop import finish

RESULT_FILE = re.compile(r"^result_(\d+)\.txt$")


def result_files(folder: Path) -> list[tuple[int, Path]]:
    """The folder's result files, by number."""
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder")
    files = sorted(
        (int(m.group(1)), p) for p in folder.iterdir() if (m := RESULT_FILE.match(p.name)) and p.is_file()
    )
    if not files:
        raise UsageError(f"{folder}: no result_<n>.txt files")
    return files


def import_folder(
    store: Store, folder: Path, workload: Workload, *, benchmark: str, label: str | None,
    epoch_unit: mllog.EpochUnit,
) -> tuple[StoredRun, Score]:
    """Read and score every result file, then store them as one run (profile mlperf, the
    benchmark's own olympic rule)."""
    files = result_files(folder)
    records: dict[int, RunRecord] = {}
    for number, path in files:
        parsed = mllog.parse_file(path)
        mllog.require_scorable(parsed, str(path))
        records[number] = mllog.build_record(parsed, target=workload.quality.target, metric=workload.quality.metric,
                                             epoch_unit=epoch_unit)
    manifest = Manifest(
        run_id=new_run_id(workload.name, "imported"),
        workload=workload.name,
        benchmark=benchmark,
        profile="mlperf",
        mlperf_result=True,
        label=label or folder.name,
        seeds=tuple(n for n, _ in files),
        runner="imported",
        imported_from=str(folder.resolve()),
        metric=workload.quality.metric,
        target=workload.quality.target,
        rule=ScoringRule(drop_per_end=workload.olympic.drop_per_end, max_non_converged=workload.olympic.drop_per_end,
                         runs_required=workload.olympic.runs),
        host=socket.gethostname(),
        started_at=now_iso(),
        state="running",
        versions=sysinfo.orchestrator_versions(),
    )
    run = store.create(manifest)
    for number, path in files:
        shutil.copyfile(path, run.paths.seed(number).output)
        run.save_seed(SeedState(seed=number, state=SeedStateName.FINISHED, status=records[number].status,
                                source=path.name), records[number])
    return finish(run, workload.olympic.drop_per_end)
