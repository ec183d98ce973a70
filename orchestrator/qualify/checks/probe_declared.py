"""The probe's checks as the orchestrator knows them: read as data from the probe's own files, never
imported (the probe is the workloads' side; the import contracts keep the two apart).

    workloads/common/probe/registry.py   CHECKS = ("gemm", ...)   the registration
    workloads/common/probe/gemm.py       DECLARATION = {...}       each check's declaration

Both are Python literals, read with `ast.literal_eval` (no code runs). A check registered outside the
probe's package (a test's) is read the same way from its module's file.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from orchestrator.config.locations import python_root
from orchestrator.errors import ConfigError
from orchestrator.qualify.checks.declaration import Declaration, Needs, Remedies, settings_model
from orchestrator.results.qualification import Remedy

PROBE_PACKAGE = "workloads.common.probe"
"""The probe's package (`micro` runs it as ``python -m`` this)."""


def probe_folder(root: Path | None = None) -> Path:
    return (root or python_root()).joinpath(*PROBE_PACKAGE.split("."))


def _literal(path: Path, name: str) -> Any:
    """The literal assigned to ``name`` at the top of the module at ``path``."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the probe check: {exc}") from None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                raise ConfigError(f"{path}: {name} is not a literal (line {node.lineno}): write it out") from None
    raise ConfigError(f"{path}: no {name} = ... at its top level")


def registered(root: Path | None = None) -> tuple[str, ...]:
    """The probe's registration: its ``registry.CHECKS``."""
    path = probe_folder(root) / "registry.py"
    names = _literal(path, "CHECKS")
    if not isinstance(names, tuple) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{path}: CHECKS is not a tuple of module names")
    return names


def module_file(module: str, root: Path | None = None) -> Path:
    return (root or python_root()).joinpath(*module.split(".")).with_suffix(".py")


def declaration(module: str, root: Path | None = None) -> Declaration:
    """The declaration of the probe check in ``module`` (a dotted module name)."""
    path = module_file(module, root)
    raw = _literal(path, "DECLARATION")
    try:
        needs, remedy = raw.get("needs", {}), raw.get("remedy", {})
        return Declaration(
            name=raw["name"], kind=raw["kind"], runs=raw.get("runs", "probe"), phase="load", settings_at="device",
            needs=Needs(device=needs.get("device", "any"), gpus=int(needs.get("gpus", 0)),
                        nodes=int(needs.get("nodes", 1)), data=bool(needs.get("data", False)),
                        runners=("slurm",) if raw.get("runs") == "fleet" else ()),
            sanity=raw["sanity"], units=dict(raw.get("units", {})), timeout_s=float(raw["timeout_s"]),
            sane={str(k): (float(v[0]), float(v[1])) for k, v in raw.get("sane", {}).items()},
            floors={str(k): (float(v[0]), str(v[1])) for k, v in raw.get("floor", {}).items()},
            repeat=bool(raw.get("repeat", False)), device_bound=bool(raw.get("device_bound", False)),
            remedies=Remedies(wrong=Remedy(remedy["wrong"]) if remedy.get("wrong") else None,
                              slow=Remedy(remedy["slow"]) if remedy.get("slow") else None),
            settings=settings_model(raw["name"], raw.get("settings", {})), module=module,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"{path}: DECLARATION: {type(exc).__name__}: {exc}") from None


def probe_declarations(root: Path | None = None) -> list[Declaration]:
    """Every registered probe check's declaration, in the registration's order."""
    return [declaration(f"{PROBE_PACKAGE}.{name}", root) for name in registered(root)]
