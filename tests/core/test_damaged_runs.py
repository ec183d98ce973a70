"""A damaged or foreign run folder is one line naming the file (exit 2), never an internal error,
and never hides the good runs beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hardware.stored_runs import make_run

DAMAGE = {
    "manifest is a list": ("manifest.json", [1, 2, 3], "field (top level)"),
    "manifest is empty": ("manifest.json", {}, "field run_id"),
    "manifest not JSON": ("manifest.json", "{not json", "unreadable"),
    "negative drop count": ("manifest.json", {"rule": {"drop_per_end": -1, "max_non_converged": 0}}, "field rule"),
    "summary is a list": ("summary.json", [1], "field (top level)"),
    "seed state unknown status": ("seeds/2/state.json", {"seed": 2, "state": "finished", "status": "exploded"},
                                  "field status"),
    "seed state is a number": ("seeds/2/state.json", 7, "field (top level)"),
    "seed record missing status": ("seeds/3/run.json", {"reason": "x"}, "field status"),
}


def damage(run_dir: Path, relative: str, content: object) -> Path:
    path = run_dir / relative
    if relative == "manifest.json" and isinstance(content, dict) and content and "run_id" not in content:
        content = {**json.loads(path.read_text()), **content}  # one bad field in an otherwise good manifest
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_run_is_one_line_naming_the_file_for_show_score_and_list(cli, tmp_path: Path, case: str) -> None:
    relative, content, field = DAMAGE[case]
    results = tmp_path / "results"
    good = make_run(results, label="good", seeds=[1, 2, 3], run_id="run-good")
    bad = make_run(results, label="bad", seeds=[1, 2, 3], run_id="run-bad")
    path = damage(results / bad, relative, content)

    for verb in ("show", "score"):
        r = cli(verb, bad, "--results", str(results))
        assert r.code == 2, (verb, r.err)
        assert str(path) in r.err and field in r.err, r.err
        assert r.err.count("\n") == 1 and "Traceback" not in r.err and "internal error" not in r.err

    listed = cli("list", "--results", str(results), "--json")
    assert listed.code == 2
    assert [row["run_id"] for row in json.loads(listed.out)] == [good]
    assert "run-bad" in listed.err and str(path) in listed.err and "internal error" not in listed.err

    assert cli("show", good, "--results", str(results)).code == 0
    assert cli("compare", good, "--results", str(results), "--json").code == 0
