"""Find, make and check a workload's dataset through the workload's own dataset CLI."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from orchestrator.config.locations import data_cache_dir, project_root
from orchestrator.config.profiles import Profile
from orchestrator.config.workloads import Workload
from orchestrator.errors import DataError
from orchestrator.runners import proc

READY_MARKER = ".mltrain-ready"
CHECK_TIMEOUT_S = 600
SYNTHESIZE_TIMEOUT_S = 6 * 3600


def synthetic_dir(workload: Workload, profile: Profile) -> Path:
    """Where a profile's synthetic dataset lives: one folder per distinct set of arguments."""
    digest = hashlib.sha256("\0".join(profile.dataset.args).encode()).hexdigest()[:12]
    return data_cache_dir() / workload.name / f"synthetic-{digest}"


def resolve_data_dir(workload: Workload, profile: Profile, given: Path | None) -> Path:
    """The folder to mount at /data: the user's, else the profile's synthetic one."""
    if given is not None:
        if not given.is_dir():
            how = f" ({workload.data.how_to_get.strip().splitlines()[0]})" if workload.data.how_to_get.strip() else ""
            raise DataError(f"data folder {given} does not exist{how}")
        return given.resolve()
    if profile.dataset.source == "synthetic":
        return synthetic_dir(workload, profile)
    raise DataError(
        f"{workload.name} profile {profile.name!r} needs real data: pass --data DIR"
        f" (see `mltrain data {workload.name} how-to-get`), or use --profile smoke for synthetic data"
    )


def ensure_synthetic(workload: Workload, profile: Profile, folder: Path, *, quiet: bool) -> bool:
    """Make the profile's synthetic dataset unless it is ready; True when it was made now."""
    if (folder / READY_MARKER).is_file():
        return False
    folder.parent.mkdir(parents=True, exist_ok=True)
    argv = [*workload.data.cli, "synthesize", str(folder), *profile.dataset.args]
    result = _call(workload, argv, SYNTHESIZE_TIMEOUT_S, capture=quiet, stdout_to_stderr=True)
    if result.returncode != 0:
        raise DataError(f"making synthetic {workload.name} data failed: {_last_line(result)}")
    return True


def check_data(workload: Workload, folder: Path) -> None:
    """Ask the workload whether ``folder`` is training-ready; its one-line answer on failure."""
    result = _call(workload, [*workload.data.cli, "check", str(folder)], CHECK_TIMEOUT_S, capture=True)
    if result.returncode != 0:
        raise DataError(f"{workload.name} data in {folder}: {_last_line(result)}")


def _call(
    workload: Workload, argv: list[str], timeout_s: float, *, capture: bool, stdout_to_stderr: bool = False,
) -> subprocess.CompletedProcess[str]:
    env = proc.child_env({}, pythonpath=project_root())
    try:
        return proc.run(argv, cwd=workload.folder, env=env, timeout_s=timeout_s, capture=capture,
                        stdout_to_stderr=stdout_to_stderr)
    except subprocess.TimeoutExpired:
        action = argv[len(workload.data.cli)]
        raise DataError(f"{workload.name} dataset command {action} took over {timeout_s:.0f}s") from None
    except OSError as exc:
        raise DataError(f"{workload.name} dataset command {' '.join(workload.data.cli)}: {exc.strerror}") from None


def _last_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in (result.stderr or "").splitlines() if line.strip()]
    if not lines:
        return f"exit status {result.returncode}"
    last = lines[-1]
    return last[len("error:"):].strip() if last.lower().startswith("error:") else last
