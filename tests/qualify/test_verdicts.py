"""The four verdicts and their exit codes: one table, carried alike by the record's JSON, JUnit and
Prometheus, named in the CLI help and the README; records stored before INCONCLUSIVE existed
(schema 1, ``error``) are read as INCONCLUSIVE, and a current record that says ``error`` is refused."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from orchestrator.commands.qualify import qualify
from orchestrator.config.locations import python_root
from orchestrator.errors import EXIT_USAGE
from orchestrator.qualify.judge import exit_code
from orchestrator.qualify.wording import exit_code_help, exit_code_table
from orchestrator.render.junit import junit_xml
from orchestrator.render.prometheus import textfile
from orchestrator.results.qualification import VERDICT_EXIT_CODES, VERDICTS, FleetRecord, Status
from orchestrator.results.store import Store
from tests.qualify.test_outputs import make_record


def test_each_verdict_has_its_own_exit_code_and_none_is_the_usage_code():
    codes = [VERDICT_EXIT_CODES[v] for v in VERDICTS]
    assert dict(zip([v.value for v in VERDICTS], codes, strict=True)) == {"pass": 0, "warn": 4, "fail": 1,
                                                                          "inconclusive": 3}
    assert len(set(codes)) == 4 and EXIT_USAGE not in codes
    assert [exit_code(v, strict=False) for v in VERDICTS] == codes


def test_strict_counts_a_warn_as_a_fail_and_nothing_else_changes():
    assert exit_code(Status.WARN, strict=True) == exit_code(Status.FAIL, strict=False) == 1
    assert [exit_code(v, strict=True) for v in VERDICTS if v is not Status.WARN] == [0, 1, 3]
    assert exit_code(Status.WARN, strict=False, warn_exit_code=0) == 0
    assert exit_code(Status.WARN, strict=True, warn_exit_code=0) == 1


@pytest.mark.parametrize("verdict", VERDICTS)
def test_json_junit_and_prometheus_carry_the_verdict_and_its_code_alike(verdict: Status):
    code = exit_code(verdict, strict=False)
    record = make_record(verdict=verdict).model_copy(update={"exit_code": code})
    as_json = json.loads(json.dumps(record.to_json()))
    properties = {p.get("name"): p.get("value")
                  for p in ET.fromstring(junit_xml([record]).encode()).iter("property")}
    families = {f.name: f.samples for f in text_string_to_metric_families(textfile([record]).decode())}
    shown = {s.labels["verdict"] for s in families["mltrain_qualify_verdict"] if s.value == 1}
    assert (as_json["verdict"], as_json["exit_code"]) == (verdict.value, code)
    assert (properties["verdict"], properties["exit_code"]) == (verdict.value, str(code))
    assert shown == {verdict.value} and families["mltrain_qualify_exit_code"][0].value == code
    assert {s.labels["verdict"] for s in families["mltrain_qualify_verdict"]} == {v.value for v in VERDICTS}


def test_the_cli_help_and_the_readme_give_the_table():
    assert exit_code_help() == "PASS 0, FAIL 1, bad input 2, INCONCLUSIVE 3, WARN 4"
    assert exit_code_help() in " ".join((qualify.__doc__ or "").split())
    readme = (python_root() / "README.md").read_text()
    for code, word, meaning in exit_code_table():
        assert f"| {code} | {word} | {meaning} |" in readme


def old_record(tmp_path: Path) -> dict:
    """A record as schema 1 wrote it: a check, a number and the node that could not run say ``error``."""
    record = make_record(verdict=Status.INCONCLUSIVE).to_json()
    record["schema_version"] = 1
    record["verdict"] = "error"
    record["exit_code"] = 3
    record["checks"][0].update(status="error", sanity="error")
    record["checks"][0]["measurements"][0]["status"] = "error"
    return record


def test_records_of_schema_1_are_read_with_error_as_inconclusive(tmp_path: Path):
    store = Store(tmp_path).qualifications
    folder = store.node_dir("n1")
    folder.mkdir(parents=True)
    (folder / "old.json").write_text(json.dumps(old_record(tmp_path)))
    found = store.history("n1")
    assert found.broken == []
    (record,) = found.records
    check = record.checks[0]
    assert record.schema_version == 2 and record.verdict is Status.INCONCLUSIVE
    assert check.status is check.sanity is check.measurements[0].status is Status.INCONCLUSIVE


def test_a_current_record_saying_error_is_refused_by_name(tmp_path: Path):
    store = Store(tmp_path).qualifications
    folder = store.node_dir("n1")
    folder.mkdir(parents=True)
    record = old_record(tmp_path)
    record["schema_version"] = 2
    (folder / "new.json").write_text(json.dumps(record))
    found = store.history("n1")
    assert found.records == [] and len(found.broken) == 1
    assert "new.json" in found.broken[0] and "verdict" in found.broken[0]


def test_fleet_records_of_schema_1_are_upgraded_too():
    fleet = FleetRecord.model_validate({
        "schema_version": 1, "fleet_id": "f", "suite": "quick", "started_at": "s", "ended_at": "e",
        "verdict": "error", "exit_code": 3, "rows": [{"node": "n1", "hardware": "?", "verdict": "error"}]})
    assert fleet.verdict is fleet.rows[0].verdict is Status.INCONCLUSIVE
