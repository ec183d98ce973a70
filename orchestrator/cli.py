"""The ``mltrain`` command line: thin commands over the domain modules.

Each module in `orchestrator.commands` registers its verbs with `register(app)`. `main()` is
the one place that catches broadly: known errors become one line and their exit code; a
traceback is shown only with MLTRAIN_DEBUG=1.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer
from typer.exceptions import TyperException

from orchestrator.errors import MltrainError
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
)


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="mltrain",
        help="Run MLPerf-style training benchmarks, score them and compare setups.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name in COMMAND_MODULES:
        importlib.import_module(f"orchestrator.commands.{name}").register(app)
    return app


def main(argv: list[str] | None = None) -> int:
    app = build_app()
    try:
        code = app(args=argv, standalone_mode=False)
    except MltrainError as exc:
        Output().error(str(exc))
        if os.environ.get("MLTRAIN_DEBUG"):
            raise
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except (KeyboardInterrupt, typer.Abort):
        Output().error("interrupted")
        return 130
    except TyperException as exc:  # usage errors: unknown option, missing argument, bad value
        Output().error(" ".join(exc.format_message().split()))
        return 2
    except Exception as exc:  # anything unexpected: one line, a traceback only when asked for
        if os.environ.get("MLTRAIN_DEBUG"):
            raise
        Output().error(f"internal error: {type(exc).__name__}: {exc} (set MLTRAIN_DEBUG=1 for a traceback)")
        return 1
    return code if isinstance(code, int) else 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
