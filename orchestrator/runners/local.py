"""Run jobs as subprocesses of this host.

Each job runs in its own process group, dies with mltrain (`proc.spawn`), and carries its run id
in its environment, by which `stop_leftovers` finds what a killed mltrain left of the run (the
children of a job's process, which outlive it).

A job is over when its process is: whatever it started that still runs then (a ``setsid`` daemon,
a child that left the group) carries the job's own mark and is stopped and named (`LocalJob.leftovers`).
Its output ends when its process has ended and nothing wrote for `LEFTOVER_GRACE_S`: a daemon that
holds the output pipe kept a converged seed waiting until its limit, then recorded it crashed."""

from __future__ import annotations

import os
import re
import select
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.results.records import Exit
from orchestrator.runners import proc
from orchestrator.runners.base import Bundle, DatasetArg, DatasetResult, Job, JobSpec, Runner, host_argv
from orchestrator.runners.gpus import CUDA_VISIBLE_DEVICES, device_order_env, parse_gpus, visible_devices

_CHUNK = 65536
LEFTOVER_GRACE_S = 3.0
"""After a job's process ended, how long its output may still come before what holds it is stopped."""


class LocalJob(Job):
    def __init__(self, process: subprocess.Popen[bytes], mark: str = "") -> None:
        self.process = process
        self.job_id = f"pid:{process.pid}"
        self.mark = mark
        """The job's own mark (`proc.JOB_MARK_ENV`) in every process it starts."""
        self.leftovers: list[str] = []
        """Processes the job left running after its own had ended, which were stopped."""
        self._cancel_lock = threading.Lock()

    def stream(self) -> Iterator[bytes]:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        ended_at: float | None = None
        while True:
            if ended_at is None and self.process.poll() is not None:
                ended_at = time.monotonic()
            wait_s = 0.5 if ended_at is None else max(0.0, ended_at + LEFTOVER_GRACE_S - time.monotonic())
            if select.select([fd], [], [], wait_s)[0]:
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    return
                yield chunk
                continue
            if ended_at is not None and time.monotonic() >= ended_at + LEFTOVER_GRACE_S:
                self._stop_leftovers()  # what holds the output past the job's end; their ends close it
                if not select.select([fd], [], [], LEFTOVER_GRACE_S)[0]:
                    return  # held by something without the mark: the output ends here all the same
                ended_at = time.monotonic()

    def wait(self) -> Exit:
        code = self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stop_leftovers()  # a daemon that does not hold the output outlives the job all the same
        return Exit(code=code, detail=f"killed by signal {-code}" if code < 0 else "")

    def _stop_leftovers(self) -> None:
        if self.mark:
            self.leftovers += [p for p in proc.stop_marked(self.mark) if p not in self.leftovers]

    def cancel(self) -> None:
        with self._cancel_lock:
            proc.stop_group(self.process)


class LocalRunner(Runner):
    """The job's command on this machine, one job at a time.

    ``--gpus`` becomes ``CUDA_VISIBLE_DEVICES`` (device ids as given, a count the first N of the
    devices this shell sees, none an empty list); without ``--gpus`` the seeds see what this
    shell sees.
    """

    name = "local"

    def __init__(self, project_root: Path, gpus: str | None = None) -> None:
        self.project_root = project_root
        self.gpus = parse_gpus(gpus) if gpus is not None else None
        inherited = visible_devices(os.environ)
        devices = self.gpus.devices(inherited) if self.gpus is not None else inherited
        self.sampled_gpus = devices
        # What the seeds get on top of this shell's environment: only where --gpus narrows it.
        self.gpu_env = {CUDA_VISIBLE_DEVICES: ",".join(devices)} if devices not in (None, inherited) else {}

    def check_job(self, spec: JobSpec) -> None:
        proc.check_program(spec.command, spec.where_declared())
        script = _script(spec.command)
        if script is not None and not (spec.bundle.folder / script).exists():
            raise ConfigError(f"{spec.where_declared()}: {spec.bundle.folder / script} not found")

    def prepare(self, bundle: Bundle) -> dict[str, Any]:
        return {
            "runner": "local",
            "command": list(bundle.run),
            "gpus": self.gpus.spec if self.gpus is not None else None,
            "cuda_visible_devices": self.gpu_env.get(CUDA_VISIBLE_DEVICES, os.environ.get(CUDA_VISIBLE_DEVICES)),
        }

    def stop_leftovers(self, run_id: str) -> list[str]:
        return [f"process {pid}" for pid in proc.kill_marked(run_id)]

    def submit(self, spec: JobSpec) -> LocalJob:
        mark = f"{spec.run_id}/{spec.name}/{uuid.uuid4().hex[:12]}"
        env = proc.child_env(
            {**device_order_env(), **spec.env, **self.gpu_env, "DATADIR": str(spec.data_dir),
             "RESULTS_DIR": str(spec.results_dir), proc.MARK_ENV: spec.run_id, proc.JOB_MARK_ENV: mark},
            pythonpath=self.project_root,
        )
        return LocalJob(proc.spawn(spec.argv(), cwd=spec.bundle.folder, env=env), mark)

    def dataset_command(
        self, bundle: Bundle, args: Sequence[DatasetArg], *, timeout_s: float, on_line: Callable[[str], None],
    ) -> DatasetResult:
        env = proc.child_env(device_order_env(), pythonpath=self.project_root)
        result = proc.run_streaming([*bundle.data.cli, *host_argv(args)], cwd=bundle.folder, env=env,
                                    timeout_s=timeout_s, on_line=on_line)
        return DatasetResult.of(result, "on this host")


_INTERPRETER = re.compile(r"(?:ba|da|k|z)?sh|python(?:\d+(?:\.\d+)*)?")
"""Programs whose first operand is a file they run (``bash run_and_time.sh``, ``python3 -u train.py``)."""
_NO_FILE = ("-c", "-m")
"""An interpreter's options after which it runs no file (code, a module)."""
_VALUE_NEXT = ("-W", "-X", "-o", "-O")
"""An interpreter's options whose value is the next word (python's warnings and -X, the shell's set -o)."""


def _script(command: Sequence[str]) -> str | None:
    """The file of the bundle's folder a declared command runs: the first operand of an interpreter
    (``bash run_and_time.sh``, ``python3 -u train.py``), or None where there is none: an interpreter
    told to run code or a module (``-c``, ``-m``), or a program that is not an interpreter, whose
    words are its own (``sleep 1000``)."""
    if not command or not _INTERPRETER.fullmatch(Path(command[0]).name):
        return None
    words = iter(command[1:])
    for word in words:
        if word in _NO_FILE:
            return None
        if word in _VALUE_NEXT:
            next(words, None)
        elif word == "-" or not word.startswith("-"):
            return None if word == "-" else word
    return None
