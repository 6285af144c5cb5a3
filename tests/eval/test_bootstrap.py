"""Bootstrap intervals against the normal-theory closed form and their properties."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ropekit.eval.bootstrap import bootstrap_interval, paired_interval


def test_interval_of_a_large_sample_matches_the_normal_closed_form():
    values = np.random.default_rng(1).normal(3.0, 2.0, 400)
    half = 1.959964 * values.std(ddof=1) / math.sqrt(len(values))  # mean ± z·s/√n
    low, high = bootstrap_interval(values)
    assert math.isclose(low, values.mean() - half, abs_tol=0.03) and math.isclose(
        high, values.mean() + half, abs_tol=0.03
    )
    assert bootstrap_interval(values) == (low, high)  # seeded


def test_paired_interval_of_a_constant_shift_is_that_shift():
    first = np.random.default_rng(2).normal(0, 1, 30)
    difference, (low, high) = paired_interval(first + 0.5, first)
    assert math.isclose(difference, 0.5) and math.isclose(low, 0.5) and math.isclose(high, 0.5)
    with pytest.raises(ValueError, match="same samples"):
        paired_interval(first, first[:-1])
    with pytest.raises(ValueError, match="finite"):
        bootstrap_interval([1.0, float("nan")])
