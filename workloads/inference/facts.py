"""``harness.json``: what LoadGen's logs do not say and the orchestrator needs (the contract's one
file of the harness's own): model load time, the time of each test and where it went, total
inference time, the backend and its execution providers, versions, the settings asked of LoadGen
and the official ones, the accuracy script's number, the per-operator profile.

``schema`` changes when a field changes meaning; the orchestrator refuses a schema it does not know.
"""

from __future__ import annotations

import hashlib
import os
import platform
from pathlib import Path
from typing import Any

from workloads.inference.backends import Loaded, version
from workloads.inference.models.common import Accuracy
from workloads.inference.operators import OperatorTime

FACTS_FILE = "harness.json"
SCHEMA = 1
TOP_OPERATORS = 15


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def round_facts(conf_round: Any, scenario: str) -> dict[str, Any]:
    """Which round's settings the run took: a retired model's declared one, else the installed LoadGen's."""
    if conf_round is None:
        return {"name": "current",
                "source": f"the mlperf.conf built into mlcommons-loadgen {version('mlcommons-loadgen')}"}
    return {"name": conf_round.name, "source": conf_round.source, "values": conf_round.for_scenario(scenario)}


def collect(*, options: Any, backend: Loaded, conf_model: str, official: dict[str, Any], user_conf: dict[str, float],
            user_conf_sources: dict[str, str], overrides: dict[str, Any], warm_up: dict[str, float],
            tests: dict[str, Any], preprocess_s: float, accuracy: Accuracy | None, max_batch: int,
            batch_source: str, threads: int, threads_source: str, workers: int, workers_source: str,
            samples: int, trace_file: Path | None, operators: list[OperatorTime],
            dataset: dict[str, Any] | None = None, conf_round: Any = None,
            audit: dict[str, Any] | None = None) -> dict[str, Any]:
    """The facts of one invocation as plain JSON values."""
    last = tests.get("accuracy") or tests.get("performance") or {}
    profile = None
    if trace_file is not None:
        profile = {"source": backend.backend, "file": os.path.relpath(trace_file, options.out),
                   "operator_us": sum(o.total_us for o in operators),
                   "operators": [o.to_json() for o in operators[:TOP_OPERATORS]],
                   "operator_count": len(operators)}
    return {
        "schema": SCHEMA,
        "harness": "workloads.inference",
        "model_name": options.model_name,
        "conf_model": conf_model,
        "model_file": options.model.name,
        "model_sha256": sha256(options.model),
        "scenario": options.scenario,
        "mode": options.mode,
        "profile": options.profile,
        "backend": backend.backend,
        "device": options.device,
        "providers": list(backend.providers),
        "input": {"name": backend.input_name, "shape": [str(d) for d in backend.input_shape]},
        "max_batch": max_batch,
        "batch_source": batch_source,
        "threads": threads,
        "threads_source": threads_source,
        "workers": workers,
        "workers_source": workers_source,
        "samples": samples,
        "versions": {**backend.versions, "mlcommons-loadgen": version("mlcommons-loadgen"),
                     "numpy": version("numpy"), "opencv": version("opencv-python-headless"),
                     "python": platform.python_version()},
        "host": platform.node(),
        "model_load_s": backend.load_s,
        "preprocess_s": preprocess_s,
        "warm_up": warm_up,
        "tests": tests,
        "total_inference_s": backend.load_s + float(last.get("test_s", 0.0)),
        "official": official,
        "round": round_facts(conf_round, options.scenario),
        "user_conf": user_conf,
        "user_conf_sources": user_conf_sources,
        "overrides": overrides,
        "accuracy": None if accuracy is None else {"metric": accuracy.metric, "percent": accuracy.percent,
                                                   "samples": accuracy.samples, "line": accuracy.line,
                                                   "parts": accuracy.parts},
        "dataset": dataset,
        "audit": audit,
        "trace": profile,
    }
