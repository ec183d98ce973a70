"""pyproject.toml lists the wheel's packages by name (the root's data ships as
``orchestrator.bundled``, which no search would find): the list is every package of the tree, so a
new folder of code cannot be left out of the wheel unsaid."""

from __future__ import annotations

from pathlib import Path

import tomllib

PROJECT = Path(__file__).resolve().parents[2]
BUNDLE = "orchestrator.bundled"


def test_the_listed_packages_are_the_packages_of_the_tree():
    setuptools = tomllib.loads((PROJECT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = [".".join(init.parent.relative_to(PROJECT).parts) for top in ("orchestrator", "workloads")
               for init in (PROJECT / top).rglob("__init__.py")]  # every folder of code, however deep
    listed = setuptools["packages"]
    assert sorted(set(listed) - {BUNDLE}) == sorted(on_disk)
    assert len(listed) == len(set(listed)) and BUNDLE in listed and setuptools["package-dir"] == {BUNDLE: "."}
    root_modules = list(PROJECT.glob("*.py"))
    assert not root_modules, f"the bundle maps the root: these would ship as orchestrator.bundled.*: {root_modules}"
