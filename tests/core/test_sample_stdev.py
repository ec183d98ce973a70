"""`sample_stdev.stdev` is `statistics.stdev`, bit for bit (both correctly rounded, on Python 3.11 and
later), on samples of every shape a comparison meets, and those it does not."""

from __future__ import annotations

import math
import statistics
import sys

import numpy as np
import pytest

from orchestrator import sample_stdev

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10's statistics.stdev rounds twice")


def _samples() -> list[list[float]]:
    rng = np.random.default_rng(36)
    samples: list[list[float]] = [[1.0, 2.0], [5.0, 5.0], [0.0, 0.0, 0.0], [0.0, 1e-300], [-3.5, 0.0, 2.25],
                                  [1e300, -1e300], [1.0, 1.0 + 2**-52], [7.0] * 1000 + [7.000000001]]
    for n in (2, 3, 7, 40, 1000, 150_000):
        for scale in (1e-3, 1.0, 1234.5, 1e6):
            samples.append(list(rng.normal(scale * 10, scale, n)))  # times-to-train, epochs, rates
    for _ in range(300):  # mixed signs and magnitudes, repeated values, a few values
        n = int(rng.integers(2, 60))
        values = rng.standard_normal(n) * 10.0 ** rng.integers(-12, 12, n)
        values[rng.random(n) < 0.2] = values[0]
        samples.append(list(values))
    samples.append([float(v) for v in rng.integers(0, 10**6, 5000)])  # whole milliseconds
    return samples


def test_the_sample_standard_deviation_is_statistics_own_bit_for_bit():
    for values in _samples():
        assert sample_stdev.stdev(values).hex() == statistics.stdev(values).hex(), values[:5]


@pytest.mark.parametrize("values", [[1e-320, 0.0, 3e-320], [1e308, -1e308, 0.0], [5e-324, 0.0]])
def test_results_beyond_the_normal_floats_are_statistics_own(values: list[float]):
    assert sample_stdev.stdev(values) == statistics.stdev(values)


@pytest.mark.parametrize("values", [[1.0, math.nan], [math.inf, 1.0], [-math.inf, math.inf, 0.0]])
def test_a_value_not_finite_makes_it_nan_where_statistics_fails(values: list[float]):
    assert math.isnan(sample_stdev.stdev(values))
