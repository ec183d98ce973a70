"""The ``mltrain`` command line: thin commands over the domain rooms.

Each module in `orchestrator.commands` registers its verbs with `register(app)`; command modules
import their domain modules inside the command, so `--help` and completion load little.
`main()` is the one place that catches broadly: known errors become one line and their exit
code; a traceback is shown only with -v or MLTRAIN_DEBUG=1. It also turns SIGTERM and SIGHUP into
the same orderly stop as Ctrl-C (`orchestrator.signals`), exiting 143, 129 or 130.

Exit codes: 0 a valid result; 1 the benchmark ran, the result is invalid; 2 bad input (nothing run,
nothing written); 3 an infrastructure fault kept a result from being measured; 130/143/129
stopped by SIGINT/SIGTERM/SIGHUP (resumable).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys

import typer
from typer.exceptions import TyperException

from orchestrator import __version__
from orchestrator.errors import EXIT_INFRASTRUCTURE, EXIT_USAGE, MltrainError
from orchestrator.output import Output, stdout_is_closed, stdout_reader_may_leave, tolerate_narrow_encodings
from orchestrator.results.atomic import FAILED_WRITES
from orchestrator.runners import proc
from orchestrator.signals import Stop, Stops, signal_of, stop_on_signals

EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE
"""What a shell reports for a process its pipe's reader left (the work was cut short)."""
TYPER_INTERRUPTED = 130
"""What typer (standalone_mode=False) returns when a KeyboardInterrupt reaches it."""
HELP_OPTIONS = ("-h", "--help")
"""Every command's help, as docker, pytest and hatch take it."""
COMMAND_MODULES = (
    "run",
    "listing",
    "score",
    "import_logs",
    "data",
    "build",
    "clean",
    "sysinfo",
    "compare",
    "report",
    "export",
    "qualify",
    "infer",
)


def _version(value: bool) -> None:
    if value:
        Output().data(f"mltrain {__version__}")
        raise typer.Exit(0)


def _root(
    ctx: typer.Context,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No status lines on stderr (data, warnings, errors only)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Detail lines, and a traceback on internal errors."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Run MLPerf-style training benchmarks, score them and compare setups."""
    ctx.obj = Output(quiet=quiet, verbose=verbose)


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="mltrain",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        callback=_root,
        context_settings={"help_option_names": list(HELP_OPTIONS)},
    )
    for name in COMMAND_MODULES:
        importlib.import_module(f"orchestrator.commands.{name}").register(app)
    return app


def main(argv: list[str] | None = None) -> int:
    args = [_utf8(a) for a in sys.argv[1:]] if argv is None else argv
    debug = bool(os.environ.get("MLTRAIN_DEBUG")) or any(a in ("-v", "--verbose") for a in args)
    tolerate_narrow_encodings()
    if stdout_is_closed():
        Output().error("standard output is closed (>&-): nothing mltrain prints could be read; redirect it to a"
                       " file or to /dev/null")
        return EXIT_USAGE
    with stop_on_signals() as stops:
        return _dispatch(args, debug, stops)


def _utf8(arg: str) -> str:
    """An argument as the user typed it: under a C locale without Python's UTF-8 mode, the bytes of
    a UTF-8 label arrive as surrogate escapes, which no file, index or terminal can take."""
    try:
        return os.fsencode(arg).decode("utf-8")
    except UnicodeDecodeError:
        return arg


def _dispatch(args: list[str], debug: bool, stops: Stops) -> int:
    try:
        app = build_app()  # within: a stop while the commands' modules load is a stop, not a traceback
        code = app(args=args, prog_name="mltrain", standalone_mode=False)
        if code == TYPER_INTERRUPTED and stops.signum is not None:
            # typer returns a KeyboardInterrupt that reached it as 130, whatever the signal, unsaid
            return _interrupted(Stop(stops.signum))
    except MltrainError as exc:
        Output().error(str(exc))
        if exc.details:
            Output().explain(exc.details)
        if debug:
            raise
        return exc.exit_code
    except typer.Exit as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):  # typer turns an interrupt into Exit(130)
            return _interrupted(exc.__cause__)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    except BrokenPipeError:  # the reader left while something wrote past the output object
        with stdout_reader_may_leave():
            raise
        return EXIT_BROKEN_PIPE
    except typer.Abort:
        return _interrupted(KeyboardInterrupt())
    except TyperException as exc:  # usage errors: unknown option, missing argument, bad value
        Output().error(" ".join(exc.format_message().replace("Value error, ", "").split()))
        return EXIT_USAGE
    except OSError as exc:
        if exc.errno not in FAILED_WRITES:
            return _internal(exc, debug, stops)
        Output().error(f"cannot write {exc.filename or 'a file'}: {exc.strerror}")
        if debug:
            raise
        return EXIT_INFRASTRUCTURE
    except Exception as exc:
        return _internal(exc, debug, stops)
    return code if isinstance(code, int) else 0


def _internal(exc: Exception, debug: bool, stops: Stops) -> int:
    """Anything unexpected: one line, a traceback only when asked for. After a stop signal, the
    stop's line and code: a library that caught the `Stop` made it an error of its own."""
    if debug:
        raise exc
    if stops.signum is not None:
        return _interrupted(Stop(stops.signum))
    Output().error(f"internal error: {type(exc).__name__}: {exc} (run with -v for a traceback)")
    return 1


def _interrupted(exc: BaseException) -> int:
    """A stop outside a run (the run loop says how to resume its own): one line, 128 + the signal."""
    signum = signal_of(exc)
    Output().error(f"interrupted by {signal.Signals(signum).name}")
    return 128 + signum


def entry() -> None:
    proc.own_settings()  # before any command imports numpy
    sys.exit(main())


if __name__ == "__main__":
    entry()
