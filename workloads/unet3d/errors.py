"""The unet3d workload's errors: each is shown as one line on stderr and exits with its code."""

from __future__ import annotations

EXIT_BAD_DATA = 2
EXIT_BAD_INPUT = 2


class DataError(Exception):
    """Missing, malformed or inconsistent dataset input; the message names the case or file."""

    exit_code = EXIT_BAD_DATA


class SettingsError(Exception):
    """A setting this machine cannot honour (e.g. bf16 forced on a GPU without native bf16)."""

    exit_code = EXIT_BAD_INPUT
