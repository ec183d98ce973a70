"""The ``mltrain`` command line: thin commands over the domain rooms.

Each module in `orchestrator.commands` registers its verbs with `register(app)`; command modules
import their domain modules inside the command, so `--help` and completion load little.
`main()` is the one place that catches broadly: known errors become one line and their exit
code; a traceback is shown only with -v or MLTRAIN_DEBUG=1.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer
from typer.exceptions import TyperException

from orchestrator import __version__
from orchestrator.errors import EXIT_INTERRUPTED, EXIT_USAGE, MltrainError
from orchestrator.output import Output

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
        callback=_root,
    )
    for name in COMMAND_MODULES:
        importlib.import_module(f"orchestrator.commands.{name}").register(app)
    return app


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    debug = bool(os.environ.get("MLTRAIN_DEBUG")) or any(a in ("-v", "--verbose") for a in args)
    app = build_app()
    try:
        code = app(args=args, prog_name="mltrain", standalone_mode=False)
    except MltrainError as exc:
        Output().error(str(exc))
        if debug:
            raise
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except (KeyboardInterrupt, typer.Abort):
        Output().error("interrupted")
        return EXIT_INTERRUPTED
    except TyperException as exc:  # usage errors: unknown option, missing argument, bad value
        Output().error(" ".join(exc.format_message().replace("Value error, ", "").split()))
        return EXIT_USAGE
    except Exception as exc:  # anything unexpected: one line, a traceback only when asked for
        if debug:
            raise
        Output().error(f"internal error: {type(exc).__name__}: {exc} (run with -v for a traceback)")
        return 1
    return code if isinstance(code, int) else 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
