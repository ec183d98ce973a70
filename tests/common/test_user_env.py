"""COMPILE=1 in a container run as the host's uid (issue 18 item 8).

mltrain's docker runner starts the workload as the caller's uid, which has no passwd entry in the
image, with HOME set but neither USER nor LOGNAME. torch before 2.5 names its inductor cache
``<tempdir>/torchinductor_<getpass.getuser()>`` unless TORCHINDUCTOR_CACHE_DIR is set, and
``getpass.getuser()`` then raises KeyError: the first compilation crashes. Each run script is run
here in such an environment: no USER, LOGNAME, LNAME, USERNAME; ``id -un`` failing (a stand-in
``id`` on PATH); and, in the Python the script starts (a stand-in interpreter, PYTHON), the passwd
lookup failing. That interpreter does what torch 2.3 does for its cache folder and records it.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ["workloads/unet3d/run_and_time.sh", "workloads/unet3d/throughput.sh", "workloads/resnet50/run_and_time.sh",
           "workloads/resnet50/throughput.sh"]

PROBE = '''
import getpass, json, os, pwd, sys, tempfile

def no_entry(uid):
    raise KeyError(f"getpwuid(): uid not found: {uid}")

pwd.getpwuid = no_entry  # the uid has no passwd entry
record = {"argv": sys.argv[1:], "USER": os.environ.get("USER")}
try:  # torch 2.3, torch/_inductor/utils.py cache_dir(): the name of the inductor cache
    folder = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or os.path.join(
        tempfile.gettempdir(), "torchinductor_" + getpass.getuser())
    os.makedirs(folder, exist_ok=True)
    record["cache"] = folder
except Exception as error:
    record["error"] = f"{type(error).__name__}: {error}"
with open(os.environ["PROBE_OUT"], "a") as out:
    out.write(json.dumps(record) + "\\n")
print(1)  # what `python -m ...nproc` would print, should a script ask
'''


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_uid_without_a_passwd_entry_gets_a_user_and_a_writable_inductor_cache(tmp_path: Path, script: str):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real_id = next(Path(d) / "id" for d in os.environ["PATH"].split(os.pathsep) if (Path(d) / "id").is_file())
    executable(bin_dir / "id", f'#!/bin/bash\nfor a in "$@"; do case $a in -un|-nu|-n) '
                               f'echo "id: cannot find name for user ID $({real_id} -u)" >&2; exit 1;; esac; done\n'
                               f'exec {real_id} "$@"\n')
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    python = executable(bin_dir / "python-standin", f'#!/bin/bash\nexec {sys.executable} {probe} "$@"\n')
    home, scratch = tmp_path / "home", tmp_path / "scratch"
    home.mkdir()
    scratch.mkdir()
    env = {key: value for key, value in os.environ.items()
           if key not in ("USER", "LOGNAME", "LNAME", "USERNAME", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", HOME=str(home), TMPDIR=str(scratch), PYTHON=str(python),
               PROBE_OUT=str(tmp_path / "probe.jsonl"), NPROC="1", DATADIR=str(tmp_path), RESULTS_DIR=str(tmp_path),
               COMPILE="1", RESNET50_SET="compile=true")
    done = subprocess.run(["bash", script, *(["1"] if script.endswith("run_and_time.sh") else [])], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (tmp_path / "probe.jsonl").read_text().splitlines()]
    assert records, "the script started no Python"
    for record in records:
        assert "error" not in record, record["error"]
        assert record["USER"], record
        cache = Path(record["cache"])
        assert cache.is_dir() and os.access(cache, os.W_OK)
        assert scratch in cache.parents  # under the writable TMPDIR, not a guessed path


def test_a_named_user_and_a_chosen_cache_are_left_alone(tmp_path: Path):
    show = 'source workloads/common/user_env.sh; echo "${USER:-unset} ${TORCHINDUCTOR_CACHE_DIR:-unset}"'
    env = {key: value for key, value in os.environ.items()
           if key not in ("USER", "LOGNAME", "LNAME", "USERNAME", "TORCHINDUCTOR_CACHE_DIR")}
    named = subprocess.run(["bash", "-c", show], cwd=ROOT, capture_output=True, text=True, timeout=30,
                           env={**env, "USER": "alice", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "mine")})
    assert named.stdout.split() == ["alice", str(tmp_path / "mine")]
    looked_up = subprocess.run(["bash", "-c", show], cwd=ROOT, capture_output=True, text=True, timeout=30,
                               env={**env, "TMPDIR": str(tmp_path)})
    name = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    assert looked_up.stdout.split() == ["unset", str(tmp_path / f"torchinductor_{name}")]  # the passwd name
