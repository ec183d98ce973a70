"""mltrain reads only regular files (`orchestrator.config.reading.open_regular`): a FIFO given as
qualify.yaml or --references, or among the logs of an import, blocked for good (the import deaf to
Ctrl-C); a folder or a device given as --model was "no such file". Each is now one line, exit 2,
said as what it is. Every child here is bounded by the test's own timeout."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.hardware.stored_runs import fake_log

LIMIT_S = 60


def finished(proc: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        pytest.fail(f"still blocked after {LIMIT_S} s")
    return proc.returncode, err


def _logs(folder: Path) -> Path:
    folder.mkdir()
    for n in range(3):
        (folder / f"result_{n}.txt").write_text(fake_log(n + 1, {}))
    return folder


@pytest.mark.parametrize("name", ["result_3.txt", "scaling.json"])
def test_import_of_a_folder_holding_a_fifo_is_refused_not_blocked(cli_process, tmp_path: Path, name: str):
    logs = _logs(tmp_path / "logs")
    os.mkfifo(logs / name)
    code, err = finished(cli_process("import", str(logs), "--benchmark", "unet3d", "--results", str(tmp_path / "r")))
    assert code == 2 and err.strip().endswith(f"{logs / name}: a FIFO, not a regular file: an import reads only "
                                              "regular files"), err
    assert not any((tmp_path / "r").glob("*imported*")) and not any((tmp_path / "r").glob(".import-*"))


def test_qualify_yaml_or_references_that_are_fifos_are_refused_not_blocked(cli_process, tmp_path: Path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    code, err = finished(cli_process("qualify", "--results", str(tmp_path / "r"),
                                     extra_env={"MLTRAIN_QUALIFY_FILE": str(fifo)}))
    assert code == 2 and err.strip() == f"error: {fifo}: a FIFO, not a regular file", err
    code, err = finished(cli_process("qualify", "--results", str(tmp_path / "r"), "--references", str(fifo)))
    assert code == 2 and err.strip() == f"error: --references {fifo}: a FIFO, not a regular file", err


@pytest.mark.parametrize(("given", "said"), [("folder", "a folder, not a regular file"),
                                             ("/dev/null", "a character device, not a regular file"),
                                             ("fifo", "a FIFO, not a regular file"), ("none.onnx", "no such file")])
def test_a_model_that_is_not_a_regular_file_is_said_as_what_it_is(cli, tmp_path: Path, given: str, said: str):
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    model = given if given.startswith("/") else str(tmp_path / given)
    r = cli("infer", "resnet50", "--model", model, "--data", str(tmp_path / "folder"), "--results", str(tmp_path / "r"))
    assert r.code == 2 and r.err.splitlines()[0] == f"error: --model {model}: {said}", r.err
