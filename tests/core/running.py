"""Helpers for tests that run mltrain as a child process and stop it: waiting, slow fakebench
profiles, the live processes of a run, what a results folder says of its seeds, and a stop signal
that a library turns into an error of its own."""

from __future__ import annotations

import enum
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


def wait_for(predicate: Callable[[], Any], timeout_s: float = 60.0, what: str = "a condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.02)


def slow_profiles(folder: Path, sleep_s: float, *, timeout_minutes: float = 1, **env: str) -> Path:
    """A seeds.yaml whose fakebench sleeps ``sleep_s`` per epoch (20-30 epochs a seed)."""
    variables = {"FAKE_SLEEP_S": str(sleep_s), **env}
    body = ", ".join(f"{k}: {json.dumps(v)}" for k, v in variables.items())
    path = folder / "seeds.yaml"
    path.write_text(
        "workloads:\n  fakebench:\n"
        f"    qualify: {{seeds: '1-3', timeout_minutes: {timeout_minutes}, dataset: {{source: synthetic}},"
        f" env: {{{body}}}}}\n"
    )
    return path


def seed_states(results: Path) -> dict[int, dict]:
    """seed -> its state.json (every run folder of ``results``), skipping files being replaced."""
    states = {}
    for path in results.glob("*/seeds/*/state.json"):
        try:
            states[int(path.parent.name)] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return states


def in_state(results: Path, state: str) -> list[int]:
    return sorted(s for s, body in seed_states(results).items() if body.get("state") == state)


def run_id_of(results: Path) -> str | None:
    found = [p.parent.name for p in results.glob("*/manifest.json")]
    return found[0] if found else None


def workload_processes(results: Path, command: str = "") -> list[int]:
    """Live (not zombie) processes whose RESULTS_DIR lies under ``results`` (and whose command line
    holds ``command``): what a seed started. Found from /proc directly, not through mltrain's own mark."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
            if command.encode() not in (entry / "cmdline").read_bytes().replace(b"\0", b" "):
                continue
        except OSError:
            continue
        for item in environ:
            if item.startswith(b"RESULTS_DIR=") and item[len(b"RESULTS_DIR="):].startswith(str(results).encode()):
                found.append(int(entry.name))
                break
    return sorted(found)


def terminated_while_pydantic_builds_a_validator() -> None:
    """SIGTERM arrives while pydantic builds a model's validator at its first use (as it does for
    every record type: ``defer_build``): the `Stop` raised there comes out as pydantic's SchemaError."""

    class Backend(enum.Enum):
        NCCL = "nccl"

        def __repr__(self) -> str:  # called while the validator is built: the signal lands in it
            os.kill(os.getpid(), signal.SIGTERM)
            return "Backend.NCCL"

    class Placed(BaseModel):
        model_config = ConfigDict(defer_build=True)
        backend: Literal[Backend.NCCL]

    Placed(backend=Backend.NCCL)
