"""The hardware commands registered in the real CLI entry point (even before cli.py lists them)."""

from __future__ import annotations

import pytest

HARDWARE_COMMANDS = ("sysinfo", "compare", "report", "export")


@pytest.fixture
def hw_cli(cli, monkeypatch: pytest.MonkeyPatch):
    """`cli` from tests/conftest.py with the hardware commands registered."""
    from orchestrator import cli as cli_module

    missing = tuple(name for name in HARDWARE_COMMANDS if name not in cli_module.COMMAND_MODULES)
    monkeypatch.setattr(cli_module, "COMMAND_MODULES", cli_module.COMMAND_MODULES + missing)
    return cli
