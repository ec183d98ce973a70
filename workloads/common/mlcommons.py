"""MLCommons' reference implementations imported from a checkout at run time (nothing of them is copied
into this repository), and the stand-ins today's libraries need for what their code imports:

- ``dllogger`` (the training reference's logging backend): a no-op stand-in when absent;
- ``tqdm``: identity when absent;
- ``scipy.signal.gaussian``: moved to ``scipy.signal.windows`` in SciPy 1.13 (both references call it).

    modules = import_from(folder, ("model.unet3d", "runtime.inference"))   # folder put first on sys.path

Used by ``workloads.unet3d.reference`` (the training reference, in this process) and by the inference
reference's runner (tests/inference/kits19_reference.py, in its own process).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterable
from pathlib import Path


def stub_module(name: str) -> types.ModuleType:
    """An empty module ``name`` with a spec (torch._dynamo looks modules up by their spec)."""
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None)
    return module


def shim_scipy_gaussian() -> None:
    """``scipy.signal.gaussian`` where SciPy (1.13 and newer) has it only in ``scipy.signal.windows``."""
    if importlib.util.find_spec("scipy") is None:
        return  # the reference's own import of SciPy then says what is missing
    import scipy.signal
    from scipy.signal import windows

    if not hasattr(scipy.signal, "gaussian"):
        scipy.signal.gaussian = windows.gaussian


def shim_missing_modules() -> None:
    """Stand-ins for what the references import but a current stack may lack (see above)."""
    if importlib.util.find_spec("dllogger") is None:
        dllogger = stub_module("dllogger")

        class _Backend:
            def __init__(self, *args: object, **kwargs: object) -> None:
                pass

        dllogger.StdOutBackend = dllogger.JSONStreamBackend = _Backend
        dllogger.Verbosity = types.SimpleNamespace(DEFAULT=0, VERBOSE=1)
        dllogger.init = dllogger.log = dllogger.flush = dllogger.metadata = lambda *a, **k: None
        sys.modules["dllogger"] = dllogger
    if importlib.util.find_spec("tqdm") is None:
        tqdm = stub_module("tqdm")
        tqdm.tqdm = lambda iterable=None, *args, **kwargs: iterable
        sys.modules["tqdm"] = tqdm
    shim_scipy_gaussian()


def import_from(folder: Path, modules: Iterable[str]) -> list[types.ModuleType]:
    """``modules`` of the reference in ``folder`` (put first on sys.path), the stand-ins in place."""
    shim_missing_modules()
    sys.path.insert(0, str(folder))
    return [importlib.import_module(name) for name in modules]
