"""mltrain as a user installs it: a wheel built from this checkout, installed into a fresh virtual
environment, run from a folder outside the checkout with nothing of the checkout on the path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

PROJECT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "seeds.yaml", "orchestrator", "workloads", "docker")
"""What a wheel is built from (a copy, so the build leaves nothing in the checkout)."""
TORCH = "torch==2.13.0"
"""The local CPU wheel (any other torch spec may download gigabytes)."""
TORCH_VERSION = TORCH.split("==")[1]


def build_wheel(folder: Path) -> Path:
    """Build mltrain's wheel from a copy of the checkout's sources, as `pip wheel .` does."""
    source = folder / "source"
    for name in SOURCES:
        origin = PROJECT / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, source / name)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(folder), str(source)], cwd=folder,
        env=user_env(Path(sys.executable).parent))
    (wheel,) = folder.glob("mltrain-*.whl")
    return wheel


def preinstalled(folder: Path, *names: str) -> Path:
    """A site directory holding ``names`` and everything they require, linked from this interpreter's
    installs (torch is the local wheel, TORCH): what a machine's Python holds before mltrain comes, as
    a GPU image's CUDA torch sits outside any venv. A venv made with it (``make_venv(..., base=)``)
    sees these packages as installed, and pip neither installs nor removes them (they lie outside
    its environment); linking them costs nothing, where pip unpacking torch's wheel again costs a minute."""
    folder.mkdir(parents=True)
    wanted, seen = [Requirement(name) for name in names], set()
    while wanted:
        requirement = wanted.pop()
        dist = metadata.distribution(requirement.name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        if key == "torch" and dist.version.split("+")[0] != TORCH_VERSION:
            raise AssertionError(f"this interpreter has torch {dist.version}, not {TORCH}")
        tops = {Path(str(file)).parts[0] for file in dist.files or () if not str(file).startswith("..")}
        for top in tops - {"__pycache__"}:
            origin = Path(dist.locate_file(top))
            if origin.exists() and not (folder / top).exists():
                (folder / top).symlink_to(origin)
        wanted += [r for r in map(Requirement, dist.requires or ())
                   if r.marker is None or r.marker.evaluate({"extra": ""})]
    return folder


def make_venv(folder: Path, *installs: list[str], base: Path | None = None) -> Path:
    """A fresh virtual environment, reading ``base`` (made by ``preinstalled``) after its own
    site-packages when given, with each ``pip install`` argument list applied in turn; its bin/."""
    run([sys.executable, "-m", "venv", str(folder)], cwd=folder.parent)
    bin_dir = folder / "bin"
    if base is not None:
        site = folder / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
        (site / "preinstalled.pth").write_text(f"{base}\n")
    env = user_env(bin_dir)  # with this session's PYTHONPATH, pip would take the checkout for installed
    for args in installs:
        run([str(bin_dir / "python"), "-m", "pip", "install", "-q", *args], cwd=folder.parent, env=env, timeout=900)
    return bin_dir


def user_env(bin_dir: Path, **extra: str) -> dict[str, str]:
    """This environment as a user's shell with the venv activated: nothing of the checkout or of
    the test session (PYTHONPATH, MLTRAIN_*) leaks in."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith("MLTRAIN_")}
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    env.update(extra)
    return env


def run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {result.returncode}:\n{result.stderr[-3000:]}")
    return result
