"""One qualification step on a runner: submit a command, keep its output in a file as it arrives,
hand each line to a callback, stop it at its time limit, and say how it ended.

The same `Runner` as `mltrain run` (local process, the workload's container, a Slurm job), so a
step qualifies the image and the runtime that the benchmark itself would use.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.config.workloads import Workload
from orchestrator.errors import MltrainError
from orchestrator.results.records import Exit
from orchestrator.runners.base import Runner, SeedJob


@dataclass(frozen=True, kw_only=True)
class StepOutcome:
    exit: Exit
    output: Path
    """Everything the step printed."""
    timed_out: bool
    seconds: float

    @property
    def ok(self) -> bool:
        return self.exit.code == 0 and not self.timed_out

    def text(self) -> str:
        try:
            return self.output.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 3) -> str:
        kept = [line.strip() for line in self.text().splitlines() if line.strip()]
        return " | ".join(kept[-lines:])


class StepError(MltrainError):
    """A runner could not start a step (engine down, sbatch refused): the check could not run."""


def run_step(
    runner: Runner,
    *,
    name: str,
    run_id: str,
    workload: Workload,
    command: tuple[str, ...],
    env: Mapping[str, str],
    data_dir: Path,
    folder: Path,
    timeout_s: float,
    on_line: Callable[[str], None] = lambda line: None,
) -> StepOutcome:
    """Run ``command`` on ``runner`` to its end (or its limit). StepError when it cannot start."""
    folder.mkdir(parents=True, exist_ok=True)
    output = folder / "output.log"
    job = SeedJob(
        run_id=f"{run_id}-{name}", seed=0, workload=workload, data_dir=data_dir, results_dir=folder / "results",
        env=dict(env), labels={"mltrain.qualification": run_id, "mltrain.step": name}, command=command,
    )
    job.results_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        handle = runner.submit(job)
    except MltrainError as exc:
        raise StepError(f"{name}: {exc}") from None
    failure: list[BaseException] = []

    def pump() -> None:
        pending = b""
        try:
            with output.open("ab") as log:
                for chunk in handle.stream():
                    log.write(chunk)
                    log.flush()
                    *complete, pending = (pending + chunk).split(b"\n")
                    for raw in complete:
                        on_line(raw.decode(errors="replace"))
            if pending:
                on_line(pending.decode(errors="replace"))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failure.append(exc)

    reader = threading.Thread(target=pump, name=f"qualify-{name}-output", daemon=True)
    reader.start()
    timed_out = False
    try:
        reader.join(timeout=timeout_s)
        if reader.is_alive():
            timed_out = True
            handle.cancel()
            reader.join(timeout=60)
    except KeyboardInterrupt:
        handle.cancel()
        reader.join(timeout=30)
        handle.wait()
        raise
    ended = handle.wait()
    if failure:
        raise failure[0]
    return StepOutcome(exit=ended, output=output, timed_out=timed_out, seconds=time.monotonic() - started)
