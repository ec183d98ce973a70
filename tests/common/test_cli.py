"""The kit's ``main()`` wrapper and parser (workloads/common/cli.py, errors.py): the contract's exit
codes, one line on stderr, a traceback only for a crash or when asked for; and every command line of
the workloads going through them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from workloads.common.cli import DEBUG_ENV, Parser, run_main
from workloads.common.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    DataError,
    Failure,
    SettingsError,
    WorkloadError,
)

ROOT = Path(__file__).resolve().parents[2]


def raising(exc: BaseException):
    def body() -> int:
        raise exc
    return body


@pytest.mark.parametrize(("exc", "code"), [(WorkloadError("bad"), EXIT_BAD_INPUT), (DataError("bad"), EXIT_BAD_INPUT),
                                           (SettingsError("bad"), EXIT_BAD_INPUT), (Failure("bad"), EXIT_FAILURE)])
def test_a_workload_error_is_one_line_and_its_exit_code(capsys, exc, code):
    assert run_main(raising(exc), prefix="unet3d train", environ={}) == code
    captured = capsys.readouterr()
    assert captured.err == "unet3d train: bad\n" and captured.out == ""


def test_the_line_is_one_line_whatever_the_message(capsys):
    message = "case_00007/imaging.nii.gz: unreadable NIfTI\n  (EOFError: Compressed file ended\nbefore the end)"
    assert run_main(raising(DataError(message)), environ={}) == EXIT_BAD_INPUT
    assert capsys.readouterr().err == ("case_00007/imaging.nii.gz: unreadable NIfTI (EOFError: Compressed file ended "
                                       "before the end)\n")


def test_the_traceback_only_when_asked_for(capsys):
    run_main(raising(SettingsError("bf16 asked for")), prefix="x", environ={DEBUG_ENV: ""})
    assert "Traceback" not in capsys.readouterr().err
    assert run_main(raising(SettingsError("bf16 asked for")), prefix="x", environ={DEBUG_ENV: "1"}) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("x: bf16 asked for\n") and "Traceback" in err and "SettingsError: bf16 asked for" in err


def test_anything_else_is_a_crash_left_to_python():
    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        run_main(raising(RuntimeError("CUDA out of memory")), environ={})
    with pytest.raises(ValueError):  # not bad input unless a workload says so
        run_main(raising(ValueError("a bug")), environ={})


def test_the_body_s_code_is_the_exit_code():
    assert run_main(lambda: None, environ={}) == 0
    assert run_main(lambda: 3, environ={}) == 3


def test_an_interrupt_is_one_line_where_the_command_asks(capsys):
    assert run_main(raising(KeyboardInterrupt()), interrupted="interrupted (run again to resume)",
                    environ={}) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "interrupted (run again to resume)\n"
    with pytest.raises(KeyboardInterrupt):
        run_main(raising(KeyboardInterrupt()), environ={})


def test_usage_errors_are_one_line_in_subcommands_too(capsys):
    parser = Parser(prog="python -m workloads.x.dataset")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check")
    check.add_argument("dir")
    check.add_argument("--workers", type=int)
    for argv in (["check"], ["check", "d", "--workers", "two"], ["nope"], []):
        with pytest.raises(SystemExit) as stop:
            parser.parse_args(argv)
        assert stop.value.code == EXIT_BAD_INPUT
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and err.endswith("(see --help)\n"), err


# Each command line of the workloads, given a bad argument: the contract's one line and exit 2.
# resnet50's and the inference harness's used argparse's own parser, which prints its usage block
# (7 lines for resnet50 train) before the error.
BAD_ARGUMENTS = [
    ["workloads.resnet50.train", "--data", "/nonexistent", "--seed", "one"],
    ["workloads.resnet50.throughput", "--steps", "many"],
    ["workloads.resnet50.dataset", "synthesize"],
    ["workloads.unet3d.train", "--data-dir", "/nonexistent", "--results-dir", "/nonexistent", "--batch-size", "x"],
    ["workloads.unet3d.throughput", "--steps", "many"],
    ["workloads.unet3d.dataset", "check"],
    ["workloads.inference", "--model-name", "resnet50"],
    ["workloads.inference.dataset", "check", "resnet50"],
]


@pytest.mark.parametrize("argv", BAD_ARGUMENTS, ids=[argv[0] for argv in BAD_ARGUMENTS])
def test_every_command_line_says_bad_arguments_in_one_line(argv):
    done = subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
