"""Run seeds as subprocesses of this host."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from orchestrator.config.workloads import Workload
from orchestrator.results.records import Exit
from orchestrator.runners import proc
from orchestrator.runners.base import Job, Runner, SeedJob

_CHUNK = 65536


class LocalJob(Job):
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.job_id = f"pid:{process.pid}"
        self._cancel_lock = threading.Lock()

    def stream(self) -> Iterator[bytes]:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while chunk := os.read(fd, _CHUNK):
            yield chunk

    def wait(self) -> Exit:
        code = self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        return Exit(code=code, detail=f"killed by signal {-code}" if code < 0 else "")

    def cancel(self) -> None:
        with self._cancel_lock:
            proc.stop_group(self.process)


class LocalRunner(Runner):
    """The workload's command on this machine, one seed at a time."""

    name = "local"

    def __init__(self, project_root: Path) -> None:
        self.project_root = project_root

    def prepare(self, workload: Workload) -> dict[str, Any]:
        script = workload.folder / workload.run[-1]
        if not script.exists():
            from orchestrator.errors import RunnerError

            raise RunnerError(f"workload {workload.name}: {script} not found")
        return {"runner": "local", "command": list(workload.run)}

    def submit(self, job: SeedJob) -> LocalJob:
        env = proc.child_env(
            {**job.env, "DATADIR": str(job.data_dir), "RESULTS_DIR": str(job.results_dir)},
            pythonpath=self.project_root,
        )
        return LocalJob(proc.spawn(job.argv(), cwd=job.workload.folder, env=env))
