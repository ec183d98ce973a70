"""Every command's --help at 80 columns: lines wrapped between words (never cut with an ellipsis nor
boxed), paragraphs filled rather than broken where the source broke them, flags without a type, and
a dataset command line's help under the name the user typed."""

from __future__ import annotations

import pytest

COMMANDS = ("run", "list", "show", "score", "import", "data", "build", "clean", "sysinfo", "compare", "report",
            "export", "qualify", "infer")


@pytest.mark.parametrize("command", COMMANDS)
def test_help_fits_80_columns_whole(cli, monkeypatch, command):
    monkeypatch.setenv("COLUMNS", "80")
    r = cli(command, "--help")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert "…" not in r.out and "│" not in r.out  # nothing cut short, no box
    assert "<bool>" not in r.out and " range>" not in r.out
    assert not any(line.lstrip().startswith("--") and "list[str]>" in line for line in lines)  # options name a value


def test_the_command_list_says_each_command_whole(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    listed = cli("--help").out.split("Commands:")[1]
    assert "..." not in listed and all(len(line) <= 80 for line in listed.splitlines())
    assert "  compare  Compare setups, or published results, side by side." in listed


def test_help_paragraphs_are_filled_and_nothing_is_cut(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    shown = cli("sysinfo", "--help").out
    assert "<FOLDER>/<system-name>.json" in shown and "--interval SECONDS" in shown
    described = cli("compare", "--help").out.split("\n\n")[1]  # the docstring's first paragraph, refilled
    assert described.splitlines()[0].startswith("  Compare setups: what differs between them and whether their")


def test_a_dataset_help_names_the_command_the_user_typed(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    r = cli("data", "unet3d", "--help")
    assert r.code == 0, r.err
    assert "python -m" not in r.out and "usage: mltrain data unet3d [-h]" in r.out
    r = cli("data", "unet3d", "synthesize", "--help")
    assert r.code == 0 and r.out.startswith("usage: mltrain data unet3d synthesize [-h]")
