"""The architecture as tests: the import contracts in pyproject.toml ([tool.importlinter], checked by
import-linter's `lint-imports`) and the rule that only `orchestrator.results.atomic` renames a file
or a folder into place (stage, then rename, then flush the folder)."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]
ATOMIC = PROJECT / "orchestrator" / "results" / "atomic.py"
MODULE_RENAMES = {("os", "replace"), ("os", "rename"), ("shutil", "move")}


def test_the_import_contracts_hold():
    lint = shutil.which("lint-imports")
    if lint is None:
        pytest.fail("import-linter is not installed: install the dev extra (pip install -e '.[workloads,dev]')")
    result = subprocess.run([lint, "--no-cache"], cwd=PROJECT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:]
    assert " 0 broken" in result.stdout and "KEPT" in result.stdout


def renames_in(source: str) -> list[int]:
    """Lines that rename a path: os.replace/os.rename/shutil.move, or ``x.replace(y)``/``x.rename(y)``
    with one argument (Path's; str.replace takes two)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name, owner = node.func.attr, node.func.value
        module_call = isinstance(owner, ast.Name) and (owner.id, name) in MODULE_RENAMES
        path_call = name in ("replace", "rename") and len(node.args) == 1 and not node.keywords
        if module_call or path_call:
            found.append(node.lineno)
    return found


def test_the_rename_finder_finds_each_spelling():
    source = "import os, shutil\nos.replace(a, b)\nos.rename(a, b)\nshutil.move(a, b)\np.replace(t)\np.rename(t)\n" \
             "s.replace('a', 'b')\n"
    assert renames_in(source) == [2, 3, 4, 5, 6]


def test_only_results_atomic_renames_files_into_place():
    offenders = [f"{path.relative_to(PROJECT)}:{line}" for path in sorted((PROJECT / "orchestrator").rglob("*.py"))
                 if path != ATOMIC for line in renames_in(path.read_text())]
    assert not offenders, f"rename through orchestrator.results.atomic.move: {offenders}"
