"""One module per MLPerf Inference model: its dataset layout, the reference's pre- and post-processing,
and its accuracy script. Each model is declared once, by its entry in the harness's ``inference.yaml``
(its module here and its smoke maker); `declared` reads those entries, `find` returns a model's
module and `smoke_maker` the module that makes its smoke model and data."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import yaml

from workloads.inference.errors import HarnessError

DECLARATION = Path(__file__).resolve().parents[1] / "inference.yaml"
MODULE_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
DOTTED_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class Declared:
    """What the harness reads of a model's entry: its module here, and its smoke maker's module."""

    module: str
    smoke: str | None


def declared(path: Path = DECLARATION) -> dict[str, Declared]:
    """Every model ``inference.yaml`` declares, in its order; HarnessError naming a malformed entry."""
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise HarnessError(f"{path}: unreadable ({' '.join(str(exc).split())})") from None
    models = raw.get("models") if isinstance(raw, dict) else None
    if not isinstance(models, dict) or not models:
        raise HarnessError(f"{path}: declares no model (a mapping under 'models')")
    found = {}
    for name, entry in models.items():
        module = entry.get("module") if isinstance(entry, dict) else None
        smoke = entry.get("smoke") if isinstance(entry, dict) else None
        if not isinstance(module, str) or not MODULE_NAME.match(module):
            raise HarnessError(f"{path}: model {name!r}: 'module' must name its module in models/")
        if smoke is not None and (not isinstance(smoke, str) or not DOTTED_NAME.match(smoke)):
            raise HarnessError(f"{path}: model {name!r}: 'smoke' must be a module's dotted name")
        found[str(name)] = Declared(module=module, smoke=smoke)
    return found


def names() -> list[str]:
    """The declared models' names, sorted (what the harness's commands take)."""
    return sorted(declared())


def _entry(name: str) -> Declared:
    models = declared()
    if name not in models:
        raise HarnessError(f"unknown model {name!r}: one of {', '.join(sorted(models))}")
    return models[name]


def find(name: str) -> ModuleType:
    """The module of model ``name`` (its `Model` attribute is what the harness uses)."""
    return importlib.import_module(f"{__name__}.{_entry(name).module}")


def smoke_maker(name: str) -> ModuleType:
    """The module whose ``make(out, *, with_model)`` makes model ``name``'s smoke model and data."""
    entry = _entry(name)
    if entry.smoke is None:
        have = [n for n, e in declared().items() if e.smoke is not None]
        said = " and ".join([", ".join(have[:-1]), have[-1]] if len(have) > 1 else have)
        raise HarnessError(f"{name} has no smoke model ({said or 'none'} {'has' if len(have) == 1 else 'have'} one):"
                           " give --model and --data")
    return importlib.import_module(entry.smoke)
