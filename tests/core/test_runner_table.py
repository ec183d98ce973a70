"""The runners are one table (`orchestrator.runners.kinds`): the --runner choices and help texts, the
options only one runner takes and README's Runners section all follow it, and each runner in it is made."""

from __future__ import annotations

import re

import pytest

from orchestrator.config.locations import python_root
from orchestrator.errors import UsageError
from orchestrator.runners.kinds import AUTO, NAMES, RUNNERS
from orchestrator.runners.select import MAKERS, RunnerOptions


def test_each_runner_of_the_table_is_made_and_offered_with_what_it_is(cli, monkeypatch):
    assert set(MAKERS) == set(NAMES) - {AUTO}
    monkeypatch.setenv("COLUMNS", "200")
    for command in ("run", "infer", "qualify", "export"):
        shown = re.sub(r"(?<=\w)- (?=\w)", "-", " ".join(cli(command, "--help").out.split()))  # wrapped at a hyphen
        assert f"--runner <{'|'.join(NAMES)}>" in shown, command
        assert all(f"{kind.name} ({kind.summary})" in shown for kind in RUNNERS), command


def test_an_option_of_another_runner_is_refused_by_the_tables_flags():
    for kind in RUNNERS:
        for option, flag in zip(kind.options, kind.flags, strict=True):
            given = RunnerOptions(name="local", **{option: {"nodes": 2, "rebuild": True, "drop_caches": True}.get(
                option, "x")})
            owners = " or ".join(k.name for k in RUNNERS if option in k.options)
            with pytest.raises(UsageError, match=f"{flag} is for the {owners} runner"):
                given.check_for("local")


def test_the_readme_lists_the_runners_of_the_table_in_its_order():
    readme = (python_root() / "README.md").read_text()
    section = readme.split("\n## Runners\n", 1)[1].split("\n## ", 1)[0]
    listed = list(dict.fromkeys(re.findall(r"^- `--runner ([\w-]+)", section, re.M)))
    assert listed == list(NAMES)
