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


# ---------------------------------------------------------------- no import cycle, at run time


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that runs: at the top, in a function, in a branch; not one under
    ``if TYPE_CHECKING:`` (its ``else:`` runs)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The modules an import statement may load: ``from a.b import c`` loads a.b and, if it is one, a.b.c."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[:len(parts) - (node.level - 1)]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports at run time (and the packages above them, whose
    ``__init__`` an import runs too)."""
    files = {module_name(p, root): p for package in packages for p in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            for target in _targets(node, name, path.name == "__init__.py"):
                parts = target.split(".")
                for end in range(1, len(parts) + 1):
                    found = ".".join(parts[:end])
                    if found in files and found != name:
                        graph[name].add(found)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(found)


def test_the_cycle_finder_counts_imports_in_functions_and_not_type_checking_ones(tmp_path: Path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def f():\n    from pkg.c import g\n")
    (package / "c.py").write_text("from . import a\n")
    (package / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import e\n")
    (package / "e.py").write_text("import pkg.d\n")
    assert cycles(import_graph(tmp_path, ("pkg",))) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_no_import_cycle_at_run_time():
    """No module of orchestrator/ or workloads/ imports itself through others, imports inside functions
    counted (they run), those under ``if TYPE_CHECKING:`` not (they never do)."""
    found = cycles(import_graph(PROJECT, ("orchestrator", "workloads")))
    assert not found, "runtime import cycles:\n" + "\n".join(f"{len(c)}: {' '.join(c)}" for c in found)


# ---------------------------------------------------------------- typed models built at first use


def eager_models(source: str) -> list[int]:
    """Lines of a ``ConfigDict(...)`` without ``defer_build=True``, and of classes deriving straight
    from ``BaseModel`` that set no ``model_config``: models whose validators are built at import."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ConfigDict":
            deferred = any(k.arg == "defer_build" and isinstance(k.value, ast.Constant) and k.value.value is True
                           for k in node.keywords)
        elif isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == "BaseModel"
                                                    for b in node.bases):
            deferred = any(isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "model_config"
                                                             for t in s.targets) for s in node.body)
        else:
            continue
        if not deferred:
            found.append(node.lineno)
    return found


def test_the_eager_model_finder_finds_each_spelling():
    source = ("class A(BaseModel):\n    x: int\n"
              "class B(BaseModel):\n    model_config = ConfigDict(frozen=True)\n"
              "class C(BaseModel):\n    model_config = ConfigDict(frozen=True, defer_build=True)\n"
              "class D(C):\n    model_config = ConfigDict(extra='allow')\n")
    assert eager_models(source) == [1, 4, 8]


def test_every_model_is_built_at_its_first_use():
    """A command builds the validators of the records it reads, not of all 60 (0.1 to 0.2 s of every
    `list`, `compare` and `report`): `defer_build=True` on every model's configuration."""
    offenders = [f"{path.relative_to(PROJECT)}:{line}" for folder in ("orchestrator", "workloads")
                 for path in sorted((PROJECT / folder).rglob("*.py")) for line in eager_models(path.read_text())]
    assert not offenders, f"give these models ConfigDict(defer_build=True, ...): {offenders}"
