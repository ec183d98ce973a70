"""The runners, one table: each one's name, what it is in a line, and the options only it takes.
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
    """The `RunnerOptions` fields only it takes (each the option --<field with dashes>)."""

    @property
    def flags(self) -> tuple[str, ...]:
        return tuple("--" + option.replace("_", "-") for option in self.options)


RUNNERS = (
    RunnerKind("local", "a subprocess of this host"),
    RunnerKind("docker", "a container of the workload's image",
               ("shm_size", "ipc", "base_image", "rebuild", "drop_caches")),
    RunnerKind("slurm", "a Slurm batch job", ("partition", "nodes", "gpus_per_node")),
    RunnerKind("auto", "docker when an engine answers, else local"),
)
NAMES = tuple(kind.name for kind in RUNNERS)
AUTO = "auto"


def choices_said() -> str:
    """The runners as a help text says them: 'local (a subprocess of this host), docker (...) ...'."""
    return ", ".join(f"{kind.name} ({kind.summary})" for kind in RUNNERS)
