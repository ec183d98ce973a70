"""The one error type of the unet3d dataset code: bad input data, shown as one line, exit code 2."""

from __future__ import annotations

EXIT_BAD_DATA = 2


class DataError(Exception):
    """Missing, malformed or inconsistent dataset input; the message names the case or file."""
