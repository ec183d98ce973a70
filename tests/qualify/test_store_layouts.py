"""Qualification records in an odd or damaged results folder: a stray entry where a node's folder
belongs is named and skipped (as `list` does for a broken run) and never costs a qualification its
record; a record filed under another node's folder is refused, not shown there; a file where the
qualifications' folder belongs, or a folder where a lock file belongs, is one line, exit 2, before
anything is written."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.results.store import Store
from tests.qualify.test_outputs import make_record


def qualify(cli, results: Path, node: str = "n1", *args: str):
    return cli("qualify", "--suite", "throughput_only", "--results", str(results), "--node-name", node,
               "--expect-gpus", "0", *args)  # a CPU node, declared so: it may PASS


def history(cli, results: Path, *args: str):
    return cli("qualify", "history", "--results", str(results), "--json", *args)


def test_a_stray_folder_under_nodes_is_named_and_skipped_and_a_qualification_keeps_its_record(cli, tmp_path: Path):
    results = tmp_path / "results"
    first = qualify(cli, results, "n1", "--json")
    assert first.code == 0, first.err
    stray = results / "qualify" / "nodes" / "lost+found"
    stray.mkdir()
    (results / "qualify" / "nodes" / "notes.txt").write_text("a file someone left")
    r = history(cli, results)
    assert r.code == 2 and [q["node"] for q in json.loads(r.out)] == ["n1"]
    assert f"error: {stray}: not a node's folder (a node name is letters, digits, '.', '_' and '-'); skipped" in r.err
    assert "notes.txt: a file, not a node's folder; skipped" in r.err
    again = qualify(cli, results, "n1", "--json")
    assert again.code == 0, again.err  # not exit 2 at its end, as it was, with its record lost
    assert (results / "qualify" / "nodes" / "n1" / f"{json.loads(again.out)['qualification_id']}.json").is_file()


def test_a_record_under_another_nodes_folder_is_refused_by_name(cli, tmp_path: Path):
    results = tmp_path / "results"
    store = Store(results).qualifications
    store.save(make_record(node="n1"))
    moved = make_record(node="n2")
    wrong = store.node_dir("n1") / f"{moved.qualification_id}.json"
    wrong.write_text(json.dumps(moved.to_json()))
    found = store.history()
    assert [r.node for r in found.records] == ["n1"]
    assert found.broken == [f"{wrong}: field node: 'n2' is not its folder's node 'n1'; move the file to its node's"
                            " folder or remove it"]
    r = history(cli, results, "--node", "n1")
    assert r.code == 2 and [q["node"] for q in json.loads(r.out)] == ["n1"]


def test_nodes_that_is_a_file_is_one_line_before_anything_is_written(cli, tmp_path: Path):
    results = tmp_path / "results"
    (results / "qualify").mkdir(parents=True)
    nodes = results / "qualify" / "nodes"
    nodes.write_text("")
    r = history(cli, results)
    assert r.code == 2 and r.err.splitlines() == [
        f"error: {nodes} is a file where a folder of qualifications belongs; move it away"]
    r = qualify(cli, results)
    assert r.code == 2 and r.err.splitlines()[-1].endswith(f": {nodes} is a file where a folder belongs; move it away")
    assert sorted(p.name for p in results.rglob("*")) == ["nodes", "qualify"]


def test_an_old_lock_that_is_a_folder_is_one_line_before_anything_is_written(cli, tmp_path: Path):
    results = tmp_path / "results"
    old = results / "qualify" / "nodes" / "n1" / "n1-quick-old" / "qualify.lock"
    old.mkdir(parents=True)
    r = qualify(cli, results)
    assert r.code == 2 and r.err.splitlines()[-1] == (f"error: {old} is a folder, not a file mltrain wrote: remove it"
                                                      " (or move it away) and try again")
    assert [p.name for p in (results / "qualify" / "nodes" / "n1").iterdir()] == ["n1-quick-old"]
    assert old.is_dir()
