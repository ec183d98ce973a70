"""mltrain's own process runs with one OpenBLAS thread (`runners.proc.OWN_SETTINGS`): set at the
command line's entry where the user has not set it, before numpy is imported, and never passed to
what mltrain starts (`child_env`), whose environment stays the user's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from orchestrator.runners import proc
from tests.conftest import PROJECT

BLAS = "OPENBLAS_NUM_THREADS"
THREADS_AFTER_NUMPY = "import numpy, os; print(len(os.listdir('/proc/self/task')))"


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This process's environment, as a copy the test may change, without either name."""
    copy = {k: v for k, v in os.environ.items() if k not in (BLAS, proc.OWN_SETTINGS_ENV)}
    monkeypatch.setattr(os, "environ", copy)
    return copy


def test_mltrain_s_own_settings_are_its_own_and_not_passed_on(environ: dict[str, str]):
    proc.own_settings()
    assert environ[BLAS] == "1" and environ[proc.OWN_SETTINGS_ENV] == BLAS
    child = proc.child_env({"EXTRA": "x"})
    assert BLAS not in child and proc.OWN_SETTINGS_ENV not in child and child["EXTRA"] == "x"
    proc.own_settings()  # a second call changes nothing
    assert environ[proc.OWN_SETTINGS_ENV] == BLAS


def test_a_user_s_own_setting_is_kept_and_passed_on(environ: dict[str, str]):
    environ[BLAS] = "4"
    proc.own_settings()
    assert environ[BLAS] == "4" and proc.OWN_SETTINGS_ENV not in environ
    assert proc.child_env({})[BLAS] == "4"


def test_the_command_line_imports_no_numpy_before_its_entry_sets_them():
    loaded = subprocess.run([sys.executable, "-c", "import orchestrator.cli, sys; print('numpy' in sys.modules)"],
                            cwd=PROJECT, capture_output=True, text=True, timeout=120, check=True)
    assert loaded.stdout.strip() == "False"


def test_numpy_starts_one_blas_thread_under_them():
    env = {k: v for k, v in os.environ.items() if k not in (BLAS, proc.OWN_SETTINGS_ENV, "OMP_NUM_THREADS")}

    def threads(setup: str) -> int:
        done = subprocess.run([sys.executable, "-c", setup + THREADS_AFTER_NUMPY], cwd=PROJECT, env=env,
                              capture_output=True, text=True, timeout=120, check=True)
        return int(done.stdout)

    assert threads("from orchestrator.runners import proc; proc.own_settings(); ") == 1
    if len(os.sched_getaffinity(0)) > 1:  # the check of the check: without them, a thread per CPU
        assert threads("") > 1


def test_a_mark_set_by_hand_takes_nothing_else_from_what_mltrain_starts(environ: dict[str, str]):
    environ.update({proc.OWN_SETTINGS_ENV: "PATH,HOME", "PATH": "/usr/bin:/bin", "HOME": "/home/someone"})
    child = proc.child_env({})
    assert child["PATH"].endswith(":/usr/bin:/bin") and child["HOME"] == "/home/someone"
    assert proc.OWN_SETTINGS_ENV not in child
