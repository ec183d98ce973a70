"""Hostile logs and folders for import and export (issue 13): each is exit 2 with one line naming
the file or field and what to do, no traceback, nothing written (the results folder and the export
target are byte-for-byte as they were), and the store still lists and compares its good runs."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.results.index import SETTLE_NS
from orchestrator.results.store import Store

from .published_layout import Run, resnet_log, write_benchmark

GOOD = "good"


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file below ``folder``: size and modification time (nanoseconds)."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def logs(folder: Path, n: int = 5, **override: str) -> Path:
    """``n`` good resnet logs as result_<i>.txt; ``override`` maps a file name to its text."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"result_{i}.txt").write_text(resnet_log(Run(epochs=36, epoch_ms=60_000 + i, seed=i)))
    for name, text in override.items():
        (folder / name).write_text(text)
    return folder


def text_epoch() -> str:
    """A log whose last epoch is numbered with a word."""
    return resnet_log(Run(epochs=36, epoch_ms=60_000, seed=9)).replace('"epoch_num": 36}', '"epoch_num": "late"}', 1)


def nan_in(text: str, key: str, field: str = "time_ms", value: str = "NaN") -> str:
    """The first ``key`` event of a log with ``field`` set to a raw JSON token (NaN, Infinity, 1e300)."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if f'"key": "{key}"' in line)
    record = json.loads(lines[at].split(":::MLLOG ", 1)[1])
    record[field] = "@@"
    lines[at] = ":::MLLOG " + json.dumps(record).replace('"@@"', value)
    return "\n".join(lines) + "\n"


GOOD_LOG = resnet_log(Run(epochs=36, epoch_ms=60_000, seed=9))

IMPORTS: list[tuple[str, Callable[[Path], Path], str]] = [
    ("nan time_ms", lambda d: logs(d, **{"result_2.txt": nan_in(GOOD_LOG, "run_start")}),
     "result_2.txt line 21: run_start: time_ms nan is not a finite number of milliseconds; fix or remove the file"),
    ("infinite time_ms", lambda d: logs(d, **{"result_3.txt": nan_in(GOOD_LOG, "run_stop", value="Infinity")}),
     "run_stop: time_ms inf is not a finite number of milliseconds"),
    ("huge time_ms", lambda d: logs(d, **{"result_1.txt": nan_in(GOOD_LOG, "run_stop", value="1e300")}),
     "run_stop: time_ms 1e+300 is not a finite number of milliseconds"),
    ("time_ms beyond SQLite's integer", lambda d: logs(d, **{"result_1.txt": nan_in(GOOD_LOG, "run_stop",
                                                                                   value=str(2**64))}),
     f"run_stop: time_ms {2**64} is not a finite number of milliseconds"),
    ("non-numeric epoch_num", lambda d: logs(d, **{"result_4.txt": text_epoch()}),
     "epoch_start: epoch_num \"late\" is not a number; fix or remove the file"),
    ("NaN seed", lambda d: logs(d, **{"result_0.txt": nan_in(GOOD_LOG, "seed", field="value")}),
     "result_0.txt line 8: seed nan is not an integer"),
    ("eval_accuracy not a number", lambda d: logs(d, **{"result_0.txt": nan_in(GOOD_LOG, "eval_accuracy",
                                                                                field="value", value='"high"')}),
     'eval_accuracy "high" is not a number'),
    ("result_N overflows", lambda d: logs(d, **{"result_99999999999999999999.txt": GOOD_LOG}),
     "result_99999999999999999999.txt: run number 99999999999999999999 is too large (at most 999999): rename the file"),
    ("result_1 beside result_01", lambda d: logs(d, **{"result_01.txt": GOOD_LOG}),
     "result_01.txt and result_1.txt both number run 1: keep one of them"),
    ("both naming schemes", lambda d: logs(d, **{"240425101502_1.log": GOOD_LOG}),
     "mixes result_<n>.txt and <DATESTAMP>_<N>.log files"),
    ("a 20 MB MLLOG line", lambda d: logs(d, **{"result_2.txt": GOOD_LOG.replace(
        ':::MLLOG {', ':::MLLOG {"pad": "' + "x" * 20_000_000 + '", ', 1)}),
     "result_2.txt line 1: an MLLOG line of 20,000,"),
    ("scaling.json not JSON", lambda d: logs(d, **{"scaling.json": "{scaling"}),
     "scaling.json: not a scaling.json"),
    ("scaling.json negative", lambda d: logs(d, **{"scaling.json": '{"scaling_factor": -2}'}),
     "scaling.json: scaling_factor -2 is not a positive number"),
    ("scaling.json nested 100,000 deep", lambda d: logs(d, **{"scaling.json": '{"scaling_factor": '
                                                                  + "[" * 100_000 + "]" * 100_000 + "}"}),
     "scaling.json: not a scaling.json (JSON nested deeper than"),
]


@pytest.fixture(scope="module")
def good_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results folder holding one good imported run labelled 'good' (made once)."""
    from orchestrator.cli import main

    root = tmp_path_factory.mktemp("good")
    results = root / "results"
    os.environ["MLTRAIN_WORKLOADS"] = str(Path(__file__).parents[1] / "workloads")
    try:
        code = main(["-q", "import", str(logs(root / "logs")), "--benchmark", "resnet", "--label", GOOD,
                     "--results", str(results)])
    finally:
        os.environ.pop("MLTRAIN_WORKLOADS")
    assert code == 0
    # Settled, as a store is some seconds after its last write: the folder's time is older than the index's
    # full check by more than SETTLE_NS, so a read of a copy (copytree keeps the folder's time) writes nothing.
    settled = time.time_ns() - 2 * SETTLE_NS
    os.utime(results, ns=(settled, settled))
    assert main(["-q", "list", "--results", str(results)]) == 0
    return results


@pytest.fixture
def store(good_store: Path, tmp_path: Path) -> Path:
    """A copy of the good results folder for one test to throw things at."""
    return Path(shutil.copytree(good_store, tmp_path / "results"))


def assert_clean_refusal(r, expected: str) -> None:
    assert r.code == 2, (r.code, r.err)
    assert r.err.count("\n") == 1 and r.err.startswith("error: "), r.err
    assert "Traceback" not in r.err and "internal error" not in r.err
    assert expected in r.err, r.err


def assert_store_still_works(cli, results: Path) -> None:
    listed = cli("list", "--results", str(results), "--json")
    assert listed.code == 0, listed.err
    assert [row["label"] for row in json.loads(listed.out)] == [GOOD]
    compared = cli("compare", "--label", GOOD, "--results", str(results), "--json")
    assert compared.code == 0 and json.loads(compared.out)["rows"][0]["name"] == GOOD


@pytest.mark.parametrize(("case", "make", "expected"), IMPORTS, ids=[c[0] for c in IMPORTS])
def test_hostile_import_is_refused_whole(store: Path, tmp_path: Path, cli, case, make, expected):
    folder = make(tmp_path / "hostile")
    before = snapshot(store)
    r = cli("import", str(folder), "--benchmark", "resnet", "--results", str(store))
    assert_clean_refusal(r, expected)
    assert snapshot(store) == before
    assert_store_still_works(cli, store)


def test_an_import_into_a_new_results_folder_writes_nothing_when_refused(tmp_path: Path, cli):
    folder = logs(tmp_path / "hostile", **{"result_01.txt": GOOD_LOG})
    results = tmp_path / "fresh"
    r = cli("import", str(folder), "--benchmark", "resnet", "--results", str(results))
    assert r.code == 2 and not results.exists()


def test_a_bad_system_description_is_refused(store: Path, tmp_path: Path, cli):
    root = tmp_path / "sub"
    write_benchmark(root, "sys", "resnet", {f"result_{i}.txt": GOOD_LOG.replace('"value": 9,', f'"value": {i},')
                                            for i in range(5)})
    (root / "systems" / "sys.json").write_text("[1, 2")
    before = snapshot(store)
    r = cli("import", str(root), "--benchmark", "resnet", "--results", str(store))
    assert_clean_refusal(r, "systems/sys.json: not a JSON system description")
    assert snapshot(store) == before


def test_import_with_an_unknown_ruleset(store: Path, tmp_path: Path, cli):
    r = cli("import", str(logs(tmp_path / "x")), "--benchmark", "resnet", "--ruleset", "9.9.9", "--results", str(store))
    assert_clean_refusal(r, "--ruleset 9.9.9: mlperf-logging knows training rulesets 1.0.0, ")


def good_run_id(results: Path) -> str:
    return Store(results).list(label=GOOD).rows[0]["run_id"]


@pytest.mark.parametrize(("ruleset", "expected"), [
    ("9.9.9", "--ruleset 9.9.9: mlperf-logging knows training rulesets"),
    ("5.0.0", "--ruleset 5.0.0: resnet is not a benchmark of training 5.0.0; use one of 1.0.0"),
])
def test_export_with_a_bad_ruleset_writes_nothing(store: Path, tmp_path: Path, cli, ruleset, expected):
    target = tmp_path / "export"
    before = snapshot(store)
    r = cli("export", good_run_id(store), "--mlcommons", str(target), "--ruleset", ruleset, "--results", str(store))
    assert_clean_refusal(r, expected)
    assert not target.exists() and snapshot(store) == before


def test_export_never_writes_outside_its_target(store: Path, tmp_path: Path, cli):
    """A manifest whose benchmark is '../../../x' would have made export write outside the target."""
    run_id = good_run_id(store)
    manifest = store / run_id / "manifest.json"
    data = json.loads(manifest.read_text())
    data["benchmark"] = "../../../x"
    manifest.write_text(json.dumps(data))
    target = tmp_path / "deep" / "a" / "b" / "export"
    everything_before = snapshot(tmp_path)
    r = cli("export", run_id, "--mlcommons", str(target), "--results", str(store))
    assert_clean_refusal(r, "manifest.json: field benchmark '../../../x' is not an MLPerf training benchmark name")
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("results/")} == \
        {k: v for k, v in everything_before.items() if not k.startswith("results/")}
    assert not (tmp_path / "deep").exists() and not (tmp_path / "x").exists()


def test_a_good_export_is_whole_and_carries_the_logged_division(store: Path, tmp_path: Path, cli):
    target = tmp_path / "export"
    r = cli("export", good_run_id(store), "--mlcommons", str(target), "--results", str(store), "--json")
    assert r.code == 0, r.err
    written = json.loads(r.out)
    assert written["division"] == "closed" and written["same_score"]
    assert json.loads(Path(written["system_file"]).read_text())["division"] == "closed"
    assert sorted(os.listdir(target)) == ["results", "systems"]  # no staging folder left behind


def test_a_checker_that_raises_on_a_log_is_that_logs_verdict(tmp_path: Path):
    """mlperf_logging evaluates rule strings against whatever a log holds; where one raises (an
    accuracy compared with a number it is not), that is the verdict, not an internal error."""
    from orchestrator.mlperf import checkers

    log = tmp_path / "result_0.txt"
    log.write_text(nan_in(GOOD_LOG, "eval_accuracy", field="value", value='{"a": 1}'))
    report = checkers.compliance(log, "4.0.0")
    assert not report.valid and report.errors[0].startswith("the compliance checker failed on this log: TypeError")
    with pytest.raises(checkers.ToolFailed, match="the result summarizer failed on"):
        checkers.summarizer_score(tmp_path, "resnet", "4.0.0")
    assert checkers.compliance(tmp_path / "result_0.txt", "4.0.0").errors == report.errors  # no state left behind


def test_a_seed_log_with_an_overlong_mllog_line_is_judged_at_once(tmp_path: Path):
    """mlperf_logging's reader applies a regex quadratic in a line's length (a 0.25 MB line: 99 s):
    a seed's own log holding such a line is not handed to it; the verdict says why."""
    import time

    from orchestrator.mlperf import mllog
    from orchestrator.mlperf.compliance import check_seed
    from orchestrator.mlperf.quality import Goal

    log = tmp_path / "output.log"
    log.write_text(GOOD_LOG.replace(':::MLLOG {', ':::MLLOG {"pad": "' + "x" * 2_000_000 + '", ', 1))
    goal = Goal(target=0.759, metric="eval_accuracy")
    record = mllog.build_record(mllog.parse_lines(GOOD_LOG.splitlines()), goal=goal)
    started = time.monotonic()
    judged = check_seed(record, log, profile="qualify", goal=goal, reference_target=0.759, synthetic_data=False,
                        ruleset="4.0.0")
    assert time.monotonic() - started < 10
    assert not judged.compliance.valid and judged.compliance.reason.startswith("line 1: an MLLOG line longer than")
