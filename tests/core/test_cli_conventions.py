"""CLI conventions: --version, -q, stdout holding only JSON with --json, light --help, tables that
stay readable at 80 columns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator import __version__
from tests.hardware.stored_runs import make_run

HEAVY = ("scipy", "matplotlib", "docker", "mlperf_logging", "numpy", "torch", "requests")


def test_version(cli) -> None:
    r = cli("--version")
    assert r.code == 0 and r.out.strip() == f"mltrain {__version__}"


def test_building_the_cli_imports_nothing_heavy() -> None:
    """--help and completion load the app; the domain's heavy imports wait for a command."""
    code = ("import sys; from orchestrator.cli import build_app; build_app(); "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "", f"building the CLI imported {loaded}"


def test_run_json_stdout_is_only_json_even_when_data_is_made(cli_process, tmp_path: Path) -> None:
    proc = cli_process("run", "fakebench", "--profile", "smoke", "--results", str(tmp_path / "r"), "--json")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out)["valid"] is True
    assert "wrote" in err  # the dataset tool's own report went to stderr


def test_quiet_keeps_status_off_stderr(cli, tmp_path: Path) -> None:
    loud = cli("run", "fakebench", "--seeds", "1-3", "--results", str(tmp_path / "a"))
    quiet = cli("-q", "run", "fakebench", "--seeds", "1-3", "--results", str(tmp_path / "b"))
    assert loud.code == quiet.code == 0
    assert "seed 1:" in loud.err and quiet.err == ""
    assert "result: VALID" in quiet.out


@pytest.mark.parametrize("columns", [80, 200])
def test_compare_fits_the_terminal(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    results = tmp_path / "results"
    make_run(results, label="slow", seeds=[1, 2, 3, 4, 5], env={"FAKE_EPOCH_MS": "1000"})
    make_run(results, label="fast", seeds=[1, 2, 3, 4, 5], env={"FAKE_EPOCH_MS": "800"})
    monkeypatch.setenv("COLUMNS", str(columns))
    r = cli("compare", "--label", "slow", "--label", "fast", "--results", str(results))
    assert r.code == 0, r.err
    widest = max(len(line) for line in r.out.splitlines())
    assert widest <= columns, f"{widest} > {columns}:\n{r.out}"
    assert "olympic" in r.out and "fast vs slow" in r.out
