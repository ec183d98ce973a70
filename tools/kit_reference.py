"""The reference the kit carries (tools/gpu_kit.py): the MLPerf training reference's unet3d folder, checked in
a local checkout or bare mirror of mlcommons/training before anything is downloaded, then copied out of it."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from kit_target import KitError, folder_problem

REFERENCE_PATH = "retired_benchmarks/unet3d/pytorch"


REFERENCE_URL = "https://github.com/mlcommons/training"


def git(args: list[str], what: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise KitError(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-1000:]}", 3)
    return done.stdout


def check_reference(source: str) -> tuple[Path, str]:
    """The repository and commit of a local checkout or bare mirror holding the reference's unet3d."""
    how = ("give a local checkout or bare mirror of mlcommons/training "
           f"(where GitHub is reachable: git clone --mirror {REFERENCE_URL})")
    if re.match(r"^[a-z][a-z0-9+.-]*://|^git@", source):
        raise KitError(f"--reference {source}: a URL; {how}", 2)
    repo = Path(source).expanduser()
    if (problem := folder_problem(repo)) is not None:
        raise KitError(f"--reference {source}: {problem}; {how}", 2)
    probe = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "HEAD^{commit}"], capture_output=True,
                           text=True)
    if probe.returncode != 0:
        raise KitError(f"--reference {source}: not a git repository with a commit; {how}", 2)
    commit = probe.stdout.strip()
    inside = subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{commit}:{REFERENCE_PATH}/model/unet3d.py"],
                            capture_output=True)
    if inside.returncode != 0:
        raise KitError(f"--reference {source}: its commit {commit[:12]} holds no {REFERENCE_PATH}/model/unet3d.py; "
                       "give mlcommons/training at a commit that has the retired unet3d", 2)
    return repo, commit


def copy_reference(repo: Path, commit: str, dest: Path) -> None:
    """The reference's unet3d folder at ``commit``, out of the repository (checkout or bare) into ``dest``."""
    with tempfile.TemporaryDirectory(prefix="mltrain-ref-") as scratch:
        archive = Path(scratch) / "ref.tar"
        git(["-C", str(repo), "archive", "--output", str(archive), commit, REFERENCE_PATH],
            f"git archive of {REFERENCE_PATH}")
        unpacked = Path(scratch) / "unpacked"
        unpacked.mkdir()
        subprocess.run(["tar", "-xf", str(archive), "-C", str(unpacked)], check=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(unpacked / REFERENCE_PATH), dest)
