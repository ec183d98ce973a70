"""Tables at 80 columns: every column at least as wide as its header (the columns that do not fit are
left out and named, --wide shows them all), no cell wrapped onto a second line; -h is --help."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.hardware.stored_runs import make_run

LONG_LABEL = "a-rather-long-label-for-the-a100-nodes"


def header_rows(out: str) -> list[tuple[list[str], int]]:
    """Each table's header cells as printed, and how many lines its header took. A heavy-headed table
    (┏ ┃ ┡) has its cells between ┃; a simple-headed one (a rule of ─ under the header) between runs
    of two spaces or more."""
    lines = out.splitlines()
    found = []
    for index, line in enumerate(lines):
        if line.startswith("┡"):
            top = max(i for i in range(index) if lines[i].startswith("┏"))
            cells = [cell.strip() for cell in lines[top + 1].strip("┃").split("┃")]
            found.append((cells, index - top - 1))
        elif re.fullmatch(r"\s*─{10,}\s*", line):
            above = index - 1
            while above > 0 and lines[above - 1].strip():  # a wrapped header: more lines above the rule
                above -= 1
            cells = [cell for cell in re.split(r"\s{2,}", lines[index - 1].strip()) if cell]
            found.append((cells, index - above))
    return found


def body_rows(out: str) -> list[int]:
    """How many lines each heavy-headed table's body took."""
    lines = out.splitlines()
    counts = []
    for index, line in enumerate(lines):
        if line.startswith("┡"):
            end = next(i for i in range(index, len(lines)) if lines[i].startswith("└"))
            counts.append(end - index - 1)
    return counts


def check_fits(out: str, headers: set[str], columns: int = 80) -> list[str]:
    """Assert the output fits and its tables show whole headers on one line; return the headers shown."""
    assert max(len(line) for line in out.splitlines()) <= columns, out
    tables = header_rows(out)
    assert tables, out
    shown = []
    for cells, lines in tables:
        assert lines == 1, f"a header took {lines} lines:\n{out}"
        assert all(cell in headers for cell in cells), f"{cells} are not whole headers of {sorted(headers)}:\n{out}"
        shown += cells
    return shown


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, str, str]:
    results = tmp_path / "results"
    slow = make_run(results, label=LONG_LABEL, seeds=[1, 2, 3, 4, 5], other_cpu_pct=30.0,
                    env={"FAKE_EPOCH_MS": "1000", "FAKE_MODE": "no_converge", "FAKE_MODE_SEEDS": "2"})
    fast = make_run(results, label="fast", seeds=[1, 2, 3, 4, 5], env={"FAKE_EPOCH_MS": "800"}, other_cpu_pct=1.0)
    return results, slow, fast


LIST_HEADERS = {"run id", "workload", "profile", "label", "runner", "seeds", "converged", "score s", "valid", "state"}
SEED_HEADERS = {"seed", "status", "time-to-train s", "epochs", "counted", "host", "why not"}


def test_list_at_80_columns_chooses_columns_and_wide_shows_them_all(cli, store, monkeypatch) -> None:
    results, slow, _ = store
    monkeypatch.setenv("COLUMNS", "80")
    r = cli("list", "--results", str(results))
    assert r.code == 0, r.err
    shown = check_fits(r.out, LIST_HEADERS)
    assert shown[:2] == ["run id", "profile"] and "score s" in shown and "valid" in shown
    assert slow in r.out  # a run id is never cut
    left_out = sorted(LIST_HEADERS - set(shown))
    assert f"not shown at this width: {', '.join(h for h in LIST_HEADERS_ORDER if h in left_out)}" in " ".join(
        r.out.split())
    assert all(n == 2 for n in body_rows(r.out))  # one line per run
    wide = cli("list", "--results", str(results), "--wide")
    assert set(check_fits(wide.out, LIST_HEADERS, columns=400)) == LIST_HEADERS and LONG_LABEL in wide.out
    assert "not shown" not in wide.out


LIST_HEADERS_ORDER = ("run id", "workload", "profile", "label", "runner", "seeds", "converged", "score s", "valid",
                      "state")


def test_show_at_80_columns_wraps_no_reason_into_the_table(cli, store, monkeypatch) -> None:
    results, slow, _ = store
    monkeypatch.setenv("COLUMNS", "80")
    r = cli("show", slow, "--results", str(results))
    assert r.code == 0, r.err
    long_lines = [line for line in r.out.splitlines() if len(line) > 80]
    assert all(not line.startswith(("┃", "│", "┏", "┡", "└")) for line in long_lines)  # prose, never a table
    shown = check_fits("\n".join(line for line in r.out.splitlines() if len(line) <= 80), SEED_HEADERS)
    assert "host" in shown and body_rows(r.out) == [5]
    said = " ".join(r.out.split())
    assert "seed 2: not_converged: run_stop aborted; best eval_accuracy" in said  # said whole below the table
    wide = cli("show", slow, "--results", str(results), "--wide")
    assert set(check_fits("\n".join(line for line in wide.out.splitlines() if line[:1] in "┏┃┡│└"),
                          SEED_HEADERS, columns=400)) == SEED_HEADERS


def test_compare_at_80_columns(cli, store, monkeypatch) -> None:
    results, _, _ = store
    monkeypatch.setenv("COLUMNS", "80")
    r = cli("compare", "--label", LONG_LABEL, "--label", "fast", "--results", str(results))
    assert r.code == 0, r.err
    shown = check_fits(r.out, {"quantity", "value [95% CI]", "vs baseline", "Welch p", "95% CI of vs baseline",
                               "seeds needed", "what differs", LONG_LABEL, "fast"})
    assert shown.count("quantity") == 2
    wide = cli("compare", "--label", LONG_LABEL, "--label", "fast", "--results", str(results), "--wide")
    shown = check_fits(wide.out, {"setup", "host", "ok/n", "olympic TTT [95% CI]", "speedup [95% CI]",
                                  "per epoch [95% CI]", "Welch p", "seeds needed", "epochs", "energy", "quantity",
                                  "mean [95% CI]", "CV", "vs baseline [95% CI]"}, columns=400)
    assert "energy" in shown and "CV" in shown


def test_qualify_history_at_80_columns(cli, tmp_path: Path, monkeypatch) -> None:
    results = str(tmp_path / "r")
    for node in ("gpu-node-with-a-long-name-07", "b"):
        assert cli("qualify", "--suite", "throughput_only", "--results", results, "--node-name", node,
                   "--expect-gpus", "0").code == 0  # a CPU node, declared so: it may PASS
    monkeypatch.setenv("COLUMNS", "80")
    headers = {"started", "node", "suite", "verdict", "first reason", "throughput_samples_per_s", "bounds"}
    r = cli("qualify", "history", "--results", results)
    assert r.code == 0, r.err
    assert {"started", "node", "verdict"} <= set(check_fits(r.out, headers)) and body_rows(r.out) == [2]
    r = cli("qualify", "history", "--results", results, "--metric", "throughput_samples_per_s")
    assert "throughput_samples_per_s" in check_fits(r.out, headers)


@pytest.mark.parametrize("argv", [["-h"], ["list", "-h"], ["compare", "-h"], ["qualify", "history", "-h"],
                                  ["run", "-h"], ["data", "--help"], ["data", "-h"]])
def test_dash_h_is_help_everywhere(cli, argv: list[str]) -> None:
    r = cli(*argv)
    assert r.code == 0 and "Usage: mltrain" in r.out, r.err
    assert r.out == cli(*[a if a != "-h" else "--help" for a in argv]).out


def test_the_workloads_own_help_is_after_its_name(cli_process) -> None:
    proc = cli_process("data", "fakebench", "--help")
    out, err = proc.communicate(timeout=60)
    assert "synthesize OUT" in out + err and "Usage: mltrain" not in out  # the workload's own tool answered
