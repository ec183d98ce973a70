"""The kit's MLLOG wrapper (workloads/common/mllog.py): rank 0 alone writes, to stdout and its file,
lines mlperf_logging parses, naming the caller; no logger is left in ``logging``'s registry (resnet50's
wrapper registered one per run, ``logging.getLogger(f"...{id(self)}")``, never freed)."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from pathlib import Path

from mlperf_logging.mllog import constants as C

from workloads.common.mllog import RESOLVED_SETTINGS, THROUGHPUT, MlperfLog


def records(text: str) -> list[dict]:
    return [json.loads(line.split(":::MLLOG ", 1)[1]) for line in text.splitlines() if line.startswith(":::MLLOG")]


def test_rank_0_writes_the_same_lines_to_stdout_and_its_file(tmp_path: Path):
    path = tmp_path / "results" / "mllog.txt"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), MlperfLog(path) as log:
        log.event(C.CACHE_CLEAR, True)
        log.start(C.RUN_START)
        log.event(RESOLVED_SETTINGS, {"precision": "fp32"})
        log.end(C.RUN_STOP, metadata={C.STATUS: C.SUCCESS})
    assert out.getvalue() == path.read_text()
    found = records(path.read_text())
    assert [(r["key"], r["event_type"]) for r in found] == [
        ("cache_clear", "POINT_IN_TIME"), ("run_start", "INTERVAL_START"), ("resolved_settings", "POINT_IN_TIME"),
        ("run_stop", "INTERVAL_END")]
    assert found[-1]["metadata"]["status"] == "success"
    assert all(r["metadata"]["file"] == __file__ for r in found)  # the caller, not the wrapper


def test_other_ranks_write_nothing(tmp_path: Path):
    path = tmp_path / "results" / "mllog.txt"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), MlperfLog(path, enabled=False) as log:
        log.event(THROUGHPUT, 12.5)
    assert out.getvalue() == "" and not path.parent.exists()


def test_two_logs_share_nothing_and_leave_no_logger_behind(tmp_path: Path):
    registered = set(logging.Logger.manager.loggerDict)
    first, second = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(first), MlperfLog(tmp_path / "a.txt") as a:
        with contextlib.redirect_stdout(second), MlperfLog(tmp_path / "b.txt") as b:
            b.event(THROUGHPUT, 2.0)
        a.event(THROUGHPUT, 1.0)
    assert [r["value"] for r in records(first.getvalue())] == [1.0]
    assert [r["value"] for r in records(second.getvalue())] == [2.0]
    assert [r["value"] for r in records((tmp_path / "a.txt").read_text())] == [1.0]
    assert set(logging.Logger.manager.loggerDict) == registered
