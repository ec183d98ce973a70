"""The runners, one table: each one's name, what it is in a line, and the options it takes that others do not.
The `--runner` choices and help texts, the runner options' checks (`select.RunnerOptions`) and
README's Runners section are derived from it; `select.make_runner` makes each one. Imports
nothing heavy: the commands read it while typer builds their signatures."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunnerKind:
    name: str
    summary: str
    """What it is, in a few words (the help texts)."""
    options: tuple[str, ...] = ()
    """The `RunnerOptions` fields it takes that not every runner does (each the option --<field with dashes>)."""

    @property
    def flags(self) -> tuple[str, ...]:
        return tuple("--" + option.replace("_", "-") for option in self.options)


RUNNERS = (
    RunnerKind("local", "a subprocess of this host"),
    RunnerKind("docker", "a container of the workload's image",
               ("shm_size", "ipc", "base_image", "rebuild", "drop_caches")),
    RunnerKind("slurm", "a Slurm batch job", ("partition", "nodes", "gpus_per_node")),
    RunnerKind("slurm-docker", "a Slurm batch job whose launcher on each node runs in a container of the workload's"
               " image", ("partition", "nodes", "gpus_per_node", "shm_size", "ipc", "base_image", "rebuild")),
    RunnerKind("auto", "docker when an engine answers, else local"),
)
NAMES = tuple(kind.name for kind in RUNNERS)
ACROSS_NODES = tuple(kind.name for kind in RUNNERS if "nodes" in kind.options)
"""The runners whose seeds may span nodes (`--nodes N`)."""
AUTO = "auto"


def choices_said() -> str:
    """The runners as a help text says them: 'local (a subprocess of this host), docker (...) ...'."""
    return ", ".join(f"{kind.name} ({kind.summary})" for kind in RUNNERS)
