"""One module per MLPerf Inference model: its dataset layout, the reference's pre- and post-processing,
and its accuracy script. `find` returns the module object for a model name."""

from __future__ import annotations

from types import ModuleType

from workloads.inference.errors import HarnessError

MODULES = {"resnet50": "resnet50", "retinanet": "retinanet", "ssd-resnet34": "ssd_resnet34", "3d-unet": "unet3d_kits19"}


def find(name: str) -> ModuleType:
    """The module of model ``name`` (its `Model` attribute is what the harness uses)."""
    import importlib

    if name not in MODULES:
        raise HarnessError(f"unknown model {name!r}: one of {', '.join(sorted(MODULES))}")
    return importlib.import_module(f"workloads.inference.models.{MODULES[name]}")
