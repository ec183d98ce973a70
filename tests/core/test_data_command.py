"""`mltrain data WORKLOAD ...` runs the workload's dataset command line from the user's folder:
relative paths mean what the user standing there means, never the installed workload's folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import DataError, InfrastructureError
from orchestrator.runners.base import DatasetResult

FAKEBENCH = Path(__file__).resolve().parents[1] / "workloads" / "fakebench"


def test_relative_paths_are_the_users(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in FAKEBENCH.iterdir())
    made = cli("data", "fakebench", "synthesize", "ready")
    assert made.code == 0
    assert (tmp_path / "ready").is_dir() and sorted(p.name for p in FAKEBENCH.iterdir()) == before
    checked = cli("data", "fakebench", "check", "ready")
    assert checked.code == 0
    missing = cli("data", "fakebench", "check", "elsewhere")
    assert missing.code != 0  # the folder beside the user, not one inside the workload


@pytest.mark.parametrize(("code", "error", "said"), [
    (2, DataError, "exporting seed 1: seed1/model.pt: a FIFO, not a file"),
    (1, InfrastructureError, "exporting seed 1 failed on this host: seed1/model.pt: a FIFO, not a file"),
    (-9, InfrastructureError, "exporting seed 1 failed on this host: seed1/model.pt: a FIFO, not a file"),
])
def test_a_dataset_commands_failure_is_the_inputs_only_where_it_refused_its_input(code, error, said) -> None:
    """The contract's exit 2 is the input's fault, said as the command's own line wherever it ran
    (before: "failed on this host", exit 2, for a damaged file); another exit is where it ran that
    failed (exit 3), never the input's."""
    result = DatasetResult(returncode=code, stdout="", where="on this host",
                           stderr_tail=("progress", "error: seed1/model.pt: a FIFO, not a file"))
    failure = result.failure("exporting seed 1")
    assert type(failure) is error and str(failure) == said
