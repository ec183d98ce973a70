"""Number types for every bound, target, limit and measured time mltrain reads: finite (no NaN, no
infinity, which YAML spells `.nan`/`.inf` and JSON `NaN`/`Infinity`) and within their range, so a
gate cannot be fooled by a value that compares false with everything."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

Finite = Annotated[float, Field(allow_inf_nan=False)]
"""Any finite number."""
Positive = Annotated[float, Field(allow_inf_nan=False, gt=0)]
"""A finite number above zero (a target, a time limit, a scale)."""
NonNegative = Annotated[float, Field(allow_inf_nan=False, ge=0)]
"""A finite number of zero or more (a duration, a count of something, a percentage)."""
Fraction = Annotated[float, Field(allow_inf_nan=False, ge=-1, le=1)]
"""A finite relative bound: -0.05 is 5 % below (ReFrame's lower/upper thresholds)."""
Percent = Annotated[float, Field(allow_inf_nan=False, ge=0, le=100)]
"""A finite share in percent (an accuracy)."""
TIMEOUT_MAX_MINUTES = 7 * 24 * 60
"""The longest timeout mltrain takes (a week): a larger one (``1e308``: x60 is infinity) would mean never."""
TimeoutMinutes = Annotated[float, Field(allow_inf_nan=False, gt=0, le=TIMEOUT_MAX_MINUTES)]
"""A timeout in minutes: above zero, at most a week."""
