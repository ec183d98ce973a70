"""`mltrain list` shows the newest runs (`--last N`, 50 by default): the index gives those rows and
the count of all, not every row of a store of 100,000 runs to show 50 of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.results.index import Index
from orchestrator.results.store import Store
from tests.hardware.stored_runs import make_run


@pytest.fixture
def results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    for n, label in enumerate(("a", "b", "a", "a")):
        make_run(results, label=label, seeds=[1, 2], run_id=f"run-{n}")
    return results


def test_the_newest_rows_are_the_first_of_every_row_and_the_count_is_of_all(results: Path):
    every = Store(results).list()
    assert every.total == 4 and len(every.rows) == 4
    newest = Store(results).list(newest=2)
    assert newest.rows == every.rows[:2] and newest.total == 4
    of_a = Store(results).list(label="a", newest=2)
    assert of_a.rows == [row for row in every.rows if row["label"] == "a"][:2] and of_a.total == 3
    assert Store(results).list(label="a", newest=10).rows == [row for row in every.rows if row["label"] == "a"]


def test_the_table_asks_the_index_for_the_rows_it_shows(cli, results: Path, monkeypatch: pytest.MonkeyPatch):
    asked: list[int | None] = []
    real = Index.runs
    monkeypatch.setattr(Index, "runs", lambda self, **kw: asked.append(kw.get("newest")) or real(self, **kw))
    r = cli("list", "--results", str(results), "--last", "3")
    assert r.code == 0, r.err
    assert asked == [3] and "the newest 3 of 4 runs" in r.out and "1 older run(s) not shown" in r.out
    every = json.loads(cli("list", "--results", str(results), "--json").out)
    assert asked == [3, None] and len(every) == 4
    r = cli("list", "--results", str(results), "--last", "2", "--all")
    assert asked == [3, None, None] and "4 runs" in r.out and "not shown:" not in r.out
