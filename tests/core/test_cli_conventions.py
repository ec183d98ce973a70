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
    assert "olympic" in r.out and "fast is 1.25x faster per epoch than slow" in " ".join(r.out.split())


def _piped_to_head(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``mltrain ARGV | head -1`` as a shell runs it; mltrain's own exit status is what is checked."""
    mltrain = f"{sys.executable} -m orchestrator.cli"
    script = f"{mltrain} {' '.join(argv)} | head -1; exit ${{PIPESTATUS[0]}}"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_a_reader_that_leaves_early_ends_the_printing_not_the_command(mltrain_env, tmp_path: Path) -> None:
    import os

    env = {**os.environ, **mltrain_env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    results = tmp_path / "results"
    run_id = make_run(results, label="a", seeds=[1, 2, 3])
    for argv in (["show", run_id], ["show", run_id, "--json"], ["list"], ["compare", run_id]):
        done = _piped_to_head([*argv, "--results", str(results)], env, tmp_path)
        assert done.returncode == 0 and len(done.stdout.splitlines()) == 1, (argv, done.returncode, done.stderr)
        assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
    ran = _piped_to_head(["run", "fakebench", "--seeds", "1-3", "--results", str(results)], env, tmp_path)
    assert ran.returncode == 0, ran.stderr  # the result was VALID; the reader's leaving changes nothing
    assert len([p for p in results.iterdir() if p.is_dir()]) == 2  # the run was stored whole (two runs)


def test_a_closed_standard_output_is_said_and_nothing_runs(mltrain_env, tmp_path: Path) -> None:
    import os

    env = {**os.environ, **mltrain_env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    script = f"{sys.executable} -m orchestrator.cli run fakebench --seeds 1-3 --results {tmp_path / 'r'} >&-"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert done.stderr == ("error: standard output is closed (>&-): nothing mltrain prints could be read; redirect it"
                           " to a file or to /dev/null\n")
    assert not (tmp_path / "r").exists()


def test_a_unicode_label_prints_under_a_narrow_encoding(mltrain_env, tmp_path: Path) -> None:
    import os

    results = tmp_path / "results"
    run_id = make_run(results, label="h\u00e9llo \u2713", seeds=[1, 2, 3])
    env = {**os.environ, **mltrain_env, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "LC_ALL": "C",
           "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": "ascii", "COLUMNS": "300"}
    for argv in (["list"], ["show", run_id], ["compare", "--label", "h\u00e9llo \u2713"]):
        done = subprocess.run([sys.executable, "-m", "orchestrator.cli", *argv, "--results", str(results)],
                              capture_output=True, env=env, timeout=300)
        assert done.returncode == 0, (argv, done.stderr.decode(errors="replace"))
        if argv[0] != "show":  # show names the run by its id
            assert b"h\\xe9llo \\u2713" in done.stdout, (argv, done.stdout[:500])


def test_text_prints_as_given_never_as_an_emoji_or_a_style(cli, tmp_path: Path) -> None:
    """A path, label or reason is data: rich's emoji codes and markup are off on every console."""
    typed = ":x: [bold]a[/bold]"
    r = cli("infer", "resnet50", "--model", str(tmp_path / typed), "--data", str(tmp_path),
            "--results", str(tmp_path / "r"))
    assert r.code == 2 and f"{typed}: no such file" in r.err and "\u274c" not in r.err
    r = cli("run", "fakebench", "--seeds", "1-3", "--label", typed, "--results", str(tmp_path / "r"))
    assert r.code == 0, r.err
    listed = cli("list", "--results", str(tmp_path / "r"))
    assert typed in listed.out and "\u274c" not in listed.out
    assert cli("run", "fakebench", "--seeds", "1-3", "--label", "b", "--results", str(tmp_path / "r")).code == 0
    for wide in ((), ("--wide",)):  # a --wide table is printed by a console of its own width
        compared = cli("compare", "--label", typed, "--label", "b", "--results", str(tmp_path / "r"), *wide)
        assert typed in compared.out and "\u274c" not in compared.out, (wide, compared.out)
