"""``mltrain import``: take a folder of MLPerf result logs made elsewhere into the store."""

from __future__ import annotations

import re
import shutil
import socket
from pathlib import Path

import typer

from orchestrator.commands.common import JSON_OPTION, RESULTS_OPTION, registry, results_dir
from orchestrator.errors import UsageError
from orchestrator.mlperf import mllog
from orchestrator.output import Output
from orchestrator.render.tables import show_score
from orchestrator.results import store
from orchestrator.session import loop as benchmark

_RESULT_FILE = re.compile(r"^result_(\d+)\.txt$")


def register(app: typer.Typer) -> None:
    app.command("import")(import_logs)


def import_logs(
    folder: Path = typer.Argument(..., help="Folder holding result_*.txt MLLOG files, one per run."),
    mlperf_benchmark: str = typer.Option(..., "--benchmark", help="MLPerf benchmark name: unet3d, resnet, ..."),
    label: str = typer.Option(None, "--label", help="Name of the setup, for `mltrain compare`."),
    epochs_in: str = typer.Option("auto", "--epochs-in", help="How epoch_num is logged: auto, epochs or samples."),
    results: Path = RESULTS_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Import and score logs made by another harness (MLCommons published layout)."""
    out = Output()
    if epochs_in not in ("auto", "epochs", "samples"):
        raise UsageError(f"--epochs-in {epochs_in!r}: choose auto, epochs or samples")
    target_dir = results_dir(results)
    workload = _workload_for(mlperf_benchmark)
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder")
    files = sorted(
        (int(m.group(1)), p) for p in folder.iterdir() if (m := _RESULT_FILE.match(p.name)) and p.is_file()
    )
    if not files:
        raise UsageError(f"{folder}: no result_<n>.txt files")
    target = workload.quality.target
    records = {}
    for number, path in files:
        parsed = mllog.parse_file(path)
        mllog.require_scorable(parsed, str(path))
        records[number] = mllog.build_record(parsed, target=target, metric=workload.quality.metric,
                                             epoch_unit=epochs_in)  # type: ignore[arg-type]
    manifest = {
        "run_id": store.new_run_id(workload.name, "imported"),
        "workload": workload.name,
        "benchmark": mlperf_benchmark,
        "profile": "mlperf",
        "mlperf_result": True,
        "label": label or folder.name,
        "seeds": [n for n, _ in files],
        "seeds_random": False,
        "runner": "imported",
        "imported_from": str(folder.resolve()),
        "metric": workload.quality.metric,
        "target": target,
        "rule": {"drop_per_end": workload.olympic.drop_per_end,
                 "max_non_converged": workload.olympic.drop_per_end,
                 "runs_required": workload.olympic.runs},
        "host": socket.gethostname(),
        "started_at": store.now_iso(),
        "ended_at": None,
        "state": "running",
        "versions": benchmark.software_versions(),
    }
    paths = store.create_run(target_dir, manifest)
    for number, path in files:
        seed = paths.seed(number)
        shutil.copyfile(path, seed.output)
        store.write_record(seed, records[number])
        store.write_seed_state(seed, {"seed": number, "state": store.SEED_FINISHED,
                                      "status": records[number].status.value, "source": path.name})
    run, score = benchmark.finish(target_dir, paths.run_id)
    out.status(f"imported {len(files)} logs from {folder} as run {run.run_id}")
    show_score(out, run.summary or {}, score, as_json=as_json)


def _workload_for(mlperf_benchmark: str):
    reg = registry()
    matches = [w for w in (reg.get(n) for n in reg.names()) if w.mlperf_benchmark == mlperf_benchmark]
    if not matches:
        known = sorted({reg.get(n).mlperf_benchmark for n in reg.names()})
        raise UsageError(f"no workload implements benchmark {mlperf_benchmark!r} (known: {', '.join(known)})")
    return sorted(matches, key=lambda w: w.folder.parent != reg.roots[-1])[0]
