"""Make the runner a command asked for (``--runner``: the runners are `orchestrator.runners.kinds`'s table)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.config.locations import project_files, python_root
from orchestrator.errors import UsageError
from orchestrator.runners.base import Runner
from orchestrator.runners.kinds import AUTO, NAMES, RUNNERS
from orchestrator.runners.local import LocalRunner

RUNNER_NAMES = NAMES
RUNNER_FLAGS: dict[str, tuple[str, tuple[str, ...]]] = {
    option: (flag, tuple(k.name for k in RUNNERS if option in k.options))
    for kind in RUNNERS for option, flag in zip(kind.options, kind.flags, strict=True)}
"""The options a user gives that only some runners take: (its flag, those runners)."""


@dataclass(frozen=True, kw_only=True)
class RunnerOptions:
    name: str = "local"
    """One of `kinds.NAMES` (auto: docker when an engine answers, else local)."""
    gpus: str | None = None
    """all, N, device ids such as 0,1, or none (Slurm: N or none); None: the runner's default
    (local: what this shell sees; Slurm: nothing requested; docker: `default_gpus`)."""
    default_gpus: str = "none"
    """What the docker runner asks the engine for when ``gpus`` is None: none for `mltrain run`, all
    for a qualification of a node whose NVML sees GPUs (it qualifies them, not the CPU)."""
    shm_size: str = "1g"
    rebuild: bool = False
    drop_caches: bool = False
    base_image: str | None = None
    """Docker: BASE_IMAGE build argument (None: $MLTRAIN_BASE_IMAGE, else the Dockerfile's default)."""
    ipc: str = "host"
    """Docker: host (as NVIDIA's MLPerf harness) or private (then --shm-size applies)."""
    partition: str | None = None
    """Slurm: the partition to submit to."""
    time_limit_minutes: float = 1440
    """Slurm: the job's own time limit (above the profile's wall-clock limit)."""
    nodelist: str | None = None
    """Slurm: the nodes its jobs run on (`SlurmOptions.nodelist`)."""
    exclusive: bool = False
    """Slurm: each job alone on its node (`SlurmOptions.exclusive`)."""
    nodes: int = 1
    """Slurm: the nodes of one seed (`SlurmOptions.nodes`)."""
    gpus_per_node: int | None = None
    """Slurm: GPUs (ranks) on each node of a seed across nodes."""

    def __post_init__(self) -> None:
        if self.name not in RUNNER_NAMES:
            raise UsageError(f"unknown runner {self.name!r}: choose one of {', '.join(RUNNER_NAMES)}")
        if isinstance(self.nodes, bool) or not isinstance(self.nodes, int) or self.nodes < 1:
            raise UsageError(f"--nodes {self.nodes!r}: give the nodes of one seed, a whole number >= 1")

    def check_for(self, runner: str) -> None:
        """UsageError naming every option given for another runner than ``runner`` (they were
        dropped without a word: `run --runner local --partition gpu --shm-size 2g` exited 0)."""
        defaults = RunnerOptions()
        stray = [(flag, owners) for field, (flag, owners) in RUNNER_FLAGS.items()
                 if runner not in owners and getattr(self, field) != getattr(defaults, field)]
        if not stray:
            return
        parts = []
        for owners in sorted({owners for _, owners in stray}):
            flags = [flag for flag, o in stray if o == owners]
            parts.append(f"{', '.join(flags)} {'is' if len(flags) == 1 else 'are'} for the {' or '.join(owners)}"
                         " runner")
        chose = f" (--runner {AUTO} chose it)" if self.name == AUTO else ""
        raise UsageError(f"{'; '.join(parts)}: this command runs on the {runner} runner{chose}; drop "
                         f"{'it' if len(stray) == 1 else 'them'}, or pick the runner with --runner")


def make_runner(options: RunnerOptions, on_status: Callable[[str], None]) -> Runner:
    """The runner ``options`` name (auto: docker when an engine answers, else local, said on ``on_status``)."""
    name = options.name
    if name == AUTO:
        from orchestrator.runners.docker.engine import engine_status

        up, why = engine_status()
        name = "docker" if up else "local"
        on_status(f"runner: {name} ({why})")
    options.check_for(name)
    return MAKERS[name](options, on_status)


def _local(options: RunnerOptions, on_status: Callable[[str], None]) -> Runner:
    return LocalRunner(python_root(), gpus=options.gpus)


def _slurm(options: RunnerOptions, on_status: Callable[[str], None]) -> Runner:
    from orchestrator.runners.slurm import SlurmRunner

    return SlurmRunner(python_root(), _slurm_options(options))


def _slurm_options(options: RunnerOptions):  # noqa: ANN202 - SlurmOptions, imported with its runner
    from orchestrator.runners.slurm import SlurmOptions

    return SlurmOptions(
        partition=options.partition, gpus=options.gpus, time_limit_minutes=options.time_limit_minutes,
        nodelist=options.nodelist, exclusive=options.exclusive, nodes=options.nodes,
        gpus_per_node=options.gpus_per_node,
    )


def _docker(options: RunnerOptions, on_status: Callable[[str], None]) -> Runner:
    from orchestrator.runners.docker.runner import DockerRunner

    return DockerRunner(
        project_files(), gpus=options.gpus or options.default_gpus, shm_size=options.shm_size, rebuild=options.rebuild,
        drop_caches=options.drop_caches, base_image=options.base_image, ipc=options.ipc, on_status=on_status,
    )


def _slurm_docker(options: RunnerOptions, on_status: Callable[[str], None]) -> Runner:
    from orchestrator.runners.slurm_docker import SlurmDockerRunner

    return SlurmDockerRunner(python_root(), _slurm_options(options), files_root=project_files(),
                             shm_size=options.shm_size, ipc=options.ipc, base_image=options.base_image,
                             rebuild=options.rebuild, on_status=on_status)


MAKERS: dict[str, Callable[[RunnerOptions, Callable[[str], None]], Runner]] = {
    "local": _local, "docker": _docker, "slurm": _slurm, "slurm-docker": _slurm_docker}
"""How each runner of the table (`kinds.RUNNERS`, but auto) is made."""
