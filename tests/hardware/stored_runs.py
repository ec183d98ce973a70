"""Stored benchmark runs for the hardware tests, made in-process and fast.

Each seed's log comes from the fakebench test workload's own `fake_train.main` (its real MLLOG
output, virtual time), is read by `orchestrator.mlperf.mllog` and scored by
`orchestrator.session.loop`, exactly as `mltrain run` stores it; only the process start (and the
MLCommons export that `loop.finish` adds to mlperf runs, tested on its own) is skipped. Telemetry, when asked
for, is a synthetic 1 Hz series (constant power plus seeded noise) covering the run.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from orchestrator.insight import quiet
from orchestrator.insight.telemetry_summary import seed_energy
from orchestrator.mlperf import mllog
from orchestrator.mlperf.quality import Goal
from orchestrator.results.records import Manifest, SeedState, SeedStateName
from orchestrator.results.store import Store, new_run_id, now_iso
from orchestrator.session import scoring

FAKE_TRAIN = Path(__file__).resolve().parents[1] / "workloads" / "fakebench" / "fake_train.py"
TARGET = 0.908


@functools.cache
def _fake_train() -> Any:
    spec = importlib.util.spec_from_file_location("fake_train_for_hardware_tests", FAKE_TRAIN)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def fake_log(seed: int, env: dict[str, str]) -> str:
    """What `run_and_time.sh <seed>` of fakebench prints, with FAKE_* variables ``env``."""
    module = _fake_train()
    buffer = io.StringIO()
    variables = {"FAKE_SLEEP_S": "0", "RESULTS_DIR": "/nonexistent-results", **env}
    with mock.patch.dict(os.environ, variables), mock.patch.object(sys, "argv", ["fake_train.py", str(seed)]), \
            contextlib.redirect_stdout(buffer):
        module.main()
    return buffer.getvalue()


def power_series(start_ms: int, stop_ms: int, power_w: float, seed: int,
                 other_cpu_pct: float | None = None) -> dict[str, Any]:
    """A 1 Hz telemetry series of one GPU drawing about ``power_w`` from 2 s before run_start; with
    ``other_cpu_pct``, the quiet-host evidence too (other processes using that share of the host's CPU)."""
    t = list(range(start_ms - 2000, stop_ms + 1001, 1000))
    rng = np.random.default_rng(seed)
    power = [round(float(power_w + rng.normal(0, 5)), 1) for _ in t]
    n = len(t)
    evidence = {} if other_cpu_pct is None else {
        "steal_pct": [0.0] * n, "other_cpu_pct": [other_cpu_pct] * n, "load_1m": [1.0] * n,
        "memory_pressure_pct": [0.0] * n}
    return {
        "version": 1, "interval_s": 1.0, "gpu_source": {"available": True, "devices": ["Test GPU"]},
        "dataset_device": "vda",
        "host": {"t_ms": t, "cpu_pct": [30.0] * n, "iowait_pct": [0.0] * n, "memory_used_bytes": [2**33] * n,
                 "disk_read_bytes_per_s": [1e6] * n, "disk_busy_pct": [3.0] * n, **evidence},
        "gpus": [{"util_pct": [90.0] * n, "memory_used_bytes": [2**34] * n, "power_w": power,
                  "temperature_c": [65.0] * n, "sm_clock_mhz": [1400.0] * n, "throttle_bits": [0] * n,
                  "energy_mj": [None] * n, **({"other_processes": [0] * n} if evidence else {})}],
        "sampling_errors": [],
    }


def make_run(
    results: Path,
    *,
    label: str | None,
    seeds: list[int],
    env: dict[str, str] | None = None,
    profile: str = "qualify",
    drop: int = 1,
    system: dict[str, Any] | None = None,
    power_w: float | None = None,
    extra_output: str = "",
    run_id: str | None = None,
    other_cpu_pct: float | None = None,
    runner: str = "local",
    provenance: dict[str, Any] | None = None,
) -> str:
    """Store a finished fakebench run; return its id. With ``other_cpu_pct``, each seed's telemetry
    holds the quiet-host evidence (other processes at that share of the host's CPU throughout) and
    its record the verdict on it, as `mltrain run` judges it; with telemetry, its record holds the
    seed's energy, as `mltrain run` keeps it."""
    run_id = run_id or new_run_id("fakebench", profile)
    manifest = Manifest.model_validate({
        "run_id": run_id, "workload": "fakebench", "benchmark": "unet3d", "profile": profile,
        "mlperf_result": profile == "mlperf", "label": label, "seeds": list(seeds), "seeds_random": False,
        "runner": runner, "metric": "eval_accuracy", "target": TARGET,
        "rule": {"drop_per_end": drop, "max_non_converged": drop, "runs_required": None},
        "host": socket.gethostname(), "started_at": now_iso(), "ended_at": None, "state": "running",
        "data_dir": str(results), "system": system or {}, "runner_provenance": provenance or {},
    })
    run = Store(results).create(manifest)
    paths = run.paths
    for seed in seeds:
        text = fake_log(seed, env or {}) + extra_output
        seed_paths = paths.seed(seed)
        seed_paths.output.write_text(text)
        record = mllog.build_record(mllog.parse_lines(text.splitlines()), goal=Goal(target=TARGET))
        sampled = (power_w is not None or other_cpu_pct is not None) and record.run_start_ms is not None \
            and record.run_stop_ms is not None
        if sampled:
            series = power_series(record.run_start_ms, record.run_stop_ms, power_w or 100.0, seed, other_cpu_pct)
            seed_paths.telemetry.write_text(json.dumps(series))
            record = record.model_copy(update={
                "energy": seed_energy(series, record.run_start_ms, record.run_stop_ms),
                **({"quiet_host": quiet.judge(series, record.run_start_ms, record.run_stop_ms)}
                   if other_cpu_pct is not None else {})})
        run.save_seed(SeedState(seed=seed, state=SeedStateName.FINISHED), record)
    # scored as loop.finish does, without its MLCommons export
    run.save_summary(scoring.summary_of(run, scoring.score_run(run)))
    run.save_manifest(run.manifest.model_copy(update={"ended_at": now_iso(), "state": "finished"}))
    return run_id
