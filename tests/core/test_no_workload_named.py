"""The orchestrator never names a workload: a workload is a folder with its workload.yaml and its
profiles, and nothing in orchestrator/ decides by a workload's name. MLPerf's benchmark names
(unet3d is both) belong to the one table of MLPerf's rules, `orchestrator/mlperf/benchmarks.py`."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from orchestrator.mlperf import benchmarks

PROJECT = Path(__file__).resolve().parents[2]
ORCHESTRATOR = PROJECT / "orchestrator"
RULES_TABLE = ORCHESTRATOR / "mlperf" / "benchmarks.py"


def workload_names(root: Path) -> set[str]:
    return {path.parent.name for path in root.glob("*/workload.yaml")}


def literals(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module, documentation left out (docstrings and the strings that
    document a field: statements of a string alone, which may give examples)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_the_test_workloads_are_named_nowhere_in_the_orchestrator():
    names = workload_names(PROJECT / "tests" / "workloads")
    assert {"fakebench", "lossbench"} <= names
    pattern = re.compile(rf"\b({'|'.join(sorted(names))})\b")
    found = [f"{path.relative_to(PROJECT)}:{number}: {line.strip()}"
             for path in sorted(ORCHESTRATOR.rglob("*")) if path.is_file() and path.suffix in (".py", ".md", ".csv")
             for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1)
             if pattern.search(line)]
    assert not found, "\n".join(found)


def test_no_code_in_the_orchestrator_decides_by_a_workloads_name():
    names = workload_names(PROJECT / "workloads") | workload_names(PROJECT / "tests" / "workloads")
    assert {"unet3d", "resnet50", "fakebench", "lossbench"} <= names
    mlperf_names = set(benchmarks.names())
    found = []
    for path in sorted(ORCHESTRATOR.rglob("*.py")):
        for number, text in literals(path):
            named = {n for n in names if text == n or f"workloads/{n}" in text}
            if path == RULES_TABLE:
                named -= mlperf_names  # the benchmark, not the workload
            if named:
                found.append(f"{path.relative_to(PROJECT)}:{number}: {text!r}")
    assert not found, "\n".join(found)


def test_the_check_sees_a_name_where_one_is_written(tmp_path: Path):
    module = tmp_path / "module.py"
    module.write_text('"""unet3d in a docstring is an example."""\nKIND = "a"\n"""Field doc: unet3d."""\n'
                      'if name == "unet3d":\n    path = "workloads/resnet50/x"\n')
    assert sorted(text for _, text in literals(module)) == ["a", "unet3d", "workloads/resnet50/x"]
