"""One JSON reader (`orchestrator.config.reading`) bounds every document mltrain reads, stored,
imported or printed, in size and depth, and names the file: JSON nested 30,000-100,000 deep was
"internal error: RecursionError" in `list`, `qualify history`, `import` and a seed's output line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.config.reading import JsonProblem, parse_json

DEEP = 50_000


def deep(levels: int = DEEP) -> str:
    return "[" * levels + "]" * levels


def test_the_reader_refuses_what_is_too_deep_or_too_large():
    assert parse_json('{"a": [[1]]}') == {"a": [[1]]}
    for text in (deep(), deep(65), '{"a": ' * 900 + "1" + "}" * 900):
        with pytest.raises(JsonProblem, match="nested deeper than 64 levels"):
            parse_json(text)
    assert parse_json(deep(64)) is not None
    with pytest.raises(JsonProblem, match="more than the 8 read"):
        parse_json("[1, 2, 3, 4]", max_bytes=8)


def test_list_names_a_record_nested_too_deep_and_lists_the_others(cli, tmp_path: Path):
    results = tmp_path / "r"
    ids = [json.loads(cli("run", "fakebench", "--seeds", "1-3", "--results", str(results), "--json").out)["run_id"]
           for _ in range(2)]
    broken = results / ids[0] / "manifest.json"
    broken.write_text(deep())
    r = cli("list", "--results", str(results), "--json")
    assert r.code == 2 and [row["run_id"] for row in json.loads(r.out)] == [ids[1]]
    assert f"{broken}: unreadable (JSON nested deeper than 64 levels)" in r.err and "internal" not in r.err


def test_qualify_history_names_a_record_nested_too_deep(cli, tmp_path: Path):
    results = tmp_path / "r"
    assert cli("qualify", "--suite", "throughput_only", "--results", str(results), "--node-name", "a",
               "--expect-gpus", "0").code == 0  # a CPU node, declared so: it may PASS
    record = next((results / "qualify" / "nodes" / "a").glob("*.json"))
    record.write_text('{"node": ' + deep() + "}")
    r = cli("qualify", "history", "--results", str(results))
    assert r.code == 2 and f"{record}: unreadable (JSON nested deeper than 64 levels)" in r.err, r.err


def test_an_imported_log_with_a_line_nested_too_deep_is_refused_in_one_line(cli, tmp_path: Path):
    logs = tmp_path / "logs"
    logs.mkdir()
    line = (':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "x", "value": '
            + deep(30_000) + ', "metadata": {}}\n')
    (logs / "result_0.txt").write_text(line)
    r = cli("import", str(logs), "--benchmark", "unet3d", "--results", str(tmp_path / "r"))
    assert r.code == 2 and r.err.count("\n") == 1 and "internal" not in r.err, r.err


def test_a_seed_printing_a_line_nested_too_deep_runs_to_the_end_and_is_judged(cli, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch):
    """mltrain's reader passes the line over (not an MLLOG event); MLCommons' compliance checker
    crashes on it, which is its verdict on the seed, said as such: the run ends, stored and listed."""
    monkeypatch.setenv("FAKE_NESTED_LINE", "30000")
    r = cli("run", "fakebench", "--seeds", "1-3", "--results", str(tmp_path / "r"), "--json")
    assert r.code == 1 and "internal error" not in r.err, r.err
    run_id = json.loads(r.out)["run_id"]
    shown = cli("show", run_id, "--results", str(tmp_path / "r"), "--json")
    assert shown.code == 0 and "RecursionError" in shown.out
    listed = cli("list", "--results", str(tmp_path / "r"), "--json")
    assert [row["run_id"] for row in json.loads(listed.out)] == [run_id]
