"""NVIDIA DCGM's diagnostics (`dcgmi diag -r N -j`), run on the node when DCGM is installed.

The JSON layout differs between DCGM 2, 3 and 4; the parser walks it for tests (a ``name`` or
``test_name`` and a ``results`` list, or a ``status``) rather than trusting one layout, and a test
whose status is Fail fails the check, Warn warns, Skip and Pass pass.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from orchestrator.config.reading import parse_json
from orchestrator.results.qualification import CheckResult, Status, worst
from orchestrator.runners import proc

LEVEL_TIMEOUT_S = {1: 300, 2: 1200, 3: 3600, 4: 4 * 3600}


def dcgm_check(level: int, gpu_count: int, which: Callable[[str], str | None] = shutil.which) -> CheckResult:
    started = time.monotonic()

    def done(status: Status, reasons: tuple[str, ...], facts: dict[str, Any] | None = None) -> CheckResult:
        scope = {"scope": f"every GPU of the node (dcgmi diag without -i; NVML sees {gpu_count})"} if gpu_count else {}
        return CheckResult(name="dcgm_diag", kind="health", status=status, sanity=status, reasons=reasons,
                           sanity_reasons=reasons, facts={**scope, **(facts or {})},
                           duration_s=time.monotonic() - started)

    if gpu_count == 0:
        return done(Status.NOT_APPLICABLE, ("no GPU on this host",))
    dcgmi = which("dcgmi")
    if dcgmi is None:
        return done(Status.NOT_APPLICABLE, ("skipped: DCGM is not installed (dcgmi not found)",))
    argv = [dcgmi, "diag", "-r", str(level), "-j"]
    try:
        result = proc.run(argv, cwd=Path.cwd(), env=proc.child_env({}), timeout_s=LEVEL_TIMEOUT_S.get(level, 3600))
    except subprocess.TimeoutExpired:
        return done(Status.INCONCLUSIVE, (f"dcgmi diag -r {level} did not finish in {LEVEL_TIMEOUT_S[level]} s",))
    try:
        report = parse_json(result.stdout)
    except ValueError:
        last = (result.stderr or result.stdout or "").strip().splitlines()[-1:] or [f"exit status {result.returncode}"]
        return done(Status.INCONCLUSIVE, (f"dcgmi diag -r {level} gave no JSON: {last[0][:200]}",))
    return done(*judge_report(report, level))


def judge_report(report: Any, level: int) -> tuple[Status, tuple[str, ...], dict[str, Any]]:
    """(status, reasons, facts) of a parsed `dcgmi diag -j` report."""
    tests = list(_tests(report))
    if not tests:
        return Status.INCONCLUSIVE, (f"dcgmi diag -r {level}: no test results in its JSON",), {"report": report}
    statuses: list[Status] = []
    reasons: list[str] = []
    for name, status, info in tests:
        word = status.lower()
        if word.startswith("fail"):
            statuses.append(Status.FAIL)
            reasons.append(f"DCGM {name}: Fail{': ' + info if info else ''}")
        elif word.startswith("warn"):
            statuses.append(Status.WARN)
            reasons.append(f"DCGM {name}: Warn{': ' + info if info else ''}")
        else:
            statuses.append(Status.PASS)
    summary = {name: status for name, status, _ in tests}
    return worst(statuses), tuple(reasons), {"level": level, "tests": summary}


def _tests(node: Any) -> Iterator[tuple[str, str, str]]:
    if isinstance(node, dict):
        name = node.get("name") or node.get("test_name")
        results = node.get("results")
        if isinstance(name, str) and isinstance(results, list):
            for entry in results:
                if isinstance(entry, dict) and isinstance(entry.get("status"), str):
                    info = entry.get("info") or entry.get("warnings") or entry.get("warning") or ""
                    if isinstance(info, list):
                        info = "; ".join(str(i.get("warning", i)) if isinstance(i, dict) else str(i) for i in info)
                    gpu = entry.get("gpu_id", entry.get("gpu_ids"))
                    label = f"{name} (GPU {gpu})" if gpu is not None else name
                    yield label, entry["status"], " ".join(str(info).split())[:200]
            return
        if isinstance(name, str) and isinstance(node.get("status"), str):
            yield name, node["status"], ""
            return
        for value in node.values():
            yield from _tests(value)
    elif isinstance(node, list):
        for value in node:
            yield from _tests(value)
